"""The batched programs (symdiff.batch): every column of a Hessian or a Jacobian from one
call of a program whose tangents carry a leading axis, one rule per construct, each checked
against the column loop it replaces (the same program called once per basis vector)."""

import numpy as np
import pytest
from gradcheck import batched_and_looped, load

from symdiff import batch, hessian, jacobian


def _same(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
        return
    assert np.shape(got) == np.shape(want)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


RULES = load("""
import numpy as np


def broadcast_ranks(x, A, s):
    return np.sum(A * x ** 2) + np.sum(s * x) + np.sum(x[:, None] * A.T * x[0])


def reductions(X):
    return (np.sum(np.sum(X ** 2, axis=0) * np.mean(X, axis=1)[0])
            + np.sum(np.max(X ** 3, axis=-1)) + np.sum(np.sum(X ** 2, axis=(0, 1), keepdims=True))
            + np.prod(np.sum(X, axis=1)))


def matmuls(x, A, B):
    M = np.reshape(x, (2, 3))
    return (x @ x + np.sum((A @ M) ** 2) + np.sum((M @ B) ** 2) + np.sum(np.dot(M.T, M[:, 0]))
            + np.sum(np.dot(M[0], A[:3, :2] @ M[:, :2])) + np.sum(np.outer(x, M[1]) ** 2))


def stacked_matmul(x, S):
    M = np.reshape(x, (2, 3))
    return np.sum((S @ M.T) ** 2)


def transposes(x):
    T = np.reshape(x, (2, 3, 2))
    return (np.sum(np.transpose(T) * np.arange(12.0).reshape(2, 3, 2).T)
            + np.sum(np.swapaxes(T, 0, 2) ** 3) + np.sum(T.T[0] ** 2)
            + np.sum(T.reshape(4, 3) ** 2))


def indexing(x, idx):
    M = np.reshape(x, (3, 4))
    return (np.sum(M[1:, ::2] ** 2) + M[0, 1] ** 3 + np.sum(M[..., 2] ** 2)
            + np.sum(M[:, None, 1] ** 3) + np.sum(M[idx] ** 2) + np.sum(M[:, idx] ** 3))


def selected(x):
    return np.sum(np.where(x > 0.0, x ** 2, np.sin(x)) + np.clip(x, -0.5, 0.5) * x)


def joined(x, y):
    return (np.sum(np.stack([x ** 2, x * y[0]]) ** 2) + np.sum(np.stack([x, x * y[0]], axis=1) ** 3)
            + np.sum(np.broadcast_to(x, (3, 4)) ** 3 * np.arange(3.0)[:, None]))


def branchy(x, c):
    if c > 0:
        y = x ** 3
    else:
        y = np.sin(x)
    return np.sum(y * x)


def vector(x, y):
    return np.sin(x) * y[:3] + x[::-1] ** 2 * np.sum(y)
""")

_R = np.random.default_rng(7)


@pytest.mark.parametrize(("name", "args"), [
    ("broadcast_ranks", (_R.standard_normal(3), _R.standard_normal((4, 3)), 0.7)),
    ("reductions", (_R.standard_normal((3, 4)),)),
    ("matmuls", (_R.standard_normal(6), _R.standard_normal((5, 2)), _R.standard_normal((3, 4)))),
    ("stacked_matmul", (_R.standard_normal(6), _R.standard_normal((4, 5, 3)))),
    ("transposes", (_R.standard_normal(12),)),
    ("indexing", (_R.standard_normal(12), np.array([2, 0, 2]))),
    ("selected", (np.array([0.3, -0.4, 1.2, -2.0]),)),
    ("joined", (_R.standard_normal(4), _R.standard_normal(2))),
], ids=lambda v: v if isinstance(v, str) else "")
def test_each_rule_against_the_column_loop(monkeypatch, name, args):
    f = getattr(RULES, name)
    batched, looped, seen = batched_and_looped(monkeypatch, lambda: hessian(f)(*args))
    assert seen and all(seen), name
    _same(batched, looped)


def test_blocks_of_several_parameters_and_a_zero_block(monkeypatch):
    args = (_R.standard_normal(6), _R.standard_normal((5, 2)), _R.standard_normal((3, 4)))
    batched, looped, seen = batched_and_looped(monkeypatch,
                                  lambda: hessian(RULES.matmuls, wrt=(0, 1, 2))(*args))
    assert seen == [True, True, True]
    _same(batched, looped)


def test_a_branch_the_probe_did_not_take_is_probed_where_it_is_taken(monkeypatch):
    f = RULES.branchy
    x = _R.standard_normal(3)
    for c in (1.0, -1.0, 1.0):
        batched, looped, seen = batched_and_looped(monkeypatch, lambda c=c: hessian(f)(x, c))
        assert seen == [True]
        _same(batched, looped)


def test_jacobians_forward_and_reverse(monkeypatch):
    x, y = _R.standard_normal(3), _R.standard_normal(5)
    # forward: 3 + 5 tangents for 3 entries of the value would be more: per wrt
    for wrt in (0, (0, 1)):
        batched, looped, seen = batched_and_looped(monkeypatch, lambda wrt=wrt: jacobian(
            RULES.vector, wrt=wrt)(x, y))
        assert seen and all(seen)
        _same(batched, looped)


def test_float32_stays_float32(monkeypatch):
    x = _R.standard_normal(4).astype(np.float32)
    batched, looped, seen = batched_and_looped(monkeypatch, lambda: hessian(RULES.selected)(x))
    assert seen == [True] and batched.dtype == np.float32
    _same(batched, looped)


def test_what_does_not_batch_runs_the_column_loop():
    f = load("""
import numpy as np


def looped(x):
    parts = []
    for i in range(3):
        parts.append(x * (i + 1.0))
    return np.sum(np.stack(parts) ** 2)
""", "looped")
    from symdiff.higher import _gradient_of, tangent_function

    tf = tangent_function(f, ("x",), returns="tangent")
    g = _gradient_of(tf, (0,))
    x = np.array([0.5, -1.0])
    g(x, np.zeros(2))
    spec = g.gradient._spec((x, np.zeros(2)), {})
    assert batch.columns(spec.built, (x, np.zeros(2)), 1, (2,), [(0, (2,))]) is None
    # (the list of batched parts is not an array the rules batch)
    assert batch.batched(spec.built, ("x_dot",)).reason == "_t1_dot_1 has not an array"
    np.testing.assert_allclose(hessian(f)(x), 28.0 * np.eye(2))


# --- broadcasting and matmul ranks on random shapes ---

SHAPED = load("""
import numpy as np


def elementwise(x, c):
    return np.sum((x * c) ** 2 + np.sin(c * x))


def product(x, c):
    return np.sum((x @ c) ** 2)


def product_right(x, c):
    return np.sum((c @ x) ** 2)
""")


def _shapes(rng):
    """A shape of 0 to 3 axes and one it broadcasts with (either may be the larger)."""
    big = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 4)))
    small = tuple(n if rng.random() < 0.6 else 1 for n in big[len(big) - rng.integers(
        0, len(big) + 1):])
    return (big, small) if rng.random() < 0.5 else (small, big)


@pytest.mark.parametrize("seed", range(12))
def test_broadcasting_on_random_ranks(monkeypatch, seed):
    rng = np.random.default_rng(seed)
    xs, cs = _shapes(rng)
    x, c = rng.standard_normal(xs), rng.standard_normal(cs)
    batched, looped, seen = batched_and_looped(monkeypatch, lambda: hessian(
        SHAPED.elementwise, wrt=(0, 1))(x, c))
    assert seen == [True, True]
    _same(batched, looped)


@pytest.mark.parametrize(("xs", "cs"), [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)),
                                        ((2, 3), (3, 4)), ((4, 2, 3), (3, 2)),
                                        ((2, 3), (4, 3, 2)), ((4, 2, 3), (4, 3, 2))])
def test_matmul_ranks(monkeypatch, xs, cs):
    rng = np.random.default_rng(len(xs) * 10 + len(cs))
    x, c = rng.standard_normal(xs), rng.standard_normal(cs)
    ran = 0
    for f in (SHAPED.product, SHAPED.product_right):
        try:
            f(x, c)
        except ValueError:
            continue  # (shapes that do not multiply that way round)
        batched, looped, seen = batched_and_looped(
            monkeypatch, lambda f=f: hessian(f, wrt=(0, 1))(x, c))
        assert seen == [True, True]
        _same(batched, looped)
        ran += 1
    assert ran


def test_columns_in_chunks_where_a_batch_would_be_large(monkeypatch):
    monkeypatch.setattr(batch, "_MEMORY", 24)  # (12 entries of X: 2 columns a batch)
    x, A = _R.standard_normal(3), _R.standard_normal((4, 3))
    batched, looped, seen = batched_and_looped(
        monkeypatch, lambda: hessian(RULES.broadcast_ranks)(x, A, 0.7))
    assert seen == [True]
    _same(batched, looped)


def test_names_of_the_function_are_not_taken_by_the_batched_program(monkeypatch):
    f = load("""
import numpy as np


def f(x):
    _k = x * 2.0
    _b0 = np.sum(_k ** 3)
    return _b0 * x[0]
""", "f")
    x = _R.standard_normal(3)
    batched, looped, seen = batched_and_looped(monkeypatch, lambda: hessian(f)(x))
    assert seen == [True]
    _same(batched, looped)


def test_module_data_of_another_rank_runs_the_column_loop(monkeypatch):
    module = load("""
import numpy as np

W = np.array([1.0, 2.0, 3.0])


def f(x):
    return np.sum(x ** 2 * W) * x[0]
""")
    x = _R.standard_normal(3)
    batched, looped, seen = batched_and_looped(monkeypatch, lambda: hessian(module.f)(x))
    assert seen == [True]
    _same(batched, looped)
    module.W = np.ones((3, 3))  # (3 columns: a batch of 3 would broadcast, wrongly)
    batched, looped, seen = batched_and_looped(monkeypatch, lambda: hessian(module.f)(x))
    assert seen == [False]
    _same(batched, looped)


def test_an_adjoint_spread_over_the_slot_it_came_from(monkeypatch):
    f = load("""
import numpy as np


def f(x):
    M = np.reshape(x, (3, 2))
    return np.sum(M[1:] * np.sum(M[0] ** 2)) + np.sum(M[[0, 2]] ** 2 * np.sum(M[1] ** 3))
""", "f")
    x = _R.standard_normal(6)
    batched, looped, seen = batched_and_looped(monkeypatch, lambda: hessian(f)(x))
    assert seen == [True]
    _same(batched, looped)


def test_a_single_column_is_not_worth_a_batched_program():
    from symdiff.higher import tangent_function

    f = load("import numpy as np\n\n\ndef f(x):\n    return np.sin(x) * 2.0\n", "f")
    tf = tangent_function(f, ("x",))
    assert batch.MIN_COLUMNS == 2
    assert batch.columns(tf.built, (0.5, 0.0), 1, (), [(1, ())]) is None  # the loop runs
    (two,) = batch.columns(tf.built, (np.zeros(2), None), 1, (2,), [(1, (2,))])
    np.testing.assert_allclose(two, 2.0 * np.eye(2))


# --- the batched helpers' fast paths: their column helper's result, column by column ---


@pytest.mark.parametrize("g_shape, x_shape, like", [
    ((3, 4), (3, 4), [(3, 4), (3, 4)]), ((3, 4), (1, 4), [(3, 4), (1, 4)]),
    ((4,), (3, 1), [(3, 1), (4,)]), ((), (), [(), ()]), ((1, 4), (4,), [(1, 4), (4,)]),
    ((2, 1, 3), (2, 5, 3), [(2, 5, 3), (2, 1, 3)]), ((3, 4), (3, 4), [(3, 4), "number"]),
    ((3, 1), (3, 1), [(3, 4), (3, 1)]),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batch_unbroadcast_is_unbroadcast_of_each_column(g_shape, x_shape, like, dtype):
    from symdiff.batch_runtime import _batch_logical, _batch_unbroadcast
    from symdiff.runtime import _Shape, _unbroadcast

    k = 3
    G = _R.standard_normal((k, *g_shape)).astype(dtype)
    operands = [2.0 if s == "number" else _Shape(s) if i % 2 else np.ones(s)
                for i, s in enumerate(like)]
    batched = [_batch_logical(G)] + operands  # (g itself among them, as programs pass it)
    got = _batch_unbroadcast(G, _Shape(x_shape), tuple(batched))
    assert got.shape == (k, *x_shape) and got.dtype == dtype
    for i in range(k):
        want = _unbroadcast(G[i], _Shape(x_shape), (G[i], *operands))
        np.testing.assert_allclose(got[i], want, rtol=1e-6)


@pytest.mark.parametrize("x_shape, index", [
    ((5,), np.index_exp[1:]), ((5,), np.index_exp[:-1]), ((5,), np.index_exp[:]),
    ((5,), np.index_exp[3:1]), ((5,), np.index_exp[::2]), ((5, 2), np.index_exp[1:, 0]),
    ((5, 2), np.index_exp[2:4]), ((5, 2), np.index_exp[2:4, :1]),
    ((5,), np.index_exp[[0, 0, 3]]), ((5,), np.index_exp[2]),
    ((4, 3), np.index_exp[[1, 1], :]), ((1,), np.index_exp[0:1]),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batch_scatter_and_scatter_add_are_their_column_helpers(x_shape, index, dtype):
    from symdiff.batch_runtime import _batch_scatter, _batch_scatter_add
    from symdiff.runtime import _scatter, _scatter_add

    k = 3
    x = np.ones(x_shape, dtype)
    G = _R.standard_normal((k, *x[index].shape)).astype(dtype)
    got = _batch_scatter(G, x, index)
    for i in range(k):
        np.testing.assert_array_equal(got[i], _scatter(G[i], x, index))
    for acc_dtype in (np.float64, dtype):
        acc = np.full((k, *x_shape), 0.5, acc_dtype)
        got = _batch_scatter_add(acc, G, x, index)
        assert (got is acc) == (acc_dtype == np.float64)
        for i in range(k):
            want = _scatter_add(np.full(x_shape, 0.5, acc_dtype), G[i], x, index)
            assert got[i].dtype == want.dtype
            np.testing.assert_allclose(got[i], want, rtol=1e-6)


def test_the_batched_program_computes_no_operand_nothing_reads():
    # The column program's value of the tangent (what the gradient does not read) is
    # left out of the batched one, and so are the operands flattened out of it.
    import ast

    f = load("""
import numpy as np


def chain(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)
""", "chain")
    hessian(f)(_R.standard_normal(5))
    (found,) = [b for per in batch._BATCHED.values() for b in per.values()
                if b.source and "def grad_jvp_chain_batched" in b.source]
    tree = ast.parse(found.source)
    stored = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}
    assert {n for n in stored - read if n.startswith("_b")} == set()
