"""IR -> adjoint program: the forward sweep, then reverse-mode accumulation of local derivatives.

Each elementwise equation ``v = e(a, b, ...)`` is differentiated on its own with
``sympy.diff`` (never the whole function inlined), giving ``da += dv * de/da``; the
contributions of one equation share common subexpressions (``sympy.cse``), and reuse the
forward values: ``v`` itself, and any call in ``e`` that the derivative needs again is
computed once in the forward sweep and kept in a temporary.

Branches stay branches and loops stay loops, with a tape per loop (``control.py``). An
adjoint that a branch or loop may leave untouched starts as None, and adds nothing where
nothing flowed into it (``unflowed.py``): zero times a nan local derivative would be nan.
The values the derivatives read are made floats of the precision they compute in
(``floats.py``). The program is made of the Lines and Blocks of ``program.py``.

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

import sympy as sp

from . import kinds as K
from .algebra import SumDown, Times, by_value, cse, decimals, in_place, reuse_value, whole_floats
from .control import Control, _mark_active, _reaching, _Scope
from .errors import SymdiffError
from .floats import Floats, _float_dtype
from .ir import IR, Eqn, If, Names, makes_new, symbol, template_fields
from .owned import add_in_place, sole
from .program import Line, Program, _flat, _fold_settles, _rename
from .prune import _uses
from .shapes import facts, sources
from .unflowed import _NONE, _NOTHING, _Unflowed


def differentiate(ir: IR, with_value: bool = False, as_tuple: bool = False) -> Program:
    """Reverse-mode adjoint program for ``ir``: returns a Program for ``emit``."""
    return _Differentiator(ir).run(with_value, as_tuple)


class _Differentiator(Control, Floats):
    def __init__(self, ir: IR):
        self.ir = ir
        self.names = Names(ir.taken)
        self.adj: dict[str, str] = {}
        self.active = set(ir.wrt)
        self.hoisted: dict[int, dict[int, str]] = {}  # id(eqn) -> {id(call node): temp}
        self.tapes: dict[int, tuple] = {}  # id(loop) -> (tape, names, names set conditionally)
        self.facts = facts(ir)
        self.shapes = dict(self.facts.sources)  # (adjoints are added: they share shapes)
        self.arrays = self.facts.arrays
        self.dtype = _float_dtype(ir)
        self.temp_kinds: dict[str, object] = {}  # hoisted parts of expressions: their kinds
        self.constant_parts: set[str] = set()  # of those, the ones without gradient
        self.spendable = _spendable(ir)
        self.spent: set[str] = set()  # of those, the ones a product is computed in
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
        # Names whose adjoint is one number in every entry, of their shape: np.sum's
        # operand (the sum's adjoint, a scalar), np.mean's (that over the size): name ->
        # (whether it is the mean, that number: "1.0" or the sum's adjoint's name).
        self.ones: dict[str, tuple[bool, str]] = {}
        self.raw: dict[str, frozenset] = {}  # adjoints not summed down yet: their shapes
        self.views: set[str] = set()  # adjoints that are read-only views (np.broadcast_to)
        self.exact: dict[str, bool] = {}  # of those, the ones that need no summing after all
        backward = self._backward(self.ir.eqns, top)
        self._settle_all(backward)
        flowed: dict[str, str] = {}
        backward = _Unflowed(set(self.adj.values())).sweep(
            self._fold_numbers(_fold_settles(backward)), flowed)
        backward, floats = self._floats(backward)
        backward = _unspend(backward, self.spent)
        # Adjoints no other name can reach are added to in their own arrays (loops too),
        # where arrays are likely (a number is added to as it is, without a call).
        arrays = {a for v, a in self.adj.items() if self._made_by_arrays(v)}
        alone = sole(backward, arrays, self.ir.np_alias)
        backward = add_in_place(backward, alone)
        forward = self._forward(self.ir.eqns)
        grads = tuple((p, self.adj[p] if p in top.defined and
                       flowed.get(self.adj[p]) != _NONE else None) for p in self.ir.wrt)
        # Copy a gradient that may be someone else's array, or one already returned (wrt
        # naming a parameter twice).
        shared = tuple(bool(adj) and (not (self.fresh.get(p, False) or adj in alone) or
                                      adj in [a for _, a in grads[:i]])
                       for i, (p, adj) in enumerate(grads))
        # A value that is certainly a scalar (a full reduction, say) needs no check; then,
        # if the value is not returned either, what only computes it need not run (prune).
        check = sources(self.shapes, self.ir.result) != frozenset()
        # The backward sweep may rebind the value's name (a loop's tape restores it).
        value = self.names.fresh("_value") if with_value and self.tapes else ""
        aux = self.names.fresh("_aux_value") if self.ir.aux and self.tapes else self.ir.aux
        return Program(self.ir, tuple(forward), tuple(backward), grads, seed, with_value,
                       as_tuple, check, value, shared, floats, self.lists, aux, self.facts,
                       self.dtype)

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
        return any(s in self.arrays or self.facts.ndarray(s) for s in sources(self.shapes, name))

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
        self._refuse_list_arithmetic(eqn)
        # The seed is exactly 1 until something else flows into the result: fold it; so is
        # each entry of a sum's adjoint then (np.sum(v) with v's adjoint all ones), and of a
        # mean's, 1/size. (Only where the operands' shapes are known to make v's.)
        ones = eqn.out in self.ones and sources(self.shapes, eqn.out) != {eqn.out}
        dv = sp.S.One if eqn.out in self.unit else symbol(self.adj[eqn.out])
        shape = "(" + ", ".join(eqn.inputs) + ("," if len(eqn.inputs) == 1 else "") + ")"
        if ones:
            mean, g = self.ones[eqn.out]
            dv = sp.S.One if g == "1.0" else symbol(g)
            if mean:
                dv = symbol(self.names.fresh("_t", numbered=True))
                group.append(Line(dv.name, f"{g} / _size{shape}", eqn.where,
                                  comment="each entry's share of the mean"))
        targets = [a for a in eqn.inputs if a in self.active]
        # factor_terms undoes SymPy's 2*(a - b) -> 2*a - 2*b, so forward parts can match
        # (their floats as written: 1.0 + u stays 1.0 + u until then).
        partials = [sp.factor_terms(sp.diff(eqn.expr, symbol(a))) for a in targets]
        # Reuse forward values: the equation's own value, then every call needed again.
        partials = [by_value(eqn, a, p) for a, p in zip(targets, partials, strict=True)]
        if not eqn.expr.is_Atom:
            partials = [reuse_value(p, eqn.expr, symbol(eqn.out)) for p in partials]
        calls: dict[int, str] = {}
        for expr, node in reversed(eqn.calls):
            part = self._part(expr, node)
            if expr == eqn.expr or part is False or \
                    not part and not any(p.has(expr) for p in partials):
                continue
            name = self.names.fresh("_t", numbered=True)
            if part:  # (subs: 2*b in 2*b*y, where has() sees only whole factors)
                replaced = [p.subs(expr, symbol(name)) for p in partials]
                self.temp_kinds[name] = part[1]
                if any(p.has(expr) for p in replaced):
                    replaced = partials  # (read otherwise too: as before)
            else:
                replaced = [reuse_value(p, expr, symbol(name)) for p in partials]
                self.temp_kinds[name] = self.facts.kind_of(node)
            if replaced == partials:  # has() saw it inside a longer product: not reusable
                self.names.taken.discard(name)
                continue
            calls[id(node)] = name
            # (an elementwise part: its shape is its operands' broadcast)
            self.shapes[name] = frozenset().union(
                *(sources(self.shapes, s.name) for s in expr.free_symbols))
            if not any(isinstance(n, ast.Name) and n.id in self.active for n in ast.walk(node)):
                self.constant_parts.add(name)  # (np.abs(K) of uint8 K: maybe any kind)
            partials = replaced
        self.hoisted[id(eqn)] = calls
        kept = [(a, dv * p) for a, p in zip(targets, partials, strict=True) if p != 0]
        if not kept:
            return
        # The value may be larger than an operand that NumPy broadcast: sum it back down,
        # unless the operand is made of the same shapes (then it has the value's shape).
        out_shape = sources(self.shapes, eqn.out)
        if dv.is_Symbol and not ones:  # an adjoint read has its variable's shape
            self.shapes[dv.name] = out_shape
        likes = []
        for i, (a, c) in enumerate(kept):
            if ones and frozenset().union(*(sources(self.shapes, s.name) for s in
                                            c.free_symbols)) != out_shape:
                # Without v's adjoint, a contribution may be smaller than v: spread it to
                # v's shape, which broadcasting makes from the operands' (v not needed).
                likes.append(f"{a}, {shape}")
            elif sources(self.shapes, a) == out_shape:
                likes.append("")
            elif ones:  # (without v's adjoint, a factor alone may be smaller than v)
                likes.append(a)
            else:
                c, like = self._sum_down_less(c, a)
                kept[i] = (a, c)
                likes.append(like)
        temps = iter(lambda: symbol(self.names.fresh("_t", numbered=True)), None)
        replacements, reduced = cse([decimals(whole_floats(c)) for _, c in kept], temps)
        if dv == symbol(self.adj[eqn.out]) and self.fresh.get(eqn.out) and \
                eqn.out not in self.views and scope.parent is None and \
                self._made_by_arrays(eqn.out):
            replacements, reduced = in_place(dv, replacements, reduced)
        if eqn.out in self.spendable and scope.parent is None and \
                self._made_by_arrays(eqn.out) and not any(
                    e.has(Times) for e in [v for _, v in replacements] + list(reduced)):
            # Nothing reads the value after its own step (as softmax's E in E * dE): a
            # product with it is computed in its array, rather than in a new one.
            done = in_place(symbol(eqn.out), replacements, reduced)
            if done != (replacements, reduced):
                self.spent.add(eqn.out)
                replacements, reduced = done
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

    def _refuse_list_arithmetic(self, eqn: Eqn):
        """2 * l and l + l of a list repeat and join it, where SymPy's image reads them as
        arithmetic: refused where l depends on the differentiated inputs (where it does
        not, the gradient reads the value the function computed)."""
        for node in ast.walk(eqn.code):
            if not isinstance(node, ast.BinOp) or not isinstance(
                    self.facts.kind_of(node), (K.List, K.Tuple)) or not any(
                    isinstance(n, ast.Name) and n.id in self.active for n in ast.walk(node)):
                continue
            # (the caret at the user's own operation: of that operator on that line, the one
            # with the same literal operands, the innermost)
            written = [n for n in ast.walk(self.ir.parsed.node) if isinstance(n, ast.BinOp)
                       and n.lineno == eqn.line and type(n.op) is type(node.op)]
            at = max(written, default=ast.Pass(lineno=eqn.line, col_offset=0), key=lambda n: (
                sum(isinstance(a, ast.Constant) and ast.dump(a) == ast.dump(b)
                    for a, b in ((n.left, node.left), (n.right, node.right))),
                written.index(n)))
            raise SymdiffError(problems=(self.ir.parsed.source.problem(
                at, "this repeats or joins a list that depends on the differentiated inputs "
                "(list arithmetic), which symdiff does not differentiate",
                "np.tile(l, n) to repeat it, np.concatenate([a, b]) to join them"),))

    def _part(self, expr, node):
        """For a part of an expression without gradient, of a kind that derivatives must
        not recompute on floats (K * K of uint8 K wraps, b + b of masks is a logical or,
        2 * l repeats a list): (True, its kind) to read it as the function computed it;
        False for one of floats (as good recomputed); None for any other part."""
        if isinstance(node, ast.Call) or any(not a.is_Atom for a in expr.args):
            return None  # (a call, or two operations or more: reused where needed)
        if any(n.id in self.active for n in ast.walk(node) if isinstance(n, ast.Name)):
            return None
        kind = self.facts.kind_of(node)
        if isinstance(kind, K.Number) and kind.type == "float" or \
                isinstance(kind, K.Array) and kind.floating:
            return False
        return True, kind

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
        fields = template_fields(eqn)
        # Where the kinds say how many axes each operand has: one line of NumPy.
        vjp = op.by_ndim.get(tuple(self._ndim(n) for _, n, _ in eqn.operands), op.vjp)
        for param, name, position in eqn.operands:
            if name in self.active and param in op.vjp:
                g = "1.0" if eqn.out in self.unit else self.adj[eqn.out]
                if (g == "1.0" or scope.parent is None) and \
                        op.names[0] in ("np.sum", "np.mean") and \
                        fields["axis"] == "None" and fields["keepdims"] == "False" and \
                        name not in scope.defined:
                    self.ones[name] = (op.names[0] == "np.mean", g)
                    self.shapes.setdefault(g, frozenset())  # (a full reduction's: a number)
                code = vjp[param].format(g=g, out=eqn.out,
                                         np=self.ir.np_alias, i=position, **fields)
                self._accumulate(name, code, scope, group, eqn.where)

    def _ndim(self, name):
        """The number of axes of the array ``name`` where its kind says (else None)."""
        k = self.facts.kind(name)
        return k.ndim if isinstance(k, K.Array) and not k.scalar else None


# Array operations whose result is a new array, never a view of an operand nor an operand.
_NEW_ARRAYS = {"np.sum", "np.mean", "np.prod", "np.max", "np.min", "np.var", "np.std",
               "np.linalg.norm", "np.matmul", "np.dot", "np.inner", "np.outer", "np.trace",
               "np.concatenate", "np.stack", "np.hstack", "np.vstack", "np.tile", "np.where"}


def _spendable(ir: IR) -> set[str]:
    """The values whose array the backward sweep may write into once the equation that
    made them is differentiated: made new (arithmetic, a NumPy ufunc) by a statement
    outside loops and branches, and read elsewhere only by operations that make new arrays
    of their own (so no alias or view of the value lives on), not returned, no aux."""
    if ir.aux:
        return set()
    top = [e for e in ir.eqns if isinstance(e, Eqn)]
    made = {e.out for e in top if e.kind == "elementwise" and makes_new(e.code, ir.np_alias)}
    for e in top:
        if not (e.kind == "elementwise" and not e.expr.is_Atom or
                e.kind == "array" and e.op.names[0] in _NEW_ARRAYS):
            made -= set(e.inputs) | _names(e.code)
    for item in ir.eqns:
        if not isinstance(item, Eqn):
            made -= _names(item)
    return made - {ir.result}


def _names(item) -> set[str]:
    """Every name an IR item (a statement, a branch, a loop, any code in them) mentions."""
    if isinstance(item, ast.AST):
        return {n.id for n in ast.walk(item) if isinstance(n, ast.Name)}
    if isinstance(item, str):
        return {item}
    if isinstance(item, (tuple, list)):
        return set().union(*map(_names, item))
    if dataclasses.is_dataclass(item):
        return _names([getattr(item, f.name) for f in dataclasses.fields(item)
                       if f.name not in ("where", "expr", "calls", "op")])
    return set()


def _unspend(lines, spent) -> list:
    """``lines`` with each product computed in a spent value's array (``_times(v, f)``)
    made a plain product again unless nothing else reads the value for more than its
    shape, and no line before it may hold the value's array (``dx = v``)."""
    for name in spent:
        v = symbol(name)
        at = [i for i, line in enumerate(lines) if isinstance(line, Line) and isinstance(
            line.value, sp.Basic) and any(t.args[0] == v for t in line.value.atoms(Times))]
        if len(at) == 1 and not any(_may_hold(line, v) for line in lines[:at[0]]) and \
                name not in _uses(lines[at[0] + 1:])[0]:
            continue
        undo = {t: t.args[0] * t.args[1] for line in _flat(lines) if isinstance(
            line, Line) and isinstance(line.value, sp.Basic)
            for t in line.value.atoms(Times) if t.args[0] == v}
        lines = _rename(lines, undo)
    return lines


def _may_hold(line, v) -> bool:
    """Whether a backward line's result may be the array of ``v`` or a view of it."""
    if isinstance(line, Line) and isinstance(line.value, sp.Basic):
        return line.value == v or any(s.args[0] == v for s in line.value.atoms(SumDown))
    return v.name in _uses([line])[0]


def _is_call(code, name: str) -> bool:
    """Whether ``code`` (text) is one call of the function ``name``, as a whole."""
    if not isinstance(code, str) or not code.startswith(name + "("):
        return False
    node = ast.parse(code, mode="eval").body
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == name


def _bare(contribution) -> bool:
    """A contribution that is just a name (or _unbroadcast of one): maybe not a new array."""
    if isinstance(contribution, sp.Symbol):
        return True
    if isinstance(contribution, str):
        return bool(re.fullmatch(r"_unbroadcast\(\w+, [\w, ()]+\)|\w+", contribution))
    return isinstance(contribution, ast.Name)
