"""What grad skips and frees: statements the gradient does not need, shape stand-ins and values
let go after their last use still raise where the function raises and are never read again."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import agrees, both, check_grad, equals, load, outcome
from gradcheck import contract_grads as run

from symdiff import grad, value_and_grad

# --- statements whose value the gradient does not need still raise where they would ------

UNUSED = load("""
import numpy as np

def unused_sum_of_mismatched_shapes(x, w):
    check = x + w
    return np.sum(x ** 2)

def unused_column(x):
    n = x.shape[1]
    return np.sum(x ** 2)

def unused_axis(x):
    s = np.sum(x * 2.0, axis=1)
    return np.sum(x ** 2)

def unused_max_of_empty(x, e):
    m = np.max(e)
    return np.sum(x ** 2)

def shape_only_mismatch(z, t):
    return np.mean(np.log(np.sum(np.exp(z), axis=1)) - np.sum(t * z, axis=1))
""")


@pytest.mark.parametrize("name, args, error", [
    ("unused_sum_of_mismatched_shapes", (np.ones(3), np.ones(4)), ValueError),
    ("unused_column", (np.ones(3),), IndexError),
    ("unused_axis", (np.ones(3),), ValueError),
    ("unused_max_of_empty", (np.ones(3), np.ones(0)), ValueError),
    ("shape_only_mismatch", (np.ones((2, 3)), np.ones((2, 4))), ValueError),
])
def test_unused_statement_that_raises(name, args, error):
    f = getattr(UNUSED, name)
    with pytest.raises(error):
        f(*args)
    with pytest.raises(error):
        value_and_grad(f)(*args)
    with pytest.raises(error):
        grad(f)(*args)


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
