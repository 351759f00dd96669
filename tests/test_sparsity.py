"""Sparse Hessians and Jacobians from compressed columns (symdiff.sparsity): after a first
full call, columns with no nonzero row in common run as one, and every compressed call
checks its pattern along a random direction. Each case is compared with the column loop
(the same program once per basis vector) at every call, and with central differences of
the gradient, including calls where the pattern learnt at the first point is wrong."""

import numpy as np
import pytest
from gradcheck import load, numeric_grad
from hypothesis import given, settings
from hypothesis import strategies as st

from symdiff import batch, grad, hessian, higher, jacobian, sparsity

F = load("""
import numpy as np


def rosenbrock(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def separable(x):
    return np.sum(np.sin(x) * x ** 2)


def banded(x, w):
    return np.sum(np.cos(x[:-w] * x[w:])) + np.sum(x ** 4)


def zero_here(x):
    return np.sum(x[:-1] ** 2 * x[1:] ** 2)


def branching(x):
    return np.sum(np.where(x[1:] > 0, x[1:] * x[:-1] ** 2, x[1:] ** 3))


def quartic(w, X):
    return np.sum((X @ w) ** 4)


def arrow(x):
    return np.sum(x) ** 3 + np.sum(x ** 4)


def roots(x):
    return np.sum(np.sqrt(x) * x[::-1])


def two(x, y):
    return np.sum(x[1:] * y[:-1] ** 2) + np.sum(x ** 2 * y ** 2) + np.sum(np.exp(x))


def graph(x, i, j):
    return np.sum(np.sin(x[i] * x[j] ** 2)) + np.sum(x ** 3)


def grid(W):
    return np.sum(W[1:, :] * W[:-1, :] ** 2) + np.sum(np.sin(W[:, 1:] * W[:, :-1]))


def hinge(x):
    return np.sum(x ** 4) + np.sum(np.maximum(x[1:] * x[:-1], 0.0))


def coupled(x, c, i, j):
    return np.sum(x ** 4) + c * x[i] * x[j]


def linear(x):
    return np.sum(3.0 * x)


def neighbours(x):
    return x[1:] * x[:-1]


def elementwise(x):
    return np.tanh(x) * x
""")

_R = np.random.default_rng(20261202)


def _loop(monkeypatch, call):
    """``call()`` with the columns run one by one (the loop ``batch.columns`` replaces)."""
    monkeypatch.setattr(higher.batch, "columns", lambda *a, **k: None)
    try:
        return call()
    finally:
        monkeypatch.undo()


def _checks(monkeypatch):
    """A list that records each compressed call's check: True where it held."""
    seen = []
    rebuilt = sparsity.Compression.rebuilt

    def recorded(self, compressed):
        out = rebuilt(self, compressed)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(sparsity.Compression, "rebuilt", recorded)
    return seen


def _same(got, want, rtol=1e-12):
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            _same(g, w, rtol)
        return
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


def _hessian_by_differences(f, x, *rest):
    g = grad(f)
    return np.stack([numeric_grad(lambda x, i=i: g(x, *rest)[i], [x], 0)
                     for i in range(x.size)])


def test_the_rosenbrock_hessian_runs_three_seeds_and_two_checks(monkeypatch):
    h = hessian(F.rosenbrock)
    points = [_R.standard_normal(60) for _ in range(3)]
    checks = _checks(monkeypatch)
    got = [h(x) for x in points]
    assert checks == [True, True]  # (the first call runs every column, and learns)
    known = _compression()
    assert known.seeds.shape == (5, 60) and int(known.colors.max()) == 2
    monkeypatch.undo()
    for x, H in zip(points, got, strict=True):
        _same(H, _loop(monkeypatch, lambda x=x: h(x)))
        np.testing.assert_allclose(H, _hessian_by_differences(F.rosenbrock, x), rtol=1e-6,
                                   atol=1e-4)


def _compression():
    """The compression of the program most recently batched."""
    found = [c for per in batch._BATCHED.values() for b in per.values()
             for c in b.compressions.values()]
    return found[-1]


@pytest.mark.parametrize(("name", "colors"), [("separable", 1), ("linear", 1)])
def test_a_diagonal_or_zero_hessian_takes_one_seed(monkeypatch, name, colors):
    f = getattr(F, name)
    h = hessian(f)
    checks = []
    for _ in range(3):
        x = _R.standard_normal(40)
        seen = _checks(monkeypatch)
        H = h(x)
        checks += seen
        monkeypatch.undo()
        _same(H, _loop(monkeypatch, lambda x=x: h(x)))
    assert checks == [True, True]
    assert int(_compression().colors.max()) + 1 == colors


@settings(max_examples=25, deadline=None)
@given(n=st.integers(4, 30), w=st.integers(1, 6), seed=st.integers(0, 2 ** 31))
def test_banded_hessians_of_any_width_are_the_column_loops(n, w, seed):
    w = min(w, n - 1)
    rng = np.random.default_rng(seed)
    h = hessian(F.banded)
    for _ in range(3):
        x = rng.standard_normal(n)
        got = h(x, w)
        batch_columns = higher.batch.columns
        higher.batch.columns = lambda *a, **k: None
        try:
            want = h(x, w)
        finally:
            higher.batch.columns = batch_columns
        _same(got, want)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(4, 40), edges=st.integers(1, 30), seed=st.integers(0, 2 ** 31))
def test_hessians_of_random_sparsity_graphs_are_the_column_loops(n, edges, seed):
    # x_i x_j^2 for random pairs: a pattern with no band, colours in any order
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, edges), rng.integers(0, n, edges)
    h = hessian(F.graph)
    for _ in range(3):
        x = rng.standard_normal(n)
        got = h(x, i, j)
        batch_columns = higher.batch.columns
        higher.batch.columns = lambda *a, **k: None
        try:
            want = h(x, i, j)
        finally:
            higher.batch.columns = batch_columns
        _same(got, want)


def test_a_zero_at_the_first_point_is_not_taken_for_a_structural_one(monkeypatch):
    # d2/dx_i dx_(i+1) of x_i^2 x_(i+1)^2 is 4 x_i x_(i+1): zero at the first point where
    # x_i = 0, so the pattern learnt there misses those entries; the next call's check
    # finds them, that call runs every column, and the pattern grows.
    h = hessian(F.zero_here)
    x0 = _R.standard_normal(30)
    x0[::3] = 0.0
    points = [x0, _R.standard_normal(30), _R.standard_normal(30)]
    checks = _checks(monkeypatch)
    got = [h(x) for x in points]
    assert checks == [False, True]
    monkeypatch.undo()
    for x, H in zip(points, got, strict=True):
        _same(H, _loop(monkeypatch, lambda x=x: h(x)))
        np.testing.assert_allclose(H, _hessian_by_differences(F.zero_here, x), rtol=1e-6,
                                   atol=1e-5)


@pytest.mark.parametrize(("dtype", "n", "pair", "c"), [
    (np.float32, 100, (1, 5), 1.5), (np.float64, 2000, (803, 1288), 1e-3),
    (np.float32, 500, (449, 386), 100.0), (np.float64, 1000, (293, 264), 1e-4)])
def test_a_coupling_that_appears_after_a_diagonal_pattern_is_caught(dtype, n, pair, c):
    # (the review's cases: the entry lands in the diagonal's colour, and the checks see it
    # times the difference of their directions at its two columns, which the directions
    # keep away from zero within a colour)
    h = hessian(F.coupled)
    x = np.ones(n, dtype)
    h(x, dtype(0.0), *pair)
    got = h(x, dtype(c), *pair)
    batch_columns = higher.batch.columns
    higher.batch.columns = lambda *a, **k: None
    try:
        want = h(x, dtype(c), *pair)
    finally:
        higher.batch.columns = batch_columns
    np.testing.assert_array_equal(got, want)


def test_float16_columns_are_not_compressed(monkeypatch):
    # (their rounding is coarser than what the check must see: the review's hinge, whose
    # coupling appeared unseen in float16, now runs every column)
    h = hessian(F.hinge)
    checks = _checks(monkeypatch)
    h(np.array([1, -1, 1, -1, 1], np.float16))
    x = np.array([1, 1, -1, 1, -1], np.float16)
    got = h(x)
    assert checks == []
    monkeypatch.undo()
    np.testing.assert_array_equal(got, _loop(monkeypatch, lambda: h(x)))
    assert got[0, 1] == 1.0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 31), st.integers(1, 12))
def test_the_checks_directions_are_spread_within_each_colour(seed, colours):
    size = 60
    colors = np.random.default_rng(seed).integers(0, colours, size)
    for d in sparsity._directions(colors, sparsity._CHECKS):
        assert np.all((np.abs(d) >= 1.0) & (np.abs(d) < 2.0))
        for c in set(colors.tolist()):
            members = np.sort(np.abs(d[colors == c]))
            if len(members) > 1:  # (evenly over [1, 2): 1/m apart)
                assert np.diff(members).min() >= 1.0 / len(members) - 1e-12


def test_a_branch_that_changes_the_pattern_is_caught(monkeypatch):
    h = hessian(F.branching)
    below, above = -np.abs(_R.standard_normal(20)), np.abs(_R.standard_normal(20))
    checks = _checks(monkeypatch)
    got = [h(below), h(above), h(below), h(above)]
    assert checks == [False, True, True]  # (then the pattern holds both branches)
    monkeypatch.undo()
    for x, H in zip([below, above, below, above], got, strict=True):
        _same(H, _loop(monkeypatch, lambda x=x: h(x)))


def test_the_pattern_of_data_is_checked_too(monkeypatch):
    # d2/dw2 of sum((X w)^4) is 12 X^T diag((X w)^2) X: block diagonal while X is, dense
    # once X is not: the check catches the new entries in the first call with such an X.
    h = hessian(F.quartic)
    X = np.zeros((40, 20))
    for k in range(5):
        X[8 * k:8 * k + 8, 4 * k:4 * k + 4] = _R.standard_normal((8, 4))
    dense = _R.standard_normal((40, 20))
    w = _R.standard_normal(20)
    checks = _checks(monkeypatch)
    got = [h(w, X), h(w + 1, X), h(w, dense)]
    assert checks == [True, False]
    monkeypatch.undo()
    for (ww, XX), H in zip([(w, X), (w + 1, X), (w, dense)], got, strict=True):
        _same(H, _loop(monkeypatch, lambda ww=ww, XX=XX: h(ww, XX)))


def test_a_dense_hessian_is_not_compressed(monkeypatch):
    h = hessian(F.arrow)
    checks = _checks(monkeypatch)
    for _ in range(3):
        h(_R.standard_normal(12))
    assert checks == []
    known = _compression()
    assert known.seeds is None and known.dense


def test_infinite_entries_run_every_column(monkeypatch):
    # d2/dx2 of sqrt(x) x' is infinite at 0 (and the columns that meet it are NaN, as
    # the loop's are): the check cannot hold there, and the call runs every column.
    h = hessian(F.roots)
    x = np.abs(_R.standard_normal(16)) + 0.5
    checks = _checks(monkeypatch)
    h(x)
    at_zero = x.copy()
    at_zero[3] = 0.0
    with np.errstate(all="ignore"):
        got = [h(at_zero) for _ in range(3)]
        monkeypatch.undo()
        want = _loop(monkeypatch, lambda: h(at_zero))
    assert checks == [False]
    assert np.isinf(want).any()
    for H in got:
        np.testing.assert_array_equal(H, want)


def test_a_check_that_keeps_failing_ends_the_compression():
    # (a pattern the check never confirms, as rounding far above the tolerance would)
    known = sparsity.Compression((8,))
    diagonal = np.eye(8)
    known.learn([diagonal])
    for _ in range(sparsity._FAILURES):
        assert known.seeds is not None
        wrong = np.vstack([np.ones((1, 8)), known.seeds[1:] + 1.0])
        assert known.rebuilt([wrong]) is None
        known.learn([diagonal])
    assert known.seeds is None
    known.learn([diagonal])
    assert known.seeds is None


def test_blocks_of_a_tuple_wrt_are_compressed_together(monkeypatch):
    h = hessian(F.two, wrt=(0, 1))
    points = [(_R.standard_normal(25), _R.standard_normal(25)) for _ in range(3)]
    checks = _checks(monkeypatch)
    got = [h(*p) for p in points]
    assert checks and all(checks)
    monkeypatch.undo()
    for p, H in zip(points, got, strict=True):
        _same(H, _loop(monkeypatch, lambda p=p: h(*p)))


def test_a_matrix_parameter_is_compressed_in_its_shape(monkeypatch):
    # a 6x5 grid whose entries meet their four neighbours: H has shape (6, 5, 6, 5)
    h = hessian(F.grid)
    points = [_R.standard_normal((6, 5)) for _ in range(3)]
    checks = _checks(monkeypatch)
    got = [h(W) for W in points]
    assert checks == [True, True]
    monkeypatch.undo()
    for W, H in zip(points, got, strict=True):
        assert H.shape == (6, 5, 6, 5)
        _same(H, _loop(monkeypatch, lambda W=W: h(W)))


def test_float32_hessians_are_compressed_in_their_precision(monkeypatch):
    h = hessian(F.rosenbrock)
    points = [_R.standard_normal(30).astype(np.float32) for _ in range(3)]
    checks = _checks(monkeypatch)
    got = [h(x) for x in points]
    assert checks == [True, True]
    monkeypatch.undo()
    for x, H in zip(points, got, strict=True):
        assert H.dtype == np.float32
        _same(H, _loop(monkeypatch, lambda x=x: h(x)), rtol=1e-5)


@pytest.mark.parametrize(("name", "n", "colors"), [("elementwise", 20, 1), ("neighbours", 20, 2)])
def test_jacobians_forward_and_by_rows_are_compressed(monkeypatch, name, n, colors):
    # elementwise: n columns by tangents, diagonal; neighbours: n - 1 rows by gradients
    # (fewer than its n columns), each row two entries wide.
    f = getattr(F, name)
    J = jacobian(f)
    points = [_R.standard_normal(n) for _ in range(3)]
    checks = _checks(monkeypatch)
    got = [J(x) for x in points]
    assert checks == [True, True]
    assert int(_compression().colors.max()) + 1 == colors
    monkeypatch.undo()
    for x, G in zip(points, got, strict=True):
        _same(G, _loop(monkeypatch, lambda x=x: J(x)))


def test_switched_off_every_call_runs_every_column(monkeypatch):
    monkeypatch.setattr(batch, "SPARSE", False)
    h = hessian(F.rosenbrock)
    checks = _checks(monkeypatch)
    x = _R.standard_normal(10)
    first, second = h(x), h(x)
    assert checks == []
    _same(second, first)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.floats(0.0, 1.0), st.integers(0, 2 ** 31))
def test_no_two_columns_of_a_colour_share_an_entry(size, entries, density, seed):
    pattern = np.random.default_rng(seed).random((size, entries)) < density
    colors = sparsity._colors(pattern, size)
    assert colors is not None  # (size colours always do)
    for c in set(colors.tolist()):
        assert (pattern[colors == c].sum(axis=0) <= 1).all()
    limited = sparsity._colors(pattern, size // 2 - 1)
    if limited is not None:
        assert int(limited.max()) < size // 2 - 1
