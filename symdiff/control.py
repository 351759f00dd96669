"""IR blocks -> the adjoint program's branches and loops (a tape per loop), and its forward sweep.

``differentiate``'s differentiator mixes this in. A branch's backward sweep tests the
condition the forward sweep kept; a loop's forward sweep appends the values each backward
step needs to a tape, which the backward sweep runs over in reverse.
"""

from __future__ import annotations

import ast

from .ir import Eqn, If, Loop
from .program import Block, Line, _loads, _pack, _unpack
from .unflowed import _NOTHING


class _Scope:
    """Which adjoints are assigned so far in one block of the backward sweep."""

    def __init__(self, parent, local):
        self.parent = parent
        self.local = local  # names this block defines; adjoints of others live outside
        self.defined = set(parent.defined) if parent else set()
        self.preinit: list[str] = []  # outer adjoints to set to zero before the block


class Control:
    """if, for and while in both sweeps; relies on ``differentiate._Differentiator`` for
    everything else (``_accumulate``, ``_backward``, ``_enter``, ``tapes``, ``hoisted``)."""

    def _if(self, item: If, scope, lines):
        branches = []
        for body, pick in ((item.then, 1), (item.orelse, 2)):
            child = _Scope(scope, _defined_here(body, self.tapes, self.hoisted))
            blines: list = []
            for phi in item.phis:
                merged, source = phi[0], phi[pick]
                if merged in scope.defined and source in self.active:
                    self._accumulate(source, self.adj[merged], child, blines, item.where)
            blines += self._backward(body, child)
            branches.append((child, blines))
        if not any(blines for _, blines in branches):
            return
        for child, _ in branches:
            self._enter(scope, child, lines)
        then, orelse = (tuple(b) for _, b in branches)
        lines.append(Line("", None, item.where))
        lines.append(Block(f"if {item.cond}:", then or (Line("", "pass"),), orelse,
                           comment="the branch the forward sweep took"))

    def _loop(self, item: Loop, scope, lines):
        carried = [(phi, init, nxt) for phi, init, nxt in item.carried if phi in self.active]
        defined = _defined_here(item.body, self.tapes, self.hoisted) | {item.target}
        child = _Scope(scope, defined)
        blines: list = []
        for phi, _, nxt in carried:
            # The adjoint of this iteration's result is what flowed back to the variable so
            # far; what flows to its value at the start of the iteration starts as nothing.
            blines.append(Line(self._adjoint(nxt), self._adjoint(phi), item.where))
            blines.append(Line(self.adj[phi], _NOTHING, item.where))
            child.defined.update((nxt, phi))
        body = self._backward(item.body, child)
        if not body and not carried:
            return
        blines += body
        # Everything the body assigns, through its branches, and the tapes of inner loops.
        defined |= _assigned_within(item.body, self.tapes, self.hoisted)
        needed = [n for n in dict.fromkeys(_loads(blines)) if n in defined or n in {
            phi for phi, _, _ in item.carried}]
        tape = self.names.fresh("_tape", numbered=True)
        top = _defined_here(item.body, self.tapes, self.hoisted) | {item.target} | {
            phi for phi, _, _ in item.carried}
        self.tapes[id(item)] = (tape, tuple(needed), tuple(n for n in needed if n not in top))
        child.preinit += [phi for phi, _, _ in carried]
        self._enter(scope, child, lines)
        lines.append(Line("", None, item.where))
        lines.append(Block(f"for {_unpack(needed)} in reversed({tape}):", tuple(blines),
                           comment="the iterations in reverse"))
        for phi, init, _ in carried:
            if init is not None and init in self.active:
                self._accumulate(init, self.adj[phi], scope, lines, item.where)

    # --- the forward sweep ---

    def _forward(self, items) -> list:
        out: list = []
        for item in items:
            if isinstance(item, Eqn):
                calls = self.hoisted.get(id(item), {})
                for _, node in item.calls:
                    if id(node) in calls:
                        out.append(Line(calls[id(node)], _replace(node, calls, skip=id(node)),
                                        item.where))
                comment = "" if item.kind != "stop_gradient" else \
                    "aux: returned as computed, not differentiated" \
                    if item.out == self.ir.aux else "stop_gradient: no gradient flows back"
                out.append(Line(item.out, _replace(item.code, calls), item.where,
                                comment=comment))
            elif isinstance(item, If):
                then = self._forward(item.then) + [
                    Line(m, ast.Name(t, ast.Load()), item.where) for m, t, _ in item.phis]
                orelse = self._forward(item.orelse) + [
                    Line(m, ast.Name(e, ast.Load()), item.where) for m, _, e in item.phis]
                out.append(Block(f"if {item.cond}:", tuple(then) or (Line("", "pass"),),
                                 tuple(orelse)))
            else:
                out.extend(self._forward_loop(item))
        return out

    def _forward_loop(self, item: Loop) -> list:
        out = [Line(phi, init or f"_unbound({name!r})", item.where,
                    comment="carried from one iteration to the next")
               for (phi, init, _), name in zip(item.carried, item.names, strict=True)]
        tape = self.tapes.get(id(item))
        body = self._forward(item.body)
        if tape is not None:
            # A value assigned in one branch only is recorded on every iteration: None when
            # that branch did not run (its backward step then does not read it).
            body[:0] = [Line(n, "None", item.where, comment="set in one branch only")
                        for n in tape[2]]
            out.append(Line(tape[0], "[]", item.where,
                            comment="each iteration's values, for the backward sweep"))
            body.append(Line("", f"{tape[0]}.append({_pack(tape[1])})", item.where))
        body += [Line(phi, nxt, item.where) for phi, _, nxt in item.carried]
        if item.break_flag:
            body.append(Block(f"if {item.break_flag}:", (Line("", "break"),)))
        header = (f"for {item.target} in {ast.unparse(item.header)}:" if item.kind == "for"
                  else f"while {ast.unparse(item.header)}:")
        out.append(Block(header, tuple(body) or (Line("", "pass"),)))
        return out


def _mark_active(items, active):
    for item in items:
        if isinstance(item, Eqn):
            if item.active:
                active.add(item.out)
        elif isinstance(item, If):
            _mark_active(item.then, active)
            _mark_active(item.orelse, active)
            active.update(m for m, t, e in item.phis if t in active or e in active)
        else:
            active.update(p for p, i, _ in item.carried if i in active)
            # Again until nothing changes: a variable that turns active only at the end of
            # an iteration makes the next iteration's uses of it active (a branch's phi too).
            while True:
                before = len(active)
                _mark_active(item.body, active)
                active.update(p for p, _, n in item.carried if n in active)
                if len(active) == before:
                    break


def _reaching(items, reach: set[str]) -> set[str]:
    """The names whose values flow into a name of ``reach``: ``reach`` grown in place."""
    for item in reversed(items):
        if isinstance(item, Eqn):
            if item.out in reach:
                reach.update(item.inputs)
        elif isinstance(item, If):
            reach.update(n for m, t, e in item.phis if m in reach for n in (t, e))
            _reaching(item.then, reach)
            _reaching(item.orelse, reach)
        else:
            # Until nothing changes: what the next iteration reads at its start is what
            # this one left at its end.
            while True:
                before = len(reach)
                reach.update(n for p, _, n in item.carried if p in reach)
                _reaching(item.body, reach)
                if len(reach) == before:
                    break
            reach.update(i for p, i, _ in item.carried if p in reach and i is not None)
    return reach


def _defined_here(items, tapes, hoisted) -> set[str]:
    """The names a block's own statements assign (the block's locals)."""
    names = set()
    for item in items:
        if isinstance(item, Eqn):
            names.add(item.out)
            names.update(hoisted.get(id(item), {}).values())
        elif isinstance(item, If):
            names.update(m for m, _, _ in item.phis)
        else:
            names.update(p for p, _, _ in item.carried)
            if item.target:
                names.add(item.target)
            if id(item) in tapes:
                names.add(tapes[id(item)][0])
    return names


def _assigned_within(items, tapes, hoisted) -> set[str]:
    """Every name a loop body assigns in one iteration, in its branches too (not inside
    inner loops, whose values their own tapes keep)."""
    names = _defined_here(items, tapes, hoisted)
    for item in items:
        if isinstance(item, If):
            names |= _assigned_within(item.then, tapes, hoisted)
            names |= _assigned_within(item.orelse, tapes, hoisted)
    return names


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
    return ast.copy_location(type(node)(**fields), node)  # unparsing a statement reads it
