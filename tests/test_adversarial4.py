"""Adversarial tests, fourth round: the optimizations that reason about shapes.

``shapes.shape_sources`` says which values share a shape (and which are certainly scalars);
differentiate.py then skips summing adjoints down, defers and folds sums, pulls factors out
of ``_unbroadcast`` and reuses quotients (``_by_value``); prune.py drops what the gradient
does not need, computes only the shape of what it needs the shape of (``_Shape`` stand-ins,
``_shape_of``, ``_reduced_shape``) and lets arrays go after their last use. Each claim these
make must hold for every input the function itself accepts, and every input it refuses must
be refused by the gradient too.

References are central differences (``check_grad``), gradients derived by hand, and the
function itself (for errors); ``grad`` and ``value_and_grad`` must always agree.

Tests marked ``xfail(strict=True)`` are bugs found this way; each reason says what is wrong
and where. When a bug is fixed its test starts passing and strict xfail reports it: remove
the marker then.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from gradcheck import Frozen, agrees, check_grad, equals, fresh_module, load, numeric_grad
from gradcheck import contract_grads as run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symdiff import SymdiffError, grad, value_and_grad

RNG = np.random.default_rng(20241130)
A33 = np.arange(9.0).reshape(3, 3) / 4
X6 = np.arange(1.0, 7.0).reshape(2, 3)


def outcome(call):
    """The value of ``call()``, or the exception it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - what is raised is what is compared
            return e


def both(f, args, wrt=(0,)):
    """grad's and value_and_grad's gradients of ``f`` at ``args``, checked to agree."""
    g = grad(f, wrt=wrt)(*args)
    value, h = value_and_grad(f, wrt=wrt)(*args)
    assert value == f(*args) or np.allclose(value, f(*args), rtol=1e-12)
    for a, b in zip(g, h, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    return g


def uniform(shape, low=0.5, high=1.5, rng=RNG):
    return rng.uniform(low, high, shape) if shape != "float" else float(rng.uniform(low, high))


# --- shapes.py: a claim about a value's shape that is not true ----------------------------

SG = load("""
import math
import numpy as np
from numpy import matmul
from symdiff import stop_gradient

def matmul_sum(x, A):
    s = stop_gradient(np.matmul(A, x))
    return np.sum(x + s)

def imported_matmul_sum(x, A):
    s = stop_gradient(matmul(A, x))
    return np.sum(x + s)

def vecdot_sum(x, A):
    s = stop_gradient(np.vecdot(A, x))
    return np.sum(x + s)

def matmul_operator_sum(x, A):
    s = stop_gradient(A @ x)
    return np.sum(x + s)

def prod_rows(x, X):
    s = stop_gradient(math.prod(X))
    return np.sum(x + s)

def prod_rows_value(x, X):
    return np.sum(x) * stop_gradient(math.prod(X))

def modf_pair(x):
    y = x * stop_gradient(np.modf(x))
    return np.sum(y * y)

def elementwise_sg(x, w):
    s = stop_gradient(np.clip(w, 0.2, None) * x)
    return np.sum(x + s) + np.mean(s * w)
""")


@pytest.mark.parametrize("name", ["matmul_sum", "imported_matmul_sum", "vecdot_sum"])
def test_a_gufunc_under_stop_gradient_is_not_a_broadcast(name):
    f = getattr(SG, name)
    x = np.array([0.5, -1.0, 2.0])
    assert f(x, A33) == pytest.approx(np.sum(x + A33 @ x))
    np.testing.assert_allclose(grad(f)(x, A33), np.ones(3))


def test_the_matmul_operator_under_stop_gradient_is_its_own_shape():
    x = np.array([0.5, -1.0, 2.0])
    equals(SG.matmul_operator_sum, (x, A33), [np.ones(3)])


def test_math_prod_of_rows_is_not_a_scalar():
    assert SG.prod_rows(2.0, X6) == pytest.approx(3 * 2.0 + np.sum(X6[0] * X6[1]))
    assert grad(SG.prod_rows)(2.0, X6) == pytest.approx(3.0)


def test_math_prod_of_rows_value_and_grad_sums_over_the_rows():
    value, (g,) = value_and_grad(SG.prod_rows, wrt=(0,))(2.0, X6)
    assert value == SG.prod_rows(2.0, X6) and g == pytest.approx(3.0)


def test_math_prod_of_rows_leaves_an_array_output_that_must_be_refused():
    assert np.shape(SG.prod_rows_value(np.ones(2), X6)) == (3,)
    with pytest.raises(SymdiffError, match="scalar"):
        grad(SG.prod_rows_value)(np.ones(2), X6)


def test_a_ufunc_with_two_outputs_is_not_a_broadcast():
    x = np.array([0.5, 1.5, 2.25])
    frac, whole = np.modf(x)
    np.testing.assert_allclose(grad(SG.modf_pair)(x), 2 * x * (frac ** 2 + whole ** 2))


def test_a_broadcasting_expression_under_stop_gradient_is_the_broadcast():
    x, w = np.array([[0.5], [-1.0]]), np.array([0.1, 0.7, 1.3])
    s = np.clip(w, 0.2, None) * x  # stopped: d/dw of np.mean(s * w) is s's mean per column
    equals(SG.elementwise_sg, (x, w), [np.full((2, 1), 3.0), np.sum(s, axis=0) / s.size],
           wrt=(0, 1))


# --- prune.py: statements that may raise are dropped or become shape checks ---------------

RAISE = load("""
import math
import numpy as np
from symdiff import stop_gradient

def float_of(x):
    return float(x) * 2.0

def math_sin(x):
    return math.sin(x)

def log_of_param(x, c):
    t = x + math.log(c)
    return np.sum(t)

def int_negative_power(x, n):
    return np.sum(x * 2.0) + np.sum(n ** -1)

def float_overflow(x):
    s = float(np.sum(x))
    return s ** 2

def float_division(x, c):
    return float(x / c)

def method_of_a_float(x):
    return x.sum()

def list_parameter(x, L):
    return np.sum(x * L)

def duplicate_axis(x):
    y = np.sum(x, axis=(0, 0))
    return np.sum(y)

def unbound_on_this_path(x, w, c):
    if c > 0:
        t = x * w
    y = t * 2.0
    return np.sum(x)

def unbound_under_stop_gradient(x, w, c):
    if c > 0:
        t = x * w
    return np.sum(x) + np.sum(stop_gradient(t))

def unbound_shape_read(x, w, c):
    if c > 0:
        t = x * w
    return np.sum(t * 2.0) + np.sum(x)

def max_of_empty(x):
    return np.sum(x * 2.0) + np.max(x)

def stopped_max_of_empty(x):
    return np.sum(x * stop_gradient(np.max(x)))

def shapes_must_fit(x, w):
    y = x * w
    return np.sum(y) + np.mean(x)

def reduced_shapes_must_fit(x, w):
    z = np.sum(x * w, axis=1)
    return np.sum(z * 2.0)
""")

MAY_RAISE = [
    pytest.param(RAISE.float_of, (np.ones(3),), (0,), id="float-of-an-array"),
    pytest.param(RAISE.math_sin, (np.ones(3),), (0,), id="math-sin-of-an-array"),
    pytest.param(RAISE.log_of_param, (np.ones(3), -1.0), (0, 1), id="math-domain-error"),
    pytest.param(RAISE.int_negative_power, (np.ones(3), np.arange(1, 4)), (0,),
                 id="int-to-a-negative-power"),
    pytest.param(RAISE.float_overflow, (np.array([1e200]),), (0,), id="float-overflow"),
    pytest.param(RAISE.float_division, (1.0, 0.0), (0,), id="float-division-by-zero"),
    pytest.param(RAISE.method_of_a_float, (2.0,), (0,), id="sum-method-of-a-float"),
    pytest.param(RAISE.list_parameter, (2.0, [1.0, 2.0, 3.0]), (0,), id="float-times-list"),
    pytest.param(RAISE.duplicate_axis, (np.ones((2, 3)),), (0,), id="duplicate-axis"),
    pytest.param(RAISE.unbound_on_this_path, (np.ones(3), np.ones(3), -1.0), (0,),
                 id="name-unbound-on-this-path"),
    pytest.param(RAISE.unbound_under_stop_gradient, (np.ones(3), np.ones(3), -1.0), (0,),
                 id="unbound-name-under-stop-gradient"),
]


@pytest.mark.parametrize(("f", "args", "wrt"), MAY_RAISE)
def test_grad_raises_where_the_function_raises(f, args, wrt):
    error = outcome(lambda: f(*args))
    assert isinstance(error, Exception)
    got = outcome(lambda: grad(f, wrt=wrt)(*args))
    assert isinstance(got, type(error)), (error, got)


@pytest.mark.parametrize(("f", "args", "wrt"), MAY_RAISE)
def test_value_and_grad_raises_where_the_function_raises(f, args, wrt):
    error = outcome(lambda: f(*args))
    got = outcome(lambda: value_and_grad(f, wrt=wrt)(*args))
    assert isinstance(got, type(error)), (error, got)


@pytest.mark.parametrize("name", ["unbound_shape_read", "unbound_on_this_path"])
def test_a_name_the_path_assigned_is_read_as_usual(name):
    f = getattr(RAISE, name)
    x, w = np.array([0.5, 1.0, 2.0]), np.array([1.0, -1.0, 3.0])
    expected = 2 * w + 1 if name == "unbound_shape_read" else np.ones(3)
    equals(f, (x, w, 1.0), [expected])
    if name == "unbound_shape_read":  # the gradient reads t's shape: the stand-in raises
        for make in (grad, value_and_grad):
            assert isinstance(outcome(lambda m=make: m(f)(x, w, -1.0)), UnboundLocalError)


@pytest.mark.parametrize("name", ["max_of_empty", "stopped_max_of_empty"])
def test_np_max_of_an_empty_array_raises_in_grad_too(name):
    f, x = getattr(RAISE, name), np.zeros(0)
    assert isinstance(outcome(lambda: f(x)), ValueError)
    for make in (grad, value_and_grad):
        assert isinstance(outcome(lambda m=make: m(f)(x)), ValueError)


@pytest.mark.parametrize(("x", "w"), [
    (np.ones(3), np.ones(4)),
    (np.ones((2, 3)), np.ones(2)),
    (np.ones((0, 3)), np.ones(2)),
    (np.ones((3, 1)), np.ones((2, 2))),
])
@pytest.mark.parametrize("name", ["shapes_must_fit", "reduced_shapes_must_fit"])
def test_shapes_that_do_not_fit_are_refused_by_grad_too(name, x, w):
    f = getattr(RAISE, name)
    error = outcome(lambda: f(x, w))
    assert isinstance(error, ValueError)
    for wrt in ((0,), (1,), (0, 1)):
        for make in (grad, value_and_grad):
            assert isinstance(outcome(lambda m=make, d=wrt: m(f, wrt=d)(x, w)), ValueError)


@pytest.mark.parametrize("x", [2.0, np.array(2.0), np.array([2.0]), np.ones((1, 1))])
def test_float_of_a_scalar_or_a_zero_dimensional_array(x):
    f = RAISE.float_of
    if np.ndim(x):
        assert isinstance(outcome(lambda: f(x)), TypeError)
        assert isinstance(outcome(lambda: value_and_grad(f)(x)), TypeError)
        return
    (g,) = both(f, (x,))
    assert g == 2.0 and np.shape(g) == np.shape(x)


# --- runtime._reduced_shape: the shape of a reduction must follow NumPy's own rules --------

RED = load("""
import numpy as np

def sum_of_sum(x):
    return np.sum(np.sum(x, axis=0))

def sum_of_sum_last(x):
    return np.sum(np.sum(x, axis=-1, keepdims=True) * 3.0)

def mean_of_mean(x):
    return np.mean(np.mean(x, axis=1))

def prod_then_sum(x):
    return np.sum(np.prod(x, axis=0) * 0.0 + x)

def kept(x, w):
    z = np.sum(x * w, axis=(0, 2), keepdims=True)
    return np.sum(z * z) + np.mean(np.sum(x, axis=-2))
""")


@pytest.mark.parametrize("x", [2.0, np.array(2.0)])
@pytest.mark.parametrize("name", ["sum_of_sum", "sum_of_sum_last"])
def test_a_reduction_over_axis_0_of_a_scalar_is_the_scalar(name, x):
    f = getattr(RED, name)
    assert np.shape(f(x)) == ()
    expected = 1.0 if name == "sum_of_sum" else 3.0
    (g,) = grad(f, wrt=(0,))(x)
    assert g == expected


@pytest.mark.parametrize("name", ["sum_of_sum", "sum_of_sum_last"])
def test_value_and_grad_of_a_reduction_over_axis_0_of_a_scalar(name):
    value, (g,) = value_and_grad(getattr(RED, name), wrt=(0,))(2.0)
    assert g == (1.0 if name == "sum_of_sum" else 3.0)


def test_an_axis_out_of_bounds_raises_numpys_axis_error():
    assert isinstance(outcome(lambda: RED.mean_of_mean(np.ones(3))), np.exceptions.AxisError)
    assert isinstance(outcome(lambda: value_and_grad(RED.mean_of_mean)(np.ones(3))),
                      np.exceptions.AxisError)
    with pytest.raises(np.exceptions.AxisError):
        grad(RED.mean_of_mean)(np.ones(3))


def test_a_mean_over_an_axis_a_scalar_does_not_have_is_refused():
    for call in (grad(RED.mean_of_mean), value_and_grad(RED.mean_of_mean)):
        assert isinstance(outcome(lambda c=call: c(2.0)), ValueError)


@pytest.mark.parametrize(("xs", "ws"), [((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)),
                                        ((1, 3, 1), (2, 3, 4)), ((2, 3, 1), ())])
def test_reductions_with_keepdims_and_axis_tuples(xs, ws):
    rng = np.random.default_rng(11)
    agrees(RED.kept, (rng.standard_normal(xs), uniform(ws if ws else "float", rng=rng)),
           wrt=(0, 1))


def test_a_product_whose_value_is_multiplied_by_zero():
    x = np.array([[0.5, 2.0], [0.0, -1.0]])
    equals(RED.prod_then_sum, (x,), [np.ones((2, 2))])


# --- np.mean's folded seed: 1.0 / _size(...) -----------------------------------------------

MEAN = load("""
import numpy as np
W = np.arange(1.0, 4.0)

def mean_twice(x):
    return np.mean(x * 2.0)

def mean_plain(x):
    return np.mean(x)

def mean_of_product(x, w):
    return np.mean(x * w)

def mean_with_module_array(x):
    return np.mean(np.sin(x) * W)
""")


@pytest.mark.parametrize("x", [np.zeros(0), np.zeros((0, 3))])
def test_the_mean_of_an_empty_array_has_an_empty_gradient(x):
    assert np.isnan(outcome(lambda: MEAN.mean_twice(x)))
    g = outcome(lambda: grad(MEAN.mean_twice)(x))
    assert isinstance(g, np.ndarray) and g.shape == x.shape


@pytest.mark.parametrize("x", [np.zeros(0), np.zeros((0, 3))])
def test_the_mean_of_an_empty_array_unfolded(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = grad(MEAN.mean_plain)(x)
    assert g.shape == x.shape


@pytest.mark.parametrize(("xs", "ws"), [((3, 1), (1, 4)), ((), (4,)), ((2, 1, 3), (3,)),
                                        ((4,), ()), ((1,), (2, 3)), ((), ())])
def test_the_mean_seed_is_one_over_the_broadcast_size(xs, ws):
    rng = np.random.default_rng(12)
    x, w = uniform(xs or "float", rng=rng), uniform(ws or "float", rng=rng)
    full = np.broadcast_shapes(np.shape(x), np.shape(w))
    n = int(np.prod(full))
    dx = _sum_to(np.broadcast_to(w, full) / n, np.shape(x))
    dw = _sum_to(np.broadcast_to(x, full) / n, np.shape(w))
    equals(MEAN.mean_of_product, (x, w), [dx, dw], wrt=(0, 1))


def _sum_to(g, shape):
    """g summed down to ``shape`` (a reference independent of runtime._unbroadcast)."""
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    for i, n in enumerate(shape):
        if n == 1 and g.shape[i] != 1:
            g = g.sum(axis=i, keepdims=True)
    return g


@pytest.mark.parametrize("x", [0.7, np.array(0.7), np.array([0.7]), np.array([0.1, 0.2, 0.3]),
                               np.array([[0.1], [0.2]])])
def test_the_mean_seed_with_a_module_array(x):
    full = np.broadcast_shapes(np.shape(x), (3,))
    n = int(np.prod(full))
    g = np.cos(np.broadcast_to(x, full)) * np.broadcast_to(np.arange(1.0, 4.0), full) / n
    expected = float(np.sum(g)) if np.ndim(x) == 0 else _sum_to(g, np.shape(x))
    equals(MEAN.mean_with_module_array, (x,), [expected])


# --- shape sources meet module data, math, builtins and stop_gradient -----------------------

fresh_module("import numpy as np\nA = np.array([[1.0], [2.0], [3.0]])\nS = 0.5\n", "adv4cfg")

MIX = load("""
import math
import numpy as np
import adv4cfg
from adv4cfg import S
from symdiff import stop_gradient

B = np.array([0.5, -0.25, 1.0, 2.0])

def attribute_mean(x):
    y = x * adv4cfg.A
    return np.mean(y) + np.sum(y * x) * S

def module_arrays(x, w):
    y = x * B + w
    z = np.sum(y, axis=-1, keepdims=True)
    return np.mean(z * adv4cfg.A) + np.sum(y * B)

def math_scalars(x, w):
    m = math.exp(float(np.mean(x)) * 0.5)
    y = x * m + w / (1.0 + m)
    return math.tanh(float(np.sum(y * y)) * 0.1)

def builtins_mix(x, w):
    y = abs(x - 0.3) * w
    z = max(float(np.sum(y)), 0.5) + min(float(np.mean(x)), 2.0)
    return z * round(2.4) + np.sum(y * x)

def where_clip(x, w):
    a = np.clip(x, None, 0.9) * w
    b = np.where(x > 0.6, a, w * 0.5)
    c = np.clip(w, 0.1, None) * x
    return np.sum(a * b) + np.mean(c)

def stopped_scale(x, w):
    s = stop_gradient(np.sum(x * w, axis=0))
    y = x * w / s
    return np.sum(y * y) + np.mean(s)
""")


@pytest.mark.parametrize("x", [0.8, np.array([0.8]), np.array([0.5, 0.9, 1.2]),
                               np.array([[0.5], [0.9], [1.2]]), np.array(0.4)])
def test_a_module_attribute_operand(x):
    agrees(MIX.attribute_mean, (x,))


@pytest.mark.parametrize(("xs", "ws"), [((3, 1), (1, 4)), ((), (4,)), ((2, 1, 4), (4,)),
                                        ((4,), ()), ((1,), (3, 1))])
def test_module_arrays_and_attributes_broadcast_against_parameters(xs, ws):
    rng = np.random.default_rng(13)
    agrees(MIX.module_arrays, (uniform(xs or "float", rng=rng), uniform(ws or "float", rng=rng)),
           wrt=(0, 1))


@pytest.mark.parametrize(("xs", "ws"), [((3, 1), (1, 4)), ((), (4,)), ((2, 1, 3), (3,)),
                                        ((), ()), ((3,), (2, 1))])
def test_math_and_float_of_reductions(xs, ws):
    rng = np.random.default_rng(14)
    agrees(MIX.math_scalars, (uniform(xs or "float", rng=rng), uniform(ws or "float", rng=rng)),
           wrt=(0, 1))


@pytest.mark.parametrize(("xs", "ws"), [((3, 1), (1, 4)), ((), (4,)), ((2, 1, 3), (3,))])
def test_python_builtins_in_broadcasting_expressions(xs, ws):
    rng = np.random.default_rng(15)
    agrees(MIX.builtins_mix, (uniform(xs or "float", rng=rng), uniform(ws or "float", rng=rng)),
           wrt=(0, 1))


@pytest.mark.parametrize(("xs", "ws"), [((3, 1), (1, 4)), ((), (4,)), ((2, 1, 3), (3,)),
                                        ((4,), (4,))])
def test_where_and_clip_with_none(xs, ws):
    rng = np.random.default_rng(16)
    x, w = uniform(xs or "float", 0.0, 1.2, rng), uniform(ws or "float", rng=rng)
    assert np.all(np.abs(np.asarray(x) - 0.6) > 1e-3) and np.all(np.abs(np.asarray(x) - 0.9) > 1e-3)
    agrees(MIX.where_clip, (x, w), wrt=(0, 1))


@pytest.mark.parametrize(("xs", "ws"), [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3), (2, 1))])
def test_stop_gradient_of_a_reduction_is_a_constant_of_its_shape(xs, ws):
    rng = np.random.default_rng(17)
    x, w = uniform(xs, rng=rng), uniform(ws, rng=rng)
    s = np.sum(x * w, axis=0)
    full = np.broadcast_shapes(x.shape, w.shape)
    dy = 2 * x * w / s / s  # d(sum((xw/s)^2)) / d(xw), s held
    dx = _sum_to(np.broadcast_to(dy * w, full), x.shape)
    dw = _sum_to(np.broadcast_to(dy * x, full), w.shape)
    equals(MIX.stopped_scale, (x, w), [dx, dw], wrt=(0, 1))


# --- deferred sums, factors pulled out of _unbroadcast, quotients by value -----------------

DEF = load("""
import numpy as np

def many_contributions(x, w, s):
    a = x * w
    b = a * x + np.sin(x) * s
    c = b * w - x / s
    d = c * x + a * s
    return np.sum(d * d) + np.mean(a * c)

def quotients(x, s):
    P = x / s
    Q = P / s ** 2
    R = 3.0 * s / (x * x + 1.0)
    return np.sum(P * Q) + np.sum(R / s)

def pulled(x, s, w):
    y = x * s * w / s ** 3 + s * np.exp(s) * x * w
    return np.sum(np.tanh(y) * w * s)

def reused_in_branch(x, w):
    y = x * w
    s = np.sum(y, axis=0)
    t = np.mean(s)
    if t > 0:
        t = t + np.sum(y * y)
    return t

def reused_in_loop(x, w):
    y = np.exp(x) * w
    z = np.sum(y, axis=-1, keepdims=True)
    acc = 0.0
    for i in range(3):
        acc = acc + np.sum(z * x) * i + np.mean(y)
    return acc
""")

SHAPE_TRIPLES = [((3, 1), (1, 4), ()), ((), (4,), (2, 1)), ((2, 1, 3), (3,), (1, 1)),
                 ((4,), (), ()), ((), (), ()), ((2, 3), (2, 1), (3,)), ((1,), (1, 1), ())]


@pytest.mark.parametrize("shapes", SHAPE_TRIPLES)
def test_contributions_of_many_shapes_to_one_adjoint(shapes):
    rng = np.random.default_rng(18)
    args = tuple(uniform(s or "float", rng=rng) for s in shapes)
    agrees(DEF.many_contributions, args, wrt=(0, 1, 2))


@pytest.mark.parametrize("shapes", SHAPE_TRIPLES)
def test_factors_pulled_out_of_the_sum_down(shapes):
    rng = np.random.default_rng(19)
    args = tuple(uniform(s or "float", rng=rng) for s in shapes)
    agrees(DEF.pulled, args, wrt=(0, 1, 2))


@pytest.mark.parametrize(("xs", "ss"), [((3, 4), (3, 1)), ((3, 4), ()), ((4,), (2, 1)),
                                        ((), (3,)), ((2, 1, 3), (3,))])
def test_quotients_reuse_their_value(xs, ss):
    rng = np.random.default_rng(20)
    x, s = uniform(xs or "float", rng=rng), uniform(ss or "float", 1.0, 2.0, rng)
    agrees(DEF.quotients, (x, s), wrt=(0, 1))


def test_quotients_of_integers_and_of_zero_dimensional_arrays():
    x, s = np.arange(1, 5), np.arange(1, 3).reshape(2, 1)
    reference = grad(DEF.quotients, wrt=(0, 1))(x.astype(float), s.astype(float))
    for got, want in zip(run(DEF.quotients, (x, s), wrt=(0, 1)), reference, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    xs, ss = np.array(1.5), np.array(2.0)
    reference = grad(DEF.quotients, wrt=(0, 1))(1.5, 2.0)
    for got, want in zip(run(DEF.quotients, (xs, ss), wrt=(0, 1)), reference, strict=True):
        assert isinstance(got, np.ndarray) and got.shape == ()
        np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize(("xs", "ws"), [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3), (2, 1))])
def test_a_value_read_by_a_branch_after_its_shape_is_taken(xs, ws):
    rng = np.random.default_rng(21)
    for sign in (1.0, -1.0):
        agrees(DEF.reused_in_branch, (sign * uniform(xs, rng=rng), uniform(ws, rng=rng)),
               wrt=(0, 1))


@pytest.mark.parametrize(("xs", "ws"), [((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3), ())])
def test_a_value_read_by_a_loop_after_its_last_straight_line_use(xs, ws):
    rng = np.random.default_rng(22)
    agrees(DEF.reused_in_loop, (uniform(xs, rng=rng), uniform(ws or "float", rng=rng)),
           wrt=(0, 1))


# --- stand-ins and released arrays in the generated source --------------------------------

REL = load("""
import numpy as np
from symdiff import stop_gradient

def helper(a, b):
    t = a * b
    u = np.sum(t, axis=0, keepdims=True)
    return u

def twice(x, w):
    y = helper(x, w)
    z = helper(y, x)
    return np.mean(z * y)

def attention(Q, K, V):
    S = Q @ K.T
    S = S - stop_gradient(np.max(S, axis=1, keepdims=True))
    E = np.exp(S)
    P = E / np.sum(E, axis=1, keepdims=True)
    return np.sum((P @ V) ** 2)

def shape_then_while(x, w):
    y = np.exp(x) * w
    s = np.sum(y, axis=0)
    n = 0
    while np.sum(s) > 1.0 and n < 3:
        s = s * 0.5
        n = n + 1
    return np.sum(s) + np.mean(y)

def matmul_shape_only(X, W, b):
    H = X @ W
    Z = H + b
    return np.mean(np.sum(Z, axis=1))
""")


def test_helpers_inlined_twice_keep_their_names_apart():
    x, w = np.array([[0.5], [1.0], [1.5]]), np.array([0.0, 1.0, 2.0, 3.0])
    agrees(REL.twice, (x, w), wrt=(0, 1))


def test_an_attention_block_with_deleted_and_shape_only_arrays():
    rng = np.random.default_rng(23)
    Q, K, V = (rng.standard_normal((4, 3)) for _ in range(3))
    g = grad(REL.attention, wrt=(0, 1, 2))
    assert "del " in g.source
    grads = run(REL.attention, (Q, K, V), wrt=(0, 1, 2))
    # np.max's value cancels out of the softmax: central differences of the function itself
    check_grad(REL.attention, (Q, K, V), wrt=(0, 1, 2), grads=grads)


@pytest.mark.parametrize("x", [np.array([[-1.0], [0.5], [-0.3]]), np.array([[2.0], [1.0]])])
def test_a_while_loop_reads_a_value_whose_name_was_let_go(x):
    agrees(REL.shape_then_while, (x, np.array([0.2, 0.4, 0.6, 0.8])), wrt=(0, 1))


def test_a_matmul_result_needed_only_for_its_shape():
    rng = np.random.default_rng(24)
    X, W, b = rng.standard_normal((5, 3)), rng.standard_normal((3, 4)), rng.standard_normal(4)
    src = grad(REL.matmul_shape_only, wrt=(1, 2)).source
    assert "_shape_of" in src or "_reduced_shape" in src, src
    n = 5
    equals(REL.matmul_shape_only, (X, W, b),
           [np.broadcast_to(X.sum(axis=0)[:, None], (3, 4)) / n, np.full(4, 1.0)],
           wrt=(1, 2))
    with pytest.raises(ValueError):
        grad(REL.matmul_shape_only, wrt=(1, 2))(X, W, np.ones(3))


# --- dtypes: int and float32 inputs, 0-d arrays ------------------------------------------

DT = load("""
import numpy as np

def mixed(x, w):
    y = x * w
    z = np.sum(y, axis=-1, keepdims=True)
    return np.mean(y / (1.0 + z * z)) + np.sum(x * x * w)
""")


@pytest.mark.parametrize(("xs", "ws"), [((3, 1), (1, 4)), ((), (4,)), ((2, 1, 3), (3,))])
def test_int_float32_and_zero_dimensional_inputs_agree_with_float64(xs, ws):
    rng = np.random.default_rng(25)
    xi = rng.integers(1, 4, xs) if xs else 2
    wi = rng.integers(1, 4, ws)
    x64, w64 = np.asarray(xi, dtype=float), np.asarray(wi, dtype=float)
    x64 = float(x64) if not xs else x64
    want = grad(DT.mixed, wrt=(0, 1))(x64, w64)
    check_grad(DT.mixed, (x64, w64), wrt=(0, 1), grads=want)
    for args, rtol in (((xi, wi), 1e-12),
                       ((np.float32(xi) if not xs else xi.astype(np.float32),
                         wi.astype(np.float32)), 1e-5),
                       ((np.asarray(x64), w64), 1e-12)):
        for got, w in zip(run(DT.mixed, args, wrt=(0, 1)), want, strict=True):
            np.testing.assert_allclose(got, w, rtol=rtol)


# --- random programs (hypothesis) -------------------------------------------------------

fresh_module("import numpy as np\nA = np.linspace(0.5, 1.5, 4)\n"
             "B = np.linspace(-1.0, 1.0, 3).reshape(3, 1)\n", "adv4rand")

HEAD = """import math
import numpy as np
import adv4rand
from symdiff import stop_gradient as sg
W = np.linspace(0.2, 1.0, 4)

def h1(p, q):
    t = p * q
    u = np.sum(t, axis=-1, keepdims=True)
    return u / (1.0 + t * t) + p

"""

SHAPES = [(), (4,), (3, 1), (3, 4), (2, 1, 4), (1,), (1, 4), (2, 3, 1), (1, 1)]
OPS = ["{a} + {b}", "{a} * {b}", "{a} - 2.0 * {b}", "np.sin({a}) * {b}",
       "{a} / (1.5 + {b} * {b})", "np.tanh({a} * {b})", "{a} ** 2 * {b}", "{a} * W",
       "{a} + adv4rand.A", "{a} * adv4rand.B", "{a} * sg({b})", "{a} * np.sum({b})",
       "{a} / np.mean({b} * {b})", "h1({a}, {b})", "np.sum({a}, axis=-1, keepdims=True) * {b}",
       "np.mean({a}, axis=0)", "np.sum({a}, axis=0, keepdims=True) / (1.0 + {b} ** 2)",
       "{a} * sg(np.max({b}))", "np.clip({a}, -0.8, None) * {b}", "{a} / {b} ** 2",
       "math.exp(float(np.mean({a}))) * {b}"]
FINALS = ["np.sum({v})", "np.mean({v})", "np.sum({v} * {o})", "np.mean({v}) * np.sum({o})",
          "math.tanh(float(np.mean({v})))", "np.mean({v} / (1.0 + {o} ** 2))"]


def _program(rnd: random.Random):
    n = rnd.randint(1, 3)
    rng = np.random.default_rng(rnd.randrange(10**6))
    args = []
    for _ in range(n):
        shape = rnd.choice(SHAPES)
        args.append(rng.uniform(0.5, 1.5, shape) if shape or rnd.random() < 0.5
                    else float(rng.uniform(0.5, 1.5)))
    names, body = [f"p{i}" for i in range(n)], []
    for k in range(rnd.randint(1, 5)):
        v = f"v{k}"

        def op(pool):
            return rnd.choice(OPS).format(a=rnd.choice(pool), b=rnd.choice(pool))

        kind = rnd.random()
        if kind < 0.65:
            body.append(f"    {v} = {op(names)}")
        elif kind < 0.85:
            body += [f"    if np.sum({rnd.choice(names)}) > {rnd.choice([1.0, 3.0, 6.0])}:",
                     f"        {v} = {op(names)}", "    else:", f"        {v} = {op(names)}"]
        else:
            body += [f"    {v} = {rnd.choice(names)}", f"    for i in range({rnd.randint(1, 3)}):",
                     f"        {v} = {op(names + [v])} * 0.5 + {v} * 0.5"]
        names.append(v)
    final = rnd.choice(FINALS).format(v=names[-1], o=rnd.choice(names))
    source = (HEAD + f"def f({', '.join(f'p{i}' for i in range(n))}):\n" + "\n".join(body)
              + f"\n    return {final}\n")
    wrt = tuple(sorted(rnd.sample(range(n), rnd.randint(1, n))))
    return source, tuple(args), wrt


def _frozen_reference(source, args, wrt):
    module = load(source.replace("from symdiff import stop_gradient as sg", ""))
    frozen = Frozen()
    module.sg = frozen
    module.f(*args)
    frozen.replay = True

    def replayed(*a):
        frozen.k = 0
        return module.f(*a)

    return [numeric_grad(replayed, list(args), i) for i in wrt]


def _usable(f, args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            value = f(*args)
            return np.ndim(value) == 0 and bool(np.isfinite(value))
        except Exception:  # noqa: BLE001 - a program the generator made that does not run
            return False


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_random_programs_against_central_differences(seed):
    source, args, wrt = _program(random.Random(seed))
    f = load(source, "f")
    if not _usable(f, args):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = outcome(lambda: both(f, args, wrt))
        assert not isinstance(got, Exception), (source, got)
        want = _frozen_reference(source, args, wrt)
    for i, g, w in zip(wrt, got, want, strict=True):
        assert np.shape(g) == np.shape(args[i])
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=source)


BAD_SHAPES = [(2,), (5,), (3, 2), (0,), (0, 4)]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_random_programs_refuse_what_the_function_refuses(seed):
    rnd = random.Random(seed)
    source, args, wrt = _program(rnd)
    f = load(source, "f")
    args = list(args)
    args[rnd.randrange(len(args))] = np.full(rnd.choice(BAD_SHAPES), 0.7)
    error = outcome(lambda: f(*args))
    if not isinstance(error, Exception) or "axis" in str(error):
        return  # (a mismatch of axes: see the _reduced_shape tests above)
    for make in (grad, value_and_grad):
        got = outcome(lambda m=make: m(f, wrt=wrt)(*args))
        assert isinstance(got, (type(error), SymdiffError)), (source, error, got)
