"""Locality-aware loading (Yang & Cong, HiPC 2019, "Loc"): LocalityAwareSampler.

In synchronous data-parallel training only the *set* of samples in a global mini-batch
matters, not which learner computes which sample (the summed gradient is the same; per-learner
BatchNorm statistics are the one caveat). So within every global batch each learner takes the
samples already cached on its own node, and only the imbalance crosses the network.

    from epochfs.locality import LocalityAwareSampler
    sampler = LocalityAwareSampler(dataset, global_batch_size=1024, placement=owners)
    loader = DataLoader(dataset, sampler=sampler, batch_size=1024 // world_size)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader: ...

Per epoch:
  1. the global sequence is exactly DistributedSampler's: torch.randperm seeded seed+epoch
     (or range(N) without shuffle), padded by repetition or cut for drop_last, total_size long;
  2. it is cut into global batches of global_batch_size positions. DistributedSampler with a
     DataLoader of batch_size global_batch_size/num_replicas trains step k on positions
     [k*G, (k+1)*G) of that sequence, so the sets are the same. The last global batch holds the
     remaining total_size - k*G positions; each learner's share is then that divided by
     num_replicas (always exact, because total_size is a multiple of num_replicas);
  3. within a global batch every node takes the positions whose sample it owns, dealt round
     robin among its ranks (in batch order); the ranks of one node are then either all at or
     above their share, or all at or below it, so only whole-node surplus ever moves;
  4. balancing (`greedy_transfers`): two max-heaps, surplus and deficit; the largest surplus
     gives min(surplus, deficit) samples to the largest deficit, the remainder is pushed back.
     Every step zeroes at least one side, so there are at most (#surplus + #deficit - 1) <= p-1
     transfers, under twice the minimum possible number of transfers (which is at least
     max(#surplus, #deficit)). The number of moved samples, sum of node surpluses, is the
     minimum any assignment can reach;
  5. positions cached nowhere (owner -1) or owned by a node that runs no rank are the "pool":
     they fill the slots still free afterwards, largest remaining deficit first.
Each learner's samples are yielded in global-sequence order, batch after batch, so
``len(sampler) == num_samples`` exactly like DistributedSampler.

``placement``: a sequence (list, array, tensor) of owner node ids per dataset index (-1:
cached nowhere), or a callable ``epoch -> (version, owners)``, called once per epoch: the map
is pinned for the whole epoch, so all ranks that get the same version agree on every
assignment. The node ids are the daemon's cluster ids (`epochctl peers`); ``node_of_rank``
(sequence or callable) maps a rank to its node, by default ``rank // LOCAL_WORLD_SIZE`` when
that variable is set, else ``rank``.

The algorithm (`assign_global_batch`, `greedy_transfers`) is standard library only; the
sampler needs torch.
"""

import heapq
import math
import os

try:
    import torch
    import torch.distributed as dist
    from torch.utils.data import DistributedSampler as _SamplerBase
except ImportError:  # the pure functions stay usable (epochfs.model imports them)
    torch = None
    dist = None
    _SamplerBase = object

from .order_registration import OrderRegistration

UNCACHED = -1


def greedy_transfers(excess):
    """The paper's two-heap matching. ``excess[i]`` > 0: learner i has that many samples too
    many; < 0: too few. Returns [(src, dst, count)], largest surplus to largest deficit; ties
    broken by the lower learner index (deterministic). Matches min(total surplus, total
    deficit) samples; at most (#surplus + #deficit - 1) transfers."""
    sur = [(-e, i) for i, e in enumerate(excess) if e > 0]
    dfc = [(e, i) for i, e in enumerate(excess) if e < 0]
    heapq.heapify(sur)
    heapq.heapify(dfc)
    out = []
    while sur and dfc:
        ns, s = heapq.heappop(sur)
        nd, d = heapq.heappop(dfc)
        m = min(-ns, -nd)
        out.append((s, d, m))
        if -ns > m:
            heapq.heappush(sur, (ns + m, s))
        if -nd > m:
            heapq.heappush(dfc, (nd + m, d))
    return out


def assign_global_batch(owners, learner_nodes):
    """Assigns the positions of one global batch to learners.

    ``owners[j]``: owner node of the sample at position j of the batch (UNCACHED: nowhere).
    ``learner_nodes[r]``: the node of rank r. ``len(owners)`` must be a multiple of the number
    of learners. Returns (assignment, info): assignment[r] is the sorted list of positions of
    rank r (exactly len(owners) / p each); info = {"local": positions read on their owner node,
    "moved": positions owned by a learner's node but read by another node, "pool": uncached or
    owned by a node without learners, "uncached": owner UNCACHED, "transfers": [(src, dst, n)]}.
    """
    p = len(learner_nodes)
    n = len(owners)
    if p == 0 or n % p:
        raise ValueError("a global batch of %d is not a multiple of %d learners" % (n, p))
    share = n // p
    ranks_of = {}
    for r, node in enumerate(learner_nodes):
        ranks_of.setdefault(node, []).append(r)
    held = [[] for _ in range(p)]       # positions dealt to each rank from its node's samples
    cursor = {node: 0 for node in ranks_of}
    pool = []
    uncached = 0
    for j, o in enumerate(owners):
        rs = ranks_of.get(o)
        if rs is None:
            pool.append(j)
            if o == UNCACHED:
                uncached += 1
            continue
        c = cursor[o]
        held[rs[c % len(rs)]].append(j)
        cursor[o] = c + 1
    keep = [h[:share] for h in held]
    spare = [h[share:] for h in held]  # surplus, in batch order
    excess = [len(h) - share for h in held]
    transfers = greedy_transfers(excess)
    moved = 0
    for s, d, m in transfers:
        give = spare[s][len(spare[s]) - m:]
        del spare[s][len(spare[s]) - m:]
        keep[d].extend(give)
        moved += m
    # Every surplus is placed: total surplus <= total deficit because the pool fills the rest.
    room = [(len(k) - share, r) for r, k in enumerate(keep) if len(k) < share]
    heapq.heapify(room)
    at = 0
    while room:
        nd, r = heapq.heappop(room)
        keep[r].append(pool[at])
        at += 1
        if nd + 1 < 0:
            heapq.heappush(room, (nd + 1, r))
    assert at == len(pool) and all(not s for s in spare)
    for k in keep:
        k.sort()
    info = {"local": n - moved - len(pool), "moved": moved, "pool": len(pool),
            "uncached": uncached, "transfers": transfers}
    return keep, info


def plain_local_count(owners, learner_nodes):
    """Positions of a global batch that a plain DistributedSampler (position j read by rank
    j % p) reads on their owner node."""
    p = len(learner_nodes)
    return sum(1 for j, o in enumerate(owners) if learner_nodes[j % p] == o)


def default_replicas_and_rank(num_replicas, rank):
    """DistributedSampler's defaults (from torch.distributed), or 1 / 0 for whichever is None
    when torch.distributed is not initialized."""
    if num_replicas is None or rank is None:
        if not (dist.is_available() and dist.is_initialized()):
            num_replicas = 1 if num_replicas is None else num_replicas
            rank = 0 if rank is None else rank
    return num_replicas, rank


def _default_node_of_rank(rank):
    lw = os.environ.get("LOCAL_WORLD_SIZE")
    if lw:
        return rank // int(lw)
    return rank


class LocalityAwareSampler(_SamplerBase):
    """DistributedSampler's global batches, each learner taking the samples its node holds.

    Extra keyword-only arguments: ``global_batch_size`` (a multiple of num_replicas; the
    DataLoader's batch_size must be global_batch_size // num_replicas), ``placement`` and
    ``node_of_rank`` (see the module docstring); ``mountpoint`` and ``path_of``: where to
    register each epoch's order of this rank (as ShuffleAwareSampler does; taken from a
    mount_placement placement when not given; without either nothing is registered).
    num_replicas / rank default as in DistributedSampler, or to 1 / 0 when torch.distributed
    is not initialized.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False, *, global_batch_size, placement, node_of_rank=None,
                 mountpoint=None, path_of=None):
        if torch is None:
            raise ImportError("LocalityAwareSampler needs torch")
        num_replicas, rank = default_replicas_and_rank(num_replicas, rank)
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle,
                         seed=seed, drop_last=drop_last)
        g = int(global_batch_size)
        if g <= 0 or g % self.num_replicas:
            raise ValueError("global_batch_size %d is not a positive multiple of num_replicas %d"
                             % (g, self.num_replicas))
        self.global_batch_size = g
        self.local_batch_size = g // self.num_replicas
        self.placement = placement
        if node_of_rank is None:
            node_of_rank = _default_node_of_rank
        if callable(node_of_rank):
            self.learner_nodes = [int(node_of_rank(r)) for r in range(self.num_replicas)]
        else:
            self.learner_nodes = [int(x) for x in node_of_rank]
            if len(self.learner_nodes) != self.num_replicas:
                raise ValueError("node_of_rank has %d entries for %d replicas"
                                 % (len(self.learner_nodes), self.num_replicas))
        self.placement_version = None
        self._pinned = None  # (epoch, version, owners list)
        self._plan = None    # (epoch, per-rank index lists, stats)
        # This rank's order goes to its mount as ShuffleAwareSampler's does, so the daemon
        # fetches the samples moved to this node from their owners ahead of the loader: when
        # a mountpoint is given or the placement came from mount_placement (its .mountpoint).
        mount = mountpoint or getattr(placement, "mountpoint", None)
        self._registration = None
        if mount is not None:
            self._registration = OrderRegistration(
                dataset, mount, path_of or getattr(placement, "path_of", None))

    # -- the global sequence -------------------------------------------------------------
    def global_indices(self):
        """This epoch's padded/cut global sequence, exactly DistributedSampler's before the
        rank stride (len == total_size)."""
        n = len(self.dataset)
        if self.shuffle:
            gen = torch.Generator()
            gen.manual_seed(self.seed + self.epoch)
            indices = torch.randperm(n, generator=gen).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - len(indices)
            if pad <= len(indices):
                indices += indices[:pad]
            else:
                indices += (indices * math.ceil(pad / len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return indices

    def global_batches(self):
        """The epoch's global batches as lists of dataset indices (the last may be shorter)."""
        idx = self.global_indices()
        g = self.global_batch_size
        return [idx[k:k + g] for k in range(0, len(idx), g)]

    def _owners(self):
        if self._pinned is not None and self._pinned[0] == self.epoch:
            return self._pinned[2]
        if callable(self.placement):
            version, owners = self.placement(self.epoch)
        else:
            version, owners = None, self.placement
        if hasattr(owners, "tolist"):
            owners = owners.tolist()
        owners = [int(o) for o in owners]
        if len(owners) != len(self.dataset):
            raise ValueError("placement has %d entries for a dataset of %d"
                             % (len(owners), len(self.dataset)))
        self.placement_version = version
        self._pinned = (self.epoch, version, owners)
        return owners

    def plan(self):
        """(per-rank index lists, stats) of the current epoch; computed once per epoch."""
        if self._plan is not None and self._plan[0] == self.epoch:
            return self._plan[1], self._plan[2]
        owners = self._owners()
        p = self.num_replicas
        per_rank = [[] for _ in range(p)]
        stats = {"epoch": self.epoch, "version": self.placement_version, "samples": 0,
                 "local": 0, "moved": 0, "pool": 0, "uncached": 0, "transfers": 0,
                 "max_transfers": 0, "plain_local": 0, "rank_local": [0] * p}
        for batch in self.global_batches():
            bo = [owners[i] for i in batch]
            assignment, info = assign_global_batch(bo, self.learner_nodes)
            for r, pos in enumerate(assignment):
                node = self.learner_nodes[r]
                out = per_rank[r]
                for j in pos:
                    out.append(batch[j])
                    if bo[j] == node:
                        stats["rank_local"][r] += 1
            stats["samples"] += len(batch)
            for key in ("local", "moved", "pool", "uncached"):
                stats[key] += info[key]
            nt = len(info["transfers"])
            stats["transfers"] += nt
            stats["max_transfers"] = max(stats["max_transfers"], nt)
            stats["plain_local"] += plain_local_count(bo, self.learner_nodes)
        self._plan = (self.epoch, per_rank, stats)
        return per_rank, stats

    def __iter__(self):
        per_rank, _ = self.plan()
        if self._registration is not None:
            self._registration.register(per_rank[self.rank], self.epoch, self.rank)
        return iter(per_rank[self.rank])

    @property
    def last_registration(self):
        """The commit reply of this rank's latest order registration (None: none yet, or no
        mount to register with)."""
        return self._registration.last if self._registration is not None else None

    def stats(self):
        """This epoch's counts over all learners: samples, local (read on the owner node),
        moved (cached on another learner node), pool (uncached or on a node without learners),
        uncached, transfers (learner-to-learner groups; per batch at most p-1; max_transfers
        is the largest), plain_local (what DistributedSampler would read locally), rank_local."""
        return dict(self.plan()[1])

    def local_fraction(self, rank=None):
        """Fraction of this epoch's samples read on their owner node: all learners
        (rank=None) or one rank. Compare plain_local_fraction()."""
        per_rank, s = self.plan()
        if rank is None:
            return s["local"] / s["samples"] if s["samples"] else 0.0
        n = len(per_rank[rank])
        return s["rank_local"][rank] / n if n else 0.0

    def plain_local_fraction(self):
        """The same fraction for a plain DistributedSampler on the same placement."""
        s = self.plan()[1]
        return s["plain_local"] / s["samples"] if s["samples"] else 0.0


def mount_placement(dataset, mountpoint, path_of=None, timeout=60.0):
    """A ``placement`` callable for LocalityAwareSampler that asks the mount (the daemon's
    `placement` admin command: owner node id per file, and the map's version) once per epoch.

    ``path_of(index) -> path`` defaults to ``dataset.samples[index][0]`` (ImageFolder); paths
    are taken relative to ``mountpoint``. A sample the map does not name is UNCACHED. The
    returned callable gives ``(version, owners)``; the sampler pins it for the epoch, and
    ranks can compare ``sampler.placement_version`` to be sure they used the same map. It also
    carries ``mountpoint`` and ``path_of``, so a sampler built on it registers each epoch's
    order with the mount (peer prefetch of the samples moved to the node).
    """
    from . import admin

    if path_of is None:
        items = getattr(dataset, "samples", None) or getattr(dataset, "imgs", None)
        if items is None:
            raise ValueError("the dataset has no .samples or .imgs; pass path_of")
        path_of = lambda i: items[i][0]  # noqa: E731
    mount = os.path.abspath(os.fsdecode(mountpoint))
    prefix = mount.rstrip(os.sep) + os.sep
    rel = []
    for i in range(len(dataset)):
        p = os.path.abspath(os.fsdecode(path_of(i)))
        if not p.startswith(prefix):
            raise ValueError("%r is not under the mount %r" % (p, mount))
        rel.append(p[len(prefix):])

    def placement(epoch):
        version, owners = admin.placement(mount, timeout=timeout)
        return version, [owners.get(r, UNCACHED) for r in rel]

    placement.mountpoint, placement.path_of = mount, path_of  # for the sampler's registration
    return placement
