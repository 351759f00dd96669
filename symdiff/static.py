"""A Python file's path -> its top-level functions and module-level names, read without running it.

The CLI differentiates the functions of a file it must not execute. The modules it imports
from its own folder are read the same way, recursively, never run (see ``_Loader``); the
others (numpy, math, ...) are imported, from where they are installed; module-level
constants are evaluated from their syntax (literals, arithmetic, and NumPy constructors of
literals); every ``def`` becomes a ``parse.FunctionSource``. A name that cannot be resolved
this way is recorded with the reason, so a function that reads it gets a located error.

What Python would do that this reading does not follow makes a name unresolved rather than
wrong: a name changed in place at module level (``W[0] = 5.0``, ``W += 1`` on an array,
``L.append(...)``), and every name that shares its data; a decorated ``def`` (the decorator
could change what it computes) and an ``async def``, which are skipped as functions to
differentiate. ``if __name__ == "__main__":`` blocks do not run on import and are not read;
in ``try: import a / except ImportError: import b`` the handler is read when an import of the
``try`` block fails. Parameter defaults are evaluated where the ``def`` is, as Python does:
where a name a default reads is set again later, ``Module.defaults`` keeps the value the
``def`` saw.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import importlib.machinery
import io
import math
import os
import sys
import tokenize
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from . import rules
from .errors import Problem, SymdiffError
from .parse import MISSING, FunctionSource, Namespace, Source

# A constant larger than this (elements of an array, digits of an integer) is not built.
_MAX_SIZE = 10**7

_HINT = ("numbers, literals, arithmetic on them, and NumPy constructors of literals "
         "(np.array([...]), np.zeros((3, 4))); or use grad() in Python")


@dataclass(frozen=True)
class Unresolved:
    """A module-level name whose value is only known by running the file: where, and why.

    ``message`` and ``hint``, when set, are what is said where the name is read (instead of
    "set at module level by code symdiff does not run").
    """

    line: int
    col: int
    reason: str
    message: str = ""
    hint: str = ""


@dataclass(frozen=True)
class Skipped:
    """A top-level ``def`` that is not differentiated (async, decorated), and why."""

    node: ast.AST
    reason: str


@dataclass(frozen=True)
class DefTime:
    """A parameter default as Python evaluated it when its ``def`` ran, kept where that
    differs from what its expression gives at the end of the file (a name it reads is set
    again later). ``reason`` says why the value is not known (then ``value`` is None)."""

    node: ast.expr  # the default's expression
    value: object
    line: int  # of the def
    reason: str = ""


@dataclass(frozen=True)
class Module:
    """A file read statically.

    ``path`` is as given, ``source.filename`` the absolute path (as in co_filename);
    ``functions`` are its top-level ``def``s in file order; ``namespace`` resolves the
    names they read; ``imports`` holds, per imported name, the statement that binds it
    (for exporting); ``unresolved`` the names that could not be resolved; ``skipped`` the
    top-level defs that are not differentiated (async, decorated); ``defaults``, per
    function, the defaults whose value at the ``def`` is not what their expression gives at
    the end of the file; ``bindings`` the statement that last bound each name.
    """

    path: str
    source: Source
    functions: Mapping[str, FunctionSource]
    namespace: Namespace
    imports: Mapping[str, str]
    unresolved: Mapping[str, Unresolved]
    skipped: Mapping[str, Skipped] = field(default_factory=dict)
    defaults: Mapping[str, Mapping[str, DefTime]] = field(default_factory=dict)
    bindings: Mapping[str, ast.AST] = field(default_factory=dict)
    # Every file read for this one (it, and the local modules it imports), by absolute path.
    modules: Mapping[str, Module] = field(default_factory=dict, repr=False, compare=False)
    notes: tuple[Problem, ...] = ()  # what the reading could not follow as Python would


class StaticModule(types.ModuleType):
    """A local module (one found next to FILE) as the CLI reads it: its names are what its
    reading resolved (functions as ``FunctionSource``), and none of its code has run."""


def read_module(path: str) -> Module:
    """Read the file at ``path`` without running it; raise SymdiffError if it does not parse
    (or is not text in its encoding).

    The modules it imports that are found in its directory (where ``python FILE`` looks
    first) are read the same way, recursively, never imported: see ``_Loader``.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    ...     _ = f.write("import numpy as np\\nSCALE = 2.0\\ndef f(x):\\n    return SCALE * x\\n")
    >>> m = read_module(f.name)
    >>> list(m.functions), m.namespace.lookup("SCALE"), m.namespace.lookup("np") is np
    (['f'], 2.0, True)
    >>> os.remove(f.name)
    """
    with open(path, "rb") as fp:
        data = fp.read()
    source, tree = _source_tree(os.path.abspath(path), data)
    loader = _Loader(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    module = loader.read(path, source, tree, stem if stem.isidentifier() else None, top=True)
    module = dataclasses.replace(module, notes=tuple(loader.notes))
    loader.records[source.filename] = module
    return module


def _source_tree(filename: str, data: bytes) -> tuple[Source, ast.Module]:
    """A file's lines and syntax tree; a located SymdiffError if it is not Python source."""
    lines = _decode(filename, data)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # as linecache does: the lines must match a live function's
    # Named by its absolute path, as a function imported from it is (co_filename): the
    # generated docstring, which names it, is then the same text as grad() gives.
    source = Source(filename, tuple(lines))
    try:
        tree = ast.parse("".join(lines), source.filename)
    except SyntaxError as e:
        problem = Problem(source.filename, e.lineno or 1, e.offset or 1, e.msg,
                          (e.text or "").rstrip("\n"))
        raise SymdiffError(problems=(problem,)) from None
    except (RecursionError, MemoryError) as e:
        # Python cannot compile it either; say where the expression that is too deep is.
        line = _busiest_line(lines)
        problem = Problem(source.filename, line, 1, "an expression nested too deeply for "
                          f"Python's parser ({type(e).__name__}): Python cannot run this "
                          "file either", source.line_text(line)[:200],
                          "split the expression into several statements")
        raise SymdiffError(problems=(problem,)) from None
    return source, tree


def _busiest_line(lines) -> int:
    """The line with the most operators and brackets (read by tokens, which do not recurse):
    where an expression too deep to parse most likely is."""
    counts = [sum(line.count(c) for c in "+-*/(~[") for line in lines]
    return max(range(len(counts)), key=counts.__getitem__, default=0) + 1


def _decode(filename: str, data: bytes) -> list[str]:
    """The lines of a source file as ``tokenize.open`` (and so linecache) reads them: in the
    encoding its coding cookie or BOM declares, else UTF-8. A file that is not text in that
    encoding is a located error (not a traceback)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:  # a bad coding cookie, or no cookie and bytes that are not UTF-8
        if "invalid or missing encoding declaration" not in str(e):
            head = data.splitlines()[:2]
            line = next((k + 1 for k, text in enumerate(head) if b"coding" in text), 1)
            text = head[line - 1].decode("utf-8", "replace").lstrip("\ufeff") if head else ""
            raise SymdiffError(problems=(Problem(filename, line, 1, str(e.msg), text),)) \
                from None
        encoding = "utf-8"
    try:
        data.decode(encoding)
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        text = data[start:len(data) if end < 0 else end].decode(encoding, errors="replace")
        col = len(data[start:e.start].decode(encoding, errors="replace")) + 1
        problem = Problem(filename, data.count(b"\n", 0, e.start) + 1, col,
                          f"the file is not valid {encoding}: byte 0x{data[e.start]:02x} "
                          "cannot be decoded", text.rstrip("\r"),
                          "save it as UTF-8, or declare its encoding on its first line "
                          "(# -*- coding: latin-1 -*-)")
        raise SymdiffError(problems=(problem,)) from None
    with io.TextIOWrapper(io.BytesIO(data), encoding, line_buffering=True) as text:
        return text.readlines()


def unresolved_problems(fs: FunctionSource, module: Module) -> list[Problem]:
    """A located problem where ``fs`` reads (in its body or defaults) an unresolved name,
    and where it (or a function it calls, of the file or of a local module) calls a function
    leaving a parameter to a default whose value at the ``def`` is not what symdiff would
    read. The functions it calls are followed transitively, in every file read.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    ...     _ = f.write("W = open('w').read()\\ndef f(x):\\n    return W * x\\n")
    >>> m = read_module(f.name)
    >>> [p.col for p in unresolved_problems(m.functions["f"], m)]
    [12]
    >>> os.remove(f.name)
    """
    problems = []
    seen, todo = set(), [fs]
    while todo:
        f = todo.pop(0)
        home = module.modules.get(f.source.filename, module if f.source is module.source
                                  else None)
        if id(f.node) in seen or home is None or f.source is not home.source:
            continue
        seen.add(id(f.node))
        reads, calls, attributes = _module_reads(f.node)
        for node in reads:
            if node.id in home.unresolved:
                message, hint = unresolved_message(node.id, home.unresolved[node.id])
                problems.append(home.source.problem(node, message, hint))
        for node in attributes:  # helpers.W, of a local module whose W is not known
            owner = _static_base(node.value, f.namespace)
            record = module.modules.get(getattr(owner, "__file__", None))
            if record is not None and node.attr in record.unresolved:
                u = record.unresolved[node.attr]
                problems.append(home.source.problem(
                    node, u.message or f"{ast.unparse(node)} is not known: {owner.__name__} "
                    f"sets it at module level (line {u.line}) by code symdiff does not run "
                    f"when it reads a file: {u.reason}", u.hint or _HINT))
        # Defaults the callee leaves out must be the values Python evaluated at the def,
        # which symdiff (reading the expression) cannot give.
        for call in calls:
            callee = _callee(call.func, f.namespace)
            if not isinstance(callee, FunctionSource):
                continue
            callee_home = module.modules.get(callee.source.filename)
            if callee_home is not None and callee.source is callee_home.source:
                problems += _stale_default_problems(call, callee, callee_home, home)
            todo.append(callee)
    return problems


def _static_base(node, namespace):
    """The StaticModule ``node`` (``helpers``, ``pkg.sub``) names, or None."""
    if isinstance(node, ast.Name):
        obj = namespace.lookup(node.id)
    elif isinstance(node, ast.Attribute):
        base = _static_base(node.value, namespace)
        obj = vars(base).get(node.attr) if base is not None else None
    else:
        return None
    return obj if isinstance(obj, StaticModule) else None


def _callee(func, namespace):
    if isinstance(func, ast.Name):
        return namespace.lookup(func.id)
    base = _static_base(func.value, namespace)
    return vars(base).get(func.attr) if base is not None else None


def _stale_default_problems(call, callee, module, caller) -> list[Problem]:
    """``module`` defines ``callee``; ``caller`` holds the call."""
    stale = module.defaults.get(callee.name, {})
    if not stale or any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        return []
    a = callee.node.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    given = set(positional[:len(call.args)]) | {k.arg for k in call.keywords}
    problems = []
    for p, d in stale.items():
        if p in given:
            continue
        what = d.reason or (f"was {_short(d.value)} when {callee.name} was defined (line "
                            f"{d.line}), and a name it reads is set again later")
        problems.append(caller.source.problem(
            call, f"this call of {callee.name} leaves {p} to its default "
            f"{ast.unparse(d.node)}, which {what}: symdiff would read its value at the end "
            "of the file, not the one Python gives it",
            f"pass {p} explicitly, or do not set {ast.unparse(d.node)} again after the def"))
    return problems


def unresolved_message(name: str, u: Unresolved) -> tuple[str, str]:
    """What to say where an unresolved name is read: the message and the hint."""
    if u.message:
        return u.message, u.hint or _HINT
    return (f"{name!r} is set at module level (line {u.line}) by code symdiff does not run "
            f"when it reads a file: {u.reason}", u.hint or _HINT)


def _module_reads(fn) -> tuple[list[ast.Name], list[ast.Call], list[ast.Attribute]]:
    """The names a function reads from the module (in its body and defaults, not those
    its own or a nested function's parameters and locals shadow), its calls of them (and
    of their attributes, ``helpers.h(x)``), and the attributes it reads of them.

    Walked with a stack, not recursion: an expression nested thousands deep is read too.
    """
    reads, calls, attributes = [], [], []
    a = fn.args
    # Defaults are evaluated in the module's scope; the body in the function's.
    todo = [(d, frozenset()) for d in [*a.defaults, *(d for d in a.kw_defaults
                                                      if d is not None)]]
    local = _scope_locals(fn)
    todo += [(node, local) for node in ([fn.body] if isinstance(fn, ast.Lambda) else fn.body)]
    todo.reverse()
    while todo:
        node, local = todo.pop()
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in local:
                reads.append(node)
            continue
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            inner = local | _scope_locals(node)
            children = [(d, local) for d in [*getattr(node, "decorator_list", []), *a.defaults,
                                             *(d for d in a.kw_defaults if d is not None)]]
            children += [(b, inner) for b in ([node.body] if isinstance(node, ast.Lambda)
                                              else node.body)]
            todo += reversed(children)
            continue
        if isinstance(node, ast.Call) and _root(node.func) not in local | {None}:
            calls.append(node)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and (
                _root(node) not in local | {None}):
            attributes.append(node)
        todo += [(c, local) for c in reversed(children)]
    return reads, calls, attributes


def _scope_locals(fn) -> frozenset[str]:
    """The names local to a function: its parameters, and what its body binds (not the
    bodies of functions and classes in it), less what it declares global or nonlocal."""
    a = fn.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
             if p is not None}
    free = set()
    todo = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        elif isinstance(node, ast.Lambda):
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {n.asname or n.name.partition(".")[0] for n in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            free |= set(node.names)
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(names - free)


class _Loader:
    """Reads FILE and the local modules it imports, each once, running none of them.

    A module is *local* when ``python FILE`` would load it from FILE's directory (the first
    entry of its sys.path) and its name is not that of a standard-library module:
    ``import helpers`` finds ``helpers.py`` or the package ``helpers/`` there. A local module
    is read as FILE is (its submodules and the relative imports of a local package too),
    recursively; a module that imports one being read (a cycle) gets it without its names
    (names are taken from it only once it has been read). A file next to FILE named like a
    standard module (``wave.py``, ``json.py``) is never read or run: the name is the
    standard module, with a note. Every other module (NumPy, SciPy, what is installed) is
    imported as usual, from sys.path without FILE's directory and without the current
    directory that ``python -m`` puts first, so only installed code runs. ``symdiff`` is
    always the symdiff running (a copy next to FILE would give another stop_gradient), and
    a local module already imported from that same file is that module.
    """

    def __init__(self, path):
        self.top = os.path.dirname(os.path.abspath(path))
        self.by_name: dict[str, types.ModuleType] = {}
        self.by_file: dict[str, types.ModuleType] = {}  # by real path
        self.records: dict[str, Module] = {}  # by absolute path, as Source.filename
        self.reading: set[int] = set()  # ids of the StaticModules being read
        self.notes: list[Problem] = []
        self._imported: dict[str, types.ModuleType] | None = None

    def read(self, path, source, tree, name, top=False, search=None) -> Module:
        stand_in = StaticModule(name or "__symdiff_static__")
        stand_in.__file__ = source.filename
        if search is not None:
            stand_in.__path__ = list(search)
        if name and not (top and name in sys.stdlib_module_names):
            self.by_name.setdefault(name, stand_in)
        self.by_file[os.path.realpath(source.filename)] = stand_in
        package = name if search is not None else (name or "").rpartition(".")[0]
        reader = _Reader(path, source, self, None if top else vars(stand_in),
                         None if top else package)
        self.reading.add(id(stand_in))
        try:
            for stmt in tree.body:
                try:
                    reader.statement(stmt)
                except RecursionError:
                    for bound in _bound_names(stmt):
                        reader.unbind(bound, stmt, "an expression nested too deeply to read")
        finally:
            self.reading.discard(id(stand_in))
        if top:  # FILE, as a module that imports it back sees it once read
            stand_in.__dict__.update((k, v) for k, v in reader.globals.items()
                                     if not k.startswith("__"))
        record = Module(path, source, reader.functions, reader.namespace, reader.imports,
                        reader.unresolved, reader.skipped, reader.stale_defaults(),
                        reader.bindings, self.records)
        self.records[source.filename] = record
        return record

    def local(self, top_name) -> bool:
        """Whether ``python FILE`` would load ``top_name`` from FILE's directory and symdiff
        reads it (a standard module's name never is)."""
        if top_name in sys.builtin_module_names or top_name in sys.stdlib_module_names or (
                top_name == __name__.partition(".")[0]):  # symdiff is the one running
            return False
        spec = importlib.machinery.PathFinder.find_spec(top_name, [self.top])
        if spec is None:
            return False
        if spec.origin is None or spec.origin == "namespace":
            # A bare folder loses to a module or regular package found anywhere on sys.path.
            with self.installed_only():
                other = importlib.machinery.PathFinder.find_spec(top_name)
            return other is None or other.origin in (None, "namespace")
        return True

    def shadowed(self, top_name) -> str:
        """The file or folder next to FILE named like the standard module ``top_name``."""
        if top_name not in sys.stdlib_module_names:
            return ""
        spec = importlib.machinery.PathFinder.find_spec(top_name, [self.top])
        if spec is None:
            return ""
        if spec.origin in (None, "namespace"):
            return top_name + "/"
        return os.path.relpath(spec.origin, self.top)

    def load(self, fullname):
        """The local module ``fullname`` (dotted), read, with its parent packages; None when
        it is not local. Raises ImportError or SyntaxError as importing it would."""
        parts = fullname.split(".")
        parent = None
        for k in range(len(parts)):
            name = ".".join(parts[:k + 1])
            module = self.by_name.get(name)
            if module is None:
                if parent is None:
                    if not self.local(name):
                        return None
                    spec = importlib.machinery.PathFinder.find_spec(name, [self.top])
                else:
                    search = getattr(parent, "__path__", None)
                    if search is None:
                        raise ModuleNotFoundError(f"No module named {name!r}; "
                                                  f"{parent.__name__!r} is not a package",
                                                  name=name)
                    spec = importlib.machinery.PathFinder.find_spec(name, list(search))
                    if spec is None:
                        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                module = self.from_spec(name, spec)
                self.by_name.setdefault(name, module)
                if parent is not None:
                    vars(parent).setdefault(parts[k], module)
            if not isinstance(module, StaticModule):  # already imported: as it is
                with self.installed_only():
                    return importlib.import_module(fullname)
            parent = module
        return parent

    def from_spec(self, name, spec):
        if spec.origin is None or spec.origin == "namespace":
            module = StaticModule(name)
            module.__path__ = list(spec.submodule_search_locations or ())
            return module
        real = os.path.realpath(spec.origin)
        if real in self.by_file:  # FILE imported back, or one file under two names
            return self.by_file[real]
        if real in self.imported():
            return self.imported()[real]
        if not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            raise ImportError(f"{name} is compiled ({os.path.basename(spec.origin)}): symdiff "
                              "reads source files and does not import them", name=name)
        try:
            with open(spec.origin, "rb") as fp:
                data = fp.read()
            source, tree = _source_tree(os.path.abspath(spec.origin), data)
        except OSError as e:
            raise ImportError(f"cannot read {spec.origin}: {e.strerror or e}",
                              name=name) from None
        except SymdiffError as e:  # as importing it would: a SyntaxError
            first = e.problems[0] if e.problems else None
            raise SyntaxError(f"{first.filename}:{first.line}:{first.col}: {first.message}"
                              if first else str(e)) from None
        self.read(spec.origin, source, tree, name, search=spec.submodule_search_locations)
        return self.by_file[real]


    def imported(self) -> dict[str, types.ModuleType]:
        """The modules imported already, by the real path of their file."""
        if self._imported is None:
            self._imported = {}
            for module in list(sys.modules.values()):
                file = getattr(module, "__file__", None)
                if isinstance(file, str):
                    self._imported.setdefault(os.path.realpath(file), module)
        return self._imported

    def name_from(self, module, attr):
        """``from module import attr`` of a local module: (value, None), or (None, an
        Unresolved-like reason) when its reading left it unknown; raises ImportError."""
        record = self.records.get(getattr(module, "__file__", None))
        if id(module) not in self.reading and attr in vars(module):
            return vars(module)[attr], None
        if record is not None and attr in record.unresolved:
            return None, record.unresolved[attr]
        if getattr(module, "__path__", None) is not None:
            try:
                return self.load(f"{module.__name__}.{attr}"), None
            except ModuleNotFoundError:
                pass
        if id(module) in self.reading:
            raise ImportError(f"cannot import name {attr!r} from {module.__name__!r}, which "
                              "imports this module back (a circular import): symdiff takes "
                              "names from a module only once it has read all of it",
                              name=module.__name__)
        raise ImportError(f"cannot import name {attr!r} from {module.__name__!r} "
                          f"({module.__file__})", name=module.__name__)

    @contextlib.contextmanager
    def installed_only(self):
        """sys.path without FILE's directory and the current directory ``python -m`` put
        first, while a module that is not local is imported."""
        saved = list(sys.path)
        top = os.path.realpath(self.top)
        try:
            cwd = os.path.realpath(os.getcwd())
        except OSError:
            cwd = None
        keep = [p for k, p in enumerate(saved) if p and os.path.realpath(p) != top and not (
            k == 0 and os.path.realpath(p) == cwd)]
        sys.path[:] = keep
        try:
            yield
        finally:
            added = [p for p in sys.path if p not in keep and p not in saved]
            sys.path[:] = saved + added


class script_path:
    """Put the file's directory first on sys.path while ``--check`` runs it, as ``python
    FILE`` would, so that a module next to it is found (reading it never does this).

    A module that imports FILE back (a circular import) gets a stand-in module meanwhile,
    not FILE run: reading one of its names at import time fails, and is reported.
    """

    def __init__(self, path):
        self.dir = os.path.dirname(os.path.abspath(path))
        stem = os.path.splitext(os.path.basename(path))[0]
        self.name = os.path.basename(self.dir) if stem == "__init__" else stem
        self.stand_in = None

    def __enter__(self):
        sys.path.insert(0, self.dir)
        if self.name.isidentifier() and self.name not in sys.modules:
            self.stand_in = _NotRun(self.name)
            sys.modules[self.name] = self.stand_in

    def __exit__(self, *exc):
        if sys.path and sys.path[0] == self.dir:
            del sys.path[0]
        if self.stand_in is not None and sys.modules.get(self.name) is self.stand_in:
            del sys.modules[self.name]


class _NotRun(types.ModuleType):
    """FILE, as a module it imports sees it while the CLI reads it: none of its names."""

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise AttributeError(f"module {self.__name__!r} is being read by symdiff without "
                             f"running it, so {attr!r} has no value")


class _NotConstant(Exception):
    pass


class _Reader:
    def __init__(self, path, source, loader, names=None, package=None):
        self.path = path
        self.source = source
        self.loader = loader
        # A local module's names are its StaticModule's; FILE's are its own.
        self.globals: dict[str, object] = {"__name__": "__symdiff_static__", "__file__": path} \
            if names is None else names
        self.package = package  # of a local module, for its relative imports
        self.namespace = Namespace(self.globals)
        self.functions: dict[str, FunctionSource] = {}
        self.imports: dict[str, str] = {}
        self.unresolved: dict[str, Unresolved] = {}
        self.skipped: dict[str, Skipped] = {}
        self.bindings: dict[str, ast.AST] = {}
        # Per function, per parameter: [default's expression, its value at the def, why
        # that value is not known ("" when it is)].
        self.deftime: dict[str, dict[str, list]] = {}
        self.depth = 0  # inside a try block or an `if __name__ ...` block: not top-level defs
        self.failure: BaseException | None = None  # of the last import that failed

    # --- binding names ---

    def bind(self, name, value, node, import_text=None):
        self.globals[name] = value
        self._forget(name)
        self.bindings[name] = node
        if import_text is not None:
            self.imports[name] = import_text

    def unbind(self, name, node, reason, message="", hint=""):
        self.globals.pop(name, None)
        self._forget(name)
        self.unresolved[name] = Unresolved(node.lineno, node.col_offset + 1, reason, message,
                                           hint)

    def _forget(self, name):
        for table in (self.unresolved, self.functions, self.imports, self.skipped,
                      self.bindings, self.deftime):
            table.pop(name, None)

    # --- statements ---

    def statement(self, stmt):
        match stmt:
            case ast.Try() | ast.TryStar():
                self.try_block(stmt)
                return
            case ast.If(test=test) if _main_guard(test) is not None:
                # `if __name__ == "__main__":` does not run when the file is imported.
                self.depth += 1
                for s in (stmt.orelse if _main_guard(test) else stmt.body):
                    self.statement(s)
                self.depth -= 1
                return
        changes = self.changes(stmt)  # what it changes in place, seen before it runs
        match stmt:
            case ast.Import():
                for alias in stmt.names:
                    self.import_module(alias, stmt)
            case ast.ImportFrom():
                for alias in stmt.names:
                    self.import_from(alias, stmt)
            case ast.FunctionDef(decorator_list=[]):
                self.define(stmt)
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                self.refuse(stmt)
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
                    self.bind(t.id, v, stmt)
            case ast.AnnAssign(target=ast.Name(id=name), value=value) if value is not None:
                self.assign(name, value, stmt)
            case ast.AugAssign(target=ast.Name(id=name), op=op, value=value):
                if not _mutable(self.globals.get(name)):  # an array's W += 1: in place
                    load = ast.copy_location(ast.Name(name, ast.Load()), stmt.target)
                    self.assign(name, ast.copy_location(ast.BinOp(load, op, value), stmt),
                                stmt)
            case ast.Delete(targets=targets):
                for t in targets:
                    if isinstance(t, ast.Name):
                        self.globals.pop(t.id, None)
                        self._forget(t.id)
            case ast.Expr() | ast.Pass() | ast.Assert() | ast.AnnAssign():
                pass  # no name is bound (a docstring, a print call, an annotation only)
            case _:
                kind = _KINDS.get(type(stmt), type(stmt).__name__)
                for name in _bound_names(stmt):
                    self.unbind(name, stmt, kind)
        for name, value, node in changes:
            self.changed(name, value, node)

    def try_block(self, stmt):
        """``try: import cupy as xp / except ImportError: import numpy as xp``: the body
        is read up to an import that fails, then the handler that catches its exception."""
        self.depth += 1
        failure = pending = None
        for s in stmt.body:
            self.failure = None
            self.statement(s)
            if self.failure is not None:
                failure = self.failure
                break
        handler = None
        if failure is not None:
            handler = next((h for h in stmt.handlers if self.catches(h, failure)), None)
            pending = failure if handler is None else None
        for s in (stmt.orelse if failure is None else handler.body if handler else []):
            self.failure = None
            self.statement(s)
            pending = self.failure if pending is None else pending
        for h in stmt.handlers:
            if h is handler:
                continue
            for s in h.body:  # a name only a handler not read would set is not known
                for name in _bound_names(s):
                    if name not in self.globals and name not in self.unresolved:
                        self.unbind(name, s, f"set in an except block (line {h.lineno}), "
                                    "which runs only if the try block fails")
        for s in stmt.finalbody:
            self.failure = None
            self.statement(s)
            pending = self.failure if pending is None else pending
        self.depth -= 1
        self.failure = pending

    def catches(self, handler, failure) -> bool:
        if handler.type is None:
            return True
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        for kind in kinds:
            try:
                cls = self.reference(kind)
            except _NotConstant:
                continue
            if isinstance(cls, type) and isinstance(failure, cls):
                return True
        return False

    def define(self, stmt):
        fs = FunctionSource(stmt.name, stmt, self.source, self.namespace)
        # Python evaluates the defaults here; the names they read may be set again later.
        a = stmt.args
        positional = [*a.posonlyargs, *a.args]
        pairs = [*zip(positional[len(positional) - len(a.defaults):], a.defaults,
                      strict=True),
                 *((p, d) for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                   if d is not None)]
        values = {}
        for p, d in pairs:
            if not isinstance(d, ast.Constant):
                try:
                    values[p.arg] = [d, self.constant(d), ""]
                except _NotConstant:
                    pass  # not known here: a located error if it reads an unresolved name
        self.bind(stmt.name, fs, stmt)
        if values:
            self.deftime[stmt.name] = values
        if self.depth == 0:
            self.functions[stmt.name] = fs

    def refuse(self, stmt):
        """An async or decorated def: not read (a decorator could change what it computes)."""
        if isinstance(stmt, ast.AsyncFunctionDef):
            reason = "async functions are not supported"
            message = f"{stmt.name!r} is an async def (line {stmt.lineno}): {reason}"
            hint = "a plain def"
        else:
            decorator = _describe(stmt.decorator_list[0]).strip("'")
            why = ("decorated functions are not read statically, since the decorator could "
                   "change what it computes")
            reason = f"it is decorated (@{decorator}): {why}"
            message = f"{stmt.name!r} is decorated (@{decorator}, line {stmt.lineno}): {why}"
            hint = "call an undecorated function; or use grad() in Python"
        self.unbind(stmt.name, stmt, reason, message, hint)
        if self.depth == 0:
            self.skipped[stmt.name] = Skipped(stmt, reason)

    def stale_defaults(self) -> dict[str, dict[str, DefTime]]:
        """The defaults whose value at their def is not what their expression gives now."""
        out = {}
        for name, params in self.deftime.items():
            fs = self.globals.get(name)
            if not isinstance(fs, FunctionSource):
                continue
            for p, (node, value, reason) in params.items():
                if not reason:
                    try:
                        if _same(self.constant(node), value):
                            continue
                    except _NotConstant:
                        pass
                out.setdefault(name, {})[p] = DefTime(node, None if reason else value,
                                                      fs.node.lineno, reason)
        return out

    def changes(self, stmt) -> list[tuple[str, object, ast.AST]]:
        """The module-level data ``stmt`` changes in place: (name, value, where)."""
        out = []
        for name, node, kind in _changed_in_place(stmt):
            value = self.globals.get(name, MISSING)
            if isinstance(value, StaticModule) and kind != "argument":
                self.changed_elsewhere(value, name, node)
                continue
            if value is MISSING or isinstance(value, (types.ModuleType, FunctionSource)) or (
                    kind == "augmented" and not _mutable(value)) or (
                    kind == "method" and _immutable(value)):
                continue
            if kind == "argument":  # np.copyto(W, ...): only the functions that write
                try:
                    if id(self.reference(node.func)) not in _IN_PLACE_IDS:
                        continue
                except _NotConstant:
                    continue
            out.append((name, value, node))
        return out

    def changed_elsewhere(self, module, name, node):
        """``helpers.GAIN = 5.0`` (or ``helpers.W[0] = 1.0``...) of a local module read
        already: the names of it that ``node`` changes are no longer known, there too."""
        record = self.loader.records.get(module.__file__)
        text = _describe(node).strip("'")
        where = f"{os.path.basename(self.source.filename)}, line {node.lineno}: {text}"
        for sub in ast.walk(node):
            if not (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and (
                    sub.value.id == name)) or sub.attr.startswith("__"):
                continue
            value = vars(module).pop(sub.attr, None)
            affected = [m for m in _members(value) if _mutable(m)]
            namespaces = [self.globals] + [vars(m) for m in self.loader.by_file.values()
                                           if m is not module]
            for names in namespaces:  # from helpers import W: the same array, changed
                for other, v in list(names.items()):
                    if not isinstance(v, (types.ModuleType, FunctionSource)) and (
                            _shares(v, affected)):
                        names.pop(other)
                        owner = self.loader.records.get(names.get("__file__")) if (
                            names is not self.globals) else None
                        reason = f"it shares its data with {name}.{sub.attr}, changed in " \
                                 f"place at {where}"
                        if names is self.globals:
                            self.unbind(other, node, reason)
                        elif owner is not None:
                            owner.unresolved[other] = Unresolved(
                                node.lineno, node.col_offset + 1, reason)
            if record is not None:
                record.unresolved[sub.attr] = Unresolved(
                    node.lineno, node.col_offset + 1, f"changed in place at {where}",
                    f"{sub.attr!r} of {module.__name__} is changed at module level ({where}); "
                    "symdiff reads the files without running them and does not follow that",
                    "give it its final value where it is defined; or use grad() in Python")

    def changed(self, name, value, node):
        """``name`` (bound to ``value`` before ``node`` ran) was changed in place there: it,
        every name sharing its data, and every default holding it are no longer known."""
        text = _describe(node).strip("'")
        where = f"line {node.lineno}: {text}"
        hint = ("give it its final value where it is defined (or change a copy: "
                "np.array(...)); or use grad() in Python")
        affected = [m for m in _members(value) if _mutable(m)]
        for other, v in list(self.globals.items()):
            if other != name and not isinstance(v, (types.ModuleType, FunctionSource)) and (
                    _shares(v, affected)):
                self.unbind(other, node, f"it shares its data with {name}, changed in place "
                            f"at {where}", f"{other!r} shares its data with {name!r}, which "
                            f"is changed in place at module level ({where}); symdiff reads "
                            "the file without running it and does not follow that", hint)
        self.unbind(name, node, f"changed in place at {where}",
                    f"{name!r} is changed in place at module level ({where}); symdiff "
                    "reads the file without running it and does not follow that", hint)
        for params in self.deftime.values():
            for entry in params.values():
                if not entry[2] and _shares(entry[1], affected):
                    entry[1], entry[2] = None, f"is changed in place later ({where})"

    def import_module(self, alias, stmt):
        name = alias.asname or alias.name.partition(".")[0]
        text = f"import {alias.name}" + (f" as {alias.asname}" if alias.asname else "")
        try:
            local = self.loader.load(alias.name)
        except (ImportError, SyntaxError) as e:
            self.failed(name, stmt, f"{text} failed", e)
            return
        if local is not None:  # read, not run; its functions are copied when exported
            top = alias.name.partition(".")[0]
            self.bind(name, local if alias.asname else self.loader.by_name.get(
                top, sys.modules.get(top)), stmt)
            return
        self.note_shadowed(alias.name, stmt)
        try:
            with self.loader.installed_only():
                module = importlib.import_module(alias.name)
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - any failure, sys.exit() too, is reported
            self.failed(name, stmt, f"import {alias.name} failed", e)
            return
        if not alias.asname:
            module = sys.modules[alias.name.partition(".")[0]]
        self.bind(name, module, stmt, text)

    def note_shadowed(self, dotted, stmt):
        top = dotted.partition(".")[0]
        found = self.loader.shadowed(top)
        if found:
            self.loader.notes.append(self.source.problem(
                stmt, f"{top} is the standard module {top} here, not {found} in the file's "
                "folder: symdiff never reads or runs a file named like a standard module "
                "(python FILE would import that file instead)",
                "rename that file if it is the one meant"))

    def import_from(self, alias, stmt):
        name = alias.asname or alias.name
        module_name = stmt.module or ""
        if stmt.level:
            parts = (self.package or "").split(".") if self.package else []
            if stmt.level - 1 >= len(parts):
                self.unbind(name, stmt, "a relative import, which needs the file's package")
                return
            base = ".".join(parts[:len(parts) - stmt.level + 1])
            module_name = base + ("." + stmt.module if stmt.module else "")
        text = f"from {'.' * stmt.level}{stmt.module or ''} import {alias.name}" + (
            f" as {alias.asname}" if alias.asname else "")
        try:
            local = self.loader.load(module_name)
        except (ImportError, SyntaxError) as e:
            self.failed(name, stmt, f"{text} failed", e)
            return
        if local is not None:
            self.from_local(local, alias, stmt, text)
            return
        self.note_shadowed(module_name, stmt)
        if alias.name == "*":
            try:
                with self.loader.installed_only():
                    module = importlib.import_module(stmt.module)
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # noqa: BLE001 - nothing is known of what it binds
                self.failure = e
                return
            public = getattr(module, "__all__", None) or [
                n for n in vars(module) if not n.startswith("_")]
            for n in public:
                if hasattr(module, n):
                    self.bind(n, getattr(module, n), stmt, f"from {stmt.module} import {n}")
            return
        try:
            with self.loader.installed_only():
                module = importlib.import_module(stmt.module)
                try:
                    value = getattr(module, alias.name)
                except AttributeError:
                    value = importlib.import_module(f"{stmt.module}.{alias.name}")
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - any failure, sys.exit() too, is reported
            self.failed(name, stmt, f"{text} failed", e)
            return
        self.bind(name, value, stmt, text)

    def from_local(self, module, alias, stmt, text):
        """``from helpers import h`` of a local module: what its reading resolved."""
        if not isinstance(module, StaticModule):  # already imported (symdiff's own files)
            try:
                self.bind(alias.asname or alias.name, getattr(module, alias.name), stmt, text)
            except AttributeError as e:
                self.failed(alias.asname or alias.name, stmt, f"{text} failed", e)
            return
        if alias.name == "*":
            record = self.loader.records.get(module.__file__)
            names = vars(module).get("__all__")
            if not (isinstance(names, (list, tuple)) and all(isinstance(n, str)
                                                              for n in names)):
                names = [n for n in [*vars(module), *(record.unresolved if record else ())]
                         if not n.startswith("_")]
            for n in dict.fromkeys(names):
                self.from_local(module, ast.alias(n), stmt, text)
            return
        name = alias.asname or alias.name
        try:
            value, unknown = self.loader.name_from(module, alias.name)
        except (ImportError, SyntaxError) as e:
            self.failed(name, stmt, f"{text} failed", e)
            return
        if unknown is not None:
            where = os.path.basename(module.__file__)
            self.unbind(name, stmt, f"{alias.name} in {module.__name__} ({where}, line "
                        f"{unknown.line}) is not known: {unknown.reason}", "", unknown.hint)
            return
        self.bind(name, value, stmt)

    def failed(self, name, stmt, what, e):
        """An import failed: the name is not known, and an except block may catch ``e``."""
        hint = "fix that file; or use grad() in Python" if isinstance(e, SyntaxError) else ""
        self.unbind(name, stmt, f"{what}: {type(e).__name__}: {e}", hint=hint)
        self.failure = e

    def assign(self, name, value, stmt):
        try:
            self.bind(name, self.constant(value), stmt)
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
                record = self.loader.records.get(getattr(base, "__file__", None))
                if isinstance(base, StaticModule) and record is not None and (
                        node.attr in record.unresolved):
                    raise _NotConstant(f"{ast.unparse(node)} is not known: "
                                       f"{record.unresolved[node.attr].reason}")
                try:
                    obj = getattr(base, node.attr)
                except AttributeError:
                    raise _NotConstant(f"{ast.unparse(node)} does not exist") from None
                if not isinstance(obj, FunctionSource):
                    return obj
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


# Methods that change their object, wherever they are called (a method called as a statement,
# its value unused, is taken to change it, whatever its name).
_MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault",
    "popitem", "sort", "reverse", "add", "discard", "fill", "resize", "put", "itemset",
    "setflags", "partition", "byteswap", "__setitem__", "__delitem__", "__iadd__"})
# NumPy functions that write into their first argument.
_IN_PLACE_IDS = {id(f) for f in (np.copyto, np.put, np.place, np.putmask, np.fill_diagonal,
                                 np.random.shuffle, np.put_along_axis)}


def _changed_in_place(stmt) -> list[tuple[str, ast.AST, str]]:
    """(root name, where, kind) for each module-level name ``stmt`` may change in place:
    ``W[0] = v``, ``W.attr = v``, ``del W[0]``, ``W += v``, ``L.append(v)``, ``W.fill(0)``
    as a statement, ``np.copyto(W, v)`` and ``out=W``. Not in the bodies of functions."""
    out = []
    current = [stmt]  # the innermost statement, to show where

    def visit(node, statement=False):
        if isinstance(node, ast.stmt):
            current.append(node)
            try:
                visit_in(node, statement)
            finally:
                current.pop()
        else:
            visit_in(node, statement)

    def visit_in(node, statement):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for d in [*getattr(node, "decorator_list", []), *a.defaults,
                      *(d for d in a.kw_defaults if d is not None)]:
                visit(d)
            return
        if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(
                node.ctx, ast.Load):
            root = _root(node.value)
            if root:
                out.append((root, current[-1], "store"))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.append((node.target.id, node, "augmented"))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and (
                    statement or node.func.attr in _MUTATING_METHODS):
                root = _root(node.func.value)
                if root:
                    out.append((root, node, "method"))
            if node.args and isinstance(node.args[0], ast.Name):
                out.append((node.args[0].id, node, "argument"))
            for k in node.keywords:
                if k.arg == "out":
                    for target in (k.value.elts if isinstance(k.value, ast.Tuple)
                                   else [k.value]):
                        root = _root(target)
                        if root:
                            out.append((root, node, "out"))
        for child in ast.iter_child_nodes(node):
            visit(child, isinstance(node, ast.Expr))

    visit(stmt)
    return out


def _root(node) -> str | None:
    """``W`` for ``W``, ``W[0]``, ``W.T[1:]``; None for what no name holds (``f()[0]``)."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _main_guard(test) -> bool | None:
    """True for ``__name__ == "__main__"``, False for ``!=``, None for any other test."""
    match test:
        case ast.Compare(left=left, ops=[ast.Eq() | ast.NotEq() as op], comparators=[right]):
            sides = {ast.dump(left), ast.dump(right)}
            if sides == {ast.dump(ast.Name("__name__", ast.Load())),
                         ast.dump(ast.Constant("__main__"))}:
                return isinstance(op, ast.Eq)
    return None


def _mutable(value) -> bool:
    return isinstance(value, (np.ndarray, list, dict, set, bytearray))


def _immutable(value) -> bool:
    return value is None or isinstance(value, (*_DATA, str, bytes, tuple, frozenset, type)) \
        and not isinstance(value, np.ndarray)


def _members(value, depth=0):
    """``value`` and what it holds (the items of tuples, lists, dicts), recursively."""
    yield value
    if depth < 20 and isinstance(value, (tuple, list, set, frozenset)):
        for v in value:
            yield from _members(v, depth + 1)
    elif depth < 20 and isinstance(value, dict):
        for v in (*value.keys(), *value.values()):
            yield from _members(v, depth + 1)


def _shares(value, affected) -> bool:
    """Whether ``value`` holds one of the ``affected`` objects, or an array sharing memory
    with one of them."""
    if not affected:
        return False
    for m in _members(value):
        for a in affected:
            if m is a or isinstance(m, np.ndarray) and isinstance(a, np.ndarray) and (
                    np.may_share_memory(m, a)):
                return True
    return False


def _same(a, b) -> bool:
    """Whether two constants are the same value (of the same type)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.all(
            (a == b) | (a != a) & (b != b)))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:  # noqa: BLE001 - values that do not compare are not the same
        return False


def _short(value) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "an int"
    return text if len(text) < 40 else type(value).__name__
