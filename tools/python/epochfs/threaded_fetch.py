"""ThreadedFetch: fetch and decode the samples of one batch with a thread pool.

The seed paper (Yang & Cong, HiPC 2019) sped up its loader by reading and decoding the
samples of a mini-batch with several threads inside each loader process: file reads and
JPEG decoding (PIL) release the GIL, so a batch's samples can be prepared in parallel
within one DataLoader worker.

    from epochfs.torch import ThreadedFetch
    ds = ThreadedFetch(torchvision.datasets.ImageFolder(root, transform=tf), threads=4)
    loader = DataLoader(ds, batch_size=32, sampler=sampler, num_workers=2)

torch >= 1.13's map-style fetcher calls ``dataset.__getitems__(indices)`` for a batch when the
dataset defines it; ThreadedFetch defines it. For a torch whose fetcher does not, use the
batch-sampler + collate pair instead (works on every torch version):

    loader = DataLoader(ds, **ds.batched_loader_args(sampler, batch_size=32, drop_last=True),
                        num_workers=2)

which passes a BatchSampler as the sampler with ``batch_size=None``, so every fetch is
``ds[list_of_indices]`` (ThreadedFetch.__getitem__ accepts a list) followed by default_collate.

Samples come back in the order of the indices; the first exception raised by a sample (in
index order) propagates unchanged. The pool is created lazily in the process that uses it
(each DataLoader worker gets its own, also after fork) and is not pickled.
"""

import os
from concurrent.futures import ThreadPoolExecutor

from torch.utils.data import BatchSampler, Dataset
from torch.utils.data._utils.collate import default_collate


class ThreadedFetch(Dataset):
    """Wraps a map-style dataset; batched fetches run on ``threads`` threads."""

    def __init__(self, dataset, threads=4):
        if not isinstance(threads, int) or threads < 1:
            raise ValueError("ThreadedFetch: threads must be an int >= 1, got %r" % (threads,))
        self.dataset = dataset
        self.threads = threads
        self._pool = None
        self._pool_pid = None

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        # A list/tuple of indices is a batch (the batch-sampler path, batch_size=None).
        if isinstance(index, (list, tuple)):
            return self.__getitems__(index)
        return self.dataset[index]

    def __getitems__(self, indices):
        indices = list(indices)
        if self.threads == 1 or len(indices) <= 1:
            return [self.dataset[i] for i in indices]
        # Executor.map yields in submission order and re-raises a sample's exception when
        # its result is reached, i.e. the first failing index in order.
        return list(self._executor().map(self.dataset.__getitem__, indices))

    def batched_loader_args(self, sampler, batch_size, drop_last=False, collate_fn=None):
        """DataLoader keyword arguments for the batch-sampler + collate path: one fetch per
        batch of ``sampler``'s indices, collated by ``collate_fn`` (default_collate)."""
        return {"sampler": BatchSampler(sampler, batch_size, drop_last), "batch_size": None,
                "collate_fn": collate_fn or default_collate}

    def _executor(self):
        # A pool's threads do not survive fork: a forked DataLoader worker builds its own.
        if self._pool is None or self._pool_pid != os.getpid():
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="epochfs-fetch")
            self._pool_pid = os.getpid()
        return self._pool

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_pool"] = None
        state["_pool_pid"] = None
        return state

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None and self._pool_pid == os.getpid():
            pool.shutdown(wait=False)
