"""What grad skips and frees: statements the gradient does not need, shape stand-ins and values
let go after their last use still raise where the function raises and are never read again."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gradcheck import agrees, both, both_one, check_grad, equals, load, numeric_grad, outcome, ro
from gradcheck import contract_grads as run

from symdiff import SymdiffError, grad, value_and_grad
from symdiff.api import build_source
from symdiff.parse import parse

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


X2 = np.array([1.0, 2.0])
X3 = np.array([0.5, -1.0, 2.0])
X23 = np.arange(1.0, 7.0).reshape(2, 3)


def raises_as_f(f, args, wrt=0):
    """f raises at ``args``; grad and value_and_grad must raise the same type of error."""
    error = outcome(lambda: f(*args))
    assert isinstance(error, Exception), f"the function works here: {error!r}"
    for make in (value_and_grad, grad):  # (value_and_grad first: it runs the forward sweep)
        got = outcome(lambda m=make: m(f, wrt=wrt)(*args))
        assert isinstance(got, type(error)), (make.__name__, error, got)


# --- lists: the function's list arithmetic is not elementwise -------------------------

LS = load("""
import numpy as np
from symdiff import stop_gradient

def first_row(x, L):
    r = L[0]
    return np.sum(x * r * r)

def frozen(x, l):
    s = stop_gradient(l)
    return np.sum(x * s * s)

def each_row(x, L):
    s = 0.0
    for r in L:
        s = s + np.sum(x * r * r)
    return s

def rebound(x, l):
    l = l * 2
    return np.sum(x * l * l)

def concatenated(x, l):
    return np.sum((x * (l + l)) ** 2)

def repeated(x, l):
    return np.mean(x * (2 * l))

def repeated_by_index(x, l):
    n = stop_gradient(np.argmax(x)) + 1
    return np.mean(x * (n * l))

def squared_param(x, l):
    return np.sum(x * l * l) + np.sum(l * x * 3.0)
""")


# A list made from a list parameter (a row, stop_gradient(l), a loop's row, l * 2) is read
# by the derivatives as an array of floats: r**2 of a list would raise.
@pytest.mark.parametrize(("name", "x", "data"), [
    ("first_row", X2, [[1.0, 2.0]]),
    ("frozen", X2, [1.0, 2.0]),
    ("each_row", X2, [[1.0, 2.0]]),
    ("rebound", np.arange(1.0, 5.0), [1.0, 2.0]),
])
def test_lists_made_from_a_list_parameter(name, x, data):
    f = getattr(LS, name)
    f(x, data)  # works
    expected = numeric_grad(f, [x, data], 0)
    np.testing.assert_allclose(grad(f)(x, data), expected, rtol=1e-6)


# l + l, 2 * l and n * l (n a NumPy integer) concatenate or repeat a list: the gradient
# reads what the function computed, and its shape is not l's.
@pytest.mark.parametrize(("name", "x", "data"), [
    ("concatenated", np.array([3.0]), [1.0, 2.0]),
    ("repeated", np.array([3.0, 4.0]), [1.0]),
    ("repeated_by_index", np.array([3.0, 4.0]), [1.0]),
    ("list_repeated", np.array([1.0]), [1.0, 2.0]),
])
def test_list_concatenation_and_repetition(name, x, data):
    f = getattr(LS, name, None) or getattr(GD, name)
    expected = numeric_grad(f, [x, data], 0)
    np.testing.assert_allclose(value_and_grad(f)(x, data)[1], expected, rtol=1e-6)


@pytest.mark.parametrize("data", [[1.0, 2.0], (1.0, 2.0), np.array([1, 2]), ro([1.0, 2.0]),
                                  np.array([1, 2], dtype=np.uint8), np.array([1.0, 2.0],
                                                                             dtype=np.float32)],
                         ids=["list", "tuple", "int64", "read-only", "uint8", "float32"])
def test_list_and_integer_parameters_read_by_the_derivatives(data):
    before = np.array(data, copy=True)
    expected = np.asarray(data, dtype=np.float64) ** 2 + 3 * np.asarray(data, np.float64)
    np.testing.assert_allclose(both_one(LS.squared_param, (X2, data)), expected, rtol=1e-6)
    assert type(data) in (list, tuple) or data.dtype == before.dtype  # the caller's, as given
    np.testing.assert_array_equal(np.asarray(data), before)


# --- the guard: a NumPy scalar is not a broadcasting operand ------------------------

GD = load("""
import math
import numpy as np
from symdiff import stop_gradient

def scalar_times_list(x, l):
    s = np.mean(x)
    return np.sum(x * x) + np.sum(s * l)

def max_times_list(x, l):
    v = l * stop_gradient(np.max(x))
    return np.sum(x * x)

def branch_divides(x, flag):
    if flag:
        a = 0.0
    else:
        a = 1.0
    y = x * 0.0 + 1.0 / a
    return np.sum(x * x) + np.sum(y)

def pick(flag):
    if flag:
        return 0.0
    return 1.0

def helper_divides(x, flag):
    y = x * 0.0 + 1.0 / pick(flag)
    return np.sum(x * x) + np.sum(y)

def by_ndim(x):
    n = stop_gradient(np.ndim(x))
    return np.sum(x * x) + np.sum(x * 0.0 + 1.0 / n)

def by_size(x):
    n = stop_gradient(np.size(x))
    c = x * 0.0 + 1.0 / n
    return np.sum(x * x) + np.sum(c)

def param_divides(x, c):
    return np.sum(x * x) + np.sum(x * 0.0 + 1.0 / c)

def float_times_list(x, l):
    return np.sum(x * x) + np.sum(2.0 * l)

def list_repeated(x, l):
    return np.sum(x * x) + np.sum(x * (l * 2))

def int_to_negative_power(x, n):
    return np.sum(x * x) + np.sum(x * 0.0 + n ** -1)

def log_of_negative(x, c):
    return np.sum(x * x) + np.sum(x * 0.0 + math.log(c))

def loop_divides(x, k):
    for i in range(k):
        a = 0.0
    return np.sum(x * x) + np.sum(x * 0.0 + 1.0 / a)

def if_without_else(x, flag):
    if flag:
        a = 2.0
    y = x * 0.0 + 1.0 / a
    return np.sum(x * x) + np.sum(y)

def method_of_a_number(x, c):
    return np.sum(x * x) + c.sum()

def index_of_a_number(x, c):
    return np.sum(x * x) + np.sum(c[0] * 2.0)

def empty_max(x, e):
    return np.sum(x * x) + np.max(e) * 0.0

def not_broadcastable(x, w):
    return np.sum(x * x) + np.sum(x * w)

def bad_axis(x):
    return np.sum(x * x) + np.sum(np.sum(x, axis=2))

def float_axis(x):
    return np.sum(x * x) + np.sum(np.sum(x, axis=1.0))

def bool_axis(x):
    return np.sum(x * x) + np.sum(np.sum(x, axis=True))

def string_keepdims(x):
    return np.sum(x * x) + np.sum(np.mean(x, axis=0, keepdims="no"))

def none_keepdims(x):
    return np.sum(x * x) + np.sum(np.sum(x, axis=0, keepdims=None))
""")


# np.float64 * list raises (where an array times a list broadcasts): not skipped.
def test_a_numpy_scalar_times_a_list_raises_in_grad_too():
    raises_as_f(GD.scalar_times_list, (X2, [1.0, 2.0]))


# Bugs at 158d6a1 (fixed by 4d00087): stop_gradient(np.max(x)) * l,
# a name merged from an if's branches (left out of the guard), stop_gradient(np.ndim(x))
# (a Python int) taken for NumPy's, and a literal axis of the wrong type were all skipped.
@pytest.mark.parametrize(("name", "args"), [
    ("max_times_list", (X2, [1.0, 2.0])),
    ("branch_divides", (X2, True)),
    ("helper_divides", (X2, True)),
    ("by_ndim", (np.float64(3.0),)),
    ("by_ndim", (np.array(3.0),)),
    ("by_size", (np.zeros(0),)),
    ("float_axis", (X23,)),
    ("bool_axis", (X23,)),
])
def test_fixed_guards_raise_where_the_function_raises(name, args):
    raises_as_f(getattr(GD, name), args)


@pytest.mark.parametrize("name", ["string_keepdims", "none_keepdims"])
def test_a_literal_keepdims_that_numpy_refuses(name):
    raises_as_f(getattr(GD, name), (X23,))


@pytest.mark.parametrize(("name", "args"), [
    ("param_divides", (X2, 0.0)),
    ("param_divides", (X2, 0)),
    ("float_times_list", (X2, [1.0, 2.0])),
    ("float_times_list", (X2, (1.0, 2.0))),
    ("list_repeated", (X2, [1.0, 2.0])),
    ("int_to_negative_power", (X2, np.int64(2))),
    ("int_to_negative_power", (X2, np.array([2, 3]))),
    ("log_of_negative", (X2, -1.0)),
    ("loop_divides", (X2, 0)),
    ("loop_divides", (X2, 2)),
    ("if_without_else", (X2, False)),
    ("method_of_a_number", (X2, 1.5)),
    ("method_of_a_number", (X2, [1.5])),
    ("index_of_a_number", (X2, 1.5)),
    ("empty_max", (X2, np.zeros(0))),
    ("not_broadcastable", (X2, np.ones(3))),
    ("not_broadcastable", (X2, [1.0, 2.0, 3.0])),
    ("bad_axis", (X2,)),
])
def test_skipped_statements_still_raise_where_the_function_raises(name, args):
    raises_as_f(getattr(GD, name), args)


@pytest.mark.parametrize(("name", "args", "expected"), [
    ("param_divides", (X2, np.float64(0.0)), 2 * X2),  # NumPy: inf, a warning
    ("param_divides", (X2, np.array([0.0, 1.0])), 2 * X2),
    ("param_divides", (X2, 2.0), 2 * X2),
    ("scalar_times_list", (X2, np.array([1.0, 2.0])), 2 * X2 + 1.5),
    ("float_times_list", (X2, np.array([1.0, 2.0])), 2 * X2),
    ("loop_divides", (X2, np.int64(0)), None),
    ("branch_divides", (X2, False), 2 * X2),
    ("helper_divides", (X2, False), 2 * X2),
    ("by_ndim", (X2,), 2 * X2),
    ("method_of_a_number", (X2, np.array([1.5])), 2 * X2),
    ("not_broadcastable", (X2, 3.0), 2 * X2 + 3.0),
])
def test_skipped_statements_where_the_function_works(name, args, expected):
    f = getattr(GD, name)
    if expected is None:
        raises_as_f(f, args)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(both_one(f, args), expected, rtol=1e-12)


def test_the_guarded_stand_ins_are_in_the_source():
    # (the generic build, as exported: c may be anything there; for a float64 array c,
    # the gradient .source shows, nothing needs a guard)
    source = build_source(parse(GD.param_divides), ("x",))[1]
    assert "if _numpy(" in source and "_shape_of(" in source, source
    assert "c = _as_float(c)" not in source  # c is not read by the derivatives
    shown = grad(GD.param_divides).source
    assert "_numpy(" not in shown and "_shape_of(" in shown, shown


# --- the guard is blind to dtypes, and to np.errstate ---------------------------------

DY = load("""
import numpy as np
from symdiff import stop_gradient

def negated_mask(x, b):
    return np.sum(x * x) + np.sum(x * -b)

def floor_of_complex(x, c):
    return np.sum(x * x) + np.sum(x * 0.0 + c // 2.0)

def power_of_ints(x, n):
    return np.sum(x * x) + np.sum(x + np.power(n, -1))

def uint8_plus_300(x, n):
    return np.sum(x * (n + 300))

def hypot_of_complex(x, c):
    return np.sum(x * x) + np.sum(x + np.hypot(c, 1.0))

def shifted(x):
    return np.sum(x * x) + np.sum(stop_gradient(np.left_shift(x, 1)))

def max_of_uint8(x, n):
    m = np.max(n)
    return np.sum(x * x) + np.sum(x * 0.0 + (m + 300))

def transposed_uint8(x, n):
    t = np.transpose(n)
    return np.sum(x * x) + np.sum(x * 0.0 + (t + 300))

def transposed_mask(x, b):
    t = np.transpose(b)
    return np.sum(x * x) + np.sum(x * -t)

def overflowing(x, t):
    return np.sum(x * x) + np.sum(np.exp(t) * 0.0 + x)
""")


# Bugs at 158d6a1 (fixed by 4d00087): runtime._numpy held for any
# ndarray or NumPy scalar, so statements NumPy refuses for their operands' dtype were skipped.
@pytest.mark.parametrize(("name", "args"), [
    ("negated_mask", (X2, np.array([True, False]))),
    ("negated_mask", (X2, np.True_)),
    ("power_of_ints", (X2, np.array([2, 3]))),
    ("uint8_plus_300", (X2, np.array([1, 2], dtype=np.uint8))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_numpy_operations_that_refuse_a_dtype(name, args):
    raises_as_f(getattr(DY, name), args)


@pytest.mark.parametrize("name", ["floor_of_complex", "hypot_of_complex"])
def test_complex_operands_are_refused_before_anything_runs(name):
    for make in (value_and_grad, grad):
        with pytest.raises(SymdiffError, match="c received an array of complex numbers"):
            make(getattr(DY, name))(X2, np.array([1 + 1j, 2.0]))


def test_an_integer_ufunc_of_floats_raises_in_grad_too():
    raises_as_f(DY.shifted, (X2,))


# An array operation on integers or booleans gives integers or booleans, which may raise
# (np.max(n) + 300 for uint8 n, -np.transpose(b)): not skipped as a float operand.
@pytest.mark.parametrize(("name", "args"), [
    ("max_of_uint8", (X2, np.array([1, 2], dtype=np.uint8))),
    ("transposed_uint8", (X2, np.array([1, 2], dtype=np.uint8))),
    ("transposed_mask", (X2, np.array([True, False]))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_array_operations_on_integer_data_are_not_float_operands(name, args):
    raises_as_f(getattr(DY, name), args)


# Under np.errstate(over="raise") np.exp(1000.0) raises in the function: grad, which
# skips np.exp(t) (only the shapes are needed), runs value_and_grad's code there.
def test_a_skipped_statement_under_errstate_raise():
    with np.errstate(over="raise"):
        raises_as_f(DY.overflowing, (X2, np.array([1000.0, 1.0])))


def test_errstate_raise_where_nothing_overflows():
    with np.errstate(all="raise"):
        np.testing.assert_allclose(both_one(DY.overflowing, (X2, np.array([1.0, 1.0]))),
                                   2 * X2 + 1)


def test_errstate_raise_runs_what_grad_skips_with_aux_too():
    f = load("import numpy as np\n\ndef f(x, t):\n"
             "    return np.sum(x * x) + np.sum(np.exp(t) * 0.0 + x), t\n", "f")
    t = np.array([1.0, 2.0])
    assert "_shape_of(" in grad(f, has_aux=True).source  # (np.exp(t) is skipped)
    with np.errstate(over="raise"):
        g, aux = grad(f, has_aux=True)(X2, t)
        np.testing.assert_allclose(g, 2 * X2 + 1)
        assert aux is t
        with pytest.raises(FloatingPointError):
            grad(f, has_aux=True)(X2, np.array([1000.0, 1.0]))


# --- del and _shape_only(x): values let go after their last use ------------------------

RL = load("""
import numpy as np
from symdiff import stop_gradient as sg

K = np.array([1, 2, 3], dtype=np.uint8)

def h(a, b):
    t = a * b
    return t * t + a

def read_in_a_later_loop(x, w):
    a = x * w
    b = np.sum(a)
    s = 0.0
    for i in range(3):
        s = s + np.sum(a * x)
    return s + b

def read_in_a_while_loop(x, w):
    a = x * w
    c = np.sum(a * 0.0)
    k = 0
    s = np.sum(x)
    while k < 3:
        s = s + np.sum(np.sin(a) * x)
        k = k + 1
    return s + c

def read_in_a_branch(x, w):
    a = x * w
    z = np.sum(a)
    if z > 0:
        s = np.sum(a * a)
    else:
        s = np.sum(x)
    return s

def through_helpers(x, w):
    u = h(x, w)
    v = h(u, w)
    return np.sum(v)

def early_return(x, w):
    a = x * w
    if np.sum(a) > 100.0:
        return np.sum(a)
    b = a * x
    return np.sum(b * w)

def shape_then_loop(x, t):
    z = x - sg(np.max(x))
    e = np.exp(z)
    s = np.log(np.sum(e)) - np.sum(t * z)
    for i in range(2):
        s = s + np.sum(z) * 0.0
    return s

def tape_of_a_stand_in(x, l):
    s = 0.0
    for i in range(2):
        a = x * l
        s = s + np.sum(a * 0.0 + x * x)
    return s

def condition_in_a_later_loop(x, w):
    a = np.exp(np.ravel(x) * w)
    s = np.sum(x * x)
    for i in range(3):
        if np.sum(a) > float(i) * 2.0:
            s = s + np.sum(np.sin(x))
    return s

def frozen_in_a_later_loop(x, w):
    a = np.ravel(x) * w
    s = np.sum(x * x)
    for i in range(2):
        s = s + np.sum(x * sg(a)) * 0.5
    return s

def while_header(x, w):
    a = np.abs(np.ravel(x) * w) + 1.0
    s = np.sum(x ** 3)
    k = 0.0
    while np.sum(a) > k:
        s = s * 0.5 + np.sum(x * k)
        k = k + 1.7
    return s

def module_data_after_the_backward_read(x):
    a = x * K * K
    b = np.sum(np.sin(a)) * np.sum(K * x)
    return b + np.sum(a * K)
""")


RELEASE_ARGS = [
    (X3, np.array([1.5, 0.5, -2.0])), (X3, [1.5, 0.5, -2.0]), (X3, (1.5, 0.5, -2.0)),
    (X3, np.array([1, 2, 3])), (X3, 2), (X3, np.float64(2.0)), (X3, True), (X3, np.int64(2)),
    (X3, ro([1.5, 0.5, -2.0])), (np.array(0.7), np.array(2.0)), (0.7, 2.0),
]


@pytest.mark.parametrize("name", ["read_in_a_later_loop", "read_in_a_while_loop",
                                  "read_in_a_branch", "through_helpers", "early_return",
                                  "tape_of_a_stand_in"])
@pytest.mark.parametrize("args", RELEASE_ARGS,
                         ids=lambda a: "-".join(type(v).__name__ for v in a))
def test_values_let_go_are_not_read_again(name, args):
    f = getattr(RL, name)
    if isinstance(outcome(lambda: f(*args)), Exception):
        raises_as_f(f, args)
        return
    g = both_one(f, args)
    check_grad(f, args, grads=(g,))


def test_what_is_let_go_is_in_the_source():
    source = grad(RL.shape_then_loop).source
    assert "_shape_only(z)" in source or "del " in source, source
    t = np.array([0.0, 1.0, 0.0])
    x = X3
    e = np.exp(x - x.max())
    np.testing.assert_allclose(both_one(RL.shape_then_loop, (x, t)), e / e.sum() - t, rtol=1e-12)
    for name, gone in [("condition_in_a_later_loop", "del a"), ("frozen_in_a_later_loop", "del a"),
                       ("while_header", "del a")]:
        assert gone in grad(getattr(RL, name)).source, name


@pytest.mark.parametrize("name", ["condition_in_a_later_loop", "frozen_in_a_later_loop",
                                  "while_header"])
@pytest.mark.parametrize("w", [np.array([1.5, 0.5, -2.0]), [1.5, 0.5, -2.0], 2, np.int64(1)],
                         ids=["array", "list", "int", "np.int64"])
def test_a_value_deleted_after_a_later_loop_that_reads_it(name, w):
    f = getattr(RL, name)
    g = both_one(f, (X3, w))
    if name == "frozen_in_a_later_loop":  # 2x + stop_gradient(x * w)
        np.testing.assert_allclose(g, 2 * X3 + X3 * np.asarray(w), rtol=1e-12)
    else:
        check_grad(f, (X3, w), grads=(g,))


def test_module_data_read_by_the_forward_sweep_after_the_backward_reads_it():
    f = RL.module_data_after_the_backward_read
    g = both_one(f, (X3,))
    check_grad(f, (X3,), grads=(g,))
    assert RL.K.dtype == np.uint8 and list(RL.K) == [1, 2, 3]  # the module's own data


def test_a_stand_in_is_never_returned_as_a_value():
    m = load("""
import numpy as np

def f(x, t):
    z = x * t
    return np.sum(np.exp(z)) - np.sum(t * z)
""")
    for args in [(X3, X3), (X3, 2.0), (X3, [1.0, 2.0, 3.0]), (np.array(0.5), np.array(2.0))]:
        value, g = value_and_grad(m.f)(*args)
        assert isinstance(value, (float, np.floating)), value
        check_grad(m.f, args, grads=(grad(m.f)(*args),))
