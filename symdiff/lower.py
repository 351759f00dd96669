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
import types
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from . import rules
from .errors import Problem, SymdiffError
from .parse import MISSING, Parsed
from .runtime import stop_gradient

COVERAGE = "the coverage table in README.md"
RESERVED = ("np", "_unbroadcast", "_fit", "_check_scalar", "SymdiffError")


@dataclass(frozen=True)
class Eqn:
    """``out = code``: one step of the forward sweep.

    kind is "elementwise" (``expr`` is the SymPy image of ``code``, ``calls`` pairs each
    call inside ``code`` with its image), "array" (``op`` with its ``operands``),
    "const" (no gradient flows: stop_gradient contents), or "assert" (``code`` is the
    whole statement, ``out`` empty).
    """

    out: str
    kind: str
    code: ast.AST
    line: int
    inputs: tuple[str, ...]
    active: bool
    expr: sp.Expr | None = None
    calls: tuple[tuple[sp.Expr, ast.expr], ...] = ()
    op: rules.ArrayOp | None = None
    operands: tuple[tuple[str, str, int | None], ...] = ()  # (parameter, name, position)
    statics: tuple[tuple[str, str], ...] = ()  # (parameter, code) of the other parameters


@dataclass(frozen=True)
class IR:
    """A function lowered for differentiation."""

    name: str
    parsed: Parsed
    params: tuple[str, ...]
    wrt: tuple[str, ...]
    eqns: tuple[Eqn, ...]
    result: str
    taken: frozenset[str]
    user_names: frozenset[str]
    data_globals: tuple[str, ...]
    np_alias: str


class Names:
    """Fresh, deterministic names that never collide with the user's."""

    def __init__(self, taken):
        self.taken = set(taken)

    def fresh(self, base: str, numbered: bool = False) -> str:
        if not numbered and base not in self.taken:
            self.taken.add(base)
            return base
        sep = "" if base.startswith("_") and base[1:].isalpha() else "_"
        k = 0 if numbered else 1
        while f"{base}{sep}{k}" in self.taken:
            k += 1
        self.taken.add(f"{base}{sep}{k}")
        return f"{base}{sep}{k}"


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


def symbol(name: str) -> sp.Symbol:
    return sp.Symbol(name, real=True)


class _Lowering:
    def __init__(self, parsed: Parsed):
        self.parsed = parsed
        self.src = parsed.source
        self.node = parsed.node
        self.eqns: list[Eqn] = []
        self.problems: list[Problem] = []
        self.env: dict[str, str] = {}
        self.active: set[str] = set()
        self.data_globals: dict[str, None] = {}
        self.line = self.node.lineno
        self.bound: set[str] = set()
        ids = {n.id for n in ast.walk(self.node) if isinstance(n, ast.Name)}
        ids |= {a.arg for a in ast.walk(self.node) if isinstance(a, ast.arg)}
        self.locals = {
            n.id for n in ast.walk(self.node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        self.np_alias = "np" if parsed.namespace.lookup("np") in (np, MISSING) or "np" not in ids \
            else "_np"
        self.ids = ids
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
        body = self.node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        result = None
        for i, stmt in enumerate(body):
            self.line = stmt.lineno
            try:
                if isinstance(stmt, ast.Return):
                    result = self._return(stmt)
                    if i + 1 < len(body):
                        self.fail(body[i + 1], "code after return is never run",
                                  "end the function with its return statement")
                    break
                self._statement(stmt)
            except SymdiffError as e:
                self.problems.extend(e.problems)
                self._poison(stmt)
        if result is None and not self.problems:
            self.problems.append(self.src.problem(
                self.node, f"{self.parsed.name} has no return statement",
                "return the scalar value to differentiate"))
        if self.problems:
            raise SymdiffError(problems=tuple(self.problems))
        return IR(self.parsed.name, self.parsed, tuple(params), tuple(wrt_names),
                  tuple(self.eqns), result, frozenset(self.names.taken), frozenset(self.ids),
                  tuple(self.data_globals), self.np_alias)

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
                self.env[n.id] = self.names.fresh(n.id)

    # --- statements ---

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
            ast.If: "if", ast.For: "for", ast.While: "while", ast.FunctionDef: "def",
            ast.ClassDef: "class", ast.Import: "import", ast.ImportFrom: "import",
            ast.Delete: "del", ast.Raise: "raise", ast.Match: "match",
            ast.AsyncFunctionDef: "async def", ast.AsyncFor: "async for",
            ast.AsyncWith: "async with",
        }
        if hasattr(ast, "TryStar"):
            kinds[ast.TryStar] = "try"
        what = kinds.get(type(stmt))
        if what is not None:
            self.fail(stmt, f"'{what}' statements are not supported",
                      "assignments, augmented assignments, return, assert, pass")
        if isinstance(stmt, ast.Expr):
            self.fail(stmt, "an expression statement has no effect on the value",
                      "assign the value to a name, or remove the statement")
        self.fail(stmt, f"{type(stmt).__name__} statements are not supported",
                  "assignments, augmented assignments, return, assert, pass")

    def _assign(self, target, value):
        if isinstance(target, ast.Name):
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

    def _bind(self, name, val: _Val, node):
        self._need_number(val, node)
        # The first binding of a local keeps the user's name; later ones get name_1, name_2.
        ssa = name if name not in self.env and name not in self.bound else self.names.fresh(name)
        self.bound.add(ssa)
        self._define(ssa, val)
        self.env[name] = ssa

    def _define(self, ssa, val: _Val):
        last = self.eqns[-1] if self.eqns else None
        if last is not None and last.kind in ("array", "const", "stop_gradient") and isinstance(
                val.code, ast.Name) and val.code.id == last.out:
            # x = np.sum(y): name the array equation itself rather than copy its temporary.
            self.names.taken.discard(last.out)
            self.eqns[-1] = dataclasses.replace(last, out=ssa)
            if last.out in self.active:
                self.active.add(ssa)
        else:
            self._emit_elementwise(ssa, val)

    def _return(self, stmt):
        if stmt.value is None:
            self.fail(stmt, "return without a value", "return the scalar to differentiate")
        if isinstance(stmt.value, ast.Tuple):
            self.fail(stmt.value, "the function returns a tuple; a gradient needs a scalar "
                      "output", "return one scalar (np.sum, np.mean reduce an array)")
        val = self._expr(stmt.value)
        self._need_number(val, stmt.value)
        if isinstance(val.code, ast.Name) and val.code.id in self.env.values():
            return val.code.id
        out = self.names.fresh("_ret")
        self._define(out, val)
        return out

    def _assert(self, stmt):
        code = self._constant_code(stmt)
        self.eqns.append(Eqn("", "assert", code, stmt.lineno, _names_in(code), False))

    # --- equations ---

    def _emit_elementwise(self, out, val: _Val):
        inputs = self._inputs(val.code)
        active = any(i in self.active for i in inputs)
        if active:
            self.active.add(out)
        self.eqns.append(Eqn(out, "elementwise", val.code, self.line, inputs, active,
                             expr=val.expr, calls=tuple(val.calls)))

    def _inputs(self, code):
        # Every SSA name ever bound: a, b = b, a reads a parameter its first target rebinds.
        known = self.bound | set(self.env.values()) | set(self.data_globals) | {
            e.out for e in self.eqns}
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
                self.fail(node, "conditional expressions (a if c else b) are not supported yet",
                          COVERAGE)
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
        if name in self.env:
            ssa = self.env[name]
            return _Val(symbol(ssa), ast.Name(ssa, ast.Load()))
        if name in self.locals:
            self.fail(node, f"{name!r} is used before it is assigned",
                      "assign it on every path before its use")
        obj = self.parsed.namespace.lookup(name)
        if obj is MISSING:
            self.fail(node, f"name {name!r} is not defined",
                      "parameters, local names, and module-level names")
        return self._global(obj, ast.Name(name, ast.Load()), data_name=name)

    def _global(self, obj, code, data_name=None) -> _Val:
        if isinstance(obj, numbers.Real) and not isinstance(obj, bool) and \
                isinstance(obj, (int, float, np.floating, np.integer)):
            if data_name is not None and obj not in (np.pi, np.e):
                # A module-level number may be rebound: read its value at call time.
                self.data_globals[data_name] = None
                return _Val(symbol(data_name), code, value=obj)
            return _Val(rules.constant(obj), code, value=obj)
        if isinstance(obj, np.ndarray) and data_name is not None:
            self.data_globals[data_name] = None
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
            if isinstance(obj, types.FunctionType):
                self.fail(node, f"{name} is not supported yet (calls of user functions)",
                          "write the helper's body inline, or wrap the call in stop_gradient")
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
        self.eqns.append(Eqn(out, "array", code, self.line, inputs, active, op=row,
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
        self.eqns.append(Eqn(out, "const", code, self.line, _names_in(code), False))
        return _Val(symbol(out), ast.Name(out, ast.Load()))

    def _stop_gradient(self, node) -> _Val:
        if len(node.args) != 1 or node.keywords:
            self.fail(node, "stop_gradient takes exactly one argument", "stop_gradient(x)")
        code = self._constant_code(node.args[0])
        out = self.names.fresh("_sg", numbered=True)
        self.eqns.append(Eqn(out, "stop_gradient", code, self.line, _names_in(code), False))
        return _Val(symbol(out), ast.Name(out, ast.Load()))

    def _constant_code(self, node):
        """``node`` with local names renamed, for code that is run but not differentiated."""
        code = copy.deepcopy(node)
        for n in ast.walk(code):
            if isinstance(n, ast.Name):
                if n.id in self.env:
                    n.id = self.env[n.id]
                elif n.id in self.locals:
                    self.fail(n, f"{n.id!r} is used before it is assigned",
                              "assign it before its use")
                elif self.parsed.namespace.lookup(n.id) is MISSING:
                    self.fail(n, f"name {n.id!r} is not defined",
                              "parameters, local names, and module-level names")
        return code


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
        ast.MatMult: "@", ast.FloorDiv: "//", ast.Mod: "%", ast.LShift: "<<",
        ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


def _names_in(code) -> tuple[str, ...]:
    seen = {}
    for n in ast.walk(code):
        if isinstance(n, ast.Name):
            seen[n.id] = None
    return tuple(seen)


def _describe(node) -> str:
    text = ast.unparse(node)
    return repr(text if len(text) < 40 else text[:37] + "...")
