"""Statements -> equations: assignments, unpacking, asserts, calls made for their effect.

The lowering of a function (``lower._Lowering``) mixes this in. Each statement becomes one
or more equations over fresh SSA names; a statement that fails binds what it assigns to a
stand-in, so that later statements report their own problems too.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import re
import warnings

from . import containers, rules, runtime
from .errors import SymdiffError
from .exits import AUX, RETURN
from .expressions import COVERAGE, OPS, names_in
from .ir import Eqn
from .parse import FunctionSource
from .references import _user_function

_USER_LINE = re.compile(r"#\s*(line \d+(?: of \w+)?)")


class Statements:
    """Statements; relies on ``lower._Lowering`` for everything else (``_ssa``, ``_bind``,
    ``_define``, ``_if``, ``_loop``, ``_inline``, the expressions)."""

    def _statements(self, stmts):
        for stmt in stmts:
            self.line = stmt.lineno
            self.where = (self._line_label(stmt), self._statement_text(stmt))
            first = len(self.eqns)
            try:
                self._statement(stmt)
                self._refuse_deep(stmt, self.eqns[first:])
            except SymdiffError as e:
                # An error with no place of its own (a helper whose source is unreadable)
                # is reported at the statement that led to it.
                self.problems.extend(e.problems or (self.src.problem(stmt, str(e)),))
                self._poison(stmt)
            except RecursionError:
                if len(self.stack) > _MAX_DEPTH:
                    message, hint = (f"helpers call each other {len(self.stack)} deep here, "
                                     "more than symdiff can follow", "fewer nested helpers")
                else:
                    message, hint = (f"this statement nests {_depth(stmt)} levels deep, more "
                                     "than symdiff can read", "split it into several "
                                     "assignments")
                self.problems.append(self.src.problem(stmt, message, hint))
                self._poison(stmt)

    def _refuse_deep(self, stmt, eqns):
        """Deep arithmetic is cut into temporaries (expressions.DEPTH); what is run as
        written (a condition, a stop_gradient's argument) is not, and the generated code
        could not be printed: refuse it here, where it is."""
        for eqn in eqns:
            if id(eqn) in self.depth_checked:  # an inlined helper's, checked in it
                continue
            self.depth_checked.add(id(eqn))
            code = eqn.code if isinstance(eqn, Eqn) else getattr(eqn, "header", None)
            if code is not None and _depth(code) > _MAX_DEPTH:
                self.fail(stmt, f"this statement nests {_depth(stmt)} levels deep where "
                          "symdiff cannot cut it into parts (a condition, an argument of "
                          "stop_gradient, an index...)", "split it into several assignments")

    def _line_label(self, stmt) -> str:
        """``line N`` (of the helper inlined): in a program symdiff wrote (a tangent
        program differentiated again), the user's line its comment names."""
        if self.parsed.namespace.globals.get("__name__") == "symdiff.generated" and \
                stmt.lineno <= len(self.src.lines):
            found = _USER_LINE.search(self.src.lines[stmt.lineno - 1])
            if found:
                return found.group(1)
        return f"line {stmt.lineno}{self.label}"

    def _statement_text(self, stmt) -> str:
        """The statement's own text (without a trailing comment): its first line."""
        line = self.src.lines[stmt.lineno - 1] if stmt.lineno <= len(self.src.lines) else ""
        if stmt.end_lineno != stmt.lineno or isinstance(stmt, (ast.If, ast.For, ast.While)):
            if self.parsed.namespace.globals.get("__name__") == "symdiff.generated":
                line = _USER_LINE.split(line)[0].rstrip().removesuffix("#")
            return line.strip()
        raw = line.encode()
        return raw[stmt.col_offset:stmt.end_col_offset].decode(errors="replace").strip()

    def _statement(self, stmt):
        match stmt:
            case ast.Assign(targets=[ast.Subscript() as target], value=value):
                self._write(stmt, target, value)
            case ast.AugAssign(target=ast.Subscript() as target, op=op, value=value):
                self._write(stmt, target, value, op)
            case ast.Assign(targets=[target], value=value):
                self._assign(target, value)
            case ast.Assign():
                self.fail(stmt, "chained assignment (a = b = ...) is not supported",
                          "assign each name separately")
            case ast.AnnAssign(target=target, value=value) if value is not None:
                self._assign(target, value)
            case ast.AugAssign(target=ast.Name() as target, op=op, value=value):
                if self._list_augmented(stmt):  # hs += [h]
                    return
                if not isinstance(op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
                    self.fail(stmt, f"augmented assignment {OPS.get(type(op), '?')}= is "
                              "not supported", "+= -= *= /= **=")
                self._refuse_shared(stmt, target.id)
                load = ast.copy_location(ast.Name(target.id, ast.Load()), target)
                self._assign(target, ast.copy_location(ast.BinOp(load, op, value), stmt))
            case ast.Pass():
                pass
            case ast.Expr(value=ast.Constant(value=str())):
                pass
            case ast.Assert():
                self._assert(stmt)
            case ast.Expr(value=ast.Call() as call):
                self._call_statement(stmt, call)
            case ast.If():
                self._if(stmt)
            case ast.For() | ast.While():
                self._loop(stmt)
            case ast.FunctionDef(decorator_list=[]):
                if self.depth or stmt.name in self.local_functions:
                    where = "inside a branch or loop" if self.depth else "twice"
                    self.fail(stmt, f"a helper defined {where} is not supported",
                              "define each helper once, at the top of the function (or at "
                              "module level)")
                self.local_functions[stmt.name] = FunctionSource(
                    stmt.name, stmt, self.src, self.parsed.namespace)
                # Defaults are evaluated where the def runs, as Python does.
                a = stmt.args
                params = [p.arg for p in (*a.posonlyargs, *a.args)]
                pairs = [*zip(params[len(params) - len(a.defaults):], a.defaults, strict=True),
                         *((p.arg, d) for p, d in zip(a.kwonlyargs, a.kw_defaults,
                                                       strict=True) if d is not None)]
                self.def_defaults[id(stmt)] = {p: self._expr(d) for p, d in pairs}
            case _:
                self._unsupported_statement(stmt)

    def _unsupported_statement(self, stmt):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            if isinstance(target, (ast.Subscript, ast.Attribute)):
                containers.refuse_write(self, target)
            if isinstance(target, ast.Attribute):  # self.calls += 1
                self.fail(stmt, f"setting the attribute {ast.unparse(target)} is not "
                          "supported: a gradient changes nothing outside itself",
                          "set it outside the function being differentiated (a method's "
                          "gradient may read attributes of self)")
            if isinstance(target, ast.Subscript):
                self.fail(stmt, "in-place writes to arrays are not supported",
                          "build a new array (np.where, np.concatenate, arithmetic)")
        kinds = {
            ast.Try: "try", ast.With: "with", ast.Global: "global", ast.Nonlocal: "nonlocal",
            ast.FunctionDef: "decorated def", ast.ClassDef: "class", ast.Import: "import",
            ast.ImportFrom: "import", ast.Delete: "del", ast.Raise: "raise", ast.Match: "match",
            ast.AsyncFunctionDef: "async def", ast.AsyncFor: "async for",
            ast.AsyncWith: "async with",
        }
        if hasattr(ast, "TryStar"):
            kinds[ast.TryStar] = "try"
        what = kinds.get(type(stmt))
        if what is not None:
            self.fail(stmt, f"'{what}' statements are not supported", _STATEMENTS)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom,
                                                                    ast.Await)):
            self.fail(stmt, "generators and coroutines are not supported",
                      "a plain function that returns a scalar")
        if isinstance(stmt, ast.Expr):
            self.fail(stmt, "an expression statement has no effect on the value",
                      "assign the value to a name, or remove the statement")
        self.fail(stmt, f"{type(stmt).__name__} statements are not supported", _STATEMENTS)

    def _assign(self, target, value):
        if isinstance(target, ast.Name) and target.id == RETURN and self.has_aux and \
                self.parsed is self.top:
            value = self._aux(value)
        if isinstance(target, ast.Name):
            if target.id == RETURN and isinstance(value, ast.Tuple):
                self.fail(value, "the function returns a tuple; a gradient needs a scalar "
                          "output", "return one scalar (np.sum, np.mean reduce an array)")
            if target.id == RETURN and isinstance(value, ast.Constant) and value.value is None:
                self.fail(value, "return without a value", "return the scalar to differentiate")
            if self._starts_a_list(target.id, value):  # hs = [h0], then hs.append(h)
                return
            self._bind(target.id, self._expr(value), value)
            containers.remember(self, target.id, value)
            ndim = self.ndims.get(self.env[target.id], 0)
            if target.id == RETURN and ndim and self.parsed is self.top:
                self.fail(value, f"{self.parsed.name} returns an array of {ndim} dimensions; "
                          "a gradient needs a scalar output",
                          "return one scalar (np.sum, np.mean reduce an array)")
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if containers.unpack(self, target, value):
                return
            if isinstance(value, ast.Call):
                self._unpacked_call(value)
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) != len(
                    target.elts):
                self.fail(value, "tuple unpacking needs a tuple of the same length on the right",
                          "a, b = expr1, expr2")
            starred = [t for t in target.elts if isinstance(t, ast.Starred)]
            if starred:
                self.fail(starred[0], "starred unpacking (a, *b = ...) is not supported",
                          "indexing: a, b = A[0], A[1:]")
            if not all(isinstance(t, ast.Name) for t in target.elts):
                self.fail(target, "unpacking into anything but names is not supported",
                          "a, b = expr1, expr2")
            if not isinstance(value, (ast.Tuple, ast.List)):
                self._unpack(target, value)
                return
            # Evaluate every right-hand side before binding any name: a, b = b, a swaps.
            vals = [self._expr(v) for v in value.elts]
            for t, v, node in zip(target.elts, vals, value.elts, strict=True):
                self._bind(t.id, v, node)
            return
        self._unsupported_statement(ast.Assign(targets=[target], value=value,
                                               lineno=target.lineno,
                                               col_offset=target.col_offset))

    def _aux(self, value):
        """``return value, aux`` under has_aux: aux is run as written, without gradient
        (it may be any object); returns the value's part."""
        if not (isinstance(value, ast.Tuple) and len(value.elts) == 2 and not any(
                isinstance(e, ast.Starred) for e in value.elts)):
            self.fail(value, "with has_aux=True the function returns a pair (value, aux), "
                      "written out in the return statement", "return loss, aux")
        aux = value.elts[1]
        code = self._constant_code(aux)
        if isinstance(code, ast.Name):
            self.env[AUX] = code.id
        else:
            out = self._ssa(AUX)
            self.bound.add(out)
            self.eqns.append(Eqn(out, "stop_gradient", code, self.line, names_in(code),
                                 False, self.where))
            self.env[AUX] = out
        return value.elts[0]

    def _unpack(self, target, value):
        """n, m = A.shape; a, b = A (its rows). The unpacking runs as written, so that a
        value of another length fails as Python fails; each name is then bound to its
        part: a value without gradient as it came, a differentiated one as ``A[i]``, so that
        the gradient flows back through indexing."""
        val = self._expr(value)
        if isinstance(val.value, containers.Tree):  # w, v = np.linalg.eigh(a)
            tree = val.value
            if len(tree.items) != len(target.elts):
                self.fail(target, f"{ast.unparse(value.func)} returns {len(tree.items)} "
                          f"values, unpacked here into {len(target.elts)}",
                          f"{len(tree.items)} names")
            for t, item in zip(target.elts, tree.items, strict=True):
                self._name_part(t.id, item)
            return
        if val.expr is None and isinstance(val.value, (tuple, list)):
            val = self._constant(value)  # a module's tuple of constants
        name = self._operand(val, value)
        whole = ast.Name(name, ast.Load())
        last = self.eqns[-1] if self.eqns else None
        if isinstance(last, Eqn) and last.kind == "const" and last.out == name and \
                name in self.temps:
            # n, m = A.shape: unpack the shape itself, not a temporary holding it.
            self.eqns.pop()
            self.names.taken.discard(name)
            self.temps.discard(name)
            self.memo = {k: v for k, v in self.memo.items() if v != name}
            self._forget(name)
            whole = last.code
        parts = [self.names.fresh("_t", numbered=True) for _ in target.elts]
        self.bound.update(parts)
        self.temps.update(parts)
        check = ast.Assign([ast.Tuple([ast.Name(p, ast.Store()) for p in parts],
                                      ast.Store())], whole)
        for node in ast.walk(check):
            ast.copy_location(node, value)
        self.eqns.append(Eqn("", "assert", check, self.line, names_in(whole), False,
                             self.where))
        if name not in self.active:
            for t, p in zip(target.elts, parts, strict=True):
                ssa = self._bound_ssa(t.id)
                self.eqns.append(Eqn(ssa, "const", ast.Name(p, ast.Load()), self.line, (p,),
                                     False, self.where))
                self.env[t.id] = ssa
            return
        self.counter += 1
        key = f"<unpacked{self.counter}>"
        self.env[key] = name
        for i, t in enumerate(target.elts):
            row = ast.Subscript(ast.Name(key, ast.Load()), ast.Constant(i), ast.Load())
            for node in ast.walk(row):
                ast.copy_location(node, value)
            self._bind(t.id, self._expr(row), value)
        del self.env[key]  # the statement's own: not a variable to merge after a branch

    def _name_part(self, name, part):
        """``name`` bound to ``part``, an output of a call returning several values: its
        equation takes the name (``w = _t0[0]``), as ``x = np.sum(y)`` names its own."""
        at = next((i for i in range(len(self.eqns) - 1, -1, -1) if isinstance(
            self.eqns[i], Eqn) and self.eqns[i].out == part), None)
        if at is None or part not in self.temps:
            self.env[name] = part
            return
        ssa = self._bound_ssa(name)
        self.eqns[at] = dataclasses.replace(self.eqns[at], out=ssa)
        if part in self.active:
            self.active.add(ssa)
        self.names.taken.discard(part)
        self.temps.discard(part)
        self._forget(part)
        self.env[name] = ssa

    def _forget(self, name):
        """``name`` is free again (its equation now binds another): a temporary that reuses
        it must not inherit what was known of it."""
        self.active.discard(name)
        self.alias.pop(name, None)
        self.arrays.discard(name)
        self.ndims.pop(name, None)
        self.lists.discard(name)

    def _unpacked_call(self, call):
        """a, b = f(x): say what is wrong with f, rather than with the unpacking."""
        if isinstance(call.func, ast.Attribute) and self._is_local_value(call.func.value):
            return
        fn = self._expr(call.func).value
        name = ast.unparse(call.func)
        if isinstance(fn, FunctionSource) or _user_function(fn):
            self.fail(call, f"{name} returns several values, which symdiff does not "
                      "support yet", "a helper for each value, each returning one")
        if rules.lookup(fn) is None and not rules.no_gradient(fn) and \
                fn is not runtime.stop_gradient:
            self.fail(call, f"{name} is not supported", "the NumPy and math functions: "
                      + COVERAGE)

    def _refuse_shared(self, stmt, name):
        """x += 1 changes an ndarray in place: where another name may share x's array, the
        generated code checks, when it runs, that x is not an array (a number is fine)."""
        if name not in self.env:
            return
        roots = self._roots(self.env[name])
        # Other names in this function, and in the functions calling this helper.
        scopes = [(n, ssa) for n, ssa in self.env.items() if n != name] + [
            (n, ssa) for env in self.caller_envs for n, ssa in env.items()]
        sharing = {n: ssa for n, ssa in scopes if not n.startswith("<")
                   and not roots.isdisjoint(self._roots(ssa))}
        others = sorted(sharing)
        if not others:
            return
        problem = self.src.problem(
            stmt, f"{name} is an array shared with {others[0]}, so NumPy's augmented "
            f"assignment changes {others[0]} too, which symdiff does not follow",
            f"{name} = {name} {OPS.get(type(stmt.op), '?')} ..., which makes a new array")
        # A certainly-made ndarray that certainly shares (no branch or loop in between):
        # refuse it now, not at the call.
        if len(roots) == 1 and roots <= self.arrays and any(
                self._roots(ssa) == roots for ssa in sharing.values()):
            raise SymdiffError(problems=(problem,))
        # Whether they share it depends on the path taken (b = M in a branch, or in a loop
        # that may not run): the check compares the arrays themselves.
        candidates = sorted(set(sharing.values()))
        check = ast.Expr(ast.Call(ast.Name("_not_in_place", ast.Load()), [
            ast.Name(self.env[name], ast.Load()), ast.Constant(problem.message),
            ast.Constant(problem.hint),
            *(ast.Name(n, ast.Load()) for n in candidates)], []))
        self.eqns.append(Eqn("", "assert", check, stmt.lineno, (self.env[name], *candidates),
                             False, self.where))

    def _call_statement(self, stmt, call):
        """A call made for its effect: print, logging and warnings.warn run in the forward
        sweep, as written, and are not differentiated; other effects are refused, each
        saying why."""
        if self._list_statement(stmt, call):  # hs.append(h)
            return
        name = ast.unparse(call.func)
        if isinstance(call.func, ast.Attribute) and call.func.attr in _MUTATORS and \
                self._is_local_value(call.func.value):
            receiver = ast.unparse(call.func.value)
            self.fail(stmt, f"{name}(...) changes {receiver} in place, which symdiff does "
                      "not follow", "make a new array: np.stack([a, b]), np.concatenate, "
                      "arithmetic")
        if isinstance(call.func, ast.Name) and call.func.id == "_missed_write" and \
                self.parsed.namespace.lookup(call.func.id) is runtime._missed_write:
            # A check a tangent program keeps (read again for a second derivative): run.
            code = ast.Expr(ast.Call(call.func, [self._constant_code(a) for a in call.args],
                                     []))
            self.eqns.append(Eqn("", "assert", code, stmt.lineno, names_in(code), False,
                                 self.where))
            return
        fn = self._expr(call.func).value
        if fn is print or fn is warnings.warn or _logging(fn):
            code = self._constant_code(stmt)
            self.eqns.append(Eqn("", "assert", code, stmt.lineno, names_in(code), False,
                                 self.where))
            return
        if fn is breakpoint:
            self.fail(stmt, "breakpoint() inside a function being differentiated is not "
                      "supported", "remove it, and step into the gradient instead: "
                      "pdb.runcall(g.function_for(*args), *args)")
        self.fail(stmt, f"{name}(...) is called for its effect alone, which symdiff does "
                  "not follow", "a call whose value is used (y = ...); print, logging "
                  "and warnings.warn calls, which run as written")

    def _assert(self, stmt):
        code = self._constant_code(stmt)
        self.eqns.append(Eqn("", "assert", code, stmt.lineno, names_in(code), False,
                             self.where))


_STATEMENTS = "assignments, if/else, for, while, return, assert, pass, nested def"


# Methods that change their list, dict, set or array in place.
_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
             "update", "setdefault", "add", "discard", "fill", "resize", "put", "itemset",
             "partition", "setflags", "__setitem__", "__iadd__"}


def _logging(fn) -> bool:
    """A function or a logger's method of the logging module (logging.info, log.debug)."""
    owner = getattr(fn, "__self__", None)
    return getattr(fn, "__module__", None) == "logging" or isinstance(owner, (
        logging.Logger, logging.LoggerAdapter))


# How deeply the code of one generated statement may nest: printing it (ast.unparse)
# recurses a few frames a level, within Python's default limit of 1000.
_MAX_DEPTH = 100


def _depth(node) -> int:
    """How many levels ``node``'s tree has (without recursion: it may be thousands)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest
