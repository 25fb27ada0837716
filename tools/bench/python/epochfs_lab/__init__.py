"""The cluster lab (tools/bench/cluster-lab, docs/LAB.md): N epochfs nodes on one Linux host that look
like a cluster. Benchmark harness, apart from the user API and not installed with it: run from a
checkout (``PYTHONPATH=tools/python``). Importing the package imports none of its modules.

``lab``         ``Lab``: ``up`` (makes the lab, starts the daemons), ``load``, ``status``
``down``        removes everything a lab made, from its state file
``state``       the state file (DIR/state.json)
``source``      the shared source: an ext4 image on a read-only loop device
``cgroup``      per node memory and cpu limits; the source's shared read limit
``net``         the bridge, per node a network namespace, veth and tbf; link counters
``node``        a node's namespaces, running a command in it, its daemon
``slurm``       Slurm on the nodes (``up --slurm``)
``fault``       ``cluster-lab fault``: cut, restore, kill, freeze, thaw
``workload``    datasets, the nodes' readers and the counters an epoch is judged by
``reader``      a data loader's reads, run inside a node (``python3 -m epochfs_lab.reader``)
``ranks``       the ranks of ``run`` and ``paper``: reader processes kept across epochs
``capacity``    ``cluster-lab capacity``
``bench``       ``cluster-lab bench``: peer fetch against a link, beside ``ucx_perftest``
``paper``       ``cluster-lab run`` and ``cluster-lab paper``: the seed paper's experiment
``paper_plot``  the table and pictures of ``cluster-lab paper``'s JSON
``paper_model`` the model's figure per epoch of ``cluster-lab paper``: the I/O terms and D/U1
``memory``      what the nodes' memory did in an epoch: OOM kills, peaks, the watcher's shrinks
``demo``        ``tools/demo --cluster``
``cli``         the command line of tools/bench/cluster-lab
``util``        the error type, logging, rates and sizes, small file helpers
"""
