"""The transformations beyond grad: jvp, jacobian, hessian, grad of a gradient, and gradients
called inside a function being differentiated: their signatures, layouts (JAX's), caches and
errors. (The values of higher derivatives over a corpus: test_higher_order.py.)"""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from gradcheck import load, numeric_grad

from symdiff import SymdiffError, grad, hessian, jacobian, jvp, stop_gradient, value_and_grad

M = load("""
    import math
    import numpy as np
    from symdiff import grad, stop_gradient

    def cubic(x):
        return x ** 3 * math.sin(x)

    def two(x, y):
        return x ** 2 * y + math.exp(x * y)

    def three(x, y, z):
        return x * y * z + x ** 2 * z ** 3

    def vec(x):
        return np.sum(np.sin(x) * x ** 2)

    def pair(w, b):
        return np.sum(np.tanh(w * b) ** 2) + b ** 3

    def squares(x):
        return x ** 2

    def mixed(x, a):
        return a * x ** 3

    def frozen(x):
        return x * stop_gradient(x) ** 2

    d_vec = grad(vec)

    def calls_module_gradient(x):
        return np.sum(d_vec(x) ** 2)

    def calls_gradient(x):
        return np.sum(grad(vec)(x) * x)

    def calls_gradient_in_y(x, y):
        return grad(two, 1)(x, y) * x

    def aux(x):
        return x ** 2, x

    def twice_through(x):
        return np.sum(grad(calls_gradient)(x))

    def counted(x, n):
        s = 0.0
        for i in range(n):
            s = s + math.sin(x * i)
        return s
""")


def text_of(call) -> str:
    with pytest.raises(SymdiffError) as e:
        call()
    return str(e.value).replace(inspect.getsourcefile(M.cubic), "F")


def second(f, x, h=1e-5):
    """Central differences of f's gradient: f''(x) for a scalar function of a scalar."""
    g = grad(f)
    return (g(x + h) - g(x - h)) / (2 * h)


# --- grad of a gradient ---

def test_grad_of_grad_is_the_second_derivative():
    x = 0.7
    exact = 6 * x * np.sin(x) + 6 * x ** 2 * np.cos(x) - x ** 3 * np.sin(x)
    assert grad(grad(M.cubic))(x) == pytest.approx(exact, rel=1e-12)
    assert grad(grad(M.cubic))(x) == pytest.approx(second(M.cubic, x), rel=1e-7)


def test_third_order_composes():
    x = 0.7
    d3 = grad(grad(grad(M.cubic)))(x)
    h = 1e-4
    fd = (grad(grad(M.cubic))(x + h) - grad(grad(M.cubic))(x - h)) / (2 * h)
    assert d3 == pytest.approx(fd, rel=1e-6)


def test_mixed_partials_with_wrt():
    x, y = 0.3, -0.8
    dxy = grad(grad(M.two, wrt=1), wrt=0)(x, y)
    dyx = grad(grad(M.two, wrt=0), wrt=1)(x, y)
    exact = 2 * x + np.exp(x * y) * (1 + x * y)
    assert dxy == pytest.approx(exact, rel=1e-12)
    assert dyx == pytest.approx(exact, rel=1e-12)
    both = grad(grad(M.two, wrt="x"), wrt=("x", "y"))(x, y)
    assert isinstance(both, tuple) and both[1] == pytest.approx(exact, rel=1e-12)
    assert both[0] == pytest.approx(2 * y + y * y * np.exp(x * y), rel=1e-12)


def test_value_and_grad_of_a_gradient():
    value, d2 = value_and_grad(grad(M.cubic))(0.7)
    assert value == pytest.approx(grad(M.cubic)(0.7), rel=1e-14)
    assert d2 == pytest.approx(grad(grad(M.cubic))(0.7), rel=1e-14)


def test_a_second_derivative_through_stop_gradient_is_zero_where_jax_is():
    # x * sg(x)**2: first derivative sg(x)**2 = x**2 as a value, second 0 (JAX: 0)
    assert grad(M.frozen)(3.0) == 9.0
    assert grad(grad(M.frozen))(3.0) == 0.0


def test_grad_of_grad_shows_its_source():
    source = grad(grad(M.cubic)).source
    assert source.startswith("def grad_dcubic_dx(x):")
    assert "x_dot = 1.0" in source
    assert "_fit(dx, x)" in source


def test_grad_of_grad_of_an_array_parameter_is_refused_at_the_call():
    assert text_of(lambda: grad(grad(M.vec))(np.ones(3))) == (
        "grad of grad(vec) with respect to x: grad(vec) must give a scalar, but x has shape "
        "(3,); use hessian(vec) for the second derivatives of an array parameter")
    # (a 0-d array is a scalar)
    assert grad(grad(M.vec))(np.array(0.5)) == pytest.approx(
        2 * np.sin(0.5) + 4 * 0.5 * np.cos(0.5) - 0.25 * np.sin(0.5))


def test_grad_of_a_tuple_gradient_or_of_aux_is_refused():
    assert "returns a tuple, not a scalar; use hessian" in text_of(
        lambda: grad(grad(M.two, wrt=(0, 1))))
    assert "has_aux" in text_of(lambda: grad(grad(M.aux, has_aux=True)))
    assert "value_and_grad" in text_of(lambda: grad(value_and_grad(M.cubic)))


def test_grad_of_grad_in_a_container_is_refused_at_the_call():
    # grad(f) in a container is a container, not a scalar: its derivatives are a hessian's
    m = load("""
        def f(p):
            a, b = p
            return a ** 3 * b
    """)
    assert text_of(lambda: grad(grad(m.f))((2.0, 3.0))) == (
        "grad of grad(f) with respect to p: grad(f) must give a scalar, but p is a tuple; "
        "use hessian(f) for the second derivatives of an array parameter")


def test_the_gradient_of_a_method_gradient_is_refused():
    m = load("""
        class Model:
            def loss(self, x):
                return x ** 3
    """)
    assert "higher-order derivatives are not supported yet for methods" in text_of(
        lambda: grad(grad(m.Model().loss)))


def test_an_integer_parameter_of_a_second_derivative_stays_an_integer():
    x = 0.4
    d2 = grad(grad(M.counted))(x, 4)
    assert d2 == pytest.approx(-sum(i * i * np.sin(x * i) for i in range(4)), rel=1e-12)


# --- gradients called inside a function being differentiated ---

@pytest.mark.parametrize("name", ["calls_module_gradient", "calls_gradient"])
def test_a_gradient_called_inside_is_differentiated(name):
    f = getattr(M, name)
    x = np.array([0.3, -1.2, 0.8])
    assert np.allclose(grad(f)(x), numeric_grad(f, [x], 0), atol=1e-7)


def test_a_gradient_in_another_parameter_called_inside():
    f = M.calls_gradient_in_y
    for k in (0, 1):
        assert grad(f, wrt=k)(0.3, -0.8) == pytest.approx(
            numeric_grad(f, [0.3, -0.8], k), rel=1e-7)


def test_a_gradient_called_inside_shows_the_hessian_vector_product():
    source = grad(M.calls_gradient).source
    assert "_t0 = grad(vec)(x)  # line" in source
    assert "_gradient_vjp(grad(vec), (x,), " in source


def test_a_third_derivative_through_a_gradient_called_inside_is_refused_where_written():
    text = text_of(lambda: hessian(M.calls_gradient)(np.ones(2)))
    assert text.startswith("F:36:19: a derivative of higher order through grad(vec) is not "
                           "supported")
    assert "        return np.sum(grad(vec)(x) * x)\n                      ^" in text


# --- jvp ---

def test_jvp_takes_jax_signature():
    value, tangent = jvp(M.two, (0.3, -0.8), (1.0, 0.0))
    assert value == M.two(0.3, -0.8)
    assert tangent == pytest.approx(grad(M.two)(0.3, -0.8), rel=1e-14)
    value, tangent = jvp(M.two, [0.3, -0.8], [0.5, 2.0])
    dx, dy = grad(M.two, wrt=(0, 1))(0.3, -0.8)
    assert tangent == pytest.approx(0.5 * dx + 2.0 * dy, rel=1e-14)


def test_jvp_of_an_array_function_has_its_shape_and_precision():
    x = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    value, tangent = jvp(M.squares, (x,), (np.ones(3, dtype=np.float32),))
    assert tangent.dtype == np.float32 and tangent.shape == (3,)
    assert np.array_equal(tangent, 2 * x)


def test_jvp_holds_integers_constant():
    value, tangent = jvp(M.mixed, (2.0, 3), (1.0, 0))
    assert tangent == 36.0
    assert "a is int, held constant, but its tangent is not zero" in text_of(
        lambda: jvp(M.mixed, (2.0, 3), (1.0, 1)))


@pytest.mark.parametrize(("primals", "tangents", "says"), [
    ((1.0,), (1.0, 2.0), "1 primals but 2 tangents"),
    ((np.ones(3),), (np.ones(2),), "the tangent of argument 0 has shape (2,), its primal (3,)"),
    (1.0, 1.0, "must be tuples"),
])
def test_jvp_refuses_mismatched_arguments(primals, tangents, says):
    assert says in text_of(lambda: jvp(M.squares, primals, tangents))


def test_jvp_of_a_gradient_is_a_hessian_vector_product():
    x, v = np.array([0.3, -1.2, 0.8]), np.array([1.0, 0.5, -2.0])
    g, hv = jvp(grad(M.vec), (x,), (v,))
    assert np.allclose(g, grad(M.vec)(x), rtol=1e-14)
    h = 1e-6
    fd = (grad(M.vec)(x + h * v) - grad(M.vec)(x - h * v)) / (2 * h)
    assert np.allclose(hv, fd, atol=1e-7)


def test_jvp_of_a_tuple_gradient_gives_tuples():
    w, b = np.array([0.3, -1.2]), 0.7
    (gw, gb), (tw, tb) = jvp(grad(M.pair, wrt=(0, 1)), (w, b), (np.array([1.0, 0.0]), 0.5))
    assert np.allclose(gw, grad(M.pair)(w, b)) and gb == pytest.approx(grad(M.pair, 1)(w, b))
    h = 1e-6
    plus = grad(M.pair, wrt=(0, 1))(w + h * np.array([1.0, 0.0]), b + h * 0.5)
    minus = grad(M.pair, wrt=(0, 1))(w - h * np.array([1.0, 0.0]), b - h * 0.5)
    assert np.allclose(tw, (plus[0] - minus[0]) / (2 * h), atol=1e-7)
    assert tb == pytest.approx((plus[1] - minus[1]) / (2 * h), abs=1e-7)


# --- jacobian and hessian: JAX's layouts ---

def test_jacobian_layout_forward_and_reverse():
    x = np.array([0.5, 1.5, -2.0])
    assert np.array_equal(jacobian(M.squares)(x), np.diag(2 * x))
    # a scalar's Jacobian in an array: the array's shape (reverse: one row)
    assert jacobian(M.vec)(x).shape == (3,)
    assert np.allclose(jacobian(M.vec)(x), grad(M.vec)(x))
    # an array's Jacobian in a scalar: the value's shape
    j = jacobian(M.pair, wrt=1)(np.ones(2), 0.3)
    assert np.shape(j) == ()


def test_jacobian_with_a_tuple_wrt_gives_a_tuple():
    jw, jb = jacobian(M.pair, wrt=(0, 1))(np.array([0.2, 0.4]), 0.3)
    assert jw.shape == (2,) and np.shape(jb) == ()
    assert np.allclose(jw, grad(M.pair)(np.array([0.2, 0.4]), 0.3))


def test_hessian_layouts():
    x = np.array([0.3, -1.2, 0.8])
    H = hessian(M.vec)(x)
    assert H.shape == (3, 3) and np.allclose(H, H.T)
    assert np.allclose(H, np.diag(2 * np.sin(x) + 4 * x * np.cos(x) - x ** 2 * np.sin(x)))
    w, b = np.array([0.3, -1.2]), 0.7
    blocks = hessian(M.pair, wrt=(0, 1))(w, b)
    assert [[np.shape(B) for B in row] for row in blocks] == [[(2, 2), (2,)], [(2,), ()]]
    assert np.allclose(blocks[0][1], blocks[1][0])
    assert np.shape(hessian(M.pair, wrt=1)(w, b)) == ()


def test_jacobians_and_hessians_of_float32_are_float32():
    x = np.array([0.3, -1.2, 0.8], dtype=np.float32)
    assert hessian(M.vec)(x).dtype == np.float32
    assert jacobian(M.squares)(x).dtype == np.float32
    assert hessian(M.vec)(x.astype(np.float64)).dtype == np.float64


def test_a_hessian_called_again_keeps_only_what_the_kinds_of_its_arguments_fix():
    # A call that batched keeps its programs, blocks' dtype and scalar check per kinds of
    # the arguments: a call of other kinds (dtype, a number for an array) makes its own,
    # and one of the same kinds but another shape or values reads them afresh.
    m = load("""
        import numpy as np

        def f(w, v):
            return np.sum(np.tanh(w * v) ** 2) + np.sum(v ** 3 * w)
    """)
    h = hessian(m.f, wrt=(0, 1))
    a, b = np.array([0.3, -1.2]), np.array([0.7, 0.2])
    calls = [(a, b), (a, b), (np.array([0.5, 0.1, -0.4]), np.array([2.0, -0.3, 1.0])),
             (a.astype(np.float32), b.astype(np.float32)), (0.3, b), (a, -b)]
    for w, v in calls:
        got, expected = h(w, v), hessian(m.f, wrt=(0, 1))(w, v)  # (a new one: no plan)
        for row, expected_row in zip(got, expected, strict=True):
            for block, e in zip(row, expected_row, strict=True):
                assert np.shape(block) == np.shape(e) and block.dtype == e.dtype
                np.testing.assert_allclose(block, e, rtol=1e-12)
    assert h(*calls[3])[0][1].dtype == np.float32
    assert len(h._plans) == 2  # (float64 arrays and float32 ones; a number's 1 column loops)


def test_a_jacobian_by_rows_called_again_with_other_kinds():
    # (rows by gradients of <f, u>: the gradient is kept from call to call, built per kinds)
    m = load("""
        import numpy as np

        def f(x, A):
            return A @ np.sin(x)

        def twice(z):
            return 2.0 * z

        def g(x, A):
            return twice(A @ np.sin(x))
    """)
    rng = np.random.default_rng(3)
    j, jg = jacobian(m.f), jacobian(m.g)
    for n, dtype in [(4, np.float64), (4, np.float64), (6, np.float64), (4, np.float32),
                     (5, np.float64)]:
        x, A = rng.standard_normal(n).astype(dtype), rng.standard_normal((2, n)).astype(dtype)
        got = j(x, A)
        assert got.shape == (2, n) and got.dtype == dtype
        np.testing.assert_allclose(got, A * np.cos(x), rtol=1e-6)
        np.testing.assert_allclose(jg(x, A), 2.0 * A * np.cos(x), rtol=1e-6)
    m.twice = load("""
        def twice(z):
            return 3.0 * z
    """).twice
    np.testing.assert_allclose(jg(x, A), 3.0 * A * np.cos(x), rtol=1e-12)


def test_a_hessian_called_again_with_a_container_where_an_array_was():
    m = load("""
        import numpy as np

        def pair(p, x):
            a, s = p
            return np.sum(a * x) * s ** 3
    """)
    h, x = hessian(m.pair), np.array([0.1, -0.2, 0.3])
    for _ in range(2):
        np.testing.assert_allclose(h(np.array([0.5, 2.0]), x), [[0.0, 2.4], [2.4, 1.2]])
    (aa, a_s), (sa, ss) = h((np.array([0.5, 1.0, 2.0]), 2.0), x)
    assert aa.shape == (3, 3) and not aa.any() and ss == pytest.approx(5.4)
    np.testing.assert_allclose(a_s, [1.2, -2.4, 3.6])
    np.testing.assert_allclose(sa, a_s)


def test_a_hessian_called_again_checks_a_value_whose_shape_its_values_fix():
    # squeeze gives a scalar for one row, not for two: the same kinds, so each call checks
    m = load("""
        import numpy as np

        def f(x):
            return np.squeeze(np.sum(x ** 3, axis=1))
    """)
    h = hessian(m.f)
    for _ in range(2):
        np.testing.assert_allclose(h(np.ones((1, 3))), 6 * np.eye(3).reshape(1, 3, 1, 3))
    with pytest.raises(SymdiffError, match="returned an array of shape \\(2,\\); a Hessian"):
        h(np.ones((2, 3)))
    np.testing.assert_allclose(h(np.full((1, 2), 2.0)), 12 * np.eye(2).reshape(1, 2, 1, 2))


def test_a_hessian_called_again_raises_what_the_function_raises():
    # (without calling the function where its value is a scalar whatever the values, the
    # repeated call still fails as the function fails: the function's own error)
    m = load("""
        import numpy as np

        def f(x):
            assert x[0] > 0, "x[0] must be positive"
            return np.sum(x ** 3)
    """)
    h = hessian(m.f)
    for _ in range(2):
        np.testing.assert_allclose(h(np.ones(3)), 6 * np.eye(3))
    with pytest.raises(AssertionError, match="x\\[0\\] must be positive"):
        h(np.array([-1.0, 1.0, 1.0]))
    np.testing.assert_allclose(h(np.full(3, 2.0)), 12 * np.eye(3))


def test_a_hessian_called_once_copies():
    # (by the pickle protocol, as pickle does: its plans are not state)
    import copy

    h, x = hessian(M.vec), np.array([0.3, -1.2, 0.8])
    H = h(x)
    for other in (copy.deepcopy(h), copy.copy(h)):
        assert other._plans == {}
        np.testing.assert_allclose(other(x), H, rtol=1e-12)
        np.testing.assert_allclose(other(x), H, rtol=1e-12)


def test_a_hessian_called_again_follows_module_data_and_helpers():
    m = _weighted_cubes()
    h, x = hessian(m.f), np.array([0.5, -1.0, 2.0])
    for _ in range(2):
        np.testing.assert_allclose(h(x), np.diag(6 * m.W * x))
    m.W = np.array([5.0, -1.0, 0.5])
    np.testing.assert_allclose(h(x), np.diag(6 * m.W * x))
    m.cube = _quartic()
    np.testing.assert_allclose(h(x), np.diag(12 * m.W * x ** 2))
    np.testing.assert_allclose(h(x), np.diag(12 * m.W * x ** 2))


def test_hessian_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def pair(w, b):
        return jnp.sum(jnp.tanh(w * b) ** 2) + b ** 3

    w, b = np.array([0.3, -1.2]), 0.7
    ours = hessian(M.pair, wrt=(0, 1))(w, b)
    theirs = jax.hessian(pair, argnums=(0, 1))(w, b)
    for i in range(2):
        for j in range(2):
            assert np.allclose(ours[i][j], np.asarray(theirs[i][j]), rtol=1e-12, atol=1e-14)


def test_a_vector_output_given_to_grad_points_to_jacobian():
    assert "take jacobian(f) for the derivatives of every element" in text_of(
        lambda: grad(M.squares)(np.ones(2)))


# --- containers: dict, tuple and list parameters, as grad takes them (JAX's layouts) ---

T = load("""
    import numpy as np

    def dense(params, x):
        return np.sum(np.tanh(params["W"] @ x) * params["b"]) + params["s"] ** 2

    def rows(params, x):
        return np.tanh(params["W"] @ x) * params["s"]

    def pair(p, x):
        a, s = p
        return np.sum(a * x) * s ** 3

    def counted(p, x):
        return np.sum(p["w"] * x) * p["n"]
""")


def _dense_args(dtype=np.float64):
    params = {"W": np.arange(6.0).reshape(2, 3).astype(dtype) / 10, "b": np.ones(2, dtype),
              "s": 0.5}
    return params, np.array([0.1, -0.2, 0.3], dtype)


def _shapes(tree):
    if type(tree) is dict:
        return {k: _shapes(v) for k, v in tree.items()}
    if type(tree) in (tuple, list):
        return type(tree)(map(_shapes, tree))
    return np.shape(tree)


def test_jvp_of_a_container_takes_a_tangent_of_its_structure():
    params, x = _dense_args()
    v = {"W": np.ones((2, 3)), "b": np.zeros(2), "s": 1.0}
    value, tangent = jvp(T.dense, (params, x), (v, np.zeros(3)))
    assert value == T.dense(params, x)
    g = grad(T.dense)(params, x)
    assert tangent == pytest.approx(np.sum(g["W"]) + g["s"], rel=1e-12)


@pytest.mark.parametrize(("tangent", "says"), [
    ({"W": np.ones(3), "b": np.ones(2), "s": 1.0},
     "params['W'] has shape (3,) in the tangent, (2, 3) in the primal"),
    ({"W": np.ones((2, 3)), "s": 1.0},
     "params has the keys ['W', 's'] in the tangent, ['W', 'b', 's'] in the primal"),
    ((np.ones((2, 3)), np.ones(2), 1.0), "params is a tuple in the tangent, a dict in the primal"),
    ({"W": np.ones((2, 3)), "b": [np.ones(1), np.ones(1)], "s": 1.0},
     "params['b'] is a list in the tangent, an array of shape (2,) in the primal"),
])
def test_jvp_refuses_a_tangent_of_another_structure(tangent, says):
    params, x = _dense_args()
    assert text_of(lambda: jvp(T.dense, (params, x), (tangent, x))) == (
        f"jvp of dense: the tangent of params does not have its primal's structure: {says}; "
        "give a tangent of the same containers, keys and shapes")
    assert text_of(lambda: jvp(T.pair, ((x, 1.0), x), ((x,), x))) == (
        "jvp of pair: the tangent of p does not have its primal's structure: p has 1 item in "
        "the tangent, 2 in the primal; give a tangent of the same containers, keys and shapes")


def test_an_integer_leaf_is_held_constant_by_jvp_and_refused_by_jacobian_and_hessian():
    p, x = {"w": np.array([0.5, 1.0]), "n": 3}, np.array([2.0, -1.0])
    value, tangent = jvp(T.counted, (p, x), ({"w": np.ones(2), "n": 0}, np.zeros(2)))
    assert (value, tangent) == (0.0, 3.0)
    assert text_of(lambda: jvp(T.counted, (p, x), ({"w": np.ones(2), "n": 1}, x))) == (
        "jvp of counted: p['n'] is int, held constant, but its tangent is not zero; pass it "
        "as a float to differentiate it")
    for what, call in [("jacobian", jacobian(T.counted)), ("hessian", hessian(T.counted))]:
        assert text_of(lambda call=call: call(p, x)) == (
            f"{what} of counted with respect to p['n']: p['n'] is int, not a float")
    assert text_of(lambda: jvp(grad(T.counted), (p, x), (p, x))) == (
        "jvp of grad(counted): p['n'] is not a float argument; it cannot be differentiated")
    # (with respect to x alone, p is read: its integer is no matter)
    assert np.array_equal(hessian(T.counted, wrt=1)(p, x), np.zeros((2, 2)))


def test_jacobian_in_a_container_has_its_structure():
    params, x = _dense_args()
    params = {"W": params["W"], "s": 1.5}
    J = jacobian(T.rows)(params, x)  # (rows: one reverse sweep per output)
    assert _shapes(J) == {"W": (2, 2, 3), "s": (2,)}
    Jp, Jx = jacobian(T.rows, wrt=(0, 1))(params, x)
    assert _shapes(Jp) == {"W": (2, 2, 3), "s": (2,)} and Jx.shape == (2, 3)
    np.testing.assert_allclose(Jp["s"], np.tanh(params["W"] @ x), rtol=1e-14)
    # forward sweeps (3 columns for 5 outputs): the same layout
    m = load("""
        import numpy as np
        def f(p, x):
            return np.sin(p[0] * x) + (np.sum(p[1][1] ** 2) + p[1][0]) * x
    """)
    J = jacobian(m.f)((0.3, [np.array(0.5), np.array([1.0, 2.0])]), np.ones(5))
    assert _shapes(J) == ((5,), [(5,), (5, 2)])
    np.testing.assert_allclose(J[1][1], np.outer(np.ones(5), [2.0, 4.0]))


def test_hessian_in_a_container_nests_as_jax_does():
    params, x = _dense_args()
    H = hessian(T.dense)(params, x)
    assert _shapes(H) == {"W": {"W": (2, 3, 2, 3), "b": (2, 3, 2), "s": (2, 3)},
                          "b": {"W": (2, 2, 3), "b": (2, 2), "s": (2,)},
                          "s": {"W": (2, 3), "b": (2,), "s": ()}}
    assert H["s"]["s"] == 2.0
    np.testing.assert_allclose(H["W"]["b"], np.moveaxis(H["b"]["W"], 0, -1), rtol=1e-12)
    # a tuple wrt mixing a container and an array: at each leaf, a pair of blocks
    Hp, Hx = hessian(T.dense, wrt=(0, 1))(params, x)
    assert _shapes(Hp) == {"W": ({"W": (2, 3, 2, 3), "b": (2, 3, 2), "s": (2, 3)}, (2, 3, 3)),
                           "b": ({"W": (2, 2, 3), "b": (2, 2), "s": (2,)}, (2, 3)),
                           "s": ({"W": (2, 3), "b": (2,), "s": ()}, (3,))}
    assert _shapes(Hx) == ({"W": (3, 2, 3), "b": (3, 2), "s": (3,)}, (3, 3))
    np.testing.assert_allclose(Hp["W"][1], np.moveaxis(Hx[0]["W"], 0, -1), rtol=1e-12)
    np.testing.assert_allclose(Hp["W"][0]["b"], H["W"]["b"], rtol=1e-12)
    # a tuple parameter: tuples inside
    assert _shapes(hessian(T.pair)((x, 2.0), x)) == (((3, 3), (3,)), ((3,), ()))


def test_transformations_of_float32_leaves_are_float32():
    params, x = _dense_args(np.float32)
    params["s"] = np.float32(0.5)
    H = hessian(T.dense)(params, x)
    assert H["W"]["b"].dtype == np.float32 and H["s"]["s"].dtype == np.float32
    assert jacobian(T.rows)(params, x)["W"].dtype == np.float32
    _, tangent = jvp(T.rows, (params, x), (params, x))
    assert tangent.dtype == np.float32
    wide = {k: np.float64(v) if np.ndim(v) == 0 else v.astype(np.float64)
            for k, v in params.items()}
    np.testing.assert_allclose(H["W"]["W"], hessian(T.dense)(wide, x.astype(np.float64))[
        "W"]["W"], rtol=1e-5, atol=1e-6)


def test_a_container_not_differentiated_is_read():
    params, x = _dense_args()
    H = hessian(T.dense, wrt=1)(params, x)
    assert H.shape == (3, 3)
    assert jacobian(T.rows, wrt=1)(params, x).shape == (2, 3)
    zero = {"W": np.zeros((2, 3)), "b": np.zeros(2), "s": 0.0}
    _, tangent = jvp(T.dense, (params, x), (zero, np.ones(3)))
    assert tangent == pytest.approx(np.sum(grad(T.dense, wrt=1)(params, x)), rel=1e-12)
    _, hv = jvp(grad(T.dense, wrt=1), (params, x), (zero, np.ones(3)))
    np.testing.assert_allclose(hv, H @ np.ones(3), rtol=1e-12)


def test_a_tangent_program_of_a_container_takes_a_tangent_per_leaf_and_is_kept_per_kinds():
    from symdiff import kinds
    from symdiff.higher import tangent_function

    params, x = _dense_args()
    trees = (("params", kinds.kind(params)),)
    tf = tangent_function(T.dense, ("params",), trees=trees)
    assert tf.source.startswith("def jvp_dense(params, x, params_W_dot, params_b_dot, "
                                "params_s_dot):\n")
    assert "    params_W = params['W']\n" in tf.source
    assert tf.params == ("params", "x", "params_W_dot", "params_b_dot", "params_s_dot")
    assert tangent_function(T.dense, ("params",), trees=trees) is tf
    narrow = (("params", kinds.kind(_dense_args(np.float32)[0])),)
    assert tangent_function(T.dense, ("params",), trees=narrow) is not tf
    # the kind-free program (no container differentiated) is the one it was
    assert tangent_function(T.dense, ("x",)).params == ("params", "x", "x_dot")


@pytest.mark.parametrize("value", [
    [1.0, 2], [np.float32(1.0), True], [[1.0], [2.0, 3]], [], np.ones(2), 1.0,
    [np.ones(2)], [np.array(1.0)], [1.0, np.ones(2)], [[1.0], np.ones(1)], (1.0,), {},
    ["a"], [None], [1 + 2j],
], ids=repr)
def test_the_api_tells_containers_as_lowering_does(value):
    # (the API passes a container's leaves in the order lowering names them)
    from symdiff import kinds, pytrees
    from symdiff.containers import is_tree

    assert pytrees.is_container(value) == (
        type(value) in (dict, tuple, list) and is_tree(kinds.kind(value)))


def test_a_hessian_of_a_container_from_the_disk_cache_needs_no_sympy(tmp_path):
    import symdiff

    module = tmp_path / "tree_module.py"
    module.write_text(textwrap.dedent("""
        import numpy as np
        def f(p, x):
            return np.sum(np.sin(p["W"] @ x)) * p["s"] ** 2
    """))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        import tree_module
        from symdiff import hessian, jvp
        p, x = {{"W": np.ones((2, 3)), "s": 0.5}}, np.ones(3)
        print(hessian(tree_module.f)(p, x)["W"]["s"].sum(),
              jvp(tree_module.f, (p, x), (p, x))[1], "sympy" in sys.modules)
    """)
    env = {"SYMDIFF_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(symdiff.__file__).parents[1])}
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    assert first[:2] == again[:2] and first[2] == "True" and again[2] == "False"


# --- caches ---

def test_a_second_derivative_from_the_disk_cache_needs_no_sympy(tmp_path):
    module = tmp_path / "second_module.py"
    module.write_text(textwrap.dedent("""
        import math
        def f(x):
            return x ** 3 * math.sin(x)
    """))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import second_module
        from symdiff import grad
        print(grad(grad(second_module.f))(0.7), "sympy" in sys.modules)
    """)
    env = {"SYMDIFF_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    again = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env=env, check=True).stdout.split()
    assert first[0] == again[0] and first[1] == "True" and again[1] == "False"


def test_a_tangent_program_follows_a_redefined_helper():
    m = load("""
        def helper(x):
            return x ** 2

        def f(x):
            return helper(x) * x
    """)
    assert grad(grad(m.f))(2.0) == pytest.approx(12.0)  # (x**3)'' = 6x
    m.helper = load("""
        def helper(x):
            return x ** 3
    """).helper
    assert grad(grad(m.f))(2.0) == pytest.approx(48.0)  # (x**4)'' = 12x**2


def test_stop_gradient_is_kept_in_a_jvp():
    value, tangent = jvp(M.frozen, (3.0,), (1.0,))
    assert value == 27.0 and tangent == 9.0
    assert stop_gradient(2.0) == 2.0


# --- what a kept transformation follows, and calls as Python makes them ---


def _weighted_cubes():
    """A module whose f reads module data W and a helper cube, both replaced by the tests."""
    return load("""
        import numpy as np

        W = np.array([1.0, 2.0, 3.0])

        def cube(z):
            return z ** 3

        def f(x):
            return np.sum(W * cube(x))
    """)


def _quartic():
    return load("""
        def cube(z):
            return z ** 4
    """).cube


def test_a_kept_second_derivative_follows_module_data_and_helpers():
    m = _weighted_cubes()
    h = grad(grad(m.f))
    assert h(0.5) == pytest.approx(18.0)  # 6 * 0.5 * 6
    m.W = np.array([5.0, -1.0, 0.5])
    assert h(0.5) == pytest.approx(13.5)
    m.cube = _quartic()
    assert h(0.5) == pytest.approx(4.5 * 12 * 0.25)


def test_jvp_follows_a_redefined_helper():
    m = load("""
        def cube(z):
            return z ** 3

        def g(x):
            return cube(x) * x
    """)
    assert jvp(m.g, (2.0,), (1.0,))[1] == pytest.approx(32.0)
    m.cube = load("""
        def cube(z):
            return z ** 2
    """).cube
    assert jvp(m.g, (2.0,), (1.0,))[1] == pytest.approx(12.0)
    assert jvp(grad(m.g), (2.0,), (1.0,))[1] == pytest.approx(12.0)


def test_jvp_returns_a_tangent_of_its_own():
    t = np.array([1.0, 2.0])
    _, dot = jvp(M.squares, (np.ones(2),), (t,))
    assert dot is not t
    m = load("""
        def same(x):
            return x
    """)
    _, dot = jvp(m.same, (np.ones(2),), (t,))
    assert dot is not t and np.array_equal(dot, t)


def test_the_second_derivative_of_a_lambda():
    m = load("""
        cube = lambda z: z ** 3
    """)
    assert grad(grad(m.cube))(2.0) == pytest.approx(12.0)


def test_hessian_and_jacobian_take_arguments_as_the_function_does():
    m = load("""
        import numpy as np

        def f(x, s=2.0):
            return s * np.sum(x ** 3)

        def g(x, y):
            return np.outer(x, y) ** 2
    """)
    x = np.array([0.5, -1.0])
    assert np.allclose(hessian(m.f)(x, s=3.0), np.diag(18 * x))
    assert np.allclose(hessian(m.f)(x), np.diag(12 * x))
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        hessian(m.f)()
    y = np.array([1.0, 2.0, 3.0])
    jx, jx2 = jacobian(m.g, wrt=(0, 0))(x, y)
    assert jx.shape == (2, 3, 2) and np.array_equal(jx, jx2)


def test_transformations_of_arrays_of_derivatives_are_refused():
    for call in [lambda: hessian(hessian(M.vec)), lambda: grad(jacobian(M.vec)),
                 lambda: jvp(hessian(M.vec), (np.ones(2),), (np.ones(2),))]:
        assert "not functions symdiff differentiates again" in text_of(call)


def test_the_hessian_of_a_vector_function_says_so():
    assert text_of(lambda: hessian(M.squares)(np.ones(3))) == (
        "hessian of squares: it returned an array of shape (3,); a Hessian needs a scalar "
        "output (reduce it first; jacobian(f) gives the first derivatives of every element)")
