"""IR -> what each value's shape is made of: the broadcast of which values' shapes.

NumPy gives an elementwise result the broadcast shape of its operands. So a value's shape
is known, relative to others, as the broadcast of a set of *sources*: the parameters, and
values whose shape nothing here explains (an array operation's result, a branch's merge).
Two values with the same sources have the same shape, and a value with none is a scalar.
The backward sweep uses this to skip summing an adjoint down to a shape it already has,
and the forward sweep to know where the function's value is certainly a scalar.

A claim made here must never be wrong: anything this module cannot read (a call it does
not know to broadcast, an attribute, a keyword) makes the value its own source.
"""

from __future__ import annotations

import ast
import builtins
import math

import numpy as np

from .ir import IR, Eqn, If, Loop

Sources = frozenset[str]

# Elementwise NumPy functions that broadcast their positional operands (ufuncs, and these).
_BROADCASTING = (np.clip,)
_FIRST_ONLY = (np.round, np.around, np.fix)  # the first operand's shape; the rest constants
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
    """The names array operations (and stop_gradient, and values without gradient) bind:
    a value whose sources include one of these is an array, not a Python number."""
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
                if fn is float or getattr(fn, "__module__", None) == "math":
                    return frozenset()  # a Python float, whatever the operand
                if isinstance(fn, np.ufunc) or any(fn is f for f in _BROADCASTING):
                    return frozenset().union(*map(walk, n.args))
                if any(fn is f for f in _FIRST_ONLY) and n.args and all(
                        isinstance(a, ast.Constant) for a in n.args[1:]):
                    return walk(n.args[0])
        raise _Unknown

    return walk(node)


def _function(node, functions, np_alias):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module = np if node.value.id == np_alias else functions.get(node.value.id)
        return getattr(module, node.attr, None) if module is np or module is math else None
    if isinstance(node, ast.Name):
        return functions.get(node.id, getattr(builtins, node.id, None))
    return None
