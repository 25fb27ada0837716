"""Puts this checkout's Python on sys.path when PYTHONPATH does not already carry it: the
shipped API (tools/python: epochfs) and the instruments (tools/bench/python: epochfs_bench,
epochfs_lab). Imported first by every test here, so each runs as ctest runs it or alone:

    cd tests/unit/python && /usr/bin/python3 -m unittest -v test_locality
"""
import os
import sys

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
for _dir in (os.path.join(REPO, "tools", "bench", "python"), os.path.join(REPO, "tools", "python")):
    if _dir not in sys.path:
        sys.path.insert(0, _dir)
