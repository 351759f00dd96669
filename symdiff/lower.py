"""A parsed function -> IR: statements, branches, loops and calls, over SSA names.

Every user statement becomes one or more equations (see ``expressions``); ``if`` and loops
become ``If`` and ``Loop`` blocks whose variables are merged (``phis``) or carried from one
iteration to the next; calls of the user's own functions are lowered in place.
"""

from __future__ import annotations

import ast
import dataclasses
import logging
import sys
import types

import numpy as np

from . import containers, rules, runtime
from .errors import Problem, SymdiffError
from .exits import AUX, RETURN, ExitError, single_exit
from .expressions import COVERAGE, OPS, Expressions, Val, _user_function, names_in
from .ir import IR, Eqn, If, Names, symbol
from .loops import Loops, assigned
from .parse import MISSING, NOT_LITERAL, FunctionSource, Parsed, literal

# Names the generated code uses for itself: NumPy, and every helper in runtime.py.
RESERVED = ("np", "SymdiffError", *(n for n, v in vars(runtime).items()
                                    if n.startswith("_") and callable(v)))


def lower(parsed: Parsed, wrt, kinds=None, has_aux=False) -> IR:
    """Lower ``parsed`` for differentiation with respect to ``wrt`` (names or positions),
    specialised on ``kinds`` (parameter -> kinds.Kind; a parameter left out may be anything).
    ``has_aux``: the function returns ``(value, aux)``; aux is run, not differentiated.
    """
    # Lowering recurses through the code as it nests (an expression in a call, a helper
    # inlined in a helper: ten frames a helper), and Python runs code deeper than its
    # default limit of 1000 frames allows that. The frames are Python's own, which since
    # 3.11 do not grow the C stack; SymPy, which does, sees only short expressions (DEPTH).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        ir = _Lowering(parsed, has_aux).run(wrt, kinds)
        # (with the kind of each leaf of a container: containers.start)
        return dataclasses.replace(ir, kinds={**(kinds or {}), **ir.kinds})
    finally:
        sys.setrecursionlimit(limit)


class _Lowering(Expressions, Loops):
    def __init__(self, parsed: Parsed, has_aux=False):
        self.has_aux = has_aux
        self.top = parsed
        self.parsed = parsed
        self.src = parsed.source
        self.node = parsed.node
        self.eqns: list = []
        self.problems: list[Problem] = []
        self.env: dict[str, str] = {}
        self.active: set[str] = set()
        self.data_globals: dict[str, object] = {}  # name -> dict or cell it is read from
        self.globals_used: dict[str, object] = {}
        self.line = self.node.lineno
        self.where = ("", "")
        self.bound: set[str] = set()
        self.local_functions: dict[str, FunctionSource] = {}
        self.enclosing: dict[str, str] = {}  # a nested helper's view of its definer's names
        self.stack: list = []
        self.depth = 0  # how many branches and loops the current statement is inside
        self.temps: set[str] = set()  # temporaries, which an assignment may rename
        self.memo: dict = {}  # (operation, operands, other arguments) -> the name of its value
        self.alias: dict[str, str] = {}  # SSA name -> a name of the same array object
        self.maybe: dict[str, set] = {}  # a branch's merge, a loop's phi -> the names it may be
        self.parsed_callees: dict = {}
        self.globals_where: dict = {}  # name -> the dict or cell it was found in
        self.first_user: dict[str, str] = {}  # name -> the function that first read it
        self.def_defaults: dict[int, dict] = {}  # id(nested def) -> its defaults' values
        self.caller_envs: list[dict] = []  # the variables of the functions being inlined into
        self.guards: dict = {}  # (id(container), name) -> (container, name, function)
        self.counter = 0
        self.label = ""
        self.starred: dict[str, str] = {}  # the function's *args, **kwargs: name -> stars
        self.ndims: dict[str, int] = {}  # SSA name -> its number of axes, where known
        self.arrays: set[str] = set()  # SSA names certainly bound to an ndarray
        self.depth_checked: set[int] = set()  # ids of equations _refuse_deep has seen
        self.trees: dict = {}  # a container being differentiated: its holder -> its Tree
        self.leaves: set[str] = set()  # the names of its leaves
        self.known: dict = {}  # SSA name -> its value, known when building (an unrolled counter)
        ids = _identifiers(self.node)
        self.locals = assigned(self.node.body)
        # NumPy is np in the generated code, unless the function uses np for something else.
        own = set(self.locals) | {a.arg for a in ast.walk(self.node.args)
                                  if isinstance(a, ast.arg)}
        self.np_alias = "np" if "np" not in ids or (
            parsed.namespace.lookup("np") is np and "np" not in own) else "_np"
        self.ids = set(ids)
        self.names = Names(ids | set(RESERVED) | {"_np", parsed.name, "grad_" + parsed.name})

    # --- errors ---

    def fail(self, node, message, hint=""):
        raise SymdiffError(problems=(self.src.problem(node, message, hint),))

    # --- the function ---

    def run(self, wrt, kinds=None) -> IR:
        params = self._params()
        wrt_names = self._wrt(params, wrt)
        for p in params:
            if p in RESERVED:
                raise self.src.error(self.node, f"the parameter name {p} is one the generated "
                                     "code uses for itself", "rename the parameter")
            self.env[p] = p
            self.bound.add(p)
        self.active = set(wrt_names)
        given = tuple(wrt_names)
        params, wrt_names, leaf_kinds = containers.start(self, params, wrt_names, kinds)
        a = self.node.args
        self.starred = {p.arg: "*" if p is a.vararg else "**" for p in (a.vararg, a.kwarg)
                        if p is not None}
        for default in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
            for n in ast.walk(default):  # the generated def repeats the defaults' code
                if isinstance(n, ast.Name) and self.parsed.namespace.lookup(n.id) is not MISSING:
                    self._use_global(n, n.id)
        try:
            body, returns = single_exit(_without_docstring(self.node.body))
        except ExitError as e:
            raise self.src.error(e.node, e.message, e.hint) from None
        self._statements(body)
        result = self.env.get(RETURN)
        if not self.problems and (result is None or not returns):
            what = "has no return statement" if result is None else \
                "does not return a value on every path"
            self.problems.append(self.src.problem(
                self.node, f"{self.parsed.name} {what}",
                "return the scalar value to differentiate"))
        if self.problems:
            raise SymdiffError(problems=tuple(self.problems))
        return IR(self.parsed.name, self.parsed, tuple(params), tuple(wrt_names),
                  tuple(self.eqns), result, frozenset(self.names.taken), frozenset(self.ids),
                  tuple(self.data_globals.items()), self.np_alias,
                  tuple((n, o, self.globals_where[n]) for n, o in self.globals_used.items()),
                  tuple(self.guards.values()), aux=self.env.get(AUX, ""),
                  kinds=leaf_kinds,
                  trees={p: self.trees[f"<{p}>"] for p in given if f"<{p}>" in self.trees},
                  given_wrt=given)

    def _params(self):
        a = self.node.args
        return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]

    def _wrt(self, params, wrt):
        a = self.node.args
        positional = [p.arg for p in (*a.posonlyargs, *a.args)]
        starred = [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        out = []
        for w in wrt:
            if isinstance(w, int) and not isinstance(w, bool):
                if not -len(positional) <= w < len(positional):
                    count = _count(len(positional), "positional parameter")
                    if starred:
                        stars = ", ".join(("*" if p is a.vararg else "**") + p.arg
                                          for p in (a.vararg, a.kwarg) if p is not None)
                        what = f"{count} and {stars}" if positional else \
                            f"no named parameter, only {stars}"
                        raise self.src.error(
                            self.node, f"wrt={w} is out of range: {self.parsed.name} has "
                            f"{what}, which cannot be differentiated",
                            "differentiate a function whose parameters are named (a "
                            "functools.wraps wrapper: the function it wraps, __wrapped__)")
                    raise self.src.error(self.node, f"wrt={w} is out of range: "
                                         f"{self.parsed.name} has {count}")
                w = positional[w]
            if w in starred:
                raise self.src.error(self.node, f"cannot differentiate with respect to *{w}",
                                     "name a regular parameter")
            if w not in params:
                raise self.src.error(self.node, f"{self.parsed.name} has no parameter {w!r}",
                                     "wrt names a parameter: " + ", ".join(params))
            out.append(w)
        return out

    def _poison(self, stmt):
        # Bind whatever a failed statement assigns, so later statements report their own
        # problems instead of "used before assignment".
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.env[n.id] = self.names.fresh(n.id.strip("<>") or "_t")
                self.bound.add(self.env[n.id])

    # --- statements ---

    def _statements(self, stmts):
        for stmt in stmts:
            self.line = stmt.lineno
            self.where = (f"line {stmt.lineno}{self.label}", self._statement_text(stmt))
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

    def _statement_text(self, stmt) -> str:
        """The statement's own text (without a trailing comment): its first line."""
        line = self.src.lines[stmt.lineno - 1] if stmt.lineno <= len(self.src.lines) else ""
        if stmt.end_lineno != stmt.lineno or isinstance(stmt, (ast.If, ast.For, ast.While)):
            return line.strip()
        raw = line.encode()
        return raw[stmt.col_offset:stmt.end_col_offset].decode(errors="replace").strip()

    def _statement(self, stmt):
        match stmt:
            case ast.Assign(targets=[target], value=value):
                self._assign(target, value)
            case ast.Assign():
                self.fail(stmt, "chained assignment (a = b = ...) is not supported",
                          "assign each name separately")
            case ast.AnnAssign(target=target, value=value) if value is not None:
                self._assign(target, value)
            case ast.AugAssign(target=ast.Name() as target, op=op, value=value):
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
            self._bind(target.id, self._expr(value), value)
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

    def _forget(self, name):
        """``name`` is free again (its equation now binds another): a temporary that reuses
        it must not inherit what was known of it."""
        self.active.discard(name)
        self.alias.pop(name, None)
        self.arrays.discard(name)
        self.ndims.pop(name, None)

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
            self.fail(call, f"{name} is not supported", "the NumPy and math functions in "
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

    def _bound_ssa(self, name) -> str:
        ssa = self._ssa(name)
        self.bound.add(ssa)
        return ssa

    def _ssa(self, name) -> str:
        """A fresh SSA name for ``name``: its own name first, then name_1, name_2, ..."""
        if name.startswith("<"):  # a pseudo-variable: the return value, a break flag
            base = ("_ret" if name == RETURN else "_aux" if name == AUX else
                    "_brk" if name.startswith("<break") else
                    "_done" if name.startswith("<done") else "_t")
            return self.names.fresh(base, numbered=base == "_t")
        if name in self.bound or name in self.globals_used or name in RESERVED:
            return self.names.fresh(name)
        return name

    def _bind(self, name, val: Val, node):
        if val.expr is None and isinstance(val.code, ast.Constant):
            val = self._constant(val.code)  # axis=None, mode="valid": run, no gradient
        if name != RETURN and containers.bind(self, name, val):
            return
        self._need_number(val, node)
        if name == RETURN and isinstance(val.code, ast.Name) and val.code.id in self.bound:
            self.env[name] = val.code.id  # return x: the result is x itself, not a copy
            return
        ssa = self._ssa(name)
        self.bound.add(ssa)
        self._define(ssa, val)
        self.env[name] = ssa

    def _define(self, ssa, val: Val):
        last = self.eqns[-1] if self.eqns else None
        if isinstance(last, Eqn) and last.kind in ("array", "const", "stop_gradient") and \
                isinstance(val.code, ast.Name) and val.code.id == last.out and \
                last.out in self.temps:
            # x = np.sum(y): name the array equation itself rather than copy its temporary.
            self.names.taken.discard(last.out)
            self.temps.discard(last.out)
            self.memo = {k: ssa if v == last.out else v for k, v in self.memo.items()}
            self.eqns[-1] = dataclasses.replace(last, out=ssa)
            if last.out in self.active:
                self.active.add(ssa)
            if last.out in self.alias:
                self.alias[ssa] = self.alias[last.out]
            if last.out in self.arrays:
                self.arrays.add(ssa)
            if last.out in self.ndims:
                self.ndims[ssa] = self.ndims[last.out]
            self._forget(last.out)
        else:
            self._emit_elementwise(ssa, val)
            if isinstance(val.code, ast.Name):  # b = a: one array, two names
                self.alias[ssa] = self._root(val.code.id)

    def _roots(self, name) -> set[str]:
        """Every array ``name`` may be, after branches and loops (``_root`` of each)."""
        roots, todo, seen = set(), [name], set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo.extend(self.maybe.get(n, ()))
            if n in self.alias and self.alias[n] != n:
                todo.append(self.alias[n])
            else:
                roots.add(n)
        return roots

    def _root(self, name) -> str:
        while name in self.alias and self.alias[name] != name:
            name = self.alias[name]
        return name

    def _call_statement(self, stmt, call):
        """A call made for its effect: print and logging run in the forward sweep, as
        written, and are not differentiated; other effects are refused, each saying why."""
        name = ast.unparse(call.func)
        if isinstance(call.func, ast.Attribute) and call.func.attr in _MUTATORS and \
                self._is_local_value(call.func.value):
            receiver = ast.unparse(call.func.value)
            self.fail(stmt, f"{name}(...) changes {receiver} in place, which symdiff does "
                      "not follow", "make a new array: np.stack([a, b]), np.concatenate, "
                      "arithmetic")
        fn = self._expr(call.func).value
        if fn is print or _logging(fn):
            code = self._constant_code(stmt)
            self.eqns.append(Eqn("", "assert", code, stmt.lineno, names_in(code), False,
                                 self.where))
            return
        if fn is breakpoint:
            self.fail(stmt, "breakpoint() inside a function being differentiated is not "
                      "supported", "remove it, and step into the gradient instead: "
                      "pdb.runcall(g.__wrapped__, ...)")
        self.fail(stmt, f"{name}(...) is called for its effect alone, which symdiff does "
                  "not follow", "a call whose value is used (y = ...); print and logging "
                  "calls, which run as written")

    def _assert(self, stmt):
        code = self._constant_code(stmt)
        self.eqns.append(Eqn("", "assert", code, stmt.lineno, names_in(code), False,
                             self.where))

    # --- control flow ---

    def _block(self, stmts):
        """Lower ``stmts`` into a list of their own; returns (equations, env after)."""
        saved, memo = self.eqns, dict(self.memo)
        self.eqns = []
        self.depth += 1
        try:
            self._statements(stmts)
        finally:
            self.depth -= 1
            self.memo = memo  # what a branch computed is not there after it
        out, self.eqns = self.eqns, saved
        return out, dict(self.env)

    def _if(self, stmt):
        cond = self._constant(stmt.test).code.id  # the branch taken, kept for the backward
        where, line = self.where, self.line
        before = dict(self.env)
        then, env_then = self._block(stmt.body)
        self.env = dict(before)
        orelse, env_else = self._block(stmt.orelse)
        self.where, self.line = where, line
        phis, env = [], dict(before)
        for name in dict.fromkeys([*env_then, *env_else]):
            t, e = env_then.get(name), env_else.get(name)
            if t == e:
                env[name] = t
                continue
            containers.refuse_merge(self, stmt, name, t, e)
            if t is None or e is None:
                # Bound on one path only: on the other (where Python would leave it
                # unbound), a stand-in whose every use raises UnboundLocalError, so that
                # every name the generated code copies exists.
                none = self._ssa(name)
                self.bound.add(none)
                unbound = ast.Call(ast.Name("_unbound", ast.Load()), [ast.Constant(name)], [])
                (then if t is None else orelse).append(Eqn(
                    none, "const", unbound, line, (), False, where))
                t, e = (none, e) if t is None else (t, none)
            merged = self._ssa(name)
            self.bound.add(merged)
            phis.append((merged, t, e))
            self.maybe[merged] = {t, e}
            env[name] = merged
            if t in self.active or e in self.active:
                self.active.add(merged)
        self.env = env
        self.eqns.append(If(cond, tuple(then), tuple(orelse), tuple(phis), line, where))

    def _ifexp(self, node) -> Val:
        self.counter += 1
        key = f"<ifexp{self.counter}>"
        stmt = ast.copy_location(ast.If(node.test, [
            ast.copy_location(ast.Assign([ast.Name(key, ast.Store())], node.body), node.body)], [
            ast.copy_location(ast.Assign([ast.Name(key, ast.Store())], node.orelse),
                              node.orelse)]), node)
        where, line = self.where, self.line
        self._if(stmt)
        self.where, self.line = where, line
        name = self.env[key]
        return Val(symbol(name), ast.Name(name, ast.Load()))

    # --- calls of user functions ---

    def _guard(self, func, obj):
        """Remember where a called helper was found: if it is rebound, rebuild."""
        if isinstance(func, ast.Name) and func.id not in self.local_functions:
            container = self.parsed.namespace.container(func.id)
            self.guards[(id(container), func.id)] = (container, func.id, obj)
        elif isinstance(func, ast.Attribute):
            base = self._expr(func.value).value
            if isinstance(base, types.ModuleType):
                self.guards[(id(base), func.attr)] = (vars(base), func.attr, obj)
                return
            # Ops.sq(x), cfg.act(x): found by its path from a module-level name, which
            # the guard follows again (the class or object may be rebound, or its attribute).
            path = []
            while isinstance(func, ast.Attribute):
                path.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name) and func.id not in self.local_functions and \
                    func.id not in self.env and self.enclosing.get(func.id) is None:
                container = self.parsed.namespace.container(func.id)
                dotted = ".".join([func.id, *reversed(path)])
                self.guards[(id(container), dotted)] = (container, dotted, obj)

    def _def_time_defaults(self, fn, positional) -> dict:
        """A helper's defaults as the def evaluated them (not as its names are now)."""
        if isinstance(fn, FunctionSource):
            return self.def_defaults.get(id(fn.node), {})
        values = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()):],
                          fn.__defaults__ or (), strict=True))
        values.update(fn.__kwdefaults__ or {})
        out = {}
        for p, v in values.items():
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
                v = float(v) if isinstance(v, np.floating) else v
                out[p] = self._expr(ast.Constant(int(v) if isinstance(v, np.integer) else v))
        return out  # others (arrays...): read from the def's own expression

    def _refuse_data_defaults(self, fn, callee, positional, defaults, known):
        """A helper's default that is data (an array, a list...) written as an expression
        (c=D): Python keeps the object the def made, but reading D when the gradient runs
        would see whatever D is then. Refused, rather than differentiate another value."""
        if isinstance(fn, FunctionSource):  # the command line: defaults read statically
            return
        values = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()):],
                          fn.__defaults__ or (), strict=True))
        values.update(fn.__kwdefaults__ or {})
        for p, node in defaults.items():
            if p in known or not isinstance(values.get(p), (np.ndarray, list, dict, set, tuple)):
                continue
            if literal(node) is NOT_LITERAL:
                self.fail(node, f"{callee.name}'s default {p}={ast.unparse(node)} is the value "
                          "the def made, which symdiff cannot read when the gradient runs",
                          f"pass {p} to {callee.name} explicitly")

    def _inline(self, node, fn) -> Val:
        """A call of a user function: its body lowered in place, names kept apart."""
        from .parse import parse

        if any(f is fn for f in self.stack):
            self.fail(node, f"{ast.unparse(node.func)} calls itself (recursion is not "
                      "supported)", "a loop")
        if id(fn) not in self.parsed_callees:
            self.parsed_callees[id(fn)] = (fn, parse(fn))
        callee = self.parsed_callees[id(fn)][1]
        a = callee.node.args
        if a.vararg or a.kwarg:
            self.fail(node, f"{callee.name} takes *args or **kwargs, which are not supported",
                      "name each parameter")
        positional = [p.arg for p in (*a.posonlyargs, *a.args)]
        keyword_only = [p.arg for p in a.kwonlyargs]
        if len(node.args) > len(positional):
            self.fail(node, f"{callee.name} takes {len(positional)} positional arguments",
                      f"{callee.name}({', '.join(positional + keyword_only)})")
        given = dict(zip(positional, node.args, strict=False))
        for k in node.keywords:
            if k.arg not in positional + keyword_only or k.arg in given:
                self.fail(k.value, f"{callee.name} has no parameter {k.arg!r} (or it is "
                          "given twice)", f"{callee.name}({', '.join(positional + keyword_only)})")
            given[k.arg] = k.value
        defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults,
                            strict=True))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                         if d is not None})
        args, problems = {}, []
        for p in positional + keyword_only:
            if p in given:
                args[p] = self._lowered(given[p], problems)
            elif p not in defaults:
                self.fail(node, f"{callee.name} needs the argument {p!r}",
                          f"{callee.name}({', '.join(positional + keyword_only)})")
        if problems:
            raise SymdiffError(problems=tuple(problems))
        nested = isinstance(fn, FunctionSource) and fn.name in self.local_functions and \
            self.local_functions[fn.name] is fn
        def_time = self._def_time_defaults(fn, positional)
        self._refuse_data_defaults(fn, callee, positional, defaults, set(args) | set(def_time))
        saved = (self.parsed, self.src, self.env, self.locals, self.local_functions,
                 self.enclosing, self.label, self.where, self.line)
        self.stack.append(fn)
        self.caller_envs.append(self.env)
        self.enclosing = {**self.enclosing, **self.env} if nested else {}
        self.parsed, self.src, self.env = callee, callee.source, {}
        self.locals, self.local_functions = assigned(callee.node.body), {}
        self.ids |= _identifiers(callee.node)
        self.names.taken |= _identifiers(callee.node)
        self.label = f" of {callee.name}"
        try:
            for p in positional + keyword_only:
                val = args[p] if p in args else def_time.get(p) or self._expr(defaults[p])
                self._bind(p, val, given.get(p, node))
            body, returns = single_exit(_without_docstring(callee.node.body))
            n_problems = len(self.problems)
            self._statements(body)
            if len(self.problems) > n_problems:
                found = tuple(self.problems[n_problems:])
                del self.problems[n_problems:]  # raised once more, by the caller's statement
                raise SymdiffError(problems=found) from None
            result = self.env.get(RETURN)
            if result is None or not returns:
                self.fail(callee.node, f"{callee.name} does not return a value on every path",
                          "end every path with return")
        except ExitError as e:
            raise self.src.error(e.node, e.message, e.hint) from None
        finally:
            self.stack.pop()
            self.caller_envs.pop()
            (self.parsed, self.src, self.env, self.locals, self.local_functions,
             self.enclosing, self.label, self.where, self.line) = saved
        return Val(symbol(result), ast.Name(result, ast.Load()))


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
_RECURSION_LIMIT = 20_000


def _depth(node) -> int:
    """How many levels ``node``'s tree has (without recursion: it may be thousands)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(n))
    return deepest


def _count(n: int, what: str) -> str:
    """``1 positional parameter``, ``2 positional parameters``."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _without_docstring(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _identifiers(node) -> set[str]:
    ids = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return ids | {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
