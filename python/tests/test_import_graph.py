"""The modules of the ``beton`` package import each other without a cycle: neither through the
imports that run when a module loads, nor through those inside functions (a function-level
import that only hides a cycle breaks as soon as it is moved to the top). Imports for the type
checker only (``if TYPE_CHECKING:``) never run and do not count."""

import ast
import importlib.util
import os
import subprocess
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(__file__), "..", "beton")


def _modules():
    """``{module name: its source file}`` of the package (None for the native module)."""
    root = os.path.dirname(os.path.abspath(PACKAGE))
    modules = {}
    for folder, _, files in os.walk(os.path.abspath(PACKAGE)):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py"):
                module = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                modules[module.removesuffix(".__init__")] = path
            elif name.endswith((".so", ".pyi")):
                modules.setdefault(os.path.relpath(os.path.join(folder, name.split(".")[0]), root)
                                   .replace(os.sep, "."), None)
    return modules


def _imports(path, module, modules, in_functions):
    """The package's modules that ``module`` imports."""
    found = set()

    def targets(base, names):
        if names is None:
            return [base] if base in modules else []
        return [f"{base}.{n}" if f"{base}.{n}" in modules else base for n in names
                if f"{base}.{n}" in modules or base in modules]

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if in_function and not in_functions:
                return
            if isinstance(child, ast.Import):
                for alias in child.names:
                    found.update(targets(alias.name, None))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:  # relative: from the module's package, up level - 1 packages
                    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
                    base = ".".join(package[:len(package) - child.level + 1] + ([base] if base else []))
                found.update(targets(base, [alias.name for alias in child.names]))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    if path is not None:
        with open(path, encoding="utf-8") as f:
            visit(ast.parse(f.read()), False)
    found.discard(module)
    return found


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan's algorithm, as
    ``scripts/module-cycles.py`` finds those of a Rust crate's files)."""
    path = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "module-cycles.py")
    spec = importlib.util.spec_from_file_location("module_cycles", path)
    module_cycles = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module_cycles)
    return [c for c in module_cycles.strongly_connected(sorted(graph), graph) if len(c) > 1]


@pytest.mark.parametrize("in_functions", [False, True], ids=["module level", "with function-level imports"])
def test_no_import_cycles(in_functions):
    modules = _modules()
    assert "beton.dataset" in modules and "beton.writer" in modules and "beton._native" in modules
    graph = {m: _imports(p, m, modules, in_functions) for m, p in modules.items()}
    assert "beton.dataset" in graph["beton.writer"]  # the graph sees imports
    cycles = _cycles(graph)
    described = ["; ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) for c in cycles]
    assert not cycles, f"import cycles: {described}"


def test_import_beton_and_a_query_import_neither_numpy_nor_ffcvs_api(tmp_path):
    """``import beton``, ``beton.open`` and ``ds.where`` import neither numpy nor FFCV's API
    (``beton/_numpy.py``: numpy's BLAS threads would share a new process's first query's cores);
    FFCV's names still come from ``beton`` when asked for, and ``ds[i]`` reads values."""
    from beton.fields import FloatField, IntField
    from beton.writer import DatasetWriter

    path = str(tmp_path / "small.beton")
    DatasetWriter(path, {"label": IntField(), "score": FloatField()}).from_indexed_dataset(
        [(i, i / 10) for i in range(100)])
    code = f"""
import sys, beton
ds = beton.open({path!r})
rows = ds.where("label < 10 AND score > 0.5")
print(len(rows), sorted(m for m in ("numpy", "beton.fields", "beton.loader", "beton.writer", "beton.reader")
                         if m in sys.modules))
from beton import DatasetWriter, InvalidDecoderError, Loader
print(Loader.__name__, DatasetWriter.__name__, InvalidDecoderError.__name__, beton.fields.IntField.__name__,
      beton.transforms.__name__, ds[7]["label"], "numpy" in sys.modules)
try:
    beton.no_such_name
except AttributeError as e:
    print(e)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["4 []", "Loader DatasetWriter InvalidDecoderError IntField beton.transforms 7 True",
                   "module 'beton' has no attribute 'no_such_name'"]
