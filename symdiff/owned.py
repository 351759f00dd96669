"""A backward sweep -> the same, where an adjoint that no other name can reach is added to in
its own array (``runtime._add_to``), in loops and branches too.

``differentiate`` runs ``owned`` over its backward sweep once ``unflowed`` has decided
where an adjoint may be None. Straight-line code knows which adjoints are arrays of their
own as it builds them (each name is assigned once there); in a loop an adjoint is added to
on every iteration, and an adjoint handed on as it is (``dh_1 = dh_2``, from one iteration
to the next) is two names for one array. So here the whole sweep is read at once: an
adjoint is *sole* if every value it is ever given is a new array (or None, or a number),
and no line hands its value on as it is. Adding into a sole adjoint's array can change
nothing that another name reads: not an argument, module data, a value the function
computed, another adjoint, nor a gradient returned (which are copied unless sole too).
``_add_to`` still checks at run time that the array is its own and can hold the sum
(its shape and dtype), and takes None as nothing having flowed back yet.
"""

from __future__ import annotations

import ast
import dataclasses

import numpy as np
import sympy as sp

from .algebra import SumDown, Times
from .program import _IDENT, Block, _flat
from .rules import Call, _NumpyFunction

# Helpers of runtime.py whose result is a new array (or a view of one): never an argument.
_NEW = {"_matmul_grad", "_dot_grad", "_inner_grad", "_outer_grad", "_scatter", "_zeros"}


def sole(lines, adjoints: set[str], np_alias: str) -> set[str]:
    """The adjoints of ``adjoints`` that no other name can reach (see the module's
    docstring), read from every line of the backward sweep ``lines``."""
    shared: set[str] = set()
    for line in _flat(lines):
        if not line.target or line.value is None:
            continue
        if line.accumulate or line.like and line.value == line.target or isinstance(
                line.value, str) and line.value.startswith(f"_scatter_add({line.target}, "):
            # acc + c, _plus(acc, c), _add_to(acc, c), _scatter_add(acc, ...): acc's own
            # array or a new one; dx = _unbroadcast(dx, x): dx's, or a new sum. c is read,
            # not kept.
            continue
        kept = _kept(line.value, np_alias)
        if kept:
            shared |= kept | {line.target}
    return adjoints - shared


def add_in_place(lines, targets: set[str]) -> list:
    """``lines`` with each addition into an adjoint of ``targets`` done in its own array."""
    out = []
    for line in lines:
        if isinstance(line, Block):
            out.append(dataclasses.replace(line, body=tuple(add_in_place(line.body, targets)),
                                           orelse=tuple(add_in_place(line.orelse, targets))))
        elif line.accumulate and line.target in targets and not line.in_place:
            out.append(dataclasses.replace(line, in_place=True, unflowed=False))
        else:
            out.append(line)
    return out


def _kept(value, np_alias) -> set[str]:
    """The names whose array ``value`` (a line's value) may be, as it is: none for a new
    array; every name it reads where that is not certain."""
    if isinstance(value, sp.Basic):
        return _kept_sympy(value)
    if isinstance(value, ast.AST):
        node = value
    else:
        try:
            node = ast.parse(str(value), mode="eval").body
        except SyntaxError:
            return set(_IDENT.findall(str(value)))
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Constant)):
        return set()  # arithmetic makes a new array (or a number)
    if isinstance(node, ast.Call) and (
            isinstance(node.func, ast.Name) and node.func.id in _NEW
            or ast.unparse(node.func) == f"{np_alias}.multiply.outer"):
        return set()
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _kept_sympy(expr) -> set[str]:
    if isinstance(expr, sp.Symbol):
        return {expr.name}
    if expr.is_Number or isinstance(expr, (sp.Add, sp.Mul, sp.Pow)):
        return set()
    if isinstance(expr, (Times, SumDown)):  # g itself, multiplied or summed in place
        return _kept_sympy(expr.args[0])
    if isinstance(expr, Call):  # a ufunc or np.where makes a new array; others may not
        name = expr.callee[3:] if expr.callee.startswith("np.") else ""
        return set() if name == "where" or isinstance(getattr(np, name, None), np.ufunc) \
            else {s.name for s in expr.free_symbols}
    if isinstance(expr, _NumpyFunction):
        return _kept_sympy(expr.numpy())
    if isinstance(expr, sp.Function):  # sin, exp, ...: NumPy's ufuncs, a new array
        return set()
    return {s.name for s in expr.free_symbols}
