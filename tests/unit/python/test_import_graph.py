"""The shipped package's modules import each other without a cycle (issue #32: epochfs.locality
and epochfs.torch imported each other). Every import counts, also one inside a function.
Standard library only.

Run: cd tests/unit/python && /usr/bin/python3 -m unittest -v test_import_graph
"""

import ast
import os
import unittest

import checkout_paths

PACKAGE = os.path.join(checkout_paths.REPO, "tools", "python", "epochfs")


def package_imports():
    """{module: set of epochfs modules it imports}, `__init__` left out (every import of a
    submodule runs it; it may import what it re-exports)."""
    modules = {f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py") and f != "__init__.py"}
    graph = {}
    for name in modules:
        with open(os.path.join(PACKAGE, name + ".py")) as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                parts = (node.module or "").split(".")
                if node.level == 0 and parts[0] != "epochfs":
                    continue
                inner = parts[1:] if node.level == 0 else [p for p in parts if p]
                # "from . import admin" / "from epochfs import admin": the names are modules
                names = inner[:1] if inner else [a.name for a in node.names]
                deps |= {n for n in names if n in modules}
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names
                         if a.name.startswith("epochfs.") and a.name.split(".")[1] in modules}
        graph[name] = deps - {name}
    return graph


def find_cycle(graph):
    """One cycle as a list of modules, or None."""
    state = {}

    def visit(n, path):
        state[n] = "open"
        for d in sorted(graph[n]):
            if state.get(d) == "open":
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d, path + [d])
                if found:
                    return found
        state[n] = "done"
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n, [n])
            if found:
                return found
    return None


class ImportGraphTest(unittest.TestCase):
    def test_no_module_of_the_package_imports_itself_back(self):
        graph = package_imports()
        self.assertIn("order_registration", graph["locality"])
        self.assertIn("locality", graph["torch"])
        self.assertNotIn("torch", graph["locality"])
        self.assertIsNone(find_cycle(graph))

    def test_a_cycle_is_found(self):
        self.assertEqual(find_cycle({"a": {"b"}, "b": {"a"}}), ["a", "b", "a"])
        self.assertIsNone(find_cycle({"a": {"b"}, "b": set()}))


if __name__ == "__main__":
    unittest.main()
