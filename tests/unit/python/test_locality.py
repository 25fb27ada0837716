"""Unit tests for epochfs.locality (LocalityAwareSampler and its balancing) and epochfs.model.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_locality
Sampler tests skip where torch is missing; balancing and model tests need only the standard
library (the simulator tests need numpy).
"""

import collections
import itertools
import os
import random
import sys
import unittest

import checkout_paths  # noqa: F401,E402  (this checkout's tools/python and tools/bench/python)

from epochfs import locality  # noqa: E402
from epochfs.locality import UNCACHED, assign_global_batch, greedy_transfers  # noqa: E402

try:
    import torch  # noqa: F401
    from torch.utils.data import DistributedSampler

    from epochfs.locality import LocalityAwareSampler

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

try:
    import numpy  # noqa: F401

    from epochfs import model

    HAVE_NUMPY = True
except ImportError:
    HAVE_NUMPY = False


class _DS:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def _chunks(seq, b):
    return [seq[k:k + b] for k in range(0, len(seq), b)]


# --- balancing ------------------------------------------------------------------------------

def _brute_min_moved(owners, learner_nodes):
    """Minimum, over every assignment with exact shares, of positions owned by a learner node
    but read on another node."""
    p, n = len(learner_nodes), len(owners)
    share = n // p
    nodes = set(learner_nodes)
    best = None
    slots = [r for r in range(p) for _ in range(share)]
    for perm in set(itertools.permutations(slots)):
        cost = sum(1 for j, r in enumerate(perm) if owners[j] in nodes and learner_nodes[r] != owners[j])
        best = cost if best is None else min(best, cost)
    return best


def _min_transfers(excess):
    """Minimum number of (src, dst) groups that zero ``excess`` (sum 0): nonzero entries minus
    the largest number of disjoint zero-sum blocks they split into."""
    vals = [e for e in excess if e]
    if not vals:
        return 0

    def max_blocks(items):
        if not items:
            return 0
        first, rest = items[0], items[1:]
        best = 0
        for k in range(len(rest) + 1):
            for comb in itertools.combinations(range(len(rest)), k):
                if first + sum(rest[i] for i in comb) == 0:
                    left = [rest[i] for i in range(len(rest)) if i not in comb]
                    best = max(best, 1 + max_blocks(left))
        return best

    return len(vals) - max_blocks(vals)


class BalancingTest(unittest.TestCase):
    def test_greedy_matches_everything_within_bounds(self):
        rng = random.Random(1)
        for _ in range(300):
            p = rng.randint(1, 7)
            ex = [rng.randint(-5, 5) for _ in range(p)]
            ex.append(-sum(ex))
            tr = greedy_transfers(ex)
            left = list(ex)
            for s, d, m in tr:
                self.assertGreater(m, 0)
                left[s] -= m
                left[d] += m
            self.assertEqual(left, [0] * len(ex))
            self.assertLessEqual(len(tr), max(0, len(ex) - 1))
            opt = _min_transfers(ex)
            self.assertLessEqual(len(tr), max(0, 2 * opt - 1))  # the 2-approximation

    def test_largest_surplus_goes_to_largest_deficit(self):
        self.assertEqual(greedy_transfers([5, -1, 2, -6]), [(0, 3, 5), (2, 1, 1), (2, 3, 1)])

    def test_matches_brute_force_optimum(self):
        rng = random.Random(7)
        layouts = [[0, 1, 2], [0, 0, 1], [0, 1, 1, 2], [0, 1, 2, 3], [5, 5]]
        cases = 0
        for layout in layouts:
            p = len(layout)
            for share in (1, 2) if p == 4 else (1, 2, 3):
                for _ in range(6):
                    owners = [rng.choice(sorted(set(layout)) + [UNCACHED, 9]) for _ in range(p * share)]
                    assignment, info = assign_global_batch(owners, layout)
                    self.assertEqual(sorted(j for a in assignment for j in a), list(range(p * share)))
                    self.assertEqual([len(a) for a in assignment], [share] * p)
                    self.assertEqual(info["moved"], _brute_min_moved(owners, layout), (owners, layout))
                    self.assertLessEqual(len(info["transfers"]), p - 1)
                    local = sum(1 for r, a in enumerate(assignment) for j in a if owners[j] == layout[r])
                    self.assertEqual(local, info["local"])
                    self.assertEqual(info["pool"], sum(1 for o in owners if o not in layout))
                    cases += 1
        self.assertGreater(cases, 60)

    def test_uncached_fill_spare_slots(self):
        a, info = assign_global_batch([UNCACHED, 0, 0, 0], [0, 1])
        self.assertEqual(info, {"local": 2, "moved": 1, "pool": 1, "uncached": 1,
                                "transfers": [(0, 1, 1)]})
        self.assertEqual([len(x) for x in a], [2, 2])

    def test_rejects_uneven_batch(self):
        with self.assertRaises(ValueError):
            assign_global_batch([0, 1, 0], [0, 1])


# --- the sampler ----------------------------------------------------------------------------

@unittest.skipUnless(HAVE_TORCH, "torch not installed")
class SamplerTest(unittest.TestCase):
    def _samplers(self, n, p, g, placement, **kw):
        return [LocalityAwareSampler(_DS(n), p, r, global_batch_size=g, placement=placement, **kw)
                for r in range(p)]

    def _check(self, n, p, lb, nodes, seed, shuffle, drop_last, epoch):
        rng = random.Random(seed * 1000 + n)
        placement = [rng.choice(nodes + [UNCACHED]) for _ in range(n)]
        learner_nodes = [nodes[r * len(nodes) // p] for r in range(p)]
        kw = dict(seed=seed, shuffle=shuffle, drop_last=drop_last, node_of_rank=learner_nodes)
        ours = self._samplers(n, p, lb * p, placement, **kw)
        plain = [DistributedSampler(_DS(n), p, r, shuffle=shuffle, seed=seed, drop_last=drop_last)
                 for r in range(p)]
        for s in ours + plain:
            s.set_epoch(epoch)
        lists = [list(s) for s in ours]
        plain_lists = [list(s) for s in plain]
        ctx = (n, p, lb, nodes, seed, shuffle, drop_last, epoch)
        # Equal shares: the same length as DistributedSampler, batch by batch.
        for r in range(p):
            self.assertEqual(len(lists[r]), len(plain_lists[r]), ctx)
            self.assertEqual(len(ours[r]), len(plain[r]), ctx)
        # Every global batch equals the plain one as a multiset (padding duplicates included).
        ob = [_chunks(x, lb) for x in lists]
        pb = [_chunks(x, lb) for x in plain_lists]
        self.assertEqual(len({len(x) for x in ob}), 1, ctx)
        for k in range(len(ob[0])):
            self.assertEqual(len({len(x[k]) for x in ob}), 1, ctx)
            mine = collections.Counter(i for r in range(p) for i in ob[r][k])
            theirs = collections.Counter(i for r in range(p) for i in pb[r][k])
            self.assertEqual(mine, theirs, ctx + (k,))
        # Determinism: every rank's own plan agrees with every other rank's.
        plans = [s.plan()[0] for s in ours]
        for r in range(p):
            self.assertEqual(plans[r], plans[0], ctx)
            self.assertEqual(lists[r], plans[0][r], ctx)
        # Every sample once per epoch apart from padding.
        counts = collections.Counter(i for x in lists for i in x)
        if drop_last:
            self.assertTrue(all(c == 1 for c in counts.values()), ctx)
        else:
            self.assertEqual(set(counts), set(range(n)), ctx)
            self.assertEqual(sum(counts.values()) - n, ours[0].total_size - n, ctx)
        st = ours[0].stats()
        self.assertEqual(st["local"] + st["moved"] + st["pool"], st["samples"])
        self.assertEqual(st["samples"], ours[0].total_size)
        self.assertLessEqual(st["max_transfers"], p - 1)

    def test_properties_many_seeds_and_world_sizes(self):
        cases = 0
        for p, nodes in ((1, [0]), (2, [0, 1]), (3, [0, 1, 2]), (4, [0, 1]), (6, [3, 7, 9]),
                         (8, [0, 1, 2, 3]), (5, [0, 1, 2, 3, 4])):
            for n in (1, 7, 53, 200):
                for lb in (1, 3, 8):
                    seed = cases % 5
                    self._check(n, p, lb, nodes, seed, shuffle=cases % 4 != 3,
                                drop_last=cases % 3 == 1, epoch=cases % 2)
                    cases += 1
        self.assertEqual(cases, 84)

    def test_default_node_of_rank_uses_local_world_size(self):
        old = os.environ.get("LOCAL_WORLD_SIZE")
        os.environ["LOCAL_WORLD_SIZE"] = "2"
        try:
            s = LocalityAwareSampler(_DS(10), 4, 3, global_batch_size=4, placement=[0] * 10)
            self.assertEqual(s.learner_nodes, [0, 0, 1, 1])
        finally:
            if old is None:
                del os.environ["LOCAL_WORLD_SIZE"]
            else:
                os.environ["LOCAL_WORLD_SIZE"] = old
        s = LocalityAwareSampler(_DS(10), 4, 3, global_batch_size=4, placement=[0] * 10)
        self.assertEqual(s.learner_nodes, [0, 1, 2, 3])

    def test_callable_placement_is_pinned_per_epoch(self):
        calls = []

        def placement(epoch):
            calls.append(epoch)
            return 40 + epoch, [epoch % 2] * 16

        s = LocalityAwareSampler(_DS(16), 2, 0, global_batch_size=4, placement=placement,
                                 node_of_rank=[0, 1])
        list(s)
        list(s)
        self.assertEqual(calls, [0])
        self.assertEqual(s.placement_version, 40)
        self.assertEqual(s.local_fraction(), 0.5)
        self.assertEqual(s.local_fraction(0), 1.0)
        self.assertEqual(s.local_fraction(1), 0.0)
        s.set_epoch(1)
        list(s)
        self.assertEqual(calls, [0, 1])
        self.assertEqual(s.placement_version, 41)

    def test_rejects_bad_arguments(self):
        with self.assertRaises(ValueError):
            LocalityAwareSampler(_DS(10), 4, 0, global_batch_size=6, placement=[0] * 10)
        s = LocalityAwareSampler(_DS(10), 2, 0, global_batch_size=4, placement=[0] * 9)
        with self.assertRaises(ValueError):
            list(s)

    def test_random_four_node_placement_reads_locally(self):
        """4 nodes x 2 ranks, random (rendezvous-like) placement: the fraction of reads on the
        owner node, beside what a plain DistributedSampler gets."""
        n = 16384
        rng = random.Random(3)
        placement = [rng.randrange(4) for _ in range(n)]
        nodes = [0, 0, 1, 1, 2, 2, 3, 3]
        fractions = {}
        for lb in (8, 32, 64, 128):
            s = LocalityAwareSampler(_DS(n), 8, 0, global_batch_size=8 * lb, placement=placement,
                                     node_of_rank=nodes)
            fractions[lb] = (s.local_fraction(), s.plain_local_fraction())
        sys.stderr.write("\n  4 nodes x 2 ranks, %d samples, random placement:\n" % n)
        for lb, (loc, plain) in fractions.items():
            sys.stderr.write("    local batch %3d: %5.1f%% local (plain DistributedSampler %4.1f%%),"
                             " remote %.1f%% of plain's\n"
                             % (lb, 100 * loc, 100 * plain, 100 * (1 - loc) / (1 - plain)))
        self.assertGreaterEqual(fractions[32][0], 0.90)
        self.assertLessEqual(1 - fractions[32][0], 0.10 * (1 - fractions[32][1]))
        for lb in (8, 64, 128):
            self.assertGreaterEqual(fractions[lb][0], 0.85)


# --- the model ------------------------------------------------------------------------------

@unittest.skipUnless(HAVE_NUMPY, "numpy not installed")
class MountPlacementTest(unittest.TestCase):
    """mount_placement maps the daemon's {path: owner} map onto dataset indices."""

    def test_maps_paths_to_indices_and_unknown_to_uncached(self):
        from epochfs import admin
        calls = []

        def fake(mount, timeout=None):
            calls.append(mount)
            return 42, {"a/x.jpg": 1, "b/y.jpg": 0}

        class DS:
            samples = [("/mnt/d/b/y.jpg", 1), ("/mnt/d/a/x.jpg", 0), ("/mnt/d/c/z.jpg", 2)]

            def __len__(self):
                return 3

        saved = admin.placement
        admin.placement = fake
        try:
            place = locality.mount_placement(DS(), "/mnt/d/")
            self.assertEqual(place(0), (42, [0, 1, UNCACHED]))
            self.assertEqual(calls, ["/mnt/d"])
        finally:
            admin.placement = saved

    def test_rejects_paths_outside_the_mount(self):
        class DS:
            samples = [("/elsewhere/x.jpg", 0)]

            def __len__(self):
                return 1

        with self.assertRaises(ValueError):
            locality.mount_placement(DS(), "/mnt/d")


class ModelTest(unittest.TestCase):
    def test_imbalance_matches_paper_within_one_point(self):
        for lb, paper in ((32, 6.9), (64, 4.8), (128, 3.4)):
            med = model.median_imbalance(lb, learners=64, batches=200, seed=1)
            self.assertLess(abs(100 * med - paper), 1.0, (lb, med))

    def test_simulator_agrees_with_the_sampler_balancing(self):
        import numpy as np
        rng = np.random.default_rng(5)
        for p, per_node in ((4, 1), (8, 2), (12, 4)):
            lb = 16
            owners = rng.integers(0, p // per_node, size=p * lb).tolist()
            nodes = [r // per_node for r in range(p)]
            _, info = assign_global_batch(owners, nodes)
            counts = np.bincount(owners, minlength=p // per_node)
            self.assertEqual(info["moved"], int(model.moved_samples(counts, per_node * lb)))

    def test_analytical_model(self):
        m = model.Inputs(D=1000.0, p=10, V=10.0, R=100.0, U=50.0, a=1.0, N=1000.0, b=0.05)
        self.assertAlmostEqual(model.loading_time(m, "nocache"), 1000 / 100 + 1000 / 500)
        self.assertAlmostEqual(model.loading_time(m, "cache"), 1000 / 10000 * 9 / 10)
        self.assertAlmostEqual(model.loading_time(m, "locality"), 1000 * 0.05 / 10000)
        self.assertAlmostEqual(model.epoch_time(m, "locality"), 10.0)
        self.assertAlmostEqual(model.loading_time(m, "locality", decode_all=True), 0.005 + 2.0)

    def test_cli_paper_tables(self):
        import contextlib
        import io
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            self.assertEqual(model.main(["--paper", "--max-nodes", "16"]), 0)
        text = buf.getvalue()
        self.assertIn("| 32 | 6.9 % |", text)
        self.assertIn("256 nodes x 4 learners", text)
        self.assertIn("| 16 |", text)


if __name__ == "__main__":
    unittest.main()
