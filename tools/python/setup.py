"""setuptools glue for pyproject.toml: the version and the user-API modules
are read from the top-level CMakeLists.txt (project(... VERSION) and
EPOCHFS_PYTHON_API), the one place they are written."""
import os
import re

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _cmake():
    path = os.environ.get("EPOCHFS_CMAKELISTS", os.path.join(HERE, "..", "..", "CMakeLists.txt"))
    with open(path) as f:
        text = f.read()
    version = re.search(r"project\(epochfs VERSION ([0-9.]+)", text).group(1)
    modules = re.search(r"set\(EPOCHFS_PYTHON_API ([^)]*)\)", text).group(1).split()
    return version, modules


VERSION, API = _cmake()


class UserApiOnly(build_py):
    """Only the modules EPOCHFS_PYTHON_API lists (the instruments live in tools/bench/python)."""

    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir)
                if m[0] != "epochfs" or m[1] in API]


setup(version=VERSION, packages=["epochfs"], cmdclass={"build_py": UserApiOnly})
