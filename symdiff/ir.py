"""The IR that ``lower`` produces: equations, branches and loops over SSA names."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from . import rules
from .parse import Parsed


@dataclass(frozen=True)
class Eqn:
    """``out = code``: one step of the forward sweep.

    kind is "elementwise" (``expr`` is the SymPy image of ``code``, ``calls`` pairs each
    part of ``code`` a derivative may reuse with its image), "array" (``op`` with its
    ``operands`` and ``statics``), "stop_gradient" (its contents, run as written),
    "const" (a value without gradient: a mask, a shape, np.zeros_like...), or "assert"
    (``code`` is a whole statement, such as an assert or a run-time check; ``out`` empty).
    """

    out: str
    kind: str
    code: ast.AST
    line: int
    inputs: tuple[str, ...]
    active: bool
    where: tuple[str, str] = ("", "")  # (label such as "line 5", the source line's text)
    expr: sp.Expr | None = None
    calls: tuple[tuple[sp.Expr, ast.expr], ...] = ()
    op: rules.ArrayOp | None = None
    operands: tuple[tuple[str, str, int | None], ...] = ()  # (parameter, name, position)
    statics: tuple[tuple[str, str], ...] = ()  # (parameter, code) of the other parameters


@dataclass(frozen=True)
class IR:
    """A function lowered for differentiation."""

    name: str
    parsed: Parsed
    params: tuple[str, ...]
    wrt: tuple[str, ...]
    eqns: tuple[Eqn, ...]
    result: str
    taken: frozenset[str]
    user_names: frozenset[str]
    data_globals: tuple[tuple[str, object], ...]  # (name, the dict or cell it is read from)
    np_alias: str
    # Every free name of the code: its object, and the dict or cell it was found in.
    globals: tuple[tuple[str, object, object], ...] = ()
    guards: tuple[tuple[object, str, object], ...] = ()  # (dict or cell, name, helper called)
    kinds: dict = field(default_factory=dict)  # parameter -> kinds.Kind it is specialised on
    aux: str = ""  # has_aux: the name of the value returned with the gradient
    # A container in wrt (containers.py): wrt holds its leaves; given_wrt is wrt as asked.
    trees: dict = field(default_factory=dict)  # parameter -> containers.Tree
    given_wrt: tuple[str, ...] = ()
    # Every stop_gradient call lowering met: (its Site, the name its value got, the names
    # its argument reads outside nested stop_gradient calls); the name is "" where it is
    # lifted, or nested in another's argument (run as written). What ``audit`` reports on.
    sites: tuple[tuple[Site, str, tuple[str, ...]], ...] = ()
    lifted: object = frozenset()  # the stop_gradient calls read as identities, or "all"


class Names:
    """Fresh, deterministic names that never collide with the user's.

    A numbered name is the first free one of ``_t0, _t1, ...``: each prefix keeps where
    its search may start (every number below is taken), so that n temporaries cost n
    probes, not n**2 / 2 (0.5 s at 1000 statements).
    """

    def __init__(self, taken):
        self.taken = taken

    @property
    def taken(self) -> set:
        return self._taken

    @taken.setter
    def taken(self, names):
        # (a loop that lowers its body again puts back the names taken before it)
        self._taken = _Taken(names)

    def fresh(self, base: str, numbered: bool = False) -> str:
        taken = self._taken
        if not numbered and base not in taken:
            taken.add(base)
            return base
        sep = "" if base.startswith("_") and base[1:].isalpha() else "_"
        where = (base + sep, 0 if numbered else 1)
        k = taken.start.get(where, where[1])
        while f"{base}{sep}{k}" in taken:
            k += 1
        taken.add(f"{base}{sep}{k}")
        taken.start[where] = k + 1
        return f"{base}{sep}{k}"


class _Taken(set):
    """The names in use, and per numbered prefix (and first number) where a search for a
    free one may start; a name given back lowers it."""

    def __init__(self, names=()):
        super().__init__(names)
        self.start: dict[tuple[str, int], int] = {}

    def discard(self, name):
        super().discard(name)
        prefix = name.rstrip("0123456789")
        if prefix != name and self.start:
            k = int(name[len(prefix):])
            for first in (0, 1):
                if (prefix, first) in self.start:
                    self.start[prefix, first] = min(self.start[prefix, first], max(k, first))

    def remove(self, name):
        if name not in self:
            raise KeyError(name)
        self.discard(name)


@dataclass(frozen=True)
class Site:
    """A ``stop_gradient(...)`` call in the source: where it is and what it wraps."""

    file: str
    line: int
    col: int  # 1-based, in characters
    text: str  # its argument's source
    outer: tuple[int, int] | None = None  # (line, col) of the stop_gradient it is nested in

    @property
    def key(self) -> tuple[str, int, int]:
        return self.file, self.line, self.col

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class If:
    """``if cond: then else: orelse``; ``phis`` are (merged, from then, from else) names.

    ``cond`` names the value that decided the branch, kept for the backward sweep.
    """

    cond: str
    then: tuple
    orelse: tuple
    phis: tuple[tuple[str, str, str], ...]
    line: int
    where: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class Loop:
    """A ``for`` over ``header`` (an iterable's code) or a ``while`` on ``header`` (a test).

    ``carried`` are (phi, initial, next) names: phi holds a variable at the start of each
    iteration, next its value at the end. ``break_flag`` names the value that ends the loop
    after an iteration that ran ``break``.
    """

    kind: str
    header: ast.AST
    target: str | None
    carried: tuple[tuple[str, str | None, str], ...]
    body: tuple
    break_flag: str | None
    line: int
    where: tuple[str, str] = ("", "")
    names: tuple[str, ...] = ()  # the user's name of each carried variable


def symbol(name: str) -> sp.Symbol:
    return sp.Symbol(name, real=True)


def makes_new(code, np_alias) -> bool:
    """Whether ``code`` certainly evaluates to a new array (or a number), never an alias
    of one of its operands (as ``x if c else y`` or ``np.asarray(x)`` may): arithmetic,
    a negation, a NumPy ufunc."""
    if isinstance(code, ast.BinOp):
        return True
    if isinstance(code, ast.UnaryOp):
        return isinstance(code.op, ast.USub)
    if isinstance(code, ast.Call) and isinstance(code.func, ast.Attribute) and \
            isinstance(code.func.value, ast.Name) and code.func.value.id == np_alias:
        return isinstance(getattr(np, code.func.attr, None), np.ufunc)
    return False


def template_fields(eqn: Eqn) -> dict:
    """What an array operation's templates (``vjp``, ``jvp``) are filled with: each
    parameter's code (operands by name, a sequence as a list of its items' names), the
    rule's defaults where the call left one out."""
    op = eqn.op
    fields = {**op.defaults, **dict(eqn.statics)}
    for param, name, position in eqn.operands:
        if position is None:
            fields[param] = name
    if op.sequence and not any(p == op.sequence and i is None for p, _, i in eqn.operands):
        items = [n for p, n, i in eqn.operands if p == op.sequence]
        fields[op.sequence] = "[" + ", ".join(items) + "]"
    return fields
