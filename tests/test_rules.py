"""Every row of the derivative table, every spelling: gradients against central differences;
kinks and ties, huge and tiny magnitudes, and singular derivatives on Python floats.

The parametrization is generated from ``symdiff.rules.ELEMENTWISE``, so a new row (or a new
spelling of an old one) is tested without touching this file. Each spelling is called from
a function in a real module file (symdiff reads source), at seeded random points inside the
row's ``domain``, and differentiated with respect to every required argument (optional
parameters are left out). ``np.*`` spellings are checked on float64 arrays of shape (5,)
summed with ``np.sum``, on a mix of an array and scalars, and on scalars; ``math.*`` and
builtin spellings on scalars only.

The second half pins the conventions the table documents: derivative 0 of the piecewise
constant functions, half the gradient to each side of a tie (JAX), and the numerically
stable derivatives of logaddexp, hypot and cbrt.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest
from gradcheck import agrees, check_grad, equals, load, numeric_grad

from symdiff import SymdiffError, grad, rules, value_and_grad
from symdiff.rules import ELEMENTWISE, NO_GRADIENT, lookup, resolve_name

# (Rows with static parameters, an order or a dimension, are tested at the end of the file.)
# Casts to fewer bits round their value: central differences of them are rounding noise,
# so they are tested on their own (test_float_casts_are_the_identity).
ROUNDING_CASTS = ("np.float32", "np.float16", "np.single")
SPELLINGS = [(row, name) for row in ELEMENTWISE for name in row.names
             if not row.static and name not in ROUNDING_CASTS]
ARRAYS = ("np.", "scipy.")  # spellings that take arrays (SciPy's ufuncs)
ARRAY_SPELLINGS = [(row, name) for row, name in SPELLINGS if name.startswith(ARRAYS)]
MULTI_ARG_ARRAY_SPELLINGS = [(row, name) for row, name in ARRAY_SPELLINGS
                             if len(row.params) - row.optional > 1]
ZERO_DERIVATIVE = [(row, name) for row, name in SPELLINGS if "derivative 0" in row.note]
SHAPE = (5,)
MARGIN = 0.05  # kept between points and kinks: 0, half-integers, and each other


def _ids(pairs):
    return [name for _, name in pairs]


def required(row) -> tuple[str, ...]:
    return row.params[:len(row.params) - row.optional]


def differentiable(row) -> tuple[int, ...]:
    """The positions of the required parameters not refused (a cdf's shape parameters)."""
    return tuple(i for i, p in enumerate(required(row)) if p not in row.refused)


def make(name: str, params: tuple[str, ...], reduce: bool):
    """A module function ``f(*params)`` returning ``name(*params)``, np.sum-ed if ``reduce``."""
    call = f"{name}({', '.join(params)})"
    body = f"np.sum({call})" if reduce else call
    return load(f"""
        import math

        import numpy as np
        import scipy.special
        {"import scipy.stats" if name.startswith("scipy.") else ""}


        def f({', '.join(params)}):
            return {body}
        """, "f")


def _tuple_ok(row, values) -> bool:
    """Whether one point (a value per argument) is clear of every kink a row may have."""
    if any(abs(v - round(2 * v) / 2) < MARGIN for v in values):
        return False  # 0 (abs, sign), integers (floor...) and half-integers (round)
    return all(abs(a - b) >= MARGIN for i, a in enumerate(values) for b in values[i + 1:])


def draw_point(row, rng, n: int | None) -> list:
    """``n`` points (or one, as Python floats if ``n`` is None) per required argument.

    Every value lies in ``row.domain``, away from kinks. For np.clip the bounds are the
    smaller and larger of two draws, so the value falls below, inside or above them.
    """
    params = required(row)
    lo, hi = row.domain
    columns = []
    for _ in range(100_000):
        if len(columns) == (n or 1):
            break
        values = [float(v) for v in rng.uniform(lo, hi, len(params))]
        if not _tuple_ok(row, values):
            continue
        if "a_min" in params and "a_max" in params:
            i_min, i_max = params.index("a_min"), params.index("a_max")
            values[i_min], values[i_max] = sorted((values[i_min], values[i_max]))
        columns.append(values)
    else:
        pytest.fail(f"no points clear of kinks (0, half-integers, ties) in {row.domain} "
                    f"for {row.names[0]}: widen the row's domain")
    if n is None:
        return columns[0]
    return [np.array([c[k] for c in columns], dtype=np.float64) for k in range(len(params))]


def check_types(grads, args):
    """Each gradient is like its parameter: a Python float, or a float64 array its shape."""
    assert len(grads) == len(args)
    for g, a in zip(grads, args, strict=True):
        if isinstance(a, np.ndarray):
            assert isinstance(g, np.ndarray), type(g)
            assert g.shape == a.shape
            assert g.dtype == np.float64
        else:
            assert type(g) is float, type(g)


# --- non-smooth points: ties, bounds, zero ------------------------------------------------

KINKS = load("""
import numpy as np

def where_scalar_branches(v):
    return np.sum(np.where(v > 0, 2.0, v) + np.where(v > 1, v * v, 1.0))

def max_min_ties(v):
    return np.max(v) + np.min(v)

def maximum_minimum_ties(v):
    return np.sum(np.maximum(v, 3.0)) + np.sum(np.minimum(v, v[::-1]))

def clip_at_bounds(v):
    return np.sum(np.clip(v, -2.0, 3.0)) + np.sum(np.clip(v, None, 0.0) ** 2)

def abs_at_zero(v):
    return np.sum(np.abs(v)) + abs(v[5])

def builtin_max_min(v):
    return max(v[1], v[2]) + min(v[0], 1.0)

def max_axis_ties(v):
    return np.sum(np.max(np.reshape(v, (2, 3)), axis=0))

def fmax_nan(v):
    return np.sum(np.fmax(v, 2.0)) + np.sum(np.fmin(v, -2.0))

def sqrt_by_power(x):
    return x ** 0.5

def sqrt_by_function(x):
    return np.sqrt(x)
""")


TIES = np.array([1.0, 3.0, 3.0, -2.0, 3.0, 0.0])


@pytest.mark.parametrize("name, expected", [
    ("where_scalar_branches", np.where(TIES > 0, 0.0, 1.0) + np.where(TIES > 1, 2 * TIES, 0.0)),
    ("max_min_ties", np.array([0, 1, 1, 3, 1, 0]) / 3),
    # as JAX: [0, 1.5, 0.5, 2, 1.5, 2]
    ("maximum_minimum_ties", np.array([0.0, 1.5, 0.5, 2.0, 1.5, 2.0])),
    ("clip_at_bounds", np.array([1, 0.5, 0.5, 0.5, 0.5, 1]) + np.array([0, 0, 0, -4, 0, 0.0])),
    ("abs_at_zero", np.sign(TIES)),
    ("builtin_max_min", np.array([0.5, 0.5, 0.5, 0.0, 0.0, 0.0])),
    ("max_axis_ties", np.array([1.0, 0.5, 1.0, 0.0, 0.5, 0.0])),
])
def test_ties_and_kinks(name, expected):
    equals(getattr(KINKS, name), (TIES,), (expected,))


def test_fmax_fmin_with_nan():
    v = np.array([1.0, np.nan, 3.0, -3.0])
    equals(KINKS.fmax_nan, (v,), (np.array([0.0, 0.0, 1.0, 1.0]),))


def test_sqrt_at_zero_by_function():
    with np.errstate(divide="ignore"):
        assert math.isinf(grad(KINKS.sqrt_by_function)(0.0))


def test_power_at_zero_python_float():
    with np.errstate(divide="ignore"):
        assert math.isinf(grad(KINKS.sqrt_by_power)(0.0))


# --- elementwise oddities ---------------------------------------------------------------

ELEMENTWISE = load("""
import math
import numpy as np

def or_value(x):
    y = x or 1.0
    return y * y

def and_value(x, y):
    z = x and y
    return z * z

def rounds(x):
    return np.round(x, 1) * x + np.round(x) * x

def builtin_rounds(x):
    return round(x, 2) * x + round(x) * x

def rounds_apart(x):
    a = np.round(x, 1) * x
    return a + np.round(x) * x

def odd_arithmetic(x):
    return (+x * -x ** 2 + 2 ** x + x ** x + x ** -1 + x % 1.0 + x // 1 * x + (x % 0.3) ** 2
            + 5.0 % x + (5.0 // x) * x + float(x) * x + int(x) * x)

def math_calls(x):
    return (math.log(x, 2) + math.log(x) + math.pow(x, 2.5) + pow(x, 3) + math.erf(x)
            * math.erfc(x) + np.exp2(x) + np.logaddexp2(x, 1.0) + np.logaddexp(x, x)
            + np.deg2rad(x) * np.rad2deg(x) + math.radians(x) + np.cbrt(-x) * x)
""")


@pytest.mark.parametrize("name, arg", [
    ("rounds_apart", 1.26), ("odd_arithmetic", 1.3), ("math_calls", 1.3),
])
def test_elementwise(name, arg):
    agrees(getattr(ELEMENTWISE, name), (arg,))


@pytest.mark.parametrize("name, args, wrt", [("or_value", (1.7,), (0,)),
                                             ("and_value", (1.7, 0.6), (1,))])
def test_boolean_operators_as_values(name, args, wrt):
    # x or 1.0 is x or 1.0 depending on x's truth: refused, with a located error.
    with pytest.raises(SymdiffError, match="and/or of numbers returns one of them"):
        grad(getattr(ELEMENTWISE, name), wrt=wrt)(*args)


@pytest.mark.parametrize("name, expected", [
    ("rounds", np.round(1.26, 1) + np.round(1.26)),
    ("builtin_rounds", round(1.26, 2) + round(1.26)),
])
def test_rounding_with_different_decimals(name, expected):
    equals(getattr(ELEMENTWISE, name), (1.26,), (expected,))


# --- huge and tiny magnitudes ------------------------------------------------------------

MAGNITUDES = load("""
import math
import numpy as np

def hypot(x, y):
    return np.hypot(x, y)

def log_sum(x):
    return np.sum(np.log(x))

def softplus(x):
    return np.sum(np.logaddexp(0.0, x))

def scaled_loop(x):
    s = 0.0
    for v in x:
        s = s + v * v * 1e-300
    return s

def arctan(x):
    return np.arctan(x)

def reciprocal(x):
    return 1.0 / x

def math_erf(x):
    return math.erf(x)

def arcsinh(x):
    return np.arcsinh(x)
""")


def test_finite_functions_at_huge_and_tiny_magnitudes():
    assert grad(MAGNITUDES.hypot, wrt=(0, 1))(1e300, 1e300) == pytest.approx(
        (2 ** -0.5, 2 ** -0.5))
    assert grad(MAGNITUDES.hypot, wrt=(0, 1))(1e-300, 2e-300) == pytest.approx(
        (5 ** -0.5, 2 * 5 ** -0.5))
    x = np.array([1e-300, 1e300])
    np.testing.assert_allclose(grad(MAGNITUDES.log_sum)(x), 1 / x)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(grad(MAGNITUDES.softplus)(np.array([-800.0, 800.0])),
                                   [0.0, 1.0])
    x = np.array([1e150, -2e150])
    np.testing.assert_allclose(grad(MAGNITUDES.scaled_loop)(x), 2e-300 * x)
    # NumPy scalars and arrays: x**2 overflows to inf, and the derivative to 0.
    with np.errstate(over="ignore"):
        assert grad(MAGNITUDES.arctan)(np.float64(1e200)) == 0.0
        assert grad(MAGNITUDES.arctan)(np.array(1e200)) == 0.0


@pytest.mark.parametrize("name, x", [("arctan", 1e200), ("reciprocal", 1e160),
                                     ("math_erf", 1e160), ("arcsinh", -1e200)])
def test_python_float_derivatives_that_overflow(name, x):
    with np.errstate(over="ignore", under="ignore"):
        g = grad(getattr(MAGNITUDES, name))(x)
    # The true derivative is at most 1e-160 in magnitude (0.0 in float64 for some).
    assert type(g) is float and math.isfinite(g) and abs(g) <= 1e-150


# --- the retry on NumPy scalars after ZeroDivisionError ------------------------------

RETRY = load("""
import numpy as np

def root_then_loop(x, n):
    s = x ** 0.5
    for i in range(n):
        s = s * 2.0
    return s

def root_times_item(x, v, n):
    return x ** 0.5 * v[n]

def reciprocal(x):
    return 1.0 / x

def modulo(x, y):
    return x % y + x
""")


def test_singular_derivative_on_python_floats_is_infinite():
    with np.errstate(divide="ignore"):
        assert math.isinf(grad(RETRY.root_times_item)(0.0, np.array([1.0, 2.0]), np.int64(1)))


@pytest.mark.parametrize("name, args", [("root_then_loop", (0.0, 2)),
                                        ("root_times_item", (0.0, np.array([1.0, 2.0]), 1))])
def test_retry_on_numpy_scalars_keeps_integer_arguments(name, args):
    with np.errstate(divide="ignore"):
        assert math.isinf(grad(getattr(RETRY, name))(*args))


@pytest.mark.parametrize("name, args", [("reciprocal", (0.0,)), ("modulo", (1.0, 0.0))])
def test_function_that_raises_zero_division(name, args):
    f = getattr(RETRY, name)
    with pytest.raises(ZeroDivisionError):
        f(*args)
    with np.errstate(all="ignore"), pytest.raises(ZeroDivisionError):
        value_and_grad(f)(*args)


def test_table_is_consistent():
    """Each spelling resolves to an object that looks up to its own row (no two rows share)."""
    assert SPELLINGS
    for row, name in SPELLINGS:
        assert lookup(resolve_name(name)) is row, name
        assert row.domain[0] < row.domain[1], name
        assert 0 <= row.optional < len(row.params), name


@pytest.mark.parametrize(("row", "name"), SPELLINGS, ids=_ids(SPELLINGS))
def test_rule_on_scalars(row, name):
    params = required(row)
    f = make(name, params, reduce=False)
    rng = np.random.default_rng(1234)
    wrt = differentiable(row)
    for seed in range(3):
        args = draw_point(row, rng, None)
        grads = check_grad(f, args, wrt=wrt, seed=seed)
        check_types(grads, [args[i] for i in wrt])


@pytest.mark.parametrize(("row", "name"), ARRAY_SPELLINGS, ids=_ids(ARRAY_SPELLINGS))
def test_rule_on_arrays(row, name):
    params = required(row)
    f = make(name, params, reduce=True)
    rng = np.random.default_rng(5678)
    wrt = differentiable(row)
    for seed in range(2):
        args = draw_point(row, rng, SHAPE[0])
        grads = check_grad(f, args, wrt=wrt, seed=seed)
        check_types(grads, [args[i] for i in wrt])


@pytest.mark.parametrize(("row", "name"), MULTI_ARG_ARRAY_SPELLINGS,
                         ids=_ids(MULTI_ARG_ARRAY_SPELLINGS))
def test_rule_broadcasting_array_with_scalars(row, name):
    """The first argument an array, the others Python floats: their gradients are summed."""
    params = required(row)
    f = make(name, params, reduce=True)
    rng = np.random.default_rng(91011)
    args = draw_point(row, rng, SHAPE[0])
    # Keep the scalars clear of every element of the array (and of each other).
    others = draw_point(row, rng, None)[1:]
    for _ in range(10_000):
        if all(_tuple_ok(row, [float(a), *others]) for a in args[0]):
            break
        others = draw_point(row, rng, None)[1:]
    else:
        pytest.fail(f"no scalars clear of the array's elements in {row.domain}")
    args = [args[0], *others]
    if "a_min" in params:
        # np.clip: scalar bounds inside the domain, lower first.
        lo, hi = sorted(others)
        args = [args[0], lo, hi]
    wrt = differentiable(row)
    grads = check_grad(f, args, wrt=wrt)
    check_types(grads, [args[i] for i in wrt])


@pytest.mark.parametrize(("row", "name"), ZERO_DERIVATIVE, ids=_ids(ZERO_DERIVATIVE))
def test_zero_derivative_rows_are_exactly_zero(row, name):
    params = required(row)
    rng = np.random.default_rng(42)
    f = make(name, params, reduce=False)
    g = grad(f)
    for _ in range(5):
        x = draw_point(row, rng, None)[0]
        assert x != round(x)
        assert g(x) == 0.0
        assert type(g(x)) is float
    if name.startswith(ARRAYS):
        fa = make(name, params, reduce=True)
        x = draw_point(row, rng, SHAPE[0])[0]
        out = grad(fa)(x)
        assert out.dtype == np.float64 and out.shape == SHAPE
        assert np.all(out == 0.0)


# --- conventions ---


def _row_of(obj):
    row = lookup(obj)
    assert row is not None, obj
    return row


ABS = [(_row_of(np.abs), n) for n in _row_of(np.abs).names]
MAX = [(_row_of(np.maximum), n) for n in _row_of(np.maximum).names]
MIN = [(_row_of(np.minimum), n) for n in _row_of(np.minimum).names]


@pytest.mark.parametrize(("row", "name"), ABS, ids=_ids(ABS))
def test_abs_derivative_at_zero_is_zero(row, name):
    f = make(name, ("x",), reduce=False)
    assert grad(f)(0.0) == 0.0
    assert grad(f)(-0.0) == 0.0
    assert grad(f)(-3.0) == -1.0
    assert grad(f)(3.0) == 1.0
    if name.startswith("np."):
        fa = make(name, ("x",), reduce=True)
        np.testing.assert_array_equal(grad(fa)(np.array([-2.0, 0.0, 2.0])), [-1.0, 0.0, 1.0])


@pytest.mark.parametrize(("row", "name"), MAX + MIN, ids=_ids(MAX + MIN))
def test_max_min_tie_splits_the_gradient(row, name):
    f = make(name, ("x", "y"), reduce=False)
    g = grad(f, wrt=(0, 1))
    assert g(1.5, 1.5) == (0.5, 0.5)
    assert g(-0.25, -0.25) == (0.5, 0.5)
    bigger_first = (1.0, 0.0) if row is MAX[0][0] else (0.0, 1.0)
    assert g(2.0, 1.0) == bigger_first
    assert g(1.0, 2.0) == bigger_first[::-1]
    if name.startswith("np."):
        fa = make(name, ("x", "y"), reduce=True)
        gx, gy = grad(fa, wrt=(0, 1))(np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 5.0]))
        np.testing.assert_array_equal(gx + gy, [1.0, 1.0, 1.0])
        assert gx[0] == gy[0] == 0.5


def test_clip_conventions():
    f = make("np.clip", ("a", "lo", "hi"), reduce=False)
    g = grad(f, wrt=(0, 1, 2))
    assert g(0.0, -1.0, 1.0) == (1.0, 0.0, 0.0)  # inside
    assert g(-2.0, -1.0, 1.0) == (0.0, 1.0, 0.0)  # below: the lower bound is the value
    assert g(2.0, -1.0, 1.0) == (0.0, 0.0, 1.0)  # above
    assert g(-1.0, -1.0, 1.0) == (0.5, 0.5, 0.0)  # at a bound: half each (JAX)
    assert g(1.0, -1.0, 1.0) == (0.5, 0.0, 0.5)
    fa = make("np.clip", ("a", "lo", "hi"), reduce=True)
    a = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    ga, glo, ghi = grad(fa, wrt=(0, 1, 2))(a, -1.0, 1.0)
    np.testing.assert_array_equal(ga, [0.0, 0.5, 1.0, 0.5, 0.0])
    assert (glo, ghi) == (1.5, 1.5)
    assert type(glo) is float and type(ghi) is float


def test_clip_with_one_bound_none():
    upper = load("""
        import numpy as np


        def f(a):
            return np.sum(np.clip(a, None, 1.0))


        def g(a):
            return np.sum(np.clip(a, a_min=-1.0, a_max=None))
        """)
    a = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    np.testing.assert_array_equal(grad(upper.f)(a), [1.0, 1.0, 1.0, 0.5, 0.0])
    np.testing.assert_array_equal(grad(upper.g)(a), [0.0, 0.5, 1.0, 1.0, 1.0])


@pytest.mark.parametrize("name", ["np.sign", "np.round", "np.floor", "round", "math.floor"])
def test_piecewise_constant_derivative_is_zero_even_at_jumps(name):
    f = make(name, ("x",), reduce=False)
    for x in (-2.0, -1.5, -0.5, 0.0, 0.5, 1.0, 2.5, 0.3):
        g = grad(f)(x)
        assert g == 0.0 and type(g) is float


def test_round_with_decimals_is_zero():
    f = load("""
        import numpy as np


        def f(x):
            return np.round(x, 2) + round(x, 1) + np.round(x, decimals=3)
        """, "f")
    assert grad(f)(0.123456) == 0.0


def test_logaddexp_gradient_is_stable():
    for name in ("np.logaddexp", "np.logaddexp2"):
        f = make(name, ("x", "y"), reduce=False)
        value, (gx, gy) = value_and_grad(f, wrt=(0, 1))(1000.0, 1000.0)
        assert np.isfinite(value)
        np.testing.assert_allclose([gx, gy], [0.5, 0.5], rtol=1e-12, err_msg=name)
        gx, gy = grad(f, wrt=(0, 1))(-1000.0, 0.0)
        np.testing.assert_allclose([gx, gy], [0.0, 1.0], rtol=1e-12, atol=1e-200,
                                   err_msg=name)
        fa = make(name, ("x", "y"), reduce=True)
        gx, gy = grad(fa, wrt=(0, 1))(np.full(3, 800.0), np.array([800.0, 0.0, 1e4]))
        np.testing.assert_allclose(gx, [0.5, 1.0, 0.0], atol=1e-200)
        np.testing.assert_allclose(gy, [0.5, 0.0, 1.0], atol=1e-200)


def test_hypot_gradient_does_not_overflow():
    f = make("np.hypot", ("x", "y"), reduce=False)
    gx, gy = grad(f, wrt=(0, 1))(1e200, 1e200)
    np.testing.assert_allclose([gx, gy], [1 / math.sqrt(2)] * 2, rtol=1e-15)
    gx, gy = grad(f, wrt=(0, 1))(3e-200, -4e-200)
    np.testing.assert_allclose([gx, gy], [0.6, -0.8], rtol=1e-15)
    fm = make("math.hypot", ("x", "y"), reduce=False)
    gx, gy = grad(fm, wrt=(0, 1))(1e200, -1e200)
    np.testing.assert_allclose([gx, gy], [1 / math.sqrt(2), -1 / math.sqrt(2)], rtol=1e-15)


def test_cbrt_gradient_at_negative_x():
    f = make("np.cbrt", ("x",), reduce=False)
    assert grad(f)(-8.0) == pytest.approx(1 / 12, rel=1e-14)
    assert grad(f)(8.0) == pytest.approx(1 / 12, rel=1e-14)
    assert grad(f)(-1.0) == pytest.approx(1 / 3, rel=1e-14)
    fa = make("np.cbrt", ("x",), reduce=True)
    out = grad(fa)(np.array([-27.0, -8.0, 8.0, 27.0]))
    np.testing.assert_allclose(out, [1 / 27, 1 / 12, 1 / 12, 1 / 27], rtol=1e-14)


def test_math_log_with_a_base():
    f = load("""
        import math


        def f(x, b):
            return math.log(x, b) + math.log(x, 2.0)
        """, "f")
    check_grad(f, [1.7, 3.5], wrt=(0, 1))
    gx = grad(f)(2.0, math.e)
    assert gx == pytest.approx(0.5 + 1 / (2.0 * math.log(2.0)), rel=1e-14)


def test_float32_arrays_give_float32_and_integer_arrays_float64_gradients():
    f = make("np.sin", ("x",), reduce=True)
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    out = grad(f)(x)
    assert out.dtype == np.float32 and out.shape == SHAPE
    np.testing.assert_allclose(out, np.cos(x), rtol=1e-6)
    out = grad(f)(np.arange(5))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.cos(np.arange(5)))
    g = grad(make("np.sin", ("x",), reduce=False))(2)
    assert type(g) is float and g == pytest.approx(math.cos(2))


@pytest.mark.parametrize("name", _row_of(np.arctan2).names)
def test_arctan2_in_every_quadrant(name):
    """The table's domain keeps both arguments positive; the rule holds in all quadrants."""
    f = make(name, ("y", "x"), reduce=False)
    for point in ([1.0, -1.0], [-1.0, -1.0], [-1.0, 1.0], [0.5, -2.0], [-0.3, -0.1]):
        check_grad(f, point, wrt=(0, 1))


@pytest.mark.parametrize("name", _row_of(np.power).names)
def test_power_of_a_negative_base_with_an_integral_exponent(name):
    f = make(name, ("x", "y"), reduce=False)
    for point in ([-2.0, 3.0], [-1.5, 2.0], [-0.5, 4.0]):
        check_grad(f, point, wrt=(0,))


@pytest.mark.parametrize("name", ["np.power", "pow", "math.pow"])
def test_power_derivative_at_a_zero_base(name):
    f = make(name, ("x", "y"), reduce=False)
    # y*x**(y-1), never SymPy's y*x**y/x, which is 0/0 here (JAX gives 0 too).
    assert grad(f, wrt=(0, 1))(np.float64(0.0), 2.0) == (0.0, 0.0)
    assert grad(f, wrt=(0, 1))(0.0, 2.0) == (0.0, 0.0)
    assert grad(f)(0.0, 3.0) == 0.0


def test_every_custom_sympy_function_prints_as_its_tree():
    """Each of the table's own SymPy functions prints, with compound arguments and inside a
    product, a power (as base and as exponent) and a negation, as the value it has with
    plain arguments: no operand loses its parentheses (issue 10, item 24)."""
    import sympy as sp

    from symdiff import algebra, rules, runtime
    from symdiff.emit import Printer

    a, b, u, v = sp.symbols("a b u v", real=True)
    printer = Printer()
    scipy = pytest.importorskip("scipy")
    pytest.importorskip("scipy.special")
    env = {**vars(runtime), "np": np, "scipy": scipy, "a": 0.7, "b": 1.3}
    # u and v stand for the compound arguments; their values are those of the compounds.
    compounds = (a - b / 4, a * b - 0.25)
    env.update(u=eval(printer.doprint(compounds[0]), dict(env)),  # noqa: S307
               v=eval(printer.doprint(compounds[1]), dict(env)))  # noqa: S307

    def value(expr):
        return eval(printer.doprint(expr), dict(env))  # noqa: S307

    classes = [c for c in vars(rules).values() if isinstance(c, type) and issubclass(
        c, rules._NumpyFunction) and c not in (rules._NumpyFunction, rules._SciPy)]
    classes += [algebra.Times]
    tried = 0
    for cls in classes:
        for count in (1, 2) if cls is not rules.Round else (1,):  # (decimals: an int)
            try:
                plain, compound = cls(*(u, v)[:count]), cls(*compounds[:count])
            except (TypeError, ValueError):
                continue
            try:
                with np.errstate(all="ignore"):  # (polygamma of a fractional order: NaN)
                    alone = value(plain)
            except ValueError:  # (multigammaln's dimension must be an integer)
                continue
            contexts = [lambda t: 3 * t, lambda t: t ** 3, lambda t: b ** t, lambda t: -t,
                        lambda t: t - t ** 2, lambda t: b / t ** 2]
            with np.errstate(all="ignore"):
                expected = [3 * alone, alone ** 3, 1.3 ** alone, -alone, alone - alone ** 2,
                            np.float64(1.3) / np.float64(alone) ** 2]
            for context, e in zip(contexts, expected, strict=True):
                for term in (plain, compound):
                    with np.errstate(all="ignore"):
                        got = value(context(term))
                    assert np.isclose(got, e, equal_nan=True), (
                        cls.__name__, printer.doprint(context(term)))
            tried += 1
    assert tried >= 20


def test_printed_derivatives_keep_parentheses():
    """np.fmax(x, lo - 1.0) and a power of a power (issue 10, item 24)."""
    m = load("""
        import numpy as np


        def fmax(x, lo):
            return np.fmax(x, lo - 1.0)


        def fmin(x, lo):
            return np.fmin(x, lo - 1.0) * 2.0


        def power_of_power(a, x):
            return (np.sin(a) ** x) ** 2


        def power_of_power3(a, x):
            return (np.sin(a) ** x) ** 3 + x * (np.sin(a) ** x) ** 2.5
        """)
    assert grad(m.fmax, wrt=(0, 1))(0.5, 1.2) == (1.0, 0.0)
    assert grad(m.fmax)(0.5, 1.2) == 1.0  # lo - 1.0 used once: printed inside the step
    assert grad(m.fmin)(0.1, 1.2) == 2.0
    assert grad(m.fmin, wrt=(0, 1))(0.5, 1.2) == (0.0, 2.0)
    assert grad(m.fmin, wrt=(0, 1))(0.1, 1.2) == (2.0, 0.0)
    for f in (m.power_of_power, m.power_of_power3):
        check_grad(f, [0.5, 1.5], wrt=(0, 1))
        check_grad(f, [1.1, 0.7], wrt=(0, 1))


ZERO = 0.0  # a module-level number: a symbol to the differentiator, so x - ZERO stays compound


@pytest.mark.parametrize(("row", "name"), SPELLINGS, ids=_ids(SPELLINGS))
def test_rule_with_compound_operands(row, name):
    """Every spelling with operands ``p - ZERO`` (sums, which lose their meaning without
    parentheses), inside a product and a power with a symbolic exponent."""
    params = required(row)
    operands = ", ".join(f"{p} - ZERO" for p in params)
    module = load(f"""
        import math

        import numpy as np
        import scipy.special
        {"import scipy.stats" if name.startswith("scipy.") else ""}

        ZERO = 0.0
        TWO = 2.0


        def f({', '.join(params)}):
            v = {name}({operands})
            return 3.0 * {name}({operands}) - v ** TWO + (v - ZERO) * ({name}({operands}))
        """)
    rng = np.random.default_rng(2024)
    args = draw_point(row, rng, None)
    check_grad(module.f, args, wrt=differentiable(row))
    if name.startswith(ARRAYS):
        args = draw_point(row, rng, 4)
        check_grad(load(f"""
            import numpy as np
            import scipy.special
            {"import scipy.stats" if name.startswith("scipy.") else ""}

            ZERO = 0.0
            TWO = 2.0


            def f({', '.join(params)}):
                return np.sum({name}({operands}) ** TWO * (1.0 - ZERO * {name}({operands})))
            """, "f"), args, wrt=differentiable(row))


# --- degenerate points: where a function is smooth, its gradient is finite (issue 10) ---


def test_power_with_a_zero_exponent_at_a_zero_base():
    """x**y with y == 0 is 1 everywhere: its slope in x is 0, also at x = 0 (autograd)."""
    for name in ("np.power", "pow", "math.pow"):
        f = make(name, ("x", "y"), reduce=False)
        assert grad(f, wrt=(0, 1))(0.0, 0.0) == (0.0, 0.0), name
        assert grad(f, wrt=(0, 1))(2.0, 0.0) == (0.0, math.log(2.0)), name
    fa = make("np.power", ("x", "y"), reduce=True)
    gx, gy = grad(fa, wrt=(0, 1))(np.array([0.0, 0.0, 2.0]), np.array([0.0, 2.0, 3.0]))
    np.testing.assert_allclose(gx, [0.0, 0.0, 12.0])
    np.testing.assert_allclose(gy, [0.0, 0.0, 8 * math.log(2.0)])


@pytest.mark.parametrize("name", ["np.std", "np.var"])
def test_spread_of_one_entry_has_gradient_zero(name):
    f = make(name, ("x",), reduce=False)
    assert grad(f)(np.array([3.0])).tolist() == [0.0]
    g = load(f"""
        import numpy as np


        def f(x):
            return np.sum({name}(x, axis=1)) + np.sum({name}(x, axis=0))
        """, "f")
    x = np.array([[1.0], [4.0]])
    check_grad(g, [x])
    rows = load(f"""
        import numpy as np


        def f(x):
            return np.sum({name}(x, axis=1))
        """, "f")
    assert grad(rows)(np.array([[3.0], [-1.0]])).tolist() == [[0.0], [0.0]]


def test_std_of_entries_equal_by_construction():
    """The mean's rounding leaves x - mean an ulp off 0, std an ulp too: their ratio is
    garbage, where the true gradient (and central differences) is 0 (issue 10, item 16)."""
    m = load("""
        import numpy as np


        def ones(x):
            v = np.ones(4) * x
            return v.std()


        def tiles(x):
            return np.std(np.stack([x, x, x]) * 1.1) + np.std(x * np.ones((3, 7)), axis=1)[0]
        """)
    for x in (0.3, 0.1, 1e-8, 7.7, -123.456):
        assert grad(m.ones)(x) == 0.0
        assert grad(m.tiles)(x) == 0.0
    std = make("np.std", ("x",), reduce=False)
    np.testing.assert_array_equal(grad(std)(np.full(5, 0.1)), np.zeros(5))


def test_hypot_at_the_origin_is_zero():
    for name in ("np.hypot", "math.hypot"):
        f = make(name, ("x", "y"), reduce=False)
        assert grad(f, wrt=(0, 1))(0.0, 0.0) == (0.0, 0.0), name
        gx, gy = grad(f, wrt=(0, 1))(0.0, -2.0)
        assert (gx, gy) == (0.0, -1.0), name
    fa = make("np.hypot", ("x", "y"), reduce=True)
    gx, gy = grad(fa, wrt=(0, 1))(np.array([0.0, 3.0]), np.array([0.0, 4.0]))
    np.testing.assert_allclose(gx, [0.0, 0.6])
    np.testing.assert_allclose(gy, [0.0, 0.8])


def test_abs_of_a_real_expression_at_zero():
    """SymPy's derivative of Abs(f) for an f it cannot tell is real is f*sign(f)/f, NaN
    at f = 0: the table's functions are real, so it is sign(f)*f' (issue 10, item 26)."""
    m = load("""
        import numpy as np


        def mod(x):
            return np.abs(x % 1.3)


        def floor(x):
            return abs(x - np.floor(x))


        def lae2(t):
            return np.abs(np.logaddexp2(0, t))
        """)
    assert grad(m.mod)(2.6) == 0.0
    assert grad(m.mod)(2.7) == pytest.approx(1.0)
    assert grad(m.floor)(3.0) == 0.0
    assert grad(m.lae2)(2000.0) == 1.0
    assert grad(m.lae2)(-2000.0) == 0.0
    assert grad(m.lae2)(0.0) == pytest.approx(0.5)


# --- np.r_ and np.c_: concatenations written as an index (issue 10, item 1) ---


def test_r_and_c_of_differentiated_values():
    m = load("""
        import numpy as np


        def r(x, s):
            return np.sum(np.r_[x, 1.0, s, x * s] ** 2 * np.arange(8.0))


        def r2(m, s):
            return np.sum(np.r_[m, m * s] ** 3)


        def c(x, s):
            return np.sum(np.c_[x, 2.0 * x, s * x] ** 2 * np.arange(9.0).reshape(3, 3))


        def c2(m, s):
            return np.sum(np.c_[m, m * s, np.sin(m)] ** 2)


        def one(s):
            return np.sum(np.r_[s] * 3.0)


        def constant(x):
            return np.sum(np.r_[0:3, 1.0] * x)
        """)
    rng = np.random.default_rng(7)
    x, mat = rng.standard_normal(3), rng.standard_normal((2, 3))
    check_grad(m.r, [x, 0.7], wrt=(0, 1))
    check_grad(m.r2, [mat, 0.7], wrt=(0, 1))
    check_grad(m.c, [x, 0.7], wrt=(0, 1))
    check_grad(m.c2, [mat, 0.7], wrt=(0, 1))
    assert grad(m.one)(0.5) == 3.0
    np.testing.assert_array_equal(grad(m.constant)(np.ones(4)), [0.0, 1.0, 2.0, 1.0])


def test_r_with_a_slice_among_differentiated_values():
    m = load("""
        import numpy as np


        def r(x):
            return np.sum(np.r_[x, 2.0, 0:3] ** 2 * np.arange(6))


        def c(x):
            return np.sum(np.c_[x, 1:4] ** 2 * np.arange(6).reshape(3, 2))


        def f(x):
            return np.sum(np.r_[x, 0:x[0]])
        """)
    check_grad(m.r, [np.array([0.5, -1.5])])
    check_grad(m.c, [np.array([0.5, -1.5, 2.0])])
    with pytest.raises(SymdiffError) as info:
        grad(m.f)(np.ones(2))
    assert str(info.value).splitlines()[0].endswith(
        ":14:28: np.r_[...] with a slice (a range) among values that depend on the "
        "differentiated inputs is not supported")
    assert "np.concatenate of arrays (np.arange for a range)" in str(info.value)


# --- the no-gradient row (issue 10, item 2) ---


def _calls(fn, values):
    """``fn`` called on floats every way it takes them: one operand, two, and after a
    count (np.full(2, v)); each as (arguments, result), those it refuses left out."""
    for args in (values[:1], values, [2, values[0]]):
        try:
            yield args, fn(*args)
        except (TypeError, ValueError):
            continue


@pytest.mark.parametrize("name", NO_GRADIENT)
def test_no_gradient_functions_are_constant_in_floats(name):
    """Each function of the no-gradient row either refuses floats, gives no floats
    (integers, booleans, shapes), or gives the same value when its floats move: np.linspace,
    np.arange and np.full did not, and got rules."""
    fn = resolve_name(name)
    if name in ("np.empty", "np.empty_like"):
        # (entries are whatever the memory held: no value of the arguments is in them)
        assert np.shape(fn(np.ones((2, 3)) if name == "np.empty_like" else (2, 3))) == (2, 3)
        return
    rng = np.random.default_rng(3)
    for values in ([0.3, 1.7], [rng.standard_normal(4), rng.standard_normal(4)],
                   [rng.standard_normal((2, 2)), rng.standard_normal((2, 2))]):
        for args, out in _calls(fn, values):
            if isinstance(out, range) or np.asarray(out).dtype.kind in "biu":
                continue
            moved = fn(*[a + 1e-7 if isinstance(a, (float, np.ndarray)) else a for a in args])
            np.testing.assert_array_equal(out, moved, err_msg=name)


def test_constructors_of_floats_have_gradients():
    m = load("""
        import numpy as np


        def lin(a, b):
            return np.sum(np.linspace(a, b, 5) ** 2)


        def one_sample(a, b):
            return np.sum(np.linspace(a, b, 1) * 3.0)


        def steps(a, h):
            return np.sum(np.arange(a, 3.0, h) ** 2)


        def count(n, x):
            return np.sum(np.arange(n) * x)


        def fill(x, y):
            return np.sum(np.full(3, y) * x) + np.sum(np.full_like(x, y) ** 2)


        def integers(x, y):
            return np.sum(np.full_like(x, y)) + np.sum(np.full(2, y, dtype=int))
        """)
    check_grad(m.lin, [0.3, 1.7], wrt=(0, 1))
    # 2*sum(t*(1 - t)) and 2*sum(t*t) for t = 0, 1/4, ..., 1
    assert grad(m.lin, wrt=(0, 1))(0.0, 1.0) == pytest.approx((1.25, 3.75))
    assert grad(m.one_sample, wrt=(0, 1))(0.5, 2.0) == (3.0, 0.0)
    check_grad(m.steps, [0.3, 0.7], wrt=(0, 1))
    assert grad(m.count, wrt=(0, 1))(4, 2.0) == (0.0, 6.0)
    check_grad(m.fill, [np.array([1.0, -2.0, 0.5]), 0.7], wrt=(0, 1))
    # Integer entries truncate the number they are made of: no gradient.
    assert grad(m.integers, wrt=1)(np.arange(3), 0.7) == 0.0
    assert grad(m.integers, wrt=1)(np.ones(3), 0.7) == 3.0


def test_integer_arguments_at_a_singular_point_give_inf_not_zero_division():
    """Python numbers raise where NumPy gives inf (1/(1 - x**2) at x = 1): the gradient is
    run again on NumPy scalars, integers too."""
    f = make("np.arctanh", ("x",), reduce=False)
    with np.errstate(divide="ignore"):
        assert grad(f)(1) == math.inf
        assert grad(f)(1.0) == math.inf
    g = load("""
        import numpy as np


        def g(x, n):
            return np.sum(x[:n]) / (n - 2)
        """, "g")
    with np.errstate(divide="ignore", invalid="ignore"):
        assert grad(g, wrt=(0, 1))(np.ones(3), 2)[1] == -math.inf


def test_hypot_of_subnormals_and_logaddexp_tails_keep_their_precision():
    """x / hypot(x, y) as one division (x * (1/h) overflows for a subnormal h), and the
    sigmoid of logaddexp's derivative finite, silent and within 1e-16 in its tails."""
    f = make("np.hypot", ("x", "y"), reduce=False)
    gx, gy = grad(f, wrt=(0, 1))(1e-310, -1e-310)
    np.testing.assert_allclose([gx, gy], [2 ** -0.5, -2 ** -0.5], rtol=1e-12)
    for name, scale in (("np.logaddexp", 1.0), ("np.logaddexp2", math.log(2.0))):
        f = make(name, ("x", "y"), reduce=False)
        with np.errstate(over="raise", invalid="raise"):  # no overflow, not even a warning
            for a, b in ((-700.0, 1.0), (50.0, 0.0), (2000.0, -2000.0), (-2000.0, 2000.0)):
                gx, gy = grad(f, wrt=(0, 1))(np.float64(a), np.float64(b))
                want = 1.0 / (1.0 + math.exp(min(700.0, (b - a) * scale)))
                assert gx == pytest.approx(want, abs=1e-16)
                assert gy == pytest.approx(1.0 - want, abs=1e-16)
                assert gx + gy == pytest.approx(1.0, abs=1e-15)


# --- every row at edge points (issue 10): zeros, ties, integers, booleans, 0-d, float32 ---

EDGE_SCALARS = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0)


def _edge_points(row):
    if len(required(row)) == 1:
        return [(v,) for v in EDGE_SCALARS]
    if "a_min" in row.params:
        return [(a, -1.0, 1.0) for a in (-1.0, 1.0, 0.0, 2.0)] + [(0.0, 0.0, 0.0)]
    return [(a, b) for a in (0.0, 1.0, -1.0, 0.5) for b in (0.0, 1.0, -1.0, 0.5)]


@pytest.mark.parametrize(("row", "name"), SPELLINGS, ids=_ids(SPELLINGS))
def test_rule_at_edge_points(row, name):
    """Where central differences and JAX (where it has the function) agree on a finite
    gradient, the function is smooth there: symdiff must give that gradient, not NaN."""
    jnp = None
    if name.startswith("np."):
        jax = pytest.importorskip("jax")
        jax.config.update("jax_enable_x64", True)
        jnp = getattr(pytest.importorskip("jax.numpy"), name[3:], None)
    elif name.startswith("scipy.special."):  # (JAX's SciPy, where it has the function)
        jax = pytest.importorskip("jax")
        jax.config.update("jax_enable_x64", True)
        jnp = getattr(pytest.importorskip("jax.scipy.special"), name[14:], None)
    params = required(row)
    f = make(name, params, reduce=False)
    wrt = differentiable(row)
    g = grad(f, wrt=wrt)
    for point in _edge_points(row):
        with np.errstate(all="ignore"):
            try:
                value = f(*point)
                if isinstance(value, complex) or not np.isfinite(value):
                    continue  # (pow(-1.0, 0.5) is complex)
                # Two step sizes that agree: no jump or kink in reach of the steps.
                numeric = [numeric_grad(f, list(point), i) for i in wrt]
                finer = [numeric_grad(f, list(point), i, h=1e-7) for i in wrt]
            except (ValueError, TypeError, ZeroDivisionError, OverflowError):
                continue  # a step left the domain (math's error, or a complex power)
            ours = g(*point)
        reference = finer
        if jnp is not None:
            import jax
            reference = [float(v) for v in jax.grad(jnp, argnums=wrt)(*map(float, point))]
        for i, (o, n, m, r) in enumerate(zip(ours, numeric, finer, reference, strict=True)):
            if np.isfinite(n) and np.isclose(n, m, rtol=1e-4, atol=1e-6) and np.isclose(
                    n, r, rtol=1e-4, atol=1e-6):
                assert o == pytest.approx(n, rel=1e-4, abs=1e-6), (name, point, i)


@pytest.mark.parametrize(("row", "name"), SPELLINGS, ids=_ids(SPELLINGS))
def test_rule_on_integer_boolean_0d_and_float32_arguments(row, name):
    """Other kinds of numbers are differentiated as the float64 numbers they are equal to,
    and each gradient has its parameter's shape, as float64 (a float for a scalar); float32
    ones in float32, as JAX."""
    params = required(row)
    wrt = differentiable(row)
    point = [1.0, -2.0, 3.0][:len(params)] if "a_min" not in params else [2.0, -1.0, 3.0]
    if name.startswith("scipy.stats."):  # (shape parameters are positive)
        point = [0.5, 1.5, 2.5][:len(params)]
    # (Booleans and 8- and 16-bit integers too, which NumPy computes with in float16 or
    # float32: the derivatives still compute in float64.)
    kinds = [int, np.int64, np.float32, bool, np.int8, np.bool_, np.int16]
    if len(params) > 1:
        kinds = [int, np.float32, np.int8, bool]
    if name.startswith(ARRAYS):
        kinds += [np.array, lambda v: np.array([v, v], dtype=np.int32),
                  lambda v: np.array([v, v], dtype=np.float32),
                  lambda v: np.array([v, -v], dtype=np.int8),
                  lambda v: np.array([abs(v), 2 * abs(v)], dtype=np.uint8),
                  lambda v: np.array([v > 0, v < 0]),
                  lambda v: np.array([v, v], dtype=np.int16)]
    f = make(name, params, reduce=name.startswith(ARRAYS))
    for kind in kinds:
        args = [kind(v) for v in point]
        try:
            with np.errstate(all="ignore"):
                f(*args)
        except (ValueError, TypeError, ZeroDivisionError):
            continue  # NumPy or math refuses these (an integer to a negative power...)
        with np.errstate(all="ignore"):
            ours = grad(f, wrt=wrt)(*args)
            expected = grad(f, wrt=wrt)(*[np.asarray(a, dtype=np.float64) if isinstance(
                a, np.ndarray) else float(a) for a in args])
        single = all(np.asarray(a).dtype == np.float32 for a in args)
        for o, e, a in zip(ours, expected, [args[i] for i in wrt], strict=True):
            np.testing.assert_allclose(o, e, rtol=2e-5 if single else 1e-6, atol=1e-6 if
                                       single else 0, err_msg=f"{name} {kind}")
            assert np.shape(o) == np.shape(a)
            if isinstance(a, np.ndarray):
                assert o.dtype == (np.float32 if a.dtype == np.float32 else np.float64)
            elif isinstance(a, np.float32):
                assert type(o) is np.float32, (name, kind, type(o))
            else:
                assert type(o) is float, (name, kind, type(o))


# Every array row on degenerate operands: (body over x, x[, the gradient where it is our
# convention rather than JAX's: a spread or norm of 0 has the subgradient 0, JAX NaN).
_F32 = np.float32
EDGE_ARRAYS = {
    "np.sum": [("np.sum(x)", np.zeros(0)), ("np.sum(x)", np.array(2.0)),
               ("np.sum(x)", np.array([True, False])), ("np.sum(x)", np.arange(3)),
               ("np.sum(np.sum(x, axis=-1) ** 2)", np.zeros((3, 0)))],
    "np.mean": [("np.mean(x)", np.ones(1)), ("np.mean(x)", np.array(2.0)),
                ("np.sum(np.mean(x, axis=1) ** 2)", np.ones((2, 1))),
                ("np.mean(x)", np.ones(3, _F32))],
    "np.prod": [("np.prod(x)", np.zeros(3)), ("np.prod(x)", np.array([0.0, 2.0])),
                ("np.prod(x)", np.zeros(0)), ("np.prod(x)", np.array(2.0)),
                ("np.sum(np.prod(x, axis=0))", np.zeros((0, 3)))],
    "np.max": [("np.max(x)", np.ones(3)), ("np.max(x)", np.array([1.0, 3.0, 3.0])),
               ("np.max(x)", np.array(2.0)), ("np.max(x)", np.arange(3))],
    "np.min": [("np.min(x)", np.zeros(3)), ("np.min(x)", np.ones(1)),
               ("np.sum(np.min(x, axis=1))", np.array([[1.0, 1.0], [0.0, 2.0]]))],
    "np.var": [("np.var(x)", np.ones(1)), ("np.var(x)", np.array(2.0)),
               ("np.var(x)", np.full(4, 0.1)), ("np.var(x)", np.arange(3)),
               ("np.var(x)", np.ones(3, _F32))],
    "np.std": [("np.std(x)", np.ones(1), np.zeros(1)), ("np.std(x)", np.array(2.0), 0.0),
               ("np.std(x)", np.full(4, 0.1), np.zeros(4)), ("np.std(x)", np.arange(3)),
               ("np.sum(np.std(x, axis=0))", np.array([[1.0, 1.0], [1.0, 2.0]]),
                [[0.0, -0.5], [0.0, 0.5]])],
    "np.cumsum": [("np.sum(np.cumsum(x) ** 2)", np.array(2.0)),
                  ("np.sum(np.cumsum(x) ** 2)", np.zeros(0)),
                  ("np.sum(np.cumsum(x) ** 2)", np.ones(1))],
    "np.diff": [("np.sum(np.diff(x) ** 2)", np.ones(1)),
                ("np.sum(np.diff(x, 3) ** 2)", np.ones(2)),
                ("np.sum(np.diff(x, 0) ** 2)", np.ones(2))],
    "np.cumprod": [("np.sum(np.cumprod(x))", np.array(2.0)),
                   ("np.sum(np.cumprod(x))", np.zeros(0)),
                   ("np.sum(np.cumprod(x))", np.zeros(3)),
                   ("np.sum(np.cumprod(x))", np.array([2.0, 0.0, 3.0, 0.0]))],
    "np.nansum": [("np.nansum(x)", np.array(2.0)), ("np.nansum(x)", np.zeros(0)),
                  ("np.nansum(x)", np.array([1.0, np.nan]), [1.0, 0.0])],
    "np.nanmean": [("np.nanmean(x)", np.array(2.0)),
                   ("np.nanmean(x)", np.array([1.0, np.nan, 3.0]), [0.5, 0.0, 0.5]),
                   ("np.sum(np.nanmean(x, axis=0))", np.array([[np.nan, 1.0], [3.0, 2.0]]),
                    [[0.0, 0.5], [1.0, 0.5]])],
    "np.linalg.norm": [("np.linalg.norm(x)", np.zeros(3), np.zeros(3)),
                       ("np.linalg.norm(x)", np.array(-2.0)),
                       ("np.sum(np.linalg.norm(x, axis=1))", np.array([[0.0, 0.0], [3.0, 4.0]]),
                        [[0.0, 0.0], [0.6, 0.8]])],
    "np.matmul": [("np.sum(x @ x)", np.ones(1)), ("np.sum(x @ x)", np.arange(3))],
    "np.dot": [("np.dot(x, x)", np.array(2.0)), ("np.dot(x, x)", np.zeros(0))],
    "np.inner": [("np.inner(x, x)", np.array(2.0)), ("np.inner(x, x)", np.zeros(0))],
    "np.outer": [("np.sum(np.outer(x, x))", np.ones(1)), ("np.sum(np.outer(x, x))", np.zeros(0))],
    "np.einsum": [("np.einsum('i,i->', x, x)", np.zeros(0)),
                  ("np.einsum('i,i->', x, x)", np.ones(1))],
    "np.trace": [("np.trace(x)", np.ones((1, 1))), ("np.trace(x)", np.ones((2, 3))),
                 ("np.trace(x, 5)", np.ones((2, 3)), np.zeros((2, 3)))],
    "np.diagonal": [("np.sum(np.diagonal(x))", np.ones((1, 1))),
                    ("np.sum(np.diagonal(x, 3))", np.ones((2, 3)), np.zeros((2, 3)))],
    "np.diag": [("np.sum(np.diag(x))", np.ones(1)), ("np.sum(np.diag(x))", np.zeros(0)),
                ("np.sum(np.diag(x, -4))", np.ones((2, 2)), np.zeros((2, 2)))],
    "np.triu": [("np.sum(np.triu(x))", np.ones((1, 1))),
                ("np.sum(np.triu(x, 9))", np.ones((2, 2)), np.zeros((2, 2)))],
    "np.tril": [("np.sum(np.tril(x))", np.ones(1), [1.0]),
                ("np.sum(np.tril(x))", np.zeros((0, 3)))],
    "np.cross": [("np.sum(np.cross(x, x))", np.ones(3), np.zeros(3)),
                 ("np.sum(np.cross(x, x))", np.zeros((0, 3)))],
    "np.kron": [("np.sum(np.kron(x, x))", np.ones(1)), ("np.sum(np.kron(x, x))", np.zeros(0))],
    "np.tensordot": [("np.tensordot(x, x, 1)", np.ones(1)),
                     ("np.tensordot(x, x, 1)", np.zeros(0))],
    "np.transpose": [("np.sum(np.transpose(x) ** 2)", np.array(2.0))],
    "np.reshape": [("np.sum(np.reshape(x, (-1,)) ** 2)", np.array(2.0))],
    "np.ravel": [("np.sum(np.ravel(x) ** 2)", np.array(2.0))],
    "np.squeeze": [("np.sum(np.squeeze(x) ** 2)", np.ones((1, 1)))],
    "np.expand_dims": [("np.sum(np.expand_dims(x, 0) ** 2)", np.array(2.0))],
    "np.broadcast_to": [("np.sum(np.broadcast_to(x, (2, 3)) ** 2)", np.array(2.0)),
                        ("np.sum(np.broadcast_to(x, (0, 3)) ** 2)", np.ones(3))],
    "np.tile": [("np.sum(np.tile(x, 2) ** 2)", np.array(2.0)),
                ("np.sum(np.tile(x, 0) ** 2)", np.ones(2))],
    "np.flip": [("np.sum(np.flip(x) * np.arange(np.size(x)))", np.ones(1))],
    "np.moveaxis": [("np.sum(np.moveaxis(x, 0, -1) * np.arange(3))", np.ones((3, 1))),
                    ("np.sum(np.moveaxis(x, 0, 1) ** 2)", np.zeros((0, 2)))],
    "np.swapaxes": [("np.sum(np.swapaxes(x, 0, -1) ** 2)", np.ones(1)),
                    ("np.sum(np.swapaxes(x, 0, 1) ** 2)", np.zeros((2, 0)))],
    "np.rollaxis": [("np.sum(np.rollaxis(x, 2) * np.arange(2))", np.ones((1, 1, 2))),
                    ("np.sum(np.rollaxis(x, 1) ** 2)", np.zeros((2, 0)))],
    "np.atleast_1d": [("np.sum(np.atleast_1d(x) ** 2)", np.array(2.0)),
                      ("np.sum(np.atleast_1d(x) ** 2)", np.zeros(0))],
    "np.atleast_2d": [("np.sum(np.atleast_2d(x) ** 2)", np.array(2.0)),
                      ("np.sum(np.atleast_2d(x) ** 2)", np.ones(3, _F32))],
    "np.atleast_3d": [("np.sum(np.atleast_3d(x) ** 2)", np.array(2.0)),
                      ("np.sum(np.atleast_3d(x) ** 2)", np.arange(3))],
    "np.flipud": [("np.sum(np.flipud(x) * np.arange(np.size(x)))", np.ones(1)),
                  ("np.sum(np.flipud(x) ** 2)", np.zeros(0))],
    "np.fliplr": [("np.sum(np.fliplr(x) * np.arange(np.size(x)))", np.ones((1, 1))),
                  ("np.sum(np.fliplr(x) ** 2)", np.zeros((2, 0)))],
    "np.roll": [("np.sum(np.roll(x, 1) ** 2)", np.array(2.0)),
                ("np.sum(np.roll(x, 1) ** 2)", np.zeros(0)),
                ("np.sum(np.roll(x, 3) * np.arange(np.size(x)))", np.ones(1))],
    "np.repeat": [("np.sum(np.repeat(x, 2) ** 2)", np.array(2.0)),
                  ("np.sum(np.repeat(x, 0) ** 2)", np.ones(2)),
                  ("np.sum(np.repeat(x, 2) ** 2)", np.zeros(0)),
                  ("np.sum(np.repeat(x, 2) ** 2)", np.arange(3)),
                  ("np.sum(np.repeat(x, 2) ** 2)", np.ones(3, _F32))],
    "np.concatenate": [("np.sum(np.concatenate([x, x]) ** 2)", np.zeros(0)),
                       ("np.sum(np.concatenate([x]) ** 2)", np.ones(1))],
    "np.stack": [("np.sum(np.stack([x, x]) ** 2)", np.array(2.0))],
    "np.hstack": [("np.sum(np.hstack([x, x]) ** 2)", np.array(2.0))],
    "np.vstack": [("np.sum(np.vstack([x, x]) ** 2)", np.array(2.0))],
    "np.full": [("np.sum(np.full(0, x))", 2.0), ("np.sum(np.full((), x) ** 2)", np.array(2.0))],
    "np.full_like": [("np.sum(np.full_like(x, 2.0) * x)", np.array(2.0)),
                     # (full_like of integers holds integers: 2, not 2.5)
                     ("np.sum(np.full_like(x, 2.5) * x)", np.arange(3), [2.0, 2.0, 2.0])],
    # (JAX's arange takes no gradient: entries start + k*step have slope 1 in start)
    "np.arange": [("np.sum(np.arange(x, 3.0))", 2.5, 1.0),
                  ("np.sum(np.arange(x, 1.0))", 2.5, 0.0)],
    "np.linspace": [("np.sum(np.linspace(x, 2 * x, 1))", np.array(2.0)),
                    ("np.sum(np.linspace(x, 2 * x, 0))", 2.0)],
    "np.where": [("np.sum(np.where(x > 1, x, 0.0))", np.array(2.0)),
                 ("np.sum(np.where(x > 1, x, 0.0))", np.zeros(0))],
    "np.gradient": [("np.sum(np.gradient(x) * np.arange(2.0))", np.ones(2)),
                    ("np.sum(np.gradient(x, edge_order=2) ** 2)", np.arange(3), [-3.0, 0.0, 3.0]),
                    ("np.sum(np.gradient(x) ** 2)", np.ones(4, _F32))],
    "np.take": [("np.sum(np.take(x, []))", np.ones(3), np.zeros(3)), ("np.take(x, 0)", np.ones(1)),
                ("np.sum(np.take(x, [0, 0, 0]))", np.arange(2), [3.0, 0.0])],
    "np.take_along_axis": [("np.sum(np.take_along_axis(x, np.zeros((1, 0), int), 1))",
                            np.ones((1, 3))),
                           ("np.sum(np.take_along_axis(x, np.array([0, 0]), 0))", np.ones(1),
                            [2.0])],
    "np.pad": [("np.sum(np.pad(x, 2, 'edge') ** 2)", np.ones(1)),
               ("np.sum(np.pad(x, 0) ** 2)", np.array(2.0)),
               ("np.sum(np.pad(x, ((0, 0), (1, 1)), 'wrap') ** 2)", np.zeros((0, 2))),
               ("np.sum(np.pad(x, 3, 'symmetric') * 2.0)", np.ones(2, _F32), [8.0, 8.0])],
    "np.sort": [("np.sum(np.sort(x) * np.arange(3.0))", np.zeros(3), [0.0, 1.0, 2.0]),
                ("np.sum(np.sort(x))", np.zeros(0)), ("np.sum(np.sort(x) ** 2)", np.ones(1)),
                ("np.sum(np.sort(x, axis=0) ** 2)", np.zeros((0, 2)))],
    "np.partition": [("np.sum(np.partition(x, 0) ** 2)", np.ones(1)),
                     ("np.sum(np.partition(x, 1) * np.arange(3.0))", np.ones(3),
                      [0.0, 1.0, 2.0])],  # (ties: np.argpartition's order)
    "np.average": [("np.average(x)", np.array(2.0)), ("np.average(x)", np.ones(1)),
                   ("np.average(x, weights=x)", np.arange(1, 4))],
    "np.column_stack": [("np.sum(np.column_stack([x, x]) ** 2)", np.ones(1)),
                        ("np.sum(np.column_stack([x, x]) ** 2)", np.zeros(0))],
    "np.dstack": [("np.sum(np.dstack([x, x]) ** 2)", np.array(2.0)),
                  ("np.sum(np.dstack([x, x]) ** 2)", np.zeros(0))],
    "np.append": [("np.sum(np.append(x, x) ** 2)", np.array(2.0)),
                  ("np.sum(np.append(x, x) ** 2)", np.zeros(0))],
    "np.rot90": [("np.sum(np.rot90(x, 4) * np.arange(1.0))", np.ones((1, 1))),
                 ("np.sum(np.rot90(x) ** 2)", np.zeros((0, 2)))],
    "np.select": [("np.sum(np.select([x > 1], [x], 0.0))", np.array(2.0)),
                  ("np.sum(np.select([x > 1, x > 0], [x, 2 * x]))", np.ones(2), [2.0, 2.0])],
    "np.nan_to_num": [("np.sum(np.nan_to_num(x))", np.array([1.0, np.nan, np.inf]),
                       [1.0, 0.0, 0.0]),
                      ("np.nan_to_num(x)", np.array(2.0)),
                      ("np.sum(np.nan_to_num(x))", np.zeros(0))],
    "np.copy": [("np.sum(np.copy(x))", np.zeros(0)), ("np.copy(x) ** 2", 2.0),
                ("x.copy() ** 2", np.array(2.0))],
    "scipy.special.logsumexp": [("logsumexp(x)", np.ones(1)),
                                ("logsumexp(x)", np.array([-np.inf, 0.0])),
                                ("logsumexp(x)", np.array([1000.0, 1000.0])),
                                # (a zero weight: that entry's a has no gradient)
                                ("logsumexp(x, b=np.arange(2.0))", np.array([3.0, 1.0]),
                                 [0.0, 1.0])],
    "scipy.special.softmax": [("scipy.special.softmax(x)[0]", np.ones(1), [0.0]),
                              ("scipy.special.softmax(x)", np.array(2.0), 0.0),
                              ("scipy.special.softmax(x)[1]", np.array([1000.0, 0.0]),
                               [0.0, 0.0])],
    "scipy.special.log_softmax": [("scipy.special.log_softmax(x)[0]", np.ones(1), [0.0]),
                                  ("scipy.special.log_softmax(x)", np.array(2.0), 0.0),
                                  ("scipy.special.log_softmax(x)[1]", np.array([1000.0, 0.0]),
                                   [-1.0, 1.0])],
    # scipy.stats, scipy.signal (issue 13): rates at 1, counts below 0 or not whole
    # (flat there), a point at the mean, the centre of the simplex; a kernel of one.
    "scipy.stats.poisson.logpmf": [("scipy.stats.poisson.logpmf(3.0, x)", 2.0, 0.5),
                                   ("np.sum(scipy.stats.poisson.logpmf(0.0, x))",
                                    np.zeros(0), np.zeros(0))],
    "scipy.stats.poisson.pmf": [("scipy.stats.poisson.pmf(2.5, x)", 1.0, 0.0),
                                ("np.sum(scipy.stats.poisson.pmf(-1.0, x))", np.ones(2),
                                 np.zeros(2))],
    "scipy.stats.poisson.cdf": [("np.sum(scipy.stats.poisson.cdf(-1.0, x))", np.ones(3),
                                 np.zeros(3)),
                                ("scipy.stats.poisson.cdf(0.0, x)", 1.0, -math.exp(-1.0))],
    "scipy.stats.poisson.logcdf": [("scipy.stats.poisson.logcdf(0.0, x)", 1.0, -1.0)],
    "scipy.stats.poisson.sf": [("scipy.stats.poisson.sf(-1.0, x)", 1.0, 0.0)],
    "scipy.stats.poisson.logsf": [("scipy.stats.poisson.logsf(-1.0, x)", 1.0, 0.0)],
    "scipy.stats.multivariate_normal.logpdf": [
        ("scipy.stats.multivariate_normal.logpdf(x, 0.0, 1.0)", np.array(2.0), -2.0),
        ("np.sum(scipy.stats.multivariate_normal.logpdf(x, np.zeros(2), np.eye(2)))",
         np.zeros((0, 2)), np.zeros((0, 2)))],
    "scipy.stats.multivariate_normal.pdf": [
        ("scipy.stats.multivariate_normal.pdf(x, np.zeros(2), np.eye(2))", np.zeros(2),
         np.zeros(2))],
    "scipy.stats.dirichlet.logpdf": [
        ("scipy.stats.dirichlet.logpdf(x, np.ones(2) * 2.0)", np.array([0.5, 0.5]),
         np.array([2.0, 2.0])),
        ("scipy.stats.dirichlet.logpdf(x, np.ones(2) * 2.0)", np.array([0.25]),
         np.array([4.0 - 4.0 / 3.0]))],
    "scipy.stats.dirichlet.pdf": [
        ("scipy.stats.dirichlet.pdf(x, np.ones(2))", np.array([0.5, 0.5]), np.zeros(2))],
    "scipy.signal.convolve": [("np.sum(scipy.signal.convolve(x, np.ones(1)) ** 2)",
                               np.array([1.0, 2.0]), np.array([2.0, 4.0])),
                              ("np.sum(scipy.signal.convolve(x, np.ones(2), 'valid'))",
                               np.ones(1), np.array([2.0]))],
    "scipy.signal.correlate": [("np.sum(scipy.signal.correlate(x, np.ones(1), 'same'))",
                                np.ones(3), np.ones(3))],
    "scipy.linalg.cho_factor": [("np.sum(np.diag(scipy.linalg.cho_factor(x)[0]))",
                                 np.array([[4, 0], [0, 4]]), [[0.25, 0.0], [0.0, 0.25]])],
    "scipy.linalg.cho_solve": [("np.sum(scipy.linalg.cho_solve((x, True), np.ones(1)))",
                                np.array([[2.0]]), [[-0.25]])],
    # Functions returning several values: integer, float32 and empty operands.
    "np.linalg.slogdet": [("np.linalg.slogdet(x)[1]", np.array([[2, 1], [1, 3]])),
                          ("np.linalg.slogdet(x)[1]", 2 * np.eye(2, dtype=_F32)),
                          ("np.linalg.slogdet(x)[1]", np.ones((0, 0)), np.ones((0, 0)))],
    "np.linalg.eigh": [("np.sum(np.linalg.eigh(x)[0] ** 2)", np.diag([1.0, 2.0])),
                       ("np.sum(np.linalg.eigh(x)[0])", np.ones((1, 1), _F32))],
    "np.linalg.eigvalsh": [("np.sum(np.linalg.eigvalsh(x) ** 2)", np.diag([1.0, 2.0])),
                           ("np.sum(np.linalg.eigvalsh(x))", np.zeros((0, 0)),
                            np.zeros((0, 0)))],
    "np.linalg.svd": [("np.sum(np.linalg.svd(x, compute_uv=False))", np.ones((1, 1))),
                      ("np.sum(np.linalg.svd(x)[1])", np.diag([3.0, 1.0]))],
    "np.linalg.qr": [("np.sum(np.linalg.qr(x)[1])", 2 * np.eye(2)),
                     ("np.sum(np.linalg.qr(x)[0] * np.arange(4).reshape(2, 2))",
                      np.array([[2.0, 1.0], [0.5, 3.0]]))],
    # (JAX's gradient of lstsq is NaN here; this one is -inv(x).T @ ones @ sol.T)
    "np.linalg.lstsq": [("np.sum(np.linalg.lstsq(x, np.ones(2), rcond=None)[0])",
                         2 * np.eye(2), np.full((2, 2), -0.25))],
    "np.split": [("np.sum(np.split(x, 2)[1] ** 2)", np.ones(4, _F32)),
                 ("np.sum(np.split(x, [0])[1])", np.zeros(0), np.zeros(0))],
    "np.array_split": [("np.sum(np.array_split(x, 3)[0] ** 2)", np.arange(4))],
    "np.hsplit": [("np.sum(np.hsplit(x, 2)[1] ** 2)", np.ones((2, 2)))],
    "np.vsplit": [("np.sum(np.vsplit(x, 2)[0] ** 2)", np.ones((2, 3)))],
    "np.dsplit": [("np.sum(np.dsplit(x, [1])[1] ** 2)", np.ones((1, 2, 3)))],
    "x[...]": [("np.sum(x[:0])", np.ones(2)), ("x[()] ** 2", np.array(2.0)),
               ("np.sum(x[x > 5.0])", np.ones(2))],
    "np.r_[...]": [("np.sum(np.r_[x, x] ** 2)", np.array(2.0)),
                   ("np.sum(np.r_[x, x] ** 2)", np.zeros(0))],
    "np.c_[...]": [("np.sum(np.c_[x, x] ** 2)", np.array(2.0)),
                   ("np.sum(np.c_[x, x] ** 2)", np.ones((2, 2)))],
    "np.linalg.inv": [("np.sum(np.linalg.inv(x))", np.array([[2.0]])),
                      ("np.sum(np.linalg.inv(x))", np.array([[2, 1], [1, 3]])),
                      ("np.sum(np.linalg.inv(x))", 2 * np.eye(2, dtype=_F32))],
    "np.linalg.solve": [("np.sum(np.linalg.solve(x, np.ones(1)))", np.array([[2.0]])),
                        ("np.sum(np.linalg.solve(x, np.ones(2)))", np.array([[2, 1], [1, 3]]))],
    # (det at singular matrices: the cofactors, exact, as JAX's)
    "np.linalg.det": [("np.linalg.det(x)", np.ones((2, 2))), ("np.linalg.det(x)", np.zeros((3, 3))),
                      ("np.linalg.det(x)", np.array([[3]])),
                      ("np.sum(np.linalg.det(x))", np.stack([np.ones((2, 2)), np.eye(2)])),
                      ("np.linalg.det(x)", np.ones((2, 2), _F32))],
    "np.linalg.pinv": [("np.sum(np.linalg.pinv(x))", np.ones((1, 2))),
                       ("np.sum(np.linalg.pinv(x))", np.array([[2.0]]))],
    "np.linalg.cholesky": [("np.sum(np.linalg.cholesky(x))", np.array([[4.0]])),
                           ("np.sum(np.linalg.cholesky(x))", np.array([[4, 2], [2, 3]]))],
    "np.linalg.matrix_power": [("np.sum(np.linalg.matrix_power(x, 0))", np.ones((2, 2))),
                               ("np.sum(np.linalg.matrix_power(x, 1))", np.ones((1, 1)))],
    "np.linalg.multi_dot": [("np.linalg.multi_dot([x, x])", np.ones(3)),
                            ("np.linalg.multi_dot([x, x])", np.zeros(0))],
    # (unit_diagonal: the diagonal and the other triangle are not read)
    "scipy.linalg.solve_triangular": [
        ("np.sum(scipy.linalg.solve_triangular(x, np.ones(1)))", np.array([[2.0]]), [[-0.25]]),
        ("np.sum(scipy.linalg.solve_triangular(x, np.ones(2), unit_diagonal=True))",
         np.array([[5.0, 2.0], [7.0, 5.0]]), [[0.0, -1.0], [0.0, 0.0]])],
    "scipy.linalg.solve": [("np.sum(scipy.linalg.solve(x, np.ones(1)))", np.array([[2.0]]),
                            [[-0.25]])],
    "scipy.linalg.inv": [("np.sum(scipy.linalg.inv(x))", np.array([[2.0]]), [[-0.25]])],
    "scipy.linalg.det": [("scipy.linalg.det(x)", np.ones((2, 2)), [[1.0, -1.0], [-1.0, 1.0]])],
    "scipy.linalg.cholesky": [("np.sum(scipy.linalg.cholesky(x))", np.array([[4.0]]), [[0.25]])],
    # building arrays from values (issue 13); a list read as an array, and the builtins
    # max and min, have conventions here (jnp.sum takes no list, and JAX cannot trace max)
    "np.array": [("np.sum(np.array([x, 2.0 * x]) ** 2)", np.array(2.0)),
                 ("np.sum(np.array([x, x]) ** 2)", np.zeros(0)),
                 ("np.sum(np.array([x, x]))", np.ones(3, _F32)),
                 ("np.sum(np.array([x, x], dtype=int) * x)", np.ones(2), [2.0, 2.0]),
                 ("np.sum(np.array(x, dtype=bool) * x)", np.array([0.0, 2.0]), [0.0, 1.0])],
    "np.asarray": [("np.sum(np.asarray(x) ** 2)", np.zeros(0)),
                   ("np.sum(np.asarray([x[0], 1.0]) ** 2)", np.array([2.0])),
                   ("np.sum(np.asarray(x) ** 2)", np.array(2.0))],
    "[...]": [("np.sum(np.sum([x, x], axis=0) ** 2)", np.ones(2), [8.0, 8.0]),
              ("np.sum([x, x])", np.zeros(0), np.zeros(0)),
              ("np.sum([x, x])", np.array(2.0), 2.0)],
    "np.ndarray.astype": [("np.sum(x.astype(float) ** 2)", np.arange(3)),
                          ("np.sum(x.astype(np.float32) ** 2)", np.ones(3, _F32)),
                          ("np.sum(x.astype(int) * x)", np.array([1.5, 2.5]), [1.0, 2.0]),
                          ("np.sum(x.astype(float) ** 2)", np.zeros((0, 2)))],
    "sum(iterable)": [("sum(x)", np.zeros(0), np.zeros(0)),
                      ("np.sum(sum(x) ** 2)", np.ones((2, 3))),
                      ("sum([x, 2.0 * x])", np.array(2.0)), ("sum(x)", np.array([True, False]))],
    "max(iterable)": [("max([x, x])", np.array(2.0), 1.0), ("max(x)", np.ones(3), [1 / 3] * 3),
                      ("max(x)", np.arange(3), [0.0, 0.0, 1.0])],
    "min(iterable)": [("min([x, 1.0])", np.array(1.0), 0.5),
                      ("min(x)", np.array([1.0, 2.0]), [1.0, 0.0])],
}


def test_every_array_row_has_edge_cases():
    rows = {row.names[0] for row in (*rules.ARRAY_OPS, rules.INDEX, *rules.CONCATENATORS)}
    assert rows == set(EDGE_ARRAYS)


def _edge_array_cases():
    for name, cases in EDGE_ARRAYS.items():
        for k, case in enumerate(cases):
            yield pytest.param(*case[:2], case[2] if len(case) > 2 else None,
                               id=f"{name}-{k}")


@pytest.mark.parametrize(("body", "x", "convention"), list(_edge_array_cases()))
def test_array_row_on_degenerate_operands(body, x, convention):
    """Against JAX (the gradient of the same expression in jax.numpy), or our convention
    where it differs; the gradient has x's shape, as float64 (float32 for float32)."""
    pytest.importorskip("scipy")
    f = load("import numpy as np\nimport scipy.linalg\nimport scipy.signal\nimport scipy.special\n"
             "import scipy.stats\nfrom scipy.special import logsumexp\n\n\n"
             f"def f(x):\n    return {body}\n", "f")
    with np.errstate(all="ignore"):
        ours = grad(f)(x)
    assert np.shape(ours) == np.shape(x)
    single = isinstance(x, np.ndarray) and x.dtype == np.float32
    if isinstance(x, np.ndarray):
        assert ours.dtype == (np.float32 if single else np.float64)
    else:
        assert type(ours) is float
    if convention is not None:
        np.testing.assert_allclose(ours, convention, rtol=1e-12, atol=0)
        return
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    jss = pytest.importorskip("jax.scipy.special")
    if "np.c_" in body:  # (jnp.c_ of 0-d values differs from np.c_'s)
        expected = [numeric_grad(f, [x], 0)]
    else:
        jf = eval("lambda x: " + body.replace("np.", "jnp."),  # noqa: S307
                  {"jnp": jnp, "logsumexp": jss.logsumexp})
        expected = jax.grad(jf)(jnp.asarray(x, dtype=jnp.float64) if isinstance(
            x, np.ndarray) else x)
    np.testing.assert_allclose(ours, np.asarray(expected).reshape(np.shape(x)),
                               rtol=1e-6 if single else 1e-9, atol=1e-12)


ARRAY_ROWS = (*rules.ARRAY_OPS, rules.INDEX, *rules.CONCATENATORS)


@pytest.mark.parametrize("row", ARRAY_ROWS, ids=[r.names[0] for r in ARRAY_ROWS])
def test_array_rule_templates_keep_compound_fields_whole(row):
    """Each field of a vector-Jacobian template stands where a compound expression keeps
    its meaning without parentheses (an argument, an index): np.var's ``n - {ddof}`` read
    ddof=k - 1 as n - k - 1 (issue 10, item 24)."""
    import ast
    import string

    for param, template in row.vjp.items():
        if not template:
            continue
        used = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        fields = {name: f"_F{k} - 1" for k, name in enumerate(sorted(used - {"np", "i"}))}
        code = template.format(np="np", i="0", **fields)
        found = {ast.unparse(n) for n in ast.walk(ast.parse(code, mode="eval"))}
        for name, text in fields.items():
            assert text in found, (row.names[0], param, name, code)


@pytest.mark.parametrize("row", [r for r in ARRAY_ROWS if r.by_ndim],
                         ids=[r.names[0] for r in ARRAY_ROWS if r.by_ndim])
def test_array_rule_templates_by_ndim_read_only_names(row):
    """A template for operands of known ndim writes ``{b}.T``: each field it reads must be
    an operand or the adjoint, which are names where it is used, and it must give every
    operand its adjoint, as the general template does."""
    import string

    for ndims, vjp in row.by_ndim.items():
        assert len(ndims) == len([p for p in row.params if row.vjp.get(p)])
        assert set(vjp) == {p for p in row.params if row.vjp.get(p)}
        for template in vjp.values():
            used = {f for _, f, _, _ in string.Formatter().parse(template) if f}
            assert used <= {"g", "np", *vjp}, (row.names[0], ndims, template)


def test_var_and_std_with_a_computed_ddof():
    m = load("""
        import numpy as np


        def var(x, k):
            return np.var(x, ddof=k - 1) + np.std(x, ddof=k - 1)
        """)
    x = np.array([0.5, -1.0, 2.0, 0.25])
    check_grad(m.var, [x, 2], wrt=(0,))


def test_constructors_of_constants_stay_constants():
    """Where no argument depends on the differentiated inputs, np.linspace & co. run as
    written (any keyword NumPy takes), as values without gradient."""
    f = load("""
        import numpy as np


        def f(x):
            t = np.linspace(0.0, 1.0, 3)
            return np.sum(x * t * np.full_like(x, 2.0, order="C") * np.arange(3, dtype=float))
        """, "f")
    assert "    t = np.linspace(0.0, 1.0, 3)  # line 6\n" in grad(f).source
    check_grad(f, [np.array([0.5, -1.0, 2.0])])


def test_power_of_a_number_base_prints_plain_log():
    f = load("""
        def f(y):
            return 2 ** y
        """, "f")
    assert "    dy = _ret*np.log(2)\n" in grad(f).source
    assert grad(f)(3.0) == pytest.approx(8 * math.log(2.0))


NARROW = load("""
import numpy as np

def tangents(x):
    return np.sum(np.tan(x) * np.exp(x))

def steps(x, n):
    s = 0.0
    for i in range(n):
        s = s + np.sin(x * n)
    return np.sum(s)
""")


@pytest.mark.parametrize("x", [np.array([True, False, True]), np.array([1, 0, -1], np.int8),
                               np.array([0, 1, 2], np.uint8), np.int8(1), np.bool_(True),
                               True, [True, False]],
                         ids=["bool", "int8", "uint8", "int8 scalar", "bool_ scalar",
                              "Python bool", "list of bools"])
def test_derivatives_of_booleans_and_8_bit_integers_compute_in_float64(x):
    """NumPy computes np.tan of these in float16: the gradient is the float64 one (to
    rounding), and value_and_grad's value is still the one the function computes."""
    wide = np.asarray(x, dtype=np.float64)
    expected = grad(NARROW.tangents)(wide if np.ndim(x) else float(wide))
    np.testing.assert_allclose(grad(NARROW.tangents)(x), expected, rtol=1e-12)
    value, g = value_and_grad(NARROW.tangents)(x)
    assert value == NARROW.tangents(x) and np.result_type(value) == np.float16
    np.testing.assert_allclose(g, expected, rtol=1e-12)
    assert np.shape(g) == np.shape(x) and np.result_type(g) == np.float64


def test_a_small_integer_that_only_works_as_one_is_differentiated_as_it_is():
    # range(n) refuses a float64 n: the gradient then reads n as it was passed.
    dx, dn = grad(NARROW.steps, wrt=(0, 1))(0.5, np.int8(3))
    assert dx == pytest.approx(9 * math.cos(1.5)) and dn == pytest.approx(1.5 * math.cos(1.5))


def test_whole_floats_and_binary_fractions_read_as_written():
    # (SymPy's Float(1.0) == 1 is False: whole floats are compared as floats.)
    import sympy as sp

    from symdiff.algebra import decimals, whole_floats
    from symdiff.ir import symbol
    x, y = symbol("x"), symbol("y")
    assert str(whole_floats(sp.Float(1.0) * x * y)) == "x*y"
    assert str(whole_floats(sp.Float(2.0) * x + sp.Float(0.5))) == "2*x + 0.5"
    assert str(decimals(sp.Rational(1, 2) * x / y)) == "0.5*x/y"
    assert str(decimals(sp.Rational(1, 3) * x)) == "x/3"


def test_constant_calls_and_square_roots_give_right_gradients():
    def f(x, t):
        s = np.sqrt(t)
        return np.sum(np.sin(x) * x**2 / math.sqrt(2.0 * math.pi) * s / np.sqrt(np.pi))

    g = grad(f, wrt=(0, 1))
    assert g.source.count("np.sqrt(t)") == 2  # the forward's and its comment's: s is read
    for x, t in ((0.3, 1.7), (np.array([0.3, -1.2]), 1.7),
                 (np.array([0.3, -1.2], dtype=np.float32), np.float32(1.7))):
        check_grad(f, (x, t), wrt=(0, 1), rtol=1e-3 if np.ndim(x) and
                   x.dtype == np.float32 else 1e-5)


def test_an_argument_the_derivative_needs_again_is_computed_once():
    # np.cos(3.0 * x) in the derivative reads the forward's 3.0 * x; a hoisted part has
    # its operands' shape, so dg needs no summing down.
    f = load('''
import numpy as np

def f(x):
    g = np.exp(-x)
    s = g * np.sin(3.0 * x) + 0.1 * x
    return np.sum(s)
''').f
    g = grad(f)
    assert "np.cos(_t1)" in g.source and "_t1 = 3.0 * x" in g.source
    assert "dg = _t2\n" in g.source
    check_grad(f, (np.linspace(-1.0, 1.0, 5),))
    check_grad(f, (0.4,))


def test_a_root_is_read_in_whole_powers_of_it():
    # d sqrt(u)/du is 0.5/v for the v = np.sqrt(u) the forward sweep computed (a part of
    # a longer expression, inside a loop), not 0.5/np.sqrt(u) again.
    g_ = load('''
import math
import numpy as np

def g(a, b):
    k = 0
    while k < 3:
        a = np.sqrt(a * b + 1.0) * np.exp(-a * b) / math.sqrt(2.0 * math.pi)
        k = k + 1
    return a
''').g
    source = grad(g_, wrt=(0, 1)).source
    assert source.count("np.sqrt(") == 2  # the forward's and its comment's
    check_grad(g_, (0.4, 0.9), wrt=(0, 1))
    check_grad(g_, (np.float64(1.3), 0.2), wrt=(0, 1))
# --- the float path: each NumPy function that math computes on Python floats ---

def _math_table():
    from symdiff.floats import _MATH

    return sorted(fn.__name__ for fn in _MATH)


@pytest.mark.parametrize("name", _math_table())
def test_math_for_numpy_on_floats_gives_numpys_gradient(name):
    two = getattr(np, name).nin == 2
    f = load(f'''
import numpy as np

def f(x, y):
    return np.{name}({"x, y" if two else "x * y"}) * y
''').f
    g = grad(f, wrt=(0, 1))
    assert "math." in g.source_for(0.5, 0.25) or "abs(" in g.source_for(0.5, 0.25)
    # (inside the domain; at its edges, where math raises; outside it)
    for args in [(0.5, 0.25), (0.3, -0.7), (0.0, 1.0), (1.0, 1.0), (-1.0, 1.0), (1e3, 1.0),
                 (2.0, 1.0), (-0.0, 0.0)]:
        with np.errstate(all="ignore"):
            floats = g(*args)
            scalars = g(*map(np.float64, args))
            arrays = g(*map(np.array, args))
        assert all(type(v) is float for v in floats)
        for a, b in ((floats, scalars), (floats, arrays)):
            np.testing.assert_allclose(np.array(a, dtype=float), np.array(b, dtype=float),
                                       rtol=1e-13, atol=0, equal_nan=True)


# --- matrix structure: np.diagonal, np.diag, np.triu, np.tril, np.trace with offset,
# np.kron, np.tensordot, np.cross (their central-difference cases are in test_arrays) ---

MATRIX_RULES = [
    ("np.sum(np.diagonal(x, 1) * np.arange(1.0, 4.0))", (3, 5)),
    ("np.sum(x.diagonal(-1, 0, 2) ** 2)", (3, 2, 4)),
    ("np.sum(np.diag(x, 1) ** 2)", (3,)),
    ("np.sum(np.diag(x, -1) ** 2)", (4, 3)),
    ("np.sum(np.triu(x, -1) ** 2)", (3, 4)),
    ("np.sum(np.tril(x, 1) ** 2)", (4,)),
    ("np.trace(x, 1) ** 2 + x.trace(-1) ** 3", (3, 4)),
    ("np.sum(np.trace(x, 0, 2, 1) ** 2)", (2, 3, 3)),
    ("np.sum(np.kron(x, x.T) ** 2)", (2, 3)),
    ("np.sum(np.tensordot(x, x, axes=([0], [1])) ** 2)", (3, 3)),
    ("np.sum(np.cross(x, x[::-1]) ** 2)", (2, 3)),
]


@pytest.mark.parametrize(("body", "shape"), MATRIX_RULES)
def test_matrix_structure_rules_match_central_differences_and_jax(body, shape):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return {body}\n", "f")
    x = np.random.default_rng(7).standard_normal(shape)
    ours = check_grad(f, (x,))[0]
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    if "np.tril(x, 1)" in body:  # (JAX's tril takes no vector)
        return
    reference = load(f"import jax.numpy as np\n\n\ndef f(x):\n    return {body}\n", "f")
    np.testing.assert_allclose(ours, jax.grad(reference)(jnp.asarray(x)), rtol=1e-10,
                               atol=1e-12)


@pytest.mark.parametrize("body", [row[0] for row in MATRIX_RULES])
def test_matrix_structure_rules_on_float32_and_integers(body):
    shape = dict(MATRIX_RULES)[body]
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return {body}\n", "f")
    x = np.random.default_rng(8).standard_normal(shape)
    single = grad(f)(x.astype(np.float32))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, grad(f)(x), rtol=1e-3, atol=1e-3)
    integers = np.arange(np.prod(shape)).reshape(shape) % 3 - 1
    ours = grad(f)(integers)
    assert ours.dtype == np.float64
    np.testing.assert_allclose(ours, grad(f)(integers.astype(float)), rtol=1e-12)


def test_tensordot_pairs_axes_in_the_order_given():
    f = load("import numpy as np\n\n\ndef f(x, y):\n"
             "    return np.sum(np.tensordot(x, y, axes=((2, 0), (0, 1))) ** 2)\n", "f")
    rng = np.random.default_rng(9)
    check_grad(f, (rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 2, 5))), wrt=(0, 1))


# --- scans and elementwise rules of issue 13: cumsum, cumprod, diff, nansum, nanmean,
# mod/remainder/fmod, sinc, real/imag/conj/conjugate ---

RNG13 = np.random.default_rng(13)


@pytest.mark.parametrize("body", [
    "np.cumsum(x)", "np.cumsum(x, axis=0)", "np.cumsum(x, 1)", "np.cumsum(x, axis=-1)",
    "x.cumsum()", "x.cumsum(axis=1)", "x.cumsum(0)",
    "np.diff(x)", "np.diff(x, 2)", "np.diff(x, n=2, axis=0)", "np.diff(x, axis=1)",
    "np.diff(x, 1, 0)", "np.diff(x, n=0)", "np.diff(x, n=5, axis=1)",
    "np.cumprod(x)", "np.cumprod(x, axis=0)", "np.cumprod(x, 1)", "x.cumprod()",
    "x.cumprod(axis=-1)", "np.cumprod(x * (x > 0.3))",
    "np.nansum(x)", "np.nansum(x, axis=0)", "np.nansum(x, 1, keepdims=True)",
    "np.nanmean(x)", "np.nanmean(x, axis=1)", "np.nanmean(x, 0, keepdims=True)",
])
def test_scans_against_central_differences(body):
    f = load(f"import numpy as np\n\n\ndef f(x, w):\n    return np.sum(np.sin({body}) * w)\n",
             "f")
    x = RNG13.normal(size=(3, 4))
    w = RNG13.normal(size=np.shape(eval(body, {"np": np, "x": x})))  # noqa: S307
    check_grad(f, [x, w])


@pytest.mark.parametrize("kind", [np.float32, np.int64])
def test_cumsum_and_diff_of_float32_and_integers(kind):
    f = load("import numpy as np\n\n\ndef f(x):\n"
             "    return np.sum(np.cumsum(x) ** 2) + np.sum(np.diff(x, 2) ** 2)\n", "f")
    x = np.array([1, -2, 3, 4, 0], dtype=kind)
    ours = grad(f)(x)
    assert ours.dtype == (np.float32 if kind is np.float32 else np.float64)
    np.testing.assert_allclose(ours, numeric_grad(f, [x.astype(np.float64)], 0), rtol=1e-5)


def test_diff_with_prepend_is_refused_with_its_line():
    f = load("import numpy as np\n\n\ndef f(x):\n"
             "    return np.sum(np.diff(x, prepend=0.0) ** 2)\n", "f")
    with pytest.raises(SymdiffError, match=r"(?s):5:.*prepend"):
        grad(f)(np.ones(3))


def test_mod_remainder_fmod_broadcast_and_agree_with_the_operator():
    f = load("import numpy as np\n\n\ndef f(x, y):\n"
             "    return np.sum(np.mod(x, y) ** 2 + np.remainder(x, y) * x"
             " + np.fmod(x, y) ** 3 + (x % y) * y)\n", "f")
    x = np.array([[2.3, -2.3, 1.1], [-1.7, 0.4, 5.2]])
    y = np.array([0.7, -0.45, 0.3])
    check_grad(f, [x, y], wrt=(0, 1))
    mod = load("import numpy as np\n\n\ndef f(x, y):\n    return np.sum(np.mod(x, y) * x)\n",
               "f")
    op = load("import numpy as np\n\n\ndef f(x, y):\n    return np.sum((x % y) * x)\n", "f")
    for a, b in zip(grad(mod, wrt=(0, 1))(x, y), grad(op, wrt=(0, 1))(x, y), strict=True):
        np.testing.assert_array_equal(a, b)
    # d fmod/dy = -trunc(x/y), d mod/dy = -floor(x/y): they differ for x/y < 0
    fm = load("import numpy as np\n\n\ndef f(x, y):\n    return np.fmod(x, y)\n", "f")
    md = load("import numpy as np\n\n\ndef f(x, y):\n    return np.mod(x, y)\n", "f")
    assert grad(fm, wrt=1)(-2.3, 0.7) == pytest.approx(3.0)
    assert grad(md, wrt=1)(-2.3, 0.7) == pytest.approx(4.0)


def test_sinc_slope_is_its_limit_at_zero():
    f = load("import numpy as np\n\n\ndef f(x):\n    return np.sum(np.sinc(x) ** 2)\n", "f")
    x = np.array([0.0, 1e-9, 0.3, -1.0, 2.5])
    check_grad(f, [x])
    assert np.isfinite(grad(f)(x)).all()
    one = load("import numpy as np\n\n\ndef f(x):\n    return np.sinc(x)\n", "f")
    assert grad(one)(0.0) == 0.0
    # (cos(pi/2) - sinc(1/2)) / (1/2) = -4/pi, in float32 for a float32 argument
    slope = grad(one)(np.float32(0.5))
    assert slope == pytest.approx(-4 / np.pi, rel=1e-6)
    assert slope.dtype == np.float32


def test_real_imag_and_conj_of_real_values():
    f = load("import numpy as np\n\n\ndef f(x):\n    return np.sum(np.real(x) ** 2"
             " + np.conj(x) * 3 + np.conjugate(x) + np.imag(x) * x)\n", "f")
    x = RNG13.normal(size=4)
    np.testing.assert_allclose(grad(f)(x), 2 * x + 4, rtol=1e-12)
    check_grad(f, [x])


def test_cumprod_is_exact_where_entries_are_zero():
    f = load("import numpy as np\n\n\ndef f(x, w):\n"
             "    return np.sum(np.cumprod(x, axis=1) * w)\n", "f")
    x = np.array([[2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 1.5, -1.0], [1.0, 2.0, -0.5, 0.0]])
    w = RNG13.normal(size=x.shape)
    check_grad(f, [x, w])
    # (each cumprod is a polynomial, so central differences are exact up to rounding)
    np.testing.assert_allclose(grad(f)(x, w), numeric_grad(f, [x, w], 0), atol=1e-8)


def test_nansum_and_nanmean_give_nan_entries_no_gradient():
    f = load("import numpy as np\n\n\ndef f(x):\n"
             "    return np.sum(np.nansum(x, axis=0) ** 2) + np.nanmean(x) ** 2\n", "f")
    x = RNG13.normal(size=(3, 4))
    x[1, 2] = np.nan
    ours = grad(f)(x)
    assert ours[1, 2] == 0.0
    kept = ~np.isnan(x)
    np.testing.assert_allclose(ours[kept], numeric_grad(f, [x], 0)[kept], rtol=1e-6)
    single = grad(f)(x.astype(np.float32))
    assert single.dtype == np.float32


# --- np.moveaxis, np.swapaxes, np.rollaxis, np.atleast_1d/2d/3d, np.flipud, np.fliplr,
# np.roll, np.repeat (issue 13): each axis variant against central differences ---

SHAPE_CASES = [
    ("np.moveaxis(x, 0, -1)", (2, 3, 4)),
    ("np.moveaxis(x, -1, 0)", (2, 3, 4)),
    ("np.moveaxis(x, [0, 1], [2, 0])", (2, 3, 4)),
    ("np.moveaxis(x, source=1, destination=0)", (2, 3)),
    ("np.swapaxes(x, 0, 2)", (2, 3, 4)),
    ("np.swapaxes(x, -1, 1)", (2, 3, 4)),
    ("x.swapaxes(0, 1)", (2, 3)),
    ("np.rollaxis(x, 2)", (2, 3, 4)),
    ("np.rollaxis(x, 0, 3)", (2, 3, 4)),
    ("np.rollaxis(x, 0, 2)", (2, 3, 4)),
    ("np.rollaxis(x, 1, -1)", (2, 3, 4)),
    ("np.rollaxis(x, -1, start=1)", (2, 3, 4)),
    ("np.atleast_1d(x)", ()),
    ("np.atleast_1d(x)", (3,)),
    ("np.atleast_2d(x)", ()),
    ("np.atleast_2d(x)", (3,)),
    ("np.atleast_2d(x)", (2, 3)),
    ("np.atleast_3d(x)", ()),
    ("np.atleast_3d(x)", (3,)),
    ("np.atleast_3d(x)", (3, 2)),
    ("np.atleast_3d(x)", (2, 3, 4)),
    ("np.flipud(x)", (3,)),
    ("np.flipud(x)", (3, 2)),
    ("np.fliplr(x)", (3, 2)),
    ("np.fliplr(x)", (3, 2, 2)),
    ("np.roll(x, 2)", (3, 2)),
    ("np.roll(x, -1, axis=1)", (3, 2)),
    ("np.roll(x, 7, 0)", (3, 2)),
    ("np.roll(x, (1, 2), axis=(0, 1))", (3, 2)),
    ("np.roll(x, 1, axis=None)", (3, 2)),
    ("np.repeat(x, 2)", (3, 2)),
    ("np.repeat(x, 3)", ()),
    ("np.repeat(x, 3, axis=0)", (3, 2)),
    ("np.repeat(x, [1, 0, 2], axis=0)", (3, 2)),
    ("np.repeat(x, [2, 1], axis=-1)", (3, 2)),
    ("np.repeat(x, [1, 2, 0, 3, 1, 1])", (3, 2)),
    ("np.repeat(x, [1, 0, 2, 1, 0, 0])", (3, 2)),
    ("np.repeat(x, [0, 2, 0], axis=0)", (3, 2)),
    ("np.repeat(x, np.arange(3), axis=1)", (2, 3)),
    ("np.repeat(x, 2, axis=1)", (2, 3, 2)),
    ("x.repeat(2, axis=-1)", (3, 2)),
    ("x.repeat([0, 2, 1])", (3,)),
]


@pytest.mark.parametrize(("body", "shape"), SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_rule_against_central_differences(body, shape):
    """sum(w * op(x)) with random weights, so that each entry's own adjoint is checked."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(np.shape(eval(body, {"np": np, "x": x})))  # noqa: S307
    f = load(f"import numpy as np\n\n\ndef f(x, w):\n    return np.sum(w * {body})\n", "f")
    check_grad(f, [x, w], (0,))


@pytest.mark.parametrize(("body", "shape"), SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_rule_against_jax(body, shape):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(np.shape(eval(body, {"np": np, "x": x})))  # noqa: S307
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.sum(np.sin({body}) * w)\n",
             "f")
    f.__globals__["w"] = w
    jbody = body.replace("np.", "jnp.")
    if "repeat" in body:  # (jnp.repeat takes its repeats as an array, not a list)
        jbody = re.sub(r"(\[[^]]*\])", r"jnp.array(\1)", jbody)
    jf = eval("lambda x: jnp.sum(jnp.sin(" + jbody + ") * w)",  # noqa: S307
              {"jnp": jnp, "w": w})
    np.testing.assert_allclose(grad(f)(x), jax.grad(jf)(jnp.asarray(x)), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("body", ["np.roll(x, 1, axis=0)", "np.repeat(x, [2, 1, 0], axis=0)",
                                  "np.moveaxis(x, 0, 1)", "np.rollaxis(x, 1)",
                                  "np.atleast_3d(x)", "np.fliplr(x)"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_shape_rule_keeps_float32_and_gives_float_for_int(body, dtype):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.sum({body} ** 2)\n", "f")
    x = np.arange(6).reshape(3, 2).astype(dtype)
    g = grad(f)(x)
    assert g.shape == x.shape
    assert g.dtype == (np.float32 if dtype is np.float32 else np.float64)
    expected = check_grad(f, [x.astype(np.float64)], (0,))[0]
    np.testing.assert_allclose(g, expected, rtol=1e-6)


def test_repeat_of_a_repeated_value_accumulates_with_other_uses():
    """x is used by repeat and directly: both adjoints add up."""
    f = load("import numpy as np\n\n\ndef f(x):\n"
             "    return np.sum(np.repeat(x, [3, 1], axis=0) * x[0]) + np.sum(x ** 3)\n", "f")
    check_grad(f, [np.random.default_rng(1).standard_normal((2, 3))], (0,))


def test_repeat_with_repeats_computed_from_the_input():
    """Repeats from x itself (piecewise constant): each entry's gradient is its count,
    also where the last entries are repeated zero times."""
    f = load("import numpy as np\n\n\ndef f(x):\n"
             "    return np.sum(np.repeat(x, x.astype(int)))\n", "f")
    x = np.array([0.3, 1.7, 2.2, 0.9])
    np.testing.assert_array_equal(grad(f)(x), [0.0, 1.0, 2.0, 0.0])
    check_grad(f, [x], (0,))


def test_atleast_1d_of_several_arrays_is_refused_with_its_location():
    f = load("import numpy as np\n\n\ndef f(x):\n    return np.sum(np.atleast_1d(x, x))\n",
             "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones(2))
    assert str(e.value).splitlines()[0].endswith(
        ":5:19: np.atleast_1d takes at most 1 arguments here")
    assert "supported instead: np.atleast_1d(a)" in str(e.value)


# --- linear algebra, one result each (issue 13): np.linalg inv, solve, det, pinv, cholesky,
# matrix_power, multi_dot; scipy.linalg solve_triangular, solve, inv, det, cholesky ---

LINALG_HEADER = """import numpy as np
import scipy.linalg
from scipy.linalg import solve_triangular


def sym(a):
    return (a + np.swapaxes(a, -1, -2)) / 2

"""


def _linalg_value(rng, spec, shape):
    """A random operand: "G" a matrix (stack) far from singular, its triangles too (normal
    entries plus 4 I); "S" symmetric positive definite; "R" normal entries."""
    x = rng.standard_normal(shape)
    if spec == "G":
        return x + 4 * np.eye(shape[-1])
    if spec == "S":
        return x @ np.swapaxes(x, -1, -2) / shape[-1] + np.eye(shape[-1])
    return x


# (body over a and b, then a's and b's kinds and shapes). Functions that read one triangle
# of a symmetric matrix (cholesky, solve and inv with assume_a 'sym', 'pos', 'her') have
# the symmetric gradient (as JAX's): central differences see them through sym(a).
LINALG_CASES = [
    ("np.linalg.inv(a)", "G", (3, 3)),
    ("np.linalg.inv(a)", "G", (2, 3, 3)),
    ("np.linalg.inv(a)", "G", (2, 1, 3, 3)),
    ("np.linalg.solve(a, b)", "G", (3, 3), "R", (3,)),
    ("np.linalg.solve(a, b)", "G", (3, 3), "R", (3, 2)),
    ("np.linalg.solve(a, b)", "G", (2, 3, 3), "R", (3,)),
    ("np.linalg.solve(a, b)", "G", (2, 3, 3), "R", (3, 2)),
    ("np.linalg.solve(a, b)", "G", (3, 3), "R", (2, 3, 2)),
    ("np.linalg.solve(a, b)", "G", (2, 1, 3, 3), "R", (4, 3, 1)),
    ("np.linalg.solve(a, b)", "G", (2, 3, 3), "R", (2, 3, 4)),
    ("np.linalg.solve(a, b[..., None])[..., 0]", "G", (2, 3, 3), "R", (2, 3)),
    ("np.linalg.det(a)", "R", (4, 4)),
    ("np.linalg.det(a)", "R", (2, 3, 3)),
    ("np.linalg.det(a)", "R", (1, 1)),
    ("np.linalg.pinv(a)", "R", (4, 2)),
    ("np.linalg.pinv(a)", "R", (2, 4)),
    ("np.linalg.pinv(a)", "R", (3, 3)),
    ("np.linalg.pinv(a)", "R", (2, 4, 3)),
    ("np.linalg.pinv(a)", "R", (2, 3, 5)),
    ("np.linalg.pinv(a, 1e-10)", "R", (4, 2)),
    ("np.linalg.pinv(a, rtol=1e-10)", "R", (2, 4)),
    ("np.linalg.pinv(a.T @ a)", "R", (2, 4)),  # rank 2 of 4, as autograd's low rank test
    ("np.linalg.cholesky(sym(a))", "S", (3, 3)),
    ("np.linalg.cholesky(sym(a))", "S", (2, 4, 4)),
    ("np.linalg.cholesky(sym(a), upper=True)", "S", (3, 3)),
    ("np.linalg.matrix_power(a, 0)", "R", (3, 3)),
    ("np.linalg.matrix_power(a, 1)", "R", (3, 3)),
    ("np.linalg.matrix_power(a, 2)", "R", (3, 3)),
    ("np.linalg.matrix_power(a, 5)", "R", (2, 3, 3)),
    ("np.linalg.matrix_power(a, -1)", "G", (3, 3)),
    ("np.linalg.matrix_power(a, -3)", "G", (2, 3, 3)),
    ("np.linalg.multi_dot([a, b])", "R", (2, 3), "R", (3, 4)),
    ("np.linalg.multi_dot([a, b, a.T])", "R", (2, 3), "R", (3, 3)),
    ("np.linalg.multi_dot([b, a, a.T, b])", "R", (3, 4), "R", (3,)),
    ("np.linalg.multi_dot([b, a, a.T])", "R", (3, 4), "R", (3,)),
    ("solve_triangular(a, b)", "G", (3, 3), "R", (3,)),
    ("solve_triangular(a, b, lower=True)", "G", (3, 3), "R", (3, 2)),
    ("solve_triangular(a, b, trans=1)", "G", (3, 3), "R", (3,)),
    ("solve_triangular(a, b, trans='T', lower=True)", "G", (3, 3), "R", (3, 2)),
    ("solve_triangular(a, b, trans='C')", "G", (3, 3), "R", (3, 2)),
    ("solve_triangular(a, b, 2, True)", "G", (3, 3), "R", (3,)),
    ("solve_triangular(a, b, trans='N', lower=True, unit_diagonal=True)", "G", (3, 3),
     "R", (3,)),
    ("solve_triangular(a, b, trans=1, unit_diagonal=True)", "G", (3, 3), "R", (3, 2)),
    ("solve_triangular(a, b, lower=True, check_finite=False)", "G", (2, 3, 3), "R", (3,)),
    ("solve_triangular(a, b, trans='T')", "G", (2, 3, 3), "R", (2, 3, 2)),
    ("scipy.linalg.solve(a, b)", "G", (3, 3), "R", (3,)),
    ("scipy.linalg.solve(a, b, assume_a='gen')", "G", (3, 3), "R", (3, 2)),
    ("scipy.linalg.solve(a, b, assume_a='general', transposed=True)", "G", (3, 3), "R", (3,)),
    ("scipy.linalg.solve(a, b)", "G", (2, 3, 3), "R", (3,)),
    ("scipy.linalg.solve(a, b, transposed=True)", "G", (2, 3, 3), "R", (2, 3, 2)),
    ("scipy.linalg.solve(sym(a), b, assume_a='sym')", "G", (3, 3), "R", (3, 2)),
    ("scipy.linalg.solve(sym(a), b, assume_a='pos')", "S", (3, 3), "R", (3,)),
    ("scipy.linalg.solve(sym(a), b, assume_a='pos', lower=True)", "S", (2, 3, 3), "R", (3,)),
    ("scipy.linalg.solve(sym(a), b, assume_a='her', lower=True)", "G", (3, 3), "R", (3,)),
    ("scipy.linalg.solve(a, b, assume_a='upper triangular')", "G", (3, 3), "R", (3,)),
    ("scipy.linalg.solve(a, b, assume_a='lower triangular')", "G", (3, 3), "R", (3, 2)),
    ("scipy.linalg.solve(a, b, assume_a='diagonal')", "G", (3, 3), "R", (3,)),
    ("scipy.linalg.solve(a, b, assume_a='tridiagonal')", "G", (4, 4), "R", (4,)),
    ("scipy.linalg.inv(a)", "G", (3, 3)),
    ("scipy.linalg.inv(a, check_finite=False)", "G", (2, 3, 3)),
    ("scipy.linalg.inv(sym(a), assume_a='pos')", "S", (3, 3)),
    ("scipy.linalg.inv(a, assume_a='lower triangular')", "G", (3, 3)),
    ("scipy.linalg.det(a)", "R", (4, 4)),
    ("scipy.linalg.det(a)", "R", (2, 3, 3)),
    ("scipy.linalg.cholesky(sym(a))", "S", (3, 3)),
    ("scipy.linalg.cholesky(sym(a), lower=True)", "S", (3, 3)),
    ("scipy.linalg.cholesky(sym(a), True)", "S", (2, 3, 3)),
]


def _linalg_case(case, seed=13):
    body, *specs = case
    rng = np.random.default_rng(seed)
    args = [_linalg_value(rng, specs[k], specs[k + 1]) for k in range(0, len(specs), 2)]
    names = ["a", "b"][:len(args)]
    value = eval(body, {"np": np, "scipy": __import__("scipy.linalg"),  # noqa: S307
                        "solve_triangular": __import__("scipy.linalg").linalg.solve_triangular,
                        "sym": lambda a: (a + np.swapaxes(a, -1, -2)) / 2,
                        **dict(zip(names, args, strict=True))})
    w = rng.standard_normal(np.shape(value))
    f = load(LINALG_HEADER + f"\ndef f({', '.join(names)}, w):\n    return np.sum(w * {body})\n",
             "f")
    return f, args, w


@pytest.mark.parametrize("case", LINALG_CASES, ids=[" ".join(map(str, c)) for c in LINALG_CASES])
def test_linalg_rule_against_central_differences(case):
    """sum(w * op(a, b)) with random weights, so that each entry's own adjoint is checked,
    with respect to a and b."""
    pytest.importorskip("scipy")
    f, args, w = _linalg_case(case)
    check_grad(f, [*args, w], tuple(range(len(args))), rtol=1e-6, atol=1e-8)


_JAX_LINALG = [c for c in LINALG_CASES if "scipy" not in c[0] and "solve_triangular" not in
               c[0] and "rcond" not in c[0] and "1e-10" not in c[0]]


@pytest.mark.parametrize("case", _JAX_LINALG, ids=[" ".join(map(str, c)) for c in _JAX_LINALG])
def test_linalg_rule_against_jax(case):
    """Each adjoint entry for entry as JAX's (cholesky's symmetric one included)."""
    pytest.importorskip("scipy")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    f, args, w = _linalg_case(case, seed=5)
    body = case[0].replace("np.", "jnp.")
    names = ["a", "b"][:len(args)]
    jf = eval(f"lambda {', '.join(names)}: jnp.sum(w * {body})",  # noqa: S307
              {"jnp": jnp, "w": w, "sym": lambda a: (a + jnp.swapaxes(a, -1, -2)) / 2})
    wrt = tuple(range(len(args)))
    ours = grad(f, wrt=wrt)(*args, w)
    theirs = jax.grad(jf, argnums=wrt)(*args)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o, t, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("body", [
    "np.linalg.cholesky(a)", "np.linalg.cholesky(a, upper=True)", "scipy.linalg.cholesky(a)",
    "scipy.linalg.cholesky(a, lower=True)"])
def test_cholesky_gradient_is_jax_symmetric_one(body):
    """On the matrix itself (not made symmetric by the function): the symmetric adjoint
    (S + S.T) / 2 of JAX's jnp.linalg.cholesky and autograd's, which reads one triangle."""
    pytest.importorskip("scipy")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(3)
    a = _linalg_value(rng, "S", (2, 4, 4))
    w = rng.standard_normal((2, 4, 4))
    f = load(LINALG_HEADER + f"\ndef f(a, w):\n    return np.sum(w * {body})\n", "f")
    upper = "upper=True" in body or "lower=True" not in body and "scipy" in body
    factor = (lambda a: jnp.swapaxes(jnp.linalg.cholesky(a), -1, -2)) if upper else \
        jnp.linalg.cholesky
    expected = jax.grad(lambda a: jnp.sum(w * factor(a)))(a)
    ours = grad(f)(a, w)
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ours, np.swapaxes(ours, -1, -2), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("assume_a", ["sym", "pos", "her", "symmetric", "positive definite"])
def test_scipy_solve_of_a_symmetric_matrix_has_the_symmetric_gradient(assume_a):
    """What a symmetric a's solve reads is one triangle: the gradient is the symmetric part
    of the general solve's, whichever triangle (lower=) SciPy reads."""
    pytest.importorskip("scipy")
    rng = np.random.default_rng(4)
    a, b = _linalg_value(rng, "S", (3, 3)), rng.standard_normal((3, 2))
    f = load(LINALG_HEADER + "\ndef f(a, b):\n"
             "    return np.sum(np.sin(scipy.linalg.solve(a, b)))\n"
             "def g(a, b, lower):\n"
             f"    return np.sum(np.sin(scipy.linalg.solve(a, b, assume_a={assume_a!r}, "
             "lower=lower)))\n")
    general = grad(f.f)(a, b)
    for lower in (False, True):
        np.testing.assert_allclose(grad(f.g)(a, b, lower), (general + general.T) / 2,
                                   rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(grad(f.g, wrt=1)(a, b, lower), grad(f.f, wrt=1)(a, b),
                                   rtol=1e-12)


def test_scipy_solve_reads_only_the_triangle_it_is_told():
    """With garbage below the diagonal (assume_a='pos', lower=False reads the upper
    triangle), the adjoint of b is that of the symmetric matrix SciPy solves with."""
    pytest.importorskip("scipy")
    rng = np.random.default_rng(6)
    a = _linalg_value(rng, "S", (3, 3))
    messy = np.triu(a) + np.tril(rng.standard_normal((3, 3)), -1)
    b = rng.standard_normal(3)
    f = load(LINALG_HEADER + "\ndef f(a, b):\n"
             "    return np.sum(np.sin(scipy.linalg.solve(a, b, assume_a='pos')))\n", "f")
    check_grad(f, [messy, b], (1,))
    np.testing.assert_allclose(grad(f)(messy, b), grad(f)(a, b), rtol=1e-12)


@pytest.mark.parametrize("body", ["np.linalg.det(a)", "scipy.linalg.det(a)"])
@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_det_at_singular_matrices_is_exact(body, rank):
    """det is a polynomial: at a singular matrix its gradient is the cofactor matrix (0
    below rank n - 1), finite and exact, as JAX's, never NaN; in a stack with regular
    matrices and with nearly singular ones too."""
    pytest.importorskip("scipy")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    rng = np.random.default_rng(rank)
    singular = rng.standard_normal((4, rank)) @ rng.standard_normal((rank, 4))
    near = singular + 1e-9 * rng.standard_normal((4, 4))
    a = np.stack([singular, near, rng.standard_normal((4, 4))])
    f = load(LINALG_HEADER + f"\ndef f(a):\n    return np.sum({body})\n", "f")
    with np.errstate(all="raise"):
        ours = grad(f)(a)
    expected = jax.grad(lambda a: jnp.sum(jnp.linalg.det(a)))(a)
    assert np.all(np.isfinite(ours))
    np.testing.assert_allclose(ours, expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(grad(f)(singular), expected[0], rtol=1e-7, atol=1e-9)


LINALG_KINDS = ["np.linalg.inv(a)", "np.linalg.solve(a, b)", "np.linalg.det(a)",
                "np.linalg.pinv(a)", "np.linalg.cholesky(sym(a))",
                "np.linalg.matrix_power(a, 2)", "np.linalg.multi_dot([a, b, a])",
                "solve_triangular(a, b, lower=True)", "scipy.linalg.solve(a, b)",
                "scipy.linalg.inv(a)", "scipy.linalg.det(a)", "scipy.linalg.cholesky(sym(a))"]


@pytest.mark.parametrize("body", LINALG_KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_linalg_rule_keeps_float32_and_gives_float_for_int(body, dtype):
    """float32 matrices give float32 gradients (computed in float32); integer ones float64,
    as the gradient of their float64 copies."""
    pytest.importorskip("scipy")
    f = load(LINALG_HEADER + f"\ndef f(a, b):\n    return np.sum(np.sin({body}))\n", "f")
    a = np.array([[5, 1, 2], [1, 4, 0], [2, 1, 6]])
    b = np.array([[1, 0, 2], [2, 1, 0], [0, 3, 1]]) if "multi_dot" in body else \
        np.array([1, 2, 3])
    ga, gb = grad(f, wrt=(0, 1))(a.astype(dtype), b.astype(dtype))
    single = dtype is np.float32
    assert ga.dtype == gb.dtype == (np.float32 if single else np.float64)
    expected = check_grad(f, [a.astype(float), b.astype(float)], (0, 1))
    np.testing.assert_allclose(ga, expected[0], rtol=1e-4 if single else 1e-12, atol=1e-5)
    np.testing.assert_allclose(gb, expected[1], rtol=1e-4 if single else 1e-12, atol=1e-5)


def test_gaussian_process_nll_against_jax():
    """The negative log marginal likelihood of a GP as written in practice (SciPy's upper
    factor here, then two triangular solves, one transposed), against JAX, with respect
    to the log-hyperparameters and to the data."""
    pytest.importorskip("scipy")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    jsl = pytest.importorskip("jax.scipy.linalg")
    f = load(LINALG_HEADER + """
def nll(theta, X, y):
    d = X[:, None, :] - X[None, :, :]
    K = np.exp(theta[0]) * np.exp(-0.5 * np.sum(d ** 2, axis=-1) / np.exp(2 * theta[1]))
    K = K + np.exp(theta[2]) * np.eye(len(y))
    U = scipy.linalg.cholesky(K)
    z = solve_triangular(U, y, trans='T')
    alpha = solve_triangular(U, z)
    return 0.5 * np.dot(y, alpha) + np.sum(np.log(np.diagonal(U))) + \\
        0.5 * len(y) * np.log(2 * np.pi)
""", "nll")

    def jnll(theta, X, y):
        d = X[:, None, :] - X[None, :, :]
        K = jnp.exp(theta[0]) * jnp.exp(-0.5 * jnp.sum(d ** 2, axis=-1) / jnp.exp(2 * theta[1]))
        K = K + jnp.exp(theta[2]) * jnp.eye(len(y))
        U = jsl.cholesky(K)
        alpha = jsl.solve_triangular(U, jsl.solve_triangular(U, y, trans="T"))
        return 0.5 * jnp.dot(y, alpha) + jnp.sum(jnp.log(jnp.diagonal(U))) + \
            0.5 * len(y) * jnp.log(2 * jnp.pi)

    rng = np.random.default_rng(8)
    X, y = rng.uniform(0, 3, (12, 2)), rng.standard_normal(12)
    theta = np.array([0.3, -0.2, -1.5])
    ours = grad(f, wrt=(0, 1, 2))(theta, X, y)
    theirs = jax.grad(jnll, argnums=(0, 1, 2))(theta, X, y)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o, t, rtol=1e-9, atol=1e-11)
    check_grad(f, [theta, X, y], (0, 1, 2))


def test_linalg_refusals_are_located():
    f = load(LINALG_HEADER + """
def banded(a, b):
    return np.sum(scipy.linalg.solve(a, b, assume_a='banded'))


def hermitian(a):
    return np.sum(np.linalg.pinv(a, hermitian=True))


def banded_later(a, b, how):
    return np.sum(scipy.linalg.solve(a, b, assume_a=how))
""")
    a, b = 2 * np.eye(3), np.ones(3)
    with pytest.raises(SymdiffError) as e:
        grad(f.banded)(a, b)
    assert str(e.value).splitlines()[0].endswith(
        ":11:19: scipy.linalg.solve with assume_a='banded' is not supported")
    assert str(e.value).splitlines()[-1] == (
        "  supported instead: scipy.linalg.solve with assume_a None, 'gen', 'sym', 'pos', "
        "'her', 'upper triangular', 'lower triangular', 'diagonal' or 'tridiagonal'")
    with pytest.raises(SymdiffError) as e:
        grad(f.hermitian)(a)
    assert str(e.value).splitlines()[0].endswith(
        ":15:47: np.linalg.pinv(..., hermitian=...) is not supported")
    with pytest.raises(SymdiffError) as e:
        grad(f.banded_later)(a, b, "banded")
    assert str(e.value).splitlines()[0].endswith(
        ":19:5: symdiff differentiates scipy.linalg.solve with assume_a one of None, 'gen', "
        "'general', 'sym', 'symmetric', 'her', 'hermitian', 'pos', 'positive definite', "
        "'upper triangular', 'lower triangular', 'diagonal', 'tridiagonal', not 'banded'")


def test_numpy_only_gradients_do_not_import_scipy(tmp_path):
    """SciPy's rows are indexed only once the user's code has imported SciPy."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "numpy_only.py"
    script.write_text("import sys\nimport numpy as np\nfrom symdiff import grad\n\n\n"
                      "def f(a):\n    return np.linalg.det(np.linalg.inv(a))\n\n\n"
                      "print(grad(f)(2 * np.eye(2)).tolist(), 'scipy' in sys.modules)\n")
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root), "SYMDIFF_CACHE_DIR": "off",
                              "PATH": "/usr/bin:/bin"}, check=True)
    assert run.stdout.strip() == "[[-0.125, -0.0], [-0.0, -0.125]] False"

# --- scipy.stats densities (norm, t, gamma, chi2, beta, poisson, multivariate_normal,
# dirichlet) and scipy.signal.convolve / correlate (issue 13) ---

_STATS_METHODS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
# name -> shape parameters, and where x lies in units of the scale (the support's inside)
_DISTRIBUTIONS = {"norm": ((), (-2.0, 2.0)), "t": (("df",), (-2.0, 2.0)),
                  "gamma": (("a",), (0.3, 3.0)), "chi2": (("df",), (0.3, 3.0)),
                  "beta": (("a", "b"), (0.1, 0.9))}
_STATS_CASES = [(d, m) for d in _DISTRIBUTIONS for m in _STATS_METHODS]


def _stats_point(dist, rng, shape=(4, 3)):
    """x, the shapes, loc (1, 3) and scale (4, 1), with (x - loc) / scale inside the
    support, and shape parameters in (1.5, 4)."""
    shapes, (lo, hi) = _DISTRIBUTIONS[dist]
    loc = rng.uniform(-1.0, 1.0, (1, shape[1]))
    scale = rng.uniform(0.5, 2.0, (shape[0], 1))
    x = loc + scale * rng.uniform(lo, hi, shape)
    return [x, *(rng.uniform(1.5, 4.0, shape) for _ in shapes), loc, scale]


@pytest.mark.parametrize(("dist", "method"), _STATS_CASES,
                         ids=[f"{d}.{m}" for d, m in _STATS_CASES])
def test_stats_density_in_every_parameter_with_loc_and_scale_broadcast(dist, method):
    """Each density in x, its shapes, loc (1, 3) and scale (4, 1) against central
    differences, the three spellings of the call; a cdf's shapes are left out (refused)."""
    pytest.importorskip("scipy")
    shapes = _DISTRIBUTIONS[dist][0]
    params = ("x", *shapes, "loc", "scale")
    args = ", ".join(params)
    m = load(f"""
        import numpy as np
        import scipy.stats
        import scipy.stats as st
        from scipy.stats import {dist}


        def full(w, {args}):
            return np.sum(w * scipy.stats.{dist}.{method}({args}))


        def alias(w, {args}):
            return np.sum(w * st.{dist}.{method}({args}))


        def imported(w, {args}):
            return np.sum(w * {dist}.{method}({args}))
        """)
    rng = np.random.default_rng(13)
    point = _stats_point(dist, rng)
    weights = rng.normal(size=(4, 3))
    refused = "cdf" in method or "sf" in method
    wrt = tuple(i + 1 for i, p in enumerate(params) if not (refused and p in shapes))
    for f in (m.full, m.alias, m.imported):
        grads = check_grad(f, [weights, *point], wrt=wrt)
        for g, i in zip(grads, wrt, strict=True):
            assert g.shape == point[i - 1].shape and g.dtype == np.float64


@pytest.mark.parametrize(("dist", "method"), _STATS_CASES,
                         ids=[f"{d}.{m}" for d, m in _STATS_CASES])
def test_stats_density_of_python_floats_float32_and_keywords(dist, method):
    """Python floats give floats, float32 arrays float32; loc and scale by name (scale
    alone, loc left out) and the shapes by name."""
    pytest.importorskip("scipy")
    shapes = _DISTRIBUTIONS[dist][0]
    named = ", ".join(f"{p}={p}" for p in shapes)
    m = load(f"""
        import numpy as np
        from scipy.stats import {dist}


        def f(x, {''.join(p + ', ' for p in shapes)}scale):
            return np.sum({dist}.{method}(x, {named + ', ' if named else ''}scale=scale))
        """)
    rng = np.random.default_rng(7)
    scale = float(rng.uniform(0.5, 2.0))
    x = scale * float(rng.uniform(*_DISTRIBUTIONS[dist][1]))  # (loc 0)
    values = [x, *(float(v) for v in rng.uniform(1.5, 4.0, len(shapes))), scale]
    refused = "cdf" in method or "sf" in method
    wrt = tuple(i for i in range(len(values)) if not (refused and 0 < i <= len(shapes)))
    grads = check_grad(m.f, values, wrt=wrt)
    assert all(type(g) is float for g in grads)
    single = [np.full(3, v, dtype=np.float32) for v in values]
    for o, g in zip(grad(m.f, wrt=wrt)(*single), grads, strict=True):
        assert o.dtype == np.float32 and o.shape == (3,)
        np.testing.assert_allclose(o, np.full(3, g), rtol=2e-3, atol=1e-5)


def test_normal_tails_have_finite_right_gradients():
    """logcdf at -40 (where the cdf is 4e-350: 0 in floats), logsf at 40, logpdf far out:
    the derivatives are the hazard's, about -z, never log(0)'s inf or 0/0's NaN."""
    pytest.importorskip("scipy")
    m = load("""
        from scipy.stats import norm


        def logcdf(x, loc, scale):
            return norm.logcdf(x, loc, scale)


        def logsf(x):
            return norm.logsf(x)


        def logpdf(x):
            return norm.logpdf(x, 1.0, 2.0)


        def cdf(x):
            return norm.cdf(x)
        """)
    # d/dz log Phi(z) = phi(z) / Phi(z) = 40.02496884720727 at z = -40 (asymptotically
    # -z - 1/z + 2/z**3 ...)
    hazard = 40.02496884720727
    dx, dloc, dscale = grad(m.logcdf, wrt=(0, 1, 2))(-40.0, 0.0, 1.0)
    assert dx == pytest.approx(hazard, rel=1e-12)
    assert dloc == pytest.approx(-hazard, rel=1e-12)
    assert dscale == pytest.approx(40.0 * hazard, rel=1e-12)
    assert grad(m.logcdf)(-400.0, 0.0, 1.0) == pytest.approx(400.0025, rel=1e-6)
    assert grad(m.logcdf)(40.0, 0.0, 1.0) == 0.0
    assert grad(m.logsf)(40.0) == pytest.approx(-hazard, rel=1e-12)
    assert grad(m.logpdf)(1e6) == pytest.approx(-(1e6 - 1.0) / 4.0, rel=1e-12)
    assert grad(m.cdf)(-40.0) == 0.0 and grad(m.cdf)(0.0) == pytest.approx(
        1 / math.sqrt(2 * math.pi), rel=1e-15)


def test_densities_outside_their_support_have_gradient_zero():
    """Where the pdf and cdf are flat (x below 0 for gamma, beyond 1 for beta), 0: no NaN
    of a log of a negative number."""
    pytest.importorskip("scipy")
    m = load("""
        import numpy as np
        from scipy.stats import beta, gamma


        def f(x, a):
            return np.sum(gamma.pdf(x, a) + gamma.cdf(x, 2.0) + beta.pdf(x, a, 2.0)
                          + beta.sf(x, 2.0, 3.0))


        def g(x, a):
            return np.sum(beta.pdf(x, a, 2.0) + beta.logsf(x, 2.0, 3.0, -1.0, 0.5))
        """)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f, x in ((m.f, np.array([-1.0, -0.5, -3.0])), (m.g, np.array([1.5, 1.01, 2.0]))):
            dx, da = grad(f, wrt=(0, 1))(x, np.array([1.5, 2.0, 2.5]))
            assert np.all(dx == 0.0) and np.all(da == 0.0)


@pytest.mark.parametrize(("call", "parameter"), [
    ("gamma.cdf(x, p)", "a"), ("gamma.logsf(x, p, 0.0, 2.0)", "a"),
    ("t.cdf(x, p)", "df"), ("chi2.sf(x, df=p)", "df"), ("beta.cdf(x, 2.0, p)", "b"),
    ("beta.logcdf(x, p, 2.0)", "a")])
def test_a_cdf_is_refused_in_its_shape_parameters(call, parameter):
    pytest.importorskip("scipy")
    m = load(f"""
        from scipy.stats import beta, chi2, gamma, t


        def f(x, p):
            return {call}
        """)
    name = call.split("(")[0]
    argument = "p"
    with pytest.raises(SymdiffError) as e:
        grad(m.f, wrt=1)(0.4, 2.0)
    line = f"        return {call}"
    caret = " " * (line.index(argument, len("        return ") + len(name))) + "^"
    assert str(e.value).split("\n", 1)[1] == (
        f"{line}\n{caret}\n"
        f"  supported instead: {parameter} as a constant: a number, or a value that does not "
        "depend on the differentiated inputs")
    assert str(e.value).split("\n")[0].endswith(
        f": {name} is not differentiated in {parameter}: its derivative in {parameter} "
        "has no closed form")
    check_grad(m.f, [0.4, 2.0], wrt=(0,))  # in x, it is


def test_poisson_in_mu_and_its_counts_refused():
    pytest.importorskip("scipy")
    m = load("""
        import numpy as np
        from scipy.stats import poisson


        def f(mu, k):
            return np.sum(poisson.logpmf(k, mu) + poisson.pmf(k, mu) * 2.0
                          + poisson.cdf(k, mu, 1.0) + poisson.logsf(k, mu))


        def g(k, mu):
            return np.sum(poisson.pmf(k, mu))


        def off_counts(mu):
            return np.sum(poisson.pmf(np.array([2.5, -1.0]), mu))
        """)
    rng = np.random.default_rng(3)
    check_grad(m.f, [rng.uniform(1.0, 4.0, (2, 1)), np.array([[0.0, 1.0, 4.0]])], wrt=(0,))
    check_grad(m.f, [2.5, 3.0], wrt=(0,))
    assert grad(m.off_counts)(np.array([1.5, 2.0])).tolist() == [0.0, 0.0]
    with pytest.raises(SymdiffError) as e:
        grad(m.g)(np.array([1.0, 2.0]), 2.0)
    assert str(e.value).split("\n")[0].endswith(
        ":12:31: k must not depend on the differentiated inputs")
    assert str(e.value).split("\n")[3] == \
        "  supported instead: a constant k, such as a number or x.shape"


def _spd(rng, n):
    a = rng.normal(size=(n, n))
    return a @ a.T + n * np.eye(n)


def test_multivariate_normal_in_x_mean_and_cov():
    """x a point or rows of points, the mean, cov (through an SPD matrix made of s, and
    along symmetric directions directly), cov as a vector of variances; pdf too."""
    pytest.importorskip("scipy")
    m = load("""
        import numpy as np
        from scipy.stats import multivariate_normal


        def logpdf(x, mean, cov):
            return np.sum(multivariate_normal.logpdf(x, mean, cov))


        def pdf(x, mean, s):
            return np.sum(multivariate_normal.pdf(x, mean=mean, cov=s @ s.T + np.eye(3)))


        def diagonal(x, mean, v):
            return np.sum(multivariate_normal.logpdf(x, mean, v ** 2))
        """)
    rng = np.random.default_rng(5)
    mean, cov, s = rng.normal(size=3), _spd(rng, 3), rng.normal(size=(3, 3))
    for x in (rng.normal(size=(4, 3)), rng.normal(size=3)):
        check_grad(m.logpdf, [x, mean, cov], wrt=(0, 1))
        check_grad(m.pdf, [x, mean, s], wrt=(0, 1, 2))
        check_grad(m.diagonal, [x, mean, rng.uniform(1.0, 2.0, 3)], wrt=(0, 1, 2))
        d = grad(m.logpdf, wrt=2)(x, mean, cov)
        assert np.allclose(d, d.T)
        direction = rng.normal(size=(3, 3))
        direction += direction.T
        h = 1e-6
        numeric = (m.logpdf(x, mean, cov + h * direction)
                   - m.logpdf(x, mean, cov - h * direction)) / (2 * h)
        assert np.sum(d * direction) == pytest.approx(numeric, rel=1e-6)


def test_multivariate_normal_matches_jax():
    pytest.importorskip("scipy")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jmvn = pytest.importorskip("jax.scipy.stats").multivariate_normal
    m = load("""
        import numpy as np
        from scipy.stats import multivariate_normal


        def f(x, mean, cov):
            return np.sum(multivariate_normal.logpdf(x, mean, cov))
        """)
    rng = np.random.default_rng(8)
    args = (rng.normal(size=(5, 3)), rng.normal(size=3), _spd(rng, 3))
    ours = grad(m.f, wrt=(0, 1, 2))(*args)
    theirs = jax.grad(lambda x, mu, c: jax.numpy.sum(jmvn.logpdf(x, mu, c)),
                      argnums=(0, 1, 2))(*args)
    for o, t in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(o, np.asarray(t), rtol=1e-8, atol=1e-10)


def test_multivariate_normal_allow_singular_is_refused():
    pytest.importorskip("scipy")
    m = load("""
        from scipy.stats import multivariate_normal


        def f(x, cov):
            return multivariate_normal.logpdf(x, None, cov, allow_singular=True)
        """)
    with pytest.raises(SymdiffError) as e:
        grad(m.f)(0.5, 2.0)
    assert str(e.value).split("\n")[0].endswith(
        ": multivariate_normal.logpdf(..., allow_singular=...) is not supported")
    assert "supported instead: multivariate_normal.logpdf(x, mean, cov)" in str(e.value)


def test_dirichlet_in_x_and_alpha():
    """alpha against central differences; x (points on the simplex, its columns) along
    directions that keep it there, also with the last entry left out."""
    pytest.importorskip("scipy")
    m = load("""
        import numpy as np
        from scipy.stats import dirichlet


        def logpdf(x, alpha):
            return np.sum(dirichlet.logpdf(x, alpha))


        def pdf(x, alpha):
            return np.sum(dirichlet.pdf(x, alpha) * 2.0)


        def through_softmax(y, alpha):
            return dirichlet.logpdf(np.exp(y) / np.sum(np.exp(y)), alpha)
        """)
    rng = np.random.default_rng(9)
    alpha = rng.uniform(1.0, 3.0, 4)
    points = rng.dirichlet(alpha, size=3).T
    for f in (m.logpdf, m.pdf):
        for x in (points, points[:, 0], points[:-1], points[:-1, 0]):
            check_grad(f, [x, alpha], wrt=(1,))
            d = rng.normal(size=x.shape)
            if x.shape[0] == 4:
                d -= np.mean(d, axis=0)
            h = 1e-6
            numeric = (f(x + h * d, alpha) - f(x - h * d, alpha)) / (2 * h)
            assert np.sum(grad(f)(x, alpha) * d) == pytest.approx(numeric, rel=1e-6)
    check_grad(m.through_softmax, [rng.normal(size=4), alpha], wrt=(0, 1))


_CONVOLVE_SHAPES = [((7,), (3,)), ((3,), (7,)), ((4,), (4,)), ((1,), (5,)), ((5, 6), (2, 3)),
                    ((2, 3), (5, 6)), ((4, 4), (4, 4)), ((3, 5), (2, 2))]


@pytest.mark.parametrize("how", ["convolve", "correlate"])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize(("shape1", "shape2"), _CONVOLVE_SHAPES)
def test_convolve_and_correlate_in_both_operands(how, mode, shape1, shape2):
    """Every mode, 1-D and 2-D, either operand larger ('valid' swaps them when in2 is
    larger in every dimension); method= is accepted, and changes nothing."""
    pytest.importorskip("scipy")
    m = load(f"""
        import numpy as np
        import scipy.signal
        from scipy.signal import {how}


        def f(a, b, w):
            return np.sum(w * scipy.signal.{how}(a, b, mode="{mode}"))


        def g(a, b, w):
            return np.sum(w * {how}(a, b, "{mode}", method="direct"))
        """)
    rng = np.random.default_rng(11)
    a, b = rng.normal(size=shape1), rng.normal(size=shape2)
    w = rng.normal(size=getattr(__import__("scipy.signal").signal, how)(a, b, mode).shape)
    for f in (m.f, m.g):
        check_grad(f, [a, b, w], wrt=(0, 1))


def test_convolve_matches_jax_and_keeps_float32():
    pytest.importorskip("scipy")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jsig = pytest.importorskip("jax.scipy.signal")
    m = load("""
        import numpy as np
        from scipy.signal import convolve


        def f(a, b):
            return np.sum(np.sin(convolve(a, b, "same")))
        """)
    rng = np.random.default_rng(12)
    a, b = rng.normal(size=(4, 5)), rng.normal(size=(3, 2))
    theirs = jax.grad(lambda a, b: jax.numpy.sum(jax.numpy.sin(jsig.convolve(a, b, "same"))),
                      argnums=(0, 1))(a, b)
    for o, t in zip(grad(m.f, wrt=(0, 1))(a, b), theirs, strict=True):
        np.testing.assert_allclose(o, np.asarray(t), rtol=1e-10, atol=1e-12)
    da = grad(m.f)(a.astype(np.float32), b.astype(np.float32))
    assert da.dtype == np.float32


def test_convolve_keywords_scipy_lacks_are_refused():
    """autograd's axes= and dot_axes= are not SciPy's: refused where they are written."""
    pytest.importorskip("scipy")
    m = load("""
        import numpy as np
        import scipy.signal


        def f(a, b):
            return np.sum(scipy.signal.convolve(a, b, axes=([0], [0])))
        """)
    with pytest.raises(SymdiffError) as e:
        grad(m.f)(np.ones(3), np.ones(2))
    assert str(e.value).split("\n")[0].endswith(
        ": scipy.signal.convolve(..., axes=...) is not supported")
    assert "supported instead: scipy.signal.convolve(in1, in2, mode, method)" in str(e.value)


def test_scipy_stats_and_signal_are_imported_only_when_used():
    import subprocess
    import sys

    code = ("import sys, symdiff, symdiff.rules\n"
            "print(any(m in sys.modules for m in ('scipy.stats', 'scipy.signal')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"

# --- NumPy rules of issue 13 (items 2 and 3): np.cross with its axis keywords and vectors
# of 2, np.einsum (ellipsis, implicit output, diagonals, sublists), np.linalg.norm of every
# order, np.gradient, take, take_along_axis, pad, sort, partition, average, the stacking
# aliases, append, rot90, select, nan_to_num, real_if_close, angle ---

RNG_NP = np.random.default_rng(1313)


def _weighted(call, *shapes, wrt=None, rng=RNG_NP):
    """sum(w * call) over operands x0, x1, ... of ``shapes`` (random weights w, so that each
    entry's adjoint is checked), against central differences."""
    args = [rng.standard_normal(s) for s in shapes]
    names = [f"x{i}" for i in range(len(shapes))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        out = eval(call, {"np": np, **dict(zip(names, args, strict=True))})  # noqa: S307
    w = rng.standard_normal(np.shape(out))
    f = load(f"import numpy as np\n\n\ndef f({', '.join(names)}, w):\n"
             f"    return np.sum(w * {call})\n", "f")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return check_grad(f, [*args, w], tuple(range(len(shapes))) if wrt is None else wrt)


CROSS_CASES = [(f"np.cross(x0, x1, axisa={a}, axisb={b}, axisc={c}, axis={ax})", s, t)
               for a, b, c, ax, s, t in [
                   (-1, -1, -1, None, (3, 3), (3, 3)), (0, 1, 0, None, (3, 4), (4, 3)),
                   (0, 0, 1, None, (3, 4), (3, 1)), (1, -1, 0, 0, (3, 4), (3, 4)),
                   (-1, -1, -1, 1, (4, 3), (1, 3)), (-1, 0, -1, None, (2,), (2, 5)),
                   (-1, -1, -1, None, (2,), (3,)), (-1, -1, 0, None, (4, 3), (2,)),
                   (0, -1, -1, None, (2, 4), (4, 2))]]


@pytest.mark.parametrize(("call", "sa", "sb"), CROSS_CASES, ids=[c[0] for c in CROSS_CASES])
def test_cross_with_axis_keywords_and_vectors_of_two(call, sa, sb):
    _weighted(call, sa, sb)


def test_cross_keywords_by_position_and_float32():
    f = load("import numpy as np\n\n\ndef f(x, y):\n"
             "    return np.sum(np.cross(x, y, 0, 0, 0) ** 2)\n", "f")
    x, y = RNG_NP.standard_normal((3, 4)), RNG_NP.standard_normal((3, 4))
    check_grad(f, [x, y], (0, 1))
    g = grad(f, wrt=(0, 1))(x.astype(np.float32), np.arange(12).reshape(3, 4))
    assert g[0].dtype == np.float32 and g[1].dtype == np.float64


def test_cross_of_vectors_of_four_is_refused_as_numpy_refuses_them():
    f = load("import numpy as np\n\n\ndef f(x, y):\n    return np.sum(np.cross(x, y))\n", "f")
    with pytest.raises(ValueError, match="incompatible dimensions for cross product"):
        grad(f)(np.ones(4), np.ones(4))


EINSUM_CASES = [
    ("...ij,...jk->...ik", (2, 3), (3, 4)), ("...ij,...jk->...ik", (2, 2, 3), (1, 3, 4)),
    ("...ij,...jk->...ik", (0, 2, 3), (0, 3, 4)), ("jk...,lj...->lk...", (3, 2), (2, 3, 4)),
    ("j...k,lj...->lk...", (2, 2, 2), (2, 2, 2)), ("...k,...nk->...", (3, 5), (3, 10, 5)),
    ("...,...->...", (3,), (2, 3)), ("ijk,lji->lki", (3, 4, 4), (4, 4, 3)),
    ("ijk,lji,lli->lki", (3, 4, 4), (4, 4, 3), (4, 4, 3)), ("k,nk->", (5,), (10, 5)),
    ("abcd->bd", (3, 2, 3, 2)), ("ij,k", (3, 4), (3,)), ("ij,jk", (3, 4), (4, 2)),
    ("Ba,ab", (2, 3), (3, 4)), ("ii->i", (3, 3)), ("ii", (3, 3)), ("iij->ji", (3, 3, 2)),
    ("i,i->i", (1,), (3,)), ("ij->ji", (1, 1)),
]


@pytest.mark.parametrize(("spec", "shapes"), [(c[0], c[1:]) for c in EINSUM_CASES],
                         ids=[c[0] for c in EINSUM_CASES])
def test_einsum_ellipsis_implicit_output_and_diagonals(spec, shapes):
    names = ", ".join(f"x{i}" for i in range(len(shapes)))
    _weighted(f"np.einsum({spec!r}, {names})", *shapes)


def test_einsum_subscripts_given_as_an_argument():
    """The subscripts a parameter (not differentiated): as autograd's tests call it."""
    f = load("import numpy as np\n\n\ndef f(s, x, y):\n"
             "    return np.sum(np.sin(np.einsum(s, x, y)))\n", "f")
    check_grad(f, ["...ij,...jk->...ik", RNG_NP.standard_normal((2, 2, 3)),
                   RNG_NP.standard_normal((3, 4))], (1, 2))


def test_einsum_sublist_form():
    m = load("""
        import numpy as np


        def literal(a, b):
            return np.sum(np.einsum(a, [0, 1], b, [1, 2], [0, 2]) ** 2)


        def given(a, s, b, t):
            return np.sum(np.einsum(a, s, b, t) ** 2)
        """)
    a, b = RNG_NP.standard_normal((2, 3)), RNG_NP.standard_normal((3, 4))
    check_grad(m.literal, [a, b], (0, 1))
    check_grad(m.given, [a, (0, 1), b, (1, 2)], (0, 2))
    check_grad(m.given, [RNG_NP.standard_normal((3, 3)), (0, 0), b, (0, 1)], (0, 2))
    check_grad(m.given, [RNG_NP.standard_normal((2, 2, 3)), (Ellipsis, 0, 1), b,
                         (Ellipsis, 1, 2)], (0, 2))
    # a constant first operand and sublists in names: read as the sublist form when run
    check_grad(m.given, [a, (0, 1), b, (1, 2)], (2,))


def test_einsum_diagonal_keeps_float32():
    f = load("import numpy as np\n\n\ndef f(x):\n    return np.einsum('ii', x) ** 2\n", "f")
    g = grad(f)(np.arange(9, dtype=np.float32).reshape(3, 3))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, np.diag([24.0] * 3))
    np.testing.assert_array_equal(grad(f)(np.arange(9).reshape(3, 3)), np.diag([24.0] * 3))


NORM_VECTOR_ORDERS = [None, 1, 2, 3, 0.5, -1.5, np.inf, -np.inf, 0]
NORM_MATRIX_ORDERS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]
NORM_CASES = [(o, s, ax, kd) for kd in (False, True) for o in NORM_VECTOR_ORDERS
              for s, ax in [((5,), None), ((3, 4), 0), ((2, 3, 4), -1)]] + \
             [(o, s, ax, kd) for kd in (False, True) for o in NORM_MATRIX_ORDERS
              for s, ax in [((3, 4), None), ((4, 3), (1, 0)), ((2, 3, 4), (0, 2))]]


@pytest.mark.parametrize(("order", "shape", "axis", "keepdims"), NORM_CASES,
                         ids=[str(c) for c in NORM_CASES])
def test_norm_of_every_order_axis_and_keepdims(order, shape, axis, keepdims):
    _weighted(f"np.linalg.norm(x0, {order!r}, {axis!r}, {keepdims})".replace("inf", "np.inf"),
              shape)


@pytest.mark.parametrize(("order", "x", "expected"), [
    (np.inf, [1.0, -3.0, 3.0, 2.0], [0.0, -0.5, 0.5, 0.0]),  # ties share, as np.max
    (-np.inf, [1.0, -1.0, 3.0], [0.5, -0.5, 0.0]),
    (1, [0.0, -2.0], [0.0, -1.0]), (3, [0.0, 0.0], [0.0, 0.0]), (0, [0.0, 2.0], [0.0, 0.0]),
    (np.inf, [0.0, 0.0], [0.0, 0.0]),
])
def test_norm_at_its_kinks(order, x, expected):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.linalg.norm(x, {order!r})\n"
             .replace("inf", "np.inf"), "f")
    np.testing.assert_array_equal(grad(f)(np.array(x)), expected)


def test_matrix_norm_one_and_inf_split_tied_columns_and_rows():
    x = np.array([[1.0, -2.0], [2.0, 1.0]])  # column sums 3, 3; row sums 3, 3
    for order in (1, np.inf):
        f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.linalg.norm(x, {order})\n"
                 .replace("inf", "np.inf"), "f")
        np.testing.assert_array_equal(grad(f)(x), np.sign(x) / 2)


@pytest.mark.parametrize(("order", "x", "message"), [
    (2, np.eye(2), "ord=2) has no derivative where the largest singular value of x is "
     "repeated"),
    (-2, np.diag([2.0, 2.0, 3.0]), "ord=-2) has no derivative where the smallest singular "
     "value of x is repeated or 0"),
    (-2, np.diag([0.0, 2.0]), "ord=-2) has no derivative where the smallest singular value "
     "of x is repeated or 0"),
    ("nuc", np.ones((2, 2)), "ord='nuc') has no derivative where x does not have full rank "
     "(a singular value is 0)"),
    (0.5, np.array([0.0, 1.0]), "ord=0.5) has no derivative where an entry of x is 0 (an "
     "order below 1 has an infinite slope there)"),
])
def test_norm_where_it_has_no_derivative_is_refused_at_the_call(order, x, message):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.linalg.norm(x, {order!r})\n",
             "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(x)
    assert str(e.value).splitlines()[0].endswith(":5:5: np.linalg.norm(x, " + message)


@pytest.mark.parametrize(("order", "matrix"), [(1, True), (np.inf, True), (3, False),
                                               (-np.inf, False), ("nuc", True), (2, True),
                                               (-2, True), ("fro", True)])
def test_norm_keeps_float32_and_gives_float_for_int(order, matrix):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.linalg.norm(x, {order!r})\n"
             .replace("inf", "np.inf"), "f")
    x = np.array([[3.0, 1.0], [0.5, 2.0]])
    if not matrix:
        x = x.ravel()
    g = grad(f)(x.astype(np.float32))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, check_grad(f, [x])[0], rtol=1e-4)
    assert grad(f)((x * 2).astype(int)).dtype == np.float64


OTHER_NP_CASES = [
    ("np.gradient(x0)", (6,)), ("np.gradient(x0, 0.5)", (6,)),
    ("np.gradient(x0, edge_order=2)", (6,)), ("np.gradient(x0, 2.0, axis=1, edge_order=2)", (3, 5)),
    ("np.gradient(x0, axis=0)", (3, 5)), ("np.gradient(x0, axis=-1)", (2,)),
    ("np.gradient(x0, axis=(0, 1))[1]", (3, 4)),
    ("np.take(x0, [0, 2, 2])", (3, 2)), ("np.take(x0, [0, 2, -1], axis=1)", (2, 3)),
    ("np.take(x0, [[0, 4], [5, 1]], mode='wrap')", (3,)),
    ("np.take(x0, [0, 7], axis=0, mode='clip')", (3, 2)), ("x0.take([1, 1], axis=0)", (3, 2)),
    ("np.take_along_axis(x0, np.argsort(x0, axis=1), axis=1)", (3, 4)),
    ("np.take_along_axis(x0, np.array([[0], [2], [1]]), axis=1)", (3, 4)),
    ("np.take_along_axis(x0, np.array([[0, 0, 1]]), axis=0)", (3, 3)),
    ("np.take_along_axis(x0, np.array([3, 3, 0]), axis=None)", (2, 2)),
    *[(f"np.pad(x0, {width}, {mode!r})", (2, 3))
      for width in ["0", "3", "(3,)", "(3, 2)", "((3, 2),)", "((1, 2), (3, 4))", "[1, 2]"]
      for mode in ["constant", "edge", "reflect", "symmetric", "wrap"]],
    ("np.pad(x0, 2, mode='constant', constant_values=(1.0, 2.0))", (3,)),
    ("np.sort(x0)", (7,)), ("np.sort(x0, axis=0)", (3, 4)), ("np.sort(x0, None)", (3, 4)),
    ("np.sort(x0, 0, 'heapsort')", (3, 4)), ("np.sort(x0, kind='stable')", (5,)),
    *[(f"np.partition(x0, {k!r})", (7,)) for k in (0, 3, 6, (1, 4))],
    ("np.partition(x0, 2, axis=0)", (5, 3)),
    ("np.average(x0)", (5,)), ("np.average(x0, weights=x1)", (5,), (5,)),
    ("np.average(x0, 1, x1)", (3, 4), (4,)), ("np.average(x0, axis=0, weights=x1)", (3, 4), (3, 4)),
    ("np.average(x0, axis=0, weights=x1, keepdims=True)", (3, 4), (3,)),
    ("np.average(x0, axis=(0, 1))", (3, 4)),
    ("np.row_stack([x0, x1])", (2, 3), (1, 3)), ("np.row_stack((x0, x1))", (2,), (2,)),
    ("np.column_stack([x0, x1])", (2,), (2,)), ("np.column_stack([x0, x1])", (2,), (2, 3)),
    ("np.dstack([x0, x1])", (2,), (2,)), ("np.dstack([x0, x1])", (2, 3), (2, 3, 2)),
    ("np.append(x0, x1)", (2, 3), (4,)), ("np.append(x0, x1, axis=0)", (2, 3), (1, 3)),
    ("np.rot90(x0)", (2, 3)), ("np.rot90(x0, 2)", (2, 3)),
    ("np.rot90(x0, -1, axes=(1, 2))", (2, 3, 4)), ("np.rot90(x0, k=3, axes=(2, 0))", (2, 3, 4)),
    ("np.select([x0 > 0, x1 > 0], [x0, x1 ** 2])", (3, 4), (3, 4)),
    ("np.select([x0 > 0, x1 > 0], [x0, x1 ** 2], default=x1)", (3, 4), (3, 4)),
    ("np.select([x0 > 0], [x1], x0[0])", (3, 4), (4,)),
    ("np.nan_to_num(np.log(x0))", (4,)), ("np.real_if_close(x0)", (3,)), ("np.angle(x0)", (3,)),
]


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")
@pytest.mark.parametrize(("call", "shapes"), [(c[0], c[1:]) for c in OTHER_NP_CASES],
                         ids=[c[0] for c in OTHER_NP_CASES])
def test_numpy_rules_of_issue_13_against_central_differences(call, shapes):
    _weighted(call, *shapes)


def test_numpy_rules_of_issue_13_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = pytest.importorskip("jax.numpy")
    x = RNG_NP.standard_normal((3, 4))
    bodies = ["np.sort(x, axis=0)", "np.pad(x, ((1, 2), (2, 0)), 'reflect')",
              "np.pad(x, 2, 'symmetric')", "np.pad(x, (1, 3), 'wrap')", "np.rot90(x, 3)",
              "np.take(x, np.array([0, 3, 3]), axis=1)",
              "np.average(x, 0, np.arange(1.0, 4.0))",
              "np.gradient(x, 0.5, axis=0)", "np.cross(x[:, :3], x[:, 1:], axisc=0)",
              "np.einsum('ii->i', x[:, :3])", "np.linalg.norm(x, 'nuc')",
              "np.linalg.norm(x, -np.inf, 1)", "np.dstack([x, x ** 2])"]
    for body in bodies:
        f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.sum(np.sin({body}))\n", "f")
        jf = eval("lambda x: jnp.sum(jnp.sin(" + body.replace("np.", "jnp.") + "))",  # noqa: S307
                  {"jnp": jnp})
        np.testing.assert_allclose(grad(f)(x), jax.grad(jf)(jnp.asarray(x)), rtol=1e-10,
                                   atol=1e-12, err_msg=body)


def test_gradient_of_several_axes_unpacked():
    f = load("import numpy as np\n\n\ndef f(x):\n    gx, gy = np.gradient(x)\n"
             "    return np.sum(gx * x) + np.sum(gy ** 2)\n", "f")
    check_grad(f, [RNG_NP.standard_normal((3, 4))])


@pytest.mark.parametrize("body", ["np.sort(x)", "np.take(x, [2, 0, 0])",
                                  "np.pad(x, 1, 'reflect')", "np.gradient(x, axis=0)",
                                  "np.rot90(x)", "np.average(x, 0, weights=np.arange(1.0, 4.0))"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_numpy_rules_keep_float32_and_give_float_for_int(body, dtype):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.sum({body} ** 2)\n", "f")
    x = (np.arange(6).reshape(3, 2) * [1, -2]).astype(dtype)
    g = grad(f)(x)
    assert g.dtype == (np.float32 if dtype is np.float32 else np.float64)
    np.testing.assert_allclose(g, check_grad(f, [x.astype(np.float64)])[0], rtol=1e-5)


def test_sort_ties_follow_the_stable_order():
    f = load("import numpy as np\n\n\ndef f(x):\n"
             "    return np.sum(np.sort(x) * np.arange(4.0))\n", "f")
    np.testing.assert_array_equal(grad(f)(np.array([1.0, 1.0, 0.0, 1.0])), [1.0, 2.0, 0.0, 3.0])


def test_pad_constant_values_from_the_input():
    f = load("import numpy as np\n\n\ndef f(x):\n"
             "    return np.sum(np.pad(x, ((1, 0), (2, 1)), constant_values=x[0, 0] * 3) ** 2)\n",
             "f")
    check_grad(f, [RNG_NP.standard_normal((2, 3))])


def test_nan_to_num_replacements_from_the_input():
    """[x0 + nan, x1 + inf, x2] -> [x2, x2**2, x2]: the replaced entries' gradient goes
    to the replacements, none to x0 and x1."""
    f = load("import numpy as np\n\nC = np.array([np.nan, np.inf, 0.0])\n\n\ndef f(x):\n"
             "    return np.sum(np.nan_to_num(x + C, nan=x[2], posinf=x[2] ** 2) ** 2)\n", "f")
    np.testing.assert_array_equal(grad(f)(np.array([0.3, -1.0, 0.5])), [0.0, 0.0, 2.5])


@pytest.mark.parametrize(("body", "message"), [
    ("np.pad(x, 1, 'mean')", "np.pad with mode='mean' is not supported; the modes "
     "differentiated are 'constant', 'edge', 'reflect', 'symmetric', 'wrap'"),
    ("np.gradient(x, np.arange(3.0) ** 2)", "np.gradient is differentiated with a uniform "
     "spacing (a number), not with coordinates (an array)"),
])
def test_numpy_rules_refuse_with_the_call_located(body, message):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.sum({body})\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones(3))
    assert str(e.value).splitlines()[0].endswith(":5:5: " + message)


@pytest.mark.parametrize(("body", "message"), [
    ("np.average(x, weights=x, returned=True)[0]", "np.average(..., returned=...) is not "
     "supported"),
    ("np.nan_to_num(x, copy=False)", "np.nan_to_num(..., copy=...) is not supported"),
    ("np.pad(x, 1, 'reflect', reflect_type='odd')", "np.pad(..., reflect_type=...) is not "
     "supported"),
])
def test_numpy_rules_refuse_keywords_they_lack(body, message):
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.sum({body})\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones(3))
    assert message in str(e.value).splitlines()[0]


def test_gradient_spacing_from_the_input():
    m = load("""
        import numpy as np


        def one(x, h):
            return np.sum(np.sin(np.gradient(x, h * 2.0)))


        def several(x, h):
            a, b = np.gradient(x, h)
            return np.sum(np.sin(a) * b)
        """)
    check_grad(m.one, [RNG_NP.standard_normal(5), 0.7], (0, 1))
    check_grad(m.several, [RNG_NP.standard_normal((3, 4)), 0.7], (0, 1))


def test_einsum_optimize_keyword():
    m = load("""
        import numpy as np


        def string(x, y):
            return np.sum(np.sin(np.einsum('ij,jk', x, y, optimize=True)))


        def sublists(x, y):
            return np.sum(np.sin(np.einsum(x, [0, 1], y, [1, 2], optimize='greedy')))
        """)
    args = [RNG_NP.standard_normal((2, 3)), RNG_NP.standard_normal((3, 4))]
    check_grad(m.string, args, (0, 1))
    check_grad(m.sublists, args, (0, 1))

# --- Functions returning several values: np.linalg.slogdet, eigh, eigvalsh, svd, qr, lstsq;
# np.split, array_split, hsplit, vsplit, dsplit ---

_SEVERAL = "import numpy as np\n\n\n"


def _spd(rng, *shape):
    m = rng.standard_normal((*shape[:-1], shape[-1], shape[-1]))
    return m @ np.swapaxes(m, -1, -2) + shape[-1] * np.eye(shape[-1])


def test_slogdet_unpacked_indexed_and_batched():
    m = load(_SEVERAL + """
def unpacked(a):
    sign, logdet = np.linalg.slogdet(a)
    return sign * logdet

def indexed(a):
    return np.linalg.slogdet(a)[1] ** 2

def held(a):
    result = np.linalg.slogdet(a)
    return np.sum(result[1] * np.arange(1.0, 3.0)) + np.sum(result[0])

def sign_only(a):
    sign, _ = np.linalg.slogdet(a)
    return sign * np.sum(a ** 2)
""")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    check_grad(m.unpacked, [a])
    check_grad(m.unpacked, [-a])  # a negative determinant
    check_grad(m.indexed, [a])
    check_grad(m.held, [rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)])
    np.testing.assert_allclose(grad(m.sign_only)(a), 2 * a * np.sign(np.linalg.det(a)))


@pytest.mark.parametrize("uplo", ["", ", 'L'", ", 'U'", ", UPLO='U'"])
def test_eigh_reads_one_triangle_as_numpy_does(uplo):
    """On a matrix that is not symmetric, eigh reads one triangle: the gradient is the
    derivative of that function (central differences), as autograd's test_eigvalh_lower and
    test_eigvalh_upper check it; each output alone, and both."""
    m = load(_SEVERAL + f"""
def values(a):
    w, v = np.linalg.eigh(a{uplo})
    return np.sum(w * np.arange(4.0))

def vectors(a):
    w, v = np.linalg.eigh(a{uplo})
    return np.sum(v[0] ** 3 + v[:, 2] * np.arange(4.0))

def both(a):
    w, v = np.linalg.eigh(a{uplo})
    return np.sum(np.sin(w)) + np.sum((v * w) ** 2 * np.arange(4.0))
""")
    a = np.random.default_rng(1).standard_normal((4, 4))
    for f in (m.values, m.vectors, m.both):
        check_grad(f, [a])
    g = grad(m.both)(a)
    other = np.triu(g, 1) if "U" not in uplo else np.tril(g, -1)
    np.testing.assert_array_equal(other, 0.0)  # the triangle eigh never reads


def test_eigh_agrees_with_autograd():
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    src = """
def f(a):
    w, v = np.linalg.eigh(a, 'U')
    return np.sum(w ** 2) + np.sum(v[1] ** 3)
"""
    ours = load(_SEVERAL + src, "f")
    theirs = {"np": anp}
    exec(src, theirs)  # noqa: S102 - the same function, on autograd's NumPy
    a = np.random.default_rng(2).standard_normal((5, 5))
    np.testing.assert_allclose(grad(ours)(a), autograd.grad(theirs["f"])(a), rtol=1e-9,
                               atol=1e-12)


def test_eigh_and_eigvalsh_of_stacks():
    m = load(_SEVERAL + """
def f(a):
    w, v = np.linalg.eigh(a)
    return np.sum(w ** 2) + np.sum(v[..., 0, :] ** 3)

def g(a):
    return np.sum(np.linalg.eigvalsh(a, UPLO='U') * np.arange(3.0))
""")
    a = _spd(np.random.default_rng(3), 2, 3, 3)
    check_grad(m.f, [a])
    check_grad(m.g, [a + np.random.default_rng(4).standard_normal(a.shape)])


def test_eigh_eigenvectors_at_repeated_eigenvalues_are_refused_at_the_call():
    m = load(_SEVERAL + """
def f(a):
    w, v = np.linalg.eigh(a)
    return np.sum(v[0] ** 3)

def values(a):
    w, v = np.linalg.eigh(a)
    return np.sum(w ** 2)
""")
    with pytest.raises(SymdiffError) as e:
        grad(m.f)(np.diag([1.0, 1.0, 2.0]))
    assert str(e.value).splitlines()[0].endswith(
        ":6:5: np.linalg.eigh's eigenvectors have no gradient here: two eigenvalues are "
        "equal (closer than 1.5e-08 times the largest), so the vectors that go with them "
        "are not unique")
    assert "supported instead: a function of the eigenvalues alone (np.linalg.eigvalsh), " \
        "or a point whose eigenvalues are distinct" in str(e.value)
    # The eigenvalues alone are differentiable there.
    np.testing.assert_allclose(grad(m.values)(np.eye(3)), 2 * np.eye(3))


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3), (2, 4, 3)])
def test_svd_each_output_and_all(shape):
    m = load(_SEVERAL + """
def u(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.sum(u[..., 0, :] ** 3) + np.sum(u[..., -1] * u[..., 0])

def s(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return np.sum(s ** 3)

def vh(a):
    return np.sum(np.linalg.svd(a, full_matrices=False)[2][..., 1, :] ** 3)

def all3(a):
    u, s, vh = np.linalg.svd(a, False)
    return np.sum(u ** 3) + np.sum(np.sin(s)) + np.sum(vh ** 3)

def values(a):
    return np.sum(np.linalg.svd(a, compute_uv=False) ** 2)
""")
    a = np.random.default_rng(5).standard_normal(shape)
    for f in (m.u, m.s, m.vh, m.all3, m.values):
        check_grad(f, [a])


def test_svd_full_matrices_where_it_coincides_and_refused_where_not():
    m = load(_SEVERAL + """
def f(a):
    u, s, vh = np.linalg.svd(a)
    return np.sum(u ** 3) + np.sum(s) + np.sum(vh ** 3)

def s_only(a):
    return np.sum(np.linalg.svd(a)[1] ** 2)
""")
    rng = np.random.default_rng(6)
    check_grad(m.f, [rng.standard_normal((3, 3))])
    check_grad(m.s_only, [rng.standard_normal((4, 2))])  # u not used: fine
    with pytest.raises(SymdiffError) as e:
        grad(m.f)(rng.standard_normal((4, 2)))
    assert str(e.value).splitlines()[0].endswith(
        ":6:5: np.linalg.svd with full_matrices=True of a matrix that is not square: the "
        "columns of u past the first min(m, n) have no gradient")
    assert "supported instead: np.linalg.svd(a, full_matrices=False)" in str(e.value)


def test_svd_vectors_at_repeated_singular_values_are_refused():
    f = load(_SEVERAL + "def f(a):\n    u, s, vh = np.linalg.svd(a)\n"
             "    return np.sum(u[0] ** 3)\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.diag([2.0, 2.0, 1.0]))
    assert str(e.value).splitlines()[0].endswith(
        ":5:5: np.linalg.svd's singular vectors have no gradient here: two singular values "
        "are equal (closer than 1.5e-08 times the largest), so the vectors that go with "
        "them are not unique")


def test_svd_compute_uv_must_be_written_out():
    f = load(_SEVERAL + "def f(a, uv):\n    return np.sum(np.linalg.svd(a, compute_uv=uv))\n",
             "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.eye(2), False)
    assert str(e.value).splitlines()[0].endswith(
        ":5:47: np.linalg.svd's compute_uv must be written in the code (True or False): "
        "what the call returns depends on it")


@pytest.mark.parametrize("shape", [(4, 3), (3, 3), (2, 5, 3)])
def test_qr_reduced(shape):
    m = load(_SEVERAL + """
def f(a):
    q, r = np.linalg.qr(a)
    return np.sum(q ** 3) + np.sum(np.sin(r))

def r_only(a):
    return np.sum(np.linalg.qr(a)[1] ** 2)
""")
    a = np.random.default_rng(7).standard_normal(shape)
    check_grad(m.f, [a])
    check_grad(m.r_only, [a])


def test_qr_of_a_wide_matrix_and_other_modes_are_refused():
    m = load(_SEVERAL + """
def f(a):
    q, r = np.linalg.qr(a)
    return np.sum(r)

def raw(a):
    h, tau = np.linalg.qr(a, mode='raw')
    return np.sum(h)
""")
    with pytest.raises(SymdiffError) as e:
        grad(m.f)(np.ones((2, 3)) + np.eye(2, 3))
    assert str(e.value).splitlines()[0].endswith(
        ":6:5: np.linalg.qr is differentiated for a matrix with at least as many rows as "
        "columns, in the reduced mode (here q is 2x2 and r 2x3)")
    with pytest.raises(SymdiffError) as e:
        grad(m.raw)(np.eye(2))
    assert str(e.value).splitlines()[0].endswith(
        ":10:14: np.linalg.qr with mode='raw' is not supported")


def test_lstsq_solution_in_a_and_b():
    m = load(_SEVERAL + """
def f(a, b):
    x, residuals, rank, s = np.linalg.lstsq(a, b, rcond=None)
    return np.sum(x ** 2) * rank

def residuals(a, b):
    x, res, rank, s = np.linalg.lstsq(a, b, rcond=None)
    return np.sum(res)
""")
    rng = np.random.default_rng(8)
    a = rng.standard_normal((5, 3))
    check_grad(m.f, [a, rng.standard_normal(5)], wrt=(0, 1))
    check_grad(m.f, [a, rng.standard_normal((5, 2))], wrt=(0, 1))
    check_grad(m.f, [rng.standard_normal((3, 3)), rng.standard_normal(3)], wrt=(0, 1))
    with pytest.raises(SymdiffError) as e:
        grad(m.residuals)(a, rng.standard_normal(5))
    assert str(e.value).splitlines()[0].endswith(
        ":10:5: np.linalg.lstsq's residuals is not differentiated")
    with pytest.raises(SymdiffError) as e:  # rank deficient
        grad(m.f)(np.ones((4, 2)), np.ones(4))
    assert "np.linalg.lstsq's solution is differentiated where a has full column rank " \
        "(here rank 1 of 2 columns)" in str(e.value)


def test_split_parts_unpacked_indexed_and_passed_whole():
    m = load(_SEVERAL + """
def unpacked(x):
    a, b = np.split(x, 2)
    return np.sum(a * b ** 2)

def indexed(x):
    return np.sum(np.split(x, [1, 3], axis=1)[1] ** 3)

def whole(x):
    parts = np.array_split(x, 3)
    return np.sum(np.stack([parts[1], parts[2]]) ** 2) + np.sum(np.concatenate(parts) ** 3)

def direct(x):
    return np.sum(np.concatenate(np.hsplit(x, 2), axis=0) ** 3 * np.arange(2.0))

def loop(x):
    parts = np.vsplit(x, 3)
    total = 0.0
    for i in range(3):
        total = total + np.sum(parts[i] ** 2) * i
    return total

def depth(x):
    a, b = np.dsplit(x, [1])
    return np.sum(a ** 2) + np.sum(np.sin(b))
""")
    rng = np.random.default_rng(9)
    check_grad(m.unpacked, [rng.standard_normal(6)])
    check_grad(m.unpacked, [rng.standard_normal((4, 3))])
    check_grad(m.indexed, [rng.standard_normal((2, 5))])
    check_grad(m.whole, [rng.standard_normal(7)])
    check_grad(m.direct, [rng.standard_normal((3, 4))])
    check_grad(m.loop, [rng.standard_normal((6, 2))])
    check_grad(m.depth, [rng.standard_normal((2, 2, 3))])


def test_split_sections_must_be_written_in_the_code():
    f = load(_SEVERAL + "def f(x, n):\n    a, b = np.split(x, n)\n    return np.sum(a * b)\n",
             "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones(4), 2)
    assert str(e.value).splitlines()[0].endswith(
        ":5:12: np.split's sections must be written in the code: how many parts it returns "
        "depends on them")


@pytest.mark.parametrize("body", [
    "np.linalg.slogdet(x)[1]", "np.sum(np.linalg.eigh(x)[1] ** 3)",
    "np.sum(np.linalg.eigvalsh(x) ** 2)", "np.sum(np.linalg.svd(x)[0] ** 3)",
    "np.sum(np.linalg.qr(x)[0] ** 3)", "np.sum(np.linalg.lstsq(x, np.ones(3))[0] ** 2)",
    "np.sum(np.split(x, 3)[1] ** 2)"])
def test_several_outputs_keep_float32(body):
    f = load(_SEVERAL + f"def f(x):\n    return {body}\n", "f")
    x = _spd(np.random.default_rng(10), 3).astype(np.float32)
    g = grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, numeric_grad(f, [x.astype(np.float64)], 0), rtol=2e-3,
                               atol=2e-3)


def test_logsumexp_with_its_sign():
    pytest.importorskip("scipy")
    m = load("""
from scipy.special import logsumexp
import numpy as np


def f(a):
    r, s = logsumexp(a, axis=1, return_sign=True)
    return np.sum(r * s * np.arange(3.0))


def g(a):
    return logsumexp(a, return_sign=True)[0] ** 2


def sign(a, flag):
    return np.sum(logsumexp(a, return_sign=flag)[0])
""")
    a = np.random.default_rng(11).standard_normal((3, 4))
    check_grad(m.f, [a])
    check_grad(m.g, [a])
    with pytest.raises(SymdiffError) as e:
        grad(m.sign)(a, True)
    assert str(e.value).splitlines()[0].endswith(
        ":16:44: scipy.special.logsumexp's return_sign must be written in the code (True or "
        "False): what the call returns depends on it")


def test_cho_factor_and_cho_solve():
    pytest.importorskip("scipy")
    m = load("""
import numpy as np
import scipy.linalg
from scipy.linalg import cho_factor, cho_solve


def nll(K, y):
    c = cho_factor(K)
    alpha = cho_solve(c, y)
    return 0.5 * np.sum(y * alpha) + np.sum(np.log(np.diag(c[0])))


def lower(K, y):
    c, low = scipy.linalg.cho_factor(K, lower=True)
    return np.sum(cho_solve((c, low), y) ** 2)


def factor(L, y):
    return np.sum(cho_solve((L, True), y) ** 2)


def nested(K, y):
    return np.sum(cho_solve(cho_factor(K), y) ** 3)


def other_triangle(K):
    c, low = cho_factor(K)
    return np.sum(c)
""")
    rng = np.random.default_rng(12)
    k = _spd(rng, 4)
    y = rng.standard_normal(4)
    for f in (m.nll, m.lower, m.nested):
        check_grad(f, [k, y], wrt=(0, 1))
        check_grad(f, [k + rng.standard_normal((4, 4)), y], wrt=(0,))  # one triangle read
    check_grad(m.nested, [k, rng.standard_normal((4, 2))], wrt=(0, 1))
    check_grad(m.factor, [np.linalg.cholesky(k), y], wrt=(0, 1))
    with pytest.raises(SymdiffError) as e:
        grad(m.other_triangle)(k)
    assert str(e.value).splitlines()[0].endswith(
        ":27:5: scipy.linalg.cho_factor's c has no gradient outside the upper triangle, "
        "which holds the factor: its other entries are not defined")


def test_indexing_what_a_call_returns_alone_reads_its_entries():
    """logsumexp without return_sign and svd with compute_uv=False return one array:
    [0] of them is its first entry, not an output."""
    pytest.importorskip("scipy")
    f = load("import numpy as np\nfrom scipy.special import logsumexp\n\n\ndef f(x):\n"
             "    return logsumexp(x, axis=1)[0] + np.linalg.svd(x, compute_uv=False)[1] + "
             "logsumexp(x, return_sign=True)[0]\n", "f")
    check_grad(f, [np.random.default_rng(13).standard_normal((3, 4))])

# --- scipy.special (issue 13): expit, logit, erf..., gamma..., Bessel, xlogy, entropies,
# --- softmax, log_softmax, logsumexp's b=; the rows with static parameters; stable tails ---

STATIC_SPELLINGS = [(row, name) for row in rules.ELEMENTWISE for name in row.names if row.static]
# The values each row's static parameters (in the order of row.static) are tested at.
STATIC_VALUES = {
    "scipy.special.polygamma": [(0,), (1,), (3,)],
    "scipy.special.multigammaln": [(1,), (2,), (4,)],
    "scipy.special.gammainc": [(0.5,), (1.0,), (2.5,)],
    "scipy.special.gammaincc": [(0.5,), (1.0,), (2.5,)],
    "scipy.special.betainc": [(0.7, 1.5), (2.0, 0.8), (1.0, 1.0)],
    "scipy.special.iv": [(0,), (1.5,), (-0.5,)],
    "scipy.special.ive": [(0,), (1.5,), (3,)],
    "scipy.special.jv": [(0,), (1,), (2.5,)],
    "scipy.special.jn": [(0,), (2,)],
    "scipy.special.yn": [(0,), (1,), (2,)],
    "scipy.special.yv": [(0.5,), (2,)],
}


def test_every_static_row_has_values_and_resolves_to_itself():
    assert {name for _, name in STATIC_SPELLINGS} == set(STATIC_VALUES)
    for row, name in STATIC_SPELLINGS:
        assert lookup(resolve_name(name)) is row, name
        assert set(row.static) < set(row.params), name


def _static_args(row, statics, others):
    """The arguments in the row's order: the static values, and the others in turn."""
    given, rest = dict(zip(row.static, statics, strict=True)), iter(others)
    return [given[p] if p in given else next(rest) for p in row.params]


@pytest.mark.parametrize(("row", "name"), STATIC_SPELLINGS, ids=_ids(STATIC_SPELLINGS))
def test_static_row_against_central_differences(row, name):
    """Differentiated in its other parameters, on Python floats, arrays (summed), integers
    and float32; the static ones a Python number, or an array broadcast against x."""
    wrt = tuple(i for i, p in enumerate(row.params) if p not in row.static)
    scalar = make(name, row.params, reduce=False)
    summed = make(name, row.params, reduce=True)
    rng = np.random.default_rng(77)
    lo, hi = row.domain
    for statics in STATIC_VALUES[name]:
        others = [float(v) for v in rng.uniform(lo, hi, len(wrt))]
        args = _static_args(row, statics, others)
        check_types(check_grad(scalar, args, wrt=wrt), [args[i] for i in wrt])
        others = [rng.uniform(lo, hi, 5) for _ in wrt]
        check_grad(summed, _static_args(row, statics, others), wrt=wrt)
        single = grad(summed, wrt=wrt)(*_static_args(row, statics, [
            o.astype(np.float32) for o in others]))
        assert all(g.dtype == np.float32 for g in single)
    if name != "scipy.special.multigammaln":  # (SciPy takes one dimension d, a number)
        statics = [np.array(v).reshape(-1, 1) for v in zip(*STATIC_VALUES[name],
                                                             strict=True)]
        others = [rng.uniform(lo, hi, 4) for _ in wrt]
        check_grad(summed, _static_args(row, statics, others), wrt=wrt)
    integers = _static_args(row, STATIC_VALUES[name][0], [2] * len(wrt))
    if row.domain[1] > 2:  # (betainc's x lies in (0, 1))
        expected = grad(summed, wrt=wrt)(*[float(a) if i in wrt else a
                                           for i, a in enumerate(integers)])
        np.testing.assert_allclose(grad(summed, wrt=wrt)(*integers), expected)


SPECIAL = load("""
import numpy as np
import scipy
import scipy.special
import scipy.special as sps
from scipy.special import digamma, erfcinv, expit, gammainc, gammaln, i1, iv, log_ndtr
from scipy.special import logsumexp, polygamma, psi, rgamma, xlog1py, xlogy

from symdiff import stop_gradient


def expit_sum(x):
    return np.sum(expit(x))


def log_expit(x):
    return np.sum(np.log(expit(x)))


def expit_dotted(x):
    return np.sum(scipy.special.expit(x))


def expit_alias(x):
    return np.sum(sps.expit(x))


def log_ndtr_sum(x):
    return np.sum(log_ndtr(x))


def erfcinv_sum(x):
    return np.sum(erfcinv(x))


def gammaln_sum(x):
    return np.sum(gammaln(x))


def psi_sum(x):
    return np.sum(psi(x) + sps.psi(x) - digamma(x))


def i1_sum(x):
    return np.sum(i1(x))


def iv_sum(x):
    return np.sum(iv(1.0, x))


def rgamma_sum(x):
    return np.sum(rgamma(x))


def xlogy_sum(x, y):
    return np.sum(xlogy(x, y))


def xlog1py_sum(x, y):
    return np.sum(xlog1py(x, y))


def polygamma_of_x(x):
    return polygamma(np.floor(x), x)


def gammainc_of_x(x):
    return gammainc(x, 2.0)


def gammainc_stopped(x):
    return gammainc(stop_gradient(x), x)


def lse_weighted(a, b):
    return logsumexp(a, axis=1, b=b)[0] + logsumexp(a, b=b)
""")


@pytest.mark.parametrize("x", [-50.0, 50.0, -700.0, 700.0, 0.3])
def test_expit_slope_keeps_its_precision_far_out(x):
    exact = np.exp(-abs(x)) / (1 + np.exp(-abs(x))) ** 2
    np.testing.assert_allclose(grad(SPECIAL.expit_sum)(np.array([x])), [exact], rtol=1e-13)
    # d log(expit(x)) = expit(-x), also where it is 1e-22 (1 - expit(x) would be 0).
    np.testing.assert_allclose(grad(SPECIAL.log_expit)(np.array([x])),
                               [1 / (1 + np.exp(x))], rtol=1e-13)


def test_log_ndtr_slope_in_both_tails():
    """pdf/cdf, where the CDF underflows (x = -40: a 0/0 if computed so) and far right."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    xs = np.array([-1e4, -40.0, -5.0, 0.0, 3.0, 10.0, 40.0])
    ours = grad(SPECIAL.log_ndtr_sum)(xs)
    exact = [float(mpmath.npdf(x) / mpmath.ncdf(x)) for x in xs]
    np.testing.assert_allclose(ours, exact, rtol=1e-12, atol=1e-300)
    assert ours[-1] == 0.0 or ours[-1] < 1e-300


def test_erfcinv_slope_near_0_and_2():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 400
    xs = np.array([1e-300, 1e-20, 1e-5, 0.3, 1.0, 1.7, 2 - 1e-10, 2 - 2.0 ** -51])
    with np.errstate(all="raise"):  # (no overflow, no 0/0 on the way)
        ours = grad(SPECIAL.erfcinv_sum)(xs)
    exact = [float(-mpmath.sqrt(mpmath.pi) / 2 * mpmath.exp(mpmath.erfinv(1 - mpmath.mpf(x)) ** 2))
             for x in xs]
    np.testing.assert_allclose(ours, exact, rtol=1e-9)


def test_xlogy_and_xlog1py_at_x_zero():
    """0 at x = 0 (as SciPy), and so is d/dy there, also at y = 0 (or -1): not NaN."""
    with np.errstate(divide="ignore"):  # (d/dx = log(y) is -inf at y = 0: a jump there)
        dx, dy = grad(SPECIAL.xlogy_sum, wrt=(0, 1))(np.array([0.0, 0.0, 1.5]),
                                                     np.array([2.0, 0.0, 3.0]))
    np.testing.assert_allclose(dy, [0.0, 0.0, 0.5], rtol=1e-15)
    np.testing.assert_allclose(dx[[0, 2]], [np.log(2.0), np.log(3.0)], rtol=1e-15)
    with np.errstate(divide="ignore"):
        dx, dy = grad(SPECIAL.xlog1py_sum, wrt=(0, 1))(np.array([0.0, 0.0, 1.5]),
                                                       np.array([2.0, -1.0, 1e-20]))
    np.testing.assert_allclose(dy, [0.0, 0.0, 1.5], rtol=1e-15)
    np.testing.assert_allclose(dx[[0, 2]], [np.log(3.0), 1e-20], rtol=1e-15)
    assert grad(SPECIAL.xlogy_sum, wrt=1)(0.0, 2.0) == 0.0


def test_gammasgn_has_derivative_zero_also_below_zero():
    f = make("scipy.special.gammasgn", ("x",), reduce=True)
    out = grad(f)(np.array([-2.5, -1.5, -0.5, 0.5, 3.0]))
    np.testing.assert_array_equal(out, np.zeros(5))


def test_rgamma_slope_at_the_poles_of_gamma():
    """1/gamma is smooth at 0, -1, -2, ...: its slope there is (-1)**n n!, not 0*inf."""
    xs = np.array([0.0, -1.0, -2.0, -3.0, 0.5, -1.5])
    ours = grad(SPECIAL.rgamma_sum)(xs)
    np.testing.assert_allclose(ours[:4], [1.0, -1.0, 2.0, -6.0], rtol=1e-14)
    check_grad(SPECIAL.rgamma_sum, [xs[4:]])
    check_grad(SPECIAL.rgamma_sum, [xs[:4] + 1e-3])
    assert grad(SPECIAL.rgamma_sum)(-2.0) == 2.0


def test_bessel_slopes_at_zero():
    """i1' = (i0 + iv(2, x))/2, which holds at 0 (i0 - i1/x is 0/0 there)."""
    np.testing.assert_allclose(grad(SPECIAL.i1_sum)(np.array([0.0, 1.0])),
                               [0.5, (scipy_special().i0(1.0) + scipy_special().iv(2, 1.0)) / 2])
    assert grad(SPECIAL.iv_sum)(0.0) == 0.5


def scipy_special():
    return pytest.importorskip("scipy.special")


@pytest.mark.parametrize(("name", "printed", "absent"), [
    ("expit_sum", "scipy.special.expit(-x)", "tanh"),
    ("log_ndtr_sum", "scipy.special.erfcx(", "ndtr(x)*"),
    ("erfcinv_sum", "scipy.special.erfcx(", "np.exp("),
    ("gammaln_sum", "scipy.special.digamma(x)", "polygamma(0"),
    ("psi_sum", "scipy.special.polygamma(1, x)", "Derivative"),
    ("i1_sum", "scipy.special.iv(2, x)", "/x"),
    ("iv_sum", "scipy.special.iv(0, x)", "/x"),
])
def test_generated_source_uses_the_stable_scipy_forms(name, printed, absent):
    source = grad(getattr(SPECIAL, name)).source
    backward = source.split("# grad of", 1)[1]
    assert printed in backward and absent not in backward, source


@pytest.mark.parametrize("name", ["expit_sum", "expit_dotted", "expit_alias", "psi_sum"])
def test_every_spelling_of_a_scipy_function(name):
    check_grad(getattr(SPECIAL, name), [np.array([0.4, 1.3, 2.2])])


def test_static_parameter_that_depends_on_the_input_is_refused_where_written():
    for name, call, column, param in (("polygamma_of_x", "polygamma(np.floor(x), x)", 22,
                                       "n"),
                                      ("gammainc_of_x", "gammainc(x, 2.0)", 21, "a")):
        with pytest.raises(SymdiffError) as e:
            grad(getattr(SPECIAL, name))(1.5)
        lines = str(e.value).splitlines()
        assert lines[0].endswith(f":{column}: {call.partition('(')[0]} is differentiated "
                                 f"in x only, and its {param} depends on the differentiated "
                                 "inputs"), lines[0]
        assert lines[1].strip() == f"return {call}"
        assert lines[3].strip() == (f"supported instead: compute {param} without them, or "
                                    f"write stop_gradient({param}) to leave its gradient out")


def test_static_parameter_under_stop_gradient_is_a_constant():
    special = scipy_special()
    x = 1.7
    pdf = x ** (x - 1) * np.exp(-x) / special.gamma(x)  # d/dx gammainc(a, x) at a = x
    assert grad(SPECIAL.gammainc_stopped)(x) == pytest.approx(pdf, rel=1e-13)


def test_logsumexp_weights_against_jax():
    """Both a and b differentiated, b broadcast against a, with and without axis."""
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((3, 4)), rng.uniform(0.5, 2.0, (4,))
    ours = grad(SPECIAL.lse_weighted, wrt=(0, 1))(a, b)
    check_grad(SPECIAL.lse_weighted, [a, b], wrt=(0, 1))
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jss = pytest.importorskip("jax.scipy.special")

    def reference(a, b):
        return jss.logsumexp(a, axis=1, b=b)[0] + jss.logsumexp(a, b=b)

    for o, r in zip(ours, jax.grad(reference, argnums=(0, 1))(a, b), strict=True):
        np.testing.assert_allclose(o, np.asarray(r), rtol=1e-12)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_and_log_softmax_against_jax(name, axis):
    f = load(f"""
        import numpy as np
        from scipy.special import {name}


        def f(x, w):
            return np.sum({name}(x, axis={axis!r}) * w)
        """, "f")
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ours = check_grad(f, [x, w])[0]
    assert grad(f)(x.astype(np.float32), w.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(grad(f)(np.arange(12).reshape(3, 4), w),
                               grad(f)(np.arange(12.0).reshape(3, 4), w))
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnn = pytest.importorskip("jax.nn")
    jfun = getattr(jnn, name)
    reference = jax.grad(lambda x: (jfun(x, axis=axis) * w).sum())(x)
    np.testing.assert_allclose(ours, np.asarray(reference), rtol=1e-12, atol=1e-14)


def test_gradient_without_scipy_does_not_import_it():
    """SciPy's rules are looked up only once the user's code has imported SciPy."""
    import os
    import subprocess
    import sys

    code = ("import sys, numpy as np, symdiff, gradcheck\n"
            "m = gradcheck.load('import numpy as np\\n\\ndef f(x):\\n'\n"
            "                   '    return np.sum(x ** 2)\\n')\n"
            "symdiff.grad(m.f)(np.ones(2))\n"
            "print('scipy' in sys.modules)\n")
    here = os.path.dirname(__file__)
    run = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r})\n"
                          + code], capture_output=True, text=True, check=True,
                         env={**os.environ, "SYMDIFF_CACHE_DIR": "off"})
    assert run.stdout.strip() == "False", run.stderr


def test_exported_gradient_imports_scipy_special_for_its_derivatives(tmp_path):
    """`from scipy.special import gammaln`: the derivative reads scipy.special.digamma,
    which the exported module imports for it."""
    from symdiff.cli import main

    src = tmp_path / "lg.py"
    src.write_text("import numpy as np\nfrom scipy.special import gammaln\n\n\n"
                   "def f(x):\n    return np.sum(gammaln(x))\n")
    out = tmp_path / "lg_grad.py"
    assert main([str(src), "--output", str(out)]) == 0
    text = out.read_text()
    assert "import scipy.special\n" in text and "scipy.special.digamma(x)" in text
    namespace = {}
    exec(compile(text, str(out), "exec"), namespace)  # noqa: S102
    x = np.array([0.5, 2.0])
    (dx,) = namespace["grad_f"](x)  # (a tuple: the CLI differentiates in every parameter)
    np.testing.assert_allclose(dx, scipy_special().digamma(x))


def test_logsumexp_with_weights_and_its_sign():
    """log|sum(b*exp(a))| where some sums are negative: the slope carries the sign."""
    m = load("from scipy.special import logsumexp\nimport numpy as np\n\n\n"
             "def f(a, b):\n    r, s = logsumexp(a, axis=1, b=b, return_sign=True)\n"
             "    return np.sum(r * np.arange(1.0, 4.0)) + np.sum(s)\n")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4))
    b = np.array([[1.0, 2.0, -0.5, 0.3], [-1.0, -2.0, 0.5, -0.3], [0.2, -3.0, 0.1, 0.4]])
    signs = np.sign(np.sum(b * np.exp(a), axis=1))
    assert set(signs) == {-1.0, 1.0}  # both kinds of sums at this point
    check_grad(m.f, [a, b], wrt=(0, 1))


# --- building arrays from values: np.array, np.asarray, list and tuple literals, copies,
# casts, the builtins sum, min and max (issue 13, item 1) ---

BUILD = load("""
    import numpy as np


    def mixed(x, a):
        return np.sum(np.array([x[0] * 2, x[1], 1.0, a * a]) ** 3)


    def nested(a, b):
        return np.sum(np.array([[a, 1.0], (2.0, a * b)], dtype=float) @ np.array([1.0, 3.0]))


    def stacked(x, y):
        return np.sum(np.sin(np.array([[x, y * x], (y, x)])) + np.array([x, y]) ** 2)


    def of_array(x):
        return np.sum(np.array(x, copy=True) ** 2 + np.asarray(x, dtype=np.float64) ** 3)


    def truncated(x):
        return np.sum(np.array([x[0], x[1] * 3], dtype=int) * x)


    def masked(x):
        return np.sum(np.asarray(x, dtype=bool) * x)


    def single(x):
        return np.sum(np.array([x[0], x[1] * 2]) ** 2)


    def literals(a, b):
        l = [a, b * b]
        t = (a * b, 2.0)
        s = 0.0
        for v in l:
            s = s + v
        return np.sum([a, b]) + l[0] * l[1] + np.sum(np.stack((t, t))) + s


    def times_a_list(x):
        return np.sum(x * [1.0, 2.0]) + np.sum(np.array([]))


    def copies(x):
        y = x.copy()
        return np.sum(np.copy(x) * y ** 2)


    def casts(x):
        return np.sum(x.astype(float) ** 2 + x.astype(np.float32) * x + x.astype(int) * x)


    def scalar_casts(a):
        return np.float64(a) ** 2 + np.float32(a) * a + float(a) * a + np.int64(a) * a


    def sums(a, b, x):
        return sum([a, b * b, 1.0]) + sum((a, a), start=b) + np.sum(sum(x, a) ** 2)


    def rows(x):
        return np.sum(sum(x) ** 2)


    def extremes(a, b):
        return max([a, b * b, 0.5]) + min((a, b)) + max(a, b * a, 2.0 * b)


    def extreme_of_array(x):
        return max(x ** 2) + min(x)
    """)


def test_np_array_of_numbers_and_differentiated_values():
    x = np.array([0.5, -1.5])
    check_grad(BUILD.mixed, [x, 0.7], wrt=(0, 1))
    check_grad(BUILD.nested, [0.4, -0.6], wrt=(0, 1))
    check_grad(BUILD.single, [x.astype(np.float32)], rtol=1e-4)
    assert grad(BUILD.single)(x.astype(np.float32)).dtype == np.float32
    np.testing.assert_allclose(grad(BUILD.single)(np.array([1, 2])), [2.0, 16.0])


def test_np_array_stacks_arrays_of_one_shape():
    rng = np.random.default_rng(3)
    check_grad(BUILD.stacked, [rng.standard_normal(2), rng.standard_normal(2)], wrt=(0, 1))
    check_grad(BUILD.stacked, [np.array(0.5), np.array(-0.7)], wrt=(0, 1))


def test_np_array_and_asarray_of_an_array():
    check_grad(BUILD.of_array, [np.array([[0.5, -1.5], [2.0, 0.25]])])
    check_grad(BUILD.of_array, [0.7])
    assert type(grad(BUILD.of_array)(0.7)) is float


def test_np_array_with_an_integer_or_boolean_dtype_has_no_gradient_through_it():
    x = np.array([1.5, 2.25])
    # np.array([1, 6]) * x: only the factor x carries a gradient
    np.testing.assert_array_equal(grad(BUILD.truncated)(x), [1.0, 6.0])
    np.testing.assert_array_equal(grad(BUILD.masked)(np.array([0.0, 2.0])), [0.0, 1.0])


def test_list_and_tuple_literals_read_as_arrays():
    check_grad(BUILD.literals, [0.4, -1.3], wrt=(0, 1))
    check_grad(BUILD.times_a_list, [np.array([0.5, -1.5])])


def test_copies_and_casts():
    rng = np.random.default_rng(4)
    check_grad(BUILD.copies, [rng.standard_normal((2, 3))])
    x = np.array([0.5, -1.5, 2.25])
    # astype(np.float32) is differentiated as the identity (not in float32 differences)
    np.testing.assert_allclose(grad(BUILD.casts)(x), 2 * x + 2 * x.astype(np.float32) +
                               x.astype(int), rtol=1e-7)
    assert grad(BUILD.casts)(x.astype(np.float32)).dtype == np.float32
    np.testing.assert_array_equal(grad(BUILD.casts)(np.arange(3)), [0.0, 5.0, 10.0])
    assert grad(BUILD.scalar_casts)(2.5) == pytest.approx(5.0 + 5.0 + 5.0 + 2.0)
    assert grad(BUILD.scalar_casts)(2) == pytest.approx(4.0 + 4.0 + 4.0 + 2.0)


def test_builtin_sum_min_max_over_sequences():
    x = np.array([[0.5, -1.5], [2.0, 0.25], [1.0, 1.0]])
    check_grad(BUILD.sums, [0.4, -1.3, x], wrt=(0, 1, 2))
    check_grad(BUILD.rows, [x])
    check_grad(BUILD.rows, [np.array([True, False, True])])
    check_grad(BUILD.extremes, [0.4, -1.3], wrt=(0, 1))
    check_grad(BUILD.extremes, [2.0, 0.9], wrt=(0, 1))
    check_grad(BUILD.extreme_of_array, [np.array([0.5, -1.5, 1.25])])


def test_builtin_min_max_of_a_sequence_share_ties_equally():
    # three tied entries a third each, as np.max's (a pairwise max would give 1/4, 1/4, 1/2)
    f = load("def f(a):\n    return max([a, a, 2.0 - a])\n", "f")
    assert grad(f)(1.0) == pytest.approx(1 / 3)
    g = load("def g(a, b):\n    return min(a, b, 1.0)\n", "g")
    assert grad(g, wrt=(0, 1))(1.0, 1.0) == pytest.approx((1 / 3, 1 / 3))
    h = load("import numpy as np\n\n\ndef h(x):\n    return max(x)\n", "h")
    np.testing.assert_allclose(grad(h)(np.array([2.0, 1.0, 2.0])), [0.5, 0.0, 0.5])


def test_empty_sequences_where_python_and_numpy_allow_them():
    f = load("import numpy as np\n\n\ndef f(a, x):\n"
             "    return sum([], start=a) * a + np.sum(np.array([x, x]) ** 2) + sum(x)\n", "f")
    ga, gx = grad(f, wrt=(0, 1))(0.5, np.zeros(0))
    assert ga == 1.0 and gx.shape == (0,)


def test_list_arithmetic_of_differentiated_values_is_refused():
    f = load("import numpy as np\n\n\ndef f(a):\n    return np.sum([a, a] * 2)\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(0.5)
    assert str(e.value).splitlines()[0].endswith(
        ":5:19: this repeats or joins a list that depends on the differentiated inputs "
        "(list arithmetic), which symdiff does not differentiate")


def test_starred_items_in_a_list_read_as_an_array_are_refused():
    f = load("import numpy as np\n\n\ndef f(x):\n    return np.sum(np.array([*x, 1.0]))\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones(2))
    assert str(e.value).splitlines()[0].endswith(
        ":5:29: starred items (*a) in a list read as an array are not supported")
    assert "supported instead: np.concatenate([a, b])" in str(e.value)


def test_constructors_of_items_of_a_differentiated_container_carry_gradient():
    """np.full(3, p[0]) of a tuple parameter's item: p[0] depends on the inputs, though
    no name in the call is differentiated (the gradient was 0)."""
    f = load("import numpy as np\n\n\ndef f(p):\n"
             "    return np.sum(np.full(3, p[0]) ** 2) + np.sum(np.array(p) * 2.0)\n", "f")
    assert grad(f)((0.5, 1.0)) == pytest.approx((5.0, 2.0))


@pytest.mark.parametrize("name", ROUNDING_CASTS)
def test_float_casts_are_the_identity(name):
    """np.float32(x) and the like: derivative 1 (JAX's convert_element_type), the
    gradient in the parameter's kind, for numbers and arrays."""
    f = load(f"import numpy as np\n\n\ndef f(x):\n    return np.sum({name}(x) * 3.0)\n", "f")
    assert grad(f)(0.5) == 3.0 and type(grad(f)(0.5)) is float
    g = grad(f)(np.array([0.5, 2.0], dtype=np.float32))
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [3.0, 3.0])
    assert grad(f)(2) == 3.0


def test_building_from_the_items_of_a_differentiated_container():
    m = load("""
        import numpy as np


        def f(p):
            return max(p) + min(p) * 2 + sum(p) + np.sum(np.asarray(p) ** 2)


        def g(p):
            return np.sum(np.stack(p) ** 2) + np.sum(np.array(p) * 3) + np.sum(sum(p) ** 2)
        """)
    check_grad(m.f, [(0.5, 1.5, -0.25)])
    check_grad(m.g, [[np.array([0.5, 1.0]), np.array([2.0, -1.0])]])


def test_building_arrays_inside_loops_and_branches():
    f = load("""
        import numpy as np


        def f(x, n):
            s = 0.0
            for i in range(n):
                v = np.array([x[0] * i, x[1], 2.0])
                s = s + np.sum(v ** 2) + max([x[0], x[1] * i]) + sum([s, x[1]])
                if s > 3:
                    s = s * np.float64(x[0])
            return s
        """, "f")
    check_grad(f, [np.array([0.5, 1.3]), 3], wrt=(0,))


def test_a_list_of_values_times_an_integer_in_a_derivative_is_doubled_not_repeated():
    """v = [x[0], ...] is an array in the generated code: the derivative 2*v of 2*y*v
    doubles it (a list would be repeated: [a, b, a, b], or silently [a, a] for one item)."""
    m = load("""
        import numpy as np


        def f(x):
            v = [x[0], 2.0 * x[1]]
            return np.sum(2 * x[:2] * v)


        def one(x):
            v = [x[0]]
            return np.sum(3 * x[1:] * v)
        """)
    x = np.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(grad(m.f)(x), [2.0, 8.0, 0.0])
    check_grad(m.f, [x])
    check_grad(m.one, [x])


@pytest.mark.parametrize("join", ["np.vstack(a)", "np.hstack(a)", "np.concatenate(a)",
                                  "np.concatenate(a, axis=1)", "np.stack(a, axis=1)",
                                  "np.column_stack(a)", "np.dstack(a)"])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 4)])
def test_a_join_of_an_array_joins_its_rows(join, shape):
    """np.vstack(A) of an array A reads A's rows as the arrays to join, as NumPy does."""
    rows = len(shape) - 1  # (the number of axes of A's rows)
    if rows < ("concatenate" in join or "axis=1" in join) + ("concatenate(a, axis=1)" in join):
        pytest.skip("NumPy refuses it: A's rows have too few axes")
    f = load(f"import numpy as np\n\n\ndef f(a, w):\n    return np.sum({join} * w)\n", "f")
    a = np.random.default_rng(2).standard_normal(shape)
    w = np.random.default_rng(3).standard_normal(np.shape(eval(join, {"np": np, "a": a})))  # noqa: S307
    check_grad(f, [a, w])


def test_heaviside_is_flat_in_x_and_its_value_at_zero_is_h0():
    """np.heaviside(x, h0): gradient 0 in x; in h0, 1 exactly where x is 0 (as JAX's)."""
    f = load("import numpy as np\n\n\ndef f(x, h):\n"
             "    return np.sum(np.heaviside(x, h) * x ** 2 + np.heaviside(x, h))\n", "f")
    dx, dh = grad(f, wrt=(0, 1))(np.array([-1.0, 0.0, 2.0]), 0.5)
    np.testing.assert_array_equal(dx, [-2.0 * 0.0, 0.0, 4.0])
    assert dh == 1.0
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    expected = jax.grad(lambda x, h: jnp.sum(jnp.heaviside(x, h) * x ** 2 + jnp.heaviside(x, h)),
                        argnums=(0, 1))(jnp.array([-1.0, 0.0, 2.0]), 0.5)
    np.testing.assert_allclose(dx, expected[0])
    np.testing.assert_allclose(dh, expected[1])


# --- forward mode: each array operation's tangent ---
#
# Each row says how its result's tangent follows from its operands' (rules.ArrayOp.linear,
# .jvp, .output_jvps, .alone_jvp). Checked here against central differences of the
# operation itself, (op(x + h t) - op(x - h t)) / 2h, and, for the templates, by
# differentiating the tangent code again with symdiff (a Hessian is reverse over forward).

FORWARD_ROWS = (*rules.ARRAY_OPS, rules.INDEX, rules.WRITE, *rules.CONCATENATORS)
# Rows without a tangent rule (forward mode refuses them where they are called), and why.
NO_TANGENT: set[str] = set()
# Outputs whose gradient is refused (lstsq's residuals and singular values): no tangent.
REFUSED_OUTPUTS = {("np.linalg.lstsq", "residuals"), ("np.linalg.lstsq", "s")}


def _differentiable_params(vjp) -> set[str]:
    return {p for p, template in vjp.items() if template}


@pytest.mark.parametrize("row", FORWARD_ROWS, ids=[r.names[0] for r in FORWARD_ROWS])
def test_every_array_row_has_a_tangent_rule(row):
    """linear "joint" or "multi", or a template for each differentiable parameter (of each
    output), or listed in NO_TANGENT: a new row must say how forward mode reads it."""
    name = row.names[0]
    if name in NO_TANGENT:
        assert not (row.linear or row.jvp or row.output_jvps), name
        return
    assert row.linear in ("", "joint", "multi"), name
    if row.linear:
        assert not row.jvp and not row.output_jvps and not row.alone_jvp, name
        assert all(row.part(k).linear == row.linear for k in range(len(row.outputs)))
        return
    if row.outputs:
        assert not row.jvp and len(row.output_jvps) == len(row.outputs), name
        for (output, vjp), jvp in zip(row.outputs, row.output_jvps, strict=True):
            expected = set() if (name, output) in REFUSED_OUTPUTS else \
                _differentiable_params(vjp)
            assert set(jvp) == expected, (name, output)
            for k in range(len(row.outputs)):
                assert row.part(k).jvp == row.output_jvps[k]
    else:
        assert set(row.jvp) == _differentiable_params(row.vjp), name
    if row.alone:
        assert set(row.alone_jvp) == _differentiable_params(row.alone[2]), name


def test_no_tangent_names_are_rows():
    assert NO_TANGENT <= {row.names[0] for row in FORWARD_ROWS}


@pytest.mark.parametrize(("name", "statics", "refused"), [
    ("np.linalg.norm", {}, False), ("np.linalg.norm", {"ord": "'fro'"}, False),
    ("np.linalg.norm", {"ord": "None", "axis": "(0, 1)"}, False),
    ("np.linalg.norm", {"ord": "-np.inf", "axis": "1"}, False),
    ("np.linalg.norm", {"ord": "np.inf"}, False), ("np.linalg.norm", {"ord": "'nuc'"}, False),
    ("np.linalg.norm", {"ord": "3"}, True), ("np.linalg.norm", {"ord": "p"}, True),
    ("np.linalg.norm", {"ord": "1", "axis": "(0, 1)"}, True),
    ("np.linalg.norm", {"ord": "1", "axis": "k"}, True),
    ("scipy.linalg.solve", {"assume_a": "'banded'"}, True),
    ("scipy.linalg.solve", {"assume_a": "'pos'"}, False), ("np.sum", {"axis": "1"}, False)])
def test_calls_without_a_tangent_are_told(name, statics, refused):
    """A form the templates do not cover (they give NaN there) is named, for forward mode to
    refuse where the call is read."""
    reason = rules.no_tangent(_row(name), statics)
    assert bool(reason) is refused, reason
    if refused:
        assert "is not written" in reason


_RNG = np.random.default_rng(7)


def _pd_matrix(n, batch=()):
    m = _RNG.standard_normal((*batch, n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def _r(*shape):
    return _RNG.standard_normal(shape)


def _write(a, v):  # x[...] = v, as a function
    a = np.array(a, dtype=np.float64)
    a[1:3, ::2] = v
    return a


def F(name, call, ops, fields=None, const=(), part=None, sym=(), tril=(), view=None,
      alone=False, rtol=1e-6, again=True):
    """A forward case: ``call`` of the operands ``ops`` (by name); the operands in ``const``
    get no tangent, those in ``sym`` a symmetric one, in ``tril`` a lower triangular one;
    ``fields`` the statics' code as the call writes them; ``part`` the output read;
    ``view`` what is compared (a triangle); ``again``: differentiate the template again.
    (tril=("simplex",): x's tangent sums to 0 along its first axis.)"""
    return pytest.param(name, call, ops, fields or {}, const, part, sym, tril, view, alone,
                        rtol, again, id=f"{name}:{call}")


_TIES = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, 0.5], [0.5, 0.0, 0.0, -1.0]])
_ZEROS = np.array([[1.5, 0.0, 2.0, -0.5], [0.0, 0.0, 1.5, 2.0], [0.0, 0.0, 0.0, 1.2],
                   [1.1, -0.7, 1.3, 0.9]])
_SPD3 = _pd_matrix(3)
FORWARD_CASES = [
    F("np.sum", "np.sum(a, axis=1)", {"a": _r(3, 4)}),
    F("np.mean", "np.mean(a, axis=0, keepdims=True)", {"a": _r(3, 4)}),
    F("np.prod", "np.prod(a, axis=1)", {"a": _r(3, 4)}, {"axis": "1"}),
    F("np.prod", "np.prod(a, axis=1)", {"a": _ZEROS}, {"axis": "1"}),
    F("np.prod", "np.prod(a, axis=0, keepdims=True)", {"a": _ZEROS.T},
      {"axis": "0", "keepdims": "True"}),
    F("np.prod", "np.prod(a)", {"a": _r(5)}),
    F("np.prod", "np.prod(a)", {"a": np.array([2.0, 0.0, 1.5])}),
    F("np.prod", "np.prod(a)", {"a": np.array(1.5)}),
    F("np.max", "np.max(a, axis=1)", {"a": _r(3, 4)}, {"axis": "1"}),
    F("np.max", "np.max(a, axis=1)", {"a": _TIES}, {"axis": "1"}, again=False),
    F("np.max", "np.max(a, axis=0, keepdims=True)", {"a": _TIES},
      {"axis": "0", "keepdims": "True"}, again=False),
    F("np.max", "np.max(a)", {"a": np.array([1.0, 3.0, 3.0])}, again=False),
    F("np.max", "np.max(a)", {"a": np.array([2.0])}),
    F("np.max", "np.max(a, axis=1)", {"a": _r(3, 4).astype(_F32)}, {"axis": "1"}, rtol=1e-3),
    F("np.min", "np.min(a, axis=1)", {"a": -_TIES}, {"axis": "1"}, again=False),
    F("np.min", "np.min(a)", {"a": _r(3, 4)}),
    F("np.var", "np.var(a, axis=0, ddof=1)", {"a": _r(4, 3)}, {"axis": "0", "ddof": "1"}),
    F("np.var", "np.var(a)", {"a": _r(6)}),
    F("np.var", "np.var(a, axis=1, keepdims=True)", {"a": _r(3, 4).astype(_F32)},
      {"axis": "1", "keepdims": "True"}, rtol=1e-3),
    F("np.std", "np.std(a, axis=1, keepdims=True)", {"a": _r(3, 4)},
      {"axis": "1", "keepdims": "True"}),
    F("np.std", "np.std(a, ddof=1)", {"a": _r(5)}, {"ddof": "1"}),
    F("np.std", "np.std(a)", {"a": np.array([1.5])}),
    F("np.var", "np.var(a, axis=0)", {"a": _r(1, 3)}, {"axis": "0"}),
    F("np.prod", "np.prod(a, axis=0)", {"a": _r(1, 3).astype(np.float32)}, {"axis": "0"},
      rtol=1e-3),
    F("np.cumsum", "np.cumsum(a, axis=1)", {"a": _r(3, 4)}),
    F("np.diff", "np.diff(a, 2, axis=0)", {"a": _r(4, 3)}),
    F("np.cumprod", "np.cumprod(a, axis=1)", {"a": _r(3, 4)}, {"axis": "1"}),
    F("np.cumprod", "np.cumprod(a, axis=1)", {"a": _ZEROS}, {"axis": "1"}),
    F("np.cumprod", "np.cumprod(a)", {"a": np.array([1.5, 0.0, 2.0, 0.0, -1.0, 0.0])}),
    F("np.nansum", "np.nansum(a, axis=0)", {"a": np.array([[1.0, np.nan], [2.0, 3.0]])},
      {"axis": "0"}),
    F("np.nanmean", "np.nanmean(a, axis=1, keepdims=True)",
      {"a": np.array([[1.0, np.nan, 0.5], [2.0, 3.0, 1.0]])},
      {"axis": "1", "keepdims": "True"}),
    F("np.linalg.norm", "np.linalg.norm(x)", {"x": _r(5)}),
    F("np.linalg.norm", "np.linalg.norm(x, axis=1, keepdims=True)",
      {"x": np.array([[0.0, 0.0], [3.0, 4.0]])}, {"axis": "1", "keepdims": "True"}),
    F("np.linalg.norm", "np.linalg.norm(x, 'fro')", {"x": _r(3, 4)}, {"ord": "'fro'"}),
    *[F("np.linalg.norm", f"np.linalg.norm(x, {order})", {"x": _r(5)}, {"ord": order})
      for order in ("1", "np.inf", "-np.inf", "0", "2")],
    F("np.linalg.norm", "np.linalg.norm(x, np.inf, axis=1)", {"x": _TIES}, {"ord": "np.inf",
                                                                           "axis": "1"},
      again=False),
    F("np.linalg.norm", "np.linalg.norm(x, 1, axis=0, keepdims=True)", {"x": _r(3, 4)},
      {"ord": "1", "axis": "0", "keepdims": "True"}),
    *[F("np.linalg.norm", f"np.linalg.norm(x, {order})", {"x": _r(4, 3)}, {"ord": order})
      for order in ("2", "-2", "'nuc'", "1", "-1", "np.inf", "-np.inf")],
    F("np.linalg.norm", "np.linalg.norm(x, 'nuc', keepdims=True)", {"x": _r(3, 3)},
      {"ord": "'nuc'", "keepdims": "True"}),
    F("np.matmul", "a @ b", {"a": _r(3, 4), "b": _r(4, 2)}),
    F("np.matmul", "a @ b", {"a": _r(2, 3, 4), "b": _r(4)}),
    F("np.dot", "np.dot(a, b)", {"a": _r(3, 4), "b": _r(4)}),
    F("np.inner", "np.inner(a, b)", {"a": _r(2, 4), "b": _r(3, 4)}),
    F("np.outer", "np.outer(a, b)", {"a": _r(3), "b": _r(4)}),
    F("np.einsum", "np.einsum('ij,jk->ik', u, v)", {"u": _r(3, 4), "v": _r(4, 2)}),
    F("np.trace", "np.trace(a, 1)", {"a": _r(3, 4)}),
    F("np.diagonal", "np.diagonal(a, -1, 2, 0)", {"a": _r(3, 4, 2)}),
    F("np.diag", "np.diag(a, 1)", {"a": _r(3)}),
    F("np.triu", "np.triu(a, -1)", {"a": _r(3, 3)}),
    F("np.tril", "np.tril(a)", {"a": _r(3, 4)}),
    F("np.cross", "np.cross(a, b)", {"a": _r(4, 3), "b": _r(4, 3)}),
    F("np.kron", "np.kron(a, b)", {"a": _r(2, 2), "b": _r(3, 2)}),
    F("np.tensordot", "np.tensordot(a, b, 1)", {"a": _r(2, 3), "b": _r(3, 4)}),
    F("np.transpose", "np.transpose(a, (1, 0, 2))", {"a": _r(2, 3, 4)}),
    F("np.reshape", "np.reshape(a, (4, 3))", {"a": _r(3, 4)}),
    F("np.ravel", "np.ravel(a)", {"a": _r(3, 4)}),
    F("np.squeeze", "np.squeeze(a)", {"a": _r(3, 1)}),
    F("np.expand_dims", "np.expand_dims(a, 1)", {"a": _r(3)}),
    F("np.broadcast_to", "np.broadcast_to(a, (2, 3))", {"a": _r(3)}),
    F("np.tile", "np.tile(a, (2, 1))", {"a": _r(3)}),
    F("np.flip", "np.flip(a, 0)", {"a": _r(3, 2)}),
    F("np.moveaxis", "np.moveaxis(a, 0, -1)", {"a": _r(3, 2)}),
    F("np.swapaxes", "np.swapaxes(a, 0, 1)", {"a": _r(3, 2)}),
    F("np.rollaxis", "np.rollaxis(a, 2)", {"a": _r(2, 3, 4)}),
    F("np.atleast_1d", "np.atleast_1d(a)", {"a": np.array(2.0)}),
    F("np.atleast_2d", "np.atleast_2d(a)", {"a": _r(3)}),
    F("np.atleast_3d", "np.atleast_3d(a)", {"a": _r(3)}),
    F("np.flipud", "np.flipud(a)", {"a": _r(3, 2)}),
    F("np.fliplr", "np.fliplr(a)", {"a": _r(3, 2)}),
    F("np.roll", "np.roll(a, 1)", {"a": _r(4)}),
    F("np.repeat", "np.repeat(a, 2, axis=0)", {"a": _r(2, 3)}),
    F("np.concatenate", "np.concatenate([u, v], axis=1)", {"u": _r(2, 3), "v": _r(2, 1)}),
    F("np.stack", "np.stack([u, v])", {"u": _r(3), "v": _r(3)}),
    F("np.hstack", "np.hstack([u, v])", {"u": _r(3), "v": _r(2)}),
    F("np.vstack", "np.vstack([u, v])", {"u": _r(3), "v": _r(3)}),
    F("np.full", "np.full((2, 3), fill_value)", {"fill_value": np.array(1.5)}),
    F("np.full_like", "np.full_like(a, fill_value)", {"a": _r(3), "fill_value": np.array(0.5)},
      const=("a",)),
    F("np.arange", "np.arange(start, 5.0, step)", {"start": 0.3, "step": 0.7},
      {"stop": "5.0"}),
    F("np.arange", "np.arange(start)", {"start": 3.5}),
    F("np.linspace", "np.linspace(start, stop, 5)", {"start": _r(2), "stop": _r(2)}),
    F("np.where", "np.where(c, x, y)", {"c": _r(4) > 0, "x": _r(4), "y": _r(4)}, const=("c",)),
    F("np.take", "np.take(a, i, axis=1)", {"a": _r(2, 3), "i": np.array([2, 0, 2])},
      const=("i",)),
    F("np.take_along_axis", "np.take_along_axis(arr, i, 1)",
      {"arr": _r(2, 3), "i": np.array([[2, 0], [1, 1]])}, const=("i",)),
    F("np.pad", "np.pad(array, 1, 'constant', constant_values=c)",
      {"array": _r(2, 3), "c": np.array(0.5)}),
    F("np.pad", "np.pad(array, (1, 2), 'edge')", {"array": _r(3)}),
    F("np.sort", "np.sort(a, axis=0)", {"a": _r(3, 4)}, {"axis": "0"}),
    F("np.sort", "np.sort(a, axis=None)", {"a": _r(3, 4)}, {"axis": "None"}),
    F("np.partition", "np.partition(a, 2)", {"a": _r(3, 5)}, {"kth": "2"}),
    F("np.partition", "np.partition(a, 1, axis=0)", {"a": _r(4, 2)}, {"kth": "1", "axis": "0"}),
    F("np.partition", "np.partition(a, 3, axis=None)", {"a": _r(2, 3)},
      {"kth": "3", "axis": "None"}),
    F("np.average", "np.average(a, axis=1, weights=weights)",
      {"a": _r(3, 4), "weights": _RNG.uniform(0.5, 2.0, (3, 4))}, {"axis": "1"}),
    F("np.average", "np.average(a)", {"a": _r(3, 4)}),
    F("np.column_stack", "np.column_stack([u, v])", {"u": _r(3), "v": _r(3, 2)}),
    F("np.dstack", "np.dstack([u, v])", {"u": _r(3), "v": _r(3)}),
    F("np.append", "np.append(arr, values, axis=0)", {"arr": _r(2, 3), "values": _r(1, 3)}),
    F("np.rot90", "np.rot90(a, 3)", {"a": _r(2, 3)}),
    F("np.select", "np.select([c, d], [u, v], w)",
      {"c": _r(4) > 0.5, "d": _r(4) > 0, "u": _r(4), "v": _r(4), "w": _r(4)},
      const=("c", "d")),
    F("np.nan_to_num", "np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)",
      {"x": np.array([1.0, np.nan, np.inf, -np.inf, 2.0]), "nan": np.array(0.5),
       "posinf": np.array(9.0), "neginf": np.array(-9.0)}),
    F("np.nan_to_num", "np.nan_to_num(x)", {"x": np.array([1.0, np.nan, 2.0])}),
    F("np.linalg.inv", "np.linalg.inv(a)", {"a": _pd_matrix(3, (2,))}),
    F("np.linalg.solve", "np.linalg.solve(a, b)", {"a": _pd_matrix(3), "b": _r(3)}),
    F("np.linalg.solve", "np.linalg.solve(a, b)", {"a": _pd_matrix(3), "b": _r(3, 2)}),
    F("np.linalg.solve", "np.linalg.solve(a, b)", {"a": _pd_matrix(3, (3,)), "b": _r(3)}),
    F("np.linalg.det", "np.linalg.det(a)", {"a": _r(3, 3)}),
    F("np.linalg.det", "np.linalg.det(a)", {"a": _r(2, 3, 3)}),
    F("np.linalg.pinv", "np.linalg.pinv(a)", {"a": _r(4, 3)}),
    F("np.linalg.pinv", "np.linalg.pinv(a)", {"a": _r(2, 3)}),
    F("np.linalg.cholesky", "np.linalg.cholesky(a)", {"a": _SPD3}, sym=("a",)),
    F("np.linalg.cholesky", "np.linalg.cholesky(a, upper=True)", {"a": _pd_matrix(3, (2,))},
      {"upper": "True"}, sym=("a",)),
    F("np.linalg.matrix_power", "np.linalg.matrix_power(a, 3)", {"a": _r(3, 3)}, {"n": "3"}),
    F("np.linalg.matrix_power", "np.linalg.matrix_power(a, -2)", {"a": _pd_matrix(3)}, {"n": "-2"}),
    F("np.linalg.matrix_power", "np.linalg.matrix_power(a, 0)", {"a": _r(2, 2)}, {"n": "0"}),
    F("np.linalg.multi_dot", "np.linalg.multi_dot([u, v, w])",
      {"u": _r(2, 3), "v": _r(3, 4), "w": _r(4)}),
    F("scipy.linalg.solve_triangular", "scipy.linalg.solve_triangular(a, b, lower=True)",
      {"a": _pd_matrix(3), "b": _r(3)}, {"lower": "True"}),
    F("scipy.linalg.solve_triangular",
      "scipy.linalg.solve_triangular(a, b, 1, unit_diagonal=True)",
      {"a": _pd_matrix(3), "b": _r(3, 2)}, {"trans": "1", "unit_diagonal": "True"}),
    F("scipy.linalg.solve", "scipy.linalg.solve(a, b)", {"a": _r(3, 3) + 3 * np.eye(3),
                                                         "b": _r(3)}),
    F("scipy.linalg.solve", "scipy.linalg.solve(a, b, transposed=True)",
      {"a": _r(3, 3) + 3 * np.eye(3), "b": _r(3, 2)}, {"transposed": "True"}),
    F("scipy.linalg.solve", "scipy.linalg.solve(a, b, assume_a='pos')",
      {"a": _SPD3, "b": _r(3)}, {"assume_a": "'pos'"}, sym=("a",)),
    F("scipy.linalg.inv", "scipy.linalg.inv(a)", {"a": _r(3, 3) + 3 * np.eye(3)}),
    F("scipy.linalg.inv", "scipy.linalg.inv(a, assume_a='pos')", {"a": _SPD3},
      {"assume_a": "'pos'"}, sym=("a",)),
    F("scipy.linalg.det", "scipy.linalg.det(a)", {"a": _r(3, 3)}),
    F("scipy.linalg.cholesky", "scipy.linalg.cholesky(a)", {"a": _SPD3}, sym=("a",)),
    F("scipy.linalg.cholesky", "scipy.linalg.cholesky(a, lower=True)", {"a": _SPD3},
      {"lower": "True"}, sym=("a",)),
    F("scipy.signal.convolve", "scipy.signal.convolve(u, v)", {"u": _r(5), "v": _r(3)}),
    F("scipy.signal.correlate", "scipy.signal.correlate(u, v, 'same')",
      {"u": _r(5), "v": _r(3)}),
    F("np.gradient", "np.gradient(f, spacing)", {"f": _r(6), "spacing": 0.7}),
    F("np.gradient", "np.gradient(f, axis=0, edge_order=2)", {"f": _r(5, 2)},
      {"axis": "0", "edge_order": "2"}),
    F("np.linalg.slogdet", "np.linalg.slogdet(a)", {"a": _r(3, 3)}, part=1),
    F("np.linalg.eigh", "np.linalg.eigh(a)", {"a": _r(3, 3)}, part=0, sym=("a",)),
    F("np.linalg.eigh", "np.linalg.eigh(a)", {"a": _r(2, 3, 3)}, part=1, sym=("a",),
      rtol=1e-5),
    F("np.linalg.eigvalsh", "np.linalg.eigvalsh(a)", {"a": _r(3, 3)}, sym=("a",)),
    F("np.linalg.svd", "np.linalg.svd(a)", {"a": _r(4, 3)}, part=1),
    F("np.linalg.svd", "np.linalg.svd(a, full_matrices=False)", {"a": _r(4, 3)},
      {"full_matrices": "False"}, part=0, rtol=1e-5),
    F("np.linalg.svd", "np.linalg.svd(a, full_matrices=False)", {"a": _r(3, 4)},
      {"full_matrices": "False"}, part=2, rtol=1e-5),
    F("np.linalg.svd", "np.linalg.svd(a)", {"a": _r(3, 3)}, part=0, rtol=1e-5),
    F("np.linalg.svd", "np.linalg.svd(a)", {"a": _r(3, 3)}, part=2, rtol=1e-5),
    F("np.linalg.svd", "np.linalg.svd(a, compute_uv=False)", {"a": _r(4, 3)},
      {"compute_uv": "False"}, alone=True),
    F("np.linalg.qr", "np.linalg.qr(a)", {"a": _r(4, 3)}, part=0),
    F("np.linalg.qr", "np.linalg.qr(a)", {"a": _r(3, 3)}, part=1),
    F("np.linalg.lstsq", "np.linalg.lstsq(a, b)", {"a": _r(5, 3), "b": _r(5)}, part=0),
    F("np.linalg.lstsq", "np.linalg.lstsq(a, b)", {"a": _r(5, 3), "b": _r(5, 2)}, part=0),
    F("np.split", "np.split(ary, 2)", {"ary": _r(4, 2)}),
    F("np.array_split", "np.array_split(ary, 3, axis=1)", {"ary": _r(2, 4)}),
    F("np.hsplit", "np.hsplit(ary, 2)", {"ary": _r(2, 4)}),
    F("np.vsplit", "np.vsplit(ary, [1])", {"ary": _r(3, 2)}),
    F("np.dsplit", "np.dsplit(ary, 2)", {"ary": _r(1, 2, 4)}),
    F("scipy.linalg.cho_factor", "scipy.linalg.cho_factor(a)", {"a": _SPD3}, part=0,
      sym=("a",), view=np.triu),
    F("scipy.linalg.cho_factor", "scipy.linalg.cho_factor(a, lower=True)", {"a": _SPD3},
      {"lower": "True"}, part=0, sym=("a",), view=np.tril),
    F("scipy.linalg.cho_solve", "scipy.linalg.cho_solve((c, True), b)",
      {"c": np.linalg.cholesky(_SPD3), "b": _r(3)}, {"lower": "True"}, tril=("c",)),
    F("scipy.linalg.cho_solve", "scipy.linalg.cho_solve((c, False), b)",
      {"c": np.linalg.cholesky(_SPD3).T, "b": _r(3, 2)}, {"lower": "False"}),
    F("scipy.special.softmax", "scipy.special.softmax(x, axis=1)", {"x": _r(3, 4)},
      {"axis": "1"}),
    F("scipy.special.softmax", "scipy.special.softmax(x)", {"x": _r(3, 4)}),
    F("scipy.special.log_softmax", "scipy.special.log_softmax(x, axis=0)", {"x": _r(3, 4)},
      {"axis": "0"}),
    *[F(f"scipy.stats.poisson.{m}", f"scipy.stats.poisson.{m}(k, mu)",
        {"k": np.array([0.0, 1.0, 3.0, 2.5, -1.0]), "mu": _RNG.uniform(0.5, 3.0, 5)},
        const=("k",)) for m in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")],
    F("scipy.stats.poisson.pmf", "scipy.stats.poisson.pmf(k, mu, loc)",
      {"k": np.array([1.0, 3.0, 4.0]), "mu": np.array(1.5), "loc": 1.0}, const=("k", "loc")),
    *[F(f"scipy.stats.multivariate_normal.{m}",
        f"scipy.stats.multivariate_normal.{m}(x, mean, cov)",
        {"x": _r(4, 3), "mean": _r(3), "cov": _SPD3}, sym=("cov",)) for m in ("logpdf", "pdf")],
    F("scipy.stats.multivariate_normal.logpdf", "scipy.stats.multivariate_normal.logpdf(x, "
      "cov=cov)", {"x": _r(3), "cov": _SPD3}, sym=("cov",)),
    *[F(f"scipy.stats.dirichlet.{m}", f"scipy.stats.dirichlet.{m}(x, alpha)",
        {"x": np.array([[0.2, 0.5], [0.3, 0.1], [0.5, 0.4]]), "alpha": np.array([1.5, 2.0, 3.0])},
        tril=("simplex",), again=False) for m in ("logpdf", "pdf")],
    F("scipy.stats.dirichlet.logpdf", "scipy.stats.dirichlet.logpdf(x, alpha)",
      {"x": np.array([0.2, 0.3]), "alpha": np.array([1.5, 2.0, 3.0])}),
    F("np.copy", "np.copy(a)", {"a": _r(3)}),
    F("np.array", "np.array([u, v])", {"u": _r(3), "v": _r(3)}),
    F("np.asarray", "np.asarray(a)", {"a": _r(3)}),
    F("[...]", "np.sum([u, v], axis=0)", {"u": _r(3), "v": _r(3)}),
    F("np.ndarray.astype", "a.astype(np.float64)", {"a": _r(3).astype(_F32)}),
    F("sum(iterable)", "sum(iterable, start)", {"iterable": _r(3, 2), "start": _r(2)}),
    F("max(iterable)", "max(iterable)", {"iterable": np.array([1.0, 3.0, 2.0])}),
    F("max(iterable)", "max(iterable)", {"iterable": np.array([1.0, 3.0, 3.0])}, again=False),
    F("min(iterable)", "min(iterable)", {"iterable": np.array([1.0, -3.0, 2.0])}),
    F("scipy.special.logsumexp", "scipy.special.logsumexp(a, axis=1)", {"a": _r(3, 4)},
      {"axis": "1"}, alone=True),
    F("scipy.special.logsumexp", "scipy.special.logsumexp(a, axis=0, b=b, keepdims=True)",
      {"a": _r(3, 4), "b": _RNG.uniform(0.5, 2.0, (3, 4))},
      {"axis": "0", "keepdims": "True"}, alone=True),
    F("scipy.special.logsumexp", "scipy.special.logsumexp(a, b=b, return_sign=True)",
      {"a": _r(4), "b": np.array([1.0, -2.0, 0.5, -1.0])}, {"return_sign": "True"}, part=0),
    F("x[...]", "a[1:, ::2]", {"a": _r(3, 4)}),
    F("x[...] = v", "_write(a, v)", {"a": _r(4, 4), "v": _r(2, 2)}),
    F("np.r_[...]", "np.r_[u, v]", {"u": _r(3), "v": _r(2)}),
    F("np.c_[...]", "np.c_[u, v]", {"u": _r(3), "v": _r(3)}),
]
_ENV = None


def _env():
    global _ENV
    if _ENV is None:
        pytest.importorskip("scipy")
        import scipy.linalg
        import scipy.signal
        import scipy.special
        import scipy.stats
        _ENV = {"np": np, "scipy": scipy, "_write": _write}
    return _ENV


def _row(name):
    return next(r for r in FORWARD_ROWS if r.names[0] == name)


def _tangents(ops, const, sym, tril):
    rng = np.random.default_rng(3)
    tangents = {}
    for name, value in ops.items():
        if name in const:
            continue
        t = rng.standard_normal(np.shape(value))
        if name in sym:
            t = (t + np.swapaxes(t, -1, -2)) / 2
        if name in tril:
            t = np.tril(t)
        if name == "x" and "simplex" in tril:  # (dirichlet's points stay on the simplex)
            t = t - np.mean(t, axis=0)
        tangents[name] = t if np.ndim(value) or isinstance(value, np.ndarray) else float(t)
    return tangents


def _plain(value):
    """An output as one float64 array (the parts of a list or tuple joined)."""
    if isinstance(value, (list, tuple)):
        return np.concatenate([np.ravel(_plain(v)) for v in value])
    return np.asarray(value, dtype=np.float64)


def _template_tangent(row, jvp, call, ops, fields, tangents, part):
    """The sum of the tangent templates' parts, filled and run."""
    env = {**_env(), **ops}
    factors = eval(call, env)  # noqa: S307
    out = factors[part] if part is not None else factors
    env.update(FACTORS=factors, OUT=out)
    filled = {**row.defaults, **fields, **{p: p for p in ops}}
    total = 0.0
    for name, t in tangents.items():
        env["T"] = t
        code = jvp[name].format(t="T", out="OUT", np="np", factors="FACTORS", part=part,
                                **filled)
        with np.errstate(all="ignore"):
            total = total + eval(code, env)  # noqa: S307
    return total


def _forward_rule(row, alone, part):
    """("joint" | "multi" | templates) of the row, for this call."""
    if row.linear:
        return row.linear
    if alone:
        return row.alone_jvp
    return row.output_jvps[part] if part is not None else row.jvp


@pytest.mark.parametrize(("name", "call", "ops", "fields", "const", "part", "sym", "tril",
                          "view", "alone", "rtol", "again"), FORWARD_CASES)
def test_array_row_tangent_against_central_differences(name, call, ops, fields, const, part,
                                                        sym, tril, view, alone, rtol, again):
    row = _row(name)
    assert name not in NO_TANGENT
    env = {**_env(), **ops}
    tangents = _tangents(ops, const, sym, tril)

    def run(step):
        moved = {n: np.asarray(v, dtype=np.float64) + step * tangents[n] if n in tangents
                 else v for n, v in ops.items()}
        moved = {n: float(v) if isinstance(ops[n], float) else v for n, v in moved.items()}
        with np.errstate(all="ignore"):
            value = eval(call, {**env, **moved})  # noqa: S307
        return _plain(value[part] if part is not None else value)

    h = 1e-6
    plus, minus = run(h), run(-h)
    # (an infinite value that does not move, logpmf's -inf: its difference is 0, not NaN)
    with np.errstate(invalid="ignore"):
        expected = np.where(plus == minus, 0.0, (plus - minus) / (2 * h))
    rule = _forward_rule(row, alone, part)
    if rule == "joint":
        ours = eval(call, {**env, **tangents})  # noqa: S307
        ours = ours[part] if part is not None else ours
    elif rule == "multi":
        ours = sum(_plain(eval(call, {**env, n: t})) for n, t in tangents.items())  # noqa: S307
    else:
        ours = _template_tangent(row, rule, call, ops, fields, tangents, part)
    ours = _plain(ours)
    if view is not None:
        ours, expected = view(ours), view(expected)
    assert ours.shape == expected.shape, (ours.shape, expected.shape)
    single = any(getattr(v, "dtype", None) == np.float32 for v in ops.values())
    np.testing.assert_allclose(ours, expected, rtol=rtol, atol=1e-3 if single else 1e-6)


_TEMPLATE_CASES = [
    pytest.param(case.values[0], case.values[1], case.values[2], case.values[3], p,
                 case.values[5], case.values[6], case.values[9], id=f"{case.id}:{p}")
    for case in FORWARD_CASES
    if case.values[11] and not _row(case.values[0]).linear
    for p in case.values[2] if p not in case.values[4]]


def _second_source(row, jvp, call, ops, fields, param, part, symmetric):
    """A module whose h(<param>, t, <other operands>) sums the cosine of the tangent of
    ``param``'s part, the tangent code written as forward mode writes it."""
    others = [n for n in ops if n != param]
    filled = {**row.defaults, **fields, **{p: p for p in ops}}
    code = jvp[param].format(t="t", out="out", np="np", factors="factors", part=part,
                             **filled)
    # (a symmetric operand: h reads its symmetric part, as the templates read the tangent's)
    lines = [f"{param} = ({param} + np.swapaxes({param}, -1, -2)) / 2"] if symmetric else []
    if part is None:
        lines.append(f"out = {call}")
    else:
        lines.append(f"factors = {call}")
        if "{out}" in jvp[param]:
            lines.append(f"out = factors[{part}]")
    body = "".join(f"    {line}\n" for line in lines)
    return (f"import numpy as np\nimport scipy.linalg\nimport scipy.special\n"
            f"import scipy.stats\n\n\ndef h({', '.join([param, 't', *others])}):\n"
            f"{body}    return np.sum(np.cos({code}))\n")


@pytest.mark.parametrize(("name", "call", "ops", "fields", "param", "part", "sym", "alone"),
                         _TEMPLATE_CASES)
def test_array_row_tangent_template_differentiates_again(name, call, ops, fields, param,
                                                        part, sym, alone):
    """symdiff reads each tangent template and differentiates it, in the operand and in its
    tangent, as central differences do (a Hessian is the gradient of a tangent)."""
    _env()
    row = _row(name)
    jvp = _forward_rule(row, alone, part)
    h = load(_second_source(row, jvp, call, ops, fields, param, part, param in sym), "h")
    t = _tangents({param: ops[param]}, (), sym, ())[param]
    args = [ops[param], t, *[v for n, v in ops.items() if n != param]]
    args = [np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) and
            a.dtype == np.float32 else a for a in args]
    with np.errstate(all="ignore"):
        check_grad(h, args, wrt=(0, 1), rtol=1e-4, atol=1e-6)


def _jvp_templates(row):
    yield from row.jvp.items()
    for jvp in row.output_jvps:
        yield from jvp.items()
    yield from row.alone_jvp.items()


@pytest.mark.parametrize("row", FORWARD_ROWS, ids=[r.names[0] for r in FORWARD_ROWS])
def test_tangent_templates_keep_compound_fields_whole(row):
    """As the vjp templates: each static's code stands where a compound expression (ddof=k
    - 1) keeps its meaning without parentheses (operands, {t}, {out}, {factors} are names)."""
    import ast
    import string

    names = {"np", "t", "out", "factors", "part", *row.vjp}
    for param, template in _jvp_templates(row):
        used = {f for _, f, _, _ in string.Formatter().parse(template) if f}
        fields = {name: f"_F{k} - 1" for k, name in enumerate(sorted(used - names))}
        code = template.format(np="np", t="t", out="out", factors="factors", part="0",
                               **{p: p for p in row.vjp}, **fields)
        found = {ast.unparse(n) for n in ast.walk(ast.parse(code, mode="eval"))}
        for name, text in fields.items():
            assert text in found, (row.names[0], param, name, code)
