"""One file's syntax tree -> the names its module-level statements bind, none of them run.

Functions, imports, constants evaluated from their syntax, and the names left unresolved."""

from __future__ import annotations

import ast
import importlib
import os
import sys
import types

import numpy as np

from .parse import MISSING, FunctionSource, Namespace
from .static_records import DefTime, Skipped, StaticModule, Unresolved
from .static_statements import IN_PLACE_IDS, bound_names, changed_in_place, main_guard
from .static_values import (
    BINOPS,
    DATA,
    NotConstant,
    describe,
    guard,
    guard_call,
    immutable,
    is_dtype,
    members,
    mutable,
    number,
    safe_call,
    same,
    shares,
)


class Reader:
    """Reads one file's module-level statements in order, running none of them: what each
    binds (``globals``, ``functions``, ``imports``) or leaves ``unresolved``, and why."""

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
            case ast.If(test=test) if main_guard(test) is not None:
                # `if __name__ == "__main__":` does not run when the file is imported.
                self.depth += 1
                for s in (stmt.orelse if main_guard(test) else stmt.body):
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
                except NotConstant as e:
                    for t in targets:
                        self.unbind(t.id, stmt, str(e))
                    return
                for t, v in zip(targets, evaluated, strict=True):
                    self.bind(t.id, v, stmt)
            case ast.AnnAssign(target=ast.Name(id=name), value=value) if value is not None:
                self.assign(name, value, stmt)
            case ast.AugAssign(target=ast.Name(id=name), op=op, value=value):
                if not mutable(self.globals.get(name)):  # an array's W += 1: in place
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
                for name in bound_names(stmt):
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
                for name in bound_names(s):
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
            except NotConstant:
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
                except NotConstant:
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
            decorator = describe(stmt.decorator_list[0]).strip("'")
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
                        if same(self.constant(node), value):
                            continue
                    except NotConstant:
                        pass
                out.setdefault(name, {})[p] = DefTime(node, None if reason else value,
                                                      fs.node.lineno, reason)
        return out

    def changes(self, stmt) -> list[tuple[str, object, ast.AST]]:
        """The module-level data ``stmt`` changes in place: (name, value, where)."""
        out = []
        for name, node, kind in changed_in_place(stmt):
            value = self.globals.get(name, MISSING)
            if isinstance(value, StaticModule) and kind != "argument":
                self.changed_elsewhere(value, name, node)
                continue
            if value is MISSING or isinstance(value, (types.ModuleType, FunctionSource)) or (
                    kind == "augmented" and not mutable(value)) or (
                    kind == "method" and immutable(value)):
                continue
            if kind == "argument":  # np.copyto(W, ...): only the functions that write
                try:
                    if id(self.reference(node.func)) not in IN_PLACE_IDS:
                        continue
                except NotConstant:
                    continue
            out.append((name, value, node))
        return out

    def changed_elsewhere(self, module, name, node):
        """``helpers.GAIN = 5.0`` (or ``helpers.W[0] = 1.0``...) of a local module read
        already: the names of it that ``node`` changes are no longer known, there too."""
        record = self.loader.records.get(module.__file__)
        text = describe(node).strip("'")
        where = f"{os.path.basename(self.source.filename)}, line {node.lineno}: {text}"
        for sub in ast.walk(node):
            if not (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and (
                    sub.value.id == name)) or sub.attr.startswith("__"):
                continue
            value = vars(module).pop(sub.attr, None)
            affected = [m for m in members(value) if mutable(m)]
            namespaces = [self.globals] + [vars(m) for m in self.loader.by_file.values()
                                           if m is not module]
            for names in namespaces:  # from helpers import W: the same array, changed
                for other, v in list(names.items()):
                    if not isinstance(v, (types.ModuleType, FunctionSource)) and (
                            shares(v, affected)):
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
        text = describe(node).strip("'")
        where = f"line {node.lineno}: {text}"
        hint = ("give it its final value where it is defined (or change a copy: "
                "np.array(...)); or use grad() in Python")
        affected = [m for m in members(value) if mutable(m)]
        for other, v in list(self.globals.items()):
            if other != name and not isinstance(v, (types.ModuleType, FunctionSource)) and (
                    shares(v, affected)):
                self.unbind(other, node, f"it shares its data with {name}, changed in place "
                            f"at {where}", f"{other!r} shares its data with {name!r}, which "
                            f"is changed in place at module level ({where}); symdiff reads "
                            "the file without running it and does not follow that", hint)
        self.unbind(name, node, f"changed in place at {where}",
                    f"{name!r} is changed in place at module level ({where}); symdiff "
                    "reads the file without running it and does not follow that", hint)
        for params in self.deftime.values():
            for entry in params.values():
                if not entry[2] and shares(entry[1], affected):
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
        except NotConstant as e:
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
                if isinstance(obj, DATA) or obj is None or is_dtype(obj):
                    return obj
                raise NotConstant(f"{ast.unparse(node)} is not a number")
            case ast.UnaryOp(op=ast.USub() | ast.UAdd() as op, operand=operand):
                v = number(self.constant(operand), node)
                return -v if isinstance(op, ast.USub) else +v
            case ast.BinOp(left=left, op=op, right=right) if type(op) in BINOPS:
                a = number(self.constant(left), node)
                b = number(self.constant(right), node)
                guard(op, a, b)
                try:
                    return BINOPS[type(op)](a, b)
                except (ArithmeticError, ValueError, TypeError) as e:
                    raise NotConstant(f"{ast.unparse(node)} fails: {e}") from None
            case ast.Call(func=func, args=args, keywords=keywords):
                fn = self.reference(func)
                if not safe_call(fn):
                    raise NotConstant(f"a call of {ast.unparse(func)}")
                if any(isinstance(a, ast.Starred) for a in args) or any(
                        k.arg is None for k in keywords):
                    raise NotConstant("a call with * or ** arguments")
                pos = [self.constant(a) for a in args]
                kw = {k.arg: self.constant(k.value) for k in keywords}
                guard_call(fn, pos, kw)
                try:
                    return fn(*pos, **kw)
                except Exception as e:  # noqa: BLE001 - np.zeros('a') and the like
                    raise NotConstant(f"{ast.unparse(node)} fails: {e}") from None
        raise NotConstant(f"{describe(node)} is not a constant expression")

    def value_of(self, name, node):
        if name in self.unresolved:
            raise NotConstant(f"{name} is not known: {self.unresolved[name].reason}")
        value = self.namespace.lookup(name)
        if isinstance(value, (*DATA, tuple, list, dict, str, bytes)) or value is None or (
                is_dtype(value)):
            return value
        raise NotConstant(f"{name} is not a number")

    def reference(self, node):
        """What a name or a dotted name (``np.linalg.norm``) refers to."""
        if isinstance(node, ast.Name):
            if node.id in self.unresolved:
                raise NotConstant(f"{node.id} is not known: "
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
                    raise NotConstant(f"{ast.unparse(node)} is not known: "
                                      f"{record.unresolved[node.attr].reason}")
                try:
                    obj = getattr(base, node.attr)
                except AttributeError:
                    raise NotConstant(f"{ast.unparse(node)} does not exist") from None
                if not isinstance(obj, FunctionSource):
                    return obj
        raise NotConstant(f"{describe(node)} is not a module-level name symdiff can read")


_KINDS = {ast.If: "an if block", ast.For: "a for loop", ast.While: "a while loop",
          ast.With: "a with block", ast.ClassDef: "a class definition",
          ast.AsyncFunctionDef: "an async def", ast.Match: "a match statement",
          ast.Delete: "a del statement", ast.Assign: "an assignment to several targets",
          ast.AugAssign: "an augmented assignment", ast.AnnAssign: "an annotation"}
