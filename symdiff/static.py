"""A Python file's path -> its top-level functions and module-level names, read without running it.

The CLI differentiates the functions of a file it must not execute. Imports are resolved by
importing the modules named (numpy, math, ...), never the file itself; module-level
constants are evaluated from their syntax (literals, arithmetic, and NumPy constructors of
literals); every ``def`` becomes a ``parse.FunctionSource``. A name that cannot be resolved
this way is recorded with the reason, so a function that reads it gets a located error.
"""

from __future__ import annotations

import ast
import importlib
import math
import os
import sys
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from . import rules
from .errors import Problem, SymdiffError
from .parse import MISSING, FunctionSource, Namespace, Source

# A constant larger than this (elements of an array, digits of an integer) is not built.
_MAX_SIZE = 10**7


@dataclass(frozen=True)
class Unresolved:
    """A module-level name whose value is only known by running the file: where, and why."""

    line: int
    col: int
    reason: str


@dataclass(frozen=True)
class Module:
    """A file read statically.

    ``path`` is as given, ``source.filename`` the absolute path (as in co_filename);
    ``functions`` are its top-level ``def``s in file order; ``namespace`` resolves the
    names they read; ``imports`` holds, per imported name, the statement that binds it
    (for exporting); ``unresolved`` the names that could not be resolved.
    """

    path: str
    source: Source
    functions: Mapping[str, FunctionSource]
    namespace: Namespace
    imports: Mapping[str, str]
    unresolved: Mapping[str, Unresolved]


def read_module(path: str) -> Module:
    """Read the file at ``path`` without running it; raise SymdiffError if it does not parse.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    ...     _ = f.write("import numpy as np\\nSCALE = 2.0\\ndef f(x):\\n    return SCALE * x\\n")
    >>> m = read_module(f.name)
    >>> list(m.functions), m.namespace.lookup("SCALE"), m.namespace.lookup("np") is np
    (['f'], 2.0, True)
    >>> os.remove(f.name)
    """
    with tokenize.open(path) as fp:  # honours a coding cookie, as linecache does
        lines = fp.readlines()
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # as linecache does: the lines must match a live function's
    # Named by its absolute path, as a function imported from it is (co_filename): the
    # generated docstring, which names it, is then the same text as grad() gives.
    source = Source(os.path.abspath(path), tuple(lines))
    try:
        tree = ast.parse("".join(lines), source.filename)
    except SyntaxError as e:
        problem = Problem(source.filename, e.lineno or 1, e.offset or 1, e.msg,
                          (e.text or "").rstrip("\n"))
        raise SymdiffError(problems=(problem,)) from None
    reader = _Reader(path, source)
    with script_path(path):
        for stmt in tree.body:
            reader.statement(stmt)
    return Module(path, source, reader.functions, reader.namespace, reader.imports,
                  reader.unresolved)


def unresolved_problems(fs: FunctionSource, module: Module) -> list[Problem]:
    """A located problem where ``fs`` reads (in its body or defaults) an unresolved name.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    ...     _ = f.write("W = open('w').read()\\ndef f(x):\\n    return W * x\\n")
    >>> m = read_module(f.name)
    >>> [p.col for p in unresolved_problems(m.functions["f"], m)]
    [12]
    >>> os.remove(f.name)
    """
    local = {a.arg for a in ast.walk(fs.node.args) if isinstance(a, ast.arg)}
    for node in ast.walk(fs.node):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            local.add(node.id)
    a = fs.node.args
    read = [*a.defaults, *[d for d in a.kw_defaults if d is not None], *fs.node.body]
    problems = []
    for tree in read:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id not in local and (
                    node.id in module.unresolved):
                message, hint = unresolved_message(node.id, module.unresolved[node.id])
                problems.append(module.source.problem(node, message, hint))
    return problems


def unresolved_message(name: str, u: Unresolved) -> tuple[str, str]:
    """What to say where an unresolved name is read: the message and the hint."""
    return (f"{name!r} is set at module level (line {u.line}) by code symdiff does not run "
            f"when it reads a file: {u.reason}",
            "numbers, literals, arithmetic on them, and NumPy constructors of literals "
            "(np.array([...]), np.zeros((3, 4))); or use grad() in Python")


class script_path:
    """Put the file's directory first on sys.path while its imports are resolved, as
    ``python FILE`` would, so that a module next to it is found."""

    def __init__(self, path):
        self.dir = os.path.dirname(os.path.abspath(path))

    def __enter__(self):
        sys.path.insert(0, self.dir)

    def __exit__(self, *exc):
        if sys.path and sys.path[0] == self.dir:
            del sys.path[0]


class _NotConstant(Exception):
    pass


class _Reader:
    def __init__(self, path, source):
        self.path = path
        self.source = source
        self.globals: dict[str, object] = {"__name__": "__symdiff_static__", "__file__": path}
        self.namespace = Namespace(self.globals)
        self.functions: dict[str, FunctionSource] = {}
        self.imports: dict[str, str] = {}
        self.unresolved: dict[str, Unresolved] = {}

    # --- binding names ---

    def bind(self, name, value, import_text=None):
        self.globals[name] = value
        self.unresolved.pop(name, None)
        self.functions.pop(name, None)
        if import_text is None:
            self.imports.pop(name, None)
        else:
            self.imports[name] = import_text

    def unbind(self, name, node, reason):
        self.globals.pop(name, None)
        self.functions.pop(name, None)
        self.imports.pop(name, None)
        self.unresolved[name] = Unresolved(node.lineno, node.col_offset + 1, reason)

    # --- statements ---

    def statement(self, stmt):
        match stmt:
            case ast.Import():
                for alias in stmt.names:
                    self.import_module(alias, stmt)
            case ast.ImportFrom():
                for alias in stmt.names:
                    self.import_from(alias, stmt)
            case ast.FunctionDef():
                fs = FunctionSource(stmt.name, stmt, self.source, self.namespace)
                self.bind(stmt.name, fs)
                self.functions[stmt.name] = fs
            case ast.Assign(targets=[ast.Name(id=name)], value=value):
                self.assign(name, value, stmt)
            case ast.Assign(targets=[ast.Tuple(elts=targets) | ast.List(elts=targets)],
                            value=ast.Tuple(elts=values) | ast.List(elts=values)) if (
                    len(targets) == len(values) and all(isinstance(t, ast.Name)
                                                        for t in targets)):
                try:  # evaluate every right-hand side first: A, B = B, A swaps
                    evaluated = [self.constant(v) for v in values]
                except _NotConstant as e:
                    for t in targets:
                        self.unbind(t.id, stmt, str(e))
                    return
                for t, v in zip(targets, evaluated, strict=True):
                    self.bind(t.id, v)
            case ast.AnnAssign(target=ast.Name(id=name), value=value) if value is not None:
                self.assign(name, value, stmt)
            case ast.AugAssign(target=ast.Name(id=name), op=op, value=value):
                load = ast.copy_location(ast.Name(name, ast.Load()), stmt.target)
                self.assign(name, ast.copy_location(ast.BinOp(load, op, value), stmt), stmt)
            case ast.Try() | ast.TryStar():
                # try: import x / except ImportError: ... -- the common optional import.
                for s in stmt.body:
                    self.statement(s)
                for s in [*stmt.orelse, *stmt.finalbody]:
                    self.statement(s)
            case ast.Expr() | ast.Pass() | ast.Assert():
                pass  # no name is bound (a docstring, a print call)
            case _:
                kind = _KINDS.get(type(stmt), type(stmt).__name__)
                for name in _bound_names(stmt):
                    self.unbind(name, stmt, kind)

    def import_module(self, alias, stmt):
        name = alias.asname or alias.name.partition(".")[0]
        text = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
        try:
            module = importlib.import_module(alias.name)
        except Exception as e:  # noqa: BLE001 - any failure of an import is reported
            self.unbind(name, stmt, f"import {alias.name} failed: {type(e).__name__}: {e}")
            return
        if not alias.asname:
            module = sys.modules[alias.name.partition(".")[0]]
        self.bind(name, module, text)

    def import_from(self, alias, stmt):
        name = alias.asname or alias.name
        if stmt.level:
            self.unbind(name, stmt, "a relative import, which needs the file's package")
            return
        if alias.name == "*":
            try:
                module = importlib.import_module(stmt.module)
            except Exception:  # noqa: BLE001 - nothing is known of the names it would bind
                return
            public = getattr(module, "__all__", None) or [
                n for n in vars(module) if not n.startswith("_")]
            for n in public:
                if hasattr(module, n):
                    self.bind(n, getattr(module, n), f"from {stmt.module} import {n}")
            return
        text = f"from {stmt.module} import {alias.name}" + (
            f" as {alias.asname}" if alias.asname else "")
        try:
            module = importlib.import_module(stmt.module)
            try:
                value = getattr(module, alias.name)
            except AttributeError:
                value = importlib.import_module(f"{stmt.module}.{alias.name}")
        except Exception as e:  # noqa: BLE001 - any failure of an import is reported
            self.unbind(name, stmt, f"{text} failed: {type(e).__name__}: {e}")
            return
        self.bind(name, value, text)

    def assign(self, name, value, stmt):
        try:
            self.bind(name, self.constant(value))
        except _NotConstant as e:
            self.unbind(name, stmt, str(e))

    # --- constant expressions ---

    def constant(self, node):
        """The value of a constant expression, computed without running any user code."""
        match node:
            case ast.Constant(value=v):
                return v
            case ast.Tuple(elts=elts):
                return tuple(self.constant(e) for e in elts)
            case ast.List(elts=elts):
                return [self.constant(e) for e in elts]
            case ast.Dict(keys=keys, values=values) if None not in keys:
                return {self.constant(k): self.constant(v)
                        for k, v in zip(keys, values, strict=True)}
            case ast.Name(id=name):
                return self.value_of(name, node)
            case ast.Attribute():
                obj = self.reference(node)
                if isinstance(obj, _DATA) or obj is None or _is_dtype(obj):
                    return obj
                raise _NotConstant(f"{ast.unparse(node)} is not a number")
            case ast.UnaryOp(op=ast.USub() | ast.UAdd() as op, operand=operand):
                v = _number(self.constant(operand), node)
                return -v if isinstance(op, ast.USub) else +v
            case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINOPS:
                a = _number(self.constant(left), node)
                b = _number(self.constant(right), node)
                _guard(op, a, b)
                try:
                    return _BINOPS[type(op)](a, b)
                except (ArithmeticError, ValueError, TypeError) as e:
                    raise _NotConstant(f"{ast.unparse(node)} fails: {e}") from None
            case ast.Call(func=func, args=args, keywords=keywords):
                fn = self.reference(func)
                if not _safe_call(fn):
                    raise _NotConstant(f"a call of {ast.unparse(func)}")
                if any(isinstance(a, ast.Starred) for a in args) or any(
                        k.arg is None for k in keywords):
                    raise _NotConstant("a call with * or ** arguments")
                pos = [self.constant(a) for a in args]
                kw = {k.arg: self.constant(k.value) for k in keywords}
                _guard_call(fn, pos, kw)
                try:
                    return fn(*pos, **kw)
                except Exception as e:  # noqa: BLE001 - np.zeros('a') and the like
                    raise _NotConstant(f"{ast.unparse(node)} fails: {e}") from None
        raise _NotConstant(f"{_describe(node)} is not a constant expression")

    def value_of(self, name, node):
        if name in self.unresolved:
            raise _NotConstant(f"{name} is not known: {self.unresolved[name].reason}")
        value = self.namespace.lookup(name)
        if isinstance(value, (*_DATA, tuple, list, dict, str, bytes)) or value is None or (
                _is_dtype(value)):
            return value
        raise _NotConstant(f"{name} is not a number")

    def reference(self, node):
        """What a name or a dotted name (``np.linalg.norm``) refers to."""
        if isinstance(node, ast.Name):
            if node.id in self.unresolved:
                raise _NotConstant(f"{node.id} is not known: "
                                   f"{self.unresolved[node.id].reason}")
            obj = self.namespace.lookup(node.id)
            if obj is not MISSING and not isinstance(obj, FunctionSource):
                return obj
        elif isinstance(node, ast.Attribute):
            base = self.reference(node.value)
            if isinstance(base, type(np)):  # only attributes of modules: no user objects
                try:
                    return getattr(base, node.attr)
                except AttributeError:
                    raise _NotConstant(f"{ast.unparse(node)} does not exist") from None
        raise _NotConstant(f"{_describe(node)} is not a module-level name symdiff can read")


_DATA = (int, float, complex, np.number, np.bool_, np.ndarray, bool)

_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a**b,
}

# NumPy constructors that build an array from literal arguments and do nothing else.
_CONSTRUCTORS = ("array", "asarray", "zeros", "ones", "full", "eye", "identity",
                 "arange", "linspace", "float64", "float32", "int64", "int32")
_SAFE_IDS = {id(getattr(np, n)) for n in _CONSTRUCTORS} | {id(float), id(int), id(complex)}

_KINDS = {ast.If: "an if block", ast.For: "a for loop", ast.While: "a while loop",
          ast.With: "a with block", ast.ClassDef: "a class definition",
          ast.AsyncFunctionDef: "an async def", ast.Match: "a match statement",
          ast.Delete: "a del statement", ast.Assign: "an assignment to several targets",
          ast.AugAssign: "an augmented assignment", ast.AnnAssign: "an annotation"}


def _is_dtype(obj) -> bool:
    return isinstance(obj, type) and (issubclass(obj, np.generic) or obj in (int, float,
                                                                              complex, bool))


def _safe_call(fn) -> bool:
    """NumPy constructors, float/int, and the pure elementwise functions in the rules."""
    return id(fn) in _SAFE_IDS or isinstance(rules.lookup(fn), rules.Elementwise)


def _number(v, node):
    if isinstance(v, bool) or not isinstance(v, _DATA):
        raise _NotConstant(f"{_describe(node)} is arithmetic on something that is not a number")
    return v


def _guard(op, a, b):
    """Refuse arithmetic whose result would be huge (10**10**9, a broadcast outer product)."""
    if isinstance(op, ast.Pow) and isinstance(a, int) and isinstance(b, int) and (
            a.bit_length() * abs(b) > 100_000):
        raise _NotConstant("an integer power too large to evaluate here")
    try:
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    except ValueError as e:
        raise _NotConstant(str(e)) from None
    if math.prod(shape) > _MAX_SIZE:
        raise _NotConstant("an array too large to build here")


def _guard_call(fn, pos, kw):
    shapes = [np.shape(a) for a in pos if isinstance(a, np.ndarray)]
    size = max([math.prod(s) for s in shapes], default=1)
    if fn in (np.zeros, np.ones, np.full):
        shape = kw.get("shape", pos[0] if pos else ())
        shape = (shape,) if isinstance(shape, int) else shape
        if isinstance(shape, (tuple, list)) and all(isinstance(n, int) for n in shape):
            size = math.prod(shape)
    elif fn in (np.eye, np.identity):
        n = [a for a in pos[:2] if isinstance(a, int)]
        size = math.prod(n) if len(n) == 2 else (n[0] ** 2 if n else 0)
    elif fn is np.arange:
        nums = [a for a in pos if isinstance(a, (int, float))]
        start, stop, step = (0, nums[0], 1) if len(nums) == 1 else (
            *nums[:2], nums[2] if len(nums) > 2 else 1)
        size = math.ceil((stop - start) / step) if step else 0
    elif fn is np.linspace:
        size = int(kw.get("num", pos[2] if len(pos) > 2 else 50))
    if size > _MAX_SIZE:
        raise _NotConstant("an array too large to build here")


def _bound_names(stmt) -> list[str]:
    """The names a module-level statement binds (not the locals of functions in it)."""
    names = []
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [a.asname or a.name.partition(".")[0] for a in node.names]
        todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return list(dict.fromkeys(names))


def _describe(node) -> str:
    text = ast.unparse(node)
    return repr(text if len(text) < 40 else text[:37] + "...")
