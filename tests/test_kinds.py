"""Specialising on argument kinds: the kind lattice, one build per kind (in memory and on
disk), the same grad(f) right for every kind it is called with, what .source and
source_for show, and has_aux."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import load, numeric_grad

from symdiff import SymdiffError, grad, kinds, value_and_grad
from symdiff.kinds import Array, Dict, List, Number, Other, Tuple

M = load("""
    import numpy as np

    def f(x, y):
        return np.sum(np.sin(x) * y) + np.sum(np.square(x)) * 0.5

    def scaled(x, s=2.0):
        return np.sum(x * s)

    def counted(x, n):
        total = 0.0
        for i in range(n):
            total = total + np.sum(x) * i
        return total

    def with_aux(x):
        y = x * 2.0
        return np.sum(y ** 2), {"y": y, "n": 3}

    def aux_in_branches(x):
        if np.sum(x) > 0:
            return np.sum(x ** 2), "positive"
        return np.sum(x ** 3), "not positive"

    def aux_in_loop(x, n):
        s = 0.0
        a = x
        for i in range(n):
            a = a * 2.0
            s = s + np.sum(np.sin(a))
        return s, a

    def not_a_pair(x):
        return np.sum(x), 1.0, 2.0

    def pair_from_name(x):
        out = (np.sum(x), 1.0)
        return out
""")


# --- the kind lattice -----------------------------------------------------------------

@pytest.mark.parametrize(("value", "expected"), [
    (1.0, Number("float")), (3, Number("int")), (True, Number("bool")),
    (np.float64(1.0), Array("float64", 0, True)), (np.float32(1.0), Array("float32", 0, True)),
    (np.zeros((2, 3)), Array("float64", 2)), (np.zeros(3, np.float32), Array("float32", 1)),
    (np.array(1.0), Array("float64", 0)), (np.zeros(2, bool), Array("bool", 1)),
    (np.zeros(2, np.uint8), Array("uint8", 1)), (None, Other("None")), ("a", Other("str")),
    (object(), Other("object")),
    ((1.0, np.zeros(2)), Tuple((Number("float"), Array("float64", 1)))),
    ([1.0], List((Number("float"),))),
    ({"W": np.zeros((2, 2)), "b": [0.0]},
     Dict(("W", "b"), (Array("float64", 2), List((Number("float"),))))),
])
def test_kind_of_a_value(value, expected):
    assert kinds.kind(value) == expected


def test_keys_tell_kinds_apart_but_not_sizes():
    key = kinds.key
    assert key(np.zeros(3)) == key(np.ones(5))
    assert key(np.zeros(3)) != key(np.zeros((3, 1)))
    assert key(np.zeros(3)) != key(np.zeros(3, np.float32))
    assert key(1.0) != key(np.float64(1.0)) != key(np.array(1.0))
    assert key(1.0) != key(1) != key(True)
    assert key((1.0, 2.0)) != key([1.0, 2.0]) != key((1.0, 2.0, 3.0))
    assert key({"a": 1.0}) != key({"b": 1.0})
    assert key({"a": 1.0, "b": 2.0}) != key({"b": 2.0, "a": 1.0})  # the order is the structure


def test_kinds_print_as_people_write_them():
    assert str(kinds.kind(np.zeros((2, 3), np.float32))) == "float32 array, 2-d"
    assert str(kinds.kind(np.float64(1.0))) == "np.float64"
    assert str(kinds.kind({"W": 1.0, "b": (2, [True])})) == "{'W': float, 'b': (int, [bool])}"
    assert str(kinds.FLOAT64) == "float64 array"


# --- one grad(f), one build per kind --------------------------------------------------

X = np.array([0.3, -1.2, 2.0])


@pytest.mark.parametrize("x", [
    X, X.astype(np.float32), 0.7, np.float64(0.7), np.array(0.7), 2, np.int64(2),
    np.array([1, -2, 3]), [0.3, -1.2, 2.0], np.array([[0.3], [1.0]]),
], ids=["float64", "float32", "float", "np.float64", "0-d", "int", "np.int64", "int64 array",
        "list", "2-d"])
def test_one_grad_is_right_for_every_kind(x):
    g = grad(M.f)
    y = 1.5
    expected = numeric_grad(M.f, [np.asarray(x, dtype=np.float64), y], 0)
    got = g(x, y)
    tol = 1e-4 if np.asarray(x).dtype == np.float32 else 1e-7
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    assert np.shape(got) == np.shape(x)


def test_the_same_gradient_switches_between_kinds_and_back():
    g = grad(M.f)
    first = g(X, 2.0)
    assert g(0.5, 2.0) == pytest.approx(2.0 * np.cos(0.5) + 0.5)
    np.testing.assert_allclose(g(X.astype(np.float32), 2.0), first, rtol=1e-5)
    np.testing.assert_allclose(g(X, 2.0), first)
    assert g(0.5, 2.0) == pytest.approx(2.0 * np.cos(0.5) + 0.5)
    assert len(g._specs) == 3


def test_a_build_per_kind_is_cached_in_memory(monkeypatch):
    import sympy

    g = grad(M.scaled)
    g(X)
    g(1.0)

    def boom(*a, **k):
        raise AssertionError("SymPy called for a kind built before")

    monkeypatch.setattr(sympy, "diff", boom)
    again = grad(M.scaled)
    np.testing.assert_allclose(again(X * 2.0), [2.0] * 3)
    assert again(3.0) == 2.0
    with pytest.raises(SymdiffError, match="kind built before"):
        again(X.reshape(3, 1))  # a new kind: built now


def test_a_default_is_part_of_the_kind():
    g = grad(M.scaled)
    np.testing.assert_allclose(g(X), [2.0] * 3)
    np.testing.assert_allclose(g(X, np.array([1.0, 2.0, 3.0])), [1.0, 2.0, 3.0])
    M.scaled.__defaults__ = (np.float32(3.0),)
    try:
        np.testing.assert_allclose(g(X), [3.0] * 3)
    finally:
        M.scaled.__defaults__ = (2.0,)
    np.testing.assert_allclose(g(X), [2.0] * 3)


def test_a_disk_cache_entry_per_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path))
    m = load("""
        import numpy as np
        def f(x):
            return np.sum(x ** 3)
    """)
    grad(m.f)(X)
    grad(m.f)(1.0)
    entries = list(tmp_path.rglob("*.json"))
    assert len(entries) == 2
    import sympy

    from symdiff import api

    monkeypatch.setattr(sympy, "diff", lambda *a, **k: 1 / 0)
    api._MEMORY.clear()  # as in a new process
    np.testing.assert_allclose(grad(m.f)(X), 3 * X ** 2)
    assert grad(m.f)(2.0) == 12.0


def test_integer_loop_counts_stay_integers():
    g = grad(M.counted)
    np.testing.assert_allclose(g(X, 3), [3.0] * 3)
    np.testing.assert_allclose(g(X, np.int64(4)), [6.0] * 3)


# --- what the source shows ------------------------------------------------------------

def test_source_is_the_float64_build_and_source_for_the_one_a_call_runs():
    g = grad(M.scaled)
    assert g.source == g.source_for(X)
    assert "def grad_scaled(x, s=2.0):" in g.source
    for args in [(1.0,), (X.astype(np.float32),), (X, 3)]:
        text = g.source_for(*args)
        assert text.startswith("def grad_scaled(")
        compile(text, "<test>", "exec")
    assert g.source_for(X, s=3.0) == g.source_for(X)  # the same kinds


def test_source_for_refuses_what_a_call_refuses():
    with pytest.raises(SymdiffError, match="complex"):
        grad(M.scaled).source_for(X + 1j)


# --- has_aux --------------------------------------------------------------------------

def test_has_aux_returns_the_gradient_and_aux():
    g, aux = grad(M.with_aux, has_aux=True)(X)
    np.testing.assert_allclose(g, 8 * X)
    assert set(aux) == {"y", "n"} and aux["n"] == 3
    np.testing.assert_allclose(aux["y"], 2 * X)


def test_value_and_grad_with_aux_is_jax_shaped():
    (value, aux), g = value_and_grad(M.with_aux, has_aux=True)(X)
    assert value == pytest.approx(np.sum((2 * X) ** 2))
    np.testing.assert_allclose(g, 8 * X)
    np.testing.assert_allclose(aux["y"], 2 * X)


def test_has_aux_with_a_decorator_and_wrt_tuple():
    @grad(wrt=(0,), has_aux=True)
    def h(x, y):
        return np.sum(x * y), np.max(x)

    (g,), aux = h(X, 2.0)
    np.testing.assert_allclose(g, [2.0] * 3)
    assert aux == X.max()


def test_aux_from_either_branch():
    g = grad(M.aux_in_branches, has_aux=True)
    d, aux = g(X)
    np.testing.assert_allclose(d, 2 * X)
    assert aux == "positive"
    d, aux = g(-X)
    np.testing.assert_allclose(d, 3 * X ** 2)
    assert aux == "not positive"


def test_aux_changed_by_a_loop_is_its_last_value():
    (value, aux), d = value_and_grad(M.aux_in_loop, has_aux=True)(X, 3)
    np.testing.assert_allclose(aux, 8 * X)
    expected = numeric_grad(lambda x: M.aux_in_loop(x, 3)[0], [X], 0)
    np.testing.assert_allclose(d, expected, rtol=1e-6)


def test_aux_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def loss(w, x):
        z = jnp.tanh(x @ w)
        return jnp.sum(z ** 2), z

    def ours(w, x):
        z = np.tanh(x @ w)
        return np.sum(z ** 2), z

    m = load("""
        import numpy as np
        def ours(w, x):
            z = np.tanh(x @ w)
            return np.sum(z ** 2), z
    """)
    rng = np.random.default_rng(0)
    w, x = rng.normal(size=3), rng.normal(size=(4, 3))
    g, aux = grad(m.ours, has_aux=True)(w, x)
    jg, jaux = jax.grad(loss, has_aux=True)(w, x)
    np.testing.assert_allclose(g, jg, rtol=1e-10)
    np.testing.assert_allclose(aux, jaux, rtol=1e-12)
    assert ours(w, x)[0] == pytest.approx(float(loss(w, x)[0]))


@pytest.mark.parametrize(("name", "col"), [("not_a_pair", 12), ("pair_from_name", 12)])
def test_has_aux_needs_a_pair_written_out(name, col):
    with pytest.raises(SymdiffError) as e:
        grad(getattr(M, name), has_aux=True)(X)
    text = str(e.value)
    assert f":{col}: with has_aux=True the function returns a pair (value, aux), written out " \
        "in the return statement" in text
    assert "return loss, aux" in text


def test_without_has_aux_a_pair_is_refused_as_before():
    with pytest.raises(SymdiffError, match="returns a tuple; a gradient needs a scalar"):
        grad(M.with_aux)(X)


# --- kinds the lattice does not list: each checked at its first call --------------------

W = load("""
    import numpy as np

    def cubes(x):
        return np.sum(x * x * x)

    def triple(x):
        return x * x * 3.0

    def squared_data(x, K):
        return np.sum(x * (K * K))

    def counted(x, y):
        total = 0.0
        for i in range(x):
            total = total + y * x * x
        return total + y * x * x

    def with_aux(x):
        return np.sum(x * x), x * x

    def pick(x, mode):
        if mode == "sq":
            return np.sum(x * x)
        return np.sum(x)
""")


def test_array_subclasses_are_told_apart_by_dtype_and_ndim():
    g = grad(W.cubes)
    np.testing.assert_allclose(g(np.array([100.0, 20.0]).view(np.memmap)), [30000.0, 1200.0])
    u8 = np.array([100, 20], np.uint8).view(np.memmap)
    np.testing.assert_allclose(g(u8), [30000.0, 1200.0])  # not the float64 build again
    h = grad(W.squared_data)
    x = np.array([1.0, 2.0])
    h(x, np.array([3.0, 4.0]).view(np.memmap))
    np.testing.assert_allclose(h(x, u8), (u8 * u8).astype(float))  # wraps, as f's K * K


def test_a_type_not_listed_is_checked_at_its_first_call():
    g = grad(W.triple)
    assert g(np.longlong(2)) == 12.0
    with pytest.raises(SymdiffError, match="x received a NumPy scalar of complex numbers"):
        g(np.clongdouble(1 + 1j))


def test_masked_arrays_are_refused_wherever_they_stand():
    m = np.ma.array([1.0, 2.0], mask=[False, True])
    with pytest.raises(SymdiffError, match=r"x received a masked array \(np.ma\)"):
        grad(W.cubes)(m)
    with pytest.raises(SymdiffError, match=r"K received a masked array \(np.ma\)"):
        grad(W.squared_data)(np.ones(2), m)


def test_a_numpy_string_is_read_as_a_string():
    x = np.array([1.0, 2.0])
    modes = np.array(["sq", "lin"])
    np.testing.assert_allclose(grad(W.pick)(x, modes[0]), 2 * x)
    np.testing.assert_allclose(grad(W.pick)(x, modes[1]), [1.0, 1.0])


def test_a_narrow_integer_that_only_works_as_one_runs_its_own_build():
    g = grad(W.counted)  # range(x): the float64 copy raises, the uint8 build is run
    assert g(np.uint8(200), 1.0) == pytest.approx(201 * 2 * 200.0)  # (x + 1) terms: y * x * x
    assert g(3, 1.0) == pytest.approx(4 * 2 * 3.0)


@pytest.mark.parametrize("x", [np.array([200, 100], np.uint8), np.array([True, False])])
def test_aux_of_a_widened_argument_is_the_functions_own(x):
    g, aux = grad(W.with_aux, has_aux=True)(x)
    np.testing.assert_allclose(g, 2.0 * x.astype(float))
    assert aux.dtype == x.dtype
    np.testing.assert_array_equal(aux, W.with_aux(x)[1])
    (value, aux2), g2 = value_and_grad(W.with_aux, has_aux=True)(x)
    np.testing.assert_array_equal(aux2, W.with_aux(x)[1])


def test_function_for_is_what_a_call_runs():
    g = grad(W.squared_data)
    x, K = np.array([1.0, 2.0]), np.array([200, 100], np.uint8)
    fn = g.function_for(x, K)
    np.testing.assert_allclose(fn(x, K), g(x, K))
    assert g.function_for(x, K.astype(float)) is not fn


@pytest.mark.parametrize(("annotation", "expected"), [
    (None, kinds.FLOAT64), (float, kinds.FLOAT), ("int", Number("int")), ("bool", Number("bool")),
    (np.ndarray, kinds.FLOAT64), ("np.ndarray", kinds.FLOAT64), ("NDArray[np.float64]",
                                                                   kinds.FLOAT64),
    (dict, None), ("dict[str, np.ndarray]", None), ("list", None), ("Model", None),
    ((3, 4), Array("float64", 2)), ("(2,)", Array("float64", 1)), (3, Array("float64", 1)),
])
def test_an_annotation_names_a_kind_or_leaves_it_open(annotation, expected):
    assert kinds.annotated(annotation) == expected


def test_source_of_a_function_taking_a_dict_by_annotation_keeps_it_open():
    m = load("""
        import numpy as np
        def f(x, d: dict, n: int = 2):
            total = 0.0
            for k in d:
                total = total + d[k] * np.sum(x)
            return total * n
    """)
    g = grad(m.f)
    assert "for k in d:" in g.source  # a dict's loop, as written; d has no kind assumed
    np.testing.assert_allclose(g(X, {"a": 1.0, "b": 2.0}), [6.0] * 3)
