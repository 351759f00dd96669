"""The derivative table: each NumPy/math function -> a SymPy function or a vector-Jacobian rule.

Elementwise functions map to SymPy expressions (SymPy knows their derivatives); array
operations get one vector-Jacobian product each, written as a NumPy template. Adding a
function is one row here plus nothing else: the tests and the README's coverage table are
generated from these rows.
"""

from __future__ import annotations

import builtins
import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import sympy as sp
from sympy.printing.precedence import precedence

# --- SymPy functions that NumPy has and SymPy lacks (or defines with other conventions) ---
#
# Each prints as the expression tree its ``numpy()`` method builds, with SymPy's printer
# (emit.Printer): never as a string template, which drops parentheses (a template
# ``heaviside({0} - {1})`` of b = lo - 1.0 reads x - lo - 1.0).


class Call(sp.Function):
    """``callee(arg, ...)`` in printed code: a NumPy function (``np.`` is printed as the
    generated module's alias for NumPy) or a helper of runtime's. Made by ``call``."""

    callee = ""


_CALLS: dict[str, type] = {}


def call(callee: str) -> type:
    """The SymPy function printed as a call of ``callee``: ``call("np.isnan")(x)``."""
    if callee not in _CALLS:
        name = "Call_" + callee.replace(".", "_")
        _CALLS[callee] = type(name, (Call,), {"callee": callee})
    return _CALLS[callee]


def where(condition, a, b):
    """``np.where(condition, a, b)`` as a tree; ``condition`` a SymPy relation."""
    return call("np.where")(condition, a, b)


def is_zero(a):
    """``a == 0`` as a tree (kept as written: SymPy would decide it where it can)."""
    return sp.Eq(a, 0, evaluate=False)


class _NumpyFunction(sp.Function):
    """A SymPy function that NumPy computes; ``numpy()`` is the tree printed for it."""

    def numpy(self):
        raise NotImplementedError(type(self).__name__)

    @property
    def precedence(self):
        # How the printed form binds (Power(a, b) prints as a**b, not as a call), so that
        # SymPy's printer parenthesises it where it is an operand.
        return precedence(self.numpy())

    def _eval_is_extended_real(self):
        # Real for real arguments (NumPy gives NaN where it is not): SymPy's derivative of
        # Abs(f) is then sign(f)*f', not its complex form f*sign(f)/f, NaN at f = 0.
        return True


def _zero_derivative(name: str) -> type:
    """A piecewise-constant function (round, floor, sign...): derivative 0, as in JAX."""

    def fdiff(self, argindex=1):
        return sp.S.Zero

    def numpy(self):
        return call(f"np.{name.lower()}")(*self.args)

    return type(name, (_NumpyFunction,), {"fdiff": fdiff, "numpy": numpy, "nargs": 1})


class Round(_NumpyFunction):
    """np.round(x, decimals): derivative 0; the decimals are part of the value's identity."""

    nargs = (1, 2)

    def numpy(self):
        return call("np.round")(*self.args)

    def fdiff(self, argindex=1):
        return sp.S.Zero


Floor = _zero_derivative("Floor")
Ceil = _zero_derivative("Ceil")
Trunc = _zero_derivative("Trunc")
Rint = _zero_derivative("Rint")
Sign = _zero_derivative("Sign")


class Sinc(_NumpyFunction):
    """np.sinc, sin(pi x)/(pi x); its slope is a helper of runtime's, 0 at x = 0 (the limit)."""

    nargs = 1

    def numpy(self):
        return call("np.sinc")(self.args[0])

    def fdiff(self, argindex=1):
        return call("_sinc_slope")(self.args[0])


class Step(_NumpyFunction):
    """Heaviside step, 1/2 at 0: the share each side of a tie gets (JAX, autograd)."""

    nargs = 1

    def numpy(self):
        return call("np.heaviside")(self.args[0], sp.Float(0.5))

    def fdiff(self, argindex=1):
        return sp.S.Zero


class NanStep(_NumpyFunction):
    """The share of the first operand of fmax(a, b): 1 if b is NaN, 0 if a is, else a step."""

    nargs = 2

    def numpy(self):
        a, b = self.args
        isnan = call("np.isnan")
        return where(isnan(b), sp.Float(1.0), where(isnan(a), sp.Float(0.0), Step(a - b)))

    def fdiff(self, argindex=1):
        return sp.S.Zero


def _pairwise(name: str, numpy_name: str, share, doc: str) -> type:
    """A two-operand max or min: d/da = share(a, b), d/db = share(b, a)."""

    def fdiff(self, argindex=1):
        a, b = self.args
        return share(a, b) if argindex == 1 else share(b, a)

    def numpy(self):
        return call(numpy_name)(*self.args)

    return type(name, (_NumpyFunction,), {
        "__doc__": doc, "nargs": 2, "fdiff": fdiff, "numpy": numpy,
    })


Maximum = _pairwise("Maximum", "np.maximum", lambda a, b: Step(a - b),
                    "np.maximum: at a tie each side gets half the gradient.")
Minimum = _pairwise("Minimum", "np.minimum", lambda a, b: Step(b - a),
                    "np.minimum: at a tie each side gets half the gradient.")
FMax = _pairwise("FMax", "np.fmax", NanStep,
                 "np.fmax: as np.maximum, but a NaN operand is ignored (no gradient).")
FMin = _pairwise("FMin", "np.fmin", lambda a, b: NanStep(-a, -b),
                 "np.fmin: as np.minimum, but a NaN operand is ignored (no gradient).")


class Cbrt(_NumpyFunction):
    """Real cube root (SymPy's ``cbrt`` is the principal root: NaN slopes for x < 0)."""

    nargs = 1

    def numpy(self):
        return call("np.cbrt")(self.args[0])

    def fdiff(self, argindex=1):
        return 1 / (3 * Cbrt(self.args[0]) ** 2)


class Ratio(_NumpyFunction):
    """``a / b``, with 0 where ``b`` is 0 (for an ``a`` that is 0 wherever b is: x / hypot(x,
    y) at (0, 0)); one division, never a * (1/b), which overflows for a subnormal b."""

    nargs = 2

    def numpy(self):
        a, b = self.args
        return call("np.divide")(a, where(is_zero(b), sp.Float(1.0), b))


class Hypot(_NumpyFunction):
    """np.hypot, whose derivative a / hypot(a, b) cannot overflow as a / sqrt(a**2 + b**2)
    can; at (0, 0), 0 (the convention of the norm at 0, as JAX's)."""

    nargs = 2

    def numpy(self):
        return call("np.hypot")(*self.args)

    def fdiff(self, argindex=1):
        return Ratio(self.args[argindex - 1], self)


class Sigmoid(_NumpyFunction):
    """1 / (1 + exp(-x)), as 0.5 + 0.5*tanh(x/2): it cannot overflow or warn, and costs what
    a careful hand-written gradient costs. Its absolute error stays below 1e-16; below
    x = -37 it is 0 rather than exp(x) (exp(-logaddexp(0, -x)) would keep that relative
    precision, at five times the cost: a log-sum-exp of an array's entries is a loss's
    common last line, so the cheap form wins)."""

    nargs = 1

    def numpy(self):
        half = sp.Float(0.5)  # printed 0.5, not (1/2)
        return half + half * call("np.tanh")(half * self.args[0])

    def fdiff(self, argindex=1):
        return Sigmoid(self.args[0]) * (1 - Sigmoid(self.args[0]))


class LogAddExp(_NumpyFunction):
    """np.logaddexp, whose derivative is a sigmoid of the difference (stable, and it does
    not need logaddexp's own value)."""

    nargs = 2

    def numpy(self):
        return call("np.logaddexp")(*self.args)

    def fdiff(self, argindex=1):
        a, b = self.args
        return Sigmoid(a - b) if argindex == 1 else Sigmoid(b - a)


class LogAddExp2(_NumpyFunction):
    """np.logaddexp2, whose derivative 2**a / (2**a + 2**b) is the sigmoid of (a - b)*log(2):
    stable (2**(a - logaddexp2(a, b)) is not: SymPy splits it into 2**a * 2**-v)."""

    nargs = 2

    def numpy(self):
        return call("np.logaddexp2")(*self.args)

    def fdiff(self, argindex=1):
        a, b = self.args
        return Sigmoid((a - b) * sp.log(2)) if argindex == 1 else Sigmoid((b - a) * sp.log(2))


class LogOrZero(_NumpyFunction):
    """log(x), but 0 where x == 0: the factor in d(x**y)/dy, which is 0 at x = 0 (JAX)."""

    nargs = 1

    def numpy(self):
        x = self.args[0]
        if x.is_number and x.is_nonzero:  # 2 ** y: log(2), no test needed
            return sp.log(x)
        return sp.log(where(is_zero(x), sp.Float(1.0), x))

    def fdiff(self, argindex=1):
        return 1 / self.args[0]


class PowerSlope(_NumpyFunction):
    """d(x**y)/dx = y*x**(y - 1), but 0 where y == 0 (x**0 is 1 everywhere: at x = 0 the
    formula is 0 * inf). The exponent is y - 1 only where y is not 0, as autograd's."""

    nargs = 2

    def numpy(self):
        x, y = self.args
        # (1.0, not 1: the exponent a float array, which an integer x can take as well)
        exponent = where(is_zero(y), sp.Float(1.0), y - 1)
        return sp.Mul(y, sp.Pow(x, exponent, evaluate=False), evaluate=False)


class Power(_NumpyFunction):
    """x**y for a y that is not a number: y*x**(y-1), never y*x**y/x, which fails at x = 0."""

    nargs = 2

    def numpy(self):
        return sp.Pow(*self.args, evaluate=False)

    def fdiff(self, argindex=1):
        x, y = self.args
        return PowerSlope(x, y) if argindex == 1 else self * LogOrZero(x)


def _power(x, y):
    return x**y if getattr(y, "is_Number", False) else Power(x, y)


def _clip(a, lo=None, hi=None):
    # As JAX: clip is minimum(maximum(a, lo), hi), so a tie with a bound splits the gradient.
    if lo is not None:
        a = Maximum(a, lo)
    if hi is not None:
        a = Minimum(a, hi)
    return a


# --- The table ---


@dataclass(frozen=True)
class Elementwise:
    """An elementwise function: its spellings, its parameters, and its SymPy image.

    ``domain`` is where the rule is tested (and where the function is smooth enough for
    central differences); ``optional`` parameters may be left out of a call.
    """

    names: tuple[str, ...]
    params: tuple[str, ...]
    sympy: Callable
    domain: tuple[float, float] = (-2.0, 2.0)
    optional: int = 0
    note: str = ""


@dataclass(frozen=True)
class ArrayOp:
    """An array operation: its spellings, its parameters, and vector-Jacobian templates.

    ``vjp`` maps each differentiable parameter to a NumPy expression template in the
    adjoint ``{g}``, the output ``{out}``, ``{np}``, and every parameter by name (operands
    are names; other parameters are their code, or ``defaults`` when left out). A
    ``sequence`` parameter takes a list of arrays; its template also sees ``{i}``, the
    position in the list. ``method`` is the ndarray method spelling, if any. An empty
    template marks a parameter that may depend on the differentiated inputs although it
    has no gradient (a shape, a count, np.arange's stop): it is read as code, not refused.
    ``by_ndim`` maps the operands' numbers of axes, where the gradient's kinds know them,
    to templates of their own: one line of NumPy where the general one calls a helper that
    asks at run time (operands are names there, so ``{b}.T`` reads as it should).
    """

    names: tuple[str, ...]
    params: tuple[str, ...]
    vjp: dict[str, str]
    defaults: dict[str, str] = field(default_factory=dict)
    sequence: str = ""
    method: str = ""
    note: str = ""
    positional: int = 99  # how many parameters NumPy takes by position here
    by_ndim: dict[tuple[int, ...], dict[str, str]] = field(default_factory=dict)
    # A parameter taking nested lists of numbers and arrays (np.array's object): each entry
    # that depends on the differentiated inputs is an operand, ``{i}`` its index in the
    # result; the other entries are code run as written. Any other value is one operand.
    entries: str = ""

    @property
    def optional(self) -> int:
        return len(self.defaults)


E = Elementwise
# One row per function. Domains keep each function away from its singularities.
ELEMENTWISE: tuple[Elementwise, ...] = (
    E(("np.sin", "math.sin"), ("x",), sp.sin),
    E(("np.cos", "math.cos"), ("x",), sp.cos),
    E(("np.tan", "math.tan"), ("x",), sp.tan, (-1.2, 1.2)),
    E(("np.arcsin", "math.asin"), ("x",), sp.asin, (-0.9, 0.9)),
    E(("np.arccos", "math.acos"), ("x",), sp.acos, (-0.9, 0.9)),
    E(("np.arctan", "math.atan"), ("x",), sp.atan),
    E(("np.arctan2", "math.atan2"), ("y", "x"), sp.atan2, (0.2, 2.0)),
    E(("np.sinh", "math.sinh"), ("x",), sp.sinh),
    E(("np.cosh", "math.cosh"), ("x",), sp.cosh),
    E(("np.tanh", "math.tanh"), ("x",), sp.tanh),
    E(("np.arcsinh", "math.asinh"), ("x",), sp.asinh),
    E(("np.arccosh", "math.acosh"), ("x",), sp.acosh, (1.1, 3.0)),
    E(("np.arctanh", "math.atanh"), ("x",), sp.atanh, (-0.9, 0.9)),
    E(("np.exp", "math.exp"), ("x",), sp.exp),
    E(("np.exp2",), ("x",), lambda x: 2**x),
    E(("np.expm1", "math.expm1"), ("x",), lambda x: sp.exp(x) - 1),
    E(("np.log",), ("x",), sp.log, (0.1, 3.0)),
    E(("math.log",), ("x", "base"), lambda x, base=None: sp.log(x) if base is None
      else sp.log(x) / sp.log(base), (0.1, 3.0), optional=1),
    E(("np.log2", "math.log2"), ("x",), lambda x: sp.log(x) / sp.log(2), (0.1, 3.0)),
    E(("np.log10", "math.log10"), ("x",), lambda x: sp.log(x) / sp.log(10), (0.1, 3.0)),
    E(("np.log1p", "math.log1p"), ("x",), lambda x: sp.log(1 + x), (-0.9, 2.0)),
    E(("np.sqrt", "math.sqrt"), ("x",), sp.sqrt, (0.1, 3.0)),
    E(("np.cbrt",), ("x",), Cbrt, note="real cube root"),
    E(("np.square",), ("x",), lambda x: x**2),
    E(("np.reciprocal",), ("x",), lambda x: 1 / x, (0.2, 2.0)),
    E(("np.negative",), ("x",), lambda x: -x),
    E(("np.positive",), ("x",), lambda x: x),
    E(("np.abs", "np.absolute", "np.fabs", "math.fabs", "abs"), ("x",), sp.Abs,
      note="derivative sign(x), 0 at 0"),
    E(("np.sign",), ("x",), Sign, note="derivative 0"),
    E(("np.hypot", "math.hypot"), ("x", "y"), Hypot),
    E(("np.power", "np.float_power", "math.pow", "pow"), ("x", "y"), _power,
      (0.2, 2.0)),
    E(("np.add",), ("x", "y"), lambda x, y: x + y),
    E(("np.subtract",), ("x", "y"), lambda x, y: x - y),
    E(("np.multiply",), ("x", "y"), lambda x, y: x * y),
    E(("np.divide", "np.true_divide"), ("x", "y"), lambda x, y: x / y, (0.2, 2.0)),
    E(("np.logaddexp",), ("x", "y"), LogAddExp),
    E(("np.logaddexp2",), ("x", "y"), LogAddExp2),
    E(("np.fmax",), ("x", "y"), FMax,
      note="ties: half to each side; a NaN operand gets no gradient"),
    E(("np.fmin",), ("x", "y"), FMin,
      note="ties: half to each side; a NaN operand gets no gradient"),
    E(("np.maximum", "max"), ("x", "y"), Maximum,
      note="ties: half the gradient to each side"),
    E(("np.minimum", "min"), ("x", "y"), Minimum,
      note="ties: half the gradient to each side"),
    E(("np.clip",), ("a", "a_min", "a_max"), _clip,
      note="as minimum(maximum(a, a_min), a_max); either bound may be None"),
    E(("np.round", "np.around", "round"), ("x", "decimals"),
      lambda x, decimals=None: Round(x) if decimals is None else Round(x, decimals),
      optional=1, note="derivative 0"),
    E(("np.rint",), ("x",), Rint, note="derivative 0"),
    E(("np.floor", "math.floor"), ("x",), Floor, note="derivative 0"),
    E(("np.ceil", "math.ceil"), ("x",), Ceil, note="derivative 0"),
    E(("np.trunc", "np.fix", "math.trunc"), ("x",), Trunc, note="derivative 0"),
    # As the % operator: x - y*floor(x/y) (fmod truncates), so d/dy = -floor(x/y).
    E(("np.mod", "np.remainder"), ("x", "y"), lambda x, y: x - y * Floor(x / y), (0.2, 2.0),
      note="as the % operator: d/dy = -floor(x/y)"),
    E(("np.fmod",), ("x", "y"), lambda x, y: x - y * Trunc(x / y), (0.2, 2.0),
      note="d/dy = -trunc(x/y)"),
    E(("np.sinc",), ("x",), Sinc, note="normalised, sin(pi x)/(pi x); slope 0 at 0"),
    E(("np.real", "np.conj", "np.conjugate"), ("x",), lambda x: x,
      note="of real values: identity"),
    E(("math.erf",), ("x",), sp.erf),
    E(("math.erfc",), ("x",), sp.erfc),
    E(("np.deg2rad", "np.radians", "math.radians"), ("x",), lambda x: x * sp.pi / 180),
    E(("np.rad2deg", "np.degrees", "math.degrees"), ("x",), lambda x: x * 180 / sp.pi),
    E(("float",), ("x",), lambda x: x, note="identity"),
)
# Casts to a float type (issue 13): identity; the integer ones are in NO_GRADIENT.
ELEMENTWISE += (
    E(("np.float64", "np.float32", "np.float16", "np.double", "np.single"), ("x",),
      lambda x: x, note="identity (a cast)"),
)

A = ArrayOp
_RED = {"axis": "None", "keepdims": "False"}
# C = A @ B of vectors and matrices, by (A.ndim, B.ndim): dA, dB as one would write them.
_MATMUL = {
    (1, 1): {"a": "{g} * {b}", "b": "{g} * {a}"},
    (2, 1): {"a": "{np}.multiply.outer({g}, {b})", "b": "{g} @ {a}"},
    (1, 2): {"a": "{b} @ {g}", "b": "{np}.multiply.outer({a}, {g})"},
    (2, 2): {"a": "{g} @ {b}.T", "b": "{a}.T @ {g}"},
}
_UNREDUCE = "_unreduce({g}, {a}, {axis}, {keepdims})"
ARRAY_OPS: tuple[ArrayOp, ...] = (
    # NumPy's third positional parameter of a reduction is dtype or out: only a and axis
    # may be given by position here, keepdims and ddof by name.
    A(("np.sum",), ("a", "axis", "keepdims"), {"a": _UNREDUCE}, _RED, method="sum",
      positional=2),
    A(("np.mean",), ("a", "axis", "keepdims"), {"a": _UNREDUCE + " / _count({a}, {out})"}, _RED,
      method="mean", positional=2),
    A(("np.prod",), ("a", "axis", "keepdims"),
      {"a": _UNREDUCE + " * _prod_others({a}, {axis})"}, _RED, method="prod",
      note="exact where entries are zero", positional=2),
    A(("np.max", "np.amax"), ("a", "axis", "keepdims"),
      {"a": "_extreme_share({g}, {a}, {out}, {axis}, {keepdims})"}, _RED, method="max",
      note="ties share the gradient equally", positional=2),
    A(("np.min", "np.amin"), ("a", "axis", "keepdims"),
      {"a": "_extreme_share({g}, {a}, {out}, {axis}, {keepdims})"}, _RED, method="min",
      note="ties share the gradient equally", positional=2),
    A(("np.var",), ("a", "axis", "ddof", "keepdims"),
      {"a": "_var_grad({g}, {a}, {out}, {axis}, {ddof}, {keepdims})"},
      {"axis": "None", "ddof": "0", "keepdims": "False"}, method="var", positional=2),
    A(("np.std",), ("a", "axis", "ddof", "keepdims"),
      {"a": "_std_grad({g}, {a}, {out}, {axis}, {ddof}, {keepdims})"},
      {"axis": "None", "ddof": "0", "keepdims": "False"}, method="std", positional=2,
      note="0 where the entries are equal (one entry, or equal by construction)"),
    A(("np.cumsum",), ("a", "axis"), {"a": "_cumsum_grad({g}, {a}, {axis})"},
      {"axis": "None"}, method="cumsum", positional=2,
      note="the adjoint is the reversed cumulative sum"),
    A(("np.diff",), ("a", "n", "axis"), {"a": "_diff_grad({g}, {a}, {n}, {axis})"},
      {"n": "1", "axis": "-1"}, positional=3, note="prepend= and append= refused"),
    A(("np.cumprod",), ("a", "axis"), {"a": "_cumprod_grad({g}, {a}, {axis})"},
      {"axis": "None"}, method="cumprod", positional=2, note="exact where entries are zero"),
    A(("np.nansum",), ("a", "axis", "keepdims"),
      {"a": "{np}.where({np}.isnan({a}), 0.0, " + _UNREDUCE + ")"}, _RED, positional=2,
      note="NaN entries get no gradient"),
    A(("np.nanmean",), ("a", "axis", "keepdims"),
      {"a": "_nanmean_grad({g}, {a}, {axis}, {keepdims})"}, _RED, positional=2,
      note="NaN entries get no gradient"),
    A(("np.linalg.norm",), ("x", "ord", "axis", "keepdims"),
      {"x": "_norm_grad({g}, {x}, {out}, {ord}, {axis}, {keepdims})"},
      {"ord": "None", "axis": "None", "keepdims": "False"},
      note="2-norm of vectors and Frobenius norm (ord None, 2 or 'fro'); other orders refused"),
    A(("np.matmul",), ("a", "b"), {"a": "_matmul_grad({g}, {a}, {b}, 0)",
                                   "b": "_matmul_grad({g}, {a}, {b}, 1)"},
      note="also the @ operator; 1-D, 2-D and batched", by_ndim=_MATMUL),
    A(("np.dot",), ("a", "b"), {"a": "_dot_grad({g}, {a}, {b}, 0)",
                                "b": "_dot_grad({g}, {a}, {b}, 1)"}, method="dot",
      note="scalars, 1-D and 2-D", by_ndim=_MATMUL),
    # (np.inner sums over both last axes: a @ b where b is a vector, else a @ b.T)
    A(("np.inner",), ("a", "b"), {"a": "_inner_grad({g}, {a}, {b}, 0)",
                                  "b": "_inner_grad({g}, {a}, {b}, 1)"},
      by_ndim={(1, 1): _MATMUL[1, 1], (2, 1): _MATMUL[2, 1],
               (1, 2): {"a": "{g} @ {b}", "b": "{np}.multiply.outer({g}, {a})"},
               (2, 2): {"a": "{g} @ {b}", "b": "{g}.T @ {a}"}}),
    A(("np.outer",), ("a", "b"), {"a": "_outer_grad({g}, {a}, {b}, 0)",
                                  "b": "_outer_grad({g}, {a}, {b}, 1)"},
      by_ndim={(1, 1): {"a": "{g} @ {b}", "b": "{a} @ {g}"}}),
    A(("np.einsum",), ("subscripts", "operands"),
      {"operands": "_einsum_grad({subscripts}, {g}, {operands}, {i})"}, sequence="operands",
      note="explicit subscripts ('ij,jk->ik'), no repeated index within one operand"),
    A(("np.trace",), ("a", "offset", "axis1", "axis2"),
      {"a": "_trace_grad({g}, {a}, {offset}, {axis1}, {axis2})"},
      {"offset": "0", "axis1": "0", "axis2": "1"}, method="trace", positional=4,
      note="offset, axis1, axis2"),
    A(("np.diagonal",), ("a", "offset", "axis1", "axis2"),
      {"a": "_diagonal_grad({g}, {a}, {offset}, {axis1}, {axis2})"},
      {"offset": "0", "axis1": "0", "axis2": "1"}, method="diagonal", positional=4),
    A(("np.diag",), ("v", "k"), {"v": "_diag_grad({g}, {v}, {k})"}, {"k": "0"},
      note="a vector makes a matrix; a matrix gives its diagonal"),
    A(("np.triu",), ("m", "k"), {"m": "_unbroadcast({np}.triu({g}, {k}), {m})"}, {"k": "0"}),
    A(("np.tril",), ("m", "k"), {"m": "_unbroadcast({np}.tril({g}, {k}), {m})"}, {"k": "0"}),
    A(("np.cross",), ("a", "b"), {"a": "_cross_grad({g}, {a}, {b}, 0)",
                                  "b": "_cross_grad({g}, {a}, {b}, 1)"},
      note="vectors of 3 along the last axis; axisa=, axisb=, axisc=, axis= refused"),
    A(("np.kron",), ("a", "b"), {"a": "_kron_grad({g}, {a}, {b}, 0)",
                                 "b": "_kron_grad({g}, {a}, {b}, 1)"}),
    A(("np.tensordot",), ("a", "b", "axes"),
      {"a": "_tensordot_grad({g}, {a}, {b}, {axes}, 0)",
       "b": "_tensordot_grad({g}, {a}, {b}, {axes}, 1)"}, {"axes": "2"},
      note="axes an int or a pair of sequences"),
    A(("np.transpose",), ("a", "axes"),
      {"a": "_transpose_grad({g}, {axes})"},
      {"axes": "None"}, method="transpose", note="also .T"),
    A(("np.reshape",), ("a", "shape"), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      method="reshape"),
    A(("np.ravel",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"}, method="ravel"),
    A(("np.squeeze",), ("a", "axis"), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      {"axis": "None"}, method="squeeze"),
    A(("np.expand_dims",), ("a", "axis"), {"a": "{np}.reshape({g}, {np}.shape({a}))"}),
    A(("np.broadcast_to",), ("array", "shape"), {"array": "_unbroadcast({g}, {array})"}),
    A(("np.tile",), ("A", "reps"), {"A": "_untile({g}, {A}, {reps})"}),
    A(("np.flip",), ("m", "axis"), {"m": "{np}.flip({g}, {axis})"}, {"axis": "None"}),
    A(("np.moveaxis",), ("a", "source", "destination"),
      {"a": "{np}.moveaxis({g}, {destination}, {source})"}),
    A(("np.swapaxes",), ("a", "axis1", "axis2"), {"a": "{np}.swapaxes({g}, {axis1}, {axis2})"},
      method="swapaxes"),
    A(("np.rollaxis",), ("a", "axis", "start"), {"a": "_unrollaxis({g}, {a}, {axis}, {start})"},
      {"start": "0"}),
    A(("np.atleast_1d",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      note="one array argument"),
    A(("np.atleast_2d",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      note="one array argument"),
    A(("np.atleast_3d",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      note="one array argument"),
    A(("np.flipud",), ("m",), {"m": "{np}.flipud({g})"}),
    A(("np.fliplr",), ("m",), {"m": "{np}.fliplr({g})"}),
    A(("np.roll",), ("a", "shift", "axis"), {"a": "{np}.roll({g}, {np}.negative({shift}), {axis})"},
      {"axis": "None"}),
    A(("np.repeat",), ("a", "repeats", "axis"),
      {"a": "_unrepeat({g}, {a}, {repeats}, {axis})", "repeats": ""}, {"axis": "None"},
      method="repeat", note="the gradient of an entry is the sum over its copies"),
    A(("np.concatenate",), ("arrays", "axis"),
      {"arrays": "_part({g}, {arrays}, {i}, {axis}, 'concatenate')"}, {"axis": "0"},
      sequence="arrays"),
    A(("np.stack",), ("arrays", "axis"),
      {"arrays": "_part({g}, {arrays}, {i}, {axis}, 'stack')"}, {"axis": "0"},
      sequence="arrays"),
    A(("np.hstack",), ("tup",), {"tup": "_part({g}, {tup}, {i}, None, 'hstack')"},
      sequence="tup"),
    A(("np.vstack",), ("tup",), {"tup": "_part({g}, {tup}, {i}, None, 'vstack')"},
      sequence="tup"),
    # Constructors whose entries are numbers from the arguments (NO_GRADIENT has the rest).
    A(("np.full",), ("shape", "fill_value", "dtype"),
      {"shape": "", "fill_value": "_fill_grad({g}, {fill_value}, {dtype})"},
      {"dtype": "None"}, positional=3, note="the gradient of fill_value is the sum"),
    A(("np.full_like",), ("a", "fill_value", "dtype"),
      {"a": "", "fill_value": "_fill_grad({g}, {fill_value}, {dtype}, {a})"},
      {"dtype": "None"}, positional=3, note="a's values carry no gradient"),
    A(("np.arange",), ("start", "stop", "step", "dtype"),
      {"start": "_arange_grad({g}, {out}, {stop}, {dtype}, 0)", "stop": "",
       "step": "_arange_grad({g}, {out}, {stop}, {dtype}, 2)"},
      {"stop": "None", "step": "None", "dtype": "None"}, positional=3,
      note="entries start + k*step; their count (from stop) carries no gradient"),
    A(("np.linspace",), ("start", "stop", "num", "endpoint", "dtype", "axis"),
      {"start": "_linspace_grad({g}, {start}, {stop}, {num}, {endpoint}, {dtype}, {axis}, 0)",
       "stop": "_linspace_grad({g}, {start}, {stop}, {num}, {endpoint}, {dtype}, {axis}, 1)",
       "num": ""},
      {"num": "50", "endpoint": "True", "dtype": "None", "axis": "0"}, positional=4,
      note="linear in start and stop; retstep= refused"),
    A(("np.where",), ("condition", "x", "y"),
      {"x": "_unbroadcast({np}.where({condition}, {g}, 0.0), {x})",
       "y": "_unbroadcast({np}.where({condition}, 0.0, {g}), {y})"},
      note="the gradient flows to the branch chosen"),
)

# Building arrays from values (issue 13): np.array and np.asarray of nested lists, copies,
# casts, and the builtins sum, min and max over a sequence (a list, a tuple, an array's rows).
_ENTRY = "_entry_grad({g}, {i}, {dtype})"
_DTYPE_NOTE = "; an integer or boolean dtype has no gradient"
ARRAY_OPS += (
    A(("np.array",), ("object", "dtype", "copy"), {"object": _ENTRY},
      {"dtype": "None", "copy": "True"}, entries="object", positional=2,
      note="of numbers and arrays of one shape, in nested lists and tuples" + _DTYPE_NOTE),
    A(("np.asarray",), ("a", "dtype"), {"a": _ENTRY}, {"dtype": "None"}, entries="a",
      positional=2, note="as np.array" + _DTYPE_NOTE),
    A(("[...]",), ("items",), {"items": "_entry_grad({g}, {i})"}, entries="items",
      note="a list or tuple of numbers and arrays read as an array (np.sum([a, b]))"),
    A(("np.copy",), ("a",), {"a": "{g}"}, method="copy"),
    A(("np.append",), ("arr", "values", "axis"),
      {"arr": "_append_part({g}, {arr}, {values}, {axis}, 0)",
       "values": "_append_part({g}, {arr}, {values}, {axis}, 1)"}, {"axis": "None"},
      note="flattened where axis is None, as NumPy's"),
    A(("np.ndarray.astype",), ("a", "dtype"), {"a": _ENTRY}, method="astype",
      note="the gradient in the parameter's dtype" + _DTYPE_NOTE),
    A(("sum(iterable)",), ("iterable", "start"),
      {"iterable": "_sum_rows_grad({g}, {iterable})", "start": "_unbroadcast({g}, {start})"},
      {"start": "0"}, note="the builtin: over a list or tuple, or an array's first axis"),
    A(("max(iterable)",), ("iterable",),
      {"iterable": "_extreme_share({g}, {np}.asarray({iterable}), {out})"},
      note="the builtin over a sequence of numbers: ties share the gradient equally"),
    A(("min(iterable)",), ("iterable",),
      {"iterable": "_extreme_share({g}, {np}.asarray({iterable}), {out})"},
      note="the builtin over a sequence of numbers: ties share the gradient equally"),
)
# (Rows that no NumPy name reaches: lowering picks them for what it reads.)
_BY_NAME = {row.names[0]: row for row in ARRAY_OPS}
SEQUENCE = _BY_NAME["[...]"]
BUILTIN_REDUCTIONS = {builtins.sum: _BY_NAME["sum(iterable)"],
                      builtins.max: _BY_NAME["max(iterable)"],
                      builtins.min: _BY_NAME["min(iterable)"]}

A_LSE = A(("scipy.special.logsumexp",), ("a", "axis", "keepdims"),
          {"a": _UNREDUCE + " * {np}.exp({a} - _unreduce({out}, {a}, {axis}, {keepdims}))"},
          _RED, note="where SciPy is installed; b= and return_sign= are refused", positional=2)
ARRAY_OPS += (A_LSE,)

# Reading by index, x[...]: basic slices, integer arrays (repeats accumulate), boolean masks.
INDEX = A(("x[...]",), ("a", "index"), {"a": "_scatter({g}, {a}, {np}.index_exp[{index}])"},
          note="slices, newaxis, integer arrays (repeats accumulate), boolean masks")

# Concatenations written as an index, np.r_[a, b, ...] and np.c_[...]: rows by the object.
_RC = "of numbers and arrays; a slice or string directive only if all is constant"
CONCATENATORS = (
    A(("np.r_[...]",), ("items",), {"items": "_rc_part({g}, {items}, {i}, 'r')"},
      sequence="items", note=_RC),
    A(("np.c_[...]",), ("items",), {"items": "_rc_part({g}, {items}, {i}, 'c')"},
      sequence="items", note=_RC),
)


def concatenator(obj):
    """The row of np.r_ or np.c_ (which are indexed, not called), or None."""
    if obj is np.r_:
        return CONCATENATORS[0]
    return CONCATENATORS[1] if obj is np.c_ else None


# ndarray methods, by name, and the function each one is.
METHODS = {row.method: row for row in ARRAY_OPS if row.method}
METHODS["flatten"] = METHODS["ravel"]

# Functions whose value carries no gradient: run as they are, constants to the differentiator.
# Constructors with a rule above, run as constants where no argument depends on the
# differentiated inputs (as they were before they had rules: any keyword NumPy takes).
CONSTRUCTORS = ("np.full", "np.full_like", "np.arange", "np.linspace", "np.array", "np.asarray")

# Each has derivative 0, or cannot take a float from its arguments (np.full, np.arange and
# np.linspace can: they are ARRAY_OPS).
NO_GRADIENT = ("np.zeros_like", "np.ones_like", "np.zeros", "np.ones",
               "np.eye", "np.identity", "np.argmax",
               "np.argmin", "np.argsort", "np.shape", "np.ndim", "np.size", "np.isnan",
               "np.isfinite", "np.isinf", "len", "range", "int", "bool",
               "np.logical_and", "np.logical_or", "np.logical_not", "np.greater",
               "np.less", "np.equal", "np.imag",
               "np.int64", "np.int32", "np.int16", "np.int8", "np.bool_")
# Attributes of arrays that carry no gradient.
NO_GRADIENT_ATTRIBUTES = ("shape", "ndim", "size", "dtype")

_MODULES = {"np": np, "math": math}


def resolve_name(dotted: str):
    """The object a table spelling refers to: ``np.sin`` -> numpy.sin, ``abs`` -> builtins.abs."""
    head, _, rest = dotted.partition(".")
    if not rest:
        return getattr(builtins, head)
    if head == "scipy":
        obj = importlib.import_module("scipy.special")
        rest = rest.partition(".")[2]
    else:
        obj = _MODULES[head]
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def _index(rows):
    table = {}
    for row in rows:
        for name in row.names:
            if not all(part.isidentifier() for part in name.split(".")):
                continue  # a spelling no object has: "[...]", "max(iterable)"
            try:
                obj = resolve_name(name)
            except (ImportError, AttributeError):  # an optional module (SciPy) is missing
                continue
            table[id(obj)] = (obj, row)
    return table


_BY_ID = {**_index(ELEMENTWISE), **_index(ARRAY_OPS)}
_NO_GRADIENT_IDS = {id(resolve_name(n)) for n in NO_GRADIENT}


def lookup(obj):
    """The row (Elementwise or ArrayOp) for a function object, or None."""
    hit = _BY_ID.get(id(obj))
    return hit[1] if hit is not None and hit[0] is obj else None


def no_gradient(obj) -> bool:
    """Whether ``obj`` is a function whose result carries no gradient (np.zeros_like...)."""
    return id(obj) in _NO_GRADIENT_IDS


def constant(value: float):
    """A module-level number as SymPy sees it: pi and e by name (so they print as np.pi)."""
    if value == math.pi:
        return sp.pi
    if value == math.e:
        return sp.E
    return sp.Integer(value) if isinstance(value, int) else sp.Float(float(value))
