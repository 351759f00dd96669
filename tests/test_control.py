"""Branches, loops, calls of user functions, closures, lambdas, and stop_gradient and aliasing
among them: against central differences and by hand."""

import ast
import inspect
import math

import numpy as np
import pytest
from gradcheck import agrees, check_grad, equals, frozen_reference, load, numeric_grad
from gradcheck import contract_grads as run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from symdiff import SymdiffError, grad, value_and_grad

OTHER = load("""
import numpy as xp

OFFSET = 0.25

def scaled_tanh(u, k=1.5):
    return k * xp.tanh(u) + OFFSET
""")

M = load("""
import numpy as np
from symdiff import stop_gradient

W = np.array([0.5, -1.0, 2.0])

def huber(x, d=1.0):
    if abs(x) <= d:
        return 0.5 * x ** 2
    return d * (abs(x) - 0.5 * d)

def newton_sqrt(a):
    x = a
    for i in range(6):
        x = 0.5 * (x + a / x)
    return x

def exp_series(x, n=12):
    s = 1.0
    term = 1.0
    for k in range(1, n):
        term = term * x / k
        s += term
    return s

def piecewise(x):
    if x < -1:
        y = -x
    elif x < 1:
        y = x ** 2
    else:
        y = np.sin(x) + 2
    return y * x

def helper(u, scale=2.0):
    return scale * np.sin(u) + stop_gradient(u) * u

def twice(x, y):
    return helper(x) * helper(y, scale=3.0)

def rows(X, w):
    total = 0.0
    for row in X:
        total = total + np.tanh(row @ w)
    return total

def halvings(x):
    y = x
    while y > 1.0:
        y = y / 2
    return y * x

def first_over(x):
    s = 0.0
    for i in range(10):
        s = s + x * i
        if s > 5:
            break
    return s

def odd_powers(x):
    s = 0.0
    for i in range(7):
        if i % 2 == 0:
            continue
        s += x ** i
    return s

def nested_helper(x):
    def inner(z):
        return z * x + np.sum(W * z)
    return inner(x) + inner(2.0)

def conditional_expression(x):
    return x ** 2 if x > 0 else -x

def enumerate_zip(X, w):
    s = 0.0
    for i, row in enumerate(X):
        s = s + i * np.sum(row * w)
    for a, b in zip(X, X):
        s = s + np.sum(a * b)
    return s

def nested_loops(x, n):
    s = 0.0
    for i in range(n):
        t = x
        for j in range(i):
            t = np.sin(t) * x
        s = s + t
    return s

def smooth(u, scale=2.0):
    return scale * np.sin(u) + u ** 2

def calls_in_loop(x):
    s = 0.0
    for k in range(3):
        s = s + smooth(x * k, scale=k)
    return s

def module_constant(x):
    return np.sum(W * x ** 2)

def branch_on_array(x):
    if np.sum(x) > 0:
        y = x * 2
    else:
        y = x ** 3
    return np.sum(y)

def use_other(x):
    return other.scaled_tanh(x) + other.scaled_tanh(x, k=0.5) ** 2

def sum_rows_then_mean(X):
    acc = np.zeros(X.shape[1])
    for row in X:
        acc = acc + row ** 2
    return np.mean(acc)
""")
M.other = OTHER


V3 = np.array([0.5, -1.2, 2.0])
V4 = np.array([0.5, -1.2, 2.0, 0.8])
X32 = np.arange(6.0).reshape(3, 2) / 5 - 0.3
W3 = np.array([0.3, 0.2, 0.1])


# --- aliasing and reassignment ---------------------------------------------------------

ALIAS = load("""
import numpy as np

def alias_then_rebind(x):
    a = x
    x = x * 2
    return np.sum(a * x)

def swap(x, y):
    x, y = y, x * y
    return np.sum(x * y + np.sin(x))

def rebind_param_in_branch(x, y):
    if np.sum(x) > 0:
        x = x * y
    else:
        y = y * 3
    return np.sum(x * y)

def rebind_param_in_loop(x):
    a = x
    for i in range(3):
        x = np.sin(x) * a
    return np.sum(x)

def augmented_on_fresh_value(x):
    y = x * 1.0
    y += x
    y *= x
    y -= 1
    y /= 2
    y **= 2
    return np.sum(y)

def loop_swap(x):
    a = x
    b = x * 2
    for i in range(3):
        a, b = b, a * b
    return np.sum(a + b)

def loop_target_shadows_param(x, y):
    s = 0.0
    for y in x:
        s = s + y * y
    return s
""")


COPIES = load("""
import numpy as np

def helper(u, v):
    u = u * v
    return np.sin(u) + v

def copy_of_reduction(x):
    a = np.sum(x)
    b = a
    return a * b

def copy_of_transpose(x):
    a = x.T
    b = a
    return np.sum(a * b)

def reduction_passed_to_helper(x, y):
    a = np.sum(y)
    b = helper(a, x)
    return np.sum(a * b)

def concatenation_passed_to_helper(x, y):
    a = x
    a = np.concatenate([y[1:], y[:1]])
    b = helper(a, x)
    return np.sum(a * b)
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("copy_of_reduction", (V3,), (0,)),
    ("copy_of_transpose", (V3,), (0,)),
    ("reduction_passed_to_helper", (V3, V3 + 1), (0, 1)),
    ("concatenation_passed_to_helper", (V3, V3 + 1), (0, 1)),
])
def test_copy_right_after_an_array_operation(name, args, wrt):
    agrees(getattr(COPIES, name), args, wrt)


@pytest.mark.parametrize("name, args, wrt", [
    ("alias_then_rebind", (V3,), (0,)),
    ("swap", (V3, V3[::-1] + 0.5), (0, 1)),
    ("rebind_param_in_branch", (V3, V3 * 0.5), (0, 1)),
    ("rebind_param_in_branch", (-V3 - 1, V3 * 0.5), (0, 1)),
    ("rebind_param_in_loop", (V3,), (0,)),
    ("augmented_on_fresh_value", (V3,), (0,)),
    ("loop_swap", (V3 * 0.5,), (0,)),
    ("loop_target_shadows_param", (V3, 1.0), (0, 1)),
])
def test_aliasing_and_reassignment(name, args, wrt):
    agrees(getattr(ALIAS, name), args, wrt)


# --- loops and branches ----------------------------------------------------------------

LOOPS = load("""
import numpy as np

def zero_trip_for(x):
    s = x
    for i in range(0):
        s = s * x
    return np.sum(s * 2)

def zero_trip_from_constant(x):
    s = 1.0
    for i in range(0):
        s = s * x
    return np.sum(s * x)

def zero_trip_while(x):
    s = x * 2
    k = 5
    while k < 3:
        s = s * x
        k = k + 1
    return np.sum(s * x)

def zero_trip_rows(X, y):
    s = y * 2.0
    for row in X:
        s = s + np.sum(row) * y
    return s * y

def while_true_break(x):
    s = x
    k = 0
    while True:
        s = s * 1.1 + x
        k = k + 1
        if k >= 3:
            break
    return np.sum(s)

def break_in_middle(x):
    s = x
    k = 0
    while k < 10:
        s = s * 2
        if np.sum(s) > 20:
            break
        s = s + x
        k = k + 1
    return np.sum(s)

def nested_for(x):
    s = 0.0
    for i in range(2):
        t = x
        for j in range(3):
            t = t * x + i
        s = s + t
    return np.sum(s)

def triangular(x):
    s = x
    for i in range(3):
        for j in range(i):
            s = s * x
    return np.sum(s)

def body_value_after_loop(x):
    for i in range(3):
        y = x * i
    return np.sum(y * x)

def range_index_after_loop(x):
    for i in range(3):
        pass
    return x[i] * x[0]

def reversed_range(x):
    s = 1.0
    for i in range(len(x) - 1, -1, -1):
        s = s * x[i] + 1
    return s

def over_reversed_slice(x):
    s = 0.0
    for v in x[::-1]:
        s = s * v + v
    return s

def over_expression(X):
    s = 0.0
    for r in X * 2:
        s = s + np.sum(r ** 3)
    return s

def iterable_rebound_in_body(X):
    s = 0.0
    for row in X:
        X = X * 2
        s = s + np.sum(row * X[0])
    return s

def active_through_later_iterations(x):
    a = 0.0
    b = 0.0
    c = 0.0
    for i in range(4):
        c = a * x
        a = b
        b = x * i
    return np.sum(c * x)

def active_subscript_later(x):
    a = np.zeros(3)
    for i in range(3):
        y = a[0]
        a = x * (i + 1)
    return y * x[1]

def outer_adjoint_only_in_branch(x):
    y = x * 2
    s = x
    for i in range(3):
        for j in range(2):
            if j == 1:
                s = s - y
            else:
                s = s + 3.0 * y
    return np.sum(s * s)

def loop_in_branch(x):
    y = np.sin(x)
    z = x
    if x[0] > 0:
        for i in range(2):
            z = z + y
    return np.sum(z * z)

def data_dependent_while(x):
    s = x[0]
    while s < 10:
        s = s * 2 + x[1]
    return s

def early_return(x):
    y = x * 2
    if np.sum(x) > 100:
        return np.sum(y)
    y = y * x
    return np.sum(y)

def while_continue_no_temporaries(x):
    i = 0
    s = x[0]
    while i < 4:
        i = i + 1
        if i == 2:
            continue
        s = s * 1.5 + x[1]
    return s

def enumerate_rows(X):
    s = 0.0
    for i, row in enumerate(X):
        s = s + (i + 1) * np.sum(row * row)
    return s

def zip_rows(X, Y):
    s = 0.0
    for a, b in zip(X, Y):
        s = s + np.sum(a * b)
    return s
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("zero_trip_for", (V3,), (0,)),
    ("zero_trip_from_constant", (V3,), (0,)),
    ("zero_trip_while", (V3,), (0,)),
    ("zero_trip_rows", (np.zeros((0, 2)), 1.5), (0, 1)),
    ("zero_trip_rows", (np.ones((2, 0)), 1.5), (0, 1)),
    ("while_true_break", (V3,), (0,)),
    ("break_in_middle", (V3,), (0,)),
    ("nested_for", (V3,), (0,)),
    ("triangular", (V3,), (0,)),
    ("body_value_after_loop", (V3,), (0,)),
    ("range_index_after_loop", (V3,), (0,)),
    ("reversed_range", (V4,), (0,)),
    ("over_reversed_slice", (V4,), (0,)),
    ("over_expression", (X32,), (0,)),
    ("iterable_rebound_in_body", (X32,), (0,)),
    ("active_through_later_iterations", (V3,), (0,)),
    ("active_subscript_later", (V3,), (0,)),
    ("outer_adjoint_only_in_branch", (V3,), (0,)),
    ("loop_in_branch", (V3,), (0,)),
    ("data_dependent_while", (np.array([0.5, 0.7]),), (0,)),
    ("early_return", (V3,), (0,)),
    ("while_continue_no_temporaries", (V4,), (0,)),
    ("enumerate_rows", (X32,), (0,)),
    ("zip_rows", (X32, X32 + 1), (0, 1)),
])
def test_loops_and_branches(name, args, wrt):
    agrees(getattr(LOOPS, name), args, wrt)


IF_IN_LOOP = load("""
import numpy as np

def if_in_for(x):
    s = 1.0
    for i in range(4):
        if i != 2:
            s = s * np.sin(x[i])
    return s

def continue_in_for(x):
    s = 0.0
    for i in range(4):
        if i == 2:
            continue
        s = s + x[i] * x[i]
    return s

def if_in_while(x):
    s = 0.0
    i = 0
    while i < 4:
        if i != 2:
            s = s + x[i] ** 3
        i = i + 1
    return s

def conditional_expression_in_loop(x):
    s = 0.0
    for i in range(4):
        s = s + (x[i] * x[i] if i > 0 else 0.0)
    return s

def break_from_inner_loop(x):
    s = 0.0
    for i in range(3):
        for j in range(4):
            if j > i:
                break
            s = s + x[j] * x[i]
    return s
""")


INNER_ZERO_TRIP = load("""
import numpy as np

def inner_range(x, n):
    s = x
    for i in range(2):
        for j in range(n):
            s = s * j * x
    return np.sum(s)

def inner_rows(x, X):
    s = x
    for i in range(2):
        for row in X:
            s = s * row
    return np.sum(s)
""")


def test_inner_loops_that_run():
    agrees(INNER_ZERO_TRIP.inner_range, (V3, 2))
    agrees(INNER_ZERO_TRIP.inner_rows, (V3, np.ones((2, 3)) * 1.1), (0, 1))


@pytest.mark.parametrize("name, args, wrt", [
    ("inner_range", (V3, 0), (0,)),
    ("inner_rows", (V3, np.ones((0, 3))), (0, 1)),
])
def test_inner_loops_that_run_zero_times(name, args, wrt):
    agrees(getattr(INNER_ZERO_TRIP, name), args, wrt)


@pytest.mark.parametrize("name", ["if_in_for", "continue_in_for", "if_in_while",
                                  "conditional_expression_in_loop", "break_from_inner_loop"])
def test_branch_values_inside_loops(name):
    agrees(getattr(IF_IN_LOOP, name), (V4,))


LOOP_TARGET = load("""
import numpy as np

def row_after_loop(X):
    s = 0.0
    for row in X:
        s = s + np.sum(row)
    return s * np.sum(row ** 2)

def enumerate_row_after_loop(X):
    s = 0.0
    for i, r in enumerate(X):
        s = s + np.sum(r)
    return s + np.sum(r ** 2)

def zip_item_after_loop(X, Y):
    s = 0.0
    for a, b in zip(X, Y):
        s = s + np.sum(a * b)
    return s * np.sum(b)
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("row_after_loop", (X32,), (0,)),
    ("enumerate_row_after_loop", (X32,), (0,)),
    ("zip_item_after_loop", (X32, X32 + 1), (1,)),
])
def test_loop_target_read_after_loop(name, args, wrt):
    agrees(getattr(LOOP_TARGET, name), args, wrt)


EXITS = load("""
import numpy as np

def return_in_nested_if(x):
    if x[0] > 0:
        if x[1] > 0:
            return np.sum(x ** 2)
        y = x * 3
    else:
        y = x * 4
    return np.sum(y * x)
""")


ONE_SIDED = load("""
import numpy as np

def bound_in_one_branch(x, c):
    if c > 0:
        y = x * 2
    if c > 0:
        z = y * x
    else:
        z = x
    return np.sum(z)
""")


def test_bound_in_one_branch_when_taken():
    agrees(ONE_SIDED.bound_in_one_branch, (V3, 1.0))


def test_bound_in_one_branch_when_not_taken():
    agrees(ONE_SIDED.bound_in_one_branch, (V3, -1.0))


def test_return_in_nested_if():
    agrees(EXITS.return_in_nested_if, (np.abs(V3),))


# --- helpers, closures, keywords and defaults -------------------------------------------

HELPERS = load("""
import numpy as np

W = np.array([1.0, 2.0, 3.0])

def reassigns(u, v):
    u = u * v
    v = u + v
    return np.sum(u * v)

def same_array_twice(x):
    return reassigns(x, x)

def both_orders(x, y):
    return reassigns(x, y) + reassigns(y, x)

def power_sum(u, k=3.0):
    return np.sum(u ** k)

def keywords_and_defaults(x, y):
    return power_sum(x) + power_sum(y, k=2.0) + power_sum(k=1.0, u=x * y)

def helper_in_loop(x):
    s = 0.0
    for i in range(3):
        s = s + power_sum(x, k=i + 1.0)
    return s

def own_defaults(x, w=W, *, k=2.0):
    return np.sum(w * x ** k)

def late_binding(x):
    a = x
    def h(u):
        return u * a
    b = h(x)
    a = x * 2
    return np.sum(h(x) + b)

def nested_shadows_parameter(x):
    def h(x):
        x = x * x
        return x
    y = h(x)
    return np.sum(y * x)

def nested_transposes_enclosing(x):
    a = x * 2
    def h(u):
        return np.sum(u * a.T)
    return h(x)

def make(k):
    a = np.array([1.0, -1.0, 2.0]) * k
    def f(x):
        return np.sum(a * x * x)
    def set_a(v):
        nonlocal a
        a = v
    return f, set_a
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("same_array_twice", (V3,), (0,)),
    ("both_orders", (V3, V3[::-1] * 0.7), (0, 1)),
    ("keywords_and_defaults", (np.abs(V3) + 0.1, np.abs(V3) + 0.2), (0, 1)),
    ("helper_in_loop", (np.abs(V3) + 0.1,), (0,)),
    ("own_defaults", (np.abs(V3) + 0.1, W3), (0, 1)),
    ("late_binding", (V3,), (0,)),
    ("nested_shadows_parameter", (V3,), (0,)),
    ("nested_transposes_enclosing", (V3,), (0,)),
])
def test_helpers(name, args, wrt):
    agrees(getattr(HELPERS, name), args, wrt)


def test_gradient_called_with_keywords_and_defaults():
    g = grad(HELPERS.own_defaults, wrt=("x", "w"))
    x = np.abs(V3) + 0.1
    for kwargs, w, k in (({}, HELPERS.W, 2.0), ({"k": 3.0}, HELPERS.W, 3.0),
                         ({"w": W3, "k": 1.0}, W3, 1.0)):
        dx, dw = g(x, **kwargs)
        np.testing.assert_allclose(dx, w * k * x ** (k - 1))
        np.testing.assert_allclose(dw, x ** k)


def test_closure_cell_rebound_between_calls():
    f, set_a = HELPERS.make(1.0)
    g = grad(f)
    np.testing.assert_allclose(g(V3), 2 * np.array([1.0, -1.0, 2.0]) * V3)
    set_a(np.array([0.5, 0.5, 3.0]))
    np.testing.assert_allclose(g(V3), 2 * np.array([0.5, 0.5, 3.0]) * V3)


NESTED = load("""
import numpy as np

def def_in_branches(x):
    if np.sum(x) > 0:
        def h(u):
            return u * 2
    else:
        def h(u):
            return u * 3
    return np.sum(h(x) * x)

def enclosing_subscript(x):
    a = x * 2
    def h(u):
        return u * a[0]
    return np.sum(h(x))

def enclosing_parameter_subscript(x):
    def h(u):
        return u * x[1]
    return np.sum(h(x))

def enclosing_method(x):
    a = x * 2
    def h(u):
        return u * a.sum()
    return np.sum(h(x))
""")


def test_nested_def_in_branches_is_refused():
    # Which definition runs depends on the branch: refused, rather than picking one.
    with pytest.raises(SymdiffError, match="a helper defined inside a branch or loop"):
        grad(NESTED.def_in_branches)(np.abs(V3))


@pytest.mark.parametrize("name", ["enclosing_subscript", "enclosing_parameter_subscript"])
def test_nested_def_subscripts_enclosing_variable(name):
    agrees(getattr(NESTED, name), (V3,))


def test_nested_def_method_on_enclosing_variable():
    agrees(NESTED.enclosing_method, (V3,))


# --- stop_gradient ----------------------------------------------------------------------

SG = load("""
import numpy as np
import symdiff
from symdiff import stop_gradient as sg

def h(u):
    return sg(u * u) * u

def through_helpers(x):
    return np.sum(symdiff.stop_gradient(h(x)) + h(sg(x)) * x + sg(sg(h(x))) * h(x))

def nested(x):
    return np.sum(sg(sg(x) * x) * x)

def in_loop(x):
    s = x
    for i in range(3):
        s = sg(s) * x + s
    return np.sum(s)

def on_carried_value(x):
    s = x
    for i in range(3):
        s = sg(s * x)
    return np.sum(s * x)

def in_while_condition(x):
    s = x
    k = 0
    while np.sum(sg(s)) < 50 and k < 10:
        s = s * 2 + sg(s) * x
        k = k + 1
    return np.sum(s)

def subscript_method_transpose(x):
    return np.sum(sg(x)[0] * x + sg(x).sum() * x + sg(x).T * x)

def loop_over_stopped(X):
    s = 0.0
    for row in sg(X):
        s = s + np.sum(row * X[0])
    return s

def rebinds_stopped_name(x):
    y = sg(x)
    x = x * y
    return np.sum(x * y)
""")


def _in_loop_reference(x):
    s, d = x.copy(), np.ones_like(x)
    for _ in range(3):
        d, s = s + d, s * x + s
    return d


def _while_reference(x):
    s, d, k = x.copy(), np.ones_like(x), 0
    while np.sum(s) < 50 and k < 10:
        d, s, k = 2 * d + s, s * 2 + s * x, k + 1
    return d


@pytest.mark.parametrize("name, arg, expected", [
    ("through_helpers", V3, V3 ** 3 + V3 ** 5),
    ("nested", V3, V3 * V3),
    ("in_loop", V3, _in_loop_reference(V3)),
    ("on_carried_value", V3, V3 ** 4),
    ("in_while_condition", np.abs(V3), _while_reference(np.abs(V3))),
    ("subscript_method_transpose", V3, V3[0] + V3.sum() + V3),
    ("loop_over_stopped", X32, np.vstack([X32.sum(0), np.zeros((2, 2))])),
    ("rebinds_stopped_name", V3, V3 * V3),
])
def test_stop_gradient(name, arg, expected):
    equals(getattr(SG, name), (arg,), (expected,))


U3 = np.array([0.5, -1.0, 2.0])
U4 = np.array([0.5, 1.0, -0.3, 0.8])
RNG = np.random.default_rng(20240607)
X43 = RNG.standard_normal((4, 3))
X34 = RNG.standard_normal((3, 4))
A33 = RNG.standard_normal((3, 3)) * 0.5
B233 = RNG.standard_normal((2, 3, 3))
V5 = RNG.standard_normal(5)


# --- arrays inside loops and branches ---------------------------------------------------

ARRAY_LOOPS = load("""
import numpy as np

def tanh_of_row(r, w):
    return np.tanh(r @ w)

def helper_per_row(X, w):
    s = 0.0
    for row in X:
        s = s + tanh_of_row(row, w) ** 2
    return s

def scalar_then_array(x):
    acc = 0.0
    for i in range(3):
        acc = acc + x * i
    return np.sum(acc ** 2)

def product_from_scalar(x):
    acc = 1.0
    for i in range(3):
        acc = acc * (x + i)
    return np.sum(acc)

def while_array_state(x):
    s = x
    k = 0
    while np.max(np.abs(s)) < 5.0 and k < 20:
        s = s * 1.5 + np.sin(x)
        k = k + 1
    return np.sum(s ** 2)

def break_flag_then_return(x):
    found = False
    s = 0.0
    for i in range(len(x)):
        if x[i] > 1.0:
            found = True
            s = x[i] * 2.0
            break
    if found:
        return s * np.sum(x)
    return np.sum(x ** 2)

def concatenate_growing(x):
    out = x[:1]
    for i in range(1, len(x)):
        out = np.concatenate([out, out[-1:] * x[i]])
    return np.sum(out ** 2)

def where_in_loop(x):
    s = x
    for i in range(3):
        s = np.where(s > 0.5, s * x, s + x)
    return np.sum(s)

def matmul_in_loop(W, v):
    h = v
    for i in range(3):
        h = np.tanh(W @ h)
    return np.sum(h)

def neighbours(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + x[i] * x[i + 1]
    return s

def reduction_per_branch(X):
    s = 0.0
    for i in range(X.shape[0]):
        if np.sum(X[i]) > 0:
            s = s + np.max(X[i])
        else:
            s = s + np.mean(X[i] ** 2)
    return s

def early(u):
    if np.sum(u) > 0:
        return u * 2.0
    return u * u

def helper_with_early_return_in_loop(x):
    s = 0.0
    for i in range(3):
        s = s + np.sum(early(x - i))
    return s

def inner(u):
    return np.sin(u) * u

def outer(u, k):
    v = inner(u) + k
    return inner(v)

def nested_helpers_in_loop(x):
    s = x
    for i in range(2):
        s = outer(s, i * 0.5)
    return np.sum(s)

def power(u, n):
    p = u
    for i in range(n - 1):
        p = p * u
    return p

def helper_with_loop_in_loop(x):
    s = 0.0
    for k in range(1, 4):
        s = s + np.sum(power(x, k))
    return s

def early_then_loop(u):
    if np.sum(u) < 0:
        return np.sum(u)
    t = u
    for i in range(2):
        t = np.sin(t) + u
    return np.sum(t)

def helper_with_early_return_and_loop_per_row(X):
    s = 0.0
    for row in X:
        s = s + early_then_loop(row)
    return s

def newton_sqrt(a):
    x = a
    k = 0
    while k < 50:
        nx = 0.5 * (x + a / x)
        if np.max(np.abs(nx - x)) < 1e-12:
            x = nx
            break
        x = nx
        k = k + 1
    return np.sum(x)

def running_sums(x):
    parts = x[:1] * 0.0
    s = x[0] * 0.0
    for i in range(len(x)):
        s = s + x[i]
        parts = np.concatenate([parts, s[None]])
    return np.sum(parts ** 2)

def zip_with_helper(X, Y):
    s = 0.0
    for a, b in zip(X, Y):
        s = s + power(a * b, 2).sum()
    return s

def bound_in_an_earlier_iteration(x):
    s = 0.0
    for i in range(3):
        if i == 1:
            y = x * 2.0
        if i == 2:
            s = s + y * x
    return np.sum(s)

def alternating_while(x):
    s = 0.0
    i = 0
    while i < 4:
        if i % 2 == 0:
            y = np.sin(x) * i
        else:
            s = s + np.sum(y * x)
        i = i + 1
    return s

def swap_in_branch_in_loop(x):
    a = x
    b = x * 0.0
    for i in range(4):
        if np.sum(a) > 1.0:
            a, b = b + 0.1, a
        else:
            a = a * 1.7
    return np.sum(a * b + a)

def previous_value(x):
    prev = x[0]
    s = 0.0
    for v in x[1:]:
        s = s + (v - prev) ** 2
        prev = v
    return s

def running_max(x):
    m = x[0]
    s = 0.0
    for v in x:
        m = np.maximum(m, v)
        s = s + m * v
    return s

def value_from_the_breaking_iteration(x):
    s = x * 1.0
    for i in range(5):
        t = s * 0.5
        if np.sum(t) < 0.2:
            break
        s = t + x * 0.1
    return np.sum(s + t)

def continue_over_rows(X):
    s = 0.0
    for i, r in enumerate(X):
        if np.sum(r) < 0:
            continue
        s = s + np.sum(r * r) * i
    return s

def break_inner_over_elements(X):
    total = 0.0
    for r in X:
        acc = 0.0
        for v in r:
            if v < -0.5:
                break
            acc = acc + v * v
        total = total + acc * np.sum(r)
    return total

def chained_indexing(X):
    s = 0.0
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            s = s + X[i][j] * X[i, j] * (i + 1)
    return s

def columns(X):
    s = 0.0
    for j in range(X.shape[1]):
        c = X[:, j]
        s = s + np.sum(c * c) / (j + 1)
    return s

def windows(x):
    s = 0.0
    for i in range(len(x) - 1):
        s = s + np.prod(x[i:i + 2])
    return s

def mask_of_carried_value(x):
    s = x
    for i in range(3):
        s = s + np.sum(s[s > 0.2]) * 0.1
    return np.sum(s ** 2)

def einsum_in_loop(A, v):
    h = v
    for i in range(2):
        h = np.einsum('ij,j->i', A, h) + v
    return np.sum(np.tanh(h))

def batched_matmul_in_loop(B, v):
    h = v
    for k in range(2):
        h = np.tanh(B @ h)
        h = np.mean(h, axis=0)
    return np.sum(h)

def rows_of_outer(x):
    M = np.outer(x, x)
    s = 0.0
    for r in M:
        s = s + np.max(r) - np.min(r)
    return s

def vstack_growing(x):
    rows = x[None, :]
    for i in range(2):
        rows = np.vstack([rows, rows[-1] * x])
    return np.sum(rows ** 2)

def index_from_argsort(x):
    idx = np.argsort(x)
    s = 0.0
    for i in range(len(x)):
        s = s + x[idx[i]] * (i + 1)
    return s

def trace_of_powers(A):
    P = A
    s = 0.0
    for i in range(3):
        s = s + np.trace(P)
        P = P @ A
    return s

def helper_reads_enclosing_loop_variable(x):
    a = x
    def h(u):
        return u * a
    s = 0.0
    for i in range(3):
        s = s + np.sum(h(x))
        a = a * 2
    return s

def helper_reads_loop_index(x):
    def h(u):
        return u * i
    s = 0.0
    for i in range(3):
        s = s + np.sum(h(x) ** 2)
    return s
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("helper_per_row", (X43, U3), (0, 1)),
    ("scalar_then_array", (U3,), (0,)),
    ("product_from_scalar", (U3,), (0,)),
    ("while_array_state", (U3 * 0.3,), (0,)),
    ("break_flag_then_return", (np.array([0.5, 1.5, 2.0]),), (0,)),
    ("break_flag_then_return", (np.array([0.5, 0.5, 0.2]),), (0,)),
    ("concatenate_growing", (np.array([0.5, 1.5, 2.0, 0.7]),), (0,)),
    ("where_in_loop", (np.array([0.3, 0.9, -0.4]),), (0,)),
    ("matmul_in_loop", (A33, U3), (0, 1)),
    ("neighbours", (V5,), (0,)),
    ("reduction_per_branch", (X43,), (0,)),
    ("helper_with_early_return_in_loop", (np.array([0.5, 1.0, 1.2]),), (0,)),
    ("helper_with_early_return_in_loop", (np.array([0.5, 0.2, -1.2]),), (0,)),
    ("nested_helpers_in_loop", (U3,), (0,)),
    ("helper_with_loop_in_loop", (np.abs(U3),), (0,)),
    ("helper_with_early_return_and_loop_per_row", (X43,), (0,)),
    ("newton_sqrt", (np.array([2.0, 3.0, 0.5]),), (0,)),
    ("running_sums", (U4,), (0,)),
    ("zip_with_helper", (X43, X43 + 1), (0, 1)),
    ("bound_in_an_earlier_iteration", (U4,), (0,)),
    ("alternating_while", (U4,), (0,)),
    ("swap_in_branch_in_loop", (U4,), (0,)),
    ("previous_value", (U4,), (0,)),
    ("running_max", (U4,), (0,)),
    ("value_from_the_breaking_iteration", (U4,), (0,)),
    ("continue_over_rows", (X43,), (0,)),
    ("break_inner_over_elements", (X43,), (0,)),
    ("chained_indexing", (X34,), (0,)),
    ("columns", (X34,), (0,)),
    ("windows", (V5,), (0,)),
    ("mask_of_carried_value", (V5,), (0,)),
    ("einsum_in_loop", (A33, U3), (0, 1)),
    ("batched_matmul_in_loop", (B233, U3), (0, 1)),
    ("rows_of_outer", (V5,), (0,)),
    ("vstack_growing", (V5,), (0,)),
    ("index_from_argsort", (V5,), (0,)),
    ("trace_of_powers", (A33,), (0,)),
    ("helper_reads_enclosing_loop_variable", (U3,), (0,)),
    ("helper_reads_loop_index", (U3,), (0,)),
])
def test_arrays_in_loops_and_branches(name, args, wrt):
    agrees(getattr(ARRAY_LOOPS, name), args, wrt)


LOOP_EXITS = load("""
import numpy as np

def early_returns_around_loops(x, c):
    if c > 0:
        if np.sum(x) > 1:
            return np.sum(x ** 2)
        x = x * 3
    s = 0.0
    for i in range(3):
        s = s + x[i]
    if s > 2.0:
        return s * np.sum(x)
    t = x
    while np.sum(t) < 5.0:
        t = t * 1.5 + 0.1
    return np.sum(t * x)

def helper(u, c):
    if c > 0:
        if np.sum(u) > 1:
            return u ** 2
        u = u * 3
    k = 0
    while k < 2 and np.sum(u) < 3:
        u = u * 2.0
        k = k + 1
    if k == 2:
        return u + 1.0
    return np.sin(u)

def helper_with_exits_per_row(X, c):
    s = 0.0
    for r in X:
        s = s + np.sum(helper(r, c) * r)
    return s
""")


X_EXITS = np.array([[0.2, 0.3, 0.1], [1.0, 0.5, 0.2], [0.05, 0.1, 0.0], [-0.5, 0.2, 0.1]])


@pytest.mark.parametrize("c", [1.0, -1.0])
@pytest.mark.parametrize("x", [np.array([0.2, 0.3, 0.1]), np.array([1.0, 1.5, 0.5]),
                               np.array([0.4, 0.6, 0.2]), np.array([0.28, 0.27, 0.29])])
def test_early_returns_around_loops(x, c):
    agrees(LOOP_EXITS.early_returns_around_loops, (x, c), (0, 1))


@pytest.mark.parametrize("c", [1.0, -1.0])
def test_helper_with_exits_called_per_row(c):
    agrees(LOOP_EXITS.helper_with_exits_per_row, (X_EXITS, c))


# --- stop_gradient on loop-carried values -----------------------------------------------

SG_SOURCE = """
import numpy as np
from symdiff import stop_gradient as sg

def carried(x):
    s = x
    for i in range(3):
        s = sg(s) * x + s * 0.5
    return np.sum(s)

def stopped_helper(u):
    return sg(u * u)

def through_helper(x):
    return np.sum(stopped_helper(x) * x)

def while_with_stopped_state(x):
    s = x
    k = 0
    while True:
        s = s * 0.5 + sg(s) * x
        k = k + 1
        if np.sum(sg(s)) > 4.0 or k >= 6:
            break
    return np.sum(s * s)

def stopped_rows(X, w):
    s = 0.0
    for r in X:
        h = np.tanh(r * w)
        s = s + np.sum(h * sg(h))
    return s
"""

SG_CARRIED = load(SG_SOURCE)


def _carried_reference(x):
    s, d = x.copy(), np.ones_like(x)
    for _ in range(3):
        s, d = s * x + s * 0.5, s + 0.5 * d
    return d


@pytest.mark.parametrize("name, args, expected", [
    ("carried", (U3,), (_carried_reference(U3),)),
    ("through_helper", (U3,), (U3 * U3,)),
])
def test_stop_gradient_by_hand(name, args, expected):
    equals(getattr(SG_CARRIED, name), args, expected)


@pytest.mark.parametrize("name, args, wrt", [
    ("while_with_stopped_state", (np.array([0.5, 0.8, 0.3]),), (0,)),
    ("stopped_rows", (X43, U3), (0, 1)),
])
def test_stop_gradient_against_frozen_differences(name, args, wrt):
    grads = run(getattr(SG_CARRIED, name), args, wrt)
    for g, e in zip(grads, frozen_reference(SG_SOURCE, args, wrt, name), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


# --- parameters unused, used as an index, or in a condition only -------------------------

ROLES = load("""
import numpy as np

def unused_in_the_branch_taken(x, y, c):
    if c > 0:
        return np.sum(x ** 2)
    return np.sum(y ** 2)

def condition_only(x, t):
    if t > 0:
        return np.sum(x)
    return np.sum(x * 2)

def index_through_int(x, n):
    return x[int(n)] ** 2

def slice_bound(x, n):
    return np.sum(x[n:] ** 2)

def loop_count(x, n):
    s = x
    for i in range(n):
        s = s * x
    return np.sum(s)

def loop_count_through_int(x, n):
    s = x
    for i in range(int(n)):
        s = s * x
    return np.sum(s)

def while_threshold(x, t):
    s = x
    while np.sum(s) < t:
        s = s * 2.0
    return np.sum(s)

def mask_threshold(x, t):
    return np.sum(x[x > t] ** 2)

def where_threshold(x, t):
    return np.sum(np.where(x > t, x, 0.0) ** 2)

def index_derived_from_parameter(x, n):
    i = n + 1
    return x[i] ** 2

def keyword_only(x, *, k=2.0, w=np.array([1.0, 2.0, 3.0])):
    return np.sum(w * x ** k)
""")


@pytest.mark.parametrize("c", [1.0, -1.0])
def test_parameter_unused_in_the_branch_taken(c):
    dx, dy, dc = run(ROLES.unused_in_the_branch_taken, (U3, U3 * 2, c), (0, 1, 2))
    np.testing.assert_allclose(dx, 2 * U3 if c > 0 else 0 * U3)
    np.testing.assert_allclose(dy, 0 * U3 if c > 0 else 4 * U3)
    assert dc == 0.0


@pytest.mark.parametrize("name, args, expected", [
    ("condition_only", (U3, 1.0), (np.ones(3), 0.0)),
    ("condition_only", (U3, -1.0), (2 * np.ones(3), 0.0)),
    ("index_through_int", (U3, 1.0), (np.array([0.0, -2.0, 0.0]), 0.0)),
    ("slice_bound", (U3, 1), (np.array([0.0, -2.0, 4.0]), 0.0)),
    ("loop_count", (U3, 2), (3 * U3 ** 2, 0.0)),
    ("loop_count_through_int", (U3, 2.0), (3 * U3 ** 2, 0.0)),
    ("while_threshold", (np.abs(U3), 10.0), (4 * np.ones(3), 0.0)),
    ("mask_threshold", (U3, 0.0), (np.array([1.0, 0.0, 4.0]), 0.0)),
    ("where_threshold", (U3, 0.0), (np.array([1.0, 0.0, 4.0]), 0.0)),
])
def test_parameter_used_only_as_index_or_in_a_condition(name, args, expected):
    equals(getattr(ROLES, name), args, expected, wrt=(0, 1))


def test_index_derived_from_a_differentiated_parameter_is_refused():
    with pytest.raises(SymdiffError, match=r"m\d+\.py:\d+:\d+: index must not depend"):
        grad(ROLES.index_derived_from_parameter, wrt=(0, 1))(U3, 0)


def test_keyword_only_parameters_and_array_defaults():
    x = np.abs(U3)
    w = np.array([1.0, 2.0, 3.0])
    g = grad(ROLES.keyword_only, wrt=("x", "k", "w"))
    for kwargs, k in (({}, 2.0), ({"k": 3.0}, 3.0)):
        dx, dk, dw = g(x, **kwargs)
        np.testing.assert_allclose(dx, w * k * x ** (k - 1))
        assert dk == pytest.approx(np.sum(w * x ** k * np.log(x)))
        np.testing.assert_allclose(dw, x ** k)
    assert type(dk) is float and dw.dtype == np.float64
    np.testing.assert_array_equal(ROLES.keyword_only.__kwdefaults__["w"], w)


# --- dtypes, 0-d arrays, empty arrays ------------------------------------------------------

KINDS = load("""
import numpy as np

def branches_in_loop(x, s):
    acc = 0.0
    for i in range(3):
        if np.sum(x) * i > s:
            acc = acc + x * s
        else:
            acc = acc * s + np.sin(x)
    return np.sum(acc)

def while_with_scalar_state(x, s):
    k = 0
    t = s
    while k < 3 and np.sum(t) < 5.0:
        t = t * 1.5 + x
        k = k + 1
    return np.sum(t * x)
""")


X_KINDS = [np.array([0.5, 1.0, -0.3]), np.array([0.5, 1.0, -0.3], dtype=np.float32),
           np.array(0.7), np.array(0.7, dtype=np.float32), np.float32(0.7), 0.7]

S_KINDS = [0.4, np.float32(0.4), np.array(0.4), np.array(0.4, dtype=np.float32), np.int64(1), 1]


def _as_float64(a):
    return np.asarray(a, dtype=np.float64) if isinstance(a, np.ndarray) else float(a)


@pytest.mark.parametrize("name", ["branches_in_loop", "while_with_scalar_state"])
@pytest.mark.parametrize("x", X_KINDS, ids=repr)
@pytest.mark.parametrize("s", S_KINDS, ids=repr)
def test_kinds_of_scalars_and_arrays_through_loops(name, x, s):
    f = getattr(KINDS, name)
    grads = grad(f, wrt=(0, 1))(x, s)
    low = any(getattr(a, "dtype", None) == np.float32 for a in (x, s))
    args = [_as_float64(x), _as_float64(s)]
    for i, (g, a) in enumerate(zip(grads, (x, s), strict=True)):
        single = getattr(a, "dtype", None) == np.float32  # each of its own precision
        if isinstance(a, np.ndarray):
            assert isinstance(g, np.ndarray) and g.dtype == (np.float32 if single else
                                                             np.float64)
            assert g.shape == a.shape
        else:
            assert type(g) is (np.float32 if single else float)
        np.testing.assert_allclose(g, numeric_grad(f, args, i), rtol=1e-3 if low else 1e-6,
                                   atol=1e-3 if low else 1e-7)


# --- value_and_grad through loops ----------------------------------------------------------

VALUES = load("""
import numpy as np

def accumulate(x):
    s = 0.0
    for i in range(3):
        s = s + x * x
    return s

def accumulate_elements(x):
    s = 0.0
    for v in x:
        s = s + v * v
    return s

def accumulate_in_while(x):
    s = 0.0
    k = 0
    while k < 3:
        s = s + np.sum(x ** 2)
        k = k + 1
    return s
""")


@pytest.mark.parametrize("f, args", [
    (ARRAY_LOOPS.scalar_then_array, (U3,)), (ARRAY_LOOPS.while_array_state, (U3 * 0.3,)),
    (ARRAY_LOOPS.concatenate_growing, (U4,)), (ARRAY_LOOPS.newton_sqrt, (np.array([2.0, 3.0]),)),
    (ARRAY_LOOPS.swap_in_branch_in_loop, (U4,)), (ARRAY_LOOPS.vstack_growing, (V5,)),
    (LOOP_EXITS.early_returns_around_loops, (np.array([0.2, 0.3, 0.1]), 1.0)),
    (SG_CARRIED.carried, (U3,)), (KINDS.while_with_scalar_state, (U3, 0.4)),
    (ROLES.loop_count, (U3, 2)),
], ids=lambda a: getattr(a, "__name__", ""))
def test_value_and_grad_value(f, args):
    value, g = value_and_grad(f)(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)
    np.testing.assert_array_equal(g, grad(f)(*args))


@pytest.mark.parametrize("f, args", [
    (VALUES.accumulate, (1.5,)), (VALUES.accumulate_elements, (U3,)),
    (VALUES.accumulate_in_while, (U3,)), (ARRAY_LOOPS.helper_per_row, (X43, U3)),
    (ARRAY_LOOPS.neighbours, (V5,)), (ARRAY_LOOPS.continue_over_rows, (X43,)),
    (LOOP_EXITS.helper_with_exits_per_row, (X_EXITS, 1.0)),
], ids=lambda a: getattr(a, "__name__", ""))
def test_value_and_grad_value_of_a_loop_carried_result(f, args):
    value, g = value_and_grad(f)(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)


# --- loops that overwrite a carried value and may run zero times --------------------

ZERO_TRIP = load("""
import numpy as np

def reset_in_for(x, n):
    s = x
    for i in range(n):
        s = 2.0
    return s * s

def clamp_by_while(x):
    s = x
    while s > 10.0:
        s = 10.0
    return s * s

def reset_in_inner_loop(y, s):
    for i in range(3):
        for j in range(0):
            s = j * 2.0
        x = y - s
    return s + np.sum(x)

def reset_in_inner_while(x, s):
    for i in range(2):
        k = 0
        while k < 1 and np.sum(x) > 100.0:
            s = x * 2.0
            k = k + 1
    return s
""")


def test_loops_that_reset_a_value_when_they_run():
    assert grad(ZERO_TRIP.reset_in_for)(1.5, 2) == 0.0
    assert grad(ZERO_TRIP.clamp_by_while)(11.5) == 0.0


@pytest.mark.parametrize("name, args, expected", [
    ("reset_in_for", (1.5, 0), 3.0),
    ("clamp_by_while", (1.5,), 3.0),
    ("reset_in_inner_loop", (U3, 1.5), 1.0 - 3.0),
    ("reset_in_inner_while", (U3, 1.5), 1.0),
])
def test_loops_that_reset_a_value_and_run_zero_times(name, args, expected):
    f = getattr(ZERO_TRIP, name)
    wrt = len(args) - 1 if name.startswith("reset_in_inner") else 0
    g = grad(f, wrt=wrt)(*args)
    assert g == pytest.approx(expected)
    assert g == pytest.approx(numeric_grad(f, list(args), wrt))


# --- defaults of helpers evaluated when called, not when defined ----------------------

DEFAULTS = load("""
import numpy as np

K = 2.0

def nested_default_reads_enclosing(x):
    a = x * 2.0
    def h(u, k=a):
        return u * k
    a = x * 3.0
    return np.sum(h(x))

def scaled(u, k=K):
    return u * k

def module_default(x):
    return np.sum(scaled(x) * x)
""")


def test_nested_helper_default_is_bound_at_definition():
    x = U3
    np.testing.assert_allclose(grad(DEFAULTS.nested_default_reads_enclosing)(x), 4 * x)


def test_module_helper_default_is_bound_at_definition():
    g = grad(DEFAULTS.module_default)
    np.testing.assert_allclose(g(U3), 4 * U3)
    DEFAULTS.K = 5.0
    try:
        np.testing.assert_allclose(numeric_grad(DEFAULTS.module_default, [U3], 0), 4 * U3,
                                   rtol=1e-6)
        np.testing.assert_allclose(g(U3), 4 * U3)
    finally:
        DEFAULTS.K = 2.0


# --- names that are unbound where the function reads them --------------------------------

UNBOUND = load("""
import numpy as np

def bound_in_one_branch(x, c):
    if c > 0:
        y = x * 2.0
    return np.sum(y * x)

def size_of_name_bound_in_one_branch(x, c):
    if c > 0:
        y = x * 2.0
    return np.sum(x * x) * np.size(y)

def bound_in_loop_that_runs_zero_times(x, n):
    for i in range(n):
        y = x * i
    return np.sum(y)
""")


@pytest.mark.parametrize("name, args, bound", [
    ("bound_in_one_branch", (U3, -1.0), (U3, 1.0)),
    ("size_of_name_bound_in_one_branch", (U3, -1.0), (U3, 1.0)),
    ("bound_in_loop_that_runs_zero_times", (U3, 0), (U3, 2)),
])
def test_reading_an_unbound_name(name, args, bound):
    f = getattr(UNBOUND, name)
    with pytest.raises(UnboundLocalError, match="'y'"):
        f(*args)
    with pytest.raises(UnboundLocalError, match="'y'"):
        value_and_grad(f)(*args)
    with pytest.raises(UnboundLocalError, match="'y'"):
        grad(f)(*args)
    check_grad(f, bound)  # where the path assigns it, all is as before


def test_huber_on_both_branches():
    for x in (0.5, -0.3, 2.5, -4.0):
        check_grad(M.huber, (x,))
        assert grad(M.huber)(x) == pytest.approx(x if abs(x) <= 1 else math.copysign(1, x))


def test_newton_iteration_for_sqrt_through_six_iterations():
    g = grad(M.newton_sqrt)
    check_grad(M.newton_sqrt, (2.0,))
    assert g(2.0) == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-8)
    assert g(9.0) == pytest.approx(1 / 6, rel=1e-3)


def test_power_series_accumulated_in_a_loop():
    check_grad(M.exp_series, (0.7,))
    assert grad(M.exp_series)(0.7) == pytest.approx(math.exp(0.7), rel=1e-6)
    assert grad(M.exp_series)(0.7, n=1) == 0.0  # the loop runs zero times


def test_piecewise_with_elif():
    for x in (-1.5, 0.3, 1.7):
        check_grad(M.piecewise, (x,))


def test_helper_called_twice_with_keywords_defaults_and_stop_gradient():
    x, y = 0.3, 0.8
    gx, gy = grad(M.twice, wrt=(0, 1))(x, y)
    # helper(u, s) = s sin u + c u with c = u frozen: d/du = s cos u + u.
    hx, hy = 2 * math.sin(x) + x * x, 3 * math.sin(y) + y * y
    assert gx == pytest.approx((2 * math.cos(x) + x) * hy)
    assert gy == pytest.approx(hx * (3 * math.cos(y) + y))


def test_loop_over_the_rows_of_a_matrix():
    rng = np.random.default_rng(1)
    check_grad(M.rows, (rng.standard_normal((4, 3)), rng.standard_normal(3)), wrt=(0, 1))
    check_grad(M.sum_rows_then_mean, (rng.standard_normal((5, 3)),))


def test_while_whose_trip_count_depends_on_the_input():
    for x in (0.7, 3.3, 17.0):
        check_grad(M.halvings, (x,))
    n = 5  # 17 halves 5 times to 0.53
    assert grad(M.halvings)(17.0) == pytest.approx(2 * 17.0 / 2 ** n)


def test_break_and_continue():
    check_grad(M.first_over, (0.4,))
    # s = 0.4 * (0 + 1 + ... + i) first exceeds 5 at i = 5: the loop breaks after it.
    assert grad(M.first_over)(0.4) == pytest.approx(sum(range(6)))
    check_grad(M.odd_powers, (0.9,))


def test_nested_helper_sees_the_enclosing_variables():
    check_grad(M.nested_helper, (0.7,))


def test_conditional_expression():
    for x in (0.7, -0.7):
        check_grad(M.conditional_expression, (x,))


def test_enumerate_and_zip_over_arrays():
    rng = np.random.default_rng(2)
    check_grad(M.enumerate_zip, (rng.standard_normal((4, 3)), rng.standard_normal(3)),
               wrt=(0, 1))


def test_nested_loops_and_calls_inside_loops():
    check_grad(M.nested_loops, (0.6, 4))
    check_grad(M.calls_in_loop, (0.6,))


def test_module_constants_and_branches_on_arrays():
    x = np.array([0.3, -0.2, 0.9])
    check_grad(M.module_constant, (x,))
    check_grad(M.branch_on_array, (x,))
    check_grad(M.branch_on_array, (-x,))


def test_helper_from_another_module_with_its_own_aliases():
    check_grad(M.use_other, (0.4,))


def test_value_and_grad_through_control_flow():
    value, g = value_and_grad(M.piecewise)(0.3)
    assert value == M.piecewise(0.3) and g == pytest.approx(3 * 0.3 ** 2)


def test_lambdas_are_located_by_their_columns():
    L = load("""
import numpy as np
f = lambda x: np.sin(x) * x
g, h = (lambda x: x ** 2), (lambda x: x ** 3)
""")
    assert grad(L.f)(1.0) == pytest.approx(math.cos(1.0) + math.sin(1.0))
    assert grad(L.g)(2.0) == 4.0 and grad(L.h)(2.0) == 12.0
    assert grad(L.h).source.startswith("def grad_lambda(x):")


def test_generated_loops_say_what_they_keep():
    src = grad(M.exp_series).source
    assert "# line 21: each iteration's values, for the backward sweep" in src
    assert "for k in range(1, n):" in src and "in reversed(_tape0):" in src
    assert "carried from one iteration to the next" in src
    assert "if _t0:  # the branch the forward sweep took" in grad(M.huber).source


def test_the_source_of_a_branch_reads_as_the_users():
    src = grad(M.piecewise).source.replace(inspect.getsourcefile(M.piecewise), "F")
    body = src.split('"""', 2)[2]
    assert body == '''
    _t0 = x < -1  # line 27
    if _t0:
        y = -x  # line 28
        y_4 = y  # line 27
    else:
        _t1 = x < 1  # line 29
        if _t1:
            y_1 = x ** 2  # line 30
            y_3 = y_1  # line 29
        else:
            y_2 = np.sin(x) + 2  # line 32
            y_3 = y_2  # line 29
        y_4 = y_3  # line 27
    _ret = y_4 * x  # line 33
    if type(_ret) is not float: _check_scalar(_ret, 'piecewise')
    d_ret = 1.0
    # grad of line 33: return y * x
    dy_4 = x
    dx = y_4
    # grad of line 27: if x < -1:
    if _t0:  # the branch the forward sweep took
        dy = dy_4
        # grad of line 28: y = -x
        dx = dx - dy
    else:
        dy_3 = dy_4
        # grad of line 29: elif x < 1:
        if _t1:  # the branch the forward sweep took
            dy_1 = dy_3
            # grad of line 30: y = x ** 2
            dx = dx + 2*dy_1*x
        else:
            dy_2 = dy_3
            # grad of line 32: y = np.sin(x) + 2
            dx = dx + dy_2*np.cos(x)
    return _fit(dx, x, copy=True)
'''


# --- refused constructs: exact text of the located errors ---

def error(source, name="f"):
    f = load(source, name)
    with pytest.raises(SymdiffError) as e:
        grad(f).source  # noqa: B018
    return str(e.value).replace(inspect.getsourcefile(f), "F")


def test_recursion_is_refused():
    assert error("""
def f(x):
    if x > 1:
        return f(x / 2)
    return x
""") == """F:4:16: f calls itself (recursion is not supported)
            return f(x / 2)
                   ^
  supported instead: a loop"""


def test_for_else_is_refused():
    assert error("""
def f(x):
    for i in range(3):
        x = x * 2
    else:
        x = x + 1
    return x
""") == """F:6:9: for/else is not supported
            x = x + 1
            ^
  supported instead: a flag set before break, tested after the loop"""


def test_return_inside_a_loop_is_refused():
    assert error("""
def f(x):
    for i in range(3):
        if x > 2:
            return x
        x = x * 2
    return x
""") == """F:5:13: return inside a loop is not supported
                return x
                ^
  supported instead: assign the result to a name and break, then return it"""


def test_set_comprehensions_and_generators_are_refused():
    assert "set comprehensions are not supported" in error("""
def f(x):
    v = {x * i for i in range(3)}
    return v
""")
    assert "generators and coroutines are not supported" in error("""
def f(x):
    yield x
    return x
""")


def test_with_and_try_are_refused_inside_loops_too():
    text = error("""
def f(x):
    for i in range(2):
        with open('a') as h:
            x = x * 2
    return x
""")
    assert text.startswith("F:4:9: 'with' statements are not supported")


def test_not_every_path_returns():
    assert "f does not return a value on every path" in error("""
def f(x):
    if x > 0:
        return x
""")


def test_loop_over_a_non_array_is_refused():
    assert "cannot loop over" in error("""
def f(x):
    for c in "abc":
        x = x * 2
    return x
""")


# --- random programs with branches and loops ---

EXPRS = ["x * y", "np.sin(v) + x", "v * v - y", "np.tanh(v * x)", "v / (1 + v ** 2)",
         "0.5 * v + np.cos(y)", "v * 1.5", "np.exp(-v ** 2) * x"]


@st.composite
def programs(draw):
    lines = ["v = x + 0.1"]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["assign", "if", "for", "while"]))
        e1, e2 = draw(st.sampled_from(EXPRS)), draw(st.sampled_from(EXPRS))
        if kind == "assign":
            lines.append(f"v = {e1}")
        elif kind == "if":
            threshold = draw(st.sampled_from([-0.5, 0.0, 0.4]))
            lines += [f"if v > {threshold}:", f"    v = {e1}", "else:", f"    v = {e2}"]
        elif kind == "for":
            n = draw(st.integers(0, 3))
            lines += [f"for i in range({n}):", f"    v = {e1} + 0.1 * i"]
        else:
            lines += ["k = 0", "while k < 2 and v < 3.0:", f"    v = {e1} + 1.0", "    k += 1"]
    lines.append(f"return {draw(st.sampled_from(EXPRS))}")
    return "import numpy as np\ndef f(x, y):\n" + "\n".join("    " + s for s in lines) + "\n"


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs(), st.integers(-150, 150), st.integers(-150, 150))
def test_random_programs_with_branches_and_loops(source, xi, yi):
    f = load(source, "f")
    x, y = xi / 100, yi / 100
    with np.errstate(all="ignore"):
        try:
            value = f(x, y)
        except (ZeroDivisionError, OverflowError):
            assume(False)
        assume(np.isfinite(value) and abs(value) < 1e6)
        for i in (0, 1):
            # Away from a branch boundary, two step sizes agree; near one they do not.
            args = [x, y]
            a, b = numeric_grad(f, args, i, h=1e-6), numeric_grad(f, args, i, h=1e-4)
            assume(np.isfinite(a) and abs(a - b) <= 1e-4 * max(1.0, abs(a)))
    gx, gy = grad(f, wrt=(0, 1))(x, y)
    np.testing.assert_allclose([gx, gy], [numeric_grad(f, [x, y], 0),
                                          numeric_grad(f, [x, y], 1)], rtol=1e-4, atol=1e-6,
                               err_msg=source)


def test_closures_capture_floats_arrays_and_helpers():
    L = load("""
import numpy as np

def make(scale, weights):
    def square(z):
        return z ** 2
    def loss(x):
        return scale * np.sum(weights * square(x))
    return loss
""")
    w = np.array([1.0, 2.0, 3.0])
    loss = L.make(0.5, w)
    x = np.array([0.2, -0.4, 1.1])
    np.testing.assert_allclose(grad(loss)(x), 0.5 * w * 2 * x)
    check_grad(loss, (x,))


def test_redefining_a_called_helper_rebuilds_the_gradient():
    L = load("""
import numpy as np

def inner(x):
    return x ** 2

def outer(x):
    return inner(x) * 3
""")
    g = grad(L.outer)
    assert g(2.0) == 12.0
    L.inner = lambda x: x ** 3  # noqa: E731 - a redefinition, as in a notebook
    assert g(2.0) == 36.0
    assert grad(L.outer)(2.0) == 36.0


def test_library_functions_are_not_inlined():
    text = error("""
from symdiff import jvp

def h(x):
    return x * x

def f(x):
    return jvp(h, (x,), (1.0,))[1] * 2.0
""")
    assert "jvp inside a function being differentiated is not supported" in text
    assert text.startswith("F:8:12: ")
    assert "np.linalg.eig is not supported" in error("""
import numpy as np
def f(x):
    return np.linalg.eig(x)[0][1]
""")


RESETS = load("""
import numpy as np

def squares(x):
    acc = 0.0
    for xi in x:
        if xi > 100.0:
            acc = 0.0
        acc = acc + xi ** 2
    return acc

def counted(x):
    v = 0.0
    for i in range(3):
        if i == 10:
            v = 0.0
        v = v + x
    return v

def in_while(x):
    v = 0.0
    i = 0
    while i < 3:
        if i == 10:
            v = 0.0
        v = v + x
        i += 1
    return v

def in_elif(x):
    v = 0.0
    for i in range(3):
        if i == 10:
            v = 0.0
        elif i == 11:
            v = 1.0
        v = v + x * i
    return v

def in_inner_loop(x):
    v = 0.0
    for i in range(2):
        for j in range(3):
            if j == 10:
                v = 0.0
            v = v + x
    return v

def before_inner_loop(x):
    v = 0.0
    for i in range(2):
        if i == 10:
            v = 0.0
        for j in range(3):
            v = v + x
    return v

def through_another(x):
    a = 0.0
    b = 0.0
    for i in range(3):
        if i == 10:
            a = 0.0
        a = a + b
        b = x
    return a

def with_break(x):
    v = 0.0
    for i in range(5):
        if i == 10:
            v = 0.0
        v = v + x
        if i == 2:
            break
    return v

def arrays(x):
    acc = np.zeros(2)
    for xi in x:
        if xi > 100.0:
            acc = np.zeros(2)
        acc = acc + xi * np.ones(2)
    return np.sum(acc)
""")


def test_a_reset_in_a_branch_not_taken_keeps_the_earlier_iterations():
    # The variable turns active only at the end of the first iteration: the branch's merge
    # of it must be active too, or the backward sweep drops every earlier iteration.
    equals(RESETS.squares, (np.array([1.0, 2.0, 3.0]),), [np.array([2.0, 4.0, 6.0])])
    equals(RESETS.counted, (1.5,), [3.0])
    equals(RESETS.in_while, (1.5,), [3.0])
    equals(RESETS.in_elif, (1.5,), [3.0])
    equals(RESETS.in_inner_loop, (1.5,), [6.0])
    equals(RESETS.before_inner_loop, (1.5,), [6.0])
    equals(RESETS.through_another, (1.5,), [2.0])
    equals(RESETS.with_break, (1.5,), [3.0])
    equals(RESETS.arrays, (np.array([1.0, 2.0, 3.0]),), [np.array([2.0, 2.0, 2.0])])


DEAD = load("""
import numpy as np

def power_twice(u, k):
    for i in range(2):
        u = np.power(u, k)
    return 1.0

def helper_result_dropped(x):
    t = power_twice(x, 0.5)
    return np.sum(x * 2.0)

def loop_result_dropped(x):
    s = np.zeros_like(x)
    for i in range(3):
        s = s + x ** 0.5
    return np.sum(x * 2.0)

def branch_in_loop_dropped(x):
    s = np.zeros_like(x)
    for i in range(2):
        if np.sum(x) > -10.0:
            s = s + np.sqrt(x)
        s = s * 1.0
    return np.sum(x * 2.0)

def std_dropped(x):
    d = np.std(x * 0.0 + 1.0)
    h = np.hypot(x, x)
    return np.sum(x ** 2)
""")


@pytest.mark.parametrize("name", ["helper_result_dropped", "loop_result_dropped",
                                  "branch_in_loop_dropped"])
def test_dead_code_adds_nothing_to_the_gradient(name):
    # Its local derivative is nan at a negative entry; a zero adjoint times nan is nan.
    with np.errstate(invalid="ignore"):
        equals(getattr(DEAD, name), (np.array([-1.0, 2.0]),), [np.array([2.0, 2.0])])


def code_of(g) -> str:
    """The generated code without its docstring (which names a random temporary path)."""
    return ast.unparse(ast.parse(g.source).body[0].body[1:])


def test_dead_code_is_not_in_the_backward_sweep():
    source = code_of(grad(DEAD.loop_result_dropped))
    assert "_tape" not in source and "ds" not in source
    source = code_of(grad(DEAD.std_dropped))
    assert "dd" not in source and "dh" not in source
    equals(DEAD.std_dropped, (np.array([0.0, 0.0]),), [np.array([0.0, 0.0])])


def test_a_helper_called_twice_with_the_same_subscript():
    L = load("""
def h(a, b):
    return a * b

def f(x):
    return h(x[0], x[0])

def g(x):
    return h(x[0], x[0] + 1.0) + h(x[1], x[0])
""")
    equals(L.f, (np.array([1.5, 2.0]),), [np.array([3.0, 0.0])])
    agrees(L.g, (np.array([1.5, 2.0]),))


def test_values_that_cannot_depend_on_the_inputs_are_not_differentiated():
    # hypot's derivative at (0, 0) divides by zero; the point is a constant here.
    L = load("""
import math

def h1(t):
    return t * 0.0

def f(x):
    return math.hypot(h1(0.25), h1(0.5)) + x * math.hypot(h1(0.25), h1(0.5)) + x
""")
    equals(L.f, (2.0,), [1.0])


def test_a_while_loop_that_runs_zero_times_inside_a_branch():
    L = load("""
import numpy as np

def f(x, n):
    s = 0.0
    if x > 0:
        i = 0
        while i < n:
            if s > 1.0:
                s = s * x
            else:
                s = s + np.sin(x) ** 2
            i += 1
    else:
        s = x
    return s + x
""")
    for n in (0, 1, 3):
        agrees(L.f, (1.5, n))
        agrees(L.f, (-0.5, n))


def test_a_value_read_only_on_a_path_not_taken_adds_nothing():
    L = load("""
import numpy as np

def f(x, n):
    s = np.sqrt(x)
    y = x
    for i in range(n):
        y = y + s
    return np.sum(y)
""")
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(grad(L.f)(np.array([-1.0, 4.0]), 0), [1.0, 1.0])


# Values whose local derivative is nan or inf at x[0] = 0 (np.sqrt), read only on paths the
# call does not take: nothing flows back through them, so they add nothing (as in JAX).
UNTAKEN = load("""
import numpy as np


def root2(a):
    return np.sqrt(a) * 2.0


def while_zero_trips(x, n):
    s = np.sqrt(x)
    y = x
    i = 0
    while i < n:
        y = y * s
        i += 1
    return np.sum(y)


def branch_not_taken(x, c):
    s = np.sqrt(x)
    y = x
    if c > 0:
        y = y + s
    return np.sum(y)


def elif_chain(x, c):
    s = np.sqrt(x)
    t = np.log(x)
    if c > 1:
        y = s
    elif c > 0:
        y = x * 3.0
    else:
        y = t
    return np.sum(y)


def helper_result_in_branch(x, c):
    h = root2(x)
    y = x * 1.0
    if c > 0:
        y = y + h
    return np.sum(y)


def helper_called_in_branch(x, c):
    y = x * 1.0
    if c > 0:
        y = root2(x)
    return np.sum(y)


def overwritten_in_a_later_iteration(x, n):
    y = x
    for i in range(n):
        if i == 0:
            y = np.sqrt(y)
        else:
            y = x * 3.0
    return np.sum(y)


def inner_loop_zero_trips(x, n, m):
    s = np.sqrt(x)
    y = x
    for i in range(n):
        for j in range(m):
            y = y + s
    return np.sum(y)


def entry_in_zero_trips(x, n):
    s = np.sqrt(x)
    y = x * 1.0
    for i in range(n):
        y = y + s[0]
    return np.sum(y)


def reductions_not_taken(x, M, n):
    s = np.sqrt(x)
    acc = np.sum(M)
    for i in range(n):
        acc = acc + np.mean(s) + np.sum(M @ s)
    return acc + np.sum(x)


def only_other_parameter(x, z, c):
    s = np.sqrt(x)
    y = z * 1.0
    if c > 0:
        y = y * s
    return np.sum(y)
""")

X0 = np.array([0.0, 4.0])
ONES = np.ones(2)
M2 = np.array([[1.0, 2.0], [3.0, 4.0]])


@pytest.mark.parametrize("name, args, expected, wrt", [
    ("while_zero_trips", (X0, 0), (ONES,), (0,)),
    ("branch_not_taken", (X0, -1.0), (ONES,), (0,)),
    ("elif_chain", (X0, 0.5), (3 * ONES,), (0,)),
    ("helper_result_in_branch", (X0, -1.0), (ONES,), (0,)),
    ("helper_called_in_branch", (X0, -1.0), (ONES,), (0,)),
    ("overwritten_in_a_later_iteration", (X0, 2), (3 * ONES,), (0,)),
    ("inner_loop_zero_trips", (X0, 2, 0), (ONES,), (0,)),
    ("inner_loop_zero_trips", (X0, 0, 2), (ONES,), (0,)),
    ("entry_in_zero_trips", (X0, 0), (ONES,), (0,)),
    ("reductions_not_taken", (X0, M2, 0), (ONES, np.ones((2, 2))), (0, 1)),
    # nothing at all flows back to x: its gradient is still zeros of its shape, float64
    ("only_other_parameter", (X0, 2 * ONES, -1.0), (0 * ONES, ONES), (0, 1)),
    ("only_other_parameter", (np.array([0, 4]), 2 * ONES, -1.0), (0 * ONES, ONES), (0, 1)),
    ("only_other_parameter", (0.0, 2 * ONES, -1.0), (0.0, ONES), (0, 1)),
])
def test_a_value_on_a_path_not_taken_adds_nothing_to_the_gradient(name, args, expected, wrt):
    with np.errstate(invalid="ignore", divide="ignore"):
        equals(getattr(UNTAKEN, name), args, expected, wrt)


@pytest.mark.parametrize("name, args", [
    ("while_zero_trips", (X0 + 1.0, 2)),
    ("branch_not_taken", (X0 + 1.0, 1.0)),
    ("elif_chain", (X0 + 1.0, 2.0)),
    ("elif_chain", (X0 + 1.0, -1.0)),
    ("helper_called_in_branch", (X0 + 1.0, 1.0)),
    ("overwritten_in_a_later_iteration", (X0 + 1.0, 1)),
    ("inner_loop_zero_trips", (X0 + 1.0, 2, 3)),
    ("entry_in_zero_trips", (X0 + 1.0, 2)),
    ("reductions_not_taken", (X0 + 1.0, M2, 2)),
    ("only_other_parameter", (X0 + 1.0, 2 * ONES, 1.0)),
])
def test_the_paths_taken_still_add_their_share(name, args):
    wrt = tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray))
    agrees(getattr(UNTAKEN, name), args, wrt)


def test_paths_not_taken_agree_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    source = inspect.getsource(UNTAKEN).replace("import numpy as np", "import jax.numpy as np")
    reference: dict = {}
    exec(compile(source, "untaken_jax", "exec"), reference)
    for name, args in [("while_zero_trips", (X0, 0)), ("branch_not_taken", (X0, -1.0)),
                       ("overwritten_in_a_later_iteration", (X0, 2)),
                       ("reductions_not_taken", (X0, M2, 0)),
                       ("only_other_parameter", (X0, 2 * ONES, -1.0))]:
        wrt = tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray))
        expected = jax.grad(reference[name], argnums=wrt)(
            *[jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args])
        with np.errstate(invalid="ignore", divide="ignore"):
            got = grad(getattr(UNTAKEN, name), wrt=wrt)(*args)
        for g, e in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, np.asarray(e), err_msg=name)


def test_an_adjoint_a_path_may_not_reach_starts_as_none_and_its_readers_are_guarded():
    g = grad(UNTAKEN.branch_not_taken)
    assert "    ds = None  # nothing has flowed back to it yet\n" in g.source
    assert "    if ds is not None:" in g.source
    # a loop whose body always reaches its carried value needs no guard
    L = load("""
import numpy as np

def f(x, n):
    y = x
    for i in range(n):
        y = y * x
    return np.sum(y)
""")
    assert " is not None" not in grad(L.f).source


def _random_program(rng) -> str:
    """A function of x (an array), c and n whose values may be nan at x (np.sqrt of a
    negative entry) and are read in branches that may not run and loops that may run zero
    times, or are overwritten by later iterations."""
    def expr(depth=0):
        if depth > 1 or rng.random() < 0.3:
            return str(rng.choice(["x", "y", "z", "w"]))
        if rng.random() < 0.6:
            wrap = rng.choice(["np.sqrt({})", "np.log({})", "np.sin({})", "({} * 2.0)",
                               "np.arcsin({})", "({} ** 0.5)"])
            return wrap.format(expr(depth + 1))
        return f"({expr(depth + 1)} {rng.choice(['+', '*', '-'])} {expr(depth + 1)})"

    def block(indent, depth, loops):
        lines = []
        for _ in range(rng.integers(1, 4)):
            pad, kind = "    " * indent, rng.random()
            if kind < 0.5 or depth > 1:
                lines.append(f"{pad}{rng.choice(['y', 'z', 'w'])} = {expr()}")
            elif kind < 0.7:
                lines.append(f"{pad}if c > {rng.choice([0.0, 1.0, -1.0])}:")
                lines += block(indent + 1, depth + 1, loops)
                if rng.random() < 0.5:
                    lines += [f"{pad}else:", *block(indent + 1, depth + 1, loops)]
            elif kind < 0.85:
                lines.append(f"{pad}for i{len(loops)} in range(n):")
                lines += block(indent + 1, depth + 1, [*loops, 0])
            else:
                k = f"k{len(loops)}"
                lines += [f"{pad}{k} = 0", f"{pad}while {k} < n:",
                          *block(indent + 1, depth + 1, [*loops, 0]), f"{pad}    {k} += 1"]
        return lines

    body = ["    y = x * 1.0", "    z = x * 0.5", "    w = x + 1.0", *block(1, 0, []),
            f"    return np.sum({rng.choice(['y', 'z', 'w', 'y * z'])})"]
    return "\n".join(["def f(x, c, n):", *body, ""])


def test_random_programs_with_paths_not_taken_agree_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    rng = np.random.default_rng(10)
    for _ in range(30):
        source = _random_program(rng)
        f = load("import numpy as np\n\n" + source, "f")
        reference: dict = {"np": jnp}
        exec(source, reference)
        for x in (np.array([0.0, 0.25]), np.array([-1.0, 4.0])):
            for c, n in ((-2.0, 0), (0.5, 1), (2.0, 2), (-2.0, 2)):
                with np.errstate(all="ignore"):
                    value = f(x, c, n)
                    expected = np.asarray(jax.grad(reference["f"])(jnp.asarray(x), c, n))
                    if not np.isfinite(value) or not np.all(np.isfinite(expected)):
                        continue  # (where the value is not finite, nor need its slope be)
                    got = grad(f)(x, c, n)
                np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-10,
                                           err_msg=f"{source}\nat x={x}, c={c}, n={n}")


@pytest.mark.parametrize("outer", ["for i in range(n):", "while k < n:"])
@pytest.mark.parametrize("inner_exit", ["break", "continue"])
def test_an_inner_loop_exit_inside_an_outer_loop_that_runs_zero_times_in_a_branch(
        outer, inner_exit):
    # The inner loop's break flag was read after the outer loop as if the outer loop had
    # carried it: UnboundLocalError from the generated code when the outer loop ran zero times.
    L = load(f"""
def f(x, n):
    a = x
    k = 0
    if x > 0:
        {outer}
            for j in range(2):
                a = a * x
                if a > 5.0:
                    {inner_exit}
            k += 1
    return a * x
""")
    assert grad(L.f)(0.7, 0) == pytest.approx(1.4)
    assert value_and_grad(L.f)(0.7, 0)[1] == pytest.approx(1.4)
    for n in (0, 1, 3):
        for x in (0.7, 1.9, -0.5):
            agrees(L.f, (x, n))


def test_breaks_of_three_nested_loops_inside_a_branch_whose_loops_may_not_run():
    L = load("""
def f(x, n):
    a = x
    if x > 0:
        for i in range(n):
            for j in range(n):
                k = 0
                while k < 2:
                    a = a * x
                    k += 1
                    if a > 5.0:
                        break
                if a > 4.0:
                    break
            if a > 3.0:
                break
    return a * x
""")
    for n in (0, 1, 2, 3):
        for x in (0.7, 1.9):
            agrees(L.f, (x, n))


@pytest.mark.parametrize("inner", [
    "for v in np.sin(x) * np.ones(2):\n                a = a * v",
    "a = a * (1.5 if a > 1 else x)",
    "a, b = np.ones(2) * a"])
def test_a_loop_that_runs_zero_times_in_a_branch_after_statements_with_temporaries(inner):
    # The array a loop runs over, a conditional expression's value, the value unpacked:
    # each lived in a temporary read after the outer loop as if it carried it
    # (UnboundLocalError: '_t2' when the loop ran zero times).
    L = load(f"""
import numpy as np

def f(x, n):
    a = x
    if x > 0:
        k = 0
        while k < n:
            {inner}
            k += 1
    return a * x
""")
    for n in (0, 1, 2):
        for x in (0.7, -0.5):
            agrees(L.f, (x, n))


# --- loops over values that are not differentiated: dicts, sets, iterators ----------

DATA_LOOPS = load("""
import numpy as np

def keys(x, d):
    t = 0.0
    for k in d:
        t = t + np.sum(x * k)
    return t

def by_key(x, d):
    t = 0.0
    for k in d:
        t = t + np.sum(x * d[k])
    return t

def enumerated(x, d):
    t = 0.0
    for i, k in enumerate(d):
        t = t + np.sum(np.sin(x * k)) * (i + 1)
    return t

def zipped(x, d, e):
    t = 0.0
    for a, b in zip(d, e):
        t = t + np.sum(x * a * b)
    return t

def items(x, d):
    t = 0.0
    for k, v in d.items():
        t = t + np.sum(x ** 2 * v) * k
    return t

def values(x, d):
    t = 0.0
    for v in d.values():
        t = t + np.sum(np.cos(x * v))
    return t

def pairs(x, params):
    t = 0.0
    for W, b in params:
        t = t + np.sum(np.tanh(x @ W + b))
    return t

def unpacked_rows(X, c):
    t = 0.0
    for a, b in X:
        t = t + a * b * c
    return t

def zipped_with_differentiated(X, d):
    t = 0.0
    for a, k in zip(X, d):
        t = t + np.sum(a * k)
    return t

def indexed_by_counter(X, d):
    t = 0.0
    for i, k in enumerate(d):
        t = t + np.sum(X[i] * k)
    return t

def sorted_keys(x, d):
    t = 0.0
    for i, k in enumerate(sorted(d)):
        t = t + np.sum(np.sin(x * k)) * i
    return t

TABLE = {0: 5.0, 1: 7.0}
NUMBERS = {2.0, 3.0}

def global_table(x):
    t = 0.0
    for k in TABLE:
        t = t + np.sum(x * k)
    for k in NUMBERS:
        t = t + np.sum(x ** 2 * k)
    return t

def closure_over(d):
    def f(x):
        t = 0.0
        for k in d:
            t = t + np.sum(x * k)
        return t
    return f

class Table:
    def __init__(self, d):
        self.d = d

    def loss(self, x):
        t = 0.0
        for k in self.d:
            t = t + np.sum(x * k)
        return t

    def bound_first(self, x):
        e = self.d
        t = 0.0
        for k in e:
            t = t + np.sum(x * k)
        return t

def through_branches(x, d, c):
    if c > 0:
        e = d
    else:
        e = d
    t = 0.0
    for k in e:
        t = t + np.sum(x * k)
    return t

def item_of(x, p):
    e = p["a"]
    t = 0.0
    for k in e:
        t = t + np.sum(x * k) * p["b"][k]
    return t

def zipped_with_an_item(X, p):
    Y = p["y"]
    t = 0.0
    for a, y, b in zip(X, Y, X[::-1], strict=False):
        t = t + np.sum(np.sin(a * y) * b)
    return t

def rows_of_a_product(w: float, X):
    Y = X * 2
    t = 0.0
    for r in Y:
        t = t + np.sum(w * r)
    return t
""")

X2 = np.array([0.5, -1.0])


@pytest.mark.parametrize("f, args", [
    (DATA_LOOPS.keys, (X2, {0: 5.0, 1: 7.0})),  # keys, not d[0], d[1]
    (DATA_LOOPS.keys, (X2, {2.0: "u", 5.0: "v"})), (DATA_LOOPS.keys, (X2, {2.0, 3.0})),
    (DATA_LOOPS.keys, (X2, "")), (DATA_LOOPS.keys, (X2, range(1, 4))),
    (DATA_LOOPS.by_key, (X2, {"a": np.array([1.0, 2.0]), "b": 3.0})),
    (DATA_LOOPS.enumerated, (X2, {3: 5.0, 4: 7.0})),
    (DATA_LOOPS.zipped, (X2, {3: 5.0, 4: 7.0}, {10: 1, 20: 2})),
    (DATA_LOOPS.zipped, (X2, {3: 5.0, 4: 7.0}, [2.0, 0.5, 9.0])),
    (DATA_LOOPS.items, (X2, {3: 5.0, 4: 7.0})), (DATA_LOOPS.values, (X2, {3: 5.0, 4: 7.0})),
    (DATA_LOOPS.pairs, (X2, [(np.eye(2), 1.0), (np.ones((2, 2)), np.array([0.5, 2.0]))])),
    (DATA_LOOPS.unpacked_rows, (np.array([[1.0, 2.0], [3.0, 4.0]]), 2.0)),
    (DATA_LOOPS.indexed_by_counter, (np.array([[1.0, 2.0], [3.0, 4.0]]), {2.0: 0, 3.0: 1})),
    (DATA_LOOPS.sorted_keys, (X2, {3.0: 5.0, 1.0: 7.0, 2.0: 0.0})),
    (DATA_LOOPS.global_table, (X2,)), (DATA_LOOPS.closure_over({0: 5.0, 1: 7.0}), (X2,)),
    (DATA_LOOPS.Table({0: 5.0, 1: 7.0}).loss, (X2,)),
    (DATA_LOOPS.Table({0: 5.0, 1: 7.0}).bound_first, (X2,)),
    (DATA_LOOPS.through_branches, (X2, {0: 5.0, 1: 7.0}, 1.0)),
    (DATA_LOOPS.item_of, (X2, {"a": {0: 5.0, 1: 7.0}, "b": [0.5, 2.0]})),
    (DATA_LOOPS.item_of, (X2, {"a": (1, 0), "b": [0.5, 2.0]})),
    (DATA_LOOPS.rows_of_a_product, (0.5, np.arange(6.0).reshape(3, 2))),
    (DATA_LOOPS.zipped_with_differentiated, (np.array([[1.0, 2.0], [3.0, 4.0]]), {2.0: 0})),
    (DATA_LOOPS.zipped_with_an_item, (np.array([[1.0, 2.0], [3.0, 4.0]]),
                                      {"y": [2.0, -1.0, 5.0]})),
], ids=lambda a: getattr(a, "__name__", ""))
def test_a_loop_over_a_value_without_gradient_runs_as_python_runs_it(f, args):
    wrt = (0, 1) if f is DATA_LOOPS.unpacked_rows else (0,)
    check_grad(f, args, wrt=wrt)
    value, _ = value_and_grad(f)(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)


def test_a_loop_over_an_iterator_or_a_generator_reads_it_once():
    expected = grad(DATA_LOOPS.keys)(X2, [2.0, 3.0])
    np.testing.assert_allclose(expected, [5.0, 5.0])
    np.testing.assert_array_equal(grad(DATA_LOOPS.keys)(X2, iter([2.0, 3.0])), expected)
    np.testing.assert_array_equal(grad(DATA_LOOPS.keys)(X2, (v for v in (2.0, 3.0))),
                                  expected)


def test_a_loop_over_a_dict_is_generated_as_written():
    source = grad(DATA_LOOPS.keys).source_for(X2, {0: 5.0})
    assert "    for k in d:\n" in source


def test_a_row_of_an_array_of_any_ndim_is_not_taken_for_a_number():
    # .source is the float64 specialisation, for arrays of any ndim: a row may be an array.
    from symdiff.compile import compile_source

    fn, _ = compile_source(grad(DATA_LOOPS.rows_of_a_product).source,
                           "grad_rows_of_a_product", {}, "np")
    X = np.arange(6.0).reshape(3, 2)
    assert fn(0.5, X) == pytest.approx(2 * X.sum())


# --- comprehensions, generator expressions, and lists built by append -----------------

LISTS = load("""
import numpy as np

def mapped(ws, x):
    return np.sum(np.stack([np.tanh(w * x) for w in ws]))

def generator_sum(xs):
    return sum(np.sin(x) * x for x in xs)

def squares(ws):
    return np.sum([w ** 2 for w in ws])

def stacked_range(x):
    return np.sum(np.stack([x * t for t in range(3)]) ** 2)

def range_unknown(x, n):
    return np.sum(np.stack([np.cos(x * t) for t in range(n)]))

def nested(M, v):
    P = np.array([[np.sin(a) * a for a in row] for row in M])
    return np.sum(P ** 2) + np.sum(np.array([[a * b for b in v] for a in v]))

def two_generators(M, v):
    return sum(m * a for row in M for m in row for a in v)

def positive(xs):
    return sum(x ** 2 for x in xs if x > 0)

def positive_scaled(xs, c):
    return np.sum(np.array([x * c for x in xs if x > 0 if x < 1.5]))

def zipped(A, b):
    return sum(np.dot(r, r) * c for r, c in zip(A, b))

def enumerated(A):
    return sum(i * np.sum(r ** 2) for i, r in enumerate(A))

def named(x, xs):
    y = [x * 2 for x in xs]
    return x * np.sum(np.array(y))

def over_layers(params, x):
    hs = [np.tanh(W @ x) for W in params]
    return np.sum(np.stack(hs)) + sum(np.sum(h) for h in hs)

def over_indices(params, x):
    return sum(np.sum(np.tanh(params[i] @ x)) for i in range(len(params)))

def rnn(W, U, xs):
    h = np.zeros(W.shape[0])
    hs = []
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
        hs.append(h)
    H = np.stack(hs)
    return np.sum(H ** 2) + np.sum(hs[-1]) + np.mean(np.array(hs))

def joined(x, n):
    hs = []
    for t in range(n):
        hs += [x * t]
    return np.mean(np.array(hs)) + np.sum(np.concatenate(hs) ** 2)

def plus_list(x, n):
    hs = []
    for t in range(n):
        hs = hs + [np.sin(x * t)]
    return np.sum(sum(hs))

def extended(x):
    l = []
    l.append(x)
    l.extend([x * 2, x ** 2])
    return np.sum(np.stack(l, axis=1) ** 2)

def reads_last(x, T):
    hs = []
    h = x
    for t in range(T):
        hs.append(np.sin(h))
        h = hs[-1] * 2
    return np.sum(hs[-1]) + np.sum(np.array(hs))

def appended_in_a_branch(xs):
    kept = []
    for x in xs:
        if x > 0:
            kept.append(x ** 3)
    return sum(kept)

def looped_over(x):
    hs = [x * k for k in range(3)]
    s = 0.0
    for h in hs:
        s = s + np.sum(h ** 2)
    return s

def flattened(ws, x):
    v = np.concatenate([np.ravel(w) for w in ws])
    return np.sum(v ** 2) * np.sum(x) + np.sum(np.concatenate([w * 2 for w in ws], axis=None) ** 3)

def ragged(A):
    parts = []
    for i in range(A.shape[0]):
        parts.append(A[i, :i + 1] ** 2)
    v = np.concatenate(parts[1:])
    return np.sum(np.sin(v)) + np.sum(parts[-1]) + np.sum(parts[0] ** 2)

def collect(x, n):
    out = []
    for t in range(n):
        out.append(np.sin(x * t))
    return out

def from_a_helper(x):
    return np.sum(np.stack(collect(x, 3)))

def stack_helper(hs):
    return np.sum(np.stack(hs) ** 2)

def to_a_helper(x):
    return stack_helper([x * k for k in range(3)])

def a_list_per_row(X):
    total = 0.0
    for row in X:
        parts = [row * k for k in range(2)]
        total = total + np.sum(np.stack(parts) ** 2)
    return total

def losses(x, n):
    seen = []
    for t in range(n):
        seen.append(np.sum(x ** 2) * t)
    return np.mean(np.array(seen)) + sum(seen) / len(seen)

def while_appending(x):
    hs = []
    h = x
    while len(hs) < 3:
        h = np.cos(h)
        hs.append(h)
    return np.sum(np.array(hs))

def copied(x):
    l = []
    l.append(x)
    k = list(l)
    l.append(x * 2)
    return np.sum(np.array(l)) * np.sum(np.array(k) ** 2)

def any_positive(x):
    if any(a > 0 for a in x):
        return np.sum(x ** 2)
    return np.sum(x)
""")

RNG_LISTS = np.random.default_rng(13)
A32 = RNG_LISTS.standard_normal((3, 2))
V3L = np.array([0.7, -0.4, 1.2])
W33 = RNG_LISTS.standard_normal((3, 3)) * 0.5
U32 = RNG_LISTS.standard_normal((3, 2))
XS42 = RNG_LISTS.standard_normal((4, 2))
LAYERS = [RNG_LISTS.standard_normal((2, 3)), RNG_LISTS.standard_normal((2, 3))]


@pytest.mark.parametrize(("f", "args", "wrt"), [
    (LISTS.mapped, (V3L, 0.5), (0, 1)),
    (LISTS.generator_sum, (V3L,), (0,)),
    (LISTS.squares, (A32,), (0,)),
    (LISTS.stacked_range, (V3L,), (0,)),
    (LISTS.range_unknown, (V3L, 3), (0,)),
    (LISTS.nested, (A32, V3L), (0, 1)),
    (LISTS.two_generators, (A32, V3L), (0, 1)),
    (LISTS.positive, (V3L,), (0,)),
    (LISTS.positive_scaled, (V3L, 1.5), (0, 1)),
    (LISTS.zipped, (A32, V3L), (0, 1)),
    (LISTS.enumerated, (A32,), (0,)),
    (LISTS.named, (2.0, V3L), (0, 1)),
    (LISTS.over_indices, (LAYERS, V3L), (1,)),
    (LISTS.over_layers, (LAYERS, V3L), (1,)),
    (LISTS.rnn, (W33, U32, XS42), (0, 1, 2)),
    (LISTS.joined, (V3L, 3), (0,)),
    (LISTS.plus_list, (V3L, 3), (0,)),
    (LISTS.extended, (V3L,), (0,)),
    (LISTS.reads_last, (V3L, 3), (0,)),
    (LISTS.appended_in_a_branch, (V3L,), (0,)),
    (LISTS.looped_over, (V3L,), (0,)),
    (LISTS.any_positive, (V3L,), (0,)),
    (LISTS.ragged, (W33,), (0,)),
    (LISTS.from_a_helper, (V3L,), (0,)),
    (LISTS.to_a_helper, (V3L,), (0,)),
    (LISTS.a_list_per_row, (A32,), (0,)),
    (LISTS.losses, (V3L, 3), (0,)),
    (LISTS.while_appending, (V3L,), (0,)),
    (LISTS.copied, (V3L,), (0,)),
], ids=lambda a: getattr(a, "__name__", ""))
def test_comprehensions_and_appended_lists_agree_with_central_differences(f, args, wrt):
    agrees(f, args, wrt)
    value, _ = value_and_grad(f, wrt=wrt)(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)


def test_a_comprehension_over_a_container_being_differentiated_is_unrolled():
    # (flattened: items of several shapes, whose adjoints are kept one by one)
    for f in (LISTS.over_layers, LISTS.over_indices, LISTS.flattened):
        got = grad(f)(LAYERS, V3L)
        for i in range(2):
            def part(W, i=i, f=f):
                return f([W if j == i else LAYERS[j] for j in range(2)], V3L)
            np.testing.assert_allclose(got[i], numeric_grad(part, [LAYERS[i]], 0),
                                       rtol=1e-6, atol=1e-8)
    assert "for " not in grad(LISTS.over_indices).source_for(LAYERS, V3L).split(
        "grad of")[0]


def test_a_comprehension_over_a_range_or_rows_is_kept_as_a_loop_with_its_condition():
    source = grad(LISTS.positive).source
    assert "for _k0 in range(len(xs)):" in source
    assert "if " in source and "_appended(" in source


def test_an_rnn_built_with_append_and_stack_agrees_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def reference(W, U, xs):
        h = jnp.zeros(W.shape[0])
        hs = []
        for t in range(xs.shape[0]):
            h = jnp.tanh(W @ h + U @ xs[t])
            hs.append(h)
        H = jnp.stack(hs)
        return jnp.sum(H ** 2) + jnp.sum(hs[-1]) + jnp.mean(jnp.array(hs))

    expected = jax.grad(reference, argnums=(0, 1, 2))(W33, U32, XS42)
    got = grad(LISTS.rnn, wrt=(0, 1, 2))(W33, U32, XS42)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, np.asarray(e), rtol=1e-10, atol=1e-12)


def test_zero_iterations_give_an_empty_list():
    # sum of nothing is 0: the gradient of the rest alone
    np.testing.assert_allclose(grad(LISTS.plus_list)(V3L, 0), np.zeros(3))
    np.testing.assert_allclose(grad(LISTS.positive)(-np.abs(V3L)), np.zeros(3))
    assert grad(LISTS.appended_in_a_branch)(-np.abs(V3L)).tolist() == [0.0, 0.0, 0.0]
    # np.stack of nothing fails as NumPy fails; so does hs[-1] of an empty list
    with pytest.raises(ValueError, match="need at least one array"):
        grad(LISTS.range_unknown)(V3L, 0)
    with pytest.raises(IndexError):
        grad(LISTS.reads_last)(V3L, 0)


def test_lists_of_float32_and_int_inputs():
    g = grad(LISTS.rnn, wrt=(0,))(W33.astype(np.float32), U32.astype(np.float32),
                                   XS42.astype(np.float32))[0]
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, grad(LISTS.rnn)(W33, U32, XS42), rtol=1e-4, atol=1e-5)
    ints = np.array([1, -2, 3])
    np.testing.assert_allclose(grad(LISTS.generator_sum)(ints),
                               numeric_grad(LISTS.generator_sum, [ints.astype(float)], 0))
    np.testing.assert_allclose(grad(LISTS.joined)(ints, 3),
                               numeric_grad(LISTS.joined, [ints.astype(float), 3], 0))


def test_what_lists_refuse_says_so_where_it_is():
    assert error("""
import numpy as np

def f(x):
    return np.sum(np.array({a for a in x}))
""") == """F:5:28: set comprehensions are not supported
        return np.sum(np.array({a for a in x}))
                               ^
  supported instead: a list comprehension, [f(x) for x in xs]"""
    assert error("""
import numpy as np

def f(x):
    return sum({i: a for i, a in enumerate(x)}.values())
""") == """F:5:16: dict comprehensions are not supported
        return sum({i: a for i, a in enumerate(x)}.values())
                   ^
  supported instead: a list comprehension, [f(x) for x in xs]"""
    assert error("""
import numpy as np

def f(x):
    return max(a ** 2 for a in x)
""") == """F:5:12: max of a list is not supported
        return max(a ** 2 for a in x)
               ^
  supported instead: np.max(np.array(l)) of numbers, np.maximum of two arrays"""
    assert error("""
import numpy as np

def f(x):
    return np.sum([a for a in x] * 2)
""") == """F:5:19: arithmetic on the list [a for a in x] repeats or joins it, which symdiff \
does not differentiate
        return np.sum([a for a in x] * 2)
                      ^
  supported instead: [a for a in x] + [v] or .append(v) to add an item; \
np.array([a for a in x]) for arithmetic on its items"""
    assert error("""
import numpy as np

def f(x):
    l = []
    k = l
    l.append(x)
    return np.sum(np.array(k))
""") == """F:7:5: l is a list shared with k, which this changes too, and symdiff does not \
follow that
        l.append(x)
        ^
  supported instead: k = list(l) for a copy, or a list of its own"""
    assert error("""
import numpy as np

def f(x):
    l = []
    l *= 2
    return x
""") == """F:6:5: this changes the list l in place, which symdiff follows only for items \
written out
        l *= 2
        ^
  supported instead: l += [v], l.append(v)"""


def test_a_comprehension_over_a_number_is_refused_where_it_is():
    f = load("""
import numpy as np

def listcomp(a):
    return np.sum([i * 3 for i in a])
""", "listcomp")
    with pytest.raises(SymdiffError) as e:
        grad(f)(0.5)
    assert str(e.value).replace(inspect.getsourcefile(f), "F") == """F:5:35: 'a' is a number \
(float) here, which a for loop cannot run over
        return np.sum([i * 3 for i in a])
                                      ^
  supported instead: for i in range(n), for row in X, for x in xs"""
    np.testing.assert_allclose(grad(f)(np.array([0.5, 2.0])), [3.0, 3.0])


def test_a_list_written_out_then_appended_to_is_built_by_its_appends():
    """hs = [x] before a loop that appends: a list the function builds, as hs = [] is;
    a list written out and never appended to is still read as an array."""
    m = load("""
        import numpy as np


        def f(x, W):
            hs = [x]
            h = x
            for t in range(3):
                h = np.tanh(W @ h)
                hs.append(h)
            return np.sum(np.stack(hs) ** 2) + np.sum(hs[0] * hs[-1])


        def g(x):
            v = [x[0], 2.0 * x[1]]
            return np.sum(x[:2] * v)
        """)
    rng = np.random.default_rng(3)
    check_grad(m.f, [rng.standard_normal(3), rng.standard_normal((3, 3))], wrt=(0, 1))
    check_grad(m.g, [rng.standard_normal(3)])


@pytest.mark.parametrize("body", [
    "v = [x[0], x[1]] + [x[2], x[3]]\n    return sum(v) / len(v)",
    "return np.mean(np.array([x[0], x[1]] * 2))",
    "v = [x[0], x[1]]\n    return np.sum(v + v)",
    "return np.sum([x[0], x[1]] * np.int64(2))",
    "s = 0.0\n    for v in [x[0], x[1]] * 2:\n        s = s + v\n    return s",
    "v = [x[0] * 0.0]\n    if v:\n        return x[0] * 5.0\n    return x[1] * 2.0",
    "v = [x[0], x[1]]\n    if v == [x[0], x[2]]:\n        return x[0]\n    return x[1]",
])
def test_a_list_of_values_joined_repeated_or_tested_is_refused(body):
    """Python joins, repeats and tests a list ([a] + [b], 2 * l, if l:) where the array
    NumPy reads it as would add, multiply and test its items: refused, never a gradient of
    the other reading (review findings: each was a silent wrong answer)."""
    f = load(f"import numpy as np\n\n\ndef f(x):\n    {body}\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.array([0.7, -1.3, 0.4, 1.1]))
    assert "list" in str(e.value).splitlines()[0]


def test_a_list_of_values_with_an_array_is_arithmetic_on_its_items():
    f = load("import numpy as np\n\n\ndef f(x):\n    v = [x[0], 2.0 * x[1]]\n"
             "    return np.sum(2 * x[:2] * v) + np.sum(x[:2] * [1.0, x[3]])\n", "f")
    check_grad(f, [np.array([0.7, -1.3, 0.4, 1.1])])
