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

from torch.utils.data import DistributedSampler

from .locality import LocalityAwareSampler, default_replicas_and_rank  # noqa: F401 (re-exported)
from .order_registration import EpochfsWarning, OrderRegistration, find_mountpoint  # noqa: F401
from .threaded_fetch import ThreadedFetch  # noqa: F401  (re-exported)


class ShuffleAwareSampler(DistributedSampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False, *, mountpoint=None, path_of=None):
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
