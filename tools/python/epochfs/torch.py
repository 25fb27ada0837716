"""ShuffleAwareSampler: a DistributedSampler that tells an epochfs mount the epoch's order.

    from epochfs.torch import ShuffleAwareSampler
    dataset = torchvision.datasets.ImageFolder("/mnt/imagenet/train")
    sampler = ShuffleAwareSampler(dataset, seed=0)   # same arguments as DistributedSampler
    loader = DataLoader(dataset, sampler=sampler, batch_size=256, num_workers=8)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader: ...

It yields exactly the indices torch.utils.data.DistributedSampler yields for the same
arguments and epoch. Each time iteration starts (once per epoch, when the DataLoader starts
its epoch) it sends this rank's upcoming file paths, in order, to the mount (see
epochfs.admin.register_order), so the daemon can prefetch ahead of the loader and evict by
next use. Registration is synchronous (a few 64 KiB messages per 10k files) and best-effort:
any failure emits one EpochfsWarning per sampler and training continues unchanged.

Differences from DistributedSampler:
  - num_replicas / rank left as None while torch.distributed is not initialized (or not
    available) default to 1 / 0 instead of raising, so single-process training works as is.
  - keyword-only ``mountpoint`` (default: the longest prefix of the dataset's first path that
    carries the admin xattr, i.e. the mount root) and ``path_of(index) -> path`` (default:
    ``dataset.samples[index][0]``, else ``dataset.imgs[index][0]``).
"""

import os
import warnings

from torch.utils.data import DistributedSampler

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


class ShuffleAwareSampler(DistributedSampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False, *, mountpoint=None, path_of=None):
        from .locality import default_replicas_and_rank
        num_replicas, rank = default_replicas_and_rank(num_replicas, rank)
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        self._registration = OrderRegistration(dataset, mountpoint, path_of)

    # mountpoint and path_of stay settable after construction, as before OrderRegistration
    mountpoint = property(lambda self: self._registration.mountpoint,
                          lambda self, v: setattr(self._registration, "mountpoint", v))
    path_of = property(lambda self: self._registration.path_of,
                       lambda self, v: setattr(self._registration, "path_of", v))

    @property
    def last_registration(self):
        """The commit reply of the latest successful registration (None until one succeeds)."""
        return self._registration.last

    def __iter__(self):
        indices = list(super().__iter__())
        self._registration.register(indices, self.epoch, self.rank)
        return iter(indices)


from .locality import LocalityAwareSampler  # noqa: E402,F401  (re-exported)
from .threaded_fetch import ThreadedFetch  # noqa: E402,F401  (re-exported)
