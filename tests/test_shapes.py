"""What shapes.py claims about shapes, and the gradients that rely on those claims (broadcasting,
sums folded or pulled out of _unbroadcast, reductions' shapes).

A wrong claim would be a silent wrong gradient (an adjoint not summed down) or a skipped
scalar check, so each unreadable construct is tested to fall back to "its own shape".
"""

import re
import warnings

import numpy as np
import pytest
from gradcheck import agrees, check_grad, equals, fresh_module, load, outcome
from gradcheck import contract_grads as run

from symdiff import SymdiffError, grad, value_and_grad
from symdiff.lower import lower
from symdiff.parse import parse
from symdiff.runtime import _reduced_shape, _shape_of
from symdiff.shapes import shape_sources, sources

M = load("""
import math
import numpy as np
import shapes_data

W = np.ones(3)

def example(x, w):
    y = x * w + 1
    s = np.sum(y)
    r = s * x
    return np.sum(r)

def calls(x, w):
    a = np.sin(x) * np.clip(w, 0.0, None)
    b = math.exp(x[0]) + float(x[1])
    c = np.round(x, 2) + abs(w)
    d = np.sum(x, axis=0)
    e = x * shapes_data.A
    f = x @ w
    return np.sum(a + b + c + d + e + f)

def module_attribute(x):
    y = x * shapes_data.A
    return np.sum(y * y)

def module_attribute_sum_seed(x):
    return np.sum(x * shapes_data.A)

def not_scalar(x):
    s = np.sum(x)
    return s * shapes_data.A

def module_array(x):
    return np.sum(x * W)
""") if fresh_module("import numpy as np\nA = np.arange(1.0, 4.0)\n", "shapes_data") else None


def shapes_of(f, wrt=(0,)):
    ir = lower(parse(f), wrt)
    found = shape_sources(ir)
    return lambda name: sources(found, name)


def test_elementwise_values_are_made_of_their_operands_and_full_sums_are_scalars():
    of = shapes_of(M.example)
    assert of("y") == {"x", "w"}
    assert of("s") == frozenset()
    assert of("r") == {"x"}


def test_what_cannot_be_read_is_its_own_shape_and_math_gives_a_scalar():
    of = shapes_of(M.calls)
    assert of("a") == {"x", "w"}  # ufuncs and np.clip broadcast their operands
    assert of("b") == frozenset()  # math.exp and float return Python floats
    assert of("c") == {"c"}  # builtin abs: not read as a broadcast
    assert of("d") == {"d"}  # a reduction along an axis
    assert of("e") == {"e"}  # a module attribute: shape unknown here
    assert of("f") == {"f"}  # matmul


@pytest.mark.parametrize("x", [2.0, np.array([2.0]), np.array([1.0, 2.0, 3.0])])
def test_an_operand_broadcast_against_a_module_attribute_is_summed_back(x):
    g = grad(M.module_attribute)
    a = np.arange(1.0, 4.0)
    expected = np.sum(2 * x * a * a) if np.size(x) == 1 else 2 * x * a * a
    np.testing.assert_allclose(g(x), np.reshape(expected, np.shape(x)))
    check_grad(M.module_attribute, (x,))


@pytest.mark.parametrize("x", [2.0, np.array([2.0])])
def test_a_sum_seed_spreads_to_the_module_attribute_shape(x):
    np.testing.assert_allclose(grad(M.module_attribute_sum_seed)(x),
                               np.reshape(6.0, np.shape(x)))


def test_a_value_made_an_array_by_a_module_attribute_is_not_taken_for_a_scalar():
    with pytest.raises(SymdiffError, match="scalar"):
        grad(M.not_scalar)(np.ones(3))


def test_module_level_arrays_are_operands_like_any_other():
    assert shapes_of(M.module_array)("_t0") in ({"x", "W"}, {"_t0"})
    np.testing.assert_allclose(grad(M.module_array)(2.0), 3.0)


B = load("""
import numpy as np

def mixed(x, a, b):
    y = x * a + np.sin(x)
    z = x * b
    w = y * x
    u = np.sum(w) + np.sum(z * x) + np.sum(x * a * b)
    if u > 0:
        u = u * np.sum(x)
    return u + np.sum(np.tanh(y))

def several(x, w):
    y = x * w
    z = np.sin(y) * x + y * x
    t = np.tanh(z)
    return np.sum(t * t)

def scalar(x, y):
    return (1 - x) ** 2 + 100 * (y - x**2) ** 2

def chain(x, a):
    e = x
    for i in range(3):
        e = np.sin(e + x * a) + x
    t = e * a
    return np.sum(t * x)
""")


@pytest.mark.parametrize("shapes", [
    ((3, 1), (1, 4), (5, 1, 1)),
    ((), (4,), (2, 1)),
    ((4,), (), ()),
    ((), (), ()),
])
def test_adjoints_of_several_shapes_are_summed_down_right(shapes):
    rng = np.random.default_rng(1)
    args = tuple(rng.uniform(0.5, 1.5, s) if s else float(rng.uniform(0.5, 1.5))
                 for s in shapes)
    check_grad(B.mixed, args, wrt=(0, 1, 2))


@pytest.mark.parametrize("shapes", [((3, 1), (1, 4)), ((), (4,)), ((2,), ())])
def test_adjoints_summed_down_around_a_loop(shapes):
    rng = np.random.default_rng(2)
    args = tuple(rng.uniform(0.5, 1.5, s) if s else float(rng.uniform(0.5, 1.5))
                 for s in shapes)
    check_grad(B.chain, args, wrt=(0, 1))


def test_contributions_of_one_shape_are_summed_down_once():
    src = grad(B.several, wrt=(0, 1)).source
    assert "dx = dx + _unbroadcast" not in src and src.count("_unbroadcast(dx, x)") == 1, src
    check_grad(B.several, (np.array([[0.5], [1.0]]), np.array([0.3, 0.7, 1.1])), wrt=(0, 1))


def test_a_scalar_result_needs_no_summing_down():
    src = grad(B.scalar, wrt=(0, 1)).source
    assert "_unbroadcast" not in src, src
    check_grad(B.scalar, (0.7, 1.3), wrt=(0, 1))
    check_grad(B.scalar, (np.array(0.7), np.float64(1.3)), wrt=(0, 1))


S = load("""
import numpy as np
from symdiff import stop_gradient

def softmax_xent(Z, T):
    S = Z - stop_gradient(np.max(Z, axis=1, keepdims=True))
    lse = np.log(np.sum(np.exp(S), axis=1))
    return np.mean(lse - np.sum(T * S, axis=1))

def shape_then_value(x, w):
    y = x * w
    s = np.sum(y, axis=0)
    if np.sum(s) > 0:
        return np.mean(y * s) + np.mean(x)
    return np.mean(x * 2.0)
""")


def test_values_needed_only_for_their_shape_are_not_computed():
    src = grad(S.softmax_xent).source
    assert "= T * S" not in src and "only its shape is needed" in src, src
    rng = np.random.default_rng(3)
    Z, T = rng.standard_normal((5, 4)), rng.random((5, 4))
    T /= T.sum(axis=1, keepdims=True)  # rows of probabilities: the max then cancels out
    check_grad(S.softmax_xent, (Z, T))
    P = np.exp(Z) / np.sum(np.exp(Z), axis=1, keepdims=True)
    np.testing.assert_allclose(grad(S.softmax_xent)(Z, T), (P * T.sum(1)[:, None] - T) / 5,
                               rtol=1e-12)


@pytest.mark.parametrize("x", [np.array([[1.0, -2.0], [0.5, 3.0]]), np.array([[-1.0], [-2.0]])])
def test_a_value_read_by_a_branch_is_computed_in_full(x):
    check_grad(S.shape_then_value, (x, np.array([0.5, 1.5])[: x.shape[1]]), wrt=(0, 1))


def test_a_stand_in_for_a_value_fails_loudly_where_a_value_is_read():
    stand_in = _shape_of(np.ones((2, 1)), np.ones(3))
    assert (np.shape(stand_in), np.ndim(stand_in), np.size(stand_in)) == ((2, 3), 2, 6)
    with pytest.raises(TypeError):
        stand_in + 1.0
    with pytest.raises((TypeError, ValueError)):
        np.asarray(stand_in, dtype=float)
    with pytest.raises(ValueError):
        _shape_of(np.ones(3), np.ones(4))


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 1, 4)])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("reduction", [np.sum, np.mean, np.prod, np.var])
def test_reduced_shapes_are_the_reductions_shapes_and_errors(shape, keepdims, reduction):
    x = np.ones(shape)
    n = len(shape)
    axes = [None, *range(-n - 1, n + 1), (0, 0)] + ([(0, n - 1)] if n > 1 else [])
    for axis in axes:
        try:
            want = np.shape(reduction(x, axis=axis, keepdims=keepdims))
        except Exception as e:  # noqa: BLE001 - the same exception type is expected
            with pytest.raises(type(e)):
                _reduced_shape(reduction, x, axis, keepdims)
        else:
            assert np.shape(_reduced_shape(reduction, x, axis, keepdims)) == want, axis


P = load("""
import numpy as np

def pulled(x, s, w):
    y = x * s * w / s ** 2 + s * np.exp(s) * x
    return np.sum(np.tanh(y) * w)

def normalized(E):
    P = E / np.sum(E, axis=1, keepdims=True)
    return np.sum(P ** 3)
""")


@pytest.mark.parametrize("shapes", [
    ((3, 4), (3, 1), (4,)),
    ((3, 4), (), (1, 4)),
    ((2, 3, 4), (3, 1), ()),
    ((4,), (4,), (4,)),
    ((), (), ()),
])
def test_factors_of_the_operands_shape_are_multiplied_after_the_sum(shapes):
    rng = np.random.default_rng(4)
    args = tuple(rng.uniform(0.5, 1.5, s) if s else float(rng.uniform(0.5, 1.5))
                 for s in shapes)
    check_grad(P.pulled, args, wrt=(0, 1, 2))


def test_a_quotient_reuses_its_value_and_sums_before_it_divides():
    src = grad(P.normalized).source
    assert "*_unbroadcast(P" in src, src
    E = np.random.default_rng(5).uniform(0.5, 1.5, (3, 4))
    check_grad(P.normalized, (E,))
    s = E.sum(axis=1, keepdims=True)
    Pm = E / s
    dP = 3 * Pm ** 2
    np.testing.assert_allclose(grad(P.normalized)(E), (dP - np.sum(dP * Pm, 1, keepdims=True)) / s,
                               rtol=1e-12)


R = load("""
import numpy as np

def mlp(W1, b1, W2, X, y):
    H = np.tanh(X @ W1 + b1)
    return np.mean((H @ W2 - y) ** 2)
""")


def test_an_array_read_back_only_for_its_shape_is_let_go_after_its_last_use():
    rng = np.random.default_rng(7)
    args = (rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal(3),
            rng.standard_normal((5, 4)), rng.standard_normal(5))
    for g in (grad(R.mlp, wrt=(0, 1, 2)), value_and_grad(R.mlp, wrt=(0, 1, 2))):
        assert "= _shape_only(_t0)  # line 5: only its shape is needed from here on" in g.source
    check_grad(R.mlp, args, wrt=(0, 1, 2))
    value, grads = value_and_grad(R.mlp, wrt=(0, 1, 2))(*args)
    assert value == R.mlp(*args)
    for got, want in zip(grads, grad(R.mlp, wrt=(0, 1, 2))(*args), strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_forward_array_the_backward_sweep_never_reads_is_deleted_after_its_last_use():
    m = load("""
import numpy as np
from symdiff import stop_gradient

def attention(Q, K, V):
    S = Q @ K.T / 8
    S = S - stop_gradient(np.max(S, axis=1, keepdims=True))
    E = np.exp(S)
    P = E / np.sum(E, axis=1, keepdims=True)
    return np.sum((P @ V) ** 2)
""")
    g = grad(m.attention, wrt=(0, 1, 2))
    body = g.source.split('"""', 2)[2]
    assert "    del _t1  # line 6: not needed any more: its memory is free\n" in body, body
    rng = np.random.default_rng(8)
    check_grad(m.attention, tuple(rng.standard_normal((4, 3)) for _ in range(3)),
               wrt=(0, 1, 2))


RNG = np.random.default_rng(20240601)
V4 = np.array([0.5, -1.2, 2.0, 0.8])
M34 = RNG.standard_normal((3, 4))


# --- broadcasting and dtypes ------------------------------------------------------------

BROADCAST = load("""
import numpy as np

def two(a, b):
    return np.sum(np.sin(a * b) + a / (b + 3.0) + np.hypot(a, b) + np.maximum(a, b) ** 2)

def three(a, b, c):
    return np.sum(a * b * c + np.where(a > 0.1, a * b, c))
""")


SHAPES = [(), (1,), (3,), (1, 3), (2, 1), (2, 3), (2, 1, 3)]


def _value(shape, seed):
    rng = np.random.default_rng(seed)
    return float(rng.uniform(-1, 1)) if shape == () else rng.uniform(-1, 1, shape)


@pytest.mark.parametrize("sa, sb", [(a, b) for a in SHAPES for b in SHAPES if a <= b])
def test_broadcasting_pairs(sa, sb):
    agrees(BROADCAST.two, (_value(sa, 1), _value(sb, 2)), (0, 1))


@pytest.mark.parametrize("args", [
    (RNG.standard_normal((3, 1)), RNG.standard_normal((1, 4)), np.array(0.7)),
    (RNG.standard_normal((3, 1)), V4, 2.0),
    (np.array(0.3), M34, np.array([[0.5]])),
])
def test_broadcasting_three_ways(args):
    agrees(BROADCAST.three, args, (0, 1, 2))


V3 = np.array([0.5, -1.0, 2.0])
FOLD_RNG = np.random.default_rng(20240607)
X43 = FOLD_RNG.standard_normal((4, 3))
X34 = FOLD_RNG.standard_normal((3, 4))
FOLD_A33 = FOLD_RNG.standard_normal((3, 3)) * 0.5


# --- a sum of a linear function of an array operation's result ------------------------

FOLDED = load("""
import numpy as np

def broadcast(x):
    return np.sum(np.broadcast_to(x, (2, 3)) * 2.0)

def matmul(A, v):
    return np.sum((A @ v) * 3.0)

def reshape(x):
    return np.sum(x.reshape(-1) * 2.0)

def concatenate(x):
    return np.sum(np.concatenate([x, x]) * 3.0)

def stack(x):
    return np.sum(-np.stack([x, x]))

def tile(x):
    return np.sum(np.tile(x, 2) / 2.0)

def max_rows(X):
    return np.sum(np.max(X, axis=0) * 2.0)

def transpose(X):
    return np.sum(np.transpose(X, (1, 0)) * 2.0)

def in_a_loop(X):
    s = 0.0
    for r in X:
        s = s + np.sum(r.reshape(-1) * 2.0)
    return s

def linear_with_sine(x):
    return np.sum(np.concatenate([x, x]) * 3.0 + np.sin(x[0]))
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("broadcast", (V3,), (0,)),
    ("matmul", (FOLD_A33, V3), (0, 1)),
    ("reshape", (V3,), (0,)),
    ("concatenate", (V3,), (0,)),
    ("stack", (V3,), (0,)),
    ("tile", (V3,), (0,)),
    ("max_rows", (X34,), (0,)),
    ("transpose", (X34,), (0,)),
])
def test_sum_of_a_linear_function_of_an_array_operation(name, args, wrt):
    agrees(getattr(FOLDED, name), args, wrt)


@pytest.mark.parametrize("name", ["linear_with_sine", "in_a_loop"])
def test_sum_of_an_array_operation_not_folded(name):
    # A sum that is not the result, or a summand that is not linear, keeps its adjoint.
    agrees(getattr(FOLDED, name), (X34 if name == "in_a_loop" else V3,))


FOLDED_BROADCAST = load("""
import numpy as np

def shifted(x, s):
    y = x + s
    return np.sum(2.0 * y)

def negative_log_softmax_sum(z):
    lse = np.log(np.sum(np.exp(z)))
    logp = z - lse
    return np.sum(-logp)

def linear_model_with_bias(w, b, x):
    pred = w * x + b
    return np.sum(0.5 * pred)

def shifted_sum(x, s):
    y = x + s
    return np.sum(y)
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("shifted", (V3, 1.5), (0, 1)),
    ("negative_log_softmax_sum", (V3,), (0,)),
    ("linear_model_with_bias", (0.7, 0.2, V3), (0, 1, 2)),
])
def test_sum_of_a_linear_function_of_a_broadcast_value(name, args, wrt):
    agrees(getattr(FOLDED_BROADCAST, name), args, wrt)


def test_sum_of_a_broadcast_value():
    agrees(FOLDED_BROADCAST.shifted_sum, (V3, 1.5), (0, 1))


CLAIM_RNG = np.random.default_rng(20241130)
A33 = np.arange(9.0).reshape(3, 3) / 4
X6 = np.arange(1.0, 7.0).reshape(2, 3)


def uniform(shape, low=0.5, high=1.5, rng=CLAIM_RNG):
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


# --- facts: the kinds of values, from the parameters' kinds -----------------------------

FK = load("""
import numpy as np
from symdiff import stop_gradient

def mixed(x, t, n, l, s):
    m = stop_gradient(np.max(x))
    z = x - m
    k = n * n
    r = n[0]
    d = l + l
    e = 2 * l
    p = s * x
    q = np.mean(x) * t
    return np.sum(z * t) + np.sum(p) + q
""")


def test_facts_follow_the_kinds_numpy_gives():
    from symdiff import kinds as K
    from symdiff.shapes import facts

    ir = lower(parse(FK.mixed), ("x",), {
        "x": K.Array("float32", 2), "t": K.FLOAT, "n": K.Array("uint8", 1),
        "l": K.List((K.FLOAT, K.FLOAT)), "s": K.Array("float64", 0, True)})
    found = facts(ir)
    assert found.kind("m") == K.Array("float32", 0, True) and found.shape("m") == set()
    assert found.kind("z") == K.Array("float32", 2) and found.shape("z") == {"x"}
    assert found.kind("k") == K.Array("uint8", 1)  # (which wraps: not a float)
    assert found.kind("r") == K.Array("uint8", 0, True)
    # a list's arithmetic is Python's: l + l and 2 * l are not elementwise, nor l-shaped
    assert isinstance(found.kind("d"), K.List) and found.shape("d") == {"d"}
    assert isinstance(found.kind("e"), K.List) and found.shape("e") == {"e"}
    assert found.kind("p") == K.Array("float64", 2)  # a float64 scalar times float32
    assert found.shape("t") == set() and found.scalar("q") and found.shape("q") == set()
    assert found.numpy("z") and found.ndarray("z") and not found.ndarray("m")


def test_facts_without_kinds_claim_nothing_of_kinds():
    from symdiff.shapes import facts

    found = facts(lower(parse(FK.mixed), ("x",)))
    assert not found.kinds.keys() & {"x", "z", "k", "d", "p"}
    assert found.shape("d") == {"l"}  # (as before kinds: l may be an array)


def test_facts_run_nothing_stateful_while_building():
    # kinds are NumPy's answers on small samples: never by drawing random numbers (the
    # user's stream would move), nor by calling the user's functions
    f = load("""
import numpy as np
from symdiff import stop_gradient

CALLS = []

def noted(v):
    CALLS.append(v)
    return v

def f(x):
    n = stop_gradient(np.random.normal(size=np.shape(x)))
    return np.sum(x * n) + np.sum(x * stop_gradient(noted(x)))
""")
    np.random.seed(7)
    first = np.random.normal()
    np.random.seed(7)
    grad(f.f).source  # noqa: B018
    assert np.random.normal() == first and f.CALLS == []


# --- _unbroadcast: the sum down to an operand's shape, by the cheapest NumPy call ---


def _summed_down(g, x_shape):
    """The reference: np.sum over the leading axes, then over the axes x has 1 in."""
    lead = g.ndim - len(x_shape)
    g = np.sum(g, axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(i for i, n in enumerate(x_shape) if n == 1 and g.shape[i] != 1)
    return np.sum(g, axis=axes, keepdims=True) if axes else g


@pytest.mark.parametrize("g_shape, x_shape", [
    ((200, 20, 3), (200, 1, 3)),  # the middle axis of pairwise differences (einsum)
    ((200, 20, 3), (1, 20, 3)), ((200, 20, 3), (20, 3)), ((200, 20, 3), (3,)),
    ((200, 20, 3), (200, 20, 1)), ((200, 20, 3), (1, 1, 1)), ((7, 5, 600), (7, 1, 600)),
    ((4, 1, 6, 5), (1, 1, 6, 1)), ((4, 3), ()), ((0, 5, 3), (1, 5, 3)), ((4, 0, 3), (4, 1, 3)),
    ((4, 5, 0), (4, 1, 0)), ((1, 5, 3), (1, 1, 3)),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "reversed", "transposed"])
def test_unbroadcast_sums_like_np_sum_in_an_array_of_its_own(g_shape, x_shape, dtype, layout):
    from symdiff.runtime import _unbroadcast

    g = np.random.default_rng(0).standard_normal(g_shape).astype(dtype)
    if layout == "reversed":
        g = g[::-1]
    elif layout == "transposed":
        g = np.ascontiguousarray(g.T).T
    got = _unbroadcast(g, np.zeros(x_shape))
    want = _summed_down(g, x_shape)
    assert got.shape == x_shape and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == np.float64 else 1e-5,
                               atol=1e-12 if dtype == np.float64 else 1e-5)
    if x_shape:
        # an array of its own, which the gradient may add to in place
        assert got.flags.owndata and got.flags.writeable and not np.shares_memory(got, g)
    else:
        assert type(got) is np.dtype(dtype).type  # a NumPy scalar, as np.sum gives


@pytest.mark.parametrize("g, x_shape, want", [
    (2.0, (1,), [2.0]), (np.float64(2.0), (1, 1), [[2.0]]),  # (an IndexError before)
    (np.ones(3), (2, 3), np.ones((2, 3))), (np.arange(6).reshape(2, 3), (1, 3), [[3, 5, 7]]),
    (np.ones((2, 3), dtype=bool), (3,), [2, 2, 2]),
])
def test_unbroadcast_spreads_a_smaller_adjoint_and_sums_others_as_np_sum(g, x_shape, want):
    from symdiff.runtime import _unbroadcast

    got = _unbroadcast(g, np.zeros(x_shape))
    assert np.shape(got) == x_shape
    assert np.result_type(got) == np.result_type(np.sum(np.asarray(g)))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pairwise_differences_by_broadcasting(dtype):
    # the Lennard-Jones pattern: each row of X against every other, by inserted axes
    f = load("""
import numpy as np
def f(X, W):
    D = X[:, None, :] - X[None, :, :]
    return np.sum(W[:, :, None] * D ** 2)
""").f
    rng = np.random.default_rng(1)
    X, W = rng.standard_normal((6, 3)), rng.standard_normal((6, 6))
    check_grad(f, (X, W), wrt=(0, 1))
    got = grad(f, wrt="X")(X.astype(dtype), W.astype(dtype))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, grad(f, wrt="X")(X, W), rtol=1e-4, atol=1e-4)
# --- a variable a loop or a branch assigns: the shape every value it may hold has ----------

MERGED = load("""
import numpy as np

def kept(W, xs):
    s = W * 0.0
    for t in range(xs.shape[0]):
        s = s * xs[t, 0] + np.sin(W)
    return np.sum(s**2)

def grown(W, V, n):
    s = W * 1.0
    for i in range(n):
        s = s * 0.5 + V  # V may be larger than W: s is W's shape at first only
    return np.sum(s**2)

def grown_late(W, V, n):
    s = W * 1.0
    for i in range(n):
        t = s * 0.5
        s = np.cos(t) * W
        s = s + V * (i > 0)
    return np.sum(s**2)

def either(x, w, c):
    if c > 0:
        y = x * w
    else:
        y = np.sin(x) - w
    z = np.sin(y * x)
    return np.sum(z * z)

def either_other(x, w, c):
    if c > 0:
        y = x * w
    else:
        y = np.sin(x) - 1.0
    z = np.sin(y * x)
    return np.sum(z * z)
""")


def test_a_loop_that_keeps_a_variable_s_shape_needs_no_summing_down():
    # (xs[t, 0] is known to be a number where xs's kind is known: source_for)
    rng = np.random.default_rng(4)
    W, xs = rng.standard_normal((3, 2)), rng.standard_normal((4, 2))
    source = grad(MERGED.kept).source_for(W, xs)
    assert "_unbroadcast" not in source, source
    for n in (0, 1, 4):
        agrees(MERGED.kept, (W, xs[:n]))


@pytest.mark.parametrize("name", ["grown", "grown_late"])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_a_loop_that_may_enlarge_a_variable_sums_its_adjoint_down(name, n):
    rng = np.random.default_rng(5)
    f = getattr(MERGED, name)
    assert "_unbroadcast" in grad(f, wrt=(0, 1)).source
    for W, V in [(rng.standard_normal(3), rng.standard_normal((2, 3))),
                 (rng.standard_normal((2, 1)), rng.standard_normal(3)),
                 (rng.standard_normal(3), rng.standard_normal(3))]:
        agrees(f, (W, V, n), wrt=(0, 1))


def test_a_branch_whose_values_have_one_shape_needs_no_summing_down():
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 3)), rng.standard_normal(3)
    # (y is x * w or sin(x) - w: of x and w's shape, as y * x is)
    assert re.search(r"\n    dy_2 = _t\d+\*x\n", grad(MERGED.either, wrt=(0, 1)).source)
    assert re.search(r"\n    dy_2 = _unbroadcast\(_t\d+\*x, y_2\)\n",
                     grad(MERGED.either_other, wrt=(0, 1)).source)
    for c in (1.0, -1.0):
        for f in (MERGED.either, MERGED.either_other):
            agrees(f, (x, w, c), wrt=(0, 1))
            agrees(f, (x[0], w[:1], c), wrt=(0, 1))
