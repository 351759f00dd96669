"""Local derivatives (SymPy) -> cheaper ones to compute: what the backward sweep's algebra
does beyond sympy.diff, one function per trick, each keeping the same values.

``whole_floats`` (2.0*x -> 2*x), ``decimals`` ((1/2)*x -> 0.5*x), ``reuse_value`` (a
forward value read where a derivative needs it, also inside a longer product), ``by_value``
(d(E/s)/ds as -P/s with P = E/s computed), ``cse`` (sympy.cse, finished), ``in_place`` (a
product computed in the adjoint's own array) and ``SumDown`` (a factor multiplied in after
summing down, on the smaller array).
"""

from __future__ import annotations

import math

import sympy as sp

from .ir import Eqn, symbol
from .rules import _NumpyFunction, call


class SumDown(_NumpyFunction):
    """``_unbroadcast(g, x)`` inside an expression: g summed down to x's shape."""

    nargs = 2

    def numpy(self):
        return call("_unbroadcast")(*self.args)


class Times(_NumpyFunction):
    """``g * f`` computed in g's own array (runtime._times): g is not read again."""

    nargs = 2

    def numpy(self):
        return call("_times")(*self.args)


def in_place(dv, replacements, reduced):
    """Where the adjoint ``dv`` (an array of its own, read nowhere after this equation)
    is a factor of exactly one product, compute that product in dv's array."""
    exprs = [v for _, v in replacements] + list(reduced)
    users = [i for i, e in enumerate(exprs) if e.has(dv)]
    if len(users) != 1:
        return replacements, reduced
    e = exprs[users[0]]
    if not isinstance(e, sp.Mul) or dv not in e.args:
        return replacements, reduced
    rest = e / dv
    if rest.has(dv) or rest.is_number and rest == 1:
        return replacements, reduced
    exprs[users[0]] = Times(dv, rest)
    n = len(replacements)
    return [(t, v) for (t, _), v in zip(replacements, exprs[:n], strict=True)], exprs[n:]


def by_value(eqn: Eqn, a: str, partial):
    """d(c * a**k)/da for a negative power k as k * v / a, reusing the value v: fewer
    operations than recomputing c * a**(k - 1) (P = E / s gives dP/ds = -P/s); and
    d(sqrt(a))/da as 0.5 / v, the square root the function took (inf at 0, as it should
    be: a fractional k * v / a would be 0/0 there)."""
    expr, x = eqn.expr, symbol(a)
    if expr.is_Pow and expr.base == x and expr.exp.is_Number and float(expr.exp) == 0.5:
        return sp.Float(0.5) / symbol(eqn.out)
    if not isinstance(expr, sp.Mul):
        return partial
    k = expr.as_powers_dict().get(x)
    if k is None or not (k.is_Integer and k < 0) or (expr / x**k).has(x):
        return partial
    return k * symbol(eqn.out) / x


def whole_floats(expr):
    """1.0*x -> x, 2.0*x -> 2*x: the same float64 values, easier to read. (Float(2.0) ==
    2 is False in SymPy: the values are compared as floats.)"""
    whole = {f: sp.Integer(int(f)) for f in expr.atoms(sp.Float)
             if math.isfinite(f) and float(f).is_integer() and abs(f) < 1e6}
    return expr.xreplace(whole) if whole else expr


def decimals(expr):
    """(1/2)*x -> 0.5*x, -(3/4)*x -> -0.75*x: a coefficient that is an exact binary
    fraction is written as the float it is (Python would divide the fraction anyway)."""
    def decimal(e):
        c, rest = e.as_coeff_Mul()
        return sp.Float(c) * rest if c.is_Rational and not c.is_Integer and \
            c.q & (c.q - 1) == 0 else e
    return expr.replace(lambda e: e.is_Mul, decimal)


def reuse_value(partial, expr, name):
    """``partial`` reading the symbol ``name`` wherever it holds ``expr``: a product also
    among the factors of a longer one (exp(u)*p/c in -d*exp(u)*p/c is the value v, so -d*v),
    a root also in a whole power of it (1/sqrt(u) is 1/v for v = sqrt(u))."""
    if isinstance(expr, sp.Mul):
        return partial.subs(expr, name)
    if expr.is_Pow and expr.exp.is_Rational and not expr.exp.is_Integer:
        # 1/sqrt(u) is 1/v for v = sqrt(u): a whole power of the value, not a new root.
        base, k = expr.args
        return partial.replace(
            lambda e: e.is_Pow and e.base == base and e.exp.is_Rational and
            (e.exp / k).is_Integer, lambda e: name ** (e.exp / k))
    return partial.xreplace({expr: name})


def cse(exprs, temps):
    replacements, reduced = sp.cse(exprs, symbols=temps)
    # sympy.cse can leave a subexpression it named inside a sum; name it there too.
    for i, (t, value) in enumerate(replacements):
        reduced = [r.xreplace({value: t}) for r in reduced]
        replacements[i + 1:] = [(u, v.xreplace({value: t})) for u, v in replacements[i + 1:]]
    return replacements, reduced
