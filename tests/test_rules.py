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

import numpy as np
import pytest
from gradcheck import agrees, check_grad, equals, load, numeric_grad

from symdiff import SymdiffError, grad, rules, value_and_grad
from symdiff.rules import ELEMENTWISE, NO_GRADIENT, lookup, resolve_name

# Casts to fewer bits round their value: central differences of them are rounding noise,
# so they are tested on their own (test_float_casts_are_the_identity).
ROUNDING_CASTS = ("np.float32", "np.float16", "np.single")
SPELLINGS = [(row, name) for row in ELEMENTWISE for name in row.names
             if name not in ROUNDING_CASTS]
ARRAY_SPELLINGS = [(row, name) for row, name in SPELLINGS if name.startswith("np.")]
MULTI_ARG_ARRAY_SPELLINGS = [(row, name) for row, name in ARRAY_SPELLINGS
                             if len(row.params) - row.optional > 1]
ZERO_DERIVATIVE = [(row, name) for row, name in SPELLINGS if "derivative 0" in row.note]
SHAPE = (5,)
MARGIN = 0.05  # kept between points and kinks: 0, half-integers, and each other


def _ids(pairs):
    return [name for _, name in pairs]


def required(row) -> tuple[str, ...]:
    return row.params[:len(row.params) - row.optional]


def make(name: str, params: tuple[str, ...], reduce: bool):
    """A module function ``f(*params)`` returning ``name(*params)``, np.sum-ed if ``reduce``."""
    call = f"{name}({', '.join(params)})"
    body = f"np.sum({call})" if reduce else call
    return load(f"""
        import math

        import numpy as np


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
    wrt = tuple(range(len(params)))
    for seed in range(3):
        args = draw_point(row, rng, None)
        grads = check_grad(f, args, wrt=wrt, seed=seed)
        check_types(grads, args)


@pytest.mark.parametrize(("row", "name"), ARRAY_SPELLINGS, ids=_ids(ARRAY_SPELLINGS))
def test_rule_on_arrays(row, name):
    params = required(row)
    f = make(name, params, reduce=True)
    rng = np.random.default_rng(5678)
    wrt = tuple(range(len(params)))
    for seed in range(2):
        args = draw_point(row, rng, SHAPE[0])
        grads = check_grad(f, args, wrt=wrt, seed=seed)
        check_types(grads, args)


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
    grads = check_grad(f, args, wrt=tuple(range(len(params))))
    check_types(grads, args)


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
    if name.startswith("np."):
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
    env = {**vars(runtime), "np": np, "a": 0.7, "b": 1.3}
    # u and v stand for the compound arguments; their values are those of the compounds.
    compounds = (a - b / 4, a * b - 0.25)
    env.update(u=eval(printer.doprint(compounds[0]), dict(env)),  # noqa: S307
               v=eval(printer.doprint(compounds[1]), dict(env)))  # noqa: S307

    def value(expr):
        return eval(printer.doprint(expr), dict(env))  # noqa: S307

    classes = [c for c in vars(rules).values() if isinstance(c, type) and issubclass(
        c, rules._NumpyFunction) and c is not rules._NumpyFunction]
    classes += [algebra.Times]
    tried = 0
    for cls in classes:
        for count in (1, 2) if cls is not rules.Round else (1,):  # (decimals: an int)
            try:
                plain, compound = cls(*(u, v)[:count]), cls(*compounds[:count])
            except (TypeError, ValueError):
                continue
            alone = value(plain)
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

        ZERO = 0.0
        TWO = 2.0


        def f({', '.join(params)}):
            v = {name}({operands})
            return 3.0 * {name}({operands}) - v ** TWO + (v - ZERO) * ({name}({operands}))
        """)
    rng = np.random.default_rng(2024)
    args = draw_point(row, rng, None)
    check_grad(module.f, args, wrt=tuple(range(len(params))))
    if name.startswith("np."):
        args = draw_point(row, rng, 4)
        check_grad(load(f"""
            import numpy as np

            ZERO = 0.0
            TWO = 2.0


            def f({', '.join(params)}):
                return np.sum({name}({operands}) ** TWO * (1.0 - ZERO * {name}({operands})))
            """, "f"), args, wrt=tuple(range(len(params))))


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
    params = required(row)
    f = make(name, params, reduce=False)
    wrt = tuple(range(len(params)))
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
    wrt = tuple(range(len(params)))
    point = [1.0, -2.0, 3.0][:len(params)] if "a_min" not in params else [2.0, -1.0, 3.0]
    # (Booleans and 8- and 16-bit integers too, which NumPy computes with in float16 or
    # float32: the derivatives still compute in float64.)
    kinds = [int, np.int64, np.float32, bool, np.int8, np.bool_, np.int16]
    if len(params) > 1:
        kinds = [int, np.float32, np.int8, bool]
    if name.startswith("np."):
        kinds += [np.array, lambda v: np.array([v, v], dtype=np.int32),
                  lambda v: np.array([v, v], dtype=np.float32),
                  lambda v: np.array([v, -v], dtype=np.int8),
                  lambda v: np.array([abs(v), 2 * abs(v)], dtype=np.uint8),
                  lambda v: np.array([v > 0, v < 0]),
                  lambda v: np.array([v, v], dtype=np.int16)]
    f = make(name, params, reduce=name.startswith("np."))
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
        for o, e, a in zip(ours, expected, args, strict=True):
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
    "scipy.special.logsumexp": [("logsumexp(x)", np.ones(1)),
                                ("logsumexp(x)", np.array([-np.inf, 0.0])),
                                ("logsumexp(x)", np.array([1000.0, 1000.0]))],
    "x[...]": [("np.sum(x[:0])", np.ones(2)), ("x[()] ** 2", np.array(2.0)),
               ("np.sum(x[x > 5.0])", np.ones(2))],
    "np.r_[...]": [("np.sum(np.r_[x, x] ** 2)", np.array(2.0)),
                   ("np.sum(np.r_[x, x] ** 2)", np.zeros(0))],
    "np.c_[...]": [("np.sum(np.c_[x, x] ** 2)", np.array(2.0)),
                   ("np.sum(np.c_[x, x] ** 2)", np.ones((2, 2)))],
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
    "np.copy": [("np.sum(np.copy(x) ** 2)", np.zeros(0)), ("np.sum(x.copy() ** 2)", np.array(2.0)),
                ("np.sum(x.copy() ** 2)", np.ones(3, _F32))],
    "np.append": [("np.sum(np.append(x, x) ** 2)", np.zeros(0)),
                  ("np.sum(np.append(x, 2.0 * x) ** 2)", np.array(2.0)),
                  ("np.sum(np.append(x, x, axis=0) ** 2)", np.ones((2, 2), _F32))],
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
    f = load("import numpy as np\nfrom scipy.special import logsumexp\n\n\n"
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


def test_cross_keywords_are_refused():
    f = load("import numpy as np\n\n\ndef f(x, y):\n"
             "    return np.sum(np.cross(x, y, axisa=0))\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones((3, 2)), np.ones((2, 3)))
    assert str(e.value).splitlines()[0].endswith(
        ".py:5:40: np.cross(..., axisa=...) is not supported")
    assert "supported instead: np.cross(a, b)" in str(e.value)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (NumPy's, for vectors of 2)
def test_cross_of_vectors_of_two_is_refused():
    f = load("import numpy as np\n\n\ndef f(x, y):\n    return np.cross(x, y)\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones(2), np.ones(2))
    assert ("np.cross is differentiated only for vectors of 3 along the last axis, not of "
            "shapes (2,) and (2,)") in str(e.value)


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
