"""The benchmark harness of epochfs, apart from the user API (``epochfs.torch``, ``.locality``,
``.admin``, ``.model``, ``.threaded_fetch``), and not installed with it: run from a checkout
(``PYTHONPATH=tools/python``) by the benchmark scripts.

``bench_env``            the throttled source, case mounts and cpu priority of tools/bench/train-bench
                         (a client of ``epochbench env``, docs/PERFORMANCE.md)
``report``               the pictures of ``tools/bench/train-bench report``
``shards``               WebDataset tar shards of an ImageFolder (``train-bench gen --shards``)
``locality_bench``       ``tools/bench/cluster-bench locality``
``peer_prefetch_bench``  ``tools/bench/cluster-bench peer-prefetch``
``capacity_bench``       ``tools/bench/cluster-bench capacity``

The cluster lab, ``epochfs_lab`` (tools/bench/cluster-lab, docs/LAB.md), is harness too.
"""
