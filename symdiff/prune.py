"""Adjoint program -> the same program doing less: what the backward sweep does not read is
not computed, what it reads only the shape of is a shape, and arrays are let go after their
last use, so that their memory is free for what follows.

Runs between ``differentiate`` and ``emit``. The forward sweep is the function's own code;
``grad`` (not ``value_and_grad``) of a function whose value is certainly a scalar does not
need that value, so the statements that only compute it go, except where they could raise
(then they stay, or become a check of their operands' shapes, ``_shape_of``). A value the
backward sweep reads only the shape of (``_unbroadcast(g, x)``: x) becomes a ``_Shape``
stand-in, which fails loudly if anything reads it as a value.
"""

from __future__ import annotations

import ast
import dataclasses

from . import kinds as K
from .floats import FROM_NUMPY
from .ir import Eqn
from .program import _IDENT, Block, Line, Program, _flat, _loads
from .shapes import facts, numpy_guard, sources


def prune(program: Program) -> Program:
    """``program`` with its backward sweep cut to what the gradients need, and its forward
    sweep to what the backward sweep (and the value, when returned or checked) needs.

    In ``np.log(np.sum(np.exp(z))) - np.sum(t * z)`` differentiated in z, ``t * z`` is
    never computed: the backward sweep needs its shape alone (``_shape_of(t, z)``).
    """
    ir, grads = program.ir, program.grads
    known = program.facts or facts(ir)
    shapes = known.sources
    backward = _live(list(program.backward), {adj for _, adj in grads if adj})
    forward = list(program.forward)
    values, shaped = _uses(backward)  # what the backward sweep reads: values, shapes
    if not program.with_value and not program.check:
        # name -> (its stand-in's code, the names it reads, guarded, checks anything)
        stand_ins: dict[str, tuple[str, tuple[str, ...], bool, bool]] = {}
        must_run: set[str] = set()
        # names certainly holding NumPy floats (from the kinds, or found below)
        certain: set[str] = {n for n in known.kinds if known.numpy(n)}
        for eqn in ir.eqns:
            if isinstance(eqn, Eqn) and eqn.out:
                _stand_in(eqn, ir, known, certain, stand_ins, must_run)
        # (what a guard may name: the values of the function, not its modules)
        operands = set(ir.params) | {n for n, _ in ir.data_globals} | {
            line.target for line in _flat(forward) if line.target}
        forward = _live(forward, values | {p for p, _ in grads} | {ir.aux} - {""}, shaped,
                        stand_ins, must_run, certain | set(known.kinds), operands)
    # An array read by the backward sweep only for its shape is let go after its last use
    # in the forward one; one it does not read at all is deleted after its last use.
    kept = values | {p for p, _ in grads} | {ir.result, ir.aux}
    made = {line.target for line in forward if isinstance(line, Line) and line.target
            and sources(shapes, line.target)  # (not a scalar: maybe an array)
            and not isinstance(line.value, ast.Name)} - kept  # (nor another's name)
    forward = _release(forward, made & shaped, made - shaped)
    floats = tuple(p for p in program.floats if p in values)
    lists = tuple(p for p in program.lists if p in values)
    return dataclasses.replace(program, forward=tuple(forward), backward=tuple(backward),
                               floats=floats, lists=lists)


def _stand_in(eqn: Eqn, ir, known, certain, stand_ins, must_run):
    """How to have just the shape of ``eqn``'s value, if that is known without it; and
    whether the value is certainly NumPy's (``certain``, read in this order).

    What may raise for another reason than shapes that do not fit always runs
    (``must_run``): an array operation, np.max and np.min (of an empty array), math and
    float. Where Python numbers or lists may be operands (a parameter, say), the stand-in
    is guarded: ``_shape_of(x, y) if _numpy(x, y) else x * y``.
    """
    found = known.shape(eqn.out)
    if eqn.kind == "array":
        # NumPy functions and methods return NumPy values, of a dtype the kinds tell (of
        # integers, np.max(n) + 300 may overflow: then the statement must run)
        if eqn.op.names[0] not in _REDUCTIONS:
            must_run.add(eqn.out)
            return
        fields = {**eqn.op.defaults, **dict(eqn.statics)}
        try:  # only a literal axis: a name would have to be computed, and may not be
            axis, keepdims = (ast.literal_eval(fields[k]) for k in ("axis", "keepdims"))
        except ValueError:
            must_run.add(eqn.out)
            return
        (a,) = [n for p, n, _ in eqn.operands if p == "a"]
        reduce = ir.np_alias + eqn.op.names[0][2:]
        stand_in = f"_reduced_shape({reduce}, {a}, {axis!r}, {keepdims!r})"
        # np.sum(x) takes numbers and lists as NumPy would; x.sum() needs an array.
        function = isinstance(eqn.code, ast.Call) and isinstance(
            eqn.code.func, ast.Attribute) and isinstance(eqn.code.func.value, ast.Name) and \
            eqn.code.func.value.id == ir.np_alias
        if not function and a in known.kinds and a not in certain:
            must_run.add(eqn.out)  # a method of what is known not to be a float array
            return
        guard = () if function or a in certain else (a,)
        reads = (a,)
        checks = axis is not None or a not in certain  # an axis; or a that may not fit
    elif eqn.kind == "elementwise" and _cannot_raise(eqn.code, known):
        return  # (not needed, and nothing to check: it goes)
    elif eqn.kind in ("elementwise", "stop_gradient"):
        found_guard = numpy_guard(eqn, certain, ir, known)
        guard = found_guard and found_guard[0]
        if found_guard and found_guard[1]:
            certain.add(eqn.out)
        if found_guard is None or found == {eqn.out}:
            must_run.add(eqn.out)
            return
        reads = tuple(sorted(found))
        stand_in = f"_shape_of({', '.join(reads)})"
        checks = len(reads) > 1  # shapes against each other (one always fits)
    else:
        must_run.add(eqn.out)
        return
    stand_ins[eqn.out] = (stand_in, reads, bool(guard), checks)


def _cannot_raise(node, known) -> bool:
    """Whether code of Python floats cannot raise: + - * of them, and math's functions
    where the function called NumPy's (where they raise, the gradient runs again without
    them: see ``floats.on_floats``)."""
    match node:
        case ast.Constant(value=float() | int() as value):
            return abs(value) < 2.0 ** 1000  # (an int larger than a float raises)
        case ast.Name(id=name):
            return known.kind(name) == K.FLOAT
        case ast.BinOp(op=ast.Add() | ast.Sub() | ast.Mult()):
            return _cannot_raise(node.left, known) and _cannot_raise(node.right, known)
        case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
            return _cannot_raise(node.operand, known)
        case ast.Attribute(value=ast.Name(id="math"), attr="pi" | "e"):
            return True
        case ast.Call(keywords=[]) if getattr(node, FROM_NUMPY, False):
            return all(_cannot_raise(a, known) for a in node.args)
    return False


def _live(lines, needed: set[str], shapes=(), shape_only=None, must_run=(),
          decided=(), operands=()) -> list:
    """The lines that compute ``needed`` (straight-line ones; blocks all stay).

    A line whose value is not needed becomes the computation of its shape alone where
    ``shape_only`` says how (a name in ``shapes`` is needed for that; for any other, it
    raises where the shapes do not fit, as the statement would). Lines in ``must_run``
    stay, whether needed or not; the rest (a call a derivative reuses) go.
    """
    kept = []
    shapes = set(shapes)
    shape_only = shape_only or {}
    for line in reversed(lines):
        if isinstance(line, Block) or not line.target or line.target in needed:
            kept.append(line)
            needed.update(_loads([line]))
        elif line.target in shape_only:
            code, reads, guarded, checks = shape_only[line.target]
            values = ()
            # The statement itself where an operand is not NumPy's: it may raise. (Names
            # of known kinds were decided while building.)
            guard = [n for n in dict.fromkeys(_loads([line])) if n in operands
                     and n not in decided] if guarded else []
            if guard:
                values = list(dict.fromkeys(_loads([line])))
                code = f"{code} if _numpy({', '.join(guard)}) else {ast.unparse(line.value)}"
            guarded = bool(guard)
            if line.target in shapes:
                kept.append(Line(line.target, code, line.where,
                                 comment="only its shape is needed"))
            elif checks or guarded:
                kept.append(Line(line.target, code, line.where,
                                 comment="not needed: checks that the shapes fit" +
                                 (" (runs it if not all are NumPy's)" if values else "")))
            else:
                continue
            shapes.update(reads)
            needed.update(values)
        elif line.target in shapes or line.target in must_run:
            kept.append(line)
            needed.update(_loads([line]))
    return kept[::-1]


# Helpers of runtime.py that read only the shape of some arguments: name -> positions.
_SHAPE_ARGUMENTS = {"_unbroadcast": (1, 2), "_unreduce": (1,), "_count": (0, 1),
                    "_zeros": (0,), "_size": range(99), "_shape_of": range(99),
                    "_shape_only": (0,),
                    "_reduced_shape": (1,), "_numpy": range(99)}
# Reductions whose result's shape follows from the operand's (np.max, np.min: not
# quite, they raise on an empty array).
_REDUCTIONS = {"np.sum", "np.mean", "np.prod", "np.var", "np.std"}


def _uses(lines) -> tuple[set[str], set[str]]:
    """The names backward ``lines`` read: (for their values, for their shapes only)."""
    values, shapes = set(), set()
    for line in lines:
        if isinstance(line, Block) and line.header.startswith("if "):
            # (a branch, or lines that run only where an adjoint is not None)
            inner = _uses([*line.body, *line.orelse])
            values.update(_IDENT.findall(line.header), inner[0])
            shapes.update(inner[1])
            continue
        if isinstance(line, Block):
            values.update(_loads([line]))
            continue
        shapes.update(_IDENT.findall(line.like))
        if not isinstance(line.value, str):
            values.update(_loads([dataclasses.replace(line, like="")]))
            continue
        if line.accumulate:
            values.add(line.target)
        try:
            tree = ast.parse(line.value, mode="eval")
        except SyntaxError:
            values.update(_IDENT.findall(line.value))
            continue
        only_shape = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in _SHAPE_ARGUMENTS:
                for i, arg in enumerate(node.args):
                    if i in _SHAPE_ARGUMENTS[node.func.id]:
                        parts = arg.elts if isinstance(arg, ast.Tuple) else [arg]
                        only_shape.update(id(p) for p in parts if isinstance(p, ast.Name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (shapes if id(node) in only_shape else values).add(node.id)
    return values, shapes


def _release(lines, shaped: set[str], dead: set[str]) -> list:
    """After the last forward line that reads it for its value, each name in ``shaped``
    becomes its shape (``x = _shape_only(x)``) and each name in ``dead`` is deleted (names
    assigned once, outside blocks; read at least once)."""
    assigned = [line.target for line in lines if isinstance(line, Line) and line.target]
    inside = set(_assigned(lines))
    names = {n for n in shaped | dead if assigned.count(n) == 1 and n not in inside}
    defined: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, line in enumerate(lines):
        if isinstance(line, Block):
            read = set(_loads([line]))
        else:  # a name read for its shape alone is still read, unless it has its shape
            values, shapes = _uses([line])
            read = values | (shapes - shaped)
        for n in read & names:
            if n in defined:
                last[n] = i
        if isinstance(line, Line) and line.target in names:
            defined[line.target] = i
    out = list(lines)
    for i in sorted(set(last.values()), reverse=True):
        where = getattr(lines[i], "where", ("", ""))
        for n in sorted(n for n, j in last.items() if j == i and n in shaped):
            out.insert(i + 1, Line(n, f"_shape_only({n})", where,
                                   comment="only its shape is needed from here on"))
        gone = sorted(n for n, j in last.items() if j == i and n not in shaped)
        if gone:
            out.insert(i + 1, Line("", f"del {', '.join(gone)}", where,
                                   comment="not needed any more: its memory is free"))
    return out


def _assigned(lines):
    """The names assigned inside blocks (loops and branches), at any depth."""
    for line in lines:
        if isinstance(line, Block):
            for inner in (*line.body, *line.orelse):
                if isinstance(inner, Line) and inner.target:
                    yield inner.target
            yield from _assigned(line.body)
            yield from _assigned(line.orelse)
