"""Python expressions -> SymPy images and equations: the expression half of ``lower``.

An elementwise expression keeps the user's own code (names renamed to their SSA versions)
for the forward sweep and gets its SymPy image for differentiation; an array operation
(np.sum, @, x[i], ...) becomes an equation of its own; ``stop_gradient(...)`` contents,
masks and shapes become constant equations with no adjoint. This module holds the
arithmetic and what is run without gradient; calls and array operations are in
``operations``, names and attributes in ``references``.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from . import containers, lists, rules, runtime
from .errors import SymdiffError
from .ir import Eqn, Site, symbol
from .parse import MISSING

# Where an error sends the user for what is supported: the command prints the table the
# README has, so a pip-installed user, who has no README, can read it too.
COVERAGE = "`symdiff coverage` lists them"


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
    for ``_ifexp``, ``_inline`` and ``_guard``, and on ``operations.Operations`` and
    ``references.References`` for calls, indexing, names and attributes.
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
                      "arithmetic on numbers and arrays, and the functions: " + COVERAGE)

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
                self._refuse_list_truth(node)
                return self._constant(node)  # a mask: no gradient flows through it
            case ast.IfExp():
                return self._ifexp(node)
            case ast.List(elts=[]):  # (hs = []: a list the function builds, by append)
                return self._empty_list(node)
            case ast.List() | ast.Tuple():
                return self._sequence(node)
            case ast.Starred():
                self.fail(node, "starred arguments (*args) are not supported",
                          "pass each argument by name or position")
            case ast.ListComp() | ast.SetComp() | ast.DictComp() | ast.GeneratorExp():
                return self._comprehension(node)
            case ast.Yield() | ast.YieldFrom() | ast.Await():
                self.fail(node, "generators and coroutines are not supported",
                          "a plain function that returns a scalar")
            case ast.NamedExpr():
                self.fail(node, "assignment expressions (:=) are not supported",
                          "a separate assignment statement")
        self.fail(node, f"{describe(node)} is not supported",
                  "the operators and functions: " + COVERAGE)

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
            v = self._without_gradient(v)
        return v

    def _binop(self, node) -> Val:
        if self.lists:  # l + [v], of a list the function built
            found = self._list_binop(node)
            if found is not None:
                return found
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
        self._refuse_list_operand(node)
        self._refuse_written_list_arithmetic(node, left, right)
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
        if isinstance(node.op, ast.Pow) and not b.is_Number or _compound(expr):
            # Parts the derivative may need again (x**y for x**y*log(x), e + x*y for
            # cos(e + x*y)): the backward sweep reuses them if it does.
            calls.append((expr, code))
        return self._without_gradient(Val(expr, code, calls,
                                          depth=max(left.depth, right.depth) + 1))

    def _without_gradient(self, val: Val) -> Val:
        """``val``, or a value of its own where it depends on no differentiated input: the
        derivatives read it as the function computed it, not as SymPy's algebra would
        recompute it on floats (-K of uint8 K is 256 - K, K * K wraps, -128 of int8 stays
        -128, b + b of masks is a logical or, 2 * l of a list repeats it)."""
        if not val.expr.free_symbols or set(names_in(val.code)) & self.active or \
                _float_valued(val.code):
            return val
        out = self.names.fresh("_t", numbered=True)
        self.bound.add(out)
        self.temps.add(out)
        self.eqns.append(Eqn(out, "const", val.code, self.line, self._inputs(val.code),
                             False, self.where))
        return Val(symbol(out), ast.Name(out, ast.Load()))

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
        viewed = _viewed(code, self.np_alias)
        if viewed is not None and viewed in self.bound:  # (out[1:3] of a constant out)
            self.alias[out] = self._root(viewed)
        return Val(symbol(out), ast.Name(out, ast.Load()))

    def _stop_gradient(self, node) -> Val:
        if len(node.args) != 1 or node.keywords:
            self.fail(node, "stop_gradient takes exactly one argument", "stop_gradient(x)")
        site = self._site(node)
        if self.lifted == "all" or site.key in self.lifted:
            # grad(f, stop_gradients=False), or audit lifting this one: an identity.
            self.sites.append((site, "", ()))
            return self._expr(node.args[0])
        code = self._constant_code(node.args[0])
        out = self.names.fresh("_sg", numbered=True)
        # A stop_gradient inside this one's argument is run as written: no effect of its own,
        # and what only it reads does not reach this one's argument with a gradient.
        inner = [n for n in ast.walk(code)
                 if isinstance(n, ast.Call) and self._names_stop_gradient(n.func)]
        hidden = {id(n) for c in inner for a in c.args for n in ast.walk(a)}
        reads = tuple(dict.fromkeys(n.id for n in ast.walk(code)
                                    if isinstance(n, ast.Name) and id(n) not in hidden))
        self.sites.append((site, out, reads))
        self.sites.extend((self._site(c, (site.line, site.col)), "", ()) for c in inner)
        self.bound.add(out)
        self.temps.add(out)
        if isinstance(code, ast.Name):  # stop_gradient(x) is x itself
            self.alias[out] = self._root(code.id)
        self.eqns.append(Eqn(out, "stop_gradient", code, self.line, names_in(code), False,
                             self.where))
        return Val(symbol(out), ast.Name(out, ast.Load()))

    def _site(self, node, outer=None) -> Site:
        """The place of the stop_gradient call ``node`` (its column in the user's lines)."""
        p = self.src.problem(node, "")
        text = ast.unparse(node.args[0]) if node.args else ""
        return Site(p.filename, p.line, p.col, text, outer)

    def _names_stop_gradient(self, func) -> bool:
        """Whether ``func`` (a name or attribute chain, not a local) is stop_gradient."""
        path = []
        while isinstance(func, ast.Attribute):
            path.append(func.attr)
            func = func.value
        if not isinstance(func, ast.Name) or func.id in self.env or func.id in self.locals:
            return False
        obj = self.parsed.namespace.lookup(func.id)
        for attr in reversed(path):
            obj = getattr(obj, attr, MISSING)
        return obj is runtime.stop_gradient

    def _constant_code(self, node):
        """``node`` with local names renamed, for code that is run but not differentiated."""
        code = copy.deepcopy(node)
        problems: list = []
        own = lists.own_names(code)  # any(a > 0 for a in x): a is the generator's
        for n in ast.walk(code):
            if isinstance(n, ast.Name) and id(n) not in own:
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


def _float_valued(code) -> bool:
    """An operation whose value is a float whatever numbers it takes, as SymPy's image
    says: a true division, or arithmetic with a float literal (s * 0.5)."""
    return isinstance(code, ast.BinOp) and (isinstance(code.op, ast.Div) or isinstance(
        code.op, (ast.Add, ast.Sub, ast.Mult)) and any(
        isinstance(o, ast.Constant) and type(o.value) is float for o in (code.left, code.right)))


def names_in(code) -> tuple[str, ...]:
    seen = {}
    for n in ast.walk(code):
        if isinstance(n, ast.Name):
            seen[n.id] = None
    return tuple(seen)


def describe(node) -> str:
    text = ast.unparse(node)
    return repr(text if len(text) < 40 else text[:37] + "...")


# Methods and NumPy functions whose value may be a view of their first operand's array.
_VIEWING = {"reshape", "ravel", "squeeze", "transpose", "swapaxes", "view", "asarray",
            "asanyarray", "expand_dims", "moveaxis", "diagonal", "atleast_1d", "atleast_2d",
            "atleast_3d", "broadcast_to", "flip", "flipud", "fliplr", "rot90", "real", "imag"}


def _viewed(code, np_alias):
    """The name whose array the value of ``code`` may be a view of (a basic index, .T, a
    reshape...), or None where it certainly is a new value or a number."""
    match code:
        case ast.Subscript(value=ast.Name(id=name)):
            return name
        case ast.Attribute(value=ast.Name(id=name), attr="T" | "real" | "imag" | "flat"):
            return name
        case ast.Call(func=ast.Attribute(value=ast.Name(id=name), attr=attr),
                      args=args) if attr in _VIEWING:
            if name == np_alias:
                return args[0].id if args and isinstance(args[0], ast.Name) else None
            return name
    return None
