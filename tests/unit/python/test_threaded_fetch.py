"""Unit tests for epochfs.threaded_fetch.ThreadedFetch (batched fetch on a thread pool).

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_threaded_fetch
Skips where torch is missing.
"""

import os
import random
import sys
import threading
import time
import unittest

import checkout_paths  # noqa: F401,E402  (this checkout's tools/python and tools/bench/python)

try:
    import torch
    from torch.utils.data import DataLoader, Dataset, RandomSampler

    from epochfs.torch import ThreadedFetch

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
    Dataset = object


class Squares(Dataset):
    """Sample i is (tensor [i, i*i], i); a small random sleep scrambles completion order
    across threads, so only an order-preserving fetch returns the right sequence."""

    def __init__(self, n, fail_at=(), sleep=0.0):
        self.n, self.fail_at, self.sleep = n, set(fail_at), sleep
        self.threads_seen = set()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError("index %d out of range" % i)
        self.threads_seen.add(threading.get_ident())
        if self.sleep:
            time.sleep(random.random() * self.sleep)
        if i in self.fail_at:
            raise KeyError("bad sample %d" % i)
        return torch.tensor([i, i * i]), i


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x[0], y[0]) and x[1] == y[1] for x, y in zip(a, b))


@unittest.skipUnless(HAVE_TORCH, "torch not installed")
class ThreadedFetchTest(unittest.TestCase):
    # Pass: for 200 random index lists (lengths 0..40, repeats allowed) __getitems__ and
    # __getitem__(list) return exactly the plain dataset's samples, in the given order.
    def test_same_samples_and_order_as_plain_dataset(self):
        plain = Squares(100, sleep=0.0005)
        wrapped = ThreadedFetch(plain, threads=4)
        rng = random.Random(1)
        for _ in range(200):
            idx = [rng.randrange(100) for _ in range(rng.randrange(41))]
            want = [plain[i] for i in idx]
            self.assertTrue(same(wrapped.__getitems__(idx), want), idx)
            self.assertTrue(same(wrapped[idx], want), idx)
        self.assertEqual(len(wrapped), 100)
        self.assertTrue(same([wrapped[7]], [plain[7]]))

    # Pass: more than one thread actually ran __getitem__ for a batch with threads=4.
    def test_uses_several_threads(self):
        plain = Squares(64, sleep=0.002)
        ThreadedFetch(plain, threads=4).__getitems__(list(range(64)))
        self.assertGreater(len(plain.threads_seen), 1)

    # Pass: a sample's exception reaches the caller unchanged (type and message), for the
    # first failing index in order, and the wrapper still works afterwards.
    def test_exception_propagates(self):
        wrapped = ThreadedFetch(Squares(50, fail_at={13, 31}, sleep=0.0005), threads=4)
        with self.assertRaisesRegex(KeyError, "bad sample 13"):
            wrapped.__getitems__(list(range(40)))
        with self.assertRaisesRegex(KeyError, "bad sample 31"):
            wrapped[[30, 31, 13]]
        with self.assertRaises(IndexError):
            wrapped.__getitems__([1, 2, 99])
        self.assertTrue(same(wrapped.__getitems__([1, 2]), [Squares(50)[1], Squares(50)[2]]))

    # Pass: threads=1 returns the same as the plain dataset, on the calling thread only.
    def test_threads_one(self):
        plain = Squares(30)
        wrapped = ThreadedFetch(plain, threads=1)
        idx = [5, 3, 29, 0, 3]
        self.assertTrue(same(wrapped.__getitems__(idx), [plain[i] for i in idx]))
        self.assertEqual(plain.threads_seen, {threading.get_ident()})

    # Pass: threads < 1 or not an int is rejected with ValueError.
    def test_bad_threads_rejected(self):
        for bad in (0, -1, 2.0, None):
            with self.assertRaises(ValueError):
                ThreadedFetch(Squares(3), threads=bad)

    def loader_batches(self, ds, workers, batched_path):
        torch.manual_seed(3)
        sampler = RandomSampler(range(len(ds)))
        if batched_path:
            kw = ds.batched_loader_args(sampler, batch_size=8, drop_last=False)
        else:
            kw = {"sampler": sampler, "batch_size": 8}
        return list(DataLoader(ds, num_workers=workers, **kw))

    # Pass: inside a DataLoader with num_workers 0 and 2, via __getitems__ and via the
    # batch-sampler + collate pair, every batch equals the plain dataset's batch for the
    # same RandomSampler seed (same tensors, same labels, same order).
    def test_in_dataloader_workers_0_and_2(self):
        plain = Squares(61, sleep=0.0003)
        want = self.loader_batches(plain, 0, False)
        self.assertEqual(len(want), 8)
        for workers in (0, 2):
            for batched_path in (False, True):
                got = self.loader_batches(ThreadedFetch(plain, threads=3), workers, batched_path)
                self.assertEqual(len(got), len(want), (workers, batched_path))
                for g, w in zip(got, want):
                    self.assertTrue(torch.equal(g[0], w[0]) and torch.equal(g[1], w[1]),
                                    (workers, batched_path))

    # Pass: the DataLoader really fetches through the pool (num_workers=0, so the samples'
    # threads are visible here): via __getitems__ and via the batch-sampler pair, a batch's
    # samples ran on more than one thread, none of them the main thread.
    def test_dataloader_fetch_is_threaded(self):
        for batched_path in (False, True):
            plain = Squares(32, sleep=0.002)
            self.loader_batches(ThreadedFetch(plain, threads=4), 0, batched_path)
            self.assertGreater(len(plain.threads_seen), 1, batched_path)
            self.assertNotIn(threading.get_ident(), plain.threads_seen, batched_path)

    # Pass: an exception in a sample inside a DataLoader worker (num_workers=2) reaches the
    # training loop with the original exception type.
    def test_exception_in_worker_propagates(self):
        ds = ThreadedFetch(Squares(40, fail_at={17}), threads=4)
        loader = DataLoader(ds, batch_size=8, num_workers=2)
        with self.assertRaisesRegex(KeyError, "bad sample 17"):
            list(loader)


if __name__ == "__main__":
    unittest.main()
