"""Array operations: every row of rules.ARRAY_OPS against central differences, and conventions."""

import numpy as np
import pytest
from gradcheck import check_grad, load

from symdiff import SymdiffError, grad, rules

# One or more cases per array row: (source of the body over x, y, shapes of x and y).
CASES = {
    "np.sum": [("np.sum(x ** 2)", (3, 4)), ("np.sum(np.sin(x), axis=0) @ y", (3, 4), (4,)),
               ("np.sum(np.sin(x), axis=(0, 2), keepdims=True).sum()", (2, 3, 4)),
               ("x.sum(1).sum() * 2", (3, 4)), ("np.sum(x * y)", (3, 1), (1, 4))],
    "np.mean": [("np.mean(x ** 2)", (3, 4)), ("np.sum(np.mean(x ** 3, axis=-1))", (3, 4)),
                ("x.mean(axis=0, keepdims=True).sum()", (3, 4))],
    "np.prod": [("np.prod(x)", (4,)), ("np.sum(np.prod(x, axis=1))", (3, 4)),
                ("x.prod()", (2, 2))],
    "np.max": [("np.max(x ** 2)", (5,)), ("np.sum(np.max(x, axis=0) * y)", (3, 4), (4,)),
               ("x.max(axis=1, keepdims=True).sum()", (3, 4))],
    "np.min": [("np.min(x ** 2)", (5,)), ("np.sum(np.min(x, axis=1))", (3, 4)),
               ("x.min()", (3, 4))],
    "np.var": [("np.var(x)", (6,)), ("np.sum(np.var(x, axis=0, ddof=1))", (4, 3)),
               ("x.var(axis=1).sum()", (3, 4))],
    "np.std": [("np.std(x)", (6,)), ("np.sum(np.std(x, axis=1, keepdims=True))", (3, 4)),
               ("x.std(ddof=1)", (5,))],
    "np.linalg.norm": [("np.linalg.norm(x)", (5,)), ("np.linalg.norm(x)", (3, 4)),
                       ("np.sum(np.linalg.norm(x, axis=1))", (3, 4))],
    "np.matmul": [("np.sum((x @ y) ** 2)", (3, 4), (4, 2)), ("x @ y", (4,), (4,)),
                  ("np.sum(np.sin(x @ y))", (3, 4), (4,)), ("np.sum(x @ y)", (4,), (4, 3)),
                  ("np.sum(np.matmul(x, y) ** 2)", (2, 3, 4), (4, 5)),
                  ("np.sum((x @ y) ** 2)", (2, 3, 4), (2, 4, 2))],
    "np.dot": [("np.sum(np.dot(x, y) ** 2)", (3, 4), (4, 2)), ("np.dot(x, y)", (4,), (4,)),
               ("x.dot(y).sum()", (3, 4), (4,)), ("np.sum(np.dot(x, y))", (), (3,))],
    "np.inner": [("np.inner(x, y)", (4,), (4,)), ("np.sum(np.inner(x, y) ** 2)", (2, 4), (3, 4))],
    "np.outer": [("np.sum(np.outer(x, y) ** 2)", (3,), (4,))],
    "np.einsum": [("np.sum(np.einsum('ij,jk->ik', x, y) ** 2)", (3, 4), (4, 2)),
                  ("np.einsum('ij,ij->', x, y)", (3, 4), (3, 4)),
                  ("np.sum(np.einsum('ij->i', x) ** 2)", (3, 4))],
    "np.trace": [("np.trace(x) ** 2", (3, 3))],
    "np.transpose": [("np.sum(np.transpose(x) * y)", (3, 4), (4, 3)),
                     ("np.sum(np.transpose(x, (2, 0, 1)) * y)", (2, 3, 4), (4, 2, 3)),
                     ("np.sum(x.T * y)", (3, 4), (4, 3)),
                     ("np.sum(x.transpose(1, 0) * y)", (3, 4), (4, 3))],
    "np.reshape": [("np.sum(np.reshape(x, (4, 3)) * y)", (3, 4), (4, 3)),
                   ("np.sum(x.reshape(-1, 2) ** 3)", (3, 4)),
                   ("np.sum(x.reshape((2, 6)) ** 3)", (3, 4))],
    "np.ravel": [("np.sum(np.ravel(x) * y)", (3, 4), (12,)),
                 ("np.sum(x.flatten() * y)", (3, 4), (12,)), ("np.sum(x.ravel() ** 3)", (2, 2))],
    "np.squeeze": [("np.sum(np.squeeze(x) * y)", (3, 1), (3,)),
                   ("np.sum(x.squeeze(axis=1) ** 3)", (3, 1))],
    "np.expand_dims": [("np.sum(np.expand_dims(x, 1) * y)", (3,), (3, 4))],
    "np.broadcast_to": [("np.sum(np.broadcast_to(x, (3, 4)) * y)", (4,), (3, 4))],
    "np.tile": [("np.sum(np.tile(x, (2, 3)) * y)", (2, 2), (4, 6)),
                ("np.sum(np.tile(x, 3) * y)", (2,), (6,))],
    "np.flip": [("np.sum(np.flip(x) * y)", (3, 4), (3, 4)),
                ("np.sum(np.flip(x, axis=0) * y)", (3, 4), (3, 4))],
    "np.concatenate": [("np.sum(np.concatenate([x, y, x]) ** 2)", (3,), (2,)),
                       ("np.sum(np.concatenate([x, y], axis=1) ** 3)", (2, 3), (2, 2))],
    "np.stack": [("np.sum(np.stack([x, y], axis=1) ** 3)", (3,), (3,)),
                 ("np.sum(np.stack([x, x * y]) ** 3)", (2, 3), (2, 3))],
    "np.hstack": [("np.sum(np.hstack([x, y]) ** 3)", (3,), (2,)),
                  ("np.sum(np.hstack([x, y]) ** 3)", (2, 3), (2, 1))],
    "np.vstack": [("np.sum(np.vstack([x, y]) ** 3)", (3,), (3,)),
                  ("np.sum(np.vstack([x, y]) ** 3)", (2, 3), (1, 3))],
    "np.full": [("np.sum(np.full((2, 3), x) * y)", (), (2, 3)),
                ("np.sum(np.full((2, 3), x) ** 2)", (3,))],
    "np.full_like": [("np.sum(np.full_like(y, x) * y)", (), (2, 3)),
                     ("np.sum(np.full_like(x, 2.0) * x) + np.sum(np.full_like(x, y) ** 2)",
                      (3,), ())],
    "np.arange": [("np.sum(np.arange(x, 3.0, y) ** 2)", (), ()),
                  ("np.sum(np.arange(x, 2.0 + x) * y)", (), (2,))],
    "np.linspace": [("np.sum(np.sin(np.linspace(x, y, 5)))", (), ()),
                    ("np.sum(np.linspace(x, y, 4, axis=1) ** 2)", (3,), (3,)),
                    ("np.sum(np.linspace(x, y, num=3, endpoint=False) ** 3)", (2,), ())],
    "np.where": [("np.sum(np.where(x > 0, x ** 2, np.sin(y)))", (3, 4), (3, 4)),
                 ("np.sum(np.where(x > y, x, y) ** 2)", (3, 1), (1, 4)),
                 ("np.sum(np.where(x > 0, x, 0.0))", (5,))],
    "scipy.special.logsumexp": [("logsumexp(x)", (5,)),
                                ("np.sum(logsumexp(x, axis=1) * y)", (3, 4), (3,))],
    "x[...]": [("np.sum(x[1:] ** 2)", (5,)), ("np.sum(x[:, 0] * y)", (3, 4), (3,)),
               ("np.sum(x[::2, -1] ** 3)", (5, 3)), ("x[2] * x[-1]", (4,)),
               ("x[1, 2] ** 2", (3, 4)), ("np.sum(x[[0, 0, 2]] ** 3)", (4,)),
               ("np.sum(x[x > 0] ** 3)", (6,)), ("np.sum(x[:, None] * y)", (3,), (3, 4)),
               ("np.sum(x[:, np.newaxis] * y)", (3,), (3, 4)),
               ("np.sum(x[:-1] * x[1:])", (6,))],
}

HEADER = "import numpy as np\nfrom scipy.special import logsumexp\n"


def _cases():
    for name, cases in CASES.items():
        for k, (body, *shapes) in enumerate(cases):
            yield pytest.param(name, body, shapes, id=f"{name}-{k}")


def test_every_array_rule_has_cases():
    rows = {row.names[0] for row in rules.ARRAY_OPS} | {rules.INDEX.names[0]}
    assert rows == set(CASES)


@pytest.mark.parametrize("name,body,shapes", list(_cases()))
def test_array_rule_matches_central_differences(name, body, shapes):
    pytest.importorskip("scipy")
    rng = np.random.default_rng(abs(hash(body)) % 2**32)
    params = ["x", "y"][: len(shapes)]
    f = load(HEADER + f"def f({', '.join(params)}):\n    return {body}\n", "f")
    args = tuple(rng.uniform(0.5, 1.5, s) * rng.choice([-1, 1], s) if s else 0.7
                 for s in shapes)
    if name == "np.prod":
        args = (rng.uniform(0.5, 1.5, shapes[0]),)
    check_grad(f, args, wrt=tuple(range(len(args))))


def test_max_and_min_split_ties_equally():
    f = load(HEADER + "def f(x):\n    return np.max(x)\ndef g(x):\n"
             "    return np.sum(np.min(x, axis=1))\n")
    np.testing.assert_allclose(grad(f.f)(np.array([1.0, 3.0, 3.0, 3.0])), [0, 1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(grad(f.g)(np.array([[1.0, 1.0], [0.0, 2.0]])),
                               [[0.5, 0.5], [1.0, 0.0]])


def test_prod_is_exact_at_zeros():
    f = load(HEADER + "def f(x):\n    return np.prod(x)\n", "f")
    np.testing.assert_allclose(grad(f)(np.array([2.0, 0.0, 3.0])), [0.0, 6.0, 0.0])
    np.testing.assert_allclose(grad(f)(np.array([0.0, 0.0, 3.0])), [0.0, 0.0, 0.0])


def test_repeated_integer_indices_accumulate():
    f = load(HEADER + "def f(x):\n    return np.sum(x[np.array([0, 0, 0, 2])])\n", "f")
    np.testing.assert_allclose(grad(f)(np.ones(3)), [3.0, 0.0, 1.0])


def test_several_indexings_of_one_array_add_up_in_place_and_right():
    f = load(HEADER + """
def f(x):
    return np.sum(x[1:] ** 2 * x[:-1]) + np.sum(x[np.array([0, 0, 2])] * 3.0) + \\
        np.sum(x[x > 0.5] ** 3)
""", "f")
    assert "_scatter_add(dx, " in grad(f).source
    x = np.array([0.3, 0.9, -0.4, 1.2])
    check_grad(f, (x,))
    expected = np.zeros(4)
    expected[1:] += 2 * x[1:] * x[:-1]
    expected[:-1] += x[1:] ** 2
    np.add.at(expected, [0, 0, 2], 3.0)  # the repeated index gets both
    expected[x > 0.5] += 3 * x[x > 0.5] ** 2
    np.testing.assert_allclose(grad(f)(x), expected, rtol=1e-12)


def test_scatter_add_adds_in_place_only_into_an_array_of_its_own():
    from symdiff.runtime import _scatter_add

    x = np.zeros(3)
    owned = np.ones(3)
    assert _scatter_add(owned, 2.0, x, np.index_exp[1:]) is owned
    np.testing.assert_allclose(owned, [1.0, 3.0, 3.0])
    for acc in (np.broadcast_to(np.ones(1), (3,)), np.ones(3, dtype=int), np.ones(6)[::2],
                np.ones((1, 3))):
        before = acc.copy()
        out = _scatter_add(acc, 0.5, x, np.index_exp[[0, 0]])
        assert out is not acc and out.dtype == np.float64
        np.testing.assert_array_equal(acc, before)
        np.testing.assert_allclose(out, before + [1.0, 0.0, 0.0])


def test_add_to_adds_in_place_only_into_an_array_of_its_own():
    from symdiff.runtime import _add_to

    owned = np.ones(3)
    assert _add_to(owned, np.full(3, 2.0)) is owned and _add_to(owned, 1.0) is owned
    np.testing.assert_allclose(owned, [4.0, 4.0, 4.0])
    for acc, g in ((np.broadcast_to(np.ones(1), (3,)), 0.5), (np.ones(3, dtype=int), 0.5),
                   (np.ones(6)[::2], 0.5), (np.ones(3), np.ones((2, 3))), (1.0, np.ones(3))):
        before = np.array(acc, copy=True)
        out = _add_to(acc, g)
        assert out is not acc
        np.testing.assert_array_equal(acc, before)
        np.testing.assert_allclose(out, before + g)


def test_gradients_handed_on_unchanged_are_never_one_array_twice():
    f = load(HEADER + """
def both(a, b):
    s = a + b
    return np.sum(np.sin(s))

def one(z, w):
    s = z - w
    t = s[1:] * 2.0
    return np.sum(np.sin(s)) + np.sum(t)
""")
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    da, db = grad(f.both, wrt=(0, 1))(a, b)
    assert da is not db and not np.shares_memory(da, db)
    np.testing.assert_allclose(da, np.cos(a + b))
    da += 1.0
    np.testing.assert_allclose(db, np.cos(a + b))
    dz, dw = grad(f.one, wrt=(0, 1))(a, b)
    expected = np.cos(a - b) + np.r_[0.0, 2.0, 2.0, 2.0]
    np.testing.assert_allclose(dz, expected)
    np.testing.assert_allclose(dw, -expected)
    assert not np.shares_memory(dz, dw)


def test_values_without_gradient_run_as_they_are():
    f = load(HEADER + """
def f(x):
    n = x.shape[0]
    z = np.zeros_like(x) + np.ones(x.shape) * x.ndim + len(x) + x.size
    i = np.argmax(x)
    r = np.arange(n) * 1.0 + np.linspace(0, 1, n) + np.eye(n)[0]
    return np.sum(x * z + r * x) + x[i] ** 2
""", "f")
    x = np.array([0.3, 0.9, -0.2])
    check_grad(f, (x,))


def test_axis_must_not_depend_on_the_differentiated_input():
    f = load(HEADER + "def f(x, k):\n    return np.sum(np.sum(x, axis=k))\n", "f")
    with pytest.raises(SymdiffError, match="axis must not depend on the differentiated"):
        grad(f, wrt=("x", "k")).source  # noqa: B018


def test_unsupported_numpy_function_names_it_and_the_table():
    f = load(HEADER + "def f(x):\n    return np.sum(np.cumsum(x))\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f).source  # noqa: B018
    assert "np.cumsum is not supported" in str(e.value)
    assert "coverage table in README.md" in str(e.value)


def test_out_and_dtype_arguments_are_refused():
    f = load(HEADER + "def f(x):\n    return np.sum(x, dtype=np.int32)\n", "f")
    with pytest.raises(SymdiffError, match=r"np.sum\(..., dtype=...\) is not supported"):
        grad(f).source  # noqa: B018


UNPACKED = load("""
import numpy as np

PAIR = (2.0, 3.0)

def shape(A, x):
    n, m = A.shape
    p, q = PAIR
    s = 0.0
    for i in range(n):
        s = s + np.sum(A[i] ** 2) * m * p + x * n * q
    return s

def rows(A):
    a, b = A
    return np.sum(a * b ** 2)

def rows_of(A, k):
    if k > 0:
        a, b = A.T * 2.0
    else:
        b, a = A.T
    a, b = b, a
    return np.sum(np.sin(a) * b)

def columns(A):
    a, b = A.T
    n, = a.shape
    return np.sum(a * b) * n

def in_a_loop(A, n):
    s = 0.0
    for i in range(n):
        r, c = A.shape
        a, b = A
        s = s + np.sum(a) * r + np.sum(b * b * c)
    return s
""")


def test_a_shape_unpacked_binds_numbers_without_gradient():
    for A in (np.arange(1.0, 7.0).reshape(2, 3), np.ones((3, 1))):
        check_grad(UNPACKED.shape, (A, 1.5), wrt=(0, 1))
    source = grad(UNPACKED.shape, wrt=(0, 1)).source
    assert "_t0, _t1 = A.shape  # line 7" in source  # the shape itself is unpacked, as written


def test_an_array_unpacked_into_its_rows():
    A = np.arange(1.0, 7.0).reshape(2, 3)
    check_grad(UNPACKED.rows, (A,))
    check_grad(UNPACKED.rows, (np.array([0.5, -2.0]),))
    for k in (0, 1):
        check_grad(UNPACKED.rows_of, (np.arange(1.0, 5.0).reshape(2, 2) / 3, k))
    for n in (0, 1, 3):
        check_grad(UNPACKED.in_a_loop, (A, n))
    # a = A.T[0] renames the temporary that held it; the shape's temporary reuses the name,
    # and was once taken for the differentiated array: n = a.shape[0] unpacked as rows.
    check_grad(UNPACKED.columns, (A.T.copy(),))


@pytest.mark.parametrize(("f", "args"), [
    (UNPACKED.shape, (np.ones((2, 2, 2)), 1.0)), (UNPACKED.rows, (np.ones((3, 2)),)),
    (UNPACKED.rows, (np.ones((1, 2)),)), (UNPACKED.rows, (1.0,))])
def test_unpacking_a_value_of_another_length_fails_as_python_does(f, args):
    with pytest.raises(Exception) as expected:
        f(*args)
    with pytest.raises(type(expected.value)) as got:
        grad(f)(*args)
    assert str(got.value) == str(expected.value)
