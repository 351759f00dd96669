"""IR -> what each value's shape is made of: the broadcast of which values' shapes.

NumPy gives an elementwise result the broadcast shape of its operands. So a value's shape
is known, relative to others, as the broadcast of a set of *sources*: the parameters, and
values whose shape nothing here explains (an array operation's result, a branch's merge).
Two values with the same sources have the same shape, and a value with none is a scalar.
The backward sweep uses this to skip summing an adjoint down to a shape it already has,
and the forward sweep to know where the function's value is certainly a scalar.

A claim made here must never be wrong: anything this module cannot read (a call it does
not know to broadcast, an attribute, a keyword) makes the value its own source.

``numpy_guard`` reads the same expressions for what prune needs before it skips one: which
operands must hold NumPy floats for it to raise only on shapes that do not fit.
"""

from __future__ import annotations

import ast
import builtins
import math

import numpy as np

from . import rules
from .ir import IR, Eqn, If, Loop

Sources = frozenset[str]

# Elementwise NumPy functions that broadcast their positional operands (ufuncs, and these).
_BROADCASTING = (np.clip,)
_FIRST_ONLY = (np.round, np.around, np.fix)  # the first operand's shape; the rest constants
# Functions that return a Python float for a number (and raise for a larger array).
_FLOAT_VALUED = (float, *(getattr(math, name[5:]) for row in rules.ELEMENTWISE
                          for name in row.names if name.startswith("math.")))
_SCALAR_ATTRIBUTES = {"pi", "e", "inf", "nan"}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)
_FULL_REDUCTIONS = {"np.sum", "np.mean", "np.prod", "np.max", "np.min", "np.var", "np.std",
                    "np.linalg.norm", "scipy.special.logsumexp"}


def shape_sources(ir: IR) -> dict[str, Sources]:
    """For each name the function binds, the sources whose broadcast is its shape.

    Example: for ``y = x * w + 1; s = np.sum(y); r = s * x`` the result maps y to
    {x, w}, s to {} (a scalar) and r to {x}. A name missing from the map is its own source.
    """
    found: dict[str, Sources] = {}
    functions = {name: obj for name, obj, _ in ir.globals}
    _walk(ir.eqns, found, functions, ir.np_alias)
    return found


def sources(found: dict[str, Sources], name: str) -> Sources:
    return found.get(name, frozenset((name,)))


def array_results(ir: IR) -> set[str]:
    """The names array operations (and stop_gradient, and values without gradient) bind.

    A value whose sources include one of these is most likely an array, not a Python
    number: used where a wrong guess costs only speed (the in-place helpers check at run
    time; a Python number takes the plain operators).
    """
    return _array_results(ir.eqns)


def _array_results(items) -> set[str]:
    """The names array operations (and stop_gradient, and values without gradient) bind."""
    names = set()
    for item in items:
        if isinstance(item, Eqn):
            if item.kind in ("array", "const", "stop_gradient"):
                names.add(item.out)
        elif isinstance(item, If):
            names |= _array_results(item.then) | _array_results(item.orelse)
        else:
            names |= _array_results(item.body)
    return names


def _walk(items, found, functions, np_alias):
    for item in items:
        if isinstance(item, Eqn):
            if item.out:
                found[item.out] = _eqn(item, found, functions, np_alias)
        elif isinstance(item, If):
            _walk(item.then, found, functions, np_alias)
            _walk(item.orelse, found, functions, np_alias)
        elif isinstance(item, Loop):
            _walk(item.body, found, functions, np_alias)


def _eqn(eqn: Eqn, found, functions, np_alias) -> Sources:
    own = frozenset((eqn.out,))
    if eqn.kind == "array":
        statics = dict(eqn.statics)
        if eqn.op.names[0] in _FULL_REDUCTIONS and statics.get("axis", "None") == "None" \
                and statics.get("keepdims", "False") == "False":
            return frozenset()
        return own
    if eqn.kind not in ("elementwise", "stop_gradient"):  # stop_gradient(v) is v when run
        return own
    try:
        return _expr(eqn.code, found, functions, np_alias)
    except _Unknown:
        return own


class _Unknown(Exception):
    """Raised inside the walk of an expression whose shape this module cannot explain."""


def _expr(node, found, functions, np_alias) -> Sources:
    def walk(n) -> Sources:
        match n:
            case ast.Constant(value=bool() | int() | float() | None):
                return frozenset()
            case ast.Name(id=name):
                return sources(found, name)
            case ast.Attribute(value=ast.Name(id=root), attr=attr) if (
                    root == np_alias and attr in _SCALAR_ATTRIBUTES):
                return frozenset()
            case ast.BinOp(op=op) if isinstance(op, _ARITHMETIC):
                return walk(n.left) | walk(n.right)
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                return walk(n.operand)
            case ast.Call(keywords=[]):
                fn = _function(n.func, functions, np_alias)
                if any(fn is f for f in _FLOAT_VALUED):
                    return frozenset()  # a Python float, whatever the operand
                if _broadcasts(fn):
                    return frozenset().union(*map(walk, n.args))
                if any(fn is f for f in _FIRST_ONLY) and n.args and all(
                        isinstance(a, ast.Constant) for a in n.args[1:]):
                    return walk(n.args[0])
        raise _Unknown

    return walk(node)


def _broadcasts(fn) -> bool:
    """An elementwise NumPy function of one result that broadcasts its operands (not a
    generalized ufunc such as np.matmul, nor np.modf's two results)."""
    if isinstance(fn, np.ufunc):  # (with a float64 loop: np.left_shift has none)
        return fn.signature is None and fn.nout == 1 and "d" * fn.nin + "->d" in fn.types
    return any(fn is f for f in _BROADCASTING)


def numpy_guard(eqn: Eqn, certain: set[str], ir: IR) -> tuple[tuple[str, ...], bool] | None:
    """The names that must hold NumPy values (not Python numbers or lists) for each
    operation of the elementwise ``eqn`` to be NumPy's, which raises only where shapes do
    not fit; None where it may raise whatever they hold (math.log(-1.0), float(an array),
    an integer array to a negative power). ``certain``: names known to hold NumPy values.
    An operation with one NumPy operand is NumPy's: ``x * s`` needs nothing of x when s
    is certain. Returns the guard, and whether the value is certainly NumPy's without it.

    Python numbers raise where NumPy does not (1.0 / 0.0), and lists where NumPy
    broadcasts them (2.0 * [1.0]), so a statement run for its value alone may be skipped
    only behind this guard.
    """
    functions = {name: obj for name, obj, _ in ir.globals}
    guard: dict[str, None] = {}

    def names(nodes):
        return [n.id for node in nodes for n in ast.walk(node)
                if isinstance(n, ast.Name) and n.id not in certain]

    def operation(operands) -> bool:
        found = [walk(o) for o in operands]  # (walk all: each may raise on its own)
        if any(found):
            return True
        uncertain = names(operands)
        if not uncertain:
            raise _Unknown  # numbers alone: Python's arithmetic
        guard.update(dict.fromkeys(uncertain))
        return True

    def walk(n) -> bool:  # whether n is certainly NumPy's (once the guard holds)
        match n:
            case ast.Constant(value=bool() | int() | float() | None):
                return False
            case ast.Name(id=name):
                return name in certain
            case ast.Attribute(value=ast.Name(id=root), attr=attr) if (
                    root == ir.np_alias and attr in _SCALAR_ATTRIBUTES):
                return False
            case ast.BinOp(op=op) if isinstance(op, _ARITHMETIC) and not (
                    isinstance(op, ast.Pow) and not _safe_power(n.right)):
                return operation([n.left, n.right])
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                return walk(n.operand)
            case ast.Call(keywords=[]) if _broadcasts(
                    fn := _function(n.func, functions, ir.np_alias)) and not (
                    fn is np.power and (len(n.args) < 2 or not _safe_power(n.args[1]))):
                return operation(n.args)
        raise _Unknown

    try:
        numpy = walk(eqn.code)
    except _Unknown:
        return None
    return tuple(guard), numpy and not guard


def _safe_power(exponent) -> bool:
    """An exponent an integer array can take: a float, or an integer that is not negative."""
    return isinstance(exponent, ast.Constant) and (
        isinstance(exponent.value, float) or exponent.value >= 0)


def _function(node, functions, np_alias):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module = np if node.value.id == np_alias else functions.get(node.value.id)
        return getattr(module, node.attr, None) if module is np or module is math else None
    if isinstance(node, ast.Name):
        return functions.get(node.id, getattr(builtins, node.id, None))
    return None
