"""IR -> adjoint program: the forward sweep, then reverse-mode accumulation of local derivatives.

Each elementwise equation ``v = e(a, b, ...)`` is differentiated on its own with
``sympy.diff`` (never the whole function inlined), giving ``da += dv * de/da``; the
contributions of one equation share common subexpressions (``sympy.cse``), and reuse the
forward values: ``v`` itself, and any call in ``e`` that the derivative needs again is
computed once in the forward sweep and kept in a temporary.

Branches stay branches: the backward sweep tests the condition the forward sweep kept.
Loops stay loops: each iteration appends the values its backward step needs to a tape,
and the backward sweep runs over the tape in reverse. An adjoint that a branch or loop
may leave untouched starts as None, and adds nothing where nothing flowed into it
(``_Unflowed``): zero times a nan local derivative would be nan.

Shapes (``shapes.py``) decide where an adjoint must be summed down to its operand's shape
(``_unbroadcast``), and let contributions of one shape wait to be summed down once. An
adjoint known to be an array the gradient made for itself alone (``fresh``) is added to
and multiplied in place (``_add_to``, ``_times``, ``_scatter_add``), each checking at run
time that the array can hold the result; Python numbers take the plain operators.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

import numpy as np
import sympy as sp

from .algebra import SumDown, by_value, cse, in_place, whole_floats
from .ir import IR, Eqn, If, Loop, Names, symbol
from .shapes import array_results, shape_sources, sources


@dataclass(frozen=True)
class Line:
    """``target = value``, where value is an ``ast`` node, a SymPy expression or code text.

    An adjoint update sets ``accumulate`` (add to the target's current value) and ``like``
    (the variable whose shape the contribution must be summed down to, when broadcasting
    may have enlarged it). A line with an empty target is a statement (value) or a heading
    comment (value None) for the source line ``where``.
    """

    target: str
    value: object
    where: tuple[str, str] = ("", "")
    accumulate: bool = False
    like: str = ""
    comment: str = ""
    in_place: bool = False  # accumulate into the target's own array (runtime._add_to)
    unflowed: bool = False  # accumulate into a target that may be None (runtime._plus)


@dataclass(frozen=True)
class Block:
    """A compound statement: ``header`` (``if c:``, ``for ...:``), its body and else part."""

    header: str
    body: tuple
    orelse: tuple = ()
    comment: str = ""


@dataclass(frozen=True)
class Program:
    """The generated gradient before printing."""

    ir: IR
    forward: tuple
    backward: tuple
    grads: tuple[tuple[str, str | None], ...]  # (parameter, its adjoint; None: zero)
    seed: str
    with_value: bool
    as_tuple: bool
    check: bool = True  # whether the call must check that the value is a scalar
    value: str = ""  # with_value: the name that keeps the value for the return
    shared: tuple[bool, ...] = ()  # per gradient: it may be someone else's array: copy it
    floats: tuple[str, ...] = ()  # parameters the backward sweep computes with (_as_float)
    lists: tuple[str, ...] = ()  # parameters it reads otherwise: a list as an array there
    aux: str = ""  # has_aux: the name that keeps aux for the return


def differentiate(ir: IR, with_value: bool = False, as_tuple: bool = False) -> Program:
    """Reverse-mode adjoint program for ``ir``: returns a Program for ``emit``."""
    return _Differentiator(ir).run(with_value, as_tuple)


class _Scope:
    """Which adjoints are assigned so far in one block of the backward sweep."""

    def __init__(self, parent, local):
        self.parent = parent
        self.local = local  # names this block defines; adjoints of others live outside
        self.defined = set(parent.defined) if parent else set()
        self.preinit: list[str] = []  # outer adjoints to set to zero before the block


class _Differentiator:
    def __init__(self, ir: IR):
        self.ir = ir
        self.names = Names(ir.taken)
        self.adj: dict[str, str] = {}
        self.active = set(ir.wrt)
        self.hoisted: dict[int, dict[int, str]] = {}  # id(eqn) -> {id(call node): temp}
        self.tapes: dict[int, tuple] = {}  # id(loop) -> (tape, names, names set conditionally)
        self.shapes = shape_sources(ir)
        self.arrays = array_results(ir)
        _mark_active(ir.eqns, self.active)
        # Only what reaches the result gets an adjoint: dead code's local derivative may be
        # nan or inf at the point (np.std of equal entries), and 0 * nan is nan.
        self.active &= _reaching(ir.eqns, {ir.result})

    def run(self, with_value, as_tuple) -> Program:
        top = _Scope(None, set())
        seed = self._adjoint(self.ir.result)
        top.defined.add(self.ir.result)
        self.unit = {self.ir.result}
        self.fresh: dict[str, bool] = {}
        # Names whose adjoint is all ones (np.sum's operand) or all 1/size (np.mean's), of
        # their shape: name -> whether it is the mean.
        self.ones: dict[str, bool] = {}
        self.raw: dict[str, frozenset] = {}  # adjoints not summed down yet: their shapes
        self.views: set[str] = set()  # adjoints that are read-only views (np.broadcast_to)
        self.exact: dict[str, bool] = {}  # of those, the ones that need no summing after all
        backward = self._backward(self.ir.eqns, top)
        self._settle_all(backward)
        flowed: dict[str, str] = {}
        backward = _Unflowed(set(self.adj.values())).sweep(_fold_settles(backward), flowed)
        backward, floats = self._floats(backward)
        forward = self._forward(self.ir.eqns)
        grads = tuple((p, self.adj[p] if p in top.defined and
                       flowed.get(self.adj[p]) != _NONE else None) for p in self.ir.wrt)
        # Copy a gradient that may be someone else's array, or one already returned (wrt
        # naming a parameter twice).
        shared = tuple(bool(adj) and (not self.fresh.get(p, False) or
                                      adj in [a for _, a in grads[:i]])
                       for i, (p, adj) in enumerate(grads))
        # A value that is certainly a scalar (a full reduction, say) needs no check; then,
        # if the value is not returned either, what only computes it need not run (prune).
        check = sources(self.shapes, self.ir.result) != frozenset()
        # The backward sweep may rebind the value's name (a loop's tape restores it).
        value = self.names.fresh("_value") if with_value and self.tapes else ""
        aux = self.names.fresh("_aux_value") if self.ir.aux and self.tapes else self.ir.aux
        return Program(self.ir, tuple(forward), tuple(backward), grads, seed, with_value,
                       as_tuple, check, value, shared, floats, self.lists, aux)

    def _floats(self, backward) -> tuple[list, tuple[str, ...]]:
        """The values the derivatives compute with, in float64: the function's x * K * K
        runs in float64, the derivative's K**2 in K's uint8 would wrap around, and 2*l on a
        list parameter would repeat it. A parameter read by derivatives alone is converted
        where it is (``floats``, emitted as ``if type(p) is not float: p = _as_float(p)``);
        one read as an index too, and a module-level array, get a float64 copy
        (``K_float = _as_float(K)``) that the derivatives read instead.
        """
        in_math = {s.name for line in _flat(backward) if isinstance(line.value, sp.Basic)
                   for s in line.value.free_symbols}
        elsewhere = set(_loads([line if isinstance(line, Block) else dataclasses.replace(
            line, like="") for line in _flat(backward) if not isinstance(line.value, sp.Basic)]))
        arrays = {name for name, obj, _ in self.ir.globals
                  if isinstance(obj, (np.ndarray, np.generic))}
        floats = tuple(p for p in self.ir.params if p in in_math and p not in elsewhere)
        # A list read by an array operation's rule (_matmul_grad(g, X, w, 1)) is an array
        # there, of its own dtype (an index list stays integers).
        self.lists = tuple(p for p in self.ir.params if p in elsewhere)
        copied = sorted(in_math & (arrays | set(self.ir.params)) - set(floats))
        if not copied:
            return backward, floats
        renamed = {symbol(n): symbol(self.names.fresh(n + "_float")) for n in copied}
        out = [Line(renamed[symbol(n)].name, f"_as_float({n})",
                    comment="the derivatives compute in float64") for n in copied]
        return out + _rename(backward, renamed), floats

    def _adjoint(self, name) -> str:
        if name not in self.adj:
            self.adj[name] = self.names.fresh("d" + name)
        return self.adj[name]

    def _accumulate(self, target, contribution, scope: _Scope, lines, where, like="",
                    shape=None, exact=False, owned=False):
        # ``shape``: the sources of the contribution's shape, when summing it down to the
        # target's (like == target) may wait: contributions of one shape are added as they
        # are, and summed down once, when the adjoint is read (see _settle). ``exact``: it
        # has the target's shape already; then so does a sum of such, and nothing waits.
        pending = self.raw.get(target)
        waits = shape is not None and like == target and scope.parent is None
        if pending is not None and not (waits and pending == shape):
            self._settle(target, lines, where)
            pending = None
        if waits and (target not in scope.defined or pending == shape):
            self.exact[target] = exact and self.exact.get(target, target not in scope.defined)
            like = ""
            self.raw[target] = shape
        elif exact:
            like = ""
        # An adjoint made here alone takes a scattered contribution in place.
        mine = self.fresh.get(target) and target in scope.defined and scope.parent is None
        if mine and not like and isinstance(contribution, str) \
                and contribution.startswith("_scatter("):
            name = self.adj[target]
            lines.append(Line(name, f"_scatter_add({name}, {contribution[9:]}", where))
            return
        # Whether the adjoint is now an array made here alone (so it can be handed out
        # without a copy): a sum is; a bare name (x, a CSE temporary, x itself through
        # _unbroadcast) may be the caller's array or another adjoint; in a block, unknown.
        self.fresh[target] = scope.parent is None and (
            target in scope.defined or owned or not _bare(contribution))
        # A spread reduction's adjoint is a read-only view: nothing to write into.
        if target in scope.defined:
            self.views.discard(target)
        elif _is_call(contribution, "_unreduce"):
            self.views.add(target)
        self.unit.discard(target)
        if target in scope.defined:
            self.ones.pop(target, None)
        name = self._adjoint(target)
        if target in scope.defined:
            # Into an array of its own, in place: where array operations made the value
            # (a scalar's adjoint is added as it is, without a helper's call).
            lines.append(Line(name, contribution, where, accumulate=True, like=like,
                              in_place=bool(mine) and self._made_by_arrays(target)))
        elif scope.parent is None or target in scope.local:
            lines.append(Line(name, contribution, where, like=like))
            scope.defined.add(target)
        else:  # an outer variable first reached inside a block: zero it before the block
            scope.preinit.append(target)
            scope.defined.add(target)
            lines.append(Line(name, contribution, where, accumulate=True, like=like))

    def _made_by_arrays(self, name) -> bool:
        """Whether an array operation's result is among what ``name``'s shape is made of."""
        return not sources(self.shapes, name).isdisjoint(self.arrays)

    def _settle(self, target, lines, where=("", "")):
        """Sum an adjoint left larger than its variable down to the variable's shape."""
        if self.raw.pop(target, None) is not None and not self.exact.pop(target):
            lines.append(Line(self.adj[target], self.adj[target], where, like=target))

    def _settle_all(self, lines):
        for target in sorted(self.raw):
            self._settle(target, lines)

    def _enter(self, scope: _Scope, child: _Scope, lines):
        """Zero, before a block, the outer adjoints its backward sweep adds to."""
        for target in dict.fromkeys(child.preinit):
            if target in scope.defined:
                continue
            scope.defined.add(target)
            if scope.parent is None or target in scope.local:
                lines.append(Line(self._adjoint(target), _NOTHING,
                                  comment="nothing has flowed back to it yet"))
            else:
                scope.preinit.append(target)

    # --- the backward sweep ---

    def _backward(self, items, scope: _Scope) -> list:
        lines: list = []
        for item in reversed(items):
            if isinstance(item, Eqn):
                self._eqn(item, scope, lines)
                continue
            if scope.parent is None:  # what a block reads or adds to must be summed down
                self._settle_all(lines)
            if isinstance(item, If):
                self._if(item, scope, lines)
            else:
                self._loop(item, scope, lines)
        return lines

    def _eqn(self, eqn: Eqn, scope, lines):
        if eqn.out not in self.active or eqn.out not in scope.defined:
            return
        group: list = []
        self._settle(eqn.out, group, eqn.where)
        if eqn.kind == "elementwise":
            self._elementwise(eqn, scope, group)
        elif eqn.kind == "array":
            self._array(eqn, scope, group)
        if group:
            lines.append(Line("", None, eqn.where))
            lines.extend(group)

    def _elementwise(self, eqn: Eqn, scope, group):
        # The seed is exactly 1 until something else flows into the result: fold it; so is
        # each entry of a sum's adjoint then (np.sum(v) with v's adjoint all ones), and of a
        # mean's, 1/size. (Only where the operands' shapes are known to make v's.)
        ones = eqn.out in self.ones and sources(self.shapes, eqn.out) != {eqn.out}
        dv = sp.S.One if eqn.out in self.unit or ones else symbol(self.adj[eqn.out])
        shape = "(" + ", ".join(eqn.inputs) + ("," if len(eqn.inputs) == 1 else "") + ")"
        if ones and self.ones[eqn.out]:
            dv = symbol(self.names.fresh("_t", numbered=True))
            group.append(Line(dv.name, f"1.0 / _size{shape}", eqn.where,
                              comment="each entry's share of the mean"))
        targets = [a for a in eqn.inputs if a in self.active]
        # factor_terms undoes SymPy's 2*(a - b) -> 2*a - 2*b, so forward parts can match.
        partials = [sp.factor_terms(whole_floats(sp.diff(eqn.expr, symbol(a))))
                    for a in targets]
        # Reuse forward values: the equation's own value, then every call needed again.
        reuse = {} if eqn.expr.is_Atom else {eqn.expr: symbol(eqn.out)}
        partials = [by_value(eqn, a, p).xreplace(reuse) for a, p in zip(targets, partials,
                                                                         strict=True)]
        calls: dict[int, str] = {}
        for expr, node in reversed(eqn.calls):
            if expr == eqn.expr or not any(p.has(expr) for p in partials):
                continue
            name = self.names.fresh("_t", numbered=True)
            replaced = [p.xreplace({expr: symbol(name)}) for p in partials]
            if replaced == partials:  # has() saw it inside a longer product: not reusable
                self.names.taken.discard(name)
                continue
            calls[id(node)] = name
            partials = replaced
        self.hoisted[id(eqn)] = calls
        kept = [(a, dv * p) for a, p in zip(targets, partials, strict=True) if p != 0]
        if not kept:
            return
        # The value may be larger than an operand that NumPy broadcast: sum it back down,
        # unless the operand is made of the same shapes (then it has the value's shape).
        out_shape = sources(self.shapes, eqn.out)
        if dv.is_Symbol:  # an adjoint read has its variable's shape
            self.shapes[dv.name] = out_shape
        likes = []
        for i, (a, c) in enumerate(kept):
            if ones:
                # Without the ones, a contribution may be smaller than v: spread it to v's
                # shape, which broadcasting makes from the operands' (v itself not needed).
                likes.append(f"{a}, {shape}")
            elif sources(self.shapes, a) == out_shape:
                likes.append("")
            else:
                c, like = self._sum_down_less(c, a)
                kept[i] = (a, c)
                likes.append(like)
        temps = iter(lambda: symbol(self.names.fresh("_t", numbered=True)), None)
        replacements, reduced = cse([c for _, c in kept], temps)
        if dv == symbol(self.adj[eqn.out]) and self.fresh.get(eqn.out) and \
                eqn.out not in self.views and scope.parent is None and \
                self._made_by_arrays(eqn.out):
            replacements, reduced = in_place(dv, replacements, reduced)
        for t, value in replacements:
            group.append(Line(t.name, value, eqn.where))
        # v's adjoint handed on as it is to one operand alone (dZ = dS for S = Z - m) is
        # that operand's own array too, when v's was.
        handed = [c for c in reduced if c == dv]
        owned = len(handed) == 1 and self.fresh.get(eqn.out, False) and \
            dv == symbol(self.adj[eqn.out])
        for (a, _), c, like in zip(kept, reduced, likes, strict=True):
            # Under the seed the value is a scalar, and so is every operand: the
            # contribution needs no summing down, though it may wait with the others.
            self._accumulate(a, c, scope, group, eqn.where, like,
                             out_shape if like == a else None, exact=eqn.out in self.unit,
                             owned=owned and c == dv)

    def _sum_down_less(self, c, a):
        """``_unbroadcast(f * h, a)`` as ``f * _unbroadcast(h, a)``, where each factor in f
        is a number or has no more axes than ``a``: it is the same along every axis the sum
        runs over, and is multiplied in after the sum, on the smaller array.

        Returns the contribution and what it must still be summed down like ("": nothing).
        """
        if not isinstance(c, sp.Mul):
            return c, a
        mine = sources(self.shapes, a)
        outer, inner = [], []
        for f in c.args:
            fits = f.is_number or all(sources(self.shapes, s.name) <= mine
                                      for s in f.free_symbols)
            (outer if fits else inner).append(f)
        if not inner or all(f.is_number for f in outer):
            return c, a  # nothing smaller to multiply by (a number alone: let it wait)
        return sp.Mul(*outer) * SumDown(sp.Mul(*inner), symbol(a)), ""

    def _array(self, eqn: Eqn, scope, group):
        op = eqn.op
        fields = {**op.defaults, **dict(eqn.statics)}
        for param, name, position in eqn.operands:
            if position is None:
                fields[param] = name
        if op.sequence:
            items = [n for p, n, i in eqn.operands if p == op.sequence]
            fields[op.sequence] = "[" + ", ".join(items) + "]"
        for param, name, position in eqn.operands:
            if name in self.active and param in op.vjp:
                g = "1.0" if eqn.out in self.unit else self.adj[eqn.out]
                if g == "1.0" and op.names[0] in ("np.sum", "np.mean") and \
                        fields["axis"] == "None" and fields["keepdims"] == "False" and \
                        name not in scope.defined:
                    self.ones[name] = op.names[0] == "np.mean"
                code = op.vjp[param].format(g=g, out=eqn.out,
                                            np=self.ir.np_alias, i=position, **fields)
                self._accumulate(name, code, scope, group, eqn.where)

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


def _flat(lines):
    """Every Line of ``lines``, inside blocks too."""
    for line in lines:
        if isinstance(line, Block):
            yield from _flat(line.body)
            yield from _flat(line.orelse)
        else:
            yield line


def _rename(lines, renamed: dict) -> list:
    """``lines`` with SymPy values' symbols replaced as ``renamed`` says."""
    out = []
    for line in lines:
        if isinstance(line, Block):
            out.append(dataclasses.replace(line, body=tuple(_rename(line.body, renamed)),
                                           orelse=tuple(_rename(line.orelse, renamed))))
        elif isinstance(line.value, sp.Basic):
            out.append(dataclasses.replace(line, value=line.value.xreplace(renamed)))
        else:
            out.append(line)
    return out


def _fold_settles(lines) -> list:
    """``dx = c`` then ``dx = _unbroadcast(dx, x)``: one line, ``dx = _unbroadcast(c, x)``."""
    out: list = []
    for line in lines:
        if isinstance(line, Line) and line.like and line.value == line.target:
            for i in range(len(out) - 1, -1, -1):
                prior = out[i]
                if isinstance(prior, Line) and prior.target == line.target:
                    if not prior.accumulate and not prior.like:
                        out[i] = dataclasses.replace(prior, like=line.like)
                        line = None
                    break
        if line is not None:
            out.append(line)
    return out


# --- adjoints that nothing flowed into ---

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


def _is_call(code, name: str) -> bool:
    """Whether ``code`` (text) is one call of the function ``name``, as a whole."""
    if not isinstance(code, str) or not code.startswith(name + "("):
        return False
    node = ast.parse(code, mode="eval").body
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == name


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


_IDENT = re.compile(r"[A-Za-z_]\w*")


def _loads(lines) -> list[str]:
    """Every name the backward lines read (a superset is fine: it is filtered later)."""
    out = []
    for line in lines:
        if isinstance(line, Block):
            if line.header.startswith("for "):
                # A for header binds its targets anew in each step: only what follows
                # " in " is read, and the body's reads of the targets are its own.
                bound, read = line.header[4:].split(" in ", 1)
                inner = set(_IDENT.findall(bound))
                out += _IDENT.findall(read) + [n for n in _loads(line.body) if n not in inner]
            else:
                out += _IDENT.findall(line.header) + _loads(line.body) + _loads(line.orelse)
            continue
        value = line.value
        if isinstance(value, sp.Basic):
            out += sorted(s.name for s in value.free_symbols)
        elif isinstance(value, ast.AST):
            out += [n.id for n in ast.walk(value) if isinstance(n, ast.Name)]
        elif isinstance(value, str):
            out += _IDENT.findall(value)
        if line.like:
            out += _IDENT.findall(line.like)
        if line.accumulate:
            out.append(line.target)
    return out


def _pack(names) -> str:
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


def _unpack(names) -> str:
    return _pack(names) if names else "_"


def _bare(contribution) -> bool:
    """A contribution that is just a name (or _unbroadcast of one): maybe not a new array."""
    if isinstance(contribution, sp.Symbol):
        return True
    if isinstance(contribution, str):
        return bool(re.fullmatch(r"_unbroadcast\(\w+, [\w, ()]+\)|\w+", contribution))
    return isinstance(contribution, ast.Name)


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
