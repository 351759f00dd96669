"""IR -> adjoint program: the forward sweep, then reverse-mode accumulation of local derivatives.

Each elementwise equation ``v = e(a, b, ...)`` is differentiated on its own with
``sympy.diff`` (never the whole function inlined), giving ``da += dv * de/da``; the
contributions of one equation share common subexpressions (``sympy.cse``), and reuse the
forward values: ``v`` itself, and any call in ``e`` that the derivative needs again is
computed once in the forward sweep and kept in a temporary.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import sympy as sp

from .lower import IR, Eqn, Names, symbol


@dataclass(frozen=True)
class Line:
    """``target = value``, where value is an ``ast`` node, a SymPy expression or code text.

    An adjoint update sets ``accumulate`` (add to the target's current value) and ``like``
    (the variable whose shape the contribution must be summed down to, when broadcasting
    may have enlarged it). A line with an empty target is a statement or a comment.
    """

    target: str
    value: object
    line: int = 0
    accumulate: bool = False
    like: str = ""
    comment: str = ""


@dataclass(frozen=True)
class Program:
    """The generated gradient before printing."""

    ir: IR
    forward: tuple[Line, ...]
    backward: tuple[Line, ...]
    grads: tuple[tuple[str, str | None], ...]  # (parameter, its adjoint; None: zero)
    seed: str
    with_value: bool
    as_tuple: bool


def differentiate(ir: IR, with_value: bool = False, as_tuple: bool = False) -> Program:
    """Reverse-mode adjoint program for ``ir``: returns a Program for ``emit``."""
    names = Names(ir.taken)
    adjoint: dict[str, str] = {}
    active = set(ir.wrt) | {e.out for e in ir.eqns if e.active}
    backward: list[Line] = []
    hoisted: dict[int, dict[int, str]] = {}  # equation index -> {id(call node): temporary}

    seed = names.fresh("d" + ir.result)
    adjoint[ir.result] = seed
    for index in range(len(ir.eqns) - 1, -1, -1):
        eqn = ir.eqns[index]
        if not eqn.active or eqn.out not in adjoint:
            continue
        group: list[Line] = []
        if eqn.kind == "elementwise":
            hoisted[index] = _elementwise(eqn, adjoint, active, names, group)
        elif eqn.kind == "array":
            _array(eqn, adjoint, active, names, ir.np_alias, group)
        if group:
            backward.append(Line("", None, eqn.line, comment=f"line {eqn.line}"))
            backward.extend(group)

    forward: list[Line] = []
    for index, eqn in enumerate(ir.eqns):
        calls = hoisted.get(index, {})
        for _, node in eqn.calls:
            if id(node) in calls:
                forward.append(Line(calls[id(node)], _replace(node, calls, skip=id(node)),
                                    eqn.line))
        forward.append(Line(eqn.out, _replace(eqn.code, calls), eqn.line,
                            comment="stop_gradient: no gradient flows back"
                            if eqn.kind == "stop_gradient" else ""))
    grads = tuple((p, adjoint.get(p)) for p in ir.wrt)
    return Program(ir, tuple(forward), tuple(backward), grads, seed, with_value, as_tuple)


def _accumulate(target, contribution, adjoint, names, line, like, group):
    if target in adjoint:
        group.append(Line(adjoint[target], contribution, line, accumulate=True, like=like))
    else:
        adjoint[target] = names.fresh("d" + target)
        group.append(Line(adjoint[target], contribution, line, like=like))


def _elementwise(eqn: Eqn, adjoint, active, names: Names, group) -> dict[int, str]:
    dv = symbol(adjoint[eqn.out])
    targets = [a for a in eqn.inputs if a in active]
    partials = [sp.diff(eqn.expr, symbol(a)) for a in targets]
    # Reuse forward values: the equation's own value, then every call that is needed again.
    reuse = {} if eqn.expr.is_Atom else {eqn.expr: symbol(eqn.out)}
    partials = [p.xreplace(reuse) for p in partials]
    calls: dict[int, str] = {}
    for expr, node in reversed(eqn.calls):
        if expr != eqn.expr and any(p.has(expr) for p in partials):
            calls[id(node)] = names.fresh("_t", numbered=True)
            partials = [p.xreplace({expr: symbol(calls[id(node)])}) for p in partials]
    kept = [(a, dv * p) for a, p in zip(targets, partials, strict=True) if p != 0]
    if not kept:
        return calls
    temps = iter(lambda: symbol(names.fresh("_t", numbered=True)), None)
    replacements, reduced = _cse([c for _, c in kept], temps)
    for t, value in replacements:
        group.append(Line(t.name, value, eqn.line))
    # The value may be larger than an operand that NumPy broadcast: sum it back down.
    broadcasts = len(eqn.inputs) > 1
    for (a, _), c in zip(kept, reduced, strict=True):
        _accumulate(a, c, adjoint, names, eqn.line, a if broadcasts else "", group)
    return calls


def _cse(exprs, temps):
    replacements, reduced = sp.cse(exprs, symbols=temps)
    # sympy.cse can leave a subexpression it named inside a sum; name it there too.
    for i, (t, value) in enumerate(replacements):
        reduced = [r.xreplace({value: t}) for r in reduced]
        replacements[i + 1:] = [(u, v.xreplace({value: t})) for u, v in replacements[i + 1:]]
    return replacements, reduced


def _array(eqn: Eqn, adjoint, active, names: Names, np_alias, group):
    op = eqn.op
    fields = {**op.defaults, **dict(eqn.statics)}
    for param, name, position in eqn.operands:
        if position is None:
            fields[param] = name
    if op.sequence:
        items = [n for p, n, i in eqn.operands if p == op.sequence]
        fields[op.sequence] = "[" + ", ".join(items) + "]"
    for param, name, position in eqn.operands:
        if name in active and param in op.vjp:
            code = op.vjp[param].format(g=adjoint[eqn.out], out=eqn.out, np=np_alias,
                                        i=position, **fields)
            _accumulate(name, code, adjoint, names, eqn.line, "", group)


def _replace(node, calls: dict[int, str], skip=None):
    """A copy of ``node`` with each hoisted call node replaced by its temporary's name."""
    if id(node) in calls and id(node) != skip:
        return ast.Name(calls[id(node)], ast.Load())
    if not isinstance(node, ast.AST):
        return node
    fields = {}
    for name, value in ast.iter_fields(node):
        if isinstance(value, list):
            fields[name] = [_replace(v, calls) for v in value]
        else:
            fields[name] = _replace(value, calls)
    return type(node)(**fields)
