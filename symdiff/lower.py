"""A parsed function -> IR: equations that each assign one fresh name, with SymPy images.

Every user statement becomes one or more equations. An elementwise equation keeps the
user's own expression (names renamed to their SSA versions) for the forward sweep and its
SymPy image for differentiation; an array operation (np.sum, ...) gets an equation of its
own; ``stop_gradient(...)`` contents become constant equations with no adjoint.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import numbers
import sysconfig
import types
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from . import rules, runtime
from .errors import Problem, SymdiffError
from .exits import RETURN, ExitError, single_exit
from .ir import IR, Eqn, If, Loop, Names, symbol
from .parse import MISSING, FunctionSource, Parsed
from .runtime import stop_gradient

COVERAGE = "the coverage table in README.md"
# Names the generated code uses for itself: NumPy, and every helper in runtime.py.
RESERVED = ("np", "SymdiffError", *(n for n, v in vars(runtime).items()
                                    if n.startswith("_") and callable(v)))


@dataclass
class _Val:
    """A lowered expression: its SymPy image, its renamed code, the calls inside it."""

    expr: sp.Expr | None
    code: ast.expr
    calls: list = field(default_factory=list)
    value: object = MISSING  # a literal's value, or the object a global name refers to


def lower(parsed: Parsed, wrt) -> IR:
    """Lower ``parsed`` for differentiation with respect to ``wrt`` (names or positions)."""
    return _Lowering(parsed).run(wrt)


class _Lowering:
    def __init__(self, parsed: Parsed):
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
        self.maybe_unbound: set[str] = set()
        self.local_functions: dict[str, FunctionSource] = {}
        self.enclosing: dict[str, str] = {}  # a nested helper's view of its definer's names
        self.stack: list = []
        self.parsed_callees: dict = {}
        self.globals_where: dict = {}  # name -> the dict or cell it was found in
        self.guards: dict = {}  # (id(container), name) -> (container, name, function)
        self.counter = 0
        self.label = ""
        ids = _identifiers(self.node)
        self.locals = _assigned(self.node.body)
        self.np_alias = "np" if parsed.namespace.lookup("np") in (np, MISSING) or "np" not in ids \
            else "_np"
        self.ids = set(ids)
        self.names = Names(ids | set(RESERVED) | {"_np", parsed.name, "grad_" + parsed.name})

    # --- errors ---

    def fail(self, node, message, hint=""):
        raise SymdiffError(problems=(self.src.problem(node, message, hint),))

    # --- the function ---

    def run(self, wrt) -> IR:
        params = self._params()
        wrt_names = self._wrt(params, wrt)
        for p in params:
            self.env[p] = p
            self.bound.add(p)
        self.active = set(wrt_names)
        a = self.node.args
        for default in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
            for n in ast.walk(default):  # the generated def repeats the defaults' code
                if isinstance(n, ast.Name) and self.parsed.namespace.lookup(n.id) is not MISSING:
                    self._use_global(n, n.id)
        try:
            body = single_exit(_without_docstring(self.node.body), None, None)
        except ExitError as e:
            raise self.src.error(e.node, e.message, e.hint) from None
        self._statements(body)
        result = self.env.get(RETURN)
        if not self.problems and (result is None or RETURN in self.maybe_unbound):
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
                  tuple(self.guards.values()))

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
                    raise self.src.error(self.node, f"wrt={w} is out of range: "
                                         f"{self.parsed.name} has {len(positional)} "
                                         "positional parameters")
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
            self.where = (f"line {stmt.lineno}{self.label}", self.src.line_text(stmt.lineno))
            try:
                self._statement(stmt)
            except SymdiffError as e:
                self.problems.extend(e.problems)
                self._poison(stmt)

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
                    self.fail(stmt, f"augmented assignment {_OPS.get(type(op), '?')}= is "
                              "not supported", "+= -= *= /= **=")
                load = ast.copy_location(ast.Name(target.id, ast.Load()), target)
                self._assign(target, ast.copy_location(ast.BinOp(load, op, value), stmt))
            case ast.Pass():
                pass
            case ast.Expr(value=ast.Constant(value=str())):
                pass
            case ast.Assert():
                self._assert(stmt)
            case ast.If():
                self._if(stmt)
            case ast.For() | ast.While():
                self._loop(stmt)
            case ast.FunctionDef(decorator_list=[]):
                self.local_functions[stmt.name] = FunctionSource(
                    stmt.name, stmt, self.src, self.parsed.namespace)
            case _:
                self._unsupported_statement(stmt)

    def _unsupported_statement(self, stmt):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
            if isinstance(target, (ast.Subscript, ast.Attribute)):
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
        if isinstance(target, ast.Name):
            if target.id == RETURN and isinstance(value, ast.Tuple):
                self.fail(value, "the function returns a tuple; a gradient needs a scalar "
                          "output", "return one scalar (np.sum, np.mean reduce an array)")
            if target.id == RETURN and isinstance(value, ast.Constant) and value.value is None:
                self.fail(value, "return without a value", "return the scalar to differentiate")
            self._bind(target.id, self._expr(value), value)
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, (ast.Tuple, ast.List)) or len(value.elts) != len(
                    target.elts):
                self.fail(value, "tuple unpacking needs a tuple of the same length on the right",
                          "a, b = expr1, expr2")
            if not all(isinstance(t, ast.Name) for t in target.elts):
                self.fail(target, "unpacking into anything but names is not supported",
                          "a, b = expr1, expr2")
            # Evaluate every right-hand side before binding any name: a, b = b, a swaps.
            vals = [self._expr(v) for v in value.elts]
            for t, v, node in zip(target.elts, vals, value.elts, strict=True):
                self._bind(t.id, v, node)
            return
        self._unsupported_statement(ast.Assign(targets=[target], value=value,
                                               lineno=target.lineno,
                                               col_offset=target.col_offset))

    def _ssa(self, name) -> str:
        """A fresh SSA name for ``name``: its own name first, then name_1, name_2, ..."""
        if name.startswith("<"):  # a pseudo-variable: the return value, a break flag
            base = "_ret" if name == RETURN else "_brk" if name.startswith("<break") else "_t"
            return self.names.fresh(base, numbered=base == "_t")
        if name in self.bound or name in self.globals_used:
            return self.names.fresh(name)
        return name

    def _bind(self, name, val: _Val, node):
        self._need_number(val, node)
        if name == RETURN and isinstance(val.code, ast.Name) and val.code.id in self.bound:
            self.env[name] = val.code.id  # return x: the result is x itself, not a copy
            return
        ssa = self._ssa(name)
        self.bound.add(ssa)
        self._define(ssa, val)
        self.env[name] = ssa

    def _define(self, ssa, val: _Val):
        last = self.eqns[-1] if self.eqns else None
        if isinstance(last, Eqn) and last.kind in ("array", "const", "stop_gradient") and \
                isinstance(val.code, ast.Name) and val.code.id == last.out:
            # x = np.sum(y): name the array equation itself rather than copy its temporary.
            self.names.taken.discard(last.out)
            self.eqns[-1] = dataclasses.replace(last, out=ssa)
            if last.out in self.active:
                self.active.add(ssa)
        else:
            self._emit_elementwise(ssa, val)

    def _assert(self, stmt):
        code = self._constant_code(stmt)
        self.eqns.append(Eqn("", "assert", code, stmt.lineno, _names_in(code), False,
                             self.where))

    # --- control flow ---

    def _block(self, stmts):
        """Lower ``stmts`` into a list of their own; returns (equations, env after)."""
        saved = self.eqns
        self.eqns = []
        self._statements(stmts)
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
            if t is None or e is None:  # bound on one path only: unbound on the other
                env[name] = t or e
                self.maybe_unbound.add(name)
                continue
            merged = self._ssa(name)
            self.bound.add(merged)
            phis.append((merged, t, e))
            env[name] = merged
            if t in self.active or e in self.active:
                self.active.add(merged)
        self.env = env
        self.eqns.append(If(cond, tuple(then), tuple(orelse), tuple(phis), line, where))

    def _ifexp(self, node) -> _Val:
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
        return _Val(symbol(name), ast.Name(name, ast.Load()))

    def _loop(self, stmt):
        self.counter += 1
        flag = f"<break{self.counter}>" if _breaks(stmt.body) else None
        try:
            body = single_exit(stmt.body, flag, stmt)
        except ExitError as e:
            self.fail(e.node, e.message, e.hint)
        if flag is not None:
            body = [ast.copy_location(ast.Assign([ast.Name(flag, ast.Store())],
                                                 ast.Constant(False)), stmt)] + body
        where, line = self.where, self.line
        header, target, prologue = (self._iteration(stmt) if isinstance(stmt, ast.For)
                                    else (None, None, []))
        # Variables the body assigns; the index of a loop nested in it is not carried (it
        # may stay unbound when that loop runs zero times).
        inner = {n for s in body for n in _nested_targets(s)}
        carried = [n for n in _assigned(body) if n not in _target_names(stmt) | inner]
        forced: set[str] = set()
        while True:  # again if a variable turns out active only through the loop body
            state = (len(self.eqns), set(self.names.taken), set(self.bound), set(self.active),
                     dict(self.env), len(self.problems), set(self.maybe_unbound),
                     dict(self.data_globals), dict(self.globals_used), self.counter,
                     dict(self.globals_where))
            phis = []
            for name in carried:
                init = self.env.get(name)
                phi = self._ssa(name)
                self.bound.add(phi)
                if init in self.active or name in forced:
                    self.active.add(phi)
                phis.append((phi, init))
                self.env[name] = phi
            if isinstance(stmt, ast.While):
                header = self._constant_code(stmt.test)
            if target is not None:
                self.bound.add(target[1])
                self.env[target[0]] = target[1]
            saved = self.eqns
            self.eqns = []
            for name, index_of in prologue:
                self._bind(name, self._expr(index_of), index_of)
            self._statements(body)
            eqns, self.eqns = self.eqns, saved
            nexts = [self.env.get(n, phi) for n, (phi, _) in zip(carried, phis, strict=True)]
            late = {n for n, (phi, _), nxt in zip(carried, phis, nexts, strict=True)
                    if nxt in self.active and phi not in self.active}
            if not late:
                break
            forced |= late
            (n_eqns, taken, bound, active, env, n_problems, unbound, data, used,
             self.counter, self.globals_where) = state
            del self.eqns[n_eqns:]
            del self.problems[n_problems:]
            self.names.taken, self.bound, self.active, self.env = taken, bound, active, env
            self.maybe_unbound, self.data_globals, self.globals_used = unbound, data, used
        for name, (phi, _) in zip(carried, phis, strict=True):
            self.env[name] = phi  # after the loop, a carried variable holds its last value
        flag_name = dict(zip(carried, [p for p, _ in phis], strict=True)).get(flag)
        self.where, self.line = where, line
        self.eqns.append(Loop(
            "for" if isinstance(stmt, ast.For) else "while", header,
            target[1] if target else None,
            tuple((phi, init, nxt) for (phi, init), nxt in zip(phis, nexts, strict=True)),
            tuple(eqns), flag_name, line, where))

    def _iteration(self, stmt):
        """A for loop's header code, its index variable, and the names it binds each step.

        ``range(...)`` loops run as written; loops over arrays (``for row in X``,
        ``enumerate``, ``zip``) run over an index, reading ``row = X[k]``, so the gradient
        flows back into ``X`` through indexing.
        """
        it, target = stmt.iter, stmt.target
        fn = self._callee(it) if isinstance(it, ast.Call) else None
        if fn is range:
            if not isinstance(target, ast.Name):
                self.fail(target, "a range loop binds one name", "for i in range(n):")
            return self._constant_code(it), (target.id, self._ssa(target.id)), []
        if fn is enumerate:
            if len(it.args) != 1 or it.keywords or not (
                    isinstance(target, ast.Tuple) and len(target.elts) == 2
                    and all(isinstance(t, ast.Name) for t in target.elts)):
                self.fail(it, "enumerate loops are supported in the form "
                          "for i, row in enumerate(X)", "for i, row in enumerate(X):")
            index, row = target.elts
            array = self._iterable(it.args[0])
            return (_range_len([self.env[array]]), (index.id, self._ssa(index.id)),
                    [(row.id, _index_node(array, index.id, it))])
        self.counter += 1
        key = f"<k{self.counter}>"
        k = (key, self.names.fresh("_k", numbered=True))
        if fn is zip:
            strict = [kw for kw in it.keywords if kw.arg == "strict"]
            if len(strict) != len(it.keywords) or not (
                    isinstance(target, ast.Tuple) and len(target.elts) == len(it.args)
                    and all(isinstance(t, ast.Name) for t in target.elts)):
                self.fail(it, "zip loops are supported in the form for a, b in zip(A, B)",
                          "for a, b in zip(A, B):")
            arrays = [self._iterable(a) for a in it.args]
            header = _range_len([self.env[a] for a in arrays])
            if strict:
                # zip(..., strict=True) refuses unequal lengths: so does the generated loop.
                flag = self._constant_code(strict[0].value)
                header.args = [ast.Call(ast.Name("_zip_len", ast.Load()), [
                    ast.Name(self.env[a], ast.Load()) for a in arrays],
                    [ast.keyword("strict", flag)])]
            return (header, k,
                    [(t.id, _index_node(a, key, it)) for t, a in zip(target.elts, arrays,
                                                                     strict=True)])
        if not isinstance(target, ast.Name):
            self.fail(target, "a loop over an array binds one name", "for row in X:")
        array = self._iterable(it)
        return _range_len([self.env[array]]), k, [(target.id, _index_node(array, key, it))]

    def _iterable(self, node) -> str:
        """The name of an array a loop runs over (evaluated once, before the loop)."""
        val = self._expr(node)
        if val.expr is None:
            self.fail(node, f"cannot loop over {_describe(node)}",
                      "for i in range(n), for row in X, enumerate(X), zip(A, B)")
        name = self._operand(val, node)
        self.counter += 1
        key = f"<iter{self.counter}>"
        self.env[key] = name
        return key

    def _callee(self, call):
        if isinstance(call.func, ast.Name) and call.func.id not in self.env:
            return self.parsed.namespace.lookup(call.func.id)
        return None

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

    def _inline(self, node, fn) -> _Val:
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
        args = {}
        for p in positional + keyword_only:
            if p in given:
                args[p] = self._expr(given[p])
            elif p not in defaults:
                self.fail(node, f"{callee.name} needs the argument {p!r}",
                          f"{callee.name}({', '.join(positional + keyword_only)})")
        nested = isinstance(fn, FunctionSource) and fn.name in self.local_functions and \
            self.local_functions[fn.name] is fn
        saved = (self.parsed, self.src, self.env, self.locals, self.local_functions,
                 self.enclosing, self.label, self.where, self.line)
        self.stack.append(fn)
        self.enclosing = {**self.enclosing, **self.env} if nested else {}
        self.parsed, self.src, self.env = callee, callee.source, {}
        self.locals, self.local_functions = _assigned(callee.node.body), {}
        self.ids |= _identifiers(callee.node)
        self.names.taken |= _identifiers(callee.node)
        self.label = f" of {callee.name}"
        try:
            for p in positional + keyword_only:
                val = args[p] if p in args else self._expr(defaults[p])
                self._bind(p, val, given.get(p, node))
            body = single_exit(_without_docstring(callee.node.body), None, None)
            n_problems = len(self.problems)
            self._statements(body)
            if len(self.problems) > n_problems:
                found = tuple(self.problems[n_problems:])
                del self.problems[n_problems:]  # raised once more, by the caller's statement
                raise SymdiffError(problems=found) from None
            result = self.env.get(RETURN)
            if result is None or RETURN in self.maybe_unbound:
                self.fail(callee.node, f"{callee.name} does not return a value on every path",
                          "end every path with return")
        except ExitError as e:
            raise self.src.error(e.node, e.message, e.hint) from None
        finally:
            self.stack.pop()
            (self.parsed, self.src, self.env, self.locals, self.local_functions,
             self.enclosing, self.label, self.where, self.line) = saved
        return _Val(symbol(result), ast.Name(result, ast.Load()))

    # --- equations ---

    def _emit_elementwise(self, out, val: _Val):
        inputs = self._inputs(val.code)
        active = any(i in self.active for i in inputs)
        if active:
            self.active.add(out)
        self.bound.add(out)
        self.eqns.append(Eqn(out, "elementwise", val.code, self.line, inputs, active, self.where,
                             expr=val.expr, calls=tuple(val.calls)))

    def _inputs(self, code):
        # Every SSA name ever bound: a, b = b, a reads a parameter its first target rebinds.
        known = self.bound | set(self.env.values()) | set(self.data_globals)
        return tuple(n for n in _names_in(code) if n in known)

    def _operand(self, val: _Val, node) -> str:
        """The name holding ``val``'s value: a new equation unless it is one already."""
        self._need_number(val, node)
        if isinstance(val.expr, sp.Symbol) and isinstance(val.code, ast.Name):
            return val.code.id
        out = self.names.fresh("_t", numbered=True)
        self._emit_elementwise(out, val)
        return out

    # --- expressions ---

    def _need_number(self, val, node):
        if val.expr is None:
            what = type(val.value).__name__ if val.value is not MISSING else "this value"
            self.fail(node, f"{_describe(node)} ({what}) is not a number or an array",
                      "arithmetic on numbers and arrays, and the functions in " + COVERAGE)

    def _expr(self, node) -> _Val:
        match node:
            case ast.Constant(value=bool() | int() | float() as v):
                return _Val(sp.Integer(int(v)) if isinstance(v, (bool, int)) else sp.Float(v),
                            copy.copy(node), value=v)
            case ast.Constant(value=v) if v is None or isinstance(v, str):
                return _Val(None, copy.copy(node), value=v)
            case ast.Constant():
                self.fail(node, f"constant {node.value!r} is not supported",
                          "real numbers (int, float)")
            case ast.Name(id=name):
                return self._name(node, name)
            case ast.Attribute():
                return self._attribute(node)
            case ast.BinOp():
                return self._binop(node)
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                v = self._expr(node.operand)
                self._need_number(v, node.operand)
                code = ast.UnaryOp(node.op, v.code)
                return _Val(-v.expr if isinstance(node.op, ast.USub) else v.expr, code, v.calls)
            case ast.Call():
                return self._call(node)
            case ast.Lambda():
                self.fail(node, "lambda expressions are not supported here",
                          "define a function with def")
            case ast.Subscript():
                return self._subscript(node)
            case ast.Compare() | ast.BoolOp() | ast.UnaryOp(op=ast.Not()):
                return self._constant(node)  # a mask: no gradient flows through it
            case ast.IfExp():
                return self._ifexp(node)
            case ast.Starred():
                self.fail(node, "starred arguments (*args) are not supported",
                          "pass each argument by name or position")
            case ast.ListComp() | ast.SetComp() | ast.DictComp() | ast.GeneratorExp():
                self.fail(node, "comprehensions are not supported", "array operations")
            case ast.Yield() | ast.YieldFrom() | ast.Await():
                self.fail(node, "generators and coroutines are not supported",
                          "a plain function that returns a scalar")
            case ast.NamedExpr():
                self.fail(node, "assignment expressions (:=) are not supported",
                          "a separate assignment statement")
        self.fail(node, f"{_describe(node)} is not supported", COVERAGE)

    def _name(self, node, name) -> _Val:
        ssa = self._local(node, name)
        if ssa is not None:
            return _Val(symbol(ssa), ast.Name(ssa, ast.Load()))
        if name in self.local_functions:
            return _Val(None, ast.Name(name, ast.Load()), value=self.local_functions[name])
        obj = self._use_global(node, name)
        return self._global(obj, ast.Name(name, ast.Load()), data_name=name)

    def _local(self, node, name) -> str | None:
        """The SSA name a local variable has here, None for a global; fails if unbound."""
        if name in self.env:
            return self.env[name]
        if name in self.locals:
            self.fail(node, f"{name!r} is used before it is assigned",
                      "assign it on every path before its use")
        return self.enclosing.get(name)

    def _use_global(self, node, name):
        """What a module-level or closure name refers to; recorded for the generated code."""
        obj = self.parsed.namespace.lookup(name)
        if obj is MISSING:
            self.fail(node, f"name {name!r} is not defined",
                      "parameters, local names, and module-level names")
        if name in self.globals_used and self.globals_used[name] is not obj:
            self.fail(node, f"{name!r} means one thing in {self.top.name} and another in "
                      f"{self.parsed.name}", "give one of them another name")
        if name in self.bound:
            self.fail(node, f"{name!r} is a module-level name here and a local variable of "
                      "a function that calls this one", "give one of them another name")
        self.globals_used[name] = obj
        self.globals_where[name] = self.parsed.namespace.container(name)
        self.names.taken.add(name)
        return obj

    def _global(self, obj, code, data_name=None) -> _Val:
        if isinstance(obj, numbers.Real) and not isinstance(obj, bool) and \
                isinstance(obj, (int, float, np.floating, np.integer)):
            if data_name is not None and obj not in (np.pi, np.e):
                # A module-level number may be rebound: read its value at call time.
                self.data_globals[data_name] = self.parsed.namespace.container(data_name)
                return _Val(symbol(data_name), code, value=obj)
            return _Val(rules.constant(obj), code, value=obj)
        if isinstance(obj, np.ndarray) and data_name is not None:
            self.data_globals[data_name] = self.parsed.namespace.container(data_name)
            return _Val(symbol(data_name), code, value=obj)
        return _Val(None, code, value=obj)

    def _attribute(self, node) -> _Val:
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id not in self.env:
            base = self._expr(node.value)
            if base.expr is None and base.value is not MISSING and not isinstance(
                    base.value, (np.ndarray, numbers.Number)):
                obj = getattr(base.value, node.attr, MISSING)
                if obj is MISSING:
                    self.fail(node, f"{ast.unparse(node)} does not exist",
                              "check the spelling")
                return self._global(obj, copy.copy(node))
        if node.attr in rules.NO_GRADIENT_ATTRIBUTES:
            return self._constant(node)
        if node.attr == "T":
            return self._array_op(node, rules.METHODS["transpose"], {"a": node.value},
                                  receiver=node.value)
        self.fail(node, f"attribute .{node.attr} is not supported",
                  ".T .shape .ndim .size, and the methods in " + COVERAGE)

    def _binop(self, node) -> _Val:
        if isinstance(node.op, ast.MatMult):
            return self._array_op(node, rules.lookup(np.matmul), {"a": node.left,
                                                                  "b": node.right})
        left, right = self._expr(node.left), self._expr(node.right)
        self._need_number(left, node.left)
        self._need_number(right, node.right)
        a, b = left.expr, right.expr
        match node.op:
            case ast.Add():
                expr = a + b
            case ast.Sub():
                expr = a - b
            case ast.Mult():
                expr = a * b
            case ast.Div():
                expr = a / b
            case ast.Pow():
                expr = a**b if b.is_Number else rules.Power(a, b)
            case ast.MatMult():
                return self._array_op(node, rules.lookup(np.matmul),
                                      {"a": node.left, "b": node.right})
            case ast.FloorDiv():
                expr = rules.Floor(a / b)
            case ast.Mod():
                expr = a - b * rules.Floor(a / b)
            case _:
                self.fail(node, f"operator {_OPS.get(type(node.op), '?')} is not supported yet",
                          "+ - * / ** // % @")
        code = ast.BinOp(left.code, node.op, right.code)
        calls = left.calls + right.calls
        if isinstance(node.op, ast.Pow) and not b.is_Number:
            # x**y is worth keeping for the derivative x**y*log(x); x**2 is not.
            calls.append((expr, code))
        return _Val(expr, code, calls)

    def _call(self, node) -> _Val:
        for a in node.args:
            if isinstance(a, ast.Starred):
                self.fail(a, "starred arguments (*args) are not supported",
                          "pass each argument by position")
        for k in node.keywords:
            if k.arg is None:
                self.fail(k.value, "keyword unpacking (**kwargs) is not supported",
                          "pass each argument by name")
        if isinstance(node.func, ast.Attribute) and self._is_local_value(node.func.value):
            return self._method(node)
        fn = self._expr(node.func)
        if fn.expr is not None or fn.value is MISSING:
            self.fail(node.func, f"{ast.unparse(node.func)} is not a function",
                      "call NumPy or math functions")
        obj = fn.value
        if obj is stop_gradient:
            return self._stop_gradient(node)
        row = rules.lookup(obj)
        name = ast.unparse(node.func)
        if row is None and rules.no_gradient(obj):
            return self._constant(node)
        if row is None:
            if isinstance(obj, FunctionSource) or _user_function(obj):
                self._guard(node.func, obj)
                return self._inline(node, obj)
            if isinstance(obj, types.FunctionType) and obj.__module__.startswith("symdiff"):
                self.fail(node, f"{name} inside a function being differentiated is not "
                          "supported (no gradients of gradients)",
                          "differentiate the function itself, or wrap the call in "
                          "stop_gradient")
            self.fail(node, f"{name} is not supported",
                      "the NumPy and math functions in " + COVERAGE)
        positional = list(node.args)
        if getattr(row, "sequence", "") == "operands" and len(positional) > 1:
            # np.einsum(spec, a, b): the operands are the rest of the arguments.
            positional = [positional[0], ast.copy_location(
                ast.List(positional[1:], ast.Load()), positional[1])]
        args = self._arguments(positional, node.keywords, row.params, row.optional, name, node)
        if isinstance(row, rules.Elementwise):
            vals = {p: self._expr(a) for p, a in args.items()}
            for p, v in vals.items():
                if v.expr is None and v.value is not None:
                    self._need_number(v, args[p])
            expr = row.sympy(*[v.expr if v.expr is not None else v.value for v in vals.values()])
            code = ast.Call(copy.copy(node.func), [v.code for v in vals.values()][
                :len(node.args)], [ast.keyword(k.arg, vals[k.arg].code) for k in node.keywords])
            calls = [c for v in vals.values() for c in v.calls]
            if not expr.is_Atom:
                calls.append((expr, code))
            return _Val(expr, code, calls)
        return self._array_op(node, row, args)

    def _is_local_value(self, node) -> bool:
        """Whether ``node`` is a value computed in the function (so .sum() is a method)."""
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in self.env or root.id in self.locals:
            return True
        return isinstance(self.parsed.namespace.lookup(root.id), np.ndarray)

    def _method(self, node) -> _Val:
        meth = node.func.attr
        row = rules.METHODS.get(meth)
        if row is None:
            self.fail(node.func, f"the array method .{meth}() is not supported",
                      ", ".join(f".{m}()" for m in sorted(rules.METHODS)) + "; " + COVERAGE)
        params = row.params[1:]
        positional = list(node.args)
        if meth in ("reshape", "transpose") and len(positional) > 1:
            # x.reshape(3, 4) means x.reshape((3, 4)).
            positional = [ast.copy_location(ast.Tuple(positional, ast.Load()), positional[0])]
        optional = len([p for p in params if p in row.defaults])
        args = self._arguments(positional, node.keywords, params, optional,
                               "." + meth, node)
        return self._array_op(node, row, {row.params[0]: node.func.value, **args},
                              receiver=node.func.value)

    def _arguments(self, positional, keywords, params, optional, name, node) -> dict:
        if len(positional) > len(params):
            self.fail(node, f"{name} takes at most {len(params)} arguments here",
                      f"{name}({', '.join(params)})")
        args = dict(zip(params, positional, strict=False))
        for k in keywords:
            if k.arg not in params or k.arg in args:
                self.fail(k.value, f"{name}(..., {k.arg}=...) is not supported",
                          f"{name}({', '.join(params)}); " + COVERAGE)
            args[k.arg] = k.value
        required = params[: len(params) - optional]
        missing = [p for p in required if p not in args]
        if missing:
            self.fail(node, f"{name} needs the argument {missing[0]!r}",
                      f"{name}({', '.join(params)})")
        return {p: args[p] for p in params if p in args}

    def _array_op(self, node, row, args, receiver=None) -> _Val:
        """An equation for an array operation; its operands become names first."""
        operands, statics, codes = [], [], {}
        for p, a in args.items():
            if p == row.sequence:
                if not isinstance(a, (ast.List, ast.Tuple)):
                    self.fail(a, f"pass {p} as a list of arrays, [a, b, ...]", COVERAGE)
                names = [self._operand(self._expr(e), e) for e in a.elts]
                operands += [(p, n, i) for i, n in enumerate(names)]
                codes[p] = ast.List([ast.Name(n, ast.Load()) for n in names], ast.Load())
            elif p in row.vjp:
                n = self._operand(self._expr(a), a)
                operands.append((p, n, None))
                codes[p] = ast.Name(n, ast.Load())
            else:
                code = self._constant_code(a)
                if isinstance(code, ast.Name) and code.id in self.active:
                    self.fail(a, f"{p} must not depend on the differentiated inputs",
                              f"a constant {p}, such as a number or x.shape")
                text = ast.unparse(ast.Subscript(ast.Name("_", ast.Load()), code, ast.Load()))
                statics.append((p, text[2:-1] if p == "index" else ast.unparse(code)))
                codes[p] = code
        code = self._forward_code(node, row, codes, receiver)
        out = self.names.fresh("_t", numbered=True)
        inputs = tuple(dict.fromkeys(n for _, n, _ in operands))
        active = any(i in self.active for i in inputs)
        if active:
            self.active.add(out)
        self.bound.add(out)
        self.eqns.append(Eqn(out, "array", code, self.line, inputs, active, self.where, op=row,
                             operands=tuple(operands), statics=tuple(statics)))
        return _Val(symbol(out), ast.Name(out, ast.Load()))

    def _forward_code(self, node, row, codes, receiver):
        """The user's own call (or operator, or method), with its operands renamed."""
        if isinstance(node, ast.BinOp):
            return ast.BinOp(codes["a"], node.op, codes["b"])
        if isinstance(node, ast.Subscript):
            return ast.Subscript(codes["a"], codes["index"], ast.Load())
        if isinstance(node, ast.Attribute):  # x.T
            return ast.Attribute(codes[row.params[0]], node.attr, ast.Load())
        if receiver is not None:
            func = ast.Attribute(codes[row.params[0]], node.func.attr, ast.Load())
            rest = row.params[1:]
        else:
            func, rest = copy.copy(node.func), row.params
        count = len(node.args)
        if receiver is not None and node.func.attr in ("reshape", "transpose") and count > 1:
            count = 1  # x.reshape(3, 4) was read as x.reshape((3, 4))
        keywords_given = {k.arg for k in node.keywords}
        params = [p for p in rest if p in codes and p not in keywords_given]
        args = [codes[p] for p in params[:count]]
        if row.sequence == "operands":
            args = args[:1] + codes["operands"].elts
        keywords = [ast.keyword(k.arg, codes[k.arg]) for k in node.keywords]
        return ast.Call(func, args, keywords)

    def _subscript(self, node) -> _Val:
        if not self._is_local_value(node.value) or self._inactive(node.value):
            return self._constant(node)
        return self._array_op(node, rules.INDEX, {"a": node.value, "index": node.slice})

    def _inactive(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id in self.env and \
            self.env[node.id] not in self.active

    def _constant(self, node) -> _Val:
        """A value that carries no gradient (a shape, a mask, np.zeros_like...): run it."""
        code = self._constant_code(node)
        out = self.names.fresh("_t", numbered=True)
        self.bound.add(out)
        self.eqns.append(Eqn(out, "const", code, self.line, _names_in(code), False,
                             self.where))
        return _Val(symbol(out), ast.Name(out, ast.Load()))

    def _stop_gradient(self, node) -> _Val:
        if len(node.args) != 1 or node.keywords:
            self.fail(node, "stop_gradient takes exactly one argument", "stop_gradient(x)")
        code = self._constant_code(node.args[0])
        out = self.names.fresh("_sg", numbered=True)
        self.bound.add(out)
        self.eqns.append(Eqn(out, "stop_gradient", code, self.line, _names_in(code), False,
                             self.where))
        return _Val(symbol(out), ast.Name(out, ast.Load()))

    def _constant_code(self, node):
        """``node`` with local names renamed, for code that is run but not differentiated."""
        code = copy.deepcopy(node)
        for n in ast.walk(code):
            if isinstance(n, ast.Name):
                ssa = self._local(n, n.id)
                if ssa is not None:
                    n.id = ssa
                elif n.id in self.local_functions:
                    self.fail(n, f"{n.id} is defined inside the function, so the generated "
                              "code cannot call it here", "define it at module level")
                else:
                    self._use_global(n, n.id)
        return code


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
        ast.MatMult: "@", ast.FloorDiv: "//", ast.Mod: "%", ast.LShift: "<<",
        ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


_STATEMENTS = "assignments, if/else, for, while, return, assert, pass, nested def"


_LIBRARIES = ("symdiff", "numpy", "scipy", "sympy", "jax", "torch", "autograd")
_INSTALLED = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib",
                                                       "platlib")})


def _user_function(obj) -> bool:
    """A Python function of the user's, to differentiate through (not a library's)."""
    if not isinstance(obj, types.FunctionType):
        return False
    if (getattr(obj, "__module__", "") or "").split(".")[0] in _LIBRARIES:
        return False
    return not obj.__code__.co_filename.startswith(_INSTALLED)


def _without_docstring(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _scoped_walk(nodes):
    """Nodes of ``nodes``, not descending into nested functions, lambdas or classes."""
    todo = list(nodes)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _assigned(body) -> list[str]:
    """Names a statement list assigns, in order of first assignment (nested defs aside)."""
    found = {}
    for stmt in body:
        for n in sorted(_scoped_walk([stmt]), key=lambda n: (getattr(n, "lineno", 0),
                                                              getattr(n, "col_offset", 0))):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                found.setdefault(n.id, None)
    return list(found)


def _identifiers(node) -> set[str]:
    ids = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return ids | {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}


def _target_names(stmt) -> set[str]:
    if isinstance(stmt, ast.For):
        return {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)}
    return set()


def _nested_targets(stmt) -> set[str]:
    return {n.id for loop in _scoped_walk([stmt]) if isinstance(loop, ast.For)
            for n in ast.walk(loop.target) if isinstance(n, ast.Name)}


def _breaks(body) -> bool:
    """Whether ``body`` has a break of its own loop (not of a loop nested in it)."""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Break):
            return True
        if not isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _range_len(arrays) -> ast.expr:
    lens = [ast.Call(ast.Name("len", ast.Load()), [ast.Name(a, ast.Load())], []) for a in arrays]
    n = lens[0] if len(lens) == 1 else ast.Call(ast.Name("min", ast.Load()), lens, [])
    return ast.Call(ast.Name("range", ast.Load()), [n], [])


def _index_node(array_key, index_key, like) -> ast.expr:
    node = ast.Subscript(ast.Name(array_key, ast.Load()), ast.Name(index_key, ast.Load()),
                         ast.Load())
    for n in ast.walk(node):
        ast.copy_location(n, like)
    return node


def _names_in(code) -> tuple[str, ...]:
    seen = {}
    for n in ast.walk(code):
        if isinstance(n, ast.Name):
            seen[n.id] = None
    return tuple(seen)


def _describe(node) -> str:
    text = ast.unparse(node)
    return repr(text if len(text) < 40 else text[:37] + "...")
