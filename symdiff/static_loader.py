"""FILE's path -> the local modules it imports, each read once (``Loader``), none of them run.

``script_path`` puts FILE's folder first on sys.path while ``--check`` runs it."""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import os
import sys
import types

from .errors import Problem, SymdiffError
from .static_reader import Reader
from .static_records import Module, StaticModule
from .static_source import source_tree
from .static_statements import bound_names


class Loader:
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
        reader = Reader(path, source, self, None if top else vars(stand_in),
                        None if top else package)
        self.reading.add(id(stand_in))
        try:
            for stmt in tree.body:
                try:
                    reader.statement(stmt)
                except RecursionError:
                    for bound in bound_names(stmt):
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
            source, tree = source_tree(os.path.abspath(spec.origin), data)
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
