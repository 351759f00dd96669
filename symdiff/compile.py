"""Generated source -> a Python function, kept in a file and in linecache so tools show it."""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import linecache
import math

import numpy as np

from . import cache, runtime
from .errors import SymdiffError


def compile_source(source: str, name: str, names: dict, np_alias: str = "np"):
    """Compile ``source`` (which defines ``name``) and return ``(function, globals dict)``.

    The globals hold NumPy under ``np_alias``, the runtime helpers, and every other free
    name of the source as ``names`` maps it (the objects the user's code referred to). The
    source is written to a private file named from its hash (``grad_f-<hash>.py``, in the
    cache or a temporary folder), which CPython's own traceback printer reads, and
    registered in ``linecache`` under that name, which ``inspect.getsource``, pdb and the
    ``traceback`` module read.
    """
    digest = hashlib.sha256(source.encode()).hexdigest()
    # Without a file (none could be written), linecache alone still serves most tools.
    filename = cache.code_file(name, digest, source) or f"<symdiff {name} {digest[:12]}>"
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    code = builtins.compile(source, filename, "exec")
    globs = {"__name__": "symdiff.generated", "__builtins__": builtins}
    for free in sorted(free_names(source)):
        if free == np_alias:
            globs[free] = np
        elif hasattr(runtime, free) and free.startswith("_") or free == "SymdiffError":
            globs[free] = getattr(runtime, free)
        elif free in names:
            globs[free] = names[free]
        elif free == "stop_gradient":  # (a tangent program keeps it, to be read again)
            globs[free] = runtime.stop_gradient
        elif free == "math":  # (the float path's, where the function has no math of its own)
            globs[free] = math
        elif free == "scipy":  # (a derivative printed as SciPy's: see rules._SciPy)
            globs[free] = importlib.import_module("scipy")
            importlib.import_module("scipy.special")
    exec(code, globs)
    fn = globs.get(name)
    if fn is None:  # pragma: no cover - emit always defines it
        raise SymdiffError(f"generated source does not define {name}")
    return fn, globs


def free_names(tree, skip="") -> set[str]:
    """The names ``tree`` (an ast or source text) reads but does not bind.

    A flat scope analysis, good enough for generated code and for the plain functions
    symdiff differentiates.
    """
    tree = ast.parse(tree) if isinstance(tree, str) else tree
    loads, stores = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (stores if isinstance(node.ctx, ast.Store) else loads).add(node.id)
        elif isinstance(node, ast.arg):
            stores.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node is not tree:
            stores.add(node.name)
    return loads - stores - {skip}
