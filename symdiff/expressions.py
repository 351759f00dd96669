"""Python expressions -> SymPy images and equations: the expression half of ``lower``.

An elementwise expression keeps the user's own code (names renamed to their SSA versions)
for the forward sweep and gets its SymPy image for differentiation; an array operation
(np.sum, @, x[i], ...) becomes an equation of its own; ``stop_gradient(...)`` contents,
masks and shapes become constant equations with no adjoint.
"""

from __future__ import annotations

import ast
import copy
import numbers
import sys
import sysconfig
import types
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from . import calls, containers, rules, runtime
from .errors import SymdiffError
from .ir import Eqn, symbol
from .parse import MISSING, NOT_LITERAL, FunctionSource, literal
from .runtime import stop_gradient

COVERAGE = "the coverage table in README.md"


@dataclass
class Val:
    """A lowered expression: its SymPy image, its renamed code, the calls inside it."""

    expr: sp.Expr | None
    code: ast.expr
    calls: list = field(default_factory=list)
    value: object = MISSING  # a literal's value, or the object a global name refers to
    depth: int = 0  # how deeply its operations nest (see DEPTH)


# An operand nested this deep becomes an equation of its own (a temporary) before it is
# used: SymPy's cost grows faster than the size of an expression (nested tanh: x3.4 a
# level), so long sums and deep nests are cut into pieces of bounded size, as statements
# are, and building stays linear in the code's length. A function call counts as
# CALL_DEPTH levels: SymPy's evaluation of functions of functions is what grows fastest.
DEPTH = 12
CALL_DEPTH = 3


class Expressions:
    """Lowering of expressions; mixed into the lowering of statements (``lower._Lowering``).

    Relies on the statement half for ``env``, ``eqns``, ``names``, ``active`` and friends,
    and for ``_ifexp``, ``_inline`` and ``_guard``.
    """

    # --- equations ---

    def _emit_elementwise(self, out, val: Val):
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
        return tuple(n for n in names_in(code) if n in known)

    def _operand(self, val: Val, node) -> str:
        """The name holding ``val``'s value: a new equation unless it is one already."""
        self._need_number(val, node)
        if isinstance(val.expr, sp.Symbol) and isinstance(val.code, ast.Name):
            return val.code.id
        out = self.names.fresh("_t", numbered=True)
        self._emit_elementwise(out, val)
        return out

    # --- expressions ---

    def _need_number(self, val, node):
        if isinstance(val.value, containers.Tree):
            containers.refuse_whole(self, node, val.value)
        if val.expr is None:
            what = type(val.value).__name__ if val.value is not MISSING else "this value"
            self.fail(node, f"{describe(node)} ({what}) is not a number or an array",
                      "arithmetic on numbers and arrays, and the functions in " + COVERAGE)

    def _expr(self, node) -> Val:
        match node:
            case ast.Constant(value=bool() | int() | float() as v):
                return Val(sp.Integer(int(v)) if isinstance(v, (bool, int)) else sp.Float(v),
                            copy.copy(node), value=v)
            case ast.Constant(value=v) if v is None or isinstance(v, str):
                return Val(None, copy.copy(node), value=v)
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
                return self._unary(node)
            case ast.Call():
                return self._call(node)
            case ast.Lambda():
                self.fail(node, "lambda expressions are not supported here",
                          "define a function with def")
            case ast.Subscript():
                return self._subscript(node)
            case ast.BoolOp() if not _boolean(node):
                self.fail(node, "and/or of numbers returns one of them, which is not "
                          "supported", "and/or of comparisons, or np.where for a value")
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
        self.fail(node, f"{describe(node)} is not supported", COVERAGE)

    def _name(self, node, name) -> Val:
        ssa = self._local(node, name)
        if ssa in self.trees:
            return containers.whole(self.trees[ssa])
        if ssa is not None:
            return Val(symbol(ssa), ast.Name(ssa, ast.Load()))
        if name in self.local_functions:
            return Val(None, ast.Name(name, ast.Load()), value=self.local_functions[name])
        obj = self._use_global(node, name)
        return self._global(obj, ast.Name(name, ast.Load()), data_name=name)

    def _local(self, node, name) -> str | None:
        """The SSA name a local variable has here, None for a global; fails if unbound."""
        if name in self.env:
            return self.env[name]
        if name in self.locals:
            self.fail(node, f"{name!r} is used before it is assigned",
                      "assign it on every path before its use")
        if name in self.starred and self.parsed is self.top:
            self.fail(node, f"the parameter {self.starred[name]}{name} is not supported",
                      "name each parameter: def f(x, a, b)")
        return self.enclosing.get(name)

    def _use_global(self, node, name):
        """What a module-level or closure name refers to; recorded for the generated code."""
        obj = self.parsed.namespace.lookup(name)
        if obj is MISSING:
            self.fail(node, f"name {name!r} is not defined",
                      "parameters, local names, and module-level names")
        if name in self.globals_used and self.globals_used[name] is not obj:
            self.fail(node, f"{name!r} means one thing in {self.first_user.get(name, '?')} "
                      f"and another in {self.parsed.name}", "give one of them another name")
        if name in self.bound:
            self.fail(node, f"{name!r} is a module-level name here and a local variable of "
                      "a function that calls this one", "give one of them another name")
        if name == "SymdiffError" or name.startswith("_") and callable(
                getattr(runtime, name, None)):
            self.fail(node, f"{name} is a name symdiff's generated code uses for itself",
                      "rename the module-level name")
        where = self.parsed.namespace.container(name)
        self.first_user.setdefault(name, self.parsed.name)
        self.globals_used[name] = obj
        self.globals_where[name] = where
        self.names.taken.add(name)
        if isinstance(where, dict) and name not in where or isinstance(obj, (
                types.ModuleType, type, FunctionSource)):
            return obj  # a builtin, a module or a class: not rebound in practice
        if callable(obj):
            # act = np.tanh: the derivative is tanh's; if act is rebound, build again.
            self.guards[(id(where), name)] = (where, name, obj)
        else:
            self.data_globals[name] = where  # read afresh at every call, as f would
        return obj

    def _global(self, obj, code, data_name=None) -> Val:
        if isinstance(obj, numbers.Real) and not isinstance(obj, bool) and \
                isinstance(obj, (int, float, np.floating, np.integer)):
            if data_name is not None and obj not in (np.pi, np.e):
                # A module-level number may be rebound: read its value at call time.
                self.data_globals[data_name] = self.parsed.namespace.container(data_name)
                return Val(symbol(data_name), code, value=obj)
            return Val(rules.constant(obj), code, value=obj)
        if isinstance(obj, np.ndarray) and data_name is not None:
            self.data_globals[data_name] = self.parsed.namespace.container(data_name)
            return Val(symbol(data_name), code, value=obj)
        return Val(None, code, value=obj)

    def _attribute(self, node) -> Val:
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
                if isinstance(base.value, types.ModuleType) and not _library(base.value):
                    return self._module_attribute(obj, node, base.value)
                if not isinstance(base.value, types.ModuleType) and isinstance(
                        obj, (numbers.Real, np.ndarray)) and not isinstance(obj, bool):
                    # CFG.lr, Model.k: an object's attribute may be set again; read when
                    # the gradient runs, by the derivatives too (as self.k is).
                    return Val(symbol(ast.unparse(node)), copy.copy(node), value=obj)
                return self._global(obj, copy.copy(node))
        if node.attr in rules.NO_GRADIENT_ATTRIBUTES:
            return self._constant(node)
        if node.attr != "T" and self._inactive(node.value):
            # self.W, self.cfg.lr, cfg.scale: an attribute of a value that is not
            # differentiated is read when the gradient runs, as a value without gradient.
            return self._constant(node)
        if node.attr == "T":
            return self._array_op(node, rules.METHODS["transpose"], {"a": node.value},
                                  receiver=node.value)
        self.fail(node, f"attribute .{node.attr} is not supported",
                  ".T .shape .ndim .size, and the methods in " + COVERAGE)

    def _module_attribute(self, obj, node, module) -> Val:
        """cfg.SCALE, cfg.act of the user's own module: read when the gradient runs."""
        dotted = ast.unparse(node)
        if callable(obj) and not isinstance(obj, type):
            # cfg.act = np.tanh: if cfg.act is rebound, build again.
            self.guards[(id(module), node.attr)] = (vars(module), node.attr, obj)
        elif isinstance(obj, (numbers.Real, np.ndarray)) and not isinstance(obj, bool) \
                and obj is not np.pi and obj is not np.e:
            # Its name in the derivatives too, so a rebound value is used there as well.
            return Val(symbol(dotted), copy.copy(node), value=obj)
        return self._global(obj, copy.copy(node))

    def _shallow(self, val: Val, node) -> Val:
        """``val``, or a temporary holding it where it nests DEPTH levels or more."""
        if val.depth < DEPTH:
            return val
        name = self._operand(val, node)
        self.temps.add(name)
        return Val(symbol(name), ast.Name(name, ast.Load()))

    def _lowered(self, node, problems: list) -> Val | None:
        """``node`` lowered, or None with its problems added to ``problems``: every
        operand of an expression is read, so that all of its problems are reported."""
        try:
            return self._expr(node)
        except SymdiffError as e:
            problems.extend(e.problems or (self.src.problem(node, str(e)),))
            return None

    def _unary(self, node) -> Val:
        # -(-(-x)) thousands deep: walked in a loop, not by recursion.
        chain = []
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            chain.append(node)
            node = node.operand
        v = self._expr(node)
        for n in reversed(chain):
            self._need_number(v, n.operand)
            v = self._shallow(v, n.operand)
            v = Val(-v.expr if isinstance(n.op, ast.USub) else v.expr,
                    ast.UnaryOp(n.op, v.code), v.calls, depth=v.depth + 1)
        return v

    def _binop(self, node) -> Val:
        if isinstance(node.op, ast.MatMult):
            return self._array_op(node, rules.lookup(np.matmul), {"a": node.left,
                                                                  "b": node.right})
        # a + b + c + ... is a chain down the left operands: walked in a loop, not by
        # recursion, so that a sum of thousands of terms neither recurses nor nests.
        chain = []
        while isinstance(node, ast.BinOp) and not isinstance(node.op, ast.MatMult):
            chain.append(node)
            node = node.left
        problems: list = []
        left = self._lowered(node, problems)
        for n in reversed(chain):
            right = self._lowered(n.right, problems)
            if left is None or right is None:
                left = None
                continue
            try:
                left = self._arithmetic(n, left, right)
            except SymdiffError as e:
                problems.extend(e.problems)
                left = None
        if problems:
            raise SymdiffError(problems=tuple(problems))
        return left

    def _arithmetic(self, node, left: Val, right: Val) -> Val:
        """``left <op> right`` for the BinOp ``node`` whose operands they are."""
        self._need_number(left, node.left)
        self._need_number(right, node.right)
        left, right = self._shallow(left, node.left), self._shallow(right, node.right)
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
            case ast.FloorDiv():
                expr = rules.Floor(a / b)
            case ast.Mod():
                expr = a - b * rules.Floor(a / b)
            case _:
                self.fail(node, f"operator {OPS.get(type(node.op), '?')} is not supported yet",
                          "+ - * / ** // % @")
        code = ast.BinOp(left.code, node.op, right.code)
        calls = left.calls + right.calls
        if isinstance(node.op, ast.Pow) and not b.is_Number or _compound(expr) or \
                expr.free_symbols and not set(names_in(code)) & self.active:
            # Parts the derivative may need again (x**y for x**y*log(x), e + x*y for
            # cos(e + x*y)): the backward sweep reuses them if it does. So may it a part
            # without gradient (K * K, b + b, 2 * l): as the function computed it.
            calls.append((expr, code))
        return Val(expr, code, calls, depth=max(left.depth, right.depth) + 1)

    def _call(self, node) -> Val:
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
        if row is None and rules.no_gradient(obj) or row is not None and \
                row.names[0] in rules.CONSTRUCTORS and not self._carries_gradient(node, row):
            val = self._constant(node)
            if obj in _ARRAY_MAKERS:
                self.arrays.add(val.code.id)
            return val
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
            self._check_einsum(positional, name)
            positional = [positional[0], ast.copy_location(
                ast.List(positional[1:], ast.Load()), positional[1])]
        args = self._arguments(positional, node.keywords, row.params, row.optional, name, node,
                               getattr(row, "positional", 99))
        if isinstance(row, rules.Elementwise):
            problems: list = []
            vals = {p: self._lowered(a, problems) for p, a in args.items()}
            if problems:
                raise SymdiffError(problems=tuple(problems))
            for p, v in vals.items():
                if v.expr is None and v.value is not None:
                    self._need_number(v, args[p])
                vals[p] = self._shallow(v, args[p])
            expr = row.sympy(*[v.expr if v.expr is not None else v.value for v in vals.values()])
            code = ast.Call(copy.copy(node.func), [v.code for v in vals.values()][
                :len(node.args)], [ast.keyword(k.arg, vals[k.arg].code) for k in node.keywords])
            calls = [c for v in vals.values() for c in v.calls]
            if not expr.is_Atom:
                calls.append((expr, code))
            return Val(expr, code, calls,
                       depth=max((v.depth for v in vals.values()), default=0) + CALL_DEPTH)
        return self._array_op(node, row, args)

    def _carries_gradient(self, node, row) -> bool:
        """Whether an argument of ``row`` that has a gradient (not a shape or a count, whose
        rule is empty) depends on the differentiated inputs."""
        given = [*zip(row.params, node.args, strict=False),
                 *((k.arg, k.value) for k in node.keywords)]
        return any(row.vjp.get(p, "?") and any(
            n in self.active for n in names_in(self._constant_code(a))) for p, a in given)

    def _check_einsum(self, positional, name):
        """Refuse, where the subscripts are written out, the np.einsum forms symdiff lacks;
        and the sublist form, einsum(a, [0, 1], b, [1, 2]), whose first argument is an
        operand, not subscripts."""
        spec = positional[0]
        if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
            problem = runtime._einsum_problem(spec.value, len(positional) - 1)
            if problem:
                self.fail(spec, f"{name} with {problem} is not supported",
                          "explicit subscripts, one letter per axis, such as 'ij,jk->ik'")
        elif any(isinstance(a, (ast.List, ast.Tuple)) for a in positional[1:]):
            self.fail(spec, f"{name}'s sublist form, {name}(a, [0, 1], ...), is not "
                      "supported", "subscripts in a string, such as 'ij,jk->ik'")

    def _is_local_value(self, node) -> bool:
        """Whether ``node`` is a value computed in the function (so .sum() is a method)."""
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in self.env or root.id in self.locals \
                or root.id in self.enclosing:
            return True
        return isinstance(self.parsed.namespace.lookup(root.id), np.ndarray)

    def _method(self, node) -> Val:
        meth = node.func.attr
        row = rules.METHODS.get(meth)
        receiver = node.func.value
        if row is None and isinstance(receiver, ast.Name) and \
                receiver.id == calls.method_self(self.parsed.fn):
            # Which function self.h names depends on the class of self at each call (a
            # subclass may override it), which the gradient, built once, cannot follow.
            name = ast.unparse(node.func)
            self.fail(node.func, f"{name}(...) calls a method of {receiver.id}, which "
                      "symdiff does not follow (a subclass may override it)",
                      f"a module-level function taking {receiver.id}, def {meth}(obj, ...), "
                      f"called as {meth}({receiver.id}, ...): symdiff differentiates through it")
        if row is None and not hasattr(np.ndarray, meth):
            self.fail(node.func, f"{ast.unparse(node.func)}() is not supported: symdiff "
                      f"differentiates numbers and arrays, and .{meth}() is not a method of "
                      "NumPy arrays", "compute it outside the function and pass the value in")
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
                               "." + meth, node, row.positional - 1)
        return self._array_op(node, row, {row.params[0]: node.func.value, **args},
                              receiver=node.func.value)

    def _arguments(self, positional, keywords, params, optional, name, node,
                   limit=99) -> dict:
        if len(positional) > min(len(params), limit):
            if len(positional) <= len(params):
                self.fail(node, f"{name} takes {', '.join(params[:limit])} by position here",
                          f"pass {', '.join(params[limit:])} by name")
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

    def _array_op(self, node, row, args, receiver=None) -> Val:
        """An equation for an array operation; its operands become names first."""
        operands, statics, codes = [], [], {}
        problems: list = []
        for p, a in args.items():
            try:
                self._argument(row, p, a, operands, statics, codes)
            except SymdiffError as e:  # read the others too: report every problem
                problems.extend(e.problems or (self.src.problem(a, str(e)),))
        if problems:
            raise SymdiffError(problems=tuple(problems))
        self._refuse_early(node, row, operands, dict(statics))
        # The same operation of the same values twice (x[:-1] in two places) is one value:
        # computed once, and its adjoints summed before they are scattered back.
        key = (row.names[0], tuple(operands), tuple(statics))
        if key in self.memo and not any(isinstance(n, ast.Call) for p, _ in statics
                                        for n in ast.walk(codes[p])):
            name = self.memo[key]
            self.temps.discard(name)  # handed out twice: renaming it would lose one of them
            return Val(symbol(name), ast.Name(name, ast.Load()))
        code = self._forward_code(node, row, codes, receiver)
        out = self.names.fresh("_t", numbered=True)
        self.memo[key] = out
        inputs = tuple(dict.fromkeys(n for _, n, _ in operands))
        active = any(i in self.active for i in inputs)
        if active:
            self.active.add(out)
        self.bound.add(out)
        self.temps.add(out)
        if row.names[0] in _VIEWS:  # x[1:], x.T, reshape: the same data under a new name
            self.alias[out] = self._root(operands[0][1])
        if row.names[0] in ("np.stack", "np.concatenate", "np.outer"):
            self.arrays.add(out)
        if row.names[0] == "np.reshape":
            shape = _literal(dict(statics).get("shape"))
            if isinstance(shape, tuple):
                self.ndims[out] = len(shape)
        self.eqns.append(Eqn(out, "array", code, self.line, inputs, active, self.where, op=row,
                             operands=tuple(operands), statics=tuple(statics)))
        return Val(symbol(out), ast.Name(out, ast.Load()))

    def _argument(self, row, p, a, operands, statics, codes):
        """Parameter ``p`` of an array operation, given as ``a``: an operand (a name), a
        list of operands, or a static argument (code run as written)."""
        if p == row.sequence:
            a = containers.as_list(self, a)  # np.stack(ws): its items, [ws[0], ws[1]]
            if not isinstance(a, (ast.List, ast.Tuple)):
                self.fail(a, f"pass {p} as a list of arrays, [a, b, ...]", COVERAGE)
            problems: list = []
            vals = [self._lowered(e, problems) for e in a.elts]
            if problems:
                raise SymdiffError(problems=tuple(problems))
            names = [self._operand(v, e) for v, e in zip(vals, a.elts, strict=True)]
            operands += [(p, n, i) for i, n in enumerate(names)]
            codes[p] = ast.List([ast.Name(n, ast.Load()) for n in names], ast.Load())
        elif row.vjp.get(p):
            v = self._expr(a)
            n = self._operand(v, a)
            if isinstance(v.value, np.ndarray):  # a module-level array: its ndim is known
                self.ndims[n] = v.value.ndim
            operands.append((p, n, None))
            codes[p] = ast.Name(n, ast.Load())
        else:
            code = self._constant_code(a)
            if isinstance(code, ast.Name) and code.id in self.active and \
                    p not in row.vjp:  # (an empty rule: it has no gradient)
                self.fail(a, f"{p} must not depend on the differentiated inputs",
                          f"a constant {p}, such as a number or x.shape")
            text = ast.unparse(ast.Subscript(ast.Name("_", ast.Load()), code, ast.Load()))
            statics.append((p, text[2:-1] if p == "index" else ast.unparse(code)))
            codes[p] = code

    def _refuse_early(self, node, row, operands, statics):
        """What the backward sweep's rule would refuse when called, refused now, where it
        is known already: a literal norm order, np.dot of a stack of known ndim. The rule
        itself is asked (on small stand-in arrays), so that this follows what it supports."""
        name = row.names[0]
        if name == "np.linalg.norm" and "ord" in statics and "axis" not in statics:
            order = _literal(statics["ord"])
            if order is not _UNKNOWN and all(_refuses(runtime._norm_grad, 1.0, np.ones(shape),
                                                       1.0, order) for shape in ((2,), (2, 2))):
                self.fail(node, f"{name} with ord={order!r} is not supported",
                          "np.linalg.norm with ord=None, 2 (vectors) or 'fro' (matrices)")
        if name == "np.dot" and len(operands) == 2:
            ndims = [self.ndims.get(n, 1) for _, n, _ in operands]  # unknown: try 1
            if max(ndims) > 2:
                a, b = (np.ones((2,) * d) for d in ndims)
                g = np.ones(np.shape(np.dot(a, b)))
                if _refuses(runtime._dot_grad, g, a, b, 0):
                    self.fail(node, f"{name} of arrays of {max(ndims)} dimensions (stacks of "
                              "matrices) is not supported", "np.matmul or np.einsum")

    def _forward_code(self, node, row, codes, receiver):
        """The user's own call (or operator, or method), with its operands renamed."""
        if isinstance(node, ast.BinOp):
            return ast.BinOp(codes["a"], node.op, codes["b"])
        if isinstance(node, ast.Subscript) and row.sequence:  # np.r_[a, b]
            items = ast.Tuple(codes[row.sequence].elts, ast.Load())
            return ast.Subscript(self._constant_code(node.value), items, ast.Load())
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

    def _subscript(self, node) -> Val:
        found = containers.item(self, node)
        if found is not None:
            return found
        row = rules.concatenator(_reference(node.value, self.parsed.namespace))
        if row is not None and not self._is_local_value(node.value):
            return self._concatenation(node, row)
        if not self._is_local_value(node.value) or self._inactive(node.value):
            return self._constant(node)
        return self._array_op(node, rules.INDEX, {"a": node.value, "index": node.slice})

    def _concatenation(self, node, row) -> Val:
        """np.r_[a, b, ...], np.c_[...]: a concatenation of its items, where one of them
        depends on the differentiated inputs (else a constant, run as written)."""
        code = self._constant_code(node)
        if not any(n in self.active for n in names_in(code)):
            return self._constant(node)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        for e in items:
            if isinstance(e, ast.Slice) or isinstance(e, ast.Constant) and isinstance(
                    e.value, str):
                what = "a slice (a range)" if isinstance(e, ast.Slice) else \
                    "a string directive"
                self.fail(e, f"{ast.unparse(node.value)}[...] with {what} among values that "
                          "depend on the differentiated inputs is not supported",
                          "np.concatenate of arrays (np.arange for a range)")
        return self._array_op(node, row, {"items": ast.List(items, ast.Load())})

    def _inactive(self, node) -> bool:
        """Whether ``node`` is a local name, or an attribute of one (self.W), that does not
        depend on the differentiated inputs."""
        while isinstance(node, ast.Attribute):
            node = node.value
        if not isinstance(node, ast.Name):
            return False
        # (A nested helper sees its definer's names: self in a def inside a method.)
        ssa = self.env.get(node.id, self.enclosing.get(node.id))
        return ssa is not None and ssa not in self.active

    def _constant(self, node) -> Val:
        """A value that carries no gradient (a shape, a mask, np.zeros_like...): run it."""
        code = self._constant_code(node)
        out = self.names.fresh("_t", numbered=True)
        self.bound.add(out)
        self.temps.add(out)
        self.eqns.append(Eqn(out, "const", code, self.line, names_in(code), False,
                             self.where))
        return Val(symbol(out), ast.Name(out, ast.Load()))

    def _stop_gradient(self, node) -> Val:
        if len(node.args) != 1 or node.keywords:
            self.fail(node, "stop_gradient takes exactly one argument", "stop_gradient(x)")
        code = self._constant_code(node.args[0])
        out = self.names.fresh("_sg", numbered=True)
        self.bound.add(out)
        self.temps.add(out)
        if isinstance(code, ast.Name):  # stop_gradient(x) is x itself
            self.alias[out] = self._root(code.id)
        self.eqns.append(Eqn(out, "stop_gradient", code, self.line, names_in(code), False,
                             self.where))
        return Val(symbol(out), ast.Name(out, ast.Load()))

    def _constant_code(self, node):
        """``node`` with local names renamed, for code that is run but not differentiated."""
        code = copy.deepcopy(node)
        problems: list = []
        for n in ast.walk(code):
            if isinstance(n, ast.Name):
                try:
                    self._rename(n)
                except SymdiffError as e:  # read the other names too: report every problem
                    problems.extend(e.problems)
        if problems:
            raise SymdiffError(problems=tuple(problems))
        return containers.in_code(code, self.trees) if self.trees else code

    def _rename(self, n):
        """A name in code run as written: renamed to its SSA version, or a global."""
        ssa = self._local(n, n.id)
        if ssa is not None:
            n.id = ssa
        elif n.id in self.local_functions:
            self.fail(n, f"{n.id} is defined inside the function, so the generated "
                      "code cannot call it here", "define it at module level")
        else:
            self._use_global(n, n.id)


OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**",
        ast.MatMult: "@", ast.FloorDiv: "//", ast.Mod: "%", ast.LShift: "<<",
        ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^"}


def _reference(node, namespace):
    """The module-level object a dotted name (np.r_) refers to, or None; nothing recorded."""
    if isinstance(node, ast.Name):
        obj = namespace.lookup(node.id)
        return None if obj is MISSING else obj
    if isinstance(node, ast.Attribute):
        return getattr(_reference(node.value, namespace), node.attr, None)
    return None


def _library(module) -> bool:
    """A module of NumPy, SciPy, the standard library... (not rebound at run time)."""
    name = getattr(module, "__name__", "")
    return name.split(".")[0] in _LIBRARIES or name in sys.stdlib_module_names or \
        (getattr(module, "__file__", None) or "").startswith(_INSTALLED)


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


# Operations whose result may share its first operand's data (NumPy views): x[1:], x.T,
# reshape, np.flip always, np.einsum where the subscripts only permute or keep axes
# ('ij->ji'): writing into the result writes there.
_VIEWS = {"x[...]", "np.reshape", "np.ravel", "np.squeeze", "np.expand_dims", "np.transpose",
          "np.broadcast_to", "np.flip", "np.einsum"}


_UNKNOWN = NOT_LITERAL
# What always returns a new ndarray (0-d at least): a name bound to one is an array.
_ARRAY_MAKERS = (np.zeros, np.ones, np.full, np.zeros_like, np.ones_like, np.full_like,
                 np.eye, np.identity, np.arange, np.linspace)


def _literal(text):
    """The value of a static argument's code if it is a literal, else _UNKNOWN."""
    return literal(text) if text is not None else _UNKNOWN


def _refuses(rule, *args) -> bool:
    """Whether a backward rule raises SymdiffError for these (stand-in) arguments."""
    try:
        rule(*args)
    except SymdiffError:
        return True
    except Exception:  # noqa: BLE001 - anything else: not a refusal we can report early
        return False
    return False


def _boolean(node) -> bool:
    """Whether an expression is certainly a truth value (comparisons, not, and/or of them)."""
    if isinstance(node, ast.BoolOp):
        return all(_boolean(v) for v in node.values)
    return isinstance(node, (ast.Compare, ast.UnaryOp)) and (
        not isinstance(node, ast.UnaryOp) or isinstance(node.op, ast.Not)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, bool))


def _compound(expr) -> bool:
    """An expression of two operations or more: worth computing once, not twice."""
    return not expr.is_Atom and any(not a.is_Atom for a in expr.args)


def names_in(code) -> tuple[str, ...]:
    seen = {}
    for n in ast.walk(code):
        if isinstance(n, ast.Name):
            seen[n.id] = None
    return tuple(seen)


def describe(node) -> str:
    text = ast.unparse(node)
    return repr(text if len(text) < 40 else text[:37] + "...")
