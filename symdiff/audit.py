"""What each stop_gradient removes from a gradient: ``audit(f, *args, wrt=...)``.

Every ``stop_gradient(...)`` call is a site of the source (``ir.Site``: file, line,
column). For each site the audit says

- statically, from the lowered function: which differentiated parameters its argument
  depends on (a path of differentiable steps, not through another stop_gradient), and
  through which of the function's names; a site that depends on none has no effect; a site
  nested in another's argument has no effect of its own; where the output depends on the
  parameters through stop_gradient calls alone, the gradient is zero;
- at the given arguments: the gradient that would flow through it if it were removed, the
  gradient with that one site read as an identity (``grad``'s ``lifted``, which
  ``grad(f, stop_gradients=False)`` sets for all of them) minus the gradient as written,
  per parameter, as a norm and as a share: ``|blocked| / (|blocked| + |gradient as
  written|)``, 0 where it blocks nothing, 1 where the gradient as written is zero. Where
  either gradient is not finite there (an infinite slope the site hides), the audit says
  so rather than a number.

A site inside a loop or a helper is one site however often it runs: lifting it lifts every
iteration and every call, so its blocked gradient is their sum.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import calls, kinds
from .errors import SymdiffError

if TYPE_CHECKING:  # (ir imports SymPy, which a gradient from the disk cache never needs)
    from .ir import Site

SCHEMA = "symdiff.audit/1"

# A blocked gradient this small against the gradients it is the difference of is rounding:
# the site blocks nothing (x - stop_gradient(max(x)) moves the gradient by ~1e-16).
_ROUNDING = 1e-9

# What a site does, statically or at the arguments, from the most to the least suspect.
NESTED, NO_EFFECT, ZERO, BLOCKS, NOT_FINITE, NOTHING = (
    "nested", "no effect", "zero gradient", "blocks", "not finite", "blocks nothing")
LIKELY_BUGS = (NESTED, NO_EFFECT, ZERO)


@dataclass(frozen=True)
class Blocked:
    """The gradient one site blocks for one parameter, at the audited arguments."""

    norm: float  # |gradient with the site an identity - gradient as written| (nan, inf)
    # norm / (norm + |gradient as written|): the blocked part's share of the two parts'
    # sizes, from 0 (blocks nothing) to 1 (the gradient as written is zero); 0 where both are.
    share: float
    why: str = ""  # where norm is not finite: which gradient is not, and how


@dataclass(frozen=True)
class Entry:
    """One stop_gradient site: what it depends on and what it blocks."""

    site: Site
    depends_on: dict[str, tuple[str, ...]]  # parameter -> the names it flows through
    effect: str  # one of NESTED, NO_EFFECT, ZERO, BLOCKS, NOTHING
    blocked: dict[str, Blocked]  # parameter -> what it blocks (empty where not measured)
    verdict: str

    @property
    def likely_bug(self) -> bool:
        return self.effect in LIKELY_BUGS

    def as_dict(self) -> dict:
        s = self.site
        return {
            "file": s.file, "line": s.line, "col": s.col, "argument": s.text,
            "nested_in": None if s.outer is None else {"line": s.outer[0], "col": s.outer[1]},
            "depends_on": {p: list(n) for p, n in self.depends_on.items()},
            "effect": self.effect,
            "blocked": {p: {"norm": _finite(b.norm), "share": _finite(b.share)}
                        for p, b in self.blocked.items()},
            "verdict": self.verdict, "likely_bug": self.likely_bug,
        }


@dataclass(frozen=True)
class Audit:
    """The audit of one function at one point: an ``Entry`` per stop_gradient site.

    ``print(report)`` shows a table, a notebook shows it as HTML, ``report.as_dict()`` and
    ``report.to_json()`` give the numbers, ``report.likely_bugs`` the suspect sites.
    """

    function: str
    file: str
    line: int
    wrt: tuple[str, ...]
    gradient_norm: dict[str, float]  # |gradient as written| per parameter
    entries: tuple[Entry, ...] = field(default=())

    @property
    def likely_bugs(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.likely_bug)

    def as_dict(self) -> dict:
        return {"schema": SCHEMA, "function": self.function, "file": self.file,
                "line": self.line, "wrt": list(self.wrt),
                "gradient_norm": {p: _finite(v) for p, v in self.gradient_norm.items()},
                "sites": [e.as_dict() for e in self.entries]}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.as_dict(), indent=indent)

    def _title(self) -> str:
        return (f"stop_gradient audit of {self.function} ({Path(self.file).name}:{self.line}) "
                f"with respect to {', '.join(self.wrt)}")

    def _rows(self) -> list[tuple[str, ...]]:
        rows = []
        for e in self.entries:
            depends = "; ".join(_through(p, n) for p, n in e.depends_on.items()) or "-"
            blocked = "; ".join(f"{p} {_number(b.norm)} ({_percent(b.share)})"
                                for p, b in e.blocked.items()) or "-"
            rows.append((f"line {e.site.line}:{e.site.col}", _short(e.site.text), depends,
                         blocked, ("! " if e.likely_bug else "") + e.verdict))
        return rows

    _HEADER = ("site", "argument", "depends on", "blocked |g| (share)", "verdict")

    def __str__(self) -> str:
        norms = ", ".join(f"{p} {_number(v)}" for p, v in self.gradient_norm.items())
        lines = [self._title(), f"gradient norm as written: {norms}"]
        if not self.entries:
            lines.append(f"{self.function} calls no stop_gradient: its gradient is the "
                         "derivative of the function as written")
            return "\n".join(lines)
        rows = [self._HEADER, *self._rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self._HEADER) - 1)]
        for r in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False))
                         + "  " + r[-1])
        bugs = len(self.likely_bugs)
        if bugs:
            lines.append(f"{bugs} site(s) marked ! are likely bugs")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<symdiff audit of {self.function}: {len(self.entries)} stop_gradient "
                f"site(s), {len(self.likely_bugs)} likely bug(s)>")

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in self._HEADER)
        body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>"
                       for r in self._rows())
        if not self.entries:
            body = (f"<tr><td colspan='5'>{esc(self.function)} calls no stop_gradient"
                    "</td></tr>")
        return (f"<p>{esc(self._title())}</p><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>")


def audit(fun, *args, wrt=0, has_aux=False, **kwargs) -> Audit:
    """Audit each ``stop_gradient`` call of ``fun`` at ``fun(*args, **kwargs)``: what it
    depends on, and how much of the gradient with respect to ``wrt`` (as ``grad``'s) it
    blocks there. ``has_aux=True``: ``fun`` returns ``(value, aux)``, as for ``grad``.

    >>> import numpy as np
    >>> from symdiff import audit, stop_gradient
    >>> def logsumexp(x):
    ...     m = stop_gradient(np.max(x))
    ...     return m + np.log(np.sum(np.exp(x - m)))
    >>> report = audit(logsumexp, np.array([1.0, 2.0, 3.0]))
    >>> report.entries[0].effect
    'blocks nothing'
    """
    from .api import Gradient, _normalize_wrt
    from .higher import Jacobian
    from .lower import lower
    from .parse import parse

    if isinstance(fun, Jacobian):
        raise SymdiffError(f"audit of {fun!r}: audit takes the function itself")
    if isinstance(fun, Gradient):
        fun = fun.fun
    wrt, _ = _normalize_wrt(wrt)
    fun, wrt, obj = calls.unbind(fun, wrt)  # a bound method: its function, self passed
    if obj is not calls.UNBOUND:
        args = (obj, *args)
    def gradient(lifted=frozenset()):
        g = Gradient(fun, wrt, as_tuple=True, has_aux=has_aux, lifted=lifted)
        return g, (g(*args, **kwargs)[0] if has_aux else g(*args, **kwargs))

    as_written, grads = gradient()  # the arguments' errors are grad's
    found = dict(as_written._spec(args, kwargs).kinds)
    parsed = parse(fun)
    ir = lower(parsed, wrt, found, has_aux)
    names = ir.given_wrt or ir.wrt
    norms = {p: _norm(g) for p, g in zip(names, grads, strict=True)}

    alone = {p: lower(parsed, (p,), found, has_aux) for p in names}
    depends = {p: _dependencies(alone[p]) for p in names}
    zero = {p for p in names if alone[p].result not in _active(alone[p])}
    sites: dict[tuple, Site] = {}
    for site, _, _ in ir.sites:
        sites.setdefault(site.key, site)
    entries = []
    for key, site in sites.items():
        on = {p: depends[p][key] for p in names if key in depends[p]}
        if site.outer is not None:
            entries.append(Entry(site, on, NESTED, {}, f"nested in the stop_gradient at line "
                                 f"{site.outer[0]}:{site.outer[1]}: no effect of its own"))
            continue
        if not on:
            entries.append(Entry(site, on, NO_EFFECT, {}, f"no effect: {_short(site.text)} "
                                 f"does not depend on {_listed(names)}"))
            continue
        _, lifted = gradient(frozenset({key}))
        blocked = {p: _blocked(g, g0) for p, g, g0 in zip(names, lifted, grads, strict=True)}
        entries.append(_judged(site, on, blocked, zero))
    return Audit(parsed.name, parsed.source.filename, parsed.node.lineno, tuple(names), norms,
                 tuple(entries))


def _judged(site, on, blocked, zero) -> Entry:
    some = {p: b for p, b in blocked.items() if not b.norm <= 0}  # (nan and inf too)
    zeroed = [p for p in on if p in zero]
    odd = {p: b for p, b in some.items() if not math.isfinite(b.norm)}
    if odd:
        return Entry(site, on, NOT_FINITE, blocked, "not measured here: " + "; ".join(
            f"the gradient of {p} {b.why}" for p, b in odd.items()))
    if zeroed:
        what = "gradient" if len(zeroed) == 1 else "gradients"
        return Entry(site, on, ZERO, blocked, f"the {what} of {_listed(zeroed)} "
                     f"{'is' if len(zeroed) == 1 else 'are'} zero: the output depends on "
                     f"{'it' if len(zeroed) == 1 else 'them'} only through stop_gradient"
                     + (f" (this one blocks {_shares(some)})" if some else ""))
    if not some:
        return Entry(site, on, NOTHING, blocked, "blocks nothing here: the gradient is the "
                     "same without it (a stabilising shift, or its argument's derivative is "
                     "zero here)")
    return Entry(site, on, BLOCKS, blocked, f"blocks {_shares(some)}")


def _through(p, names) -> str:
    """``w``, ``w via h``, ``w via h and directly``: how a site's argument depends on p."""
    others = [n for n in names if n != p]
    if not others:
        return p
    return f"{p} via {', '.join(others)}" + (" and directly" if p in names else "")


def _shares(blocked) -> str:
    return ", ".join(f"{_percent(b.share)} of the gradient of {p}" for p, b in blocked.items())


def _blocked(lifted, written) -> Blocked:
    without, as_written = _flat(lifted), _flat(written)
    for what, g in (("as written", as_written), ("without it", without)):
        bad = g[~np.isfinite(g)]
        if bad.size:  # (an infinite slope hidden by the site: sqrt at 0, log at 0)
            kind = "nan" if np.isnan(bad).any() else "inf"
            return Blocked(math.nan if kind == "nan" else math.inf, math.nan,
                           f"{what} is not finite ({kind})")
    difference = float(np.linalg.norm(without - as_written))
    written = float(np.linalg.norm(as_written))
    scale = max(float(np.linalg.norm(without)), written)
    if not difference > _ROUNDING * scale:
        return Blocked(0.0, 0.0)
    return Blocked(difference, difference / (difference + written))


def _norm(g) -> float:
    return float(np.linalg.norm(_flat(g)))


def _flat(g) -> np.ndarray:
    """A gradient's numbers in one float64 vector (a container's leaves, in order)."""
    if isinstance(g, dict):
        parts = [_flat(v) for _, v in sorted(g.items(), key=lambda kv: repr(kv[0]))]
    elif isinstance(g, (tuple, list)) and not isinstance(kinds.kind(g), kinds.Array):
        parts = [_flat(v) for v in g]
    else:
        return np.ravel(np.asarray(g, dtype=np.float64))
    return np.concatenate(parts) if parts else np.zeros(0)


# --- the static part: what each site's argument depends on ---

def _active(ir) -> set[str]:
    from .control import _mark_active

    active = set(ir.wrt)
    _mark_active(ir.eqns, active)
    return active


def _dependencies(ir) -> dict[tuple, tuple[str, ...]]:
    """For ``ir`` lowered for one parameter: each site whose argument depends on it ->
    the function's own names it depends on it through, in the order they are computed,
    the parameter itself first where the argument reads it directly."""
    active = _active(ir)
    edges: dict[str, set[str]] = {}
    order: list[str] = []
    _edges(ir.eqns, edges, order)
    reading: dict[tuple, set[str]] = {}
    for site, out, reads in ir.sites:
        if out:
            reading.setdefault(site.key, set()).update(reads)
    user = set(ir.user_names) - set(ir.params)
    # The parameter itself (a container's leaves, or the container read whole, as in
    # stop_gradient(params["b"]), whose argument is run as written).
    param = (ir.given_wrt or ir.wrt)[0]
    itself = set(ir.wrt) | {param}
    found = {}
    for key, names in reading.items():
        reads = {n for n in names if n in active or n in itself}
        if not reads:
            continue
        seen, todo = set(), list(reads)
        while todo:
            n = todo.pop()
            if n in seen or n not in active:
                continue
            seen.add(n)
            todo.extend(edges.get(n, ()))
        own = [_user_name(n, user) for n in order if n in seen]
        direct = [param] if reads & itself else []  # first where it reads it directly
        found[key] = tuple(dict.fromkeys([*direct, *(n for n in own if n and n != param)]))
    return found


def _edges(items, edges, order):
    """name -> the names its value is computed from, for every step (a branch's merge
    from both sides, a loop variable from its start and its next value)."""
    from .ir import Eqn, If

    for item in items:
        if isinstance(item, Eqn):
            if item.out:
                edges.setdefault(item.out, set()).update(item.inputs)
                order.append(item.out)
        elif isinstance(item, If):
            _edges(item.then, edges, order)
            _edges(item.orelse, edges, order)
            for merged, then, orelse in item.phis:
                edges.setdefault(merged, set()).update(n for n in (then, orelse) if n)
                order.append(merged)
        else:
            for phi, initial, after in item.carried:
                edges.setdefault(phi, set()).update(n for n in (initial, after) if n)
                order.append(phi)
            _edges(item.body, edges, order)


def _user_name(ssa: str, user: set[str]) -> str:
    """The function's own name an SSA name stands for (x_2 is x), or "" for a temporary."""
    if ssa in user:
        return ssa
    m = re.fullmatch(r"(.+)_\d+", ssa)
    return m.group(1) if m and m.group(1) in user else ""


# --- printing ---

def _finite(x: float):
    return x if math.isfinite(x) else None  # JSON has no nan or inf


def _number(x: float) -> str:
    return "0" if x == 0 else f"{x:.3g}"


def _percent(share: float) -> str:
    if not math.isfinite(share):
        return "?"
    if share == 0:
        return "0%"
    p = 100 * share
    return f"{p:.0f}%" if p >= 1 else f"{p:.2g}%"


def _listed(names) -> str:
    return ", ".join(names)


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."
