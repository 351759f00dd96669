"""The derivative table: each NumPy/math function -> a SymPy function or a vector-Jacobian rule.

Elementwise functions map to SymPy expressions (SymPy knows their derivatives); array
operations get one vector-Jacobian product each, written as a NumPy template. Adding a
function is one row here plus nothing else: the tests and the README's coverage table are
generated from these rows.
"""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import sympy as sp
from sympy.printing.precedence import precedence

from .errors import SymdiffError

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


class Heaviside(_NumpyFunction):
    """np.heaviside(x, h0): 0 below zero, h0 at zero, 1 above; flat in x, and in h0 1
    where x is 0 (the value there), else 0, as JAX's."""

    nargs = 2

    def numpy(self):
        return call("np.heaviside")(*self.args)

    def fdiff(self, argindex=1):
        if argindex == 1:
            return sp.S.Zero
        return where(is_zero(self.args[0]), sp.Float(1.0), sp.Float(0.0))


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
    central differences); ``optional`` parameters may be left out of a call. ``static``
    parameters (an order, a dimension) have no derivative here: a call where one depends
    on the differentiated inputs is refused where it is written.
    """

    names: tuple[str, ...]
    params: tuple[str, ...]
    sympy: Callable
    domain: tuple[float, float] = (-2.0, 2.0)
    optional: int = 0
    note: str = ""
    # Parameters whose derivative has no closed form: refused where they depend on the
    # differentiated inputs (a cdf in its shape parameter).
    refused: tuple[str, ...] = ()
    # Parameters without gradient (polygamma's order): refused where they depend on the
    # differentiated inputs.
    static: tuple[str, ...] = ()


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
    # A function that returns several values (a tuple, or np.split's list): each output's
    # name and templates; a template also sees ``{factors}``, the whole result, run once
    # without gradient. No templates: the output carries no gradient (a sign, a rank).
    # One output of several names ("*") stands for each of a list whose length the
    # sections give. ``alone`` (a parameter, its code, templates): written so, the call
    # returns one value, with these templates (np.linalg.svd(a, compute_uv=False): s).
    outputs: tuple[tuple[str, dict[str, str]], ...] = ()
    alone: tuple = ()
    # A parameter taking nested lists of numbers and arrays (np.array's object): each entry
    # that depends on the differentiated inputs is an operand, ``{i}`` its index in the
    # result; the other entries are code run as written. Any other value is one operand.
    entries: str = ""
    # Forward mode (forward.py): how the result's tangent follows from the operands'.
    # linear="joint": linear in its differentiable operands together (np.sum, a slice,
    # np.concatenate, np.where's a and b, reshape, transpose...): the tangent is the call
    # itself run on the operands' tangents (zeros for an operand without one).
    # linear="multi": linear in each operand separately (matmul, dot, einsum, outer,
    # kron, tensordot, cross, convolve): the sum, over the operands with a tangent, of the
    # call with that one operand replaced by its tangent. Otherwise ``jvp`` maps each
    # differentiable parameter to the template of its part of the tangent, in ``{t}`` (that
    # operand's tangent), ``{out}`` (the result), ``{np}`` and the parameters by name, as
    # ``vjp``'s templates are filled (statics are their code); the parts add up. A
    # differentiable parameter without a template here has no tangent rule: refused.
    # Templates are NumPy (and ``scipy.``) code that symdiff differentiates again (a
    # Hessian is reverse over forward): never a helper of runtime's. A linear function of
    # several values (np.split): each output's tangent is that output of the call on the
    # tangents. Parameters with an empty vjp template (np.take's indices, np.repeat's
    # repeats, a count) are passed as they are, never replaced by zeros; the entries of
    # ``entries`` that are code (np.array([x, 2.0])'s 2.0) are zeros. A result of an integer
    # or boolean dtype (astype(int), np.full(..., dtype=int)) has tangent 0, as it has no
    # gradient: the call on the tangents would truncate them.
    linear: str = ""
    jvp: dict[str, str] = field(default_factory=dict)
    # For a function of several values (``outputs``): one such dict per output, in order;
    # these templates also see ``{factors}`` and ``{part}`` as the vjp ones of part() do.
    # An output whose vjp has no template carries no gradient (a sign, a rank): tangent 0.
    output_jvps: tuple[dict[str, str], ...] = ()
    # The tangent templates of ``alone``'s single value (svd(a, compute_uv=False)).
    alone_jvp: dict[str, str] = field(default_factory=dict)

    @property
    def optional(self) -> int:
        return len(self.defaults)

    def part(self, k: int) -> ArrayOp:
        """The rule of output ``k`` of a function returning several values: its operands'
        templates, which read ``{factors}`` (the whole result) and ``{part}`` (k)."""
        last = min(k, len(self.outputs) - 1)
        name, vjp = self.outputs[last]
        jvp = self.output_jvps[last] if self.output_jvps else {}
        return ArrayOp(self.names, (*self.params, "factors", "part"), vjp, self.defaults,
                       note=f"{self.names[0]}'s {name}", linear=self.linear, jvp=jvp)


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
    E(("np.heaviside",), ("x", "h0"), Heaviside,
      note="flat in x; in h0, 1 where x is 0 (as JAX's)"),
    E(("np.real", "np.conj", "np.conjugate"), ("x",), lambda x: x,
      note="of real values: identity"),
    E(("math.erf",), ("x",), sp.erf),
    E(("math.erfc",), ("x",), sp.erfc),
    E(("np.deg2rad", "np.radians", "math.radians"), ("x",), lambda x: x * sp.pi / 180),
    E(("np.rad2deg", "np.degrees", "math.degrees"), ("x",), lambda x: x * 180 / sp.pi),
    E(("float",), ("x",), lambda x: x, note="identity"),
)
# NumPy rules of issue 13 for real values: np.real_if_close is the identity, np.angle 0 or pi.
ELEMENTWISE += (
    E(("np.real_if_close",), ("x", "tol"), lambda x, tol=None: x, optional=1,
      note="of real values: identity"),
    E(("np.angle",), ("x",), _zero_derivative("Angle"), note="of real values: derivative 0"),
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

# --- Forward mode: tangent templates (see ArrayOp.linear) ---
#
# Each is NumPy that symdiff differentiates again (a Hessian is reverse over forward): masks
# are comparisons, a reduced axis is kept by recomputing with keepdims=True, a static choice
# (ord, upper) is a conditional expression on its code. A symmetric matrix's tangent is read
# as its symmetric part, as the vjp's gradient is the symmetric one.


def _sub(template: str, *parts: str) -> str:
    """``template`` with its ``%s`` replaced by ``parts`` in turn (str.format would read the
    templates' own fields)."""
    pieces = template.split("%s")
    assert len(pieces) == len(parts) + 1, template
    return "".join(p + q for p, q in zip(pieces, (*parts, ""), strict=True))


def _swap(x: str) -> str:
    """The transpose of a stack of matrices, as code."""
    return _sub("{np}.swapaxes(%s, -1, -2)", x)


_KEEP = "axis={axis}, keepdims=True"
_AS_OUT = "axis={axis}, keepdims={keepdims}"


def _tied_tangent(extreme: str) -> str:
    """np.max's or np.min's tangent: the mean of t over the entries tied at the extreme
    (ties share, as the vjp's gradient does)."""
    mask = _sub("({a} == {np}.%s({a}, %s))", extreme, _KEEP)
    return _sub("{np}.sum({t} * %s, %s) / {np}.sum(%s, %s)", mask, _AS_OUT, mask, _AS_OUT)


# np.prod: sum_i t_i * (product of the others), exact at zeros also to first order in a (so
# that its derivative, a Hessian, is exact too). Of the others, the zeros (m of them) give
# 1 (m = 0), the sum of the zero entries but this one (m = 1: 0, with the slope of that
# zero entry), or 0 (m > 1); the nonzero ones give their product.
_NONZERO = "{np}.where({a} == 0, 1.0, {a})"
_ZEROS = "{np}.where({a} == 0, {a}, 0.0)"
_OTHER_ZEROS = _sub("({np}.sum({a} == 0, %s) - ({a} == 0))", _KEEP)
_PROD_OTHERS = _sub(
    "{np}.where(%s == 0, 1.0, {np}.where(%s == 1, {np}.sum(%s, %s) - %s, 0.0)) * "
    "{np}.prod(%s, %s) / %s",
    _OTHER_ZEROS, _OTHER_ZEROS, _ZEROS, _KEEP, _ZEROS, _NONZERO, _KEEP, _NONZERO)
_PROD_JVP = _sub("{np}.sum({t} * %s, %s)", _PROD_OTHERS, _AS_OUT)


# np.cumprod: the same along the running product, by the number of zeros so far: none, the
# product times the running sum of t/a; one (at p), t_p times the product of the others,
# plus a term 0 whose slope in a_p is right; two (p, q), 0 with slopes t_q (in a_p) and t_p
# (in a_q); more, 0.
def _running(x: str) -> str:
    return _sub("{np}.cumsum(%s, axis={axis})", x)


_RUN_ZEROS = _running("{a} == 0")
_RUN_ZERO_SUM = _running(_ZEROS)
_RUN_RATIOS = _running(_sub("{np}.where({a} == 0, 0.0, {t} / %s)", _NONZERO))
_RUN_T_AT_ZEROS = _running("{np}.where({a} == 0, {t}, 0.0)")
_RUN_TA_AT_ZEROS = _running("{np}.where({a} == 0, {t} * {a}, 0.0)")
_CUMPROD_JVP = _sub(
    "{np}.cumprod(%s, axis={axis}) * {np}.where(%s == 0, %s, {np}.where(%s == 1, %s + %s * %s, "
    "{np}.where(%s == 2, %s * %s - %s, 0.0)))",
    _NONZERO, _RUN_ZEROS, _RUN_RATIOS, _RUN_ZEROS, _RUN_T_AT_ZEROS, _RUN_ZERO_SUM, _RUN_RATIOS,
    _RUN_ZEROS, _RUN_ZERO_SUM, _RUN_T_AT_ZEROS, _RUN_TA_AT_ZEROS)

# var and std: 2/(N - ddof) * sum((a - mean) * t), N = a.size / out.size; std's is var's
# over 2*std, 0 where std is 0 (the entries all equal: a - mean is 0 there too).
_CENTRED = _sub("{np}.sum(({a} - {np}.mean({a}, %s)) * {t}, %s)", _KEEP, _AS_OUT)
_DOF = "({np}.size({a}) / {np}.size({out}) - ({ddof}))"
_VAR_JVP = _sub("2.0 * %s / %s", _CENTRED, _DOF)
_STD_JVP = _sub("%s / (%s * {np}.where({out} == 0, 1.0, {out}))", _CENTRED, _DOF)
_NOT_NAN_T = "{np}.where({np}.isnan({a}), 0.0, {t})"
_NANSUM_JVP = _sub("{np}.sum(%s, %s)", _NOT_NAN_T, _AS_OUT)
_NANMEAN_JVP = _sub("%s / {np}.sum({np}.logical_not({np}.isnan({a})), %s)", _NANSUM_JVP,
                    _AS_OUT)
# np.linalg.norm, by its order (a static choice): the 2-norm and the Frobenius norm,
# sum(x*t)/norm (0 at 0); vectors' 1, inf, -inf (ties share) and 0; matrices' (axis None)
# 2, -2, 'nuc' (by their singular vectors), 1, -1, inf, -inf (the columns' or rows' sums
# of |x|, ties share). Other orders (a p-norm, matrices along an axis pair): NaN, still to
# be written (forward mode should refuse them where the call is read).
_NAN = "{np}.nan * {out}"


def _vector_norm(extreme: str) -> str:
    mask = _sub("({np}.abs({x}) == {np}.%s({np}.abs({x}), %s))", extreme, _KEEP)
    return _sub("{np}.sum({np}.sign({x}) * {t} * %s, %s) / {np}.sum(%s, %s)", mask, _AS_OUT,
                mask, _AS_OUT)


def _by_order(cases: list[tuple[str, str]]) -> str:
    """Nested conditional expressions on {ord}, NaN for any other order."""
    code = _NAN
    for order, template in reversed(cases):
        code = _sub("(%s if {ord} == %s else %s)", template, order, code)
    return code


_SVD_X = "{np}.linalg.svd({x}, full_matrices=False)"


def _singular(k: str) -> str:
    return _sub("{np}.sum(%s[0][:, %s] * ({t} @ %s[2][%s]))", _SVD_X, k, _SVD_X, k)


def _matrix_sums(extreme: str, axis: str) -> str:
    sums = _sub("{np}.sum({np}.abs({x}), axis=%s, keepdims=True)", axis)
    mask = _sub("(%s == {np}.%s(%s))", sums, extreme, sums)
    return _sub("{np}.sum({np}.sign({x}) * {t} * %s) / {np}.sum(%s)", mask, mask)


_TWO_NORM = _sub("{np}.sum({x} * {t}, %s) / {np}.where({out} == 0, 1.0, {out})", _AS_OUT)
_VECTOR_NORM = _by_order([
    ("1", _sub("{np}.sum({np}.sign({x}) * {t}, %s)", _AS_OUT)), ("2", _TWO_NORM),
    ("{np}.inf", _vector_norm("max")), ("-{np}.inf", _vector_norm("min")),
    ("0", "0.0 * {out}")])
_MATRIX_NORM = _sub("{np}.reshape(%s, {np}.shape({out}))", _by_order([
    ("2", _singular("0")), ("-2", _singular("-1")),
    ("'nuc'", _sub("{np}.sum(%s[0] * ({t} @ %s))", _SVD_X, _swap(_SVD_X + "[2]"))),
    ("1", _matrix_sums("max", "0")), ("-1", _matrix_sums("min", "0")),
    ("{np}.inf", _matrix_sums("max", "1")), ("-{np}.inf", _matrix_sums("min", "1"))]))
_NORM_JVP = _sub(
    "(%s if {ord} in (None, 'fro') else %s if {np}.ndim({axis}) == 1 else "
    "(%s if {np}.ndim({x}) == 2 else %s) if {axis} == None else %s)",
    _TWO_NORM, _NAN, _MATRIX_NORM, _VECTOR_NORM, _VECTOR_NORM)
# np.arange: entries start + k*step; arange(stop) alone has no start (its count's tangent
# is 0).
_ARANGE_JVP = {"start": "({t} * {np}.ones({np}.shape({out})) if {stop} != None "
                        "else 0.0 * {out})",
               "step": "{t} * {np}.arange({np}.size({out}))"}
# np.average: linear in a; in the weights, sum(dw * (a - average)) / sum(w) (weights of
# a's shape: 1-D weights along an axis fail to reshape, loudly).
_WEIGHTS = "({np}.ones_like({a}) if {weights} is None else {weights})"
_AVERAGE_JVP = {
    "a": _sub("{np}.average({t}, axis={axis}, weights=%s, keepdims={keepdims})", _WEIGHTS),
    "weights": _sub("{np}.sum({np}.reshape({t}, {np}.shape({a})) * ({a} - {np}.average({a}, "
                    "axis={axis}, weights={weights}, keepdims=True)), %s) / {np}.sum("
                    "{np}.reshape({weights}, {np}.shape({a})), %s)", _AS_OUT, _AS_OUT)}


# np.partition: for each slot of the result, t of the entry of a equal to it (the mean of
# tied ones): which entry went where does not depend on the selection algorithm.
def _matched(a: str, t: str, out: str) -> str:
    mask = _sub("({np}.expand_dims(%s, -2) == {np}.expand_dims(%s, -1))", a, out)
    return _sub("{np}.sum({np}.expand_dims(%s, -2) * %s, axis=-1) / {np}.sum(%s, axis=-1)",
                t, mask, mask)


def _last(x: str) -> str:
    return _sub("{np}.moveaxis(%s, {axis}, -1)", x)


_PARTITION_JVP = _sub("(%s if {axis} == None else {np}.moveaxis(%s, -1, {axis}))",
                      _matched("{np}.ravel({a})", "{np}.ravel({t})", "{out}"),
                      _matched(_last("{a}"), _last("{t}"), _last("{out}")))


# The builtins max and min over a sequence of numbers: ties share, as np.max's.
def _tied_sequence() -> str:
    mask = "({np}.asarray({iterable}) == {out})"
    return _sub("{np}.sum({np}.asarray({t}) * %s) / {np}.sum(%s)", mask, mask)


# Linear algebra, as JAX's jvp rules.
_SYM_T = _sub("(({t} + %s) / 2)", _swap("{t}"))


def _cholesky_tangent(lower: str) -> str:
    """dL = L @ phi(L^-1 dA L^-T), phi the lower triangle with half the diagonal, dA the
    symmetric part of t; ``lower`` the code of the lower factor L."""
    inner = _sub("{np}.linalg.solve(%s, %s)", lower,
                 _swap(_sub("{np}.linalg.solve(%s, %s)", lower, _SYM_T)))
    return _sub("(%s @ (0.5 * ({np}.tril(%s) + {np}.tril(%s, -1))))", lower, inner, inner)


# The lower factor from either triangle (the other one is 0 in a Cholesky factor).
_DL = _cholesky_tangent(_sub("({np}.tril({out}) + {np}.tril(%s, -1))", _swap("{out}")))
_CHOLESKY_JVP = _sub("(%s if {upper} else %s)", _swap(_DL), _DL)
_SCIPY_CHOLESKY_JVP = _sub("(%s if {lower} else %s)", _DL, _swap(_DL))
# cho_factor's c: the factor in one triangle (the other one holds what it held).
_C = "{factors}[0]"
_DC = _cholesky_tangent(_sub("({np}.tril(%s) if {lower} else %s)", _C,
                             _swap(_sub("{np}.triu(%s)", _C))))
_CHO_FACTOR_JVP = _sub("({np}.tril(%s) if {lower} else {np}.triu(%s))", _DC, _swap(_DC))
# cho_solve((c, lower), b): x = A^-1 b, A = L L^T from c's triangle.
_L_OF_C = _sub("({np}.tril({c}) if {lower} else %s)", _swap("{np}.triu({c})"))
_DL_OF_C = _sub("({np}.tril({t}) if {lower} else %s)", _swap("{np}.triu({t})"))
_A_OF_C = _sub("(%s @ %s)", _L_OF_C, _swap(_L_OF_C))
_CHO_SOLVE_JVP = {
    "c": _sub("-{np}.linalg.solve(%s, (%s @ %s + %s @ %s) @ {out})",
              _A_OF_C, _DL_OF_C, _swap(_L_OF_C), _L_OF_C, _swap(_DL_OF_C)),
    "b": _sub("{np}.linalg.solve(%s, {t})", _A_OF_C)}
_SOLVE_JVP = {
    # (b a vector, NumPy 2's rule: out a vector, solved for as a column)
    "a": "(-{np}.linalg.solve({a}, {t} @ {out}[..., None])[..., 0] if {np}.ndim({b}) == 1 "
         "else -{np}.linalg.solve({a}, {t} @ {out}))",
    "b": "{np}.linalg.solve({a}, {t})"}
# (det at a singular matrix: solve raises, as NumPy does for it)
_TRACE_SOLVE = "{np}.trace({np}.linalg.solve({a}, {t}), axis1=-2, axis2=-1)"
_DET_JVP = {"a": "{out} * " + _TRACE_SOLVE}
_PINV_JVP = _sub("-({out} @ {t} @ {out}) + {out} @ %s @ (%s - %s @ {a} @ {out}) "
                 "+ (%s - {out} @ {a} @ %s) @ %s @ {out}",
                 _swap("{out}"), _swap("{t}"), _swap("{t}"), _swap("{t}"), _swap("{t}"),
                 _swap("{out}"))
# matrix_power: the corner of the power of [[a, t], [0, a]], [[a^n, d(a^n)], [0, a^n]]
# (n < 0 as well).
_N = "{np}.shape({a})[-1]"
_MATRIX_POWER_JVP = _sub(
    "{np}.linalg.matrix_power({np}.concatenate([{np}.concatenate([{a}, {t}], axis=-1), "
    "{np}.concatenate([{np}.zeros_like({t}), {a}], axis=-1)], axis=-2), {n})[..., :%s, %s:]",
    _N, _N)
# scipy.linalg: the part of a's tangent the solver reads (the symmetric part where it reads
# one triangle, as the vjp's gradient is symmetric); 'banded': NaN (the vjp refuses it).
_READ = _sub(
    "(%s if {assume_a} in ('sym', 'symmetric', 'her', 'hermitian', 'pos', "
    "'positive definite') else {np}.triu({t}) if {assume_a} == 'upper triangular' "
    "else {np}.tril({t}) if {assume_a} == 'lower triangular' "
    "else {np}.tril({np}.triu({t})) if {assume_a} == 'diagonal' "
    "else {np}.triu({np}.tril({t}, 1), -1) if {assume_a} == 'tridiagonal' "
    "else {t} if {assume_a} in (None, 'gen', 'general') else {np}.nan * {t})", _SYM_T)


def _scipy_solve(b: str) -> str:
    return _sub("scipy.linalg.solve({a}, %s, lower={lower}, assume_a={assume_a}, "
                "transposed={transposed})", b)


_SCIPY_SOLVE_JVP = {
    "a": "-" + _scipy_solve(_sub("(%s if {transposed} else %s) @ {out}", _swap(_READ), _READ)),
    "b": _scipy_solve("{t}")}
_SCIPY_INV_JVP = {"a": _sub("-({out} @ %s @ {out})", _READ)}
# solve_triangular: the triangle read (without the diagonal if unit_diagonal), or its
# transpose (trans).
_TRIANGLE = ("(({np}.tril({t}) if {lower} else {np}.triu({t})) - "
             "({np}.tril({np}.triu({t})) if {unit_diagonal} else 0.0))")


def _solve_triangular(b: str) -> str:
    return _sub("scipy.linalg.solve_triangular({a}, %s, {trans}, {lower}, {unit_diagonal})",
                b)


_SOLVE_TRIANGULAR_JVP = {
    "a": "-" + _solve_triangular(_sub("(%s if {trans} in (0, 'N') else %s) @ {out}",
                                      _TRIANGLE, _swap(_TRIANGLE))),
    "b": _solve_triangular("{t}")}


# eigh: w' = diag(V^T S V), V' = V (F * (V^T S V)), F_ij = 1/(w_j - w_i) off the diagonal.
def _off_diagonal_inverse(d: str, n: str) -> str:
    """1/d off the diagonal, 0 on it (no division by the diagonal's zeros)."""
    eye = _sub("{np}.eye(%s, dtype=bool)", n)
    return _sub("{np}.where(%s, 0.0, 1.0 / {np}.where(%s, 1.0, %s))", eye, eye, d)


def _eigenvalue_tangent(v: str) -> str:
    """diag(V^T S V)."""
    return _sub("{np}.sum(%s * (%s @ %s), axis=-2)", v, _SYM_T, v)


_W, _V = "{factors}[0]", "{factors}[1]"
_GAPS = _sub("({np}.expand_dims(%s, -2) - {np}.expand_dims(%s, -1))", _W, _W)
_EIGH_JVPS = (
    {"a": _eigenvalue_tangent(_V)},
    {"a": _sub("%s @ (%s * (%s @ %s @ %s))", _V, _off_diagonal_inverse(_GAPS, _N), _swap(_V),
               _SYM_T, _V)})
_EIGVALSH_JVP = {"a": _eigenvalue_tangent("{np}.linalg.eigh({a}, {UPLO})[1]")}

# svd (JAX's svd_jvp_rule, real): with dS = U^T dA V, s' = diag(dS) (from a reduced svd,
# recomputed: the columns of u past min(m, n) that full_matrices=True gives have no
# gradient); U' and V' from F_ij = 1/(s_j^2 - s_i^2), plus their parts outside U's (V's)
# span, 0 for a square a.
_SVDVALS = "{np}.linalg.svd({a}, full_matrices=False)"
_SVDVALS_JVP = {"a": _sub("{np}.sum(%s[0] * ({t} @ %s), axis=-2)", _SVDVALS,
                          _swap(_SVDVALS + "[2]"))}
_U, _S, _VH = "{factors}[0]", "{factors}[1]", "{factors}[2]"
_ROW_S = _sub("{np}.expand_dims(%s, -2)", _S)
_COL_S = _sub("{np}.expand_dims(%s, -1)", _S)
_F = _off_diagonal_inverse(_sub("((%s + %s) * (%s - %s))", _ROW_S, _COL_S, _ROW_S, _COL_S),
                           _sub("{np}.shape(%s)[-1]", _S))
_DS = _sub("(%s @ {t} @ %s)", _swap(_U), _swap(_VH))
_TV = _sub("({t} @ %s)", _swap(_VH))
_TTU = _sub("(%s @ %s)", _swap("{t}"), _U)
_SVD_U = _sub("%s @ (%s * (%s * %s + %s)) + (%s - %s @ (%s @ %s)) / %s",
              _U, _F, _DS, _ROW_S, _swap(_sub("(%s * %s)", _DS, _ROW_S)), _TV, _U, _swap(_U),
              _TV, _ROW_S)
_SVD_V = _sub("%s @ (%s * (%s * %s + %s)) + (%s - %s @ (%s @ %s)) / %s",
              _swap(_VH), _F, _COL_S, _DS, _swap(_sub("(%s * %s)", _COL_S, _DS)), _TTU,
              _swap(_VH), _VH, _TTU, _ROW_S)
_SVD_JVPS = ({"a": _SVD_U}, _SVDVALS_JVP, {"a": _swap(_SVD_V)})

# qr (JAX's qr_jvp_rule, real): with X = Q^T dA R^-1 and Omega the skew matrix of X's
# strict lower triangle, Q' = Q (Omega - X) + dA R^-1, R' = (X - Omega) R.
_Q, _R = "{factors}[0]", "{factors}[1]"
_T_RINV = _swap(_sub("{np}.linalg.solve(%s, %s)", _swap(_R), _swap("{t}")))
_QX = _sub("(%s @ %s)", _swap(_Q), _T_RINV)
_OMEGA = _sub("({np}.tril(%s, -1) - %s)", _QX, _swap(_sub("{np}.tril(%s, -1)", _QX)))
_QR_JVPS = ({"a": _sub("%s @ (%s - %s) + %s", _Q, _OMEGA, _QX, _T_RINV)},
            {"a": _sub("(%s - %s) @ %s", _QX, _OMEGA, _R)})

# lstsq's x, for an a of full column rank: x = (a^T a)^-1 a^T b. (Its residuals and s are
# refused, as their gradients are; the rank has none.)
_ATA = "{np}.transpose({a}) @ {a}"
_LSTSQ_JVPS = (
    {"a": _sub("{np}.linalg.solve(%s, {np}.transpose({t}) @ ({b} - {a} @ {factors}[0]) - "
               "{np}.transpose({a}) @ ({t} @ {factors}[0]))", _ATA),
     "b": _sub("{np}.linalg.solve(%s, {np}.transpose({a}) @ {t})", _ATA)},
    {}, {}, {})

# logsumexp: in a, the mean of t weighted by b*exp(a); in b, of t by exp(a) over the sum of
# b*exp(a) (signed: return_sign's r as well). Both scaled by the largest entry of a.
_B = "({np}.ones_like({a}) if {b} is None else {b})"
_EXP = _sub("{np}.exp({a} - {np}.max({a}, %s))", _KEEP)
_LSE_WEIGHTS = _sub("(%s * %s)", _B, _EXP)
_LSE_JVP = {
    "a": _sub("{np}.sum({t} * %s, %s) / {np}.sum(%s, %s)", _LSE_WEIGHTS, _AS_OUT,
              _LSE_WEIGHTS, _AS_OUT),
    "b": _sub("{np}.sum({t} * %s, %s) / {np}.sum(%s, %s)", _EXP, _AS_OUT, _LSE_WEIGHTS,
              _AS_OUT)}

# scipy.stats.poisson in mu: d/dmu of the pmf is pmf*(k/mu - 1); of the cdf, -pmf(floor k).
_POISSON_K = "(({k}) - ({loc}))"
_POISSON_PMF_FLOOR = _sub("scipy.stats.poisson.pmf({np}.floor(%s), {mu})", _POISSON_K)


def _poisson_log(tail: str, sign: str) -> str:
    """The tangent of logcdf or logsf: the tail's over the tail (0 where it is 0: -inf)."""
    return _sub("{np}.where({np}.isfinite({out}), %s{t} * %s / {np}.where({np}.isfinite("
                "{out}), scipy.stats.poisson.%s({k}, {mu}, {loc}), 1.0), 0.0)", sign,
                _POISSON_PMF_FLOOR, tail)


_POISSON_JVP = {
    "logpmf": _sub("{np}.where({np}.isfinite({out}), {t} * (%s / {mu} - 1.0), 0.0)",
                   _POISSON_K),
    "pmf": _sub("{t} * {out} * (%s / {mu} - 1.0)", _POISSON_K),
    "cdf": _sub("-{t} * %s", _POISSON_PMF_FLOOR),
    "logcdf": _poisson_log("cdf", "-"),
    "sf": _sub("{t} * %s", _POISSON_PMF_FLOOR),
    "logsf": _poisson_log("sf", "")}

# multivariate_normal, for a matrix cov (a number or a vector of variances: NaN, still to be
# written): with y = cov^-1 (x - mean), -y.t for x, y.t for the mean, and
# (y^T S y - tr(cov^-1 S)) / 2 for cov, S the symmetric part of t; the pdf's are the
# logpdf's times the pdf.
_MVN_Y = "(({x} - (0.0 if {mean} is None else {mean})) @ {np}.linalg.inv({cov}))"
_MVN_LOG_JVP = {
    "x": _sub("-{np}.sum(%s * {t}, axis=-1)", _MVN_Y),
    "mean": _sub("{np}.sum(%s * {t}, axis=-1)", _MVN_Y),
    "cov": _sub("0.5 * {np}.sum((%s @ %s) * %s, axis=-1) - 0.5 * {np}.sum({np}.linalg.inv("
                "{cov}) * %s)", _MVN_Y, _SYM_T, _MVN_Y, _SYM_T)}
# dirichlet: points are x's columns, the last entry left out is 1 minus the others' sum;
# (alpha - 1) . t / x for x, t . (log x - psi(alpha) + psi(sum of alpha)) for alpha.
_FULL_X = ("({x} if {np}.shape({x})[0] == {np}.shape({alpha})[0] else {np}.concatenate(["
           "{x}, 1.0 - {np}.sum({x}, axis=0, keepdims=True)]))")
_FULL_T = ("({t} if {np}.shape({x})[0] == {np}.shape({alpha})[0] else {np}.concatenate(["
           "{t}, -{np}.sum({t}, axis=0, keepdims=True)]))")
_DIRICHLET_LOG_JVP = {
    "x": _sub("{np}.sum(({alpha} - 1.0) * {np}.moveaxis(%s / %s, 0, -1), axis=-1)", _FULL_T,
              _FULL_X),
    "alpha": _sub("{np}.sum({t} * ({np}.moveaxis({np}.log(%s), 0, -1) - scipy.special.digamma("
                  "{alpha}) + scipy.special.digamma({np}.sum({alpha}))), axis=-1)", _FULL_X)}


def _density_jvp(log_jvp: dict[str, str], method: str, guard: str = "") -> dict[str, str]:
    """A logpdf's tangents, or the pdf's (times the pdf); ``guard``: the condition on the
    code under which they hold (else NaN)."""
    out = {p: t if method == "logpdf" else _sub("{out} * (%s)", t) for p, t in log_jvp.items()}
    if guard:
        out = {p: _sub("(%s if %s else {np}.nan * {out})", t, guard) for p, t in out.items()}
    return out


ARRAY_OPS: tuple[ArrayOp, ...] = (
    # NumPy's third positional parameter of a reduction is dtype or out: only a and axis
    # may be given by position here, keepdims and ddof by name.
    A(("np.sum",), ("a", "axis", "keepdims"), {"a": _UNREDUCE}, _RED, method="sum",
      positional=2, linear="joint"),
    A(("np.mean",), ("a", "axis", "keepdims"), {"a": _UNREDUCE + " / _count({a}, {out})"}, _RED,
      method="mean", positional=2, linear="joint"),
    A(("np.prod",), ("a", "axis", "keepdims"),
      {"a": _UNREDUCE + " * _prod_others({a}, {axis})"}, _RED, method="prod",
      note="exact where entries are zero", positional=2, jvp={"a": _PROD_JVP}),
    A(("np.max", "np.amax"), ("a", "axis", "keepdims"),
      {"a": "_extreme_share({g}, {a}, {out}, {axis}, {keepdims})"}, _RED, method="max",
      note="ties share the gradient equally", positional=2, jvp={"a": _tied_tangent("max")}),
    A(("np.min", "np.amin"), ("a", "axis", "keepdims"),
      {"a": "_extreme_share({g}, {a}, {out}, {axis}, {keepdims})"}, _RED, method="min",
      note="ties share the gradient equally", positional=2, jvp={"a": _tied_tangent("min")}),
    A(("np.var",), ("a", "axis", "ddof", "keepdims"),
      {"a": "_var_grad({g}, {a}, {out}, {axis}, {ddof}, {keepdims})"},
      {"axis": "None", "ddof": "0", "keepdims": "False"}, method="var", positional=2,
      jvp={"a": _VAR_JVP}),
    A(("np.std",), ("a", "axis", "ddof", "keepdims"),
      {"a": "_std_grad({g}, {a}, {out}, {axis}, {ddof}, {keepdims})"},
      {"axis": "None", "ddof": "0", "keepdims": "False"}, method="std", positional=2,
      note="0 where the entries are equal (one entry, or equal by construction)",
      jvp={"a": _STD_JVP}),
    A(("np.cumsum",), ("a", "axis"), {"a": "_cumsum_grad({g}, {a}, {axis})"},
      {"axis": "None"}, method="cumsum", positional=2,
      note="the adjoint is the reversed cumulative sum", linear="joint"),
    A(("np.diff",), ("a", "n", "axis"), {"a": "_diff_grad({g}, {a}, {n}, {axis})"},
      {"n": "1", "axis": "-1"}, positional=3, note="prepend= and append= refused", linear="joint"),
    A(("np.cumprod",), ("a", "axis"), {"a": "_cumprod_grad({g}, {a}, {axis})"},
      {"axis": "None"}, method="cumprod", positional=2, note="exact where entries are zero",
      jvp={"a": _CUMPROD_JVP}),
    A(("np.nansum",), ("a", "axis", "keepdims"),
      {"a": "{np}.where({np}.isnan({a}), 0.0, " + _UNREDUCE + ")"}, _RED, positional=2,
      note="NaN entries get no gradient", jvp={"a": _NANSUM_JVP}),
    A(("np.nanmean",), ("a", "axis", "keepdims"),
      {"a": "_nanmean_grad({g}, {a}, {axis}, {keepdims})"}, _RED, positional=2,
      note="NaN entries get no gradient",
      jvp={"a": _NANMEAN_JVP}),
    A(("np.linalg.norm",), ("x", "ord", "axis", "keepdims"),
      {"x": "_norm_grad({g}, {x}, {out}, {ord}, {axis}, {keepdims})"},
      {"ord": "None", "axis": "None", "keepdims": "False"},
      note="every order NumPy takes; 2, -2 and 'nuc' of matrices refused where not "
      "differentiable (a repeated or zero singular value)", jvp={"x": _NORM_JVP}),
    A(("np.matmul",), ("a", "b"), {"a": "_matmul_grad({g}, {a}, {b}, 0)",
                                   "b": "_matmul_grad({g}, {a}, {b}, 1)"},
      note="also the @ operator; 1-D, 2-D and batched", by_ndim=_MATMUL, linear="multi"),
    A(("np.dot",), ("a", "b"), {"a": "_dot_grad({g}, {a}, {b}, 0)",
                                "b": "_dot_grad({g}, {a}, {b}, 1)"}, method="dot",
      note="scalars, 1-D, 2-D, and more axes as NumPy's (a's last with b's second-to-last)",
      by_ndim=_MATMUL, linear="multi"),
    # (np.inner sums over both last axes: a @ b where b is a vector, else a @ b.T)
    A(("np.inner",), ("a", "b"), {"a": "_inner_grad({g}, {a}, {b}, 0)",
                                  "b": "_inner_grad({g}, {a}, {b}, 1)"},
      by_ndim={(1, 1): _MATMUL[1, 1], (2, 1): _MATMUL[2, 1],
               (1, 2): {"a": "{g} @ {b}", "b": "{np}.multiply.outer({g}, {a})"},
               (2, 2): {"a": "{g} @ {b}", "b": "{g}.T @ {a}"}}, linear="multi"),
    A(("np.outer",), ("a", "b"), {"a": "_outer_grad({g}, {a}, {b}, 0)",
                                  "b": "_outer_grad({g}, {a}, {b}, 1)"},
      by_ndim={(1, 1): {"a": "{g} @ {b}", "b": "{a} @ {g}"}}, linear="multi"),
    A(("np.einsum",), ("subscripts", "operands", "optimize"),
      {"operands": "_einsum_grad({subscripts}, {g}, {operands}, {i})"}, {"optimize": "False"},
      sequence="operands",
      note="subscripts with ellipsis, implicit output, diagonals ('ii->i'); sublist form",
      linear="multi"),
    A(("np.trace",), ("a", "offset", "axis1", "axis2"),
      {"a": "_trace_grad({g}, {a}, {offset}, {axis1}, {axis2})"},
      {"offset": "0", "axis1": "0", "axis2": "1"}, method="trace", positional=4,
      note="offset, axis1, axis2", linear="joint"),
    A(("np.diagonal",), ("a", "offset", "axis1", "axis2"),
      {"a": "_diagonal_grad({g}, {a}, {offset}, {axis1}, {axis2})"},
      {"offset": "0", "axis1": "0", "axis2": "1"}, method="diagonal", positional=4, linear="joint"),
    A(("np.diag",), ("v", "k"), {"v": "_diag_grad({g}, {v}, {k})"}, {"k": "0"},
      note="a vector makes a matrix; a matrix gives its diagonal", linear="joint"),
    A(("np.triu",), ("m", "k"), {"m": "_unbroadcast({np}.triu({g}, {k}), {m})"}, {"k": "0"},
      linear="joint"),
    A(("np.tril",), ("m", "k"), {"m": "_unbroadcast({np}.tril({g}, {k}), {m})"}, {"k": "0"},
      linear="joint"),
    A(("np.cross",), ("a", "b", "axisa", "axisb", "axisc", "axis"),
      {"a": "_cross_grad({g}, {a}, {b}, 0, {axisa}, {axisb}, {axisc}, {axis})",
       "b": "_cross_grad({g}, {a}, {b}, 1, {axisa}, {axisb}, {axisc}, {axis})"},
      {"axisa": "-1", "axisb": "-1", "axisc": "-1", "axis": "None"},
      note="vectors of 3 or 2 components (as NumPy: 2 with 2 gives the z component)",
      linear="multi"),
    A(("np.kron",), ("a", "b"), {"a": "_kron_grad({g}, {a}, {b}, 0)",
                                 "b": "_kron_grad({g}, {a}, {b}, 1)"}, linear="multi"),
    A(("np.tensordot",), ("a", "b", "axes"),
      {"a": "_tensordot_grad({g}, {a}, {b}, {axes}, 0)",
       "b": "_tensordot_grad({g}, {a}, {b}, {axes}, 1)"}, {"axes": "2"},
      note="axes an int or a pair of sequences", linear="multi"),
    A(("np.transpose",), ("a", "axes"),
      {"a": "_transpose_grad({g}, {axes})"},
      {"axes": "None"}, method="transpose", note="also .T", linear="joint"),
    A(("np.reshape",), ("a", "shape"), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      method="reshape", linear="joint"),
    A(("np.ravel",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"}, method="ravel",
      linear="joint"),
    A(("np.squeeze",), ("a", "axis"), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      {"axis": "None"}, method="squeeze", linear="joint"),
    A(("np.expand_dims",), ("a", "axis"), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      linear="joint"),
    A(("np.broadcast_to",), ("array", "shape"), {"array": "_unbroadcast({g}, {array})"},
      linear="joint"),
    A(("np.tile",), ("A", "reps"), {"A": "_untile({g}, {A}, {reps})"}, linear="joint"),
    A(("np.flip",), ("m", "axis"), {"m": "{np}.flip({g}, {axis})"}, {"axis": "None"},
      linear="joint"),
    A(("np.moveaxis",), ("a", "source", "destination"),
      {"a": "{np}.moveaxis({g}, {destination}, {source})"}, linear="joint"),
    A(("np.swapaxes",), ("a", "axis1", "axis2"), {"a": "{np}.swapaxes({g}, {axis1}, {axis2})"},
      method="swapaxes", linear="joint"),
    A(("np.rollaxis",), ("a", "axis", "start"), {"a": "_unrollaxis({g}, {a}, {axis}, {start})"},
      {"start": "0"}, linear="joint"),
    A(("np.atleast_1d",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      note="one array argument", linear="joint"),
    A(("np.atleast_2d",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      note="one array argument", linear="joint"),
    A(("np.atleast_3d",), ("a",), {"a": "{np}.reshape({g}, {np}.shape({a}))"},
      note="one array argument", linear="joint"),
    A(("np.flipud",), ("m",), {"m": "{np}.flipud({g})"}, linear="joint"),
    A(("np.fliplr",), ("m",), {"m": "{np}.fliplr({g})"}, linear="joint"),
    A(("np.roll",), ("a", "shift", "axis"), {"a": "{np}.roll({g}, {np}.negative({shift}), {axis})"},
      {"axis": "None"}, linear="joint"),
    A(("np.repeat",), ("a", "repeats", "axis"),
      {"a": "_unrepeat({g}, {a}, {repeats}, {axis})", "repeats": ""}, {"axis": "None"},
      method="repeat", note="the gradient of an entry is the sum over its copies", linear="joint"),
    A(("np.concatenate",), ("arrays", "axis"),
      {"arrays": "_part({g}, {arrays}, {i}, {axis}, 'concatenate')"}, {"axis": "0"},
      sequence="arrays", linear="joint"),
    A(("np.stack",), ("arrays", "axis"),
      {"arrays": "_part({g}, {arrays}, {i}, {axis}, 'stack')"}, {"axis": "0"},
      sequence="arrays", linear="joint"),
    A(("np.hstack",), ("tup",), {"tup": "_part({g}, {tup}, {i}, None, 'hstack')"},
      sequence="tup", linear="joint"),
    A(("np.vstack", "np.row_stack"), ("tup",), {"tup": "_part({g}, {tup}, {i}, None, 'vstack')"},
      sequence="tup", linear="joint"),
    # Constructors whose entries are numbers from the arguments (NO_GRADIENT has the rest).
    A(("np.full",), ("shape", "fill_value", "dtype"),
      {"shape": "", "fill_value": "_fill_grad({g}, {fill_value}, {dtype})"},
      {"dtype": "None"}, positional=3, note="the gradient of fill_value is the sum",
      linear="joint"),
    A(("np.full_like",), ("a", "fill_value", "dtype"),
      {"a": "", "fill_value": "_fill_grad({g}, {fill_value}, {dtype}, {a})"},
      {"dtype": "None"}, positional=3, note="a's values carry no gradient", linear="joint"),
    A(("np.arange",), ("start", "stop", "step", "dtype"),
      {"start": "_arange_grad({g}, {out}, {stop}, {dtype}, 0)", "stop": "",
       "step": "_arange_grad({g}, {out}, {stop}, {dtype}, 2)"},
      {"stop": "None", "step": "None", "dtype": "None"}, positional=3,
      note="entries start + k*step; their count (from stop) carries no gradient", jvp=_ARANGE_JVP),
    A(("np.linspace",), ("start", "stop", "num", "endpoint", "dtype", "axis"),
      {"start": "_linspace_grad({g}, {start}, {stop}, {num}, {endpoint}, {dtype}, {axis}, 0)",
       "stop": "_linspace_grad({g}, {start}, {stop}, {num}, {endpoint}, {dtype}, {axis}, 1)",
       "num": ""},
      {"num": "50", "endpoint": "True", "dtype": "None", "axis": "0"}, positional=4,
      note="linear in start and stop; retstep= refused", linear="joint"),
    A(("np.where",), ("condition", "x", "y"),
      {"x": "_unbroadcast({np}.where({condition}, {g}, 0.0), {x})",
       "y": "_unbroadcast({np}.where({condition}, 0.0, {g}), {y})"},
      note="the gradient flows to the branch chosen", linear="joint"),
)

# Linear algebra, one result each (issue 13): np.linalg inv, solve, det, pinv, cholesky,
# matrix_power, multi_dot; scipy.linalg solve_triangular, solve, inv, det, cholesky. Stacks
# of matrices (the last two axes) as NumPy takes them; the helpers are runtime's.
_SOLVED = "b a vector where it has one axis (NumPy 2's rule), else a stack of matrices"
_ONE_TRIANGLE = ("reads one triangle of a symmetric a: the gradient is the symmetric one "
                 "(as JAX's and autograd's)")
ARRAY_OPS += (
    A(("np.linalg.inv",), ("a",), {"a": "_inv_grad({g}, {out})"},
      jvp={"a": "-({out} @ {t} @ {out})"}),
    A(("np.linalg.solve",), ("a", "b"), {"a": "_solve_grad({g}, {a}, {b}, {out}, 0)",
                                         "b": "_solve_grad({g}, {a}, {b}, {out}, 1)"},
      note=_SOLVED, jvp=_SOLVE_JVP),
    A(("np.linalg.det",), ("a",), {"a": "_det_grad({g}, {a}, {out})"},
      note="exact also at a singular matrix", jvp=_DET_JVP),
    A(("np.linalg.pinv",), ("a", "rcond", "rtol"), {"a": "_pinv_grad({g}, {a}, {out})"},
      {"rcond": "None", "rtol": "None"}, positional=2,
      note="where a's rank is constant (full rank, tall or wide); hermitian= refused",
      jvp={"a": _PINV_JVP}),
    A(("np.linalg.cholesky",), ("a", "upper"), {"a": "_cholesky_grad({g}, {out}, {upper})"},
      {"upper": "False"}, positional=1, note=_ONE_TRIANGLE, jvp={"a": _CHOLESKY_JVP}),
    A(("np.linalg.matrix_power",), ("a", "n"), {"a": "_matrix_power_grad({g}, {a}, {n})"},
      note="n an integer; n < 0 through inv", jvp={"a": _MATRIX_POWER_JVP}),
    A(("np.linalg.multi_dot",), ("arrays",), {"arrays": "_multi_dot_grad({g}, {arrays}, {i})"},
      sequence="arrays", linear="multi"),
    A(("scipy.linalg.solve_triangular",),
      ("a", "b", "trans", "lower", "unit_diagonal", "overwrite_b", "check_finite"),
      {"a": "_solve_triangular_grad({g}, {a}, {b}, {out}, {trans}, {lower}, "
            "{unit_diagonal}, 0)",
       "b": "_solve_triangular_grad({g}, {a}, {b}, {out}, {trans}, {lower}, "
            "{unit_diagonal}, 1)"},
      {"trans": "0", "lower": "False", "unit_diagonal": "False", "overwrite_b": "False",
       "check_finite": "True"},
      note="the gradient of a is on the triangle read (off the diagonal if unit_diagonal)",
      jvp=_SOLVE_TRIANGULAR_JVP),
    A(("scipy.linalg.solve",),
      ("a", "b", "lower", "overwrite_a", "overwrite_b", "check_finite", "assume_a",
       "transposed"),
      {"a": "_scipy_solve_grad({g}, {a}, {b}, {out}, {lower}, {assume_a}, {transposed}, 0)",
       "b": "_scipy_solve_grad({g}, {a}, {b}, {out}, {lower}, {assume_a}, {transposed}, 1)"},
      {"lower": "False", "overwrite_a": "False", "overwrite_b": "False",
       "check_finite": "True", "assume_a": "None", "transposed": "False"},
      note="assume_a: general, 'sym', 'pos' and 'her' (" + _ONE_TRIANGLE.split(": ")[1]
      + "), triangular, 'diagonal', 'tridiagonal'; 'banded' refused", jvp=_SCIPY_SOLVE_JVP),
    A(("scipy.linalg.inv",), ("a", "overwrite_a", "check_finite", "assume_a", "lower"),
      {"a": "_scipy_inv_grad({g}, {a}, {out}, {assume_a}, {lower})"},
      {"overwrite_a": "False", "check_finite": "True", "assume_a": "None", "lower": "False"},
      positional=3, jvp=_SCIPY_INV_JVP),
    A(("scipy.linalg.det",), ("a", "overwrite_a", "check_finite"),
      {"a": "_det_grad({g}, {a}, {out})"}, {"overwrite_a": "False", "check_finite": "True"},
      note="exact also at a singular matrix", jvp=_DET_JVP),
    A(("scipy.linalg.cholesky",), ("a", "lower", "overwrite_a", "check_finite"),
      {"a": "_scipy_cholesky_grad({g}, {out}, {lower})"},
      {"lower": "False", "overwrite_a": "False", "check_finite": "True"},
      note="upper by default, as SciPy's; " + _ONE_TRIANGLE, jvp={"a": _SCIPY_CHOLESKY_JVP}),
)

# --- scipy.signal.convolve and correlate: the adjoints are correlations of the adjoint,
# spread to the full output, with the other operand ---
ARRAY_OPS += tuple(
    A((f"scipy.signal.{how}",), ("in1", "in2", "mode", "method"),
      {p: f"_convolve_grad({{g}}, {{in1}}, {{in2}}, {{mode}}, {i}, '{how}')"
       for i, p in enumerate(("in1", "in2"))}, {"mode": "'full'", "method": "'auto'"},
       linear="multi",
      note="n-d, modes 'full', 'same', 'valid'; method= does not change the gradient")
    for how in ("convolve", "correlate"))


# NumPy rules of issue 13: np.gradient, take, take_along_axis, pad, sort, partition,
# average, column_stack, dstack, append, rot90, select, nan_to_num.
ARRAY_OPS += (
    A(("np.gradient",), ("f", "spacing", "axis", "edge_order"),
      {"f": "_gradient_grad({g}, {f}, {out}, {spacing}, {axis}, {edge_order})",
       "spacing": "_gradient_spacing_grad({g}, {out}, {spacing})"},
      {"spacing": "1.0", "axis": "None", "edge_order": "1"}, positional=2,
      note="a uniform spacing (one number); edge_order 1 or 2; axis=",
      jvp={"f": "{np}.gradient({t}, {spacing}, axis={axis}, edge_order={edge_order})",
           "spacing": "-{out} * {t} / ({spacing})"}),
    A(("np.take",), ("a", "indices", "axis", "mode"),
      {"a": "_take_grad({g}, {a}, {indices}, {axis}, {mode})", "indices": ""},
      {"axis": "None", "mode": "'raise'"}, method="take",
      note="repeated indices accumulate; mode 'raise', 'wrap', 'clip'", linear="joint"),
    A(("np.take_along_axis",), ("arr", "indices", "axis"),
      {"arr": "_take_along_axis_grad({g}, {arr}, {indices}, {axis})", "indices": ""},
      {"axis": "-1"}, linear="joint"),
    A(("np.pad",), ("array", "pad_width", "mode", "constant_values"),
      {"array": "_pad_grad({g}, {array}, {pad_width}, {mode})",
       "constant_values": "_pad_constant_grad({g}, {array}, {pad_width}, {constant_values})"},
      {"mode": "'constant'", "constant_values": "0"},
      note="modes constant, edge, reflect, symmetric, wrap; pad widths in every form",
      linear="joint"),
    A(("np.sort",), ("a", "axis", "kind"), {"a": "_sort_grad({g}, {a}, {axis})"},
      {"axis": "-1", "kind": "None"}, positional=3,
      note="ties: the order NumPy's stable sort gives them, whatever the kind",
      jvp={"a": "{np}.take_along_axis({t}, {np}.argsort({a}, axis={axis}, kind='stable'), "
                "axis={axis})"}),
    A(("np.partition",), ("a", "kth", "axis"),
      {"a": "_partition_grad({g}, {a}, {out}, {kth}, {axis})", "kth": ""}, {"axis": "-1"},
      positional=3, jvp={"a": _PARTITION_JVP}),
    A(("np.average",), ("a", "axis", "weights", "keepdims"),
      {"a": "_average_grad({g}, {a}, {out}, {axis}, {weights}, {keepdims}, 0)",
       "weights": "_average_grad({g}, {a}, {out}, {axis}, {weights}, {keepdims}, 1)"},
      {"axis": "None", "weights": "None", "keepdims": "False"}, positional=3,
      note="weights differentiated too; returned= refused",
      jvp=_AVERAGE_JVP),
    A(("np.column_stack",), ("tup",), {"tup": "_joined_part({g}, {tup}, {i}, 'column')"},
      sequence="tup", linear="joint"),
    A(("np.dstack",), ("tup",), {"tup": "_joined_part({g}, {tup}, {i}, 'depth')"},
      sequence="tup", linear="joint"),
    A(("np.append",), ("arr", "values", "axis"),
      {"arr": "_append_grad({g}, {arr}, {values}, {axis}, 0)",
       "values": "_append_grad({g}, {arr}, {values}, {axis}, 1)"}, {"axis": "None"},
       linear="joint"),
    A(("np.rot90",), ("m", "k", "axes"), {"m": "{np}.rot90({g}, -({k}), {axes})"},
      {"k": "1", "axes": "(0, 1)"}, linear="joint"),
    A(("np.select",), ("condlist", "choicelist", "default"),
      {"choicelist": "_select_grad({g}, {condlist}, {choicelist}, {i})",
       "default": "_select_grad({g}, {condlist}, {choicelist}, None, {default})"},
      {"default": "0"}, sequence="choicelist",
      note="the gradient flows to the choice taken (the first condition that holds)",
      linear="joint"),
    A(("np.nan_to_num",), ("x", "nan", "posinf", "neginf"),
      {"x": "{np}.where({np}.isfinite({x}), {g}, 0.0)",
       "nan": "_replaced_grad({g}, {x}, 'nan', {nan})",
       "posinf": "_replaced_grad({g}, {x}, 'posinf', {posinf})",
       "neginf": "_replaced_grad({g}, {x}, 'neginf', {neginf})"},
      {"nan": "0.0", "posinf": "None", "neginf": "None"}, positional=1,
      note="1 where finite, 0 where replaced; copy= refused",
      jvp={"x": "{np}.where({np}.isfinite({x}), {t}, 0.0)",
           "nan": "{np}.where({np}.isnan({x}), {t}, 0.0)",
           "posinf": "{np}.where({x} == {np}.inf, {t}, 0.0)",
           "neginf": "{np}.where({x} == -{np}.inf, {t}, 0.0)"}),
)

# Functions that return several values (np.linalg.eigh's w, v; np.split's parts): the call
# runs once, without gradient, and each output used reads its part, with a rule of its own.


def _several(names, params, outputs, defaults=None, **more) -> ArrayOp:
    """The row of a function returning several values; its ``vjp`` (which parameters are
    operands) is the first template each parameter has among the outputs'."""
    vjp: dict[str, str] = {}
    for _, templates in outputs:
        for p, t in templates.items():
            vjp.setdefault(p, t)
    return A(names, params, vjp, defaults or {}, outputs=outputs, **more)


_NOT_DIFFERENTIATED = "_no_gradient({g}, 'np.linalg.lstsq', '%s', 'its solution x alone')"
_SPLIT = "_split_grad({g}, {ary}, {factors}, {part}, %s)"
ARRAY_OPS += (
    _several(("np.linalg.slogdet",), ("a",),
             (("sign", {}), ("logabsdet", {"a": "_slogdet_grad({g}, {a})"})),
             note="sign, logabsdet = ...: the sign has no gradient; stacks of matrices",
             output_jvps=({}, {"a": _TRACE_SOLVE})),
    _several(("np.linalg.eigh",), ("a", "UPLO"),
             (("eigenvalues", {"a": "_eigh_grad({g}, {factors}, {UPLO}, 0)"}),
              ("eigenvectors", {"a": "_eigh_grad({g}, {factors}, {UPLO}, 1)"})),
             {"UPLO": "'L'"}, note="w, v = ...: symmetric a, read from one triangle as "
             "NumPy reads it; the eigenvectors where the eigenvalues are distinct; stacks",
             output_jvps=_EIGH_JVPS),
    A(("np.linalg.eigvalsh",), ("a", "UPLO"), {"a": "_eigvalsh_grad({g}, {a}, {UPLO})"},
      {"UPLO": "'L'"}, note="read from one triangle, as NumPy reads it; stacks",
      jvp=_EIGVALSH_JVP),
    _several(("np.linalg.svd",), ("a", "full_matrices", "compute_uv", "hermitian"),
             (("u", {"a": "_svd_grad({g}, {factors}, 0)"}),
              ("s", {"a": "_svd_grad({g}, {factors}, 1)"}),
              ("vh", {"a": "_svd_grad({g}, {factors}, 2)"})),
             {"full_matrices": "True", "compute_uv": "True", "hermitian": "False"},
             alone=("compute_uv", "False", {"a": "_svdvals_grad({g}, {a})"}),
             note="u, s, vh = ...: u and vh where the singular values are distinct and not "
             "zero (full_matrices=False, or a square a); compute_uv=False: s; stacks",
             output_jvps=_SVD_JVPS, alone_jvp=_SVDVALS_JVP),
    _several(("np.linalg.qr",), ("a", "mode"),
             (("q", {"a": "_qr_grad({g}, {factors}, 0)"}),
              ("r", {"a": "_qr_grad({g}, {factors}, 1)"})), {"mode": "'reduced'"},
             note="q, r = ...: a with at least as many rows as columns, mode 'reduced'; stacks",
             output_jvps=_QR_JVPS),
    _several(("np.linalg.lstsq",), ("a", "b", "rcond"),
             (("x", {"a": "_lstsq_grad({g}, {a}, {b}, {factors}, 0)",
                     "b": "_lstsq_grad({g}, {a}, {b}, {factors}, 1)"}),
              ("residuals", {"a": _NOT_DIFFERENTIATED % "residuals",
                             "b": _NOT_DIFFERENTIATED % "residuals"}),
              ("rank", {}),
              ("s", {"a": _NOT_DIFFERENTIATED % "singular values"})), {"rcond": "None"},
             note="x, residuals, rank, s = ...: x, for a of full column rank; the rank has "
             "no gradient; residuals and s are refused", output_jvps=_LSTSQ_JVPS),
    _several(("np.split",), ("ary", "indices_or_sections", "axis"),
             (("*", {"ary": _SPLIT % "{axis}"}),), {"axis": "0"},
             note="a list of parts: sections a number or a list of indices written in the "
             "code", linear="joint"),
    _several(("np.array_split",), ("ary", "indices_or_sections", "axis"),
             (("*", {"ary": _SPLIT % "{axis}"}),), {"axis": "0"},
             note="as np.split", linear="joint"),
    _several(("np.hsplit",), ("ary", "indices_or_sections"), (("*", {"ary": _SPLIT % "'h'"}),),
             note="as np.split", linear="joint"),
    _several(("np.vsplit",), ("ary", "indices_or_sections"), (("*", {"ary": _SPLIT % "'v'"}),),
             note="as np.split", linear="joint"),
    _several(("np.dsplit",), ("ary", "indices_or_sections"), (("*", {"ary": _SPLIT % "'d'"}),),
             note="as np.split", linear="joint"),
)

# scipy.linalg's Cholesky pair: cho_solve((c, lower), b) takes the pair as its parameters
# c and lower (the c of cho_factor, or a triangular factor such as np.linalg.cholesky's).
_CHO_SOLVE = "_cho_solve_grad({g}, {c}, {lower}, {b}, {out}, %d)"
ARRAY_OPS += (
    _several(("scipy.linalg.cho_factor",), ("a", "lower"),
             (("c", {"a": "_cho_factor_grad({g}, {factors})"}), ("lower", {})),
             {"lower": "False"}, positional=2,
             note="c, lower = ...: symmetric positive definite a, read from one triangle; "
             "c outside the factor's triangle has no gradient",
             output_jvps=({"a": _CHO_FACTOR_JVP}, {})),
    A(("scipy.linalg.cho_solve",), ("c", "lower", "b"),
      {"c": _CHO_SOLVE % 0, "b": _CHO_SOLVE % 1},
      note="cho_solve((c, lower), b): c from cho_factor or a triangular factor",
      jvp=_CHO_SOLVE_JVP),
)

# --- scipy.special (issue 13): expit, logit, erf..., gamma..., Bessel, xlogy, softmax ---
#
# Each SciPy function's image prints as SciPy's own call, scipy.special.<name>(...): the
# generated code reads the name scipy only where a derivative needs one (compile binds it
# then), so a gradient of code without SciPy never imports it.


class _SciPy(_NumpyFunction):
    """A function of scipy.special, printed as ``scipy.special.<special>(...)``."""

    special = ""

    def numpy(self):
        return call("scipy.special." + self.special)(*self.args)


class Expit(_SciPy):
    """The logistic sigmoid; its slope expit(x)*expit(-x) keeps its relative precision in
    both tails (s*(1 - s) is 0 beyond x = 37, where the slope is 1e-16 and more)."""

    nargs, special = 1, "expit"

    def fdiff(self, argindex=1):
        return self * Expit(-self.args[0])


class Logit(_SciPy):
    """log(p / (1 - p)), the inverse of expit."""

    nargs, special = 1, "logit"

    def fdiff(self, argindex=1):
        p = self.args[0]
        return 1 / (p * (1 - p))


class Erfcx(_SciPy):
    """exp(x**2)*erfc(x), finite where exp(x**2) alone overflows: the factor that makes the
    slopes of log_ndtr and erfcinv stable."""

    nargs, special = 1, "erfcx"

    def fdiff(self, argindex=1):
        x = self.args[0]
        return 2 * x * self - 2 / sp.sqrt(sp.pi)


class Erfinv(_SciPy):
    """The inverse of erf; slope sqrt(pi)/2*exp(y**2) at y = erfinv(x) (finite: |y| < 6
    for every float x inside (-1, 1))."""

    nargs, special = 1, "erfinv"

    def fdiff(self, argindex=1):
        return sp.sqrt(sp.pi) / 2 * sp.exp(self**2)


class Erfcinv(_SciPy):
    """The inverse of erfc; slope -sqrt(pi)/2*exp(y**2), written -sqrt(pi)/2*erfcx(y)/x
    (x = erfc(y)), which does not overflow near x = 0 as exp(y**2) does."""

    nargs, special = 1, "erfcinv"

    def fdiff(self, argindex=1):
        return -sp.sqrt(sp.pi) / 2 * Erfcx(self) / self.args[0]


class Ndtr(_SciPy):
    """The standard normal CDF."""

    nargs, special = 1, "ndtr"

    def fdiff(self, argindex=1):
        x = self.args[0]
        return sp.exp(-x**2 / 2) / sp.sqrt(2 * sp.pi)


class LogNdtr(_SciPy):
    """log of the normal CDF; slope pdf/cdf written sqrt(2/pi)/erfcx(-x/sqrt(2)): no
    0/0 where the CDF underflows (x = -40), and 0, not NaN, far right."""

    nargs, special = 1, "log_ndtr"

    def fdiff(self, argindex=1):
        return sp.sqrt(2 / sp.pi) / Erfcx(-self.args[0] / sp.sqrt(2))


class Ndtri(_SciPy):
    """The inverse of ndtr; slope sqrt(2 pi)*exp(y**2/2) at y = ndtri(p)."""

    nargs, special = 1, "ndtri"

    def fdiff(self, argindex=1):
        return sp.sqrt(2 * sp.pi) * sp.exp(self**2 / 2)


class Polygamma(_SciPy):
    """polygamma(n, x), the n-th derivative of digamma (n = 0: digamma itself, printed as
    scipy.special.digamma); the order n has no gradient (a static parameter)."""

    nargs = 2

    def numpy(self):
        n, x = self.args
        if n == 0:
            return call("scipy.special.digamma")(x)
        return call("scipy.special.polygamma")(n, x)

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        n, x = self.args
        return Polygamma(n + 1, x)


def _digamma(x):
    return Polygamma(sp.S.Zero, x)


class Gammaln(_SciPy):
    """log|gamma(x)|; slope digamma(x)."""

    nargs, special = 1, "gammaln"

    def fdiff(self, argindex=1):
        return _digamma(self.args[0])


class Gamma(_SciPy):
    """gamma(x); slope gamma(x)*digamma(x)."""

    nargs, special = 1, "gamma"

    def fdiff(self, argindex=1):
        return self * _digamma(self.args[0])


class Rgamma(_SciPy):
    """1/gamma(x), smooth everywhere; its slope is a helper of runtime's that keeps the
    limit at 0, -1, -2, ..., where -digamma(x)/gamma(x) is 0*inf."""

    nargs, special = 1, "rgamma"

    def fdiff(self, argindex=1):
        return call("_rgamma_slope")(self.args[0])


class Gammasgn(_SciPy):
    """The sign of gamma(x): derivative 0."""

    nargs, special = 1, "gammasgn"

    def fdiff(self, argindex=1):
        return sp.S.Zero


class Beta(_SciPy):
    """beta(a, b); d/da = beta(a, b)*(digamma(a) - digamma(a + b))."""

    nargs, special = 2, "beta"

    def fdiff(self, argindex=1):
        a, b = self.args
        return self * (_digamma(self.args[argindex - 1]) - _digamma(a + b))


class Betaln(_SciPy):
    """log|beta(a, b)|; d/da = digamma(a) - digamma(a + b)."""

    nargs, special = 2, "betaln"

    def fdiff(self, argindex=1):
        a, b = self.args
        return _digamma(self.args[argindex - 1]) - _digamma(a + b)


class Multigammaln(_SciPy):
    """The log of the multivariate gamma function of dimension d (a static integer); its
    slope is a sum of digammas, a helper of runtime's."""

    nargs, special = 2, "multigammaln"

    def fdiff(self, argindex=1):
        if argindex != 1:
            raise sp.ArgumentIndexError(self, argindex)
        return call("_multigammaln_slope")(*self.args)


class Xlogy(_SciPy):
    """x*log(y), 0 where x = 0 (as SciPy): d/dy = x/y is 0 there too, also at y = 0."""

    nargs, special = 2, "xlogy"

    def fdiff(self, argindex=1):
        x, y = self.args
        return sp.log(y) if argindex == 1 else Ratio(x, y)


class Xlog1py(_SciPy):
    """x*log1p(y), 0 where x = 0 (as SciPy): d/dy = x/(1 + y) is 0 there too."""

    nargs, special = 2, "xlog1py"

    def fdiff(self, argindex=1):
        x, y = self.args
        return call("np.log1p")(y) if argindex == 1 else Ratio(x, 1 + y)


class Entr(_SciPy):
    """-x*log(x) (0 at 0, -inf below)."""

    nargs, special = 1, "entr"

    def fdiff(self, argindex=1):
        return -sp.log(self.args[0]) - 1


class RelEntr(_SciPy):
    """x*log(x/y) for positive x and y (0 at x = 0): d/dy = -x/y, 0 at x = 0."""

    nargs, special = 2, "rel_entr"

    def fdiff(self, argindex=1):
        x, y = self.args
        return sp.log(x / y) + 1 if argindex == 1 else -Ratio(x, y)


class KlDiv(_SciPy):
    """x*log(x/y) - x + y for positive x and y: d/dy = 1 - x/y."""

    nargs, special = 2, "kl_div"

    def fdiff(self, argindex=1):
        x, y = self.args
        return sp.log(x / y) if argindex == 1 else 1 - Ratio(x, y)


class Gammainc(_SciPy):
    """The regularized lower incomplete gamma function P(a, x); differentiated in x only
    (a is static): x**(a - 1)*exp(-x)/gamma(a), computed as one exp of logs (xlogy: the
    power is 1 at a = 1, x = 0), which neither overflows nor is 0*inf."""

    nargs, special = 2, "gammainc"

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        a, x = self.args
        return sp.exp(Xlogy(a - 1, x) - x - Gammaln(a))


class Gammaincc(_SciPy):
    """1 - gammainc(a, x); differentiated in x only (a is static)."""

    nargs, special = 2, "gammaincc"

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        return -Gammainc(*self.args).fdiff(2)


class Betainc(_SciPy):
    """The regularized incomplete beta function I_x(a, b); differentiated in x only (a and
    b are static): x**(a-1)*(1-x)**(b-1)/beta(a, b), as one exp of logs."""

    nargs, special = 3, "betainc"

    def fdiff(self, argindex=3):
        if argindex != 3:
            raise sp.ArgumentIndexError(self, argindex)
        a, b, x = self.args
        return sp.exp(Xlogy(a - 1, x) + Xlog1py(b - 1, -x) - Betaln(a, b))


# Bessel functions: d/dx I_v = (I_{v-1} + I_{v+1})/2, d/dx J_v = (J_{v-1} - J_{v+1})/2 (Y
# as J); the exponentially scaled ive(v, x) = iv(v, x)*exp(-|x|) adds -sign(x)*ive. These
# forms hold at x = 0, where i1(x)/x, in i1' = i0 - i1/x, is 0/0. The order is static.


class Iv(_SciPy):
    """The modified Bessel function of the first kind of real order v."""

    nargs, special = 2, "iv"

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        v, x = self.args
        return (Iv(v - 1, x) + Iv(v + 1, x)) / 2


class Ive(_SciPy):
    """iv(v, x)*exp(-|x|)."""

    nargs, special = 2, "ive"

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        v, x = self.args
        return (Ive(v - 1, x) + Ive(v + 1, x)) / 2 - Sign(x) * self


class I0(_SciPy):
    """iv(0, x); slope i1(x)."""

    nargs, special = 1, "i0"

    def fdiff(self, argindex=1):
        return I1(self.args[0])


class I1(_SciPy):
    """iv(1, x); slope (i0(x) + iv(2, x))/2."""

    nargs, special = 1, "i1"

    def fdiff(self, argindex=1):
        x = self.args[0]
        return (I0(x) + Iv(2, x)) / 2


class I0e(_SciPy):
    """i0(x)*exp(-|x|); slope i1e(x) - sign(x)*i0e(x)."""

    nargs, special = 1, "i0e"

    def fdiff(self, argindex=1):
        x = self.args[0]
        return I1e(x) - Sign(x) * self


class I1e(_SciPy):
    """i1(x)*exp(-|x|)."""

    nargs, special = 1, "i1e"

    def fdiff(self, argindex=1):
        x = self.args[0]
        return (I0e(x) + Ive(2, x)) / 2 - Sign(x) * self


class Jv(_SciPy):
    """The Bessel function of the first kind of real order v (jn is the same function)."""

    nargs, special = 2, "jv"

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        v, x = self.args
        return (Jv(v - 1, x) - Jv(v + 1, x)) / 2


class Yv(_SciPy):
    """The Bessel function of the second kind of real order v."""

    nargs, special = 2, "yv"

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        v, x = self.args
        return (Yv(v - 1, x) - Yv(v + 1, x)) / 2


class J0(_SciPy):
    """jv(0, x); slope -j1(x)."""

    nargs, special = 1, "j0"

    def fdiff(self, argindex=1):
        return -J1(self.args[0])


class J1(_SciPy):
    """jv(1, x); slope (j0(x) - jv(2, x))/2."""

    nargs, special = 1, "j1"

    def fdiff(self, argindex=1):
        x = self.args[0]
        return (J0(x) - Jv(2, x)) / 2


class Y0(_SciPy):
    """yv(0, x); slope -y1(x)."""

    nargs, special = 1, "y0"

    def fdiff(self, argindex=1):
        return -Y1(self.args[0])


class Y1(_SciPy):
    """yv(1, x); slope (y0(x) - yv(2, x))/2."""

    nargs, special = 1, "y1"

    def fdiff(self, argindex=1):
        x = self.args[0]
        return (Y0(x) - Yv(2, x)) / 2


_S = "scipy.special."
ELEMENTWISE += (
    E((_S + "expit",), ("x",), Expit, note="slope expit(x)*expit(-x): precise in both tails"),
    E((_S + "logit",), ("p",), Logit, (0.05, 0.95)),
    E((_S + "erf",), ("z",), sp.erf),
    E((_S + "erfc",), ("x",), sp.erfc),
    E((_S + "erfcx",), ("x",), Erfcx),
    E((_S + "erfinv",), ("y",), Erfinv, (-0.95, 0.95)),
    E((_S + "erfcinv",), ("y",), Erfcinv, (0.05, 1.95), note="stable near 0 and 2"),
    E((_S + "ndtr",), ("x",), Ndtr),
    E((_S + "log_ndtr",), ("x",), LogNdtr, (-6.0, 6.0), note="stable in both tails"),
    E((_S + "ndtri",), ("y",), Ndtri, (0.05, 0.95)),
    E((_S + "gamma",), ("z",), Gamma, (0.1, 4.0)),
    E((_S + "gammaln",), ("x",), Gammaln, (0.1, 4.0)),
    E((_S + "rgamma",), ("z",), Rgamma, note="smooth also at 0, -1, -2, ..."),
    E((_S + "gammasgn",), ("x",), Gammasgn, (0.1, 4.0), note="derivative 0"),
    E((_S + "digamma", _S + "psi"), ("z",), _digamma, (0.1, 4.0)),
    E((_S + "polygamma",), ("n", "x"), Polygamma, (0.1, 4.0), static=("n",),
      note="the order n has no gradient"),
    E((_S + "multigammaln",), ("a", "d"), Multigammaln, (2.1, 5.0), static=("d",),
      note="the dimension d has no gradient"),
    E((_S + "beta",), ("a", "b"), Beta, (0.1, 4.0)),
    E((_S + "betaln",), ("a", "b"), Betaln, (0.1, 4.0)),
    E((_S + "xlogy",), ("x", "y"), Xlogy, (0.1, 3.0), note="0 at x = 0, and so is d/dy"),
    E((_S + "xlog1py",), ("x", "y"), Xlog1py, (0.1, 3.0), note="0 at x = 0, and so is d/dy"),
    E((_S + "entr",), ("x",), Entr, (0.1, 3.0)),
    E((_S + "rel_entr",), ("x", "y"), RelEntr, (0.1, 3.0)),
    E((_S + "kl_div",), ("x", "y"), KlDiv, (0.1, 3.0)),
    E((_S + "gammainc",), ("a", "x"), Gammainc, (0.1, 4.0), static=("a",),
      note="in x only; a has no gradient"),
    E((_S + "gammaincc",), ("a", "x"), Gammaincc, (0.1, 4.0), static=("a",),
      note="in x only; a has no gradient"),
    E((_S + "betainc",), ("a", "b", "x"), Betainc, (0.1, 0.9), static=("a", "b"),
      note="in x only; a and b have no gradient"),
    E((_S + "iv",), ("v", "x"), Iv, (0.1, 4.0), static=("v",),
      note="in x only; the order v has no gradient"),
    E((_S + "ive",), ("v", "x"), Ive, (0.1, 4.0), static=("v",),
      note="in x only; the order v has no gradient"),
    E((_S + "i0",), ("x",), I0),
    E((_S + "i1",), ("x",), I1),
    E((_S + "i0e",), ("x",), I0e),
    E((_S + "i1e",), ("x",), I1e),
    E((_S + "jv", _S + "jn"), ("v", "z"), Jv, (0.1, 4.0), static=("v",),
      note="in z only; the order v has no gradient"),
    # (yn truncates a float order to an integer, as the image does)
    E((_S + "yn",), ("n", "x"),
      lambda n, x: Yv(n if getattr(n, "is_Integer", False) else Trunc(n), x), (0.1, 4.0),
      static=("n",),
      note="in x only; the order n has no gradient"),
    E((_S + "yv",), ("v", "z"), Yv, (0.1, 4.0), static=("v",),
      note="in z only; the order v has no gradient"),
    E((_S + "j0",), ("x",), J0),
    E((_S + "j1",), ("x",), J1),
    E((_S + "y0",), ("x",), Y0, (0.1, 4.0)),
    E((_S + "y1",), ("x",), Y1, (0.1, 4.0)),
)
ARRAY_OPS += (
    A((_S + "softmax",), ("x", "axis"), {"x": "_softmax_grad({g}, {out}, {axis})"},
      {"axis": "None"}, note="over all entries, or along axis= (an int or a tuple)",
      jvp={"x": "{out} * ({t} - {np}.sum({out} * {t}, axis={axis}, keepdims=True))"}),
    A((_S + "log_softmax",), ("x", "axis"), {"x": "_log_softmax_grad({g}, {out}, {axis})"},
      {"axis": "None"}, note="over all entries, or along axis= (an int or a tuple)",
      jvp={"x": "{t} - {np}.sum({np}.exp({out}) * {t}, axis={axis}, keepdims=True)"}),
)

# (return_sign=True: the values and their signs; the slope of log|sum(b*exp(a))| carries
# the sign)
# --- scipy.stats: norm, t, gamma, beta, chi2 (elementwise); poisson, multivariate_normal,
# dirichlet (array operations). Each density's image is its formula in the standardised
# variable z = (x - loc) / scale, so SymPy differentiates it in x, loc, scale and the shapes;
# the forward code calls SciPy as the user wrote it. The special functions the images need
# are scipy.special's rows above (Gammaln, Ndtr, LogNdtr, Xlogy); the cdfs print as helpers
# of runtime's, which import SciPy when first called.


class _SciPyHelper(_NumpyFunction):
    """A function of SciPy's, printed as the runtime helper ``helper`` (which calls it)."""

    nargs = 0  # (each subclass says how many it takes)
    helper = ""

    def numpy(self):
        return call(self.helper)(*self.args)


def _t_logpdf(df, z):
    return (Gammaln((df + 1) / 2) - Gammaln(df / 2) - sp.log(df * sp.pi) / 2
            - (df + 1) / 2 * sp.log(1 + z**2 / df))


def _gamma_logpdf(a, z):
    return Xlogy(a - 1, z) - z - Gammaln(a)


def _beta_logpdf(a, b, z):
    return (Xlogy(a - 1, z) + Xlogy(b - 1, 1 - z) - Gammaln(a)
            - Gammaln(b) + Gammaln(a + b))


def _within(z, lower, upper, closed=False):
    """``lower < z < upper`` as a tree (``<=`` if ``closed``; an infinite bound is left out)."""
    above, below = (sp.GreaterThan, sp.LessThan) if closed else \
        (sp.StrictGreaterThan, sp.StrictLessThan)
    conditions = [above(z, lower, evaluate=False)]
    if upper != sp.oo:
        conditions.append(below(z, upper, evaluate=False))
    return conditions[0] if len(conditions) == 1 else sp.And(*conditions, evaluate=False)


class StatsInside(_NumpyFunction):
    """``value`` where ``lower < z < upper``, half of it at a bound (where central
    differences see the mean of the slopes on each side), else 0: a density outside its
    support (z itself has derivative 0 here: the jump at a bound is not differentiated)."""

    nargs = 4

    def numpy(self):
        z, lower, upper, value = self.args
        return where(_within(z, lower, upper), value, where(
            _within(z, lower, upper, closed=True), sp.Float(0.5) * value, sp.Float(0.0)))

    def fdiff(self, argindex=1):
        if argindex != 4:
            return sp.S.Zero
        z, lower, upper, _ = self.args
        return StatsInside(z, lower, upper, sp.Float(1.0))


class StatsSafe(_NumpyFunction):
    """z inside [lower, upper], else a point inside: the density's formula is read there
    (and multiplied by 0), so that no NaN of a log outside the support reaches the
    gradient."""

    nargs = 3

    def numpy(self):
        z, lower, upper = self.args
        inner = (lower + upper) / 2 if upper != sp.oo else lower + 1
        return where(_within(z, lower, upper, closed=True), z, sp.Float(inner))

    def fdiff(self, argindex=1):
        z, lower, upper = self.args
        return StatsInside(z, lower, upper, sp.Float(1.0)) if argindex == 1 else sp.S.Zero


def _support(logpdf, lower, upper):
    """The density exp(logpdf(..., z)): 0 outside (lower, upper), with no NaN there."""
    def pdf(*args):
        *shape, z = args
        return StatsInside(z, lower, upper, sp.exp(logpdf(*shape, StatsSafe(z, lower, upper))))
    return pdf


def _cdf_class(name, helper, logpdf, support, log=False, upper=False):
    """A standardised cdf (the survival function if ``upper``; or its log) of shape
    parameters and z, printed as ``helper``: its slope in z is the density (over the cdf,
    for the log; negated for the upper tail); in a shape, no closed form (refused where the
    call is read, see Elementwise.refused)."""

    def fdiff(self, argindex=1):
        *shape, z = self.args
        if argindex != len(self.args):
            raise SymdiffError(f"{name} has no closed-form derivative in its shape parameters")
        lower, top = support
        if support == (-sp.oo, sp.oo):  # (Student's t: everywhere)
            density = logpdf(*shape, z)
            slope = sp.exp(density - self) if log else sp.exp(density)
        else:
            density = logpdf(*shape, StatsSafe(z, lower, top))
            slope = StatsInside(z, lower, top,
                                sp.exp(density - self) if log else sp.exp(density))
        return -slope if upper else slope

    return type(name, (_SciPyHelper,), {
        "__doc__": f"{helper[7:]} of (shapes..., z), by SciPy.", "nargs": len(
            logpdf.__code__.co_varnames[:logpdf.__code__.co_argcount]),
        "helper": helper, "fdiff": fdiff})


StatsStdtr = _cdf_class("StatsStdtr", "_stats_stdtr", _t_logpdf, (-sp.oo, sp.oo))
StatsLogStdtr = _cdf_class("StatsLogStdtr", "_stats_log_stdtr", _t_logpdf, (-sp.oo, sp.oo),
                           True)
StatsGammainc = _cdf_class("StatsGammainc", "_stats_gammainc", _gamma_logpdf, (0, sp.oo))
StatsLogGammainc = _cdf_class("StatsLogGammainc", "_stats_log_gammainc", _gamma_logpdf,
                              (0, sp.oo), True)
StatsGammaincc = _cdf_class("StatsGammaincc", "_stats_gammaincc", _gamma_logpdf, (0, sp.oo),
                            upper=True)
StatsLogGammaincc = _cdf_class("StatsLogGammaincc", "_stats_log_gammaincc", _gamma_logpdf,
                               (0, sp.oo), True, True)
StatsBetainc = _cdf_class("StatsBetainc", "_stats_betainc", _beta_logpdf, (0, 1))
StatsLogBetainc = _cdf_class("StatsLogBetainc", "_stats_log_betainc", _beta_logpdf, (0, 1),
                             True)


def _density_rows(dist, shapes, std, domain, refused=()):
    """The rows of scipy.stats.<dist>'s logpdf, pdf, cdf, logcdf, sf, logsf: ``std`` maps
    each method to its image in (shapes..., z); the image in x adds loc and scale."""
    params = ("x", *shapes, "loc", "scale")

    def image(method):
        def at(*args, **named):
            values = {**dict(zip(params, args, strict=False)), **named}
            scale = values.get("scale", sp.S.One)
            z = (values["x"] - values.get("loc", sp.S.Zero)) / scale
            value = std[method](*(values[p] for p in shapes), z)
            return value - sp.log(scale) if method == "logpdf" else \
                value / scale if method == "pdf" else value
        return at

    def tail(method):  # (a cdf or survival function, refused in the shapes)
        return "cdf" in method or "sf" in method

    return tuple(
        E((f"scipy.stats.{dist}.{method}",), params, image(method), domain, optional=2,
          note=f"in x, {', '.join(shapes) + ', ' if shapes else ''}loc and scale" +
          (f"; in {' and '.join(refused)} refused (no closed form)"
           if refused and tail(method) else ""),
          refused=refused if tail(method) else ())
        for method in std)


ELEMENTWISE += _density_rows("norm", (), {
    "logpdf": lambda z: -z**2 / 2 - sp.log(2 * sp.pi) / 2,
    "pdf": lambda z: sp.exp(-z**2 / 2) / sp.sqrt(2 * sp.pi),
    "cdf": Ndtr, "logcdf": LogNdtr,
    "sf": lambda z: Ndtr(-z), "logsf": lambda z: LogNdtr(-z)}, (-2.0, 2.0))
ELEMENTWISE += _density_rows("t", ("df",), {
    "logpdf": _t_logpdf, "pdf": lambda df, z: sp.exp(_t_logpdf(df, z)),
    "cdf": StatsStdtr, "logcdf": StatsLogStdtr,
    "sf": lambda df, z: StatsStdtr(df, -z), "logsf": lambda df, z: StatsLogStdtr(df, -z)},
    (0.3, 3.0), refused=("df",))
ELEMENTWISE += _density_rows("gamma", ("a",), {
    "logpdf": _gamma_logpdf,
    "pdf": _support(_gamma_logpdf, 0, sp.oo),
    "cdf": StatsGammainc, "logcdf": StatsLogGammainc,
    "sf": StatsGammaincc, "logsf": StatsLogGammaincc},
    (0.3, 3.0), refused=("a",))
ELEMENTWISE += _density_rows("chi2", ("df",), {
    "logpdf": lambda df, z: _gamma_logpdf(df / 2, z / 2) - sp.log(2),
    "pdf": lambda df, z: _support(_gamma_logpdf, 0, sp.oo)(df / 2, z / 2) / 2,
    "cdf": lambda df, z: StatsGammainc(df / 2, z / 2),
    "logcdf": lambda df, z: StatsLogGammainc(df / 2, z / 2),
    "sf": lambda df, z: StatsGammaincc(df / 2, z / 2),
    "logsf": lambda df, z: StatsLogGammaincc(df / 2, z / 2)},
    (0.3, 3.0), refused=("df",))
ELEMENTWISE += _density_rows("beta", ("a", "b"), {
    "logpdf": _beta_logpdf,
    "pdf": _support(_beta_logpdf, 0, 1),
    "cdf": StatsBetainc, "logcdf": StatsLogBetainc,
    # (1 - I_z(a, b) is I_{1-z}(b, a): no cancellation in the upper tail)
    "sf": lambda a, b, z: StatsBetainc(b, a, 1 - z),
    "logsf": lambda a, b, z: StatsLogBetainc(b, a, 1 - z)},
    (0.1, 0.9), refused=("a", "b"))


# poisson's count k (and loc, which shifts it) has no derivative: refused where it depends
# on the differentiated inputs. multivariate_normal and dirichlet reduce over the last
# (first, for dirichlet) axis: array operations whose rules are helpers of runtime's.
ARRAY_OPS += tuple(
    A((f"scipy.stats.poisson.{method}",), ("k", "mu", "loc"),
      {"mu": f"_poisson_grad({{g}}, {{out}}, {{k}}, {{mu}}, {{loc}}, '{method}')"}, {"loc": "0"},
      jvp={"mu": _POISSON_JVP[method]},
      note="in mu; k and loc (integer counts) must not depend on the differentiated inputs")
    for method in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"))
ARRAY_OPS += tuple(
    A((f"scipy.stats.multivariate_normal.{method}",), ("x", "mean", "cov"),
      {p: f"_mvn_grad({{g}}, {{out}}, {{x}}, {{mean}}, {{cov}}, {i}, '{method}')"
       for i, p in enumerate(("x", "mean", "cov"))}, {"mean": "None", "cov": "1"},
      note="cov symmetric positive definite (its gradient symmetric, as JAX's); "
      "allow_singular= refused",
      jvp=_density_jvp(_MVN_LOG_JVP, method, "{np}.ndim({cov}) == 2"))
    for method in ("logpdf", "pdf"))
ARRAY_OPS += tuple(
    A((f"scipy.stats.dirichlet.{method}",), ("x", "alpha"),
      {p: f"_dirichlet_grad({{g}}, {{out}}, {{x}}, {{alpha}}, {i}, '{method}')"
       for i, p in enumerate(("x", "alpha"))},
      note="in x (entries along the first axis) and alpha",
      jvp=_density_jvp(_DIRICHLET_LOG_JVP, method))
    for method in ("logpdf", "pdf"))

_LSE = "_logsumexp_grad({g}, {a}, {b}, {out}, {axis}, {keepdims}, %d%s)"
A_LSE = _several(("scipy.special.logsumexp",), ("a", "axis", "b", "keepdims", "return_sign"),
                 (("res", {"a": _LSE % (0, ", {factors}"), "b": _LSE % (1, ", {factors}")}),
                  ("sgn", {})),
                 {"axis": "None", "b": "None", "keepdims": "False", "return_sign": "False"},
                 alone=("return_sign", "False", {"a": _LSE % (0, ""), "b": _LSE % (1, "")}),
                 positional=3, note="where SciPy is installed; weights b= too; r, sign = "
                 "...(return_sign=True)", output_jvps=(_LSE_JVP, {}), alone_jvp=_LSE_JVP)

# In-place writes (issue 13): a copy of a value, to write into.
ARRAY_OPS += (
    A(("np.copy",), ("a",), {"a": "_unbroadcast({g}, {a})"}, method="copy",
      note="a new array with the values of a", linear="joint"),
)

# Building arrays from values (issue 13): np.array and np.asarray of nested lists, copies,
# casts, and the builtins sum, min and max over a sequence (a list, a tuple, an array's rows).
_ENTRY = "_entry_grad({g}, {i}, {dtype})"
_DTYPE_NOTE = "; an integer or boolean dtype has no gradient"
ARRAY_OPS += (
    A(("np.array",), ("object", "dtype", "copy"), {"object": _ENTRY},
      {"dtype": "None", "copy": "True"}, entries="object", positional=2,
      note="of numbers and arrays of one shape, in nested lists and tuples" + _DTYPE_NOTE,
      linear="joint"),
    A(("np.asarray",), ("a", "dtype"), {"a": _ENTRY}, {"dtype": "None"}, entries="a",
      positional=2, note="as np.array" + _DTYPE_NOTE, linear="joint"),
    A(("[...]",), ("items",), {"items": "_entry_grad({g}, {i})"}, entries="items",
      note="a list or tuple of numbers and arrays read as an array (np.sum([a, b]))",
      linear="joint"),
    A(("np.ndarray.astype",), ("a", "dtype"), {"a": _ENTRY}, method="astype",
      note="the gradient in the parameter's dtype" + _DTYPE_NOTE, linear="joint"),
    A(("sum(iterable)",), ("iterable", "start"),
      {"iterable": "_sum_rows_grad({g}, {iterable})", "start": "_unbroadcast({g}, {start})"},
      {"start": "0"}, note="the builtin: over a list or tuple, or an array's first axis",
      linear="joint"),
    A(("max(iterable)",), ("iterable",),
      {"iterable": "_extreme_share({g}, {np}.asarray({iterable}), {out})"},
      note="the builtin over a sequence of numbers: ties share the gradient equally",
      jvp={"iterable": _tied_sequence()}),
    A(("min(iterable)",), ("iterable",),
      {"iterable": "_extreme_share({g}, {np}.asarray({iterable}), {out})"},
      note="the builtin over a sequence of numbers: ties share the gradient equally",
      jvp={"iterable": _tied_sequence()}),
)
# (Rows that no NumPy name reaches: lowering picks them for what it reads.)
_BY_NAME = {row.names[0]: row for row in ARRAY_OPS}
SEQUENCE = _BY_NAME["[...]"]
BUILTIN_REDUCTIONS = {builtins.sum: _BY_NAME["sum(iterable)"],
                      builtins.max: _BY_NAME["max(iterable)"],
                      builtins.min: _BY_NAME["min(iterable)"]}

ARRAY_OPS += (A_LSE,)

# Reading by index, x[...]: basic slices, integer arrays (repeats accumulate), boolean masks.
INDEX = A(("x[...]",), ("a", "index"), {"a": "_scatter({g}, {a}, {np}.index_exp[{index}])"},
          note="slices, newaxis, integer arrays (repeats accumulate), boolean masks",
          linear="joint")

# Writing by index, x[...] = v, into an array the function made (statements.py): the old
# array's adjoint loses the slots written; v's is read off them (the last write of a repeated
# index wins, as in NumPy), summed down where v was broadcast.
WRITE = A(("x[...] = v",), ("a", "index", "v"),
          {"a": "_unwritten({g}, {a}, {np}.index_exp[{index}])",
           "v": "_written_grad({g}, {a}, {np}.index_exp[{index}], {v})"},
          note="into arrays the function made; repeated indices: the last write wins",
          linear="joint")

# Concatenations written as an index, np.r_[a, b, ...] and np.c_[...]: rows by the object.
_RC = "of numbers and arrays; a slice or string directive only if all is constant"
CONCATENATORS = (
    A(("np.r_[...]",), ("items",), {"items": "_rc_part({g}, {items}, {i}, 'r')"},
      sequence="items", note=_RC, linear="joint"),
    A(("np.c_[...]",), ("items",), {"items": "_rc_part({g}, {items}, {i}, 'c')"},
      sequence="items", note=_RC, linear="joint"),
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
NO_GRADIENT = ("np.zeros_like", "np.ones_like", "np.zeros", "np.ones", "np.empty",
               "np.empty_like",
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
        # scipy.special.logsumexp, scipy.stats.norm.logpdf: the submodule is imported.
        sub, _, rest = rest.partition(".")
        obj = importlib.import_module("scipy." + sub)
    else:
        obj = _MODULES[head]
    for part in rest.split("."):
        obj = getattr(obj, part)
    return obj


def _key(obj):
    """What identifies a table function: the object, or for a method of an object
    (scipy.stats.norm.logpdf, made anew at each access) the object and the function."""
    owner = getattr(obj, "__self__", None)
    func = getattr(obj, "__func__", None)
    if owner is not None and func is not None:
        return (id(owner), id(func)), (owner, func)
    return id(obj), obj


def _scipy_module(name: str) -> str:
    """The SciPy module a spelling is in (``scipy.stats``), or "" for NumPy's and the rest."""
    return ".".join(name.split(".")[:2]) if name.startswith("scipy.") else ""


def _index(rows, module=""):
    """key -> (identity, row) for the spellings of ``rows`` in SciPy's ``module``, or, by
    default, for those outside SciPy."""
    table = {}
    for row in rows:
        for name in row.names:
            if not all(part.isidentifier() for part in name.split(".")):
                continue  # a spelling no object has: "[...]", "max(iterable)"
            if _scipy_module(name) != module:
                continue
            try:
                obj = resolve_name(name)
            except (ImportError, AttributeError):  # an optional module (SciPy) is missing
                continue
            key, ident = _key(obj)
            table[key] = (ident, row)
    return table


_BY_ID = {**_index(ELEMENTWISE), **_index(ARRAY_OPS)}
_NO_GRADIENT_IDS = {id(resolve_name(n)) for n in NO_GRADIENT}
_SCIPY_MODULES = sorted({_scipy_module(name) for row in (*ELEMENTWISE, *ARRAY_OPS)
                         for name in row.names} - {""})


@functools.cache
def _scipy_rows(module: str) -> dict:
    """The rows of a SciPy module's functions, indexed once the user's code has imported
    the module (so that symdiff never imports SciPy, which takes a second, for code that
    does not use it)."""
    return {**_index(ELEMENTWISE, module), **_index(ARRAY_OPS, module)}


def _literal(code: str):
    """The value of a static's code where it is a literal (an order, a string), or the
    infinities as NumPy and math spell them; else ``...`` (not known here)."""
    text = code.replace(" ", "")
    sign, name = (-1, text[1:]) if text.startswith("-") else (1, text)
    if name.split(".")[-1] == "inf":
        return sign * math.inf
    try:
        return ast.literal_eval(code)
    except (ValueError, SyntaxError):
        return ...


# (-1, -2 and 'nuc' of a vector, which the code does not tell, give NaN tangents)
_NORM_ORDERS = (None, "fro", "nuc", 0, 1, -1, 2, -2, math.inf, -math.inf)


def no_tangent(row: ArrayOp, statics: dict[str, str]) -> str:
    """Why forward mode has no tangent for this call of ``row`` (``statics``: its static
    parameters' code, as written), or "": a form the templates do not cover (a p-norm, a
    banded solve)."""
    name = row.names[0]
    if name == "np.linalg.norm":
        order = _literal(statics.get("ord", "None"))
        axis = _literal(statics.get("axis", "None"))
        if order not in (None, "fro") and (order is ... or order not in _NORM_ORDERS or
                                           axis is ... or isinstance(axis, tuple)):
            return (f"the tangent of np.linalg.norm with ord={statics['ord']} is not written "
                    "(orders None, 'fro', 'nuc', 0, 1, -1, 2, -2, inf, -inf, written in the "
                    "code, over one axis or all of a matrix)")
    if name in ("scipy.linalg.solve", "scipy.linalg.inv") and \
            _literal(statics.get("assume_a", "None")) == "banded":
        return f"the tangent of {name} with assume_a='banded' is not written"
    return ""


def lookup(obj):
    """The row (Elementwise or ArrayOp) for a function object, or None."""
    key, ident = _key(obj)
    hit = _BY_ID.get(key)
    for module in _SCIPY_MODULES:
        if hit is not None:
            break
        if module in sys.modules:  # imported already: indexing it imports nothing
            hit = _scipy_rows(module).get(key)
    if hit is None:
        return None
    same = hit[0] is ident if not isinstance(ident, tuple) else \
        hit[0][0] is ident[0] and hit[0][1] is ident[1]
    return hit[1] if same else None


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
