"""Adversarial tests, second round: combinations of arrays and control flow.

The first round (test_adversarial.py) probed each construct on its own; here the constructs
are combined: array operations inside loops and branches, accumulators that change shape,
helpers called per row, while loops with array state and data-dependent exits, early
returns around loops, stop_gradient on loop-carried values, value_and_grad through all of
them, parameters used only as an index or in a condition, keyword-only parameters, array
defaults, float32, 0-d and empty arrays, huge and tiny magnitudes, and random programs
mixing all of these (hypothesis).

References are central differences (``check_grad``); where ``stop_gradient`` is involved,
central differences of a copy of the function whose stopped values are frozen at the
point (as ``symdiff --check`` does), or a reference computed by hand.

Tests marked ``xfail(strict=True)`` are bugs found this way; each reason says what is
wrong and where. When a bug is fixed its test starts passing and strict xfail reports it:
remove the marker then.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from gradcheck import Frozen, agrees, check_grad, equals, fresh_module, load, numeric_grad
from gradcheck import contract_grads as run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from symdiff import SymdiffError, grad, value_and_grad

V3 = np.array([0.5, -1.0, 2.0])
V4 = np.array([0.5, 1.0, -0.3, 0.8])
RNG = np.random.default_rng(20240607)
X43 = RNG.standard_normal((4, 3))
X34 = RNG.standard_normal((3, 4))
A33 = RNG.standard_normal((3, 3)) * 0.5
B233 = RNG.standard_normal((2, 3, 3))
V5 = RNG.standard_normal(5)


def frozen_reference(source, args, wrt, name="f", h=1e-6):
    """Central differences of ``name`` in ``source`` (which imports stop_gradient as sg)
    with every stop_gradient value frozen at ``args``."""
    module = load(source.replace("from symdiff import stop_gradient as sg", ""))
    frozen = Frozen()
    module.sg = frozen
    f = getattr(module, name)
    f(*args)
    frozen.replay = True

    def replayed(*a):
        frozen.k = 0
        return f(*a)

    return [numeric_grad(replayed, list(args), i, h=h) for i in wrt]


# --- arrays inside loops and branches ---------------------------------------------------

LOOPS = load("""
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
    ("helper_per_row", (X43, V3), (0, 1)),
    ("scalar_then_array", (V3,), (0,)),
    ("product_from_scalar", (V3,), (0,)),
    ("while_array_state", (V3 * 0.3,), (0,)),
    ("break_flag_then_return", (np.array([0.5, 1.5, 2.0]),), (0,)),
    ("break_flag_then_return", (np.array([0.5, 0.5, 0.2]),), (0,)),
    ("concatenate_growing", (np.array([0.5, 1.5, 2.0, 0.7]),), (0,)),
    ("where_in_loop", (np.array([0.3, 0.9, -0.4]),), (0,)),
    ("matmul_in_loop", (A33, V3), (0, 1)),
    ("neighbours", (V5,), (0,)),
    ("reduction_per_branch", (X43,), (0,)),
    ("helper_with_early_return_in_loop", (np.array([0.5, 1.0, 1.2]),), (0,)),
    ("helper_with_early_return_in_loop", (np.array([0.5, 0.2, -1.2]),), (0,)),
    ("nested_helpers_in_loop", (V3,), (0,)),
    ("helper_with_loop_in_loop", (np.abs(V3),), (0,)),
    ("helper_with_early_return_and_loop_per_row", (X43,), (0,)),
    ("newton_sqrt", (np.array([2.0, 3.0, 0.5]),), (0,)),
    ("running_sums", (V4,), (0,)),
    ("zip_with_helper", (X43, X43 + 1), (0, 1)),
    ("bound_in_an_earlier_iteration", (V4,), (0,)),
    ("alternating_while", (V4,), (0,)),
    ("swap_in_branch_in_loop", (V4,), (0,)),
    ("previous_value", (V4,), (0,)),
    ("running_max", (V4,), (0,)),
    ("value_from_the_breaking_iteration", (V4,), (0,)),
    ("continue_over_rows", (X43,), (0,)),
    ("break_inner_over_elements", (X43,), (0,)),
    ("chained_indexing", (X34,), (0,)),
    ("columns", (X34,), (0,)),
    ("windows", (V5,), (0,)),
    ("mask_of_carried_value", (V5,), (0,)),
    ("einsum_in_loop", (A33, V3), (0, 1)),
    ("batched_matmul_in_loop", (B233, V3), (0, 1)),
    ("rows_of_outer", (V5,), (0,)),
    ("vstack_growing", (V5,), (0,)),
    ("index_from_argsort", (V5,), (0,)),
    ("trace_of_powers", (A33,), (0,)),
    ("helper_reads_enclosing_loop_variable", (V3,), (0,)),
    ("helper_reads_loop_index", (V3,), (0,)),
])
def test_arrays_in_loops_and_branches(name, args, wrt):
    agrees(getattr(LOOPS, name), args, wrt)


EXITS = load("""
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
    agrees(EXITS.early_returns_around_loops, (x, c), (0, 1))


@pytest.mark.parametrize("c", [1.0, -1.0])
def test_helper_with_exits_called_per_row(c):
    agrees(EXITS.helper_with_exits_per_row, (X_EXITS, c))


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
SG = load(SG_SOURCE)


def _carried_reference(x):
    s, d = x.copy(), np.ones_like(x)
    for _ in range(3):
        s, d = s * x + s * 0.5, s + 0.5 * d
    return d


@pytest.mark.parametrize("name, args, expected", [
    ("carried", (V3,), (_carried_reference(V3),)),
    ("through_helper", (V3,), (V3 * V3,)),
])
def test_stop_gradient_by_hand(name, args, expected):
    equals(getattr(SG, name), args, expected)


@pytest.mark.parametrize("name, args, wrt", [
    ("while_with_stopped_state", (np.array([0.5, 0.8, 0.3]),), (0,)),
    ("stopped_rows", (X43, V3), (0, 1)),
])
def test_stop_gradient_against_frozen_differences(name, args, wrt):
    grads = run(getattr(SG, name), args, wrt)
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
    dx, dy, dc = run(ROLES.unused_in_the_branch_taken, (V3, V3 * 2, c), (0, 1, 2))
    np.testing.assert_allclose(dx, 2 * V3 if c > 0 else 0 * V3)
    np.testing.assert_allclose(dy, 0 * V3 if c > 0 else 4 * V3)
    assert dc == 0.0


@pytest.mark.parametrize("name, args, expected", [
    ("condition_only", (V3, 1.0), (np.ones(3), 0.0)),
    ("condition_only", (V3, -1.0), (2 * np.ones(3), 0.0)),
    ("index_through_int", (V3, 1.0), (np.array([0.0, -2.0, 0.0]), 0.0)),
    ("slice_bound", (V3, 1), (np.array([0.0, -2.0, 4.0]), 0.0)),
    ("loop_count", (V3, 2), (3 * V3 ** 2, 0.0)),
    ("loop_count_through_int", (V3, 2.0), (3 * V3 ** 2, 0.0)),
    ("while_threshold", (np.abs(V3), 10.0), (4 * np.ones(3), 0.0)),
    ("mask_threshold", (V3, 0.0), (np.array([1.0, 0.0, 4.0]), 0.0)),
    ("where_threshold", (V3, 0.0), (np.array([1.0, 0.0, 4.0]), 0.0)),
])
def test_parameter_used_only_as_index_or_in_a_condition(name, args, expected):
    equals(getattr(ROLES, name), args, expected, wrt=(0, 1))


def test_index_derived_from_a_differentiated_parameter_is_refused():
    with pytest.raises(SymdiffError, match=r"m\d+\.py:\d+:\d+: index must not depend"):
        grad(ROLES.index_derived_from_parameter, wrt=(0, 1))(V3, 0)


def test_keyword_only_parameters_and_array_defaults():
    x = np.abs(V3)
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
        if isinstance(a, np.ndarray):
            assert isinstance(g, np.ndarray) and g.dtype == np.float64
            assert g.shape == a.shape
        else:
            assert type(g) is float
        np.testing.assert_allclose(g, numeric_grad(f, args, i), rtol=1e-3 if low else 1e-6,
                                   atol=1e-3 if low else 1e-7)


EMPTY = load("""
import numpy as np

def sum_of_squares(x):
    return np.sum(x ** 2)

def mean(x):
    return np.mean(x)

def norm(x):
    return np.linalg.norm(x)

def dot(x):
    return np.dot(x, x)

def matmul(x):
    return x @ x

def outer(x):
    return np.sum(np.outer(x, x))

def einsum(x):
    return np.einsum('i,i->', x, x)

def concatenate(x):
    return np.sum(np.concatenate([x, x]) ** 2)

def stack(x):
    return np.sum(np.stack([x, x]) ** 2)

def where(x):
    return np.sum(np.where(x > 0, x, 0.0))

def mask(x):
    return np.sum(x[x > 0])

def tile(x):
    return np.sum(np.tile(x, 2))

def loop(x):
    s = 0.0
    for v in x:
        s = s + v
    return s

def flip(x):
    return np.sum(np.flip(x) * x)

def rows(X):
    s = 0.0
    for r in X:
        s = s + np.sum(r ** 2)
    return s

def logsumexp_rows(X):
    return np.sum(np.log(np.sum(np.exp(X), axis=1)))

def mean_rows(X):
    return np.sum(np.mean(X, axis=1))

def trace(X):
    return np.trace(X)

def prod(x):
    return np.prod(x)

def prod_rows(X):
    return np.sum(np.prod(X, axis=1))
""")


@pytest.mark.parametrize("name, arg", [
    *[(n, np.zeros(0)) for n in ("sum_of_squares", "mean", "norm", "dot", "matmul", "outer",
                                 "einsum", "concatenate", "stack", "where", "mask", "tile",
                                 "loop", "flip")],
    *[(n, a) for n in ("rows", "logsumexp_rows", "mean_rows", "trace")
      for a in (np.zeros((0, 3)), np.zeros((3, 0)))],
])
def test_empty_arrays(name, arg):
    f = getattr(EMPTY, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, g = value_and_grad(f)(arg)
        np.testing.assert_array_equal(value, f(arg))
    assert isinstance(g, np.ndarray) and g.shape == arg.shape and g.dtype == np.float64


@pytest.mark.parametrize("name, arg", [("prod", np.zeros(0)), ("prod_rows", np.zeros((3, 0))),
                                       ("prod_rows", np.zeros((0, 3)))])
def test_prod_of_empty_arrays(name, arg):
    g = grad(getattr(EMPTY, name))(arg)
    assert isinstance(g, np.ndarray) and g.shape == arg.shape and g.dtype == np.float64


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


# --- random programs mixing arrays and control flow (hypothesis) ---------------------------

PROGRAM_HEAD = """
import numpy as np
from symdiff import stop_gradient as sg

M = np.array([[0.5, -0.3, 0.2], [0.1, 0.4, -0.6], [-0.2, 0.3, 0.7]])

def h_early(u, t):
    if np.sum(u) > t:
        return np.sin(u) * t
    v = u * u
    return v + t

def h_loop(u, n):
    acc = 0.0
    for k in range(n):
        acc = acc + np.cos(u * k)
    return acc * u

def h_while(u):
    w = u
    k = 0
    while True:
        w = w * 1.3 + 0.1
        k = k + 1
        if k >= 3 or np.sum(w * w) > 10.0:
            break
    return w

def h_rows(A, u):
    s = 0.0
    for r in A:
        s = s + np.tanh(np.sum(r * u))
    return s

def h_flag(u):
    found = 0.0
    acc = u * 0.0
    for j in range(3):
        if np.sum(u) * (j + 1) > 0.8:
            found = 1.0
            acc = u * (j + 1)
            break
        acc = acc + np.sin(u)
    if found > 0.5:
        return acc * 2.0
    return acc
"""

UNARY = ("np.sin({})", "np.cos({})", "np.tanh({})", "np.exp(-({})**2)", "({0})*({0})",
         "np.log(1.0 + ({})**2)", "np.arctan({})", "-({})", "sg({})", "h_while({})",
         "h_flag({})", "h_loop({}, 2)")
BINARY = ("({} + {})", "({} - {})", "({} * {})", "({0} / (1.0 + ({1})**2))",
          "h_early({}, np.sum({}))")


class _Program:
    """Source of a random function f(x, y, s): x, y arrays of shape (3,), s a number.

    Every loop runs at least once (range(1..3), rows of M, do-while loops that break), so
    no name is read unbound. Kinds: "vec" (shape (3,)), "num" (a number), "any" (either,
    after branches that disagree).
    """

    def __init__(self, draw):
        self.draw = draw
        self.count = 0

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def const(self):
        return repr(self.draw(st.integers(-15, 15)) / 10)

    def expr(self, env, depth):
        vecs = [n for n, k in env.items() if k == "vec"]
        kind = self.pick(["leaf", "unary", "binary", "binary", "array"] if depth else ["leaf"])
        if kind == "leaf":
            name = self.pick([*env, "const"])
            return (self.const(), "num") if name == "const" else (name, env[name])
        if kind == "unary":
            code, k = self.expr(env, depth - 1)
            return self.pick(UNARY).format(code), k
        if kind == "binary" or not vecs:
            (a, ka), (b, kb) = self.expr(env, depth - 1), self.expr(env, depth - 1)
            joined = ka if ka == kb else "vec" if "vec" in (ka, kb) else "any"
            return self.pick(BINARY).format(a, b), joined
        v = self.pick(vecs)
        a, ka = self.expr(env, depth - 1)
        index = self.pick([n for n in env if n.startswith("i")] + ["0", "-1", "2"])
        return self.pick([
            (f"np.sum({a})", "num"), (f"{v}[{index} % 3]", "num"), (f"(M @ {v})", "vec"),
            (f"np.concatenate([{v}[1:], {v}[:1] * np.sum({a})])", "vec"),
            (f"np.where({v} > {self.const()}, {v} * 2.0, {a} + {v})", "vec"),
            (f"np.mean({v} ** 2)", "num"), (f"np.sum({v} * {v}[::-1])", "num"),
            (f"h_rows(M, {v})", "num"), (f"(M @ {v}) @ {v}", "num"),
            (f"np.stack([{v}, {v} * {a}]).sum(0)", "vec"),
        ])

    def cond(self, env):
        code, kind = self.expr(env, 1)
        return f"np.sum({code}) > {self.const()}"

    def block(self, env, depth, pad):
        lines = []
        for _ in range(self.draw(st.integers(1, 3))):
            what = self.pick(["assign", "assign", "assign", "if", "for", "rows", "while",
                              "swap"] if depth else ["assign"])
            names = [n for n in env if not n.startswith(("i", "r"))]
            if what == "assign":
                self.count += 1
                target = self.pick([*names, f"v{self.count}"])
                code, kind = self.expr(env, 2)
                lines.append(f"{pad}{target} = {code}")
                env[target] = kind if env.get(target, kind) == kind else "any"
            elif what == "swap" and len(names) >= 2:
                a, b = self.draw(st.permutations(names))[:2]
                code, kind = self.expr(env, 1)
                lines.append(f"{pad}{a}, {b} = {b}, {code}")
                env[a], env[b] = env[b], kind
            elif what == "if":
                then, orelse = dict(env), dict(env)
                lines.append(f"{pad}if {self.cond(env)}:")
                lines += self.block(then, depth - 1, pad + "    ")
                lines.append(f"{pad}else:")
                lines += self.block(orelse, depth - 1, pad + "    ")
                _merge(env, then, orelse)
            elif what in ("for", "rows", "while"):
                index = f"i{len(pad)}"
                inner = dict(env)
                inner[index] = "num"
                if what == "rows":
                    inner["r" + index] = "vec"
                    head = self.pick([f"for r{index} in M:",
                                      f"for {index}, r{index} in enumerate(x * M):"])
                    if head.startswith("for r"):
                        del inner[index]
                elif what == "for":
                    head = f"for {index} in range({self.draw(st.integers(1, 3))}):"
                else:
                    lines.append(f"{pad}{index} = 0")
                    head = "while True:"
                lines.append(pad + head)
                lines += self.block(inner, depth - 1, pad + "    ")
                if what == "while":
                    lines.append(f"{pad}    {index} = {index} + 1")
                    lines.append(f"{pad}    if {index} >= {self.draw(st.integers(1, 3))} "
                                 f"or {self.cond(inner)}:")
                    lines.append(f"{pad}        break")
                elif self.draw(st.booleans()):
                    lines.append(f"{pad}    if {self.cond(inner)}:")
                    lines.append(f"{pad}        {self.pick(['break', 'continue'])}")
                _merge(env, inner, env)
        return lines


def _merge(env, a, b):
    for name in set(a) & set(b):
        if not name.startswith(("i", "r")):
            env[name] = a[name] if a[name] == b[name] else "any"


@st.composite
def mixed_programs(draw):
    program = _Program(draw)
    env = {"x": "vec", "y": "vec", "s": "num"}
    lines = program.block(env, 2, "    ")
    if draw(st.booleans()):
        lines.append(f"    if {program.cond(env)}:")
        lines.append(f"        return np.sum({program.expr(env, 2)[0]})")
    names = [n for n in env if not n.startswith(("i", "r"))]
    lines.append("    return " + " + ".join(f"np.sum({n})" for n in names[-3:]) +
                 f" + np.sum({program.expr(env, 2)[0]})")
    return "def f(x, y, s):\n" + "\n".join(lines) + "\n"


def _reliable(source, args):
    """Frozen-stop_gradient central differences, or None where two step sizes disagree
    (a kink or a branch flips within the step) or anything fails."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fine = frozen_reference(source, args, (0, 1, 2), h=1e-6)
            coarse = frozen_reference(source, args, (0, 1, 2), h=1e-5)
        except (ArithmeticError, ValueError, IndexError, TypeError):
            return None
    for a, b in zip(fine, coarse, strict=True):
        if not np.all(np.isfinite(a)) or not np.allclose(a, b, rtol=1e-4, atol=1e-6):
            return None
    return fine


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mixed_programs(), st.integers(0, 2 ** 16))
def test_random_programs_with_arrays_and_control_flow(body, seed):
    rng = np.random.default_rng(seed)
    args = (rng.uniform(-1.2, 1.2, 3), rng.uniform(-1.2, 1.2, 3), float(rng.uniform(-1.2, 1.2)))
    source = PROGRAM_HEAD + body
    f = load(source, "f")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = f(*args)
        except (ArithmeticError, ValueError, IndexError, TypeError, NameError):
            assume(False)  # the generator's kinds were wrong: not a symdiff question
        assume(np.ndim(value) == 0 and np.isfinite(value) and abs(value) < 1e6)
        expected = _reliable(source, args)
        assume(expected is not None)
        grads = run(f, args, (0, 1, 2))
        assert value_and_grad(f)(*args)[0] == pytest.approx(value, rel=1e-12, abs=1e-300)
    for i, (g, e) in enumerate(zip(grads, expected, strict=True)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5,
                                   err_msg=f"gradient {i} of\n{body}")


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
    (LOOPS.scalar_then_array, (V3,)), (LOOPS.while_array_state, (V3 * 0.3,)),
    (LOOPS.concatenate_growing, (V4,)), (LOOPS.newton_sqrt, (np.array([2.0, 3.0]),)),
    (LOOPS.swap_in_branch_in_loop, (V4,)), (LOOPS.vstack_growing, (V5,)),
    (EXITS.early_returns_around_loops, (np.array([0.2, 0.3, 0.1]), 1.0)),
    (SG.carried, (V3,)), (KINDS.while_with_scalar_state, (V3, 0.4)),
    (ROLES.loop_count, (V3, 2)),
], ids=lambda a: getattr(a, "__name__", ""))
def test_value_and_grad_value(f, args):
    value, g = value_and_grad(f)(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)
    np.testing.assert_array_equal(g, grad(f)(*args))


@pytest.mark.parametrize("f, args", [
    (VALUES.accumulate, (1.5,)), (VALUES.accumulate_elements, (V3,)),
    (VALUES.accumulate_in_while, (V3,)), (LOOPS.helper_per_row, (X43, V3)),
    (LOOPS.neighbours, (V5,)), (LOOPS.continue_over_rows, (X43,)),
    (EXITS.helper_with_exits_per_row, (X_EXITS, 1.0)),
], ids=lambda a: getattr(a, "__name__", ""))
def test_value_and_grad_value_of_a_loop_carried_result(f, args):
    value, g = value_and_grad(f)(*args)
    assert value == pytest.approx(f(*args), rel=1e-12)


# --- bugs: loops that overwrite a carried value and may run zero times --------------------

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
    ("reset_in_inner_loop", (V3, 1.5), 1.0 - 3.0),
    ("reset_in_inner_while", (V3, 1.5), 1.0),
])
def test_loops_that_reset_a_value_and_run_zero_times(name, args, expected):
    f = getattr(ZERO_TRIP, name)
    wrt = len(args) - 1 if name.startswith("reset_in_inner") else 0
    g = grad(f, wrt=wrt)(*args)
    assert g == pytest.approx(expected)
    assert g == pytest.approx(numeric_grad(f, list(args), wrt))


# --- bugs: the retry on NumPy scalars after ZeroDivisionError ------------------------------

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


# --- bugs: in-place augmented assignment on shared arrays -----------------------------------

SHARED = load("""
import numpy as np

def alias_updated_in_for(x):
    s = x * 1.0
    t = s
    for i in range(2):
        s += x
    return np.sum(t * s)

def alias_updated_in_while(x):
    s = x * 1.0
    t = s
    k = 0
    while k < 2:
        s *= 1.5
        k = k + 1
    return np.sum(t * s)

def parameter_updated_in_loop(x):
    s = x
    for i in range(2):
        s += 1.0
    return np.sum(s * x)

def bump(u):
    u += 1.0
    return np.sum(u)

def helper_updates_its_argument(x):
    y = x * 2.0
    a = bump(y)
    return a * np.sum(y)

def alias_updated_in_branch(x):
    s = x * 1.0
    t = s
    if np.sum(x) > 0:
        s += x
    return np.sum(t * s)
""")


def test_augmented_assignment_on_alias_in_branch_is_refused():
    with pytest.raises(SymdiffError, match="shared with t"):
        grad(SHARED.alias_updated_in_branch)(V3.copy())


@pytest.mark.parametrize("name", ["alias_updated_in_for", "alias_updated_in_while",
                                  "parameter_updated_in_loop", "helper_updates_its_argument"])
def test_augmented_assignment_on_shared_array_in_loop_or_helper(name):
    f = getattr(SHARED, name)
    try:
        g = grad(f)(V3.copy())
    except SymdiffError:
        return
    np.testing.assert_allclose(g, numeric_grad(lambda x: f(x.copy()), [V3], 0), rtol=1e-6)


# --- bugs: defaults of helpers evaluated when called, not when defined ----------------------

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
    x = V3
    np.testing.assert_allclose(grad(DEFAULTS.nested_default_reads_enclosing)(x), 4 * x)


def test_module_helper_default_is_bound_at_definition():
    g = grad(DEFAULTS.module_default)
    np.testing.assert_allclose(g(V3), 4 * V3)
    DEFAULTS.K = 5.0
    try:
        np.testing.assert_allclose(numeric_grad(DEFAULTS.module_default, [V3], 0), 4 * V3,
                                   rtol=1e-6)
        np.testing.assert_allclose(g(V3), 4 * V3)
    finally:
        DEFAULTS.K = 2.0


# --- bugs: values read through another module's attributes ---------------------------------

def test_module_attribute_array_is_read_when_the_gradient_runs():
    w = fresh_module("import numpy as np\nW = np.array([1.0, 2.0, 3.0])\n", "adversarial2_w")
    m = load("import numpy as np\nimport adversarial2_w\n\n"
             "def f(x):\n    return np.sum(adversarial2_w.W * x)\n")
    np.testing.assert_allclose(grad(m.f)(V3), [1.0, 2.0, 3.0])
    w.W = np.array([4.0, 5.0, 6.0])
    np.testing.assert_allclose(grad(m.f)(V3), [4.0, 5.0, 6.0])


def test_module_attribute_number_rebound():
    cfg = fresh_module("SCALE = 2.0\n", "adversarial2_cfg")
    m = load("import numpy as np\nimport adversarial2_cfg\n\n"
             "def f(x):\n    return adversarial2_cfg.SCALE * np.sum(x ** 2)\n")
    g = grad(m.f)
    np.testing.assert_allclose(g(V3), 4 * V3)
    cfg.SCALE = 5.0
    np.testing.assert_allclose(g(V3), 10 * V3)


def test_module_attribute_number_changed_between_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path))
    source = ("import numpy as np\nimport adversarial2_cfgdisk\n\n"
              "def f(x):\n    return adversarial2_cfgdisk.SCALE * x ** 2\n")
    fresh_module("SCALE = 2.0\n", "adversarial2_cfgdisk")
    assert grad(fresh_module(source, "adversarial2_fdisk").f)(1.0) == 4.0
    fresh_module("SCALE = 5.0\n", "adversarial2_cfgdisk")
    f = fresh_module(source, "adversarial2_fdisk").f
    assert f(1.0) == 5.0
    assert grad(f)(1.0) == 10.0


def test_module_attribute_function_rebound():
    cfg = fresh_module("import numpy as np\nact = np.tanh\n", "adversarial2_act")
    m = load("import numpy as np\nimport adversarial2_act\n\n"
             "def f(x):\n    return np.sum(adversarial2_act.act(x))\n")
    g = grad(m.f)
    x = np.array([0.3, -0.7])
    np.testing.assert_allclose(g(x), 1 - np.tanh(x) ** 2)
    cfg.act = np.sin
    np.testing.assert_allclose(g(x), np.cos(x))


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
    ("bound_in_one_branch", (V3, -1.0), (V3, 1.0)),
    ("size_of_name_bound_in_one_branch", (V3, -1.0), (V3, 1.0)),
    ("bound_in_loop_that_runs_zero_times", (V3, 0), (V3, 2)),
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


# --- bugs: a gradient that is another module's array ---------------------------------------

@pytest.mark.parametrize("name", ["through_attribute", "through_helper"])
def test_gradient_is_never_a_module_array(name):
    cfg = fresh_module("import numpy as np\nW = np.array([1.0, 2.0, 3.0])\n",
                       "adversarial2_weights")
    m = load("""
import numpy as np
import adversarial2_weights
from symdiff import stop_gradient

G = np.array([1.0, 2.0, 3.0])

def weights():
    return G

def through_attribute(x):
    return np.sum(stop_gradient(adversarial2_weights.W) * x)

def through_helper(x):
    return np.sum(stop_gradient(weights()) * x)
""")
    g = grad(getattr(m, name))(np.full(3, 0.5))
    np.testing.assert_array_equal(g, [1.0, 2.0, 3.0])
    for array in (cfg.W, m.G):
        assert not np.shares_memory(g, array)


# --- bugs: a sum of a linear function of an array operation's result ------------------------

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
    ("matmul", (A33, V3), (0, 1)),
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
