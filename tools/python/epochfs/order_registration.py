"""OrderRegistration: how a sampler tells an epochfs mount each epoch's order, shared by
epochfs.torch.ShuffleAwareSampler and epochfs.locality.LocalityAwareSampler. Both import it from
here, so the dependency between the two runs one way: epochfs.torch imports epochfs.locality
(and re-exports LocalityAwareSampler), never the reverse.

The rank's dataset paths, relative to the mount, go to the daemon in the order the rank will
read them (epochfs.admin.register_order). The mount is given, or found once from the first
sample's path: the longest prefix carrying the admin xattr. Best-effort: a failure warns once
per sampler (EpochfsWarning) and training goes on. Standard library only.
"""

import os
import warnings

from . import admin


class EpochfsWarning(RuntimeWarning):
    """Emitted (once per sampler) when the order could not be registered with the mount."""


def _default_path_of(dataset):
    for attr in ("samples", "imgs"):
        items = getattr(dataset, attr, None)
        if items is not None:
            return lambda i, items=items: items[i][0]
    return None


def find_mountpoint(path):
    """The longest prefix of ``path`` (a directory or a file in it) that carries the epochfs
    admin xattr, or None. Walks up from the path's directory; symlinks in the path are kept
    (the xattr lookup follows them), so the result is a prefix of os.path.abspath(path)."""
    d = os.path.dirname(os.path.abspath(os.fsdecode(path)))
    while True:
        try:
            admin._get_admin_xattr(d)
            return d
        except OSError:
            pass
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


class _Relativizer:
    """Maps paths to their form relative to a mountpoint; ValueError for paths outside it."""

    def __init__(self, mountpoint):
        mount = os.path.abspath(os.fsdecode(mountpoint))
        self.mount = mount
        self.prefix = mount if mount.endswith(os.sep) else mount + os.sep

    def __call__(self, path):
        p = os.fsdecode(path)  # bytes -> str with surrogate escapes; admin sends those as b64
        # Fast path for the normal case: an absolute, already normalized path under the mount.
        if p.startswith(self.prefix) and "/." not in p and "//" not in p:
            return p[len(self.prefix):]
        a = os.path.abspath(p)
        if not a.startswith(self.prefix) or len(a) == len(self.prefix):
            raise ValueError("%r is not under the mount %r" % (p, self.mount))
        return a[len(self.prefix):]


class OrderRegistration:
    """A sampler's registration of each epoch's order with the mount (epochfs.admin.register_order):
    the rank's dataset paths, relative to the mount, in the order it will read them. The mount
    is `mountpoint`, or found once from the first sample's path. It never breaks training:
    a failure warns once (EpochfsWarning) and training goes on without order-aware prefetching.
    ``last`` is the commit reply of the latest successful registration (None until one)."""

    def __init__(self, dataset, mountpoint=None, path_of=None):
        self.dataset, self.mountpoint, self.path_of = dataset, mountpoint, path_of
        self.last = None
        self._warned = False
        self._found_mountpoint = None

    def register(self, indices, epoch, rank, stacklevel=3):
        try:
            path_of = self.path_of or _default_path_of(self.dataset)
            if path_of is None:
                raise admin.EpochfsError(
                    "the dataset has no .samples or .imgs; pass path_of=callable(index) -> path")
            mount = self.mountpoint or self._found_mountpoint
            if mount is None:
                if len(self.dataset) == 0:
                    return
                mount = self._found_mountpoint = find_mountpoint(path_of(0))
                if mount is None:
                    raise admin.EpochfsError(
                        "%r is not on an epochfs mount (no %s on any parent directory)"
                        % (path_of(0), admin.ADMIN_XATTR))
            rel = _Relativizer(mount)
            paths = [rel(path_of(i)) for i in indices]
            self.last = admin.register_order(mount, paths, epoch=epoch, rank=rank, start=0)
        except Exception as e:  # never break training
            if not self._warned:
                self._warned = True
                warnings.warn("epochfs: could not register this epoch's order (%s); training "
                              "continues without order-aware prefetching" % (e,),
                              EpochfsWarning, stacklevel=stacklevel)
