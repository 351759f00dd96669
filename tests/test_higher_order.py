"""Forward mode (jvp) and reverse over forward mode (Hessian-vector products, hessian,
grad of grad), on a corpus of functions covering what the IR has: elementwise functions,
branches, loops, helpers, stop_gradient, in-place writes, lists, array operations.

Each tangent is checked against the gradient contracted with the tangent and against
central differences of the function along it; each second derivative against central
differences of the (first-order, separately tested) gradient; JAX where installed.
"""

import types
from functools import partial

import numpy as np
import pytest
from gradcheck import batched_and_looped, load

from symdiff import SymdiffError, grad, hessian, jacobian, jvp, rules
from symdiff.higher import tangent_function

# Array operations' tangents come with their rows' classification (branch jvprules): until
# it is merged, only the elementwise functions have them.
needs_array_rules = pytest.mark.skipif(
    not hasattr(rules.ARRAY_OPS[0], "linear"), reason="array operations' tangents (jvprules)")

CORPUS = load("""
import math

import numpy as np

from symdiff import stop_gradient


def trig(x):
    return np.sin(x) * np.cos(2.0 * x) + np.tan(x / 3.0) + np.arctan(x) * np.sinh(x / 2)


def explog(x):
    return np.exp(-x) * np.log(1.0 + x ** 2) + np.log1p(x * x) + np.sqrt(x * x + 1.0)


def power(x, y):
    return x ** y + np.power(y, 1.5) * x


def absolute(x):
    return abs(x) * x ** 2 + np.abs(x - 0.25)


def extremes(x, y):
    return np.maximum(x, y) * np.minimum(x, 2.0 * y) + np.fmax(x * y, 0.1)


def selected(x):
    return np.where(x > 0.1, x ** 2, np.sin(x)) + np.clip(x, -0.5, 0.5) * x


def smooth(x, y):
    return np.logaddexp(x, 2.0 * y) + 1.0 / (1.0 + np.exp(-x * y)) + np.tanh(y)


def erf(x):
    return math.erf(x) * x + math.erfc(x / 2.0)


def branches(x, y):
    if x > y:
        z = x * y
    elif x > 0.0:
        z = np.sin(x) - y
    else:
        z = y ** 2
    return z * x + (x if y > 0.3 else y ** 3)


def for_range(x, n):
    s = 0.0
    for i in range(n):
        s = s * np.cos(x) + x ** (i + 1)
    return s


def while_break(x):
    s = x
    k = 0
    while k < 10:
        s = np.sin(s) + x * s
        k += 1
        if s > 5.0:
            break
    return s


def _inner(a, b):
    return a * np.exp(-b) + b


def helper(x, y):
    return _inner(x, y) * _inner(y, x)


def unbound_on_a_path(x, c):
    if c > 0:
        z = x * 2.0
    for i in range(2):
        z = x * (i + 1)
    return z * x


def constant(x):
    return 3.0


def independent(x, y):
    return y ** 2
""")

SCALARS = [  # (name, the arguments)
    ("trig", (0.7,)),
    ("explog", (0.8,)),
    ("power", (1.3, 0.7)),
    ("absolute", (-0.6,)),
    ("extremes", (0.4, 0.9)),
    ("extremes", (0.9, 0.4)),
    pytest.param("selected", (0.3,), marks=needs_array_rules),
    pytest.param("selected", (-0.2,), marks=needs_array_rules),
    ("smooth", (0.5, -0.3)),
    ("erf", (0.6,)),
    ("branches", (0.9, 0.4)),
    ("branches", (0.5, 0.8)),
    ("branches", (-0.5, 0.2)),
    ("for_range", (0.6, 3)),
    ("for_range", (0.6, 0)),
    ("while_break", (0.5,)),
    ("while_break", (1.2,)),
    ("helper", (0.5, 0.8)),
    ("unbound_on_a_path", (0.5, 1)),
    ("unbound_on_a_path", (0.5, -1)),
    ("constant", (0.5,)),
    ("independent", (0.5, 0.2)),
]


def _args(case):
    return case.values[1] if hasattr(case, "values") else case[1]


def _ids(cases):
    def show(a):
        return f"{np.shape(a)}" if isinstance(a, np.ndarray) else repr(a)

    return [f"{c.values[0] if hasattr(c, 'values') else c[0]}-{k}-"
            + ",".join(show(a) for a in _args(c)) for k, c in enumerate(cases)]


def _floats(args):
    return tuple(i for i, a in enumerate(args) if np.asarray(a).dtype.kind == "f")


def _tangents(args, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        if np.asarray(a).dtype.kind != "f":
            out.append(np.zeros_like(a) if np.ndim(a) else 0)
        elif np.ndim(a):
            out.append(rng.standard_normal(np.shape(a)).astype(np.asarray(a).dtype))
        else:
            out.append(float(rng.standard_normal()))
    return tuple(out)


def _along(f, args, tangents, h=1e-6):
    """Central differences of ``f`` along ``tangents`` (float arguments only)."""
    plus = [a + h * t if np.asarray(a).dtype.kind == "f" else a
            for a, t in zip(args, tangents, strict=True)]
    minus = [a - h * t if np.asarray(a).dtype.kind == "f" else a
             for a, t in zip(args, tangents, strict=True)]
    fp, fm = f(*plus), f(*minus)
    if isinstance(fp, tuple):
        return tuple((np.asarray(p) - np.asarray(m)) / (2 * h)
                     for p, m in zip(fp, fm, strict=True))
    return (np.asarray(fp, dtype=float) - np.asarray(fm, dtype=float)) / (2 * h)


def _check_jvp(f, args, seed=0):
    tangents = _tangents(args, seed)
    value, dot = jvp(f, args, tangents)
    np.testing.assert_allclose(value, f(*args))
    assert np.shape(dot) == np.shape(value)
    np.testing.assert_allclose(dot, _along(f, args, tangents), rtol=1e-5, atol=1e-6)
    return value, dot, tangents


@pytest.mark.parametrize(("name", "args"), SCALARS, ids=_ids(SCALARS))
def test_jvp_of_a_scalar_function(name, args):
    f = getattr(CORPUS, name)
    _, dot, tangents = _check_jvp(f, args)
    wrt = _floats(args)
    grads = grad(f, wrt=wrt)(*args)
    contracted = sum(np.sum(g * tangents[i]) for g, i in zip(grads, wrt, strict=True))
    np.testing.assert_allclose(dot, contracted, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("name", "args"), SCALARS, ids=_ids(SCALARS))
def test_hessian_vector_product_of_a_scalar_function(name, args):
    f = getattr(CORPUS, name)
    wrt = _floats(args)
    g = grad(f, wrt=wrt)
    tangents = _tangents(args, 1)
    value, hv = jvp(g, args, tangents)
    np.testing.assert_allclose(value, g(*args), rtol=1e-12)
    expected = _along(g, args, tangents)
    for got, want in zip(hv, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # hessian's blocks, contracted with the tangents, are the same product
    H = hessian(f, wrt=wrt)(*args)
    for i, row in enumerate(H):
        got = sum(np.tensordot(row[j], tangents[w], np.ndim(tangents[w]))
                  for j, w in enumerate(wrt))
        np.testing.assert_allclose(got, expected[i], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "args"), [c for c in SCALARS if len(_floats(_args(c))) == 1],
                         ids=_ids([c for c in SCALARS if len(_floats(_args(c))) == 1]))
def test_second_and_third_derivatives_of_a_function_of_one_scalar(name, args):
    f = getattr(CORPUS, name)
    (w,) = _floats(args)
    g = grad(f, wrt=w)
    gg = grad(g, wrt=w)
    e = np.zeros(len(args))
    e[w] = 1.0
    assert gg(*args) == pytest.approx(float(_along(g, args, e)), rel=1e-5, abs=1e-6)
    ggg = grad(gg, wrt=w)
    assert ggg(*args) == pytest.approx(float(_along(gg, args, e)), rel=1e-5, abs=1e-6)


# --- stop_gradient: a constant at every order, as in JAX ---

STOPPED = load("""
import numpy as np

from symdiff import stop_gradient


def stopped(x):
    return x * stop_gradient(x ** 2) + x ** 3


def shifted(x):
    return np.sum(np.exp(x - stop_gradient(np.max(x))))


def softmax_stable(x):
    z = x - stop_gradient(np.max(x))
    return np.log(np.sum(np.exp(z))) + stop_gradient(np.max(x))
""")


def test_second_derivative_through_a_stop_gradient_is_zero():
    f = STOPPED.stopped
    # f' = x**2 (stopped) + 3 x**2; f'' = 6 x (nothing through the stopped factor)
    assert grad(f)(1.5) == pytest.approx(4 * 1.5 ** 2)
    assert grad(grad(f))(1.5) == pytest.approx(6 * 1.5)
    assert grad(grad(grad(f)))(1.5) == pytest.approx(6.0)
    assert jvp(f, (1.5,), (2.0,))[1] == pytest.approx(2.0 * 4 * 1.5 ** 2)
    assert jvp(grad(f), (1.5,), (2.0,))[1] == pytest.approx(2.0 * 6 * 1.5)
    assert "stop_gradient(x ** 2)" in tangent_function(f, ("x",)).source


@needs_array_rules
@pytest.mark.parametrize("x", [np.array([0.3, -1.2, 0.8]), np.array([0.8, -1.2, 0.8])],
                         ids=["distinct", "tied"])
def test_shifted_by_a_stopped_maximum(x):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def reference(x):
        return jnp.sum(jnp.exp(x - jax.lax.stop_gradient(jnp.max(x))))

    v = np.array([0.5, -1.0, 2.0])
    f = STOPPED.shifted
    _, dot = jvp(f, (x,), (v,))
    assert dot == pytest.approx(float(jax.jvp(reference, (x,), (v,))[1]))
    np.testing.assert_allclose(hessian(f)(x), jax.hessian(reference)(x), rtol=1e-10)
    np.testing.assert_allclose(jvp(grad(f), (x,), (v,))[1],
                               jax.hessian(reference)(x) @ v, rtol=1e-10)
    # log-sum-exp shifted by a stopped maximum is log-sum-exp: the maximum's ties and
    # its stop_gradient change nothing at either order
    g = STOPPED.softmax_stable
    p = np.exp(x) / np.sum(np.exp(x))
    np.testing.assert_allclose(jvp(g, (x,), (v,))[1], p @ v, rtol=1e-12)
    np.testing.assert_allclose(hessian(g)(x), np.diag(p) - np.outer(p, p), atol=1e-12)


# --- array functions ---

ARRAYS = load("""
import numpy as np


def reductions(x):
    return np.sum(x ** 2, axis=1) @ np.mean(np.sin(x), axis=1) + np.sum(x[1:, :2])


def linear_algebra(A, v):
    w = A @ v
    B = np.reshape(A, (2, 6)).T
    return np.sum(w ** 2) + np.sum(np.transpose(B) * 0.5) + v @ (A.T @ A)[:, 0]


def one_operand_twice(v, A):
    return v @ v + np.sum(np.outer(v, v)) + np.dot(v, A @ v) + np.sum(A @ A)


def several_values(x, A):
    a, b = np.split(x, 2)
    q, r = np.linalg.qr(A)
    s = np.linalg.svd(A, compute_uv=False)
    return np.sum(a * b ** 2) + np.sum(q[:, 0] * r[0]) + np.sum(s ** 2) + s[0] * a[0]


def rows(A, v):
    s = 0.0
    for row in A:
        s = s + np.sum(np.tanh(row * v))
    return s


def carried_array(x):
    h = np.zeros_like(x)
    for i in range(3):
        h = np.sin(h + x) * x
    return np.sum(h)


def written(x):
    n = x.shape[0]
    out = np.zeros(n)
    for i in range(n):
        out[i] = x[i] ** 2 * (i + 1)
    out[0] = out[0] + np.sum(x)
    return np.sum(out * x)


def written_into_integers(x, y):
    out = np.zeros(3, dtype=int)
    out[0] = x[0] * 2.5
    copied = np.copy(y)
    copied[1] = x[1] * 1.5
    filled = np.full(3, 2)
    filled[2] = x[2] * 3.5
    return np.sum(out * x) + np.sum(copied * x) + np.sum(filled * x)


def appended(x):
    parts = []
    for i in range(3):
        parts.append(x * (i + 1.0))
    return np.sum(np.stack(parts) ** 2)


def started_with_an_item(x):
    h = x
    hs = [h]
    for k in range(3):
        h = np.tanh(h * 1.3 + 0.1)
        hs.append(h)
    return np.sum(np.stack(hs, axis=1) ** 2) + sum(np.sum(v) for v in hs)


def comprehension(x):
    ys = [np.exp(x[i]) * i for i in range(x.shape[0])]
    return sum(ys) + np.sum(np.array([x[0], x[1] * 2.0, 1.0]))


def maximum_on_axis(x):
    return np.sum(np.max(x, axis=0) ** 2) + np.min(x)


def branch_on_a_sum(x):
    if np.sum(x) > 0:
        y = x * np.exp(x)
    else:
        y = x ** 3
    return np.sum(y)


def while_array(x):
    h = x
    k = 0
    while np.sum(h ** 2) < 10.0 and k < 5:
        h = h * 1.5 + np.sin(x)
        k += 1
    return np.sum(h * x)


def _soft(v, c):
    if c > 0:
        return np.log(1.0 + np.exp(v * c))
    return v * c


def helper_branches(x, c):
    return np.sum(_soft(x, c) * _soft(x ** 2, -c))


def rows_break(A):
    s = np.zeros(A.shape[1])
    for row in A:
        if np.sum(row) > 2.0:
            break
        s = s + row ** 2 * A[0]
    return np.sum(s)


def single_element(x):
    return x[1] ** 3 * np.sum(x)


def zero_d(x):
    return np.sin(x) * x ** 2


def empty_axis(x, y):
    return np.sum(x ** 2) + np.sum(y ** 3)


def vector_valued(x, y):
    return np.sin(x) * y + x[::-1] ** 2
""")

_R = np.random.default_rng(5)
ARRAY_CASES = [
    ("reductions", (_R.standard_normal((3, 4)),)),
    ("linear_algebra", (_R.standard_normal((3, 4)), _R.standard_normal(4))),
    ("one_operand_twice", (_R.standard_normal(3), _R.standard_normal((3, 3)))),
    ("several_values", (_R.standard_normal(4), _R.standard_normal((3, 3)))),
    ("rows", (_R.standard_normal((3, 4)), _R.standard_normal(4))),
    ("carried_array", (_R.standard_normal(3),)),
    ("written", (_R.standard_normal(4),)),
    ("written_into_integers", (np.array([1.3, -0.7, 2.1]), np.array([1, 2, 3]))),
    ("written_into_integers", (np.array([1.3, -0.7, 2.1]), np.array([1.0, 2.0, 3.0]))),
    ("appended", (_R.standard_normal(3),)),
    ("started_with_an_item", (_R.standard_normal(3),)),
    ("comprehension", (_R.standard_normal(3),)),
    ("maximum_on_axis", (_R.standard_normal((3, 2)),)),
    ("maximum_on_axis", (np.array([[1.0, 2.0], [1.0, 0.5], [0.3, 2.0]]),)),  # ties
    ("branch_on_a_sum", (np.array([0.5, 0.2]),)),
    ("branch_on_a_sum", (np.array([-0.5, 0.2]),)),
    ("while_array", (np.array([0.5, -0.3]),)),
    ("helper_branches", (_R.standard_normal(3), 1.5)),
    ("helper_branches", (_R.standard_normal(3), -0.5)),
    ("rows_break", (np.array([[0.3, 0.2], [0.5, -0.4], [1.5, 0.8], [0.1, 0.1]]),)),
    ("single_element", (_R.standard_normal(3),)),
    ("zero_d", (np.array(0.7),)),
    ("empty_axis", (np.zeros((0, 3)), _R.standard_normal(2))),
]


@needs_array_rules
@pytest.mark.parametrize(("name", "args"), ARRAY_CASES, ids=_ids(ARRAY_CASES))
def test_jvp_and_hessian_vector_product_of_an_array_function(name, args):
    f = getattr(ARRAYS, name)
    tied = name == "maximum_on_axis" and args[0][0, 0] == 1.0
    tangents = _tangents(args, 2)
    value, dot = jvp(f, args, tangents)
    np.testing.assert_allclose(value, f(*args))
    wrt = _floats(args)
    grads = grad(f, wrt=wrt)(*args)
    contracted = sum(np.sum(g * tangents[i]) for g, i in zip(grads, wrt, strict=True))
    np.testing.assert_allclose(dot, contracted, rtol=1e-10, atol=1e-12)
    if not tied:  # (at a tie, differences see one side only)
        np.testing.assert_allclose(dot, _along(f, args, tangents), rtol=1e-5, atol=1e-6)
    g = grad(f, wrt=wrt)
    _, hv = jvp(g, args, tangents)
    expected = hv if tied else _along(g, args, tangents)  # (JAX's below, at ties)
    H = hessian(f, wrt=wrt)(*args)
    for i, w in enumerate(wrt):
        assert np.shape(hv[i]) == np.shape(args[w])
        np.testing.assert_allclose(hv[i], expected[i], rtol=1e-5, atol=1e-6)
        got = sum(np.tensordot(H[i][j], tangents[v], np.ndim(tangents[v]))
                  for j, v in enumerate(wrt))
        np.testing.assert_allclose(got, expected[i], rtol=1e-5, atol=1e-6)


@needs_array_rules
def test_tied_maxima_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def reference(x):
        return jnp.sum(jnp.max(x, axis=0) ** 2) + jnp.min(x)

    x = np.array([[1.0, 2.0], [1.0, 0.5], [0.3, 2.0]])
    v = _R.standard_normal((3, 2))
    f = ARRAYS.maximum_on_axis
    assert jvp(f, (x,), (v,))[1] == pytest.approx(float(jax.jvp(reference, (x,), (v,))[1]))
    np.testing.assert_allclose(jvp(grad(f), (x,), (v,))[1],
                               jax.jvp(jax.grad(reference), (x,), (v,))[1], rtol=1e-12)
    np.testing.assert_allclose(hessian(f)(x), jax.hessian(reference)(x), rtol=1e-12)


@needs_array_rules
def test_jvp_and_jacobian_of_a_vector_valued_function():
    f = ARRAYS.vector_valued
    x, y = _R.standard_normal(3), _R.standard_normal(3)
    value, dot = jvp(f, (x, y), (np.ones(3), np.zeros(3)))
    np.testing.assert_allclose(value, f(x, y))
    np.testing.assert_allclose(dot, np.cos(x) * y + 2 * x[::-1], rtol=1e-12)
    J = jacobian(f, wrt=(0, 1))(x, y)
    assert [b.shape for b in J] == [(3, 3), (3, 3)]
    np.testing.assert_allclose(J[0], np.diag(np.cos(x) * y) + np.fliplr(np.diag(2 * x[::-1])),
                               rtol=1e-12)
    np.testing.assert_allclose(J[1], np.diag(np.sin(x)), rtol=1e-12)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)

    def reference(x, y):
        return jax.numpy.sin(x) * y + x[::-1] ** 2

    for got, want in zip(J, jax.jacobian(reference, argnums=(0, 1))(x, y), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)


# --- edges ---

EDGES = load("""
import numpy as np


def square(x):
    return x ** 2


def absolute(x):
    return abs(x)


def scaled(x, n):
    return x * n


def cast(x):
    return np.sum(np.asarray(x, dtype=int) * x)


def cast_like(x, y):
    return np.sum(np.asarray(x, dtype=y.dtype) * x)


def sinc(x):
    return np.sinc(x) * x


def defaults(x, n=3, y=2.0):
    return x ** n * y
""")


def test_tangents_at_zero():
    assert jvp(EDGES.square, (0.0,), (1.0,)) == (0.0, 0.0)
    assert grad(grad(EDGES.square))(0.0) == 2.0
    assert grad(grad(grad(EDGES.square)))(0.0) == 0.0
    # abs at 0: slope sign(0) = 0, as the README says (autograd's; JAX's is 1 there)
    assert jvp(EDGES.absolute, (0.0,), (1.0,)) == (0.0, 0.0)
    assert grad(grad(EDGES.absolute))(0.0) == 0.0


def test_a_value_that_does_not_depend_on_the_input_has_a_zero_tangent_of_its_shape():
    value, dot = jvp(CORPUS.constant, (0.5,), (1.0,))
    assert (value, dot) == (3.0, 0.0)
    value, dot = jvp(CORPUS.independent, (0.5, 0.2), (1.0, 0.0))
    assert value == pytest.approx(0.04) and dot == 0.0
    assert grad(grad(CORPUS.independent))(0.5, 0.2) == 0.0
    y = np.array([1.0, 2.0])
    value, dot = jvp(CORPUS.independent, (0.5, y), (1.0, np.zeros(2)))
    np.testing.assert_array_equal(dot, np.zeros(2))


def test_integer_arguments_are_held_constant():
    value, dot = jvp(EDGES.scaled, (1.5, 3), (2.0, 0))
    assert (value, dot) == (4.5, 6.0)
    assert grad(grad(EDGES.scaled))(1.5, 3) == 0.0
    with pytest.raises(SymdiffError) as e:
        jvp(EDGES.scaled, (1.5, 3), (2.0, 1))
    assert str(e.value) == ("jvp of scaled: n is int, held constant, but its tangent is not "
                            "zero; pass it as a float (n=float(...)) to differentiate it")


def test_a_derivative_written_with_a_helper_of_symdiff_is_not_differentiated_again():
    f = EDGES.sinc
    assert jvp(f, (0.3,), (1.0,))[1] == pytest.approx(grad(f)(0.3))
    for second in (lambda: grad(grad(f))(0.3), lambda: jvp(grad(f), (0.3,), (1.0,)),
                   lambda: hessian(f)(0.3)):
        with pytest.raises(SymdiffError) as e:
            second()
        lines = str(e.value).splitlines()
        assert lines[0].endswith(".py:26:5: second derivatives through this line are not "
                                 "supported: its derivative calls a helper of symdiff's "
                                 "(_sinc_slope), which symdiff does not differentiate again")
        assert lines[1:] == ["        return np.sinc(x) * x", "        ^",
                             "  supported instead: first derivatives of it (grad, jvp)"]


def test_parameters_left_to_their_defaults():
    # (the tangents follow every parameter, so the defaults are filled before them)
    f = EDGES.defaults
    assert jvp(f, (0.5,), (1.0,)) == (0.25, 1.5)
    assert jvp(f, (0.5, 2), (1.0, 0)) == (0.5, 2.0)
    assert grad(grad(f))(0.5) == pytest.approx(6.0)
    assert jvp(grad(f), (0.5,), (1.0,)) == (1.5, pytest.approx(6.0))
    assert hessian(f)(0.5) == pytest.approx(6.0)
    assert hessian(f, wrt=(0,))(0.5, 3) == ((pytest.approx(6.0),),)


def test_float32_tangents_keep_the_precision():
    x = np.array([0.5, -1.0], dtype=np.float32)
    value, dot = jvp(EDGES.square, (x,), (np.ones(2, dtype=np.float32),))
    assert dot.dtype == np.float32
    np.testing.assert_allclose(dot, 2 * x)


def test_a_cast_to_integers_has_no_tangent_and_an_unknown_dtype_is_refused():
    x, t = np.array([1.5, 2.5]), np.array([1.0, -2.0])
    value, dot = jvp(EDGES.cast, (x,), (t,))
    assert dot == pytest.approx(np.sum(np.array([1, 2]) * t))
    assert dot == pytest.approx(grad(EDGES.cast)(x) @ t)
    with pytest.raises(SymdiffError) as e:
        jvp(EDGES.cast_like, (x, x), (t, t))
    lines = str(e.value).splitlines()
    assert lines[0].endswith(".py:22:19: forward mode of np.asarray with dtype=y.dtype, which "
                             "may not be a float type")
    assert lines[1:] == ["        return np.sum(np.asarray(x, dtype=y.dtype) * x)",
                         "                      ^",
                         "  supported instead: a float or integer type written in the code "
                         "(dtype=float, np.float32, int), or no dtype"]


CHECKED = load("""
import numpy as np


def zipped(A, B):
    s = 0.0
    for a, b in zip(A, B, strict=True):
        s = s + np.sum(a * b)
    return s


def recurrent(x):
    out = np.zeros((3, 2))
    out[0] = x
    for t in range(1, 3):
        prev = out[t - 1]
        out[t] = np.tanh(prev * 2.0)
        last = prev + 1.0
    return np.sum(out ** 2) + np.sum(last)


def overwritten(x):
    out = np.zeros((3, 2))
    out[0] = x
    prev = out[0]
    out[0] = x * 3.0
    return np.sum(out) + np.sum(prev)


def maybe_shared(M, c):
    b = M * 1.0
    if c > 0:
        b = M
    b -= 1.0
    return np.sum(b * M)
""")


@needs_array_rules
def test_run_time_checks_are_asserts_the_tangent_program_reads_again():
    A, B = _R.standard_normal((2, 3)), _R.standard_normal((2, 3))
    tangents = (np.ones((2, 3)), np.zeros((2, 3)))
    assert jvp(CHECKED.zipped, (A, B), tangents)[1] == pytest.approx(np.sum(B))
    np.testing.assert_allclose(jvp(grad(CHECKED.zipped, wrt=(0, 1)), (A, B), tangents)[1][1],
                               np.ones((2, 3)))
    with pytest.raises(AssertionError, match="zip"):
        jvp(CHECKED.zipped, (A, B[:1]), (A, B[:1]))
    M = _R.standard_normal((2, 2))
    np.testing.assert_allclose(jvp(grad(CHECKED.maybe_shared), (M, -1.0), (M, 0.0))[1],
                               2 * M)
    # a row read (a view), then another row written: fine; the same row: refused
    x, v = np.array([0.3, -0.6]), np.array([1.0, 0.5])
    f = CHECKED.recurrent
    assert jvp(f, (x,), (v,))[1] == pytest.approx(grad(f)(x) @ v)
    np.testing.assert_allclose(jvp(grad(f), (x,), (v,))[1], _along(grad(f), (x,), (v,)),
                               rtol=1e-5, atol=1e-6)
    for g in (CHECKED.overwritten, grad(CHECKED.overwritten)):
        with pytest.raises(SymdiffError, match=r"\.py:27: prev shares its array with out"):
            jvp(g, (x,), (v,))
    for f in (CHECKED.maybe_shared, grad(CHECKED.maybe_shared)):
        with pytest.raises(AssertionError, match=r"\.py:34: b is an array shared with M"):
            jvp(f, (M, 1.0), (M, 0.0))


PRINTED = load('''
import numpy as np
from symdiff import stop_gradient


def f(x, n):
    s = 0.0
    for i in range(n):
        if s > 1.0:
            t = s * 0.5
        s = s + np.sin(x) * stop_gradient(x)
    return s
''')


def test_the_tangent_program_reads_as_the_function():
    # Each tangent beside its value, with its line; nothing for what only feeds a test
    # (t); a variable unbound on a path is None there; stop_gradient stays written.
    source = tangent_function(PRINTED.f, ("x",)).source
    body = source.split('"""')[2].strip("\n")
    assert body == '''\
    s = 0.0  # line 7
    t = None  # line 8
    s_1 = s  # line 8
    i_1 = None  # line 8
    s_1_dot = 0.0  # line 8
    for i in range(n):  # line 8
        _t0 = s_1 > 1.0  # line 9
        if _t0:  # line 9
            t_1 = s_1 * 0.5  # line 10
            t_2 = t_1  # line 9
        else:
            t_2 = t  # line 9
        _sg0 = stop_gradient(x)  # line 11
        s_2 = s_1 + np.sin(x) * _sg0  # line 11
        s_2_dot = _sg0 * x_dot * np.cos(x) + s_1_dot  # line 11
        t = t_2  # line 8
        s_1 = s_2  # line 8
        i_1 = i  # line 8
        s_1_dot = s_2_dot  # line 8
    return s_1, s_1_dot'''
    assert jvp(PRINTED.f, (0.5, 2), (1.0, 0))[1] == pytest.approx(
        2 * 0.5 * np.cos(0.5))
    assert grad(grad(PRINTED.f))(0.5, 2) == pytest.approx(-2 * 0.5 * np.sin(0.5))


JAXED = load("""
import numpy as np


def tied(x, y):
    return np.maximum(x, y) * x + np.minimum(x * y, y) ** 2


def mixed(x, y):
    return np.sin(x * y) * np.exp(y) + np.logaddexp(x, y) * x ** y + abs(x - y) * y
""")


@pytest.mark.parametrize(("name", "args"), [("tied", (0.7, 0.7)), ("tied", (1.0, 1.0)),
                                            ("mixed", (0.8, 0.3)), ("mixed", (1.3, 0.4))])
def test_second_derivatives_of_scalars_against_jax(name, args):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    references = {
        "tied": lambda x, y: jnp.maximum(x, y) * x + jnp.minimum(x * y, y) ** 2,
        "mixed": lambda x, y: (jnp.sin(x * y) * jnp.exp(y) + jnp.logaddexp(x, y) * x ** y
                               + jnp.abs(x - y) * y),
    }
    f, reference = getattr(JAXED, name), references[name]
    t = (0.6, -1.1)
    np.testing.assert_allclose(jvp(f, args, t)[1], jax.jvp(reference, args, t)[1], rtol=1e-12)
    H = hessian(f, wrt=(0, 1))(*args)
    np.testing.assert_allclose(np.array(H, dtype=float),
                               np.array(jax.hessian(reference, argnums=(0, 1))(*args)),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jvp(grad(f, wrt=(0, 1)), args, t)[1],
                               jax.jvp(jax.grad(reference, argnums=(0, 1)), args, t)[1],
                               rtol=1e-10, atol=1e-12)


ELEMENTWISE = {  # a sample of the rules table's elementwise functions
    "arcsin": "np.arcsin(x / 2) * np.arccos(x / 3)",
    "hyperbolic": "np.cosh(x) * np.arcsinh(x) + np.arctanh(x / 2) + np.arccosh(x + 2)",
    "exponentials": "np.exp2(x) + np.expm1(x) * np.log2(x + 2) + np.log10(x + 3)",
    "roots": "np.cbrt(x + 2) + np.square(x) * np.reciprocal(x + 3)",
    "two_arguments": "np.hypot(x, 2.0) + np.arctan2(x, 1.5) + np.logaddexp2(x, 0.3)",
    "modulo": "np.fmod(x * 3, 1.0) + np.mod(x * 5, 2.0) * x",
    "flat": "np.round(x * 4) + np.floor(x) * x + np.ceil(x) + np.sign(x) * x ** 2",
    "degrees": "np.deg2rad(x) * np.rad2deg(x)",
    "fmin_fmax": "np.fmin(x, 0.2) * np.fmax(x, -1.0)",
    "variable_exponent": "np.power(x + 2, x) + (x + 2) ** 0.5",
    "casts": "float(x) * np.float64(x) ** 2",
    "step": "np.heaviside(x, 0.5) * x ** 2",
    "signs": "np.negative(x) * np.positive(x) + -x",
    "arithmetic": "np.divide(np.multiply(x, 3.0), np.add(x, 4.0)) - np.subtract(x, 1.0)",
    "truncation": "np.trunc(x * 3) * x + np.rint(x)",
    "from_math": "math.sin(x) * math.exp(x) + math.log(x + 2) + math.atan2(x, 2.0)",
}
SAMPLE = load("import math\nimport numpy as np\n" + "".join(
    f"\n\ndef {name}(x):\n    return {body}\n" for name, body in ELEMENTWISE.items()))


@pytest.mark.parametrize("x", [0.3, -0.45])
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise_functions_at_second_and_third_order(name, x):
    f = getattr(SAMPLE, name)
    g = grad(f)
    value, dot = jvp(f, (x,), (1.0,))
    assert value == f(x)
    assert dot == pytest.approx(g(x), rel=1e-12, abs=1e-14)
    assert dot == pytest.approx(float(_along(f, (x,), (1.0,))), rel=1e-5, abs=1e-6)
    gg = grad(g)(x)
    assert gg == pytest.approx(float(_along(g, (x,), (1.0,))), rel=1e-5, abs=1e-6)
    assert jvp(g, (x,), (1.0,))[1] == pytest.approx(gg, rel=1e-12, abs=1e-14)
    ggg = grad(grad(g))(x)
    assert ggg == pytest.approx(float(_along(grad(g), (x,), (1.0,))), rel=1e-5, abs=1e-6)


def test_hessian_blocks_and_partial_hessian_vector_products_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    f = load('''
import numpy as np


def f(x, y):
    return np.sum(np.sin(x) ** 2) * np.sum(y ** 3) + x @ y[:2]
''', "f")

    def reference(x, y):
        return jnp.sum(jnp.sin(x) ** 2) * jnp.sum(y ** 3) + x @ y[:2]

    x, y = _R.standard_normal(2), _R.standard_normal(3)
    tx, ty = _R.standard_normal(2), _R.standard_normal(3)
    H, HJ = hessian(f, wrt=(0, 1))(x, y), jax.hessian(reference, argnums=(0, 1))(x, y)
    for i in range(2):
        for j in range(2):
            assert H[i][j].shape == HJ[i][j].shape
            np.testing.assert_allclose(H[i][j], HJ[i][j], rtol=1e-12, atol=1e-14)
    for w in (0, 1):  # d/de grad_w f(x + e tx, y + e ty): both tangents count
        g, hv = jvp(grad(f, wrt=w), (x, y), (tx, ty))
        gj, hvj = jax.jvp(jax.grad(reference, argnums=w), (x, y), (tx, ty))
        np.testing.assert_allclose(g, gj, rtol=1e-12)
        np.testing.assert_allclose(hv, hvj, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(jacobian(grad(f, wrt=0), wrt=1)(x, y), HJ[0][1], rtol=1e-12,
                               atol=1e-14)


# --- containers: dict, tuple and list parameters (nested), as grad takes them ---

TREES = load("""
import numpy as np


def dense(params, X):
    W, b = params["W"], params["b"]
    return np.sum(np.tanh(X @ W + b) ** 2) * params["scale"]


def layers(ws, x):
    h = x
    for W, b in ws:
        h = np.tanh(W @ h + b)
    return np.sum(h ** 2)


def pair(p, x):
    a, s = p
    return np.sum(np.sin(a * x)) * s ** 3


def nested(p, x):
    return np.sum(p["a"][0] * x) ** 2 * p["a"][1]["k"] + np.sum(p["c"]) * np.sum(x ** 3)


def spread(p, x):
    return np.sin(p[0] * x) + np.sum(p[1] ** 2) * x


def wide(p, x):
    return np.tanh(p["W"] @ x) * p["s"]


def scaled(p, s):
    return np.sum(np.sin(p["W"] * s)) * p["b"] ** 2 * s + np.sum(p["v"][0] * p["v"][1]) * s ** 2
""")


def _numbers(t) -> bool:
    return type(t) is list and all(type(i) in (int, float) for i in t)


def _map(fn, *trees):
    """fn at each leaf of trees of one structure (a list of numbers is a leaf: an array)."""
    t = trees[0]
    if type(t) is dict:
        assert all(list(u) == list(t) for u in trees)
        return {k: _map(fn, *(u[k] for u in trees)) for k in t}
    if type(t) in (tuple, list) and not _numbers(t):
        assert all(type(u) is type(t) for u in trees)
        return type(t)(_map(fn, *items) for items in zip(*trees, strict=True))
    return fn(*trees)


def _leaves(tree, like=None) -> list:
    """tree's leaves, where like (of tree's structure at its top) has leaves."""
    like = tree if like is None else like
    if type(like) is dict:
        return [x for k in like for x in _leaves(tree[k], like[k])]
    if type(like) in (tuple, list) and not _numbers(like):
        return [x for i, item in enumerate(like) for x in _leaves(tree[i], item)]
    return [tree]


def _random(tree, seed):
    rng = np.random.default_rng(seed)

    def leaf(a):
        if _numbers(a):
            return [float(v) for v in rng.standard_normal(len(a))]
        return rng.standard_normal(np.shape(a)) if np.ndim(a) else float(rng.standard_normal())
    return _map(leaf, tree)


def _moved(args, tangents, h):
    return [_map(lambda a, t: np.asarray(a, dtype=float) + h * np.asarray(t), a, t)
            for a, t in zip(args, tangents, strict=True)]


def _along_tree(f, args, tangents, h=1e-6):
    """Central differences of f (its value's leaves) along the tangents."""
    plus, minus = f(*_moved(args, tangents, h)), f(*_moved(args, tangents, -h))
    return [(np.asarray(p, dtype=float) - np.asarray(m, dtype=float)) / (2 * h)
            for p, m in zip(_leaves(plus), _leaves(minus), strict=True)]


_R3 = np.random.default_rng(11)
TREE_CASES = [
    ("dense", ({"W": _R3.standard_normal((3, 2)), "b": _R3.standard_normal(2), "scale": 0.7},
               _R3.standard_normal((4, 3)))),
    ("layers", ([(_R3.standard_normal((3, 2)), _R3.standard_normal(3)),
                 (_R3.standard_normal((1, 3)), 0.5)], _R3.standard_normal(2))),
    ("pair", ((_R3.standard_normal(3), 0.4), _R3.standard_normal(3))),
    ("nested", ({"a": [_R3.standard_normal(3), {"k": 0.3}], "c": [1.0, 2.0]},
                _R3.standard_normal(3))),
]
TREE_IDS = [c[0] for c in TREE_CASES]


@pytest.mark.parametrize(("name", "args"), TREE_CASES, ids=TREE_IDS)
def test_jvp_of_a_function_of_containers(name, args):
    f = getattr(TREES, name)
    tangents = [_random(a, k) for k, a in enumerate(args)]
    value, dot = jvp(f, args, tangents)
    assert value == pytest.approx(f(*args), rel=1e-14)
    (expected,) = _along_tree(f, args, tangents)
    assert dot == pytest.approx(float(expected), rel=1e-6, abs=1e-8)
    grads = grad(f, wrt=(0, 1))(*args)
    contracted = sum(np.sum(np.asarray(g) * np.asarray(t)) for g, t in zip(
        _leaves(grads, args), _leaves(tangents, args), strict=True))
    assert dot == pytest.approx(contracted, rel=1e-10, abs=1e-12)
    # a container held constant (its tangent zero): its leaves are read, not differentiated
    held = [_map(lambda a: 0.0 * np.asarray(a), tangents[0]), tangents[1]]
    assert jvp(f, args, held)[1] == pytest.approx(float(np.sum(grads[1] * tangents[1])),
                                                  rel=1e-10, abs=1e-12)


@pytest.mark.parametrize(("name", "args"), TREE_CASES, ids=TREE_IDS)
def test_hessian_vector_products_and_hessians_of_containers(name, args):
    f = getattr(TREES, name)
    g = grad(f, wrt=(0, 1))
    tangents = [_random(a, 3 + k) for k, a in enumerate(args)]
    value, hv = jvp(g, args, tangents)
    for got, want in zip(_leaves(value, args), _leaves(g(*args), args), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    expected = _along_tree(g, args, tangents)
    _map(lambda a, v: None, list(args), list(hv))  # (hv has the parameters' structure)
    for got, want in zip(_leaves(hv, args), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the Hessian's blocks, contracted with the tangents, are the same product
    H = hessian(f, wrt=(0, 1))(*args)
    rows = [row for i in range(2) for row in _leaves(H[i], args[i])]
    t = [_leaves(tangents[j], args[j]) for j in range(2)]
    for row, want in zip(rows, expected, strict=True):
        got = sum(np.tensordot(block, np.asarray(u), np.ndim(u))
                  for j in range(2) for block, u in zip(_leaves(row[j], args[j]), t[j],
                                                        strict=True))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("name", "args"), [
    ("spread", ((0.3, np.array([0.5, -1.0])), _R3.standard_normal(5))),  # forward: 3 columns
    ("wide", ({"W": _R3.standard_normal((2, 3)), "s": 1.5}, _R3.standard_normal(3))),  # rows
    *TREE_CASES[:2],  # a scalar's Jacobian: the gradient's layout
])
def test_jacobian_in_containers_contracted_with_a_tangent(name, args):
    f = getattr(TREES, name)
    tangents = [_random(a, 7 + k) for k, a in enumerate(args)]
    J = jacobian(f, wrt=(0, 1))(*args)
    got = sum(np.tensordot(block, np.asarray(u), np.ndim(u)) for j in range(2)
              for block, u in zip(_leaves(J[j], args[j]), _leaves(tangents[j], args[j]),
                                  strict=True))
    (expected,) = _along_tree(f, args, tangents)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    assert _leaves(jacobian(f)(*args), args[0])[0].shape == \
        np.shape(f(*args)) + np.shape(_leaves(args[0])[0])


@pytest.mark.parametrize("p", [
    {"W": _R3.standard_normal((2, 3)), "b": 0.7, "v": (_R3.standard_normal(2), 1.5)},
    {"W": _R3.standard_normal(3), "b": 1.2, "v": [np.ones(2), _R3.standard_normal(2)]},
], ids=["dict-tuple", "dict-list"])
def test_grad_in_a_container_of_a_derivative_in_a_scalar(p):
    f = TREES.scaled
    s = 0.4
    got = grad(grad(f, wrt=1), wrt=0)(p, s)
    inner = grad(f, wrt=1)
    # central differences of df/ds in each entry of each leaf of p
    for k, (got_leaf, base) in enumerate(zip(_leaves(got, p), _leaves(p), strict=True)):
        assert np.shape(got_leaf) == np.shape(base)
        expected = np.zeros(np.shape(base))
        for j in np.ndindex(*np.shape(base)):
            e = _map(lambda a: np.zeros(np.shape(a)), p)
            _leaves(e)[k][j] = 1.0
            (expected[j],) = _along_tree(inner, [p, s], [e, 0.0])
        np.testing.assert_allclose(got_leaf, expected, rtol=1e-5, atol=1e-6)


def _in_jax(f, jnp):
    """f's own code with np read as jax.numpy: the JAX reference of a corpus function (a
    list summed as NumPy sums it, where jnp.sum takes arrays alone)."""
    shim = types.SimpleNamespace(**{k: getattr(jnp, k) for k in dir(jnp) if not
                                    k.startswith("_")})
    shim.sum = lambda a, *args, **kwargs: jnp.sum(jnp.asarray(a), *args, **kwargs)
    return types.FunctionType(f.__code__, {**f.__globals__, "np": shim}, f.__name__)


def test_transformations_of_containers_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    dense, layers, pair, nested, wide, scaled = (_in_jax(getattr(TREES, name), jnp) for name in (
        "dense", "layers", "pair", "nested", "wide", "scaled"))

    def same(ours, theirs):
        # JAX's structure, nested as JAX nests it, then each leaf's value
        ours = _map(np.asarray, ours)
        assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(theirs)
        for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs),
                        strict=True):
            assert np.shape(a) == np.shape(b)
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)

    def arrays(tree):
        return _map(lambda a: np.asarray(a) if _numbers(a) else a, tree)

    # (jit: one compilation per reference, where JAX run op by op compiles each operation)
    refs = {"dense": dense, "layers": layers, "pair": pair, "nested": nested}
    for name, args in TREE_CASES:
        f, ref, jargs = getattr(TREES, name), refs[name], [arrays(a) for a in args]
        tangents = [_random(a, 1) for a in args]
        jt = [arrays(t) for t in tangents]
        assert jvp(f, args, tangents)[1] == pytest.approx(
            float(jax.jit(partial(jax.jvp, ref))(jargs, jt)[1]), rel=1e-10)
        H = hessian(f, wrt=(0, 1))(*args)
        HJ = jax.jit(jax.hessian(ref, argnums=(0, 1)))(*jargs)
        same(H, HJ)
        # in argument 0 alone: at each of its leaves, the first of the pair above
        for row, alone in zip(_leaves(H[0], args[0]), _leaves(hessian(f)(*args), args[0]),
                              strict=True):
            same(alone, row[0])
        g, hv = jvp(grad(f), args, tangents)
        gj, hvj = jax.jit(partial(jax.jvp, jax.grad(ref)))(jargs, jt)
        same(g, gj)
        same(hv, hvj)
    p, x = {"W": _R3.standard_normal((2, 3)), "s": 1.5}, _R3.standard_normal(3)
    same(jacobian(TREES.wide, wrt=(0, 1))(p, x),
         jax.jit(jax.jacobian(wide, argnums=(0, 1)))(p, x))
    p = {"W": _R3.standard_normal((2, 3)), "b": 0.7, "v": [_R3.standard_normal(2), 1.5]}
    same(grad(grad(TREES.scaled, wrt=1), wrt=0)(p, 0.4),
         jax.jit(jax.grad(jax.grad(scaled, argnums=1), argnums=0))(p, 0.4))


# --- the batched columns (symdiff.batch) against the column loop, on the whole corpus ---

# The cases whose Hessian falls back to the column loop (in some parameter), and why: a
# loop's tape of tuples, a list of arrays, a QR factorisation's tuple (test_batch.py has
# the rules). A case that batches today and falls back tomorrow fails here.
FALLS_BACK = {"for_range", "while_break", "several_values", "rows", "carried_array",
              "written", "appended", "started_with_an_item", "comprehension",
              "while_array", "rows_break", "unbound_on_a_path",
              "empty_axis"}  # (x of size 0: no column to batch)


def _hessians_both_ways(monkeypatch, f, args, wrt):
    return batched_and_looped(monkeypatch, lambda: hessian(f, wrt=wrt)(*args))


ALL_CASES = [(CORPUS, c) for c in SCALARS] + [(ARRAYS, c) for c in ARRAY_CASES]


@pytest.mark.parametrize(("module", "case"), ALL_CASES, ids=_ids([c for _, c in ALL_CASES]))
def test_batched_hessians_are_the_column_loops(monkeypatch, module, case):
    name, args = (case.values if hasattr(case, "values") else case)[:2]
    f = getattr(module, name)
    wrt = _floats(args)
    batched, looped, seen = _hessians_both_ways(monkeypatch, f, args, wrt)
    assert all(seen) == (name not in FALLS_BACK), seen
    for i in range(len(wrt)):
        for j in range(len(wrt)):
            assert np.shape(batched[i][j]) == np.shape(looped[i][j])
            assert np.asarray(batched[i][j]).dtype == np.asarray(looped[i][j]).dtype
            np.testing.assert_allclose(batched[i][j], looped[i][j], rtol=1e-12, atol=1e-14)


def test_batched_jacobians_are_the_column_loops(monkeypatch):
    from symdiff import batch
    from symdiff import higher as _higher

    f = ARRAYS.vector_valued
    x, y = _R.standard_normal(3), _R.standard_normal(3)
    for make in (lambda: jacobian(f, wrt=(0, 1))(x, y), lambda: jacobian(f)(x[:2], y[:2]),
                 lambda: jacobian(f, wrt=1)(x, y)):
        got = make()
        monkeypatch.setattr(_higher.batch, "columns", lambda *a, **k: None)
        want = make()
        monkeypatch.setattr(_higher.batch, "columns", batch.columns)
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
