"""A backward sweep -> the same, where an adjoint that nothing flowed into (None) adds nothing.

``differentiate`` runs ``_Unflowed`` over its backward sweep once the sweep is built.
"""

from __future__ import annotations

import ast
import dataclasses

import sympy as sp

from .program import _IDENT, Block, Line, _flat, _loads

_NOTHING = "None"  # the value of an adjoint before anything has flowed back to it
_SET, _MAYBE, _NONE = "set", "maybe None", "None"  # what an adjoint may hold at a line


class _Unflowed:
    """The backward sweep, rewritten so that an adjoint nothing flowed into adds nothing.

    An adjoint that a block adds to may receive nothing at run time (a loop that ran zero
    times, a branch not taken): it starts as None, not as zeros, since zero times a local
    derivative that is nan or inf at the point (np.sqrt at 0) is nan, where nothing
    reached the output through that value (JAX gives 0). Where an adjoint may still be
    None, the lines that read it run under ``if ds is not None:``, and adding to it is
    ``_plus(ds, c)``. Straight-line code has no such adjoint: its sweep stays as it is.
    """

    def __init__(self, adjoints: set[str]):
        self.adjoints = adjoints

    def sweep(self, lines, state: dict[str, str], depth=0) -> list:
        """``lines`` rewritten; ``state`` (adjoint -> _SET, _MAYBE or _NONE) follows them."""
        items: list = []
        guards: dict[str, frozenset] = {}  # a temporary -> the adjoints it needs set
        for line in lines:
            if isinstance(line, Block):
                items.append((frozenset(), self._block(line, state, depth), None))
            else:
                items.append(self._line(line, state, guards, depth))
        return _drop_unread_nothing(_group(items))

    def _block(self, block: Block, state, depth) -> Block:
        if block.header.startswith("for "):
            # Each iteration starts with what the previous one left, or (the first, or
            # none at all) with what came before: until that stops changing.
            entry = dict(state)
            while True:
                after = dict(entry)
                body = self.sweep(block.body, after, depth + 1)
                joined = _join(state, after)
                if joined == entry:
                    break
                entry = joined
            state.update(entry)
            return dataclasses.replace(block, body=tuple(body))
        then, orelse = dict(state), dict(state)
        body = self.sweep(block.body, then, depth + 1)
        other = self.sweep(block.orelse, orelse, depth + 1)
        state.update(_join(then, orelse))
        return dataclasses.replace(block, body=tuple(body), orelse=tuple(other))

    def _line(self, line: Line, state, guards, depth):
        """(the adjoints that must be set for ``line`` to run, the line, its else line)."""
        target = line.target
        if not target or line.value is None:
            return frozenset(), line, None
        if line.value == _NOTHING:
            state[target] = _NONE
            return frozenset(), line, None
        maybe = {n for n, s in state.items() if s != _SET}
        scatter = f"_scatter_add({target}, "
        if target in maybe and isinstance(line.value, str) and line.value.startswith(scatter):
            # Added in place into an array that may be None: an addition, as any other.
            line = dataclasses.replace(line, value="_scatter(" + line.value[len(scatter):],
                                       accumulate=True)
        reads = set(_loads([dataclasses.replace(line, accumulate=False)]))
        guard = frozenset(reads & maybe).union(*(guards.get(n, ()) for n in reads))
        copied = _copied(line)
        if target not in self.adjoints:  # a temporary, read by the lines that follow
            guards[target] = guard
            return guard, line, None
        before = state.get(target, _SET)
        if copied in self.adjoints and (not line.accumulate or before == _NONE and depth):
            # dy = dy_2 hands on whatever dy_2 holds, None too
            state[target] = state.get(copied, _SET)
            return frozenset(), dataclasses.replace(line, accumulate=False), None
        if not line.accumulate:
            if target in reads:  # dx = _unbroadcast(dx, x): None stays None
                return guard, line, None
            state[target] = _MAYBE if guard else _SET
            orelse = Line(target, _NOTHING) if guard and before != _NONE else None
            return guard, line, orelse
        if before == _NONE and depth:
            # The first contribution in a block: the adjoint (which the gradient does not
            # trust to be its own array there) is it.
            line = dataclasses.replace(line, accumulate=False, in_place=False)
        elif before != _SET:
            line = dataclasses.replace(line, unflowed=True, in_place=False)
        state[target] = _MAYBE if guard and before != _SET else _SET
        return guard, line, None


def _join(a: dict, b: dict) -> dict:
    """What an adjoint may hold after either of two paths (a name on one alone: its own)."""
    return {n: a.get(n, b.get(n)) if a.get(n, b.get(n)) == b.get(n, a.get(n)) else _MAYBE
            for n in {**a, **b}}


def _copied(line: Line) -> str:
    """The name a line's value is, bare (``dy = dy_2``), or ""."""
    value = line.value
    if line.like:
        return ""
    if isinstance(value, sp.Symbol):
        return value.name
    if isinstance(value, ast.Name):
        return value.id
    return value if isinstance(value, str) and _IDENT.fullmatch(value) else ""


def _group(items) -> list:
    """The lines, each run of them that needs the same adjoints set under one ``if``."""
    out: list = []
    run: list = []
    for i, (guard, line, orelse) in enumerate(items):
        if guard:
            run.append((line, orelse))
        else:
            out.append(line)
        last = i + 1 == len(items) or items[i + 1][0] != guard
        if guard and last:
            test = " and ".join(f"{n} is not None" for n in sorted(guard))
            out.append(Block(f"if {test}:", tuple(line for line, _ in run),
                             tuple(o for _, o in run if o is not None),
                             comment="None: nothing has flowed back on the path taken"))
            run = []
    return out


def _drop_unread_nothing(lines) -> list:
    """Without the ``dx = None`` lines whose value nothing reads (dx is set first)."""
    out = list(lines)
    for i in range(len(out) - 1, -1, -1):
        line = out[i]
        if isinstance(line, Line) and line.value == _NOTHING and \
                _sets_first(out[i + 1:], line.target):
            del out[i]
    return out


def _sets_first(lines, name) -> bool:
    """Whether ``lines`` assign ``name`` on every path before reading it."""
    for line in lines:
        if isinstance(line, Block):
            if name not in _loads([line]) and name not in {n.target for n in _flat([line])}:
                continue
            return not line.header.startswith("for ") and _sets_first(line.body, name) \
                and _sets_first(line.orelse, name)
        if name in _loads([line]):
            return False
        if line.target == name:
            return True
    return False
