"""Integer, float16, float32, boolean and list arguments and module data: what the gradient
converts to float64 and what it keeps, against the function's own arithmetic."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
from gradcheck import (
    both_one,
    check_grad,
    frozen_reference,
    load,
    numeric_grad,
    outcome,
    random_body,
    random_data,
    ro,
)
from gradcheck import contract_grads as run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symdiff import SymdiffError, grad, value_and_grad

RNG = np.random.default_rng(20240601)
M34 = RNG.standard_normal((3, 4))


DTYPES = load("""
import numpy as np

def mixed(a):
    return np.sum(a * a * 0.5) + np.max(a) * 2.0 + np.sum(a[1:] ** 3) + np.mean(a / 3)

def raveled(a):
    return np.sum(np.sin(np.ravel(a)))
""")


@pytest.mark.parametrize("arg", [
    M34.astype(np.float32), np.array([1, 2, -3, 4]), np.array([[1, 2], [3, 4]], dtype=np.int32),
])
def test_float32_and_integer_arrays(arg):
    (g,) = run(DTYPES.mixed, (arg,))
    check_grad(DTYPES.mixed, (arg.astype(np.float64),), grads=(g,), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arg", [np.float32(0.5), np.int64(2), 2, np.array(0.5), np.array(2)])
def test_scalar_kinds(arg):
    g = grad(DTYPES.raveled)(arg)
    expected = math.cos(float(arg))
    if isinstance(arg, np.ndarray):
        assert isinstance(g, np.ndarray) and g.shape == () and g.dtype == np.float64
    else:  # (a float32 in, a float32 out, as JAX)
        assert type(g) is (np.float32 if isinstance(arg, np.float32) else float)
    assert g == pytest.approx(expected, rel=1e-6)


# --- dtypes: int and float32 inputs, 0-d arrays ------------------------------------------

MIXED_DT = load("""
import numpy as np

def mixed(x, w):
    y = x * w
    z = np.sum(y, axis=-1, keepdims=True)
    return np.mean(y / (1.0 + z * z)) + np.sum(x * x * w)
""")


@pytest.mark.parametrize(("xs", "ws"), [((3, 1), (1, 4)), ((), (4,)), ((2, 1, 3), (3,))])
def test_int_float32_and_zero_dimensional_inputs_agree_with_float64(xs, ws):
    rng = np.random.default_rng(25)
    xi = rng.integers(1, 4, xs) if xs else 2
    wi = rng.integers(1, 4, ws)
    x64, w64 = np.asarray(xi, dtype=float), np.asarray(wi, dtype=float)
    x64 = float(x64) if not xs else x64
    want = grad(MIXED_DT.mixed, wrt=(0, 1))(x64, w64)
    check_grad(MIXED_DT.mixed, (x64, w64), wrt=(0, 1), grads=want)
    for args, rtol in (((xi, wi), 1e-12),
                       ((np.float32(xi) if not xs else xi.astype(np.float32),
                         wi.astype(np.float32)), 1e-5),
                       ((np.asarray(x64), w64), 1e-12)):
        for got, w in zip(run(MIXED_DT.mixed, args, wrt=(0, 1)), want, strict=True):
            np.testing.assert_allclose(got, w, rtol=rtol)


# --- random programs (hypothesis) -------------------------------------------------------

random_data()


X2 = np.array([1.0, 2.0])
X3 = np.array([0.5, -1.0, 2.0])
X23 = np.arange(1.0, 7.0).reshape(2, 3)


# --- _as_float: parameters the backward sweep reads as integers ---------------------

IX = load("""
import numpy as np

def take(x, i):
    return np.sum(x[i] ** 2)

def head(x, k):
    return np.sum(x[:k] ** 2)

def sum_axis(x, a):
    return np.sum(np.sum(x ** 2, axis=a) ** 2)

def prod_axis(x, a):
    return np.sum(np.prod(x, axis=a))

def max_axis(x, a):
    return np.sum(np.max(x, axis=a))

def concat_axis(x, a):
    return np.sum(np.concatenate([x, x * 2.0], axis=a) ** 2)

def tile(x, r):
    return np.sum(np.tile(x, r) ** 2)

def flip(x, a):
    return np.sum(np.flip(x, a) * np.arange(6.0).reshape(2, 3))

def transpose(x, p):
    return np.sum(np.transpose(x, p) * np.arange(6.0).reshape(3, 2))

def where(x, c):
    return np.sum(np.where(c, x, 0.0) ** 2)

def var_ddof(x, d):
    return np.var(x, ddof=d)
""")


# (name, x, the parameter, the gradient), each gradient derived by hand.
_X4 = np.array([1.0, 2.0, 3.0, 4.0])

_W6 = np.arange(6.0).reshape(2, 3)

INTEGER_PARAMETERS = [
    ("take", _X4, [0, 2], [2.0, 0.0, 6.0, 0.0]),
    ("take", _X4, np.array([0, 2]), [2.0, 0.0, 6.0, 0.0]),
    ("take", _X4, np.int64(1), [0.0, 4.0, 0.0, 0.0]),
    ("take", _X4, np.array([True, False, True, False]), [2.0, 0.0, 6.0, 0.0]),
    ("take", _X4, [True, False, True, False], [2.0, 0.0, 6.0, 0.0]),
    ("head", _X4, np.int64(2), [2.0, 4.0, 0.0, 0.0]),
    ("sum_axis", X23, (0, 1), np.full((2, 3), 4 * 91.0) * X23),
    ("prod_axis", X23, np.int64(1), [[6.0, 3.0, 2.0], [30.0, 24.0, 20.0]]),
    ("max_axis", X23, np.int64(1), [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
    ("concat_axis", X23, np.int64(1), 10 * X23),
    ("tile", X23, (2, 1), 4 * X23),
    ("tile", X23, [2, 1], 4 * X23),
    ("tile", X23, np.int64(2), 4 * X23),
    ("flip", X23, np.int64(1), _W6[:, ::-1]),
    ("flip", X23, (0, 1), _W6[::-1, ::-1]),
]


# A bug at 158d6a1 (fixed by e576f9d): the backward sweep began with
# 'p = _as_float(p)' for every parameter it read, those it reads as integers too: an index
# (IndexError in _scatter), a slice bound, an axis tuple or np.int64, np.tile's reps.
@pytest.mark.parametrize(("name", "x", "p", "expected"), INTEGER_PARAMETERS,
                         ids=lambda v: type(v).__name__ if not isinstance(v, str) else v)
def test_a_parameter_read_as_an_integer_stays_an_integer(name, x, p, expected):
    f = getattr(IX, name)
    f(x, p)  # the function itself works
    np.testing.assert_allclose(grad(f)(x, p), expected, rtol=1e-12)


@pytest.mark.parametrize(("name", "x", "p", "expected"), [
    ("take", _X4, 1, [0.0, 4.0, 0.0, 0.0]),
    ("take", _X4, slice(0, 2), [2.0, 4.0, 0.0, 0.0]),
    ("head", _X4, 2, [2.0, 4.0, 0.0, 0.0]),
    ("sum_axis", X23, 1, 2 * np.sum(X23 ** 2, axis=1, keepdims=True) * 2 * X23),
    ("sum_axis", X23, np.int64(1), 2 * np.sum(X23 ** 2, axis=1, keepdims=True) * 2 * X23),
    ("prod_axis", X23, 1, [[6.0, 3.0, 2.0], [30.0, 24.0, 20.0]]),
    ("tile", X23, 2, 4 * X23),
    ("transpose", X23, (1, 0), _W6.reshape(3, 2).T),
    ("transpose", X23, [1, 0], _W6.reshape(3, 2).T),
    ("transpose", X23, np.array([1, 0]), _W6.reshape(3, 2).T),
    ("where", X3, [True, False, True], [1.0, 0.0, 4.0]),
    ("where", X3, np.array([1, 0, 1]), [1.0, 0.0, 4.0]),
    ("var_ddof", X3, np.int64(1), 2 * (X3 - X3.mean()) / 2),
    ("var_ddof", X3, True, 2 * (X3 - X3.mean()) / 2),
])
def test_parameters_read_as_integers_that_work(name, x, p, expected):
    f = getattr(IX, name)
    np.testing.assert_allclose(both_one(f, (x, p)), expected, rtol=1e-12)


MM = load("""
import numpy as np

def matvec(X, w):
    return np.sum((X @ w) ** 2)

def matmul_call(X, w):
    return np.sum(np.matmul(X, w) ** 2)

def dot(X, w):
    return np.sum(np.dot(X, w) ** 2)

def vecmat(x, W):
    return np.sum((W @ x) ** 2)
""")


@pytest.mark.parametrize("name", ["matvec", "matmul_call", "dot"])
def test_a_list_operand_of_a_matrix_product(name):
    f = getattr(MM, name)
    w = [1.0, 2.0, 3.0]
    np.testing.assert_allclose(grad(f)(X23, w), 2 * np.outer(X23 @ w, w), rtol=1e-12)


@pytest.mark.parametrize("w", [np.array([1.0, 2.0, 3.0]), np.array([1, 2, 3]),
                               np.array([1, 2, 3], dtype=np.uint8)],
                         ids=["float", "int64", "uint8"])
def test_an_array_operand_of_a_matrix_product(w):
    for name in ["matvec", "matmul_call", "dot"]:
        np.testing.assert_allclose(both_one(getattr(MM, name), (X23, w)),
                                   2 * np.outer(X23 @ w, w), rtol=1e-12)
    W = X23.tolist()
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(both_one(MM.vecmat, (x, W)), 2 * X23.T @ (X23 @ x), rtol=1e-12)


# --- _as_float: the backward sweep's dtype is not the function's ---------------------

DT = load("""
import numpy as np
from symdiff import stop_gradient

K8 = np.array([20, 3], dtype=np.uint8)
K16 = np.array([300.0, 2.0], dtype=np.float16)
KI = np.array([20, 3])
M = np.array([True, False])
N8 = np.uint8(20)
SCALE = 2.0

def square_first(x):
    return np.sum(x * (K8 * K8))

def square_after(x):
    return np.sum(x * K8 * K8)

def square_int64(x):
    return np.sum(x * (KI * KI)) + np.sum(x * KI * KI)

def half(x):
    return np.sum(x * K16 * K16)

def half_param(x, h):
    return np.sum(x * h * h)

def masks_or(x, b):
    return np.sum(x * (b + b))

def module_masks_or(x):
    return np.sum(x * (M + M))

def row(x, n):
    r = n[0]
    return np.sum(x * r * r)

def row_sg(x, n):
    r = stop_gradient(n)
    return np.sum(x * r * r)

def rows(x, n):
    s = 0.0
    for r in n:
        s = s + np.sum(x * r * r)
    return s

def scalar_uint8(x):
    return np.sum(x * N8 * N8)

def scaled(x):
    return np.sum(x * SCALE * SCALE)
""")


def test_module_uint8_squared_before_the_float_operand():
    # K * K wraps in uint8 in the function: the derivative reads its value, as computed
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = (DT.K8 * DT.K8).astype(np.float64)
    np.testing.assert_allclose(grad(DT.square_first)(X2), expected)


def test_module_uint8_after_the_float_operand_is_float64():
    # x * K * K runs in float64: the derivative's K**2 must too (fixed in 158d6a1)
    np.testing.assert_allclose(both_one(DT.square_after, (X2,)), [400.0, 9.0])


def test_module_int64_data_read_by_the_derivatives():
    np.testing.assert_allclose(both_one(DT.square_int64, (X2,)), [800.0, 18.0])


# Bugs at 158d6a1 (fixed by e576f9d): _as_float converted integer and
# boolean data only, so K**2 of float16 data overflowed to inf, and a NumPy integer scalar
# at module level (np.uint8(20)) was not converted and wrapped around.
def test_module_float16_data_squared_in_float16():
    np.testing.assert_allclose(outcome(lambda: grad(DT.half)(X2)), [90000.0, 4.0])


def test_float16_parameter_squared_in_float16():
    h = np.array([300.0, 2.0], dtype=np.float16)
    np.testing.assert_allclose(outcome(lambda: grad(DT.half_param)(X2, h)), [90000.0, 4.0])


# b + b on masks is a logical or (SymPy's 2*b would double the gradient)
@pytest.mark.parametrize("b", [np.array([True, False]), np.True_], ids=["array", "np.bool_"])
def test_boolean_masks_added_are_a_logical_or(b):
    assert DT.masks_or(X2, b) == pytest.approx(np.sum(X2 * b))
    np.testing.assert_allclose(grad(DT.masks_or)(X2, b), np.broadcast_to(b, (2,)) * 1.0)


def test_module_boolean_masks_added_are_a_logical_or():
    np.testing.assert_allclose(grad(DT.module_masks_or)(X2), [1.0, 0.0])


# uint8 values made from a parameter are read by the derivatives as floats, as x * r * r
# computes with them (r**2 in uint8 would wrap around)
@pytest.mark.parametrize("name", ["row", "row_sg", "rows"])
def test_uint8_values_made_from_a_parameter_wrap_around(name):
    f = getattr(DT, name)
    n = np.array([[20, 3]], dtype=np.uint8)
    assert f(X2, n) == pytest.approx(418.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(grad(f)(X2, n), [400.0, 9.0])


def test_module_uint8_scalar_squared():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(grad(DT.scalar_uint8)(X2), [400.0, 400.0])


def test_module_number_rebound_to_a_uint8_array():
    # module data may change kind after the build: the derivatives convert it at each call
    m = load("""
import numpy as np
SCALE = 2.0

def scaled(x):
    return np.sum(x * SCALE * SCALE)
""")
    g = grad(m.scaled)
    np.testing.assert_allclose(g(X2), [4.0, 4.0])
    m.SCALE = np.array([20, 20], dtype=np.uint8)
    assert m.scaled(X2) == pytest.approx(1200.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(g(X2), [400.0, 400.0])


# --- random programs over parameters of many types (hypothesis) -------------------------

HEAD = """import math
import numpy as np
from symdiff import stop_gradient as sg
K = np.array([1.0, 2.0, 0.5])
KI = np.array([1, 2, 3])

def h2(p, q):
    t = p * q
    return t * t * 0.5 + p

"""

OPS = ["{a} * {b}", "{a} + {b}", "{a} - {b}", "{a} * 2.0", "{a} / (1.0 + {b} * {b})",
       "np.sin({a}) * {b}", "np.exp({a} * 0.1)", "{a} ** 2", "sg({a}) * {b}", "{a} * K",
       "{a} * KI", "{a} * 0.0 + {b}", "1.0 / (2.0 + {a}) * {b}", "np.maximum({a}, {b})",
       "{a} * sg(np.max({b}))", "np.tanh({a}) + {b} ** 2", "h2({a}, {b})",
       "np.sum({a}) * {b}", "np.mean({a} * {b})", "{a}[0] * {b}",
       "np.sum({a}, axis=-1, keepdims=True) * {b}"]

FINALS = ["np.sum({v})", "np.mean({v})", "np.sum({v} * {o})", "np.sum({v}) + np.sum({o})",
          "np.sum({v} ** 2) * 0.5", "np.mean({v} * 0.0 + {o})"]

# Lists and tuples are left out (a NumPy scalar times a list: see the xfail above).
PARAMETER_KINDS = ["array", "0d", "float", "np64", "int", "pyint", "npint", "f32", "readonly"]


def _variant(v, kind):
    first = float(np.ravel(v)[0])
    return {"array": lambda: v, "0d": lambda: np.array(first), "float": lambda: first,
            "np64": lambda: np.float64(first), "int": lambda: np.round(v * 2).astype(np.int64),
            "pyint": lambda: round(first * 2), "npint": lambda: np.int64(round(first * 2)),
            "f32": lambda: np.float32(v) if np.ndim(v) == 0 else v.astype(np.float32),
            "readonly": lambda: ro(v)}[kind]()


def _program(rnd: random.Random):
    rng = np.random.default_rng(rnd.randrange(10**6))
    x = rng.uniform(0.5, 1.5, rnd.choice([(3,), (1,), (), (2, 3)]))
    if x.ndim == 0 and rnd.random() < 0.5:
        x = float(x)
    n = rnd.randint(1, 2)
    # (a Python float x with float32 data computes in float32: no reference for that)
    kinds = (PARAMETER_KINDS if not isinstance(x, float)
             else [k for k in PARAMETER_KINDS if k != "f32"])
    data = [_variant(rng.uniform(0.5, 1.5, rnd.choice([(3,), (1,), ()])), rnd.choice(kinds))
            for _ in range(n)]
    params = ["x"] + [f"d{i}" for i in range(n)]
    names = list(params)
    body = random_body(rnd, names, OPS, split=(0.6, 0.8), limits=[1.0, 3.0], trips=(0, 2))
    final = rnd.choice(FINALS).format(v=rnd.choice(names[1:]), o=rnd.choice(names))
    source = (HEAD + f"def f({', '.join(params)}):\n" + "\n".join(body) +
              f"\n    return {final}\n")
    return source, [x, *data]


@settings(max_examples=70, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_random_programs_over_parameter_types(seed):
    source, args = _program(random.Random(seed))
    f = load(source, "f")
    value = outcome(lambda: f(*args))
    if isinstance(value, Exception):
        for make in (grad, value_and_grad):
            got = outcome(lambda m=make: m(f)(*args))
            assert isinstance(got, (type(value), SymdiffError)), (source, value, got)
        return
    g = outcome(lambda: grad(f)(*args))
    vg = outcome(lambda: value_and_grad(f)(*args))
    if np.ndim(value) != 0:
        assert isinstance(g, SymdiffError) and isinstance(vg, SymdiffError), (source, g, vg)
        return
    assert not isinstance(g, Exception), (source, g)
    assert not isinstance(vg, Exception), (source, vg)
    np.testing.assert_allclose(vg[0], value, rtol=1e-12, err_msg=source)
    np.testing.assert_allclose(g, vg[1], rtol=1e-12, atol=1e-15, err_msg=source)
    assert np.shape(g) == np.shape(args[0])
    if not np.isfinite(value):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = frozen_reference(source, args, (0,))[0]
    np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5, err_msg=source)


# --- one grad(f), one build per kind of arguments --------------------------------------

KINDED = load("""
import numpy as np

def f(x, w):
    y = np.tanh(x * w)
    return np.sum(y * y) + np.sum(x) * 0.5 - np.max(w) * np.sum(y * x)
""")

KIND_ARGS = {
    "floats": (0.3, 1.5),
    "ints": (2, 3),
    "float64 arrays": (np.array([0.3, -0.7, 1.1]), np.array([1.5, 0.2, -0.4])),
    "float32 arrays": (np.array([0.3, -0.7, 1.1], np.float32),
                       np.array([1.5, 0.2, -0.4], np.float32)),
    "float32 scalars": (np.float32(0.3), np.float32(1.5)),
    "int arrays": (np.array([1, -2, 3]), np.array([2, 1, -1])),
    "lists": ([0.3, -0.7, 1.1], np.array([1.5, 0.2, -0.4])),  # (list * list raises)
}


def _expected_type(a):
    if isinstance(a, (np.ndarray, list)):
        return np.float32 if getattr(a, "dtype", None) == np.float32 else np.float64
    return np.float32 if isinstance(a, np.float32) else float


def test_one_gradient_of_each_kind_from_one_grad():
    g = grad(KINDED.f, wrt=(0, 1))
    for name, args in KIND_ARGS.items():
        grads = g(*args)
        single = _expected_type(args[0]) is np.float32
        wide = [np.asarray(a, dtype=np.float64) if np.ndim(a) else float(a) for a in args]
        for i, (d, a) in enumerate(zip(grads, args, strict=True)):
            want = _expected_type(a)
            if np.ndim(a):
                assert isinstance(d, np.ndarray) and d.dtype == want, (name, d)
            else:
                assert type(d) is want, (name, type(d))
            assert np.shape(d) == np.shape(a)
            np.testing.assert_allclose(d, numeric_grad(KINDED.f, wide, i),
                                       rtol=1e-4 if single else 1e-6, atol=1e-5 if single
                                       else 1e-8, err_msg=name)
    # (each kind its own build: a float64 one for arrays, another for Python floats)
    assert g.source_for(*KIND_ARGS["floats"]) != g.source_for(*KIND_ARGS["float64 arrays"])


@pytest.mark.parametrize("name", ["float32 arrays", "float32 scalars", "float64 arrays",
                                  "floats"])
def test_each_kind_against_jax_in_its_precision(name):
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    args = KIND_ARGS[name]

    def jf(x, w):
        y = jnp.tanh(x * w)
        return jnp.sum(y * y) + jnp.sum(x) * 0.5 - jnp.max(w) * jnp.sum(y * x)
    single = _expected_type(args[0]) is np.float32
    jax.config.update("jax_enable_x64", True)  # (float32 arrays stay float32)
    want = jax.grad(jf, argnums=(0, 1))(*(jnp.asarray(a) for a in args))
    ours = grad(KINDED.f, wrt=(0, 1))(*args)
    for o, w in zip(ours, want, strict=True):
        if single:
            assert np.asarray(o).dtype == np.float32 == np.asarray(w).dtype
        np.testing.assert_allclose(o, np.asarray(w), rtol=2e-6 if single else 1e-12,
                                   atol=1e-6 if single else 1e-12)


def test_float32_gradients_are_computed_in_float32():
    # (no float64 copy of a float32 argument: the source is the float64 one)
    x = np.ones(3, np.float32)
    g = grad(KINDED.f, wrt=(0, 1))
    assert "_as_float" not in g.source_for(x, x)
    assert g.source_for(x, x) == g.source_for(x.astype(float), x.astype(float))


def test_float16_is_differentiated_in_float32_and_returned_as_float16():
    # 3 * 200**2 overflows float16 (65504): the derivatives compute in float32 (our choice;
    # JAX computes float16 in float16, and gives inf here), the gradient is a float16
    f = load("import numpy as np\n\ndef cube(x):\n    return np.sum(x ** 3) / 1000.0\n", "cube")
    out = grad(f)(np.array([200.0, 1.0], dtype=np.float16))
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, [120.0, 0.003], rtol=1e-3)
    assert type(grad(f)(np.float16(200.0))) is np.float16


NEGATED = load("""
import numpy as np

def times_negated(x, K):
    return np.sum(x * (-K))

def negated_first(x, K):
    return np.sum(-K * x)

def negated_square(x, K):
    return np.sum(x * -(K * K))

def over_negated(x, K):
    return np.sum(x / -K)

def tanh_of_negated(x, K):
    return np.sum(np.tanh(x * -K))

def exp_of_negated(x, K):
    return np.sum(np.exp(x * (-K)) + K * x)

def cubed_in_parts(x, K):
    return np.sum(K * K * x * K)
""")

NARROW_INTEGERS = [np.array([200, 100], np.uint8), np.array([-128, 5], np.int8),
                   np.array([2, 3], np.uint16), np.array([2, 3], np.uint32),
                   np.array([2, 3], np.uint64), np.array([2, 3]), np.array([0.25, 3.0]), 3]


def _against_central_differences(f, x, *rest):
    """The gradient in x of f(x, *rest) against central differences, with the other
    arguments as they are (numeric_grad would make an integer array float64)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = grad(f)(x, *rest)
        expected = numeric_grad(lambda v: f(v, *rest), [x], 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


# -K of uint8 K is 256 - K, and of int8 -128 is -128, as the function computes it: the
# derivatives read -K as computed, not -1 times a float copy of K (bugs found in review 11)
@pytest.mark.parametrize("name", ["times_negated", "negated_first", "negated_square",
                                  "over_negated", "cubed_in_parts"])
@pytest.mark.parametrize("K", NARROW_INTEGERS, ids=str)
def test_a_negated_integer_is_read_as_the_function_computes_it(name, K):
    _against_central_differences(getattr(NEGATED, name), np.array([1.5, -2.0]), K)


@pytest.mark.parametrize("name", ["tanh_of_negated", "exp_of_negated"])
@pytest.mark.parametrize("K", [np.array([255, 254], np.uint8), np.array([-128, 1], np.int8)],
                         ids=str)
def test_a_negated_integer_inside_a_function(name, K):
    _against_central_differences(getattr(NEGATED, name), np.array([0.015, -0.02]), K)


UNKNOWN = load("""
import numpy as np
from symdiff import stop_gradient

CFG = {"s": np.uint8(200)}
S = np.uint8(200)

def attribute(x, cfg):
    return np.sum(cfg.s * x * x)

def dict_item(x, d):
    return np.sum(d["s"] * x * x)

def module_dict_item(x):
    return np.sum(CFG["s"] * x * x)

def module_data_stopped(x):
    return np.sum(stop_gradient(S) * x * x)

def branch(x, c):
    s = S if c else 1.0
    return np.sum(s * x * x)

def absolute(x, cfg):
    return np.sum(x * np.abs(cfg.s) * np.abs(cfg.s))

class Model:
    scale = np.uint8(200)

    def __init__(self, s):
        self.s = s

    def loss(self, x):
        return np.sum(self.s * x * x)

    def class_scale(self, x):
        return np.sum(self.scale * x * x)
""")


# Values whose kind the build does not know (attributes, dict items, module data read
# through stop_gradient or a branch) are made floats where the derivatives read them:
# 2 * s * x in s's uint8 wrapped, in float16 overflowed (bugs found in review 11)
@pytest.mark.parametrize("s", [np.uint8(200), np.float16(40000), np.float32(3e38),
                               np.array([200, 3], np.uint8), 2.5], ids=repr)
@pytest.mark.parametrize("name", ["attribute", "dict_item", "loss", "absolute"])
def test_a_value_of_a_kind_not_known_is_read_as_a_float(name, s):
    import types

    x = np.array([1.5, -2.0])
    f = {"attribute": lambda x: UNKNOWN.attribute(x, types.SimpleNamespace(s=s)),
         "absolute": lambda x: UNKNOWN.absolute(x, types.SimpleNamespace(s=s)),
         "dict_item": lambda x: UNKNOWN.dict_item(x, {"s": s}),
         "loss": UNKNOWN.Model(s).loss}[name]
    g = {"attribute": lambda x: grad(UNKNOWN.attribute)(x, types.SimpleNamespace(s=s)),
         "absolute": lambda x: grad(UNKNOWN.absolute)(x, types.SimpleNamespace(s=s)),
         "dict_item": lambda x: grad(UNKNOWN.dict_item)(x, {"s": s}),
         "loss": grad(UNKNOWN.Model(s).loss)}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wide = np.asarray(s, np.float64)
        expected = wide * wide + 0 * x if name == "absolute" else 2 * wide * x
        assert numeric_grad(f, [x], 0) == pytest.approx(expected, rel=1e-5) or \
            not np.all(np.isfinite(expected * expected))
        np.testing.assert_allclose(g(x), expected, rtol=1e-6)


@pytest.mark.parametrize("name", ["module_dict_item", "module_data_stopped", "branch",
                                  "class_scale"])
def test_module_and_class_data_of_a_kind_not_known_is_read_as_a_float(name):
    x = np.array([1.5, -2.0])
    args = {"branch": (True,), "class_scale": ()}.get(name, ())
    f = getattr(UNKNOWN.Model(1.0), name) if name == "class_scale" else getattr(UNKNOWN, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(grad(f)(x, *args), [600.0, -800.0])
        np.testing.assert_allclose(numeric_grad(lambda v: f(v, *args), [x], 0),
                                   [600.0, -800.0], rtol=1e-6)


LISTED = load("""
import numpy as np

def slice_repeated(x, l):
    return np.sum(x * (l[:1] * 4))

def slices_joined(x, l):
    return np.sum(x * (l[1:] + l[1:]))

def repeated(x, l):
    return np.sum(x * (2 * l))

def tiled(x, l):
    return np.sum(x * np.tile(l[:1], 4))
""")


# A slice of a list is a list: l[:1] * 4 repeats it, l[1:] + l[1:] joins (bugs found in
# review 11: the gradient read them as arithmetic)
@pytest.mark.parametrize("name, x", [("slice_repeated", [0.5, -1.0, 2.0, 3.0]),
                                     ("slices_joined", [0.5, -1.0]),
                                     ("repeated", [0.5, -1.0, 2.0, 3.0])])
def test_list_arithmetic_on_a_list_not_differentiated(name, x):
    f = getattr(LISTED, name)
    check_grad(f, (np.array(x), [1.0, 2.0]))


@pytest.mark.parametrize("name", ["slice_repeated", "slices_joined", "repeated"])
def test_list_arithmetic_on_a_differentiated_list_is_refused(name):
    f = getattr(LISTED, name)
    x = np.ones(2 if name == "slices_joined" else 4)
    with pytest.raises(SymdiffError) as e:
        grad(f, wrt=1)(x, [1.0, 2.0])
    problem = e.value.problems[0]
    assert problem.message == (
        "this repeats or joins a list that depends on the differentiated inputs (list "
        "arithmetic), which symdiff does not differentiate")
    assert problem.hint == "np.tile(l, n) to repeat it, np.concatenate([a, b]) to join them"
    assert problem.col == 24 and problem.source_line.strip().startswith("return")


def test_a_list_repeated_by_np_tile_is_differentiated():
    x = np.array([0.5, -1.0, 2.0, 3.0])
    np.testing.assert_allclose(grad(LISTED.tiled, wrt=1)(x, [1.0, 2.0]), [4.5, 0.0])


# --- the float path: math's functions on Python floats (floats.on_floats) ---

FLOATS = load('''
import math
import numpy as np

def newton(M, e):
    E = M
    step = 1.0
    while abs(step) > 1e-12:
        step = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - step
    return np.cos(E) - e

def mixed(x, y):
    a = np.tanh(x * y) + np.arctan2(y, x) * np.exp(-x * x)
    b = np.sqrt(x * x + y * y) * np.abs(a) + np.log1p(y * y)
    if a > 0:
        b = b * np.cosh(0.1 * x)
    return np.arcsinh(b) + np.pi * np.hypot(x, a)

def logs(x, y):
    return np.log(x) + np.sqrt(y)

def big(x, y):
    return np.exp(x) * y

def divided(x, y):
    return 1.0 / np.sin(x) + y

def own(x, y):
    return 1.0 / x + np.sin(y)

def own_math(x, y):
    return math.log(x) + np.sin(y)
''')


def _float_kinds(f, args):
    """The gradient of f at args: Python floats, NumPy float64 scalars, 0-d arrays."""
    g = grad(f, wrt=(0, 1))
    with np.errstate(all="ignore"):
        return (g(*args), g(*map(np.float64, args)), g(*(np.array(a) for a in args)))


def _same(a, b):
    return np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                          equal_nan=True)


NARROW = load('''
import numpy as np

W32 = np.linspace(0.5, 3.0, 7).astype(np.float32)

def phase(t, w):
    return np.sum(np.cos(np.exp(t) * w * 1e5))

def phase_of_data(t):
    return np.sum(np.cos(np.exp(t) * W32 * 1e5))

def root(x, y):
    return np.sqrt(np.exp(x) * y)

def flagged(x, b):
    return np.sin(x) * np.cosh(b)
''')


@pytest.mark.parametrize(("name", "args", "wrt"), [
    ("phase", (2.0, np.linspace(0.5, 3.0, 7).astype(np.float32)), 0),
    ("phase_of_data", (2.0,), 0),
    ("root", (12.0, np.float16(1.0)), 0),
    ("flagged", (0.8, True), 0),
])
def test_python_floats_meeting_narrower_numpy_values_compute_as_the_function_does(
        name, args, wrt):
    # NumPy promotes a Python float weakly: math.exp(t) * w is a float32 for a float32 w,
    # np.exp(t) * w a float64. The gradient must compute as the function does (NumPy's
    # float64 here), not in float32 or float16: 5% off, or inf, before.
    f = getattr(NARROW, name)
    got = grad(f, wrt=wrt)(*args)
    as_array = grad(f, wrt=wrt)(*[np.array(a, dtype=np.float64) if i == wrt else a
                                  for i, a in enumerate(args)])
    assert np.allclose(got, as_array, rtol=1e-12, atol=0)
    if name.startswith("phase"):  # (a phase of 1e6 radians: differences cannot tell)
        p = np.exp(2.0) * np.linspace(0.5, 3.0, 7).astype(np.float32).astype(np.float64) * 1e5
        assert np.isclose(got, -np.sum(np.sin(p) * p), rtol=1e-9)
    else:
        check_grad(f, args, wrt=(wrt,))
    value, _ = value_and_grad(f, wrt=wrt)(*args)
    assert value == f(*args) and np.asarray(value).dtype == np.asarray(f(*args)).dtype


@pytest.mark.parametrize("name", ["newton", "mixed"])
def test_the_float_path_agrees_with_numpy_scalars_and_0d_arrays(name):
    f = getattr(FLOATS, name)
    rng = np.random.default_rng(7)
    source = grad(f, wrt=(0, 1)).source_for(0.5, 0.25)
    code = "\n".join(line.split("#")[0] for line in source.split('"""')[2].splitlines())
    assert "math.sin" in code or "math.tanh" in code
    assert not any(h in code for h in ("_fit", "_unbroadcast", "_plus", "_add_to",
                                       "_shape_of", "np."))
    for _ in range(10):
        args = (float(rng.uniform(0.2, 2.0)), float(rng.uniform(0.05, 0.9)))
        floats, scalars, arrays = _float_kinds(f, args)
        assert all(type(v) is float for v in floats)
        assert all(isinstance(v, np.ndarray) and v.shape == () for v in arrays)
        np.testing.assert_allclose(floats, scalars, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(floats, arrays, rtol=1e-12, atol=1e-15)
        check_grad(f, args, wrt=(0, 1))


@pytest.mark.parametrize("name, args", [
    ("logs", (0.0, 1.0)),  # math.log(0.0) raises: np.log gives -inf, d/dx inf
    ("logs", (-1.0, 1.0)),  # a domain error in the forward sweep: nan
    ("logs", (1.0, 0.0)),  # d sqrt(y)/dy at 0: 1/0 in the backward sweep
    ("big", (1000.0, 1.0)),  # math.exp overflows where np.exp gives inf
    ("divided", (0.0, 1.0)),  # 1.0 / np.sin(x) of NumPy's 0.0: inf, not ZeroDivisionError
])
def test_where_math_raises_the_float_path_gives_what_numpy_gives(name, args):
    f = getattr(FLOATS, name)
    assert "math." in grad(f, wrt=(0, 1)).source_for(*args)
    floats, scalars, arrays = _float_kinds(f, args)
    assert _same(floats, scalars) and _same(floats, arrays)
    with np.errstate(all="ignore"):  # (again: now from the specialisations built)
        assert _same(grad(f, wrt=(0, 1))(*args), scalars)
        value, _ = value_and_grad(f, wrt=(0, 1))(*args)
        assert _same(value, f(*args))


@pytest.mark.parametrize("name, error", [("own", ZeroDivisionError),
                                         ("own_math", ValueError)])
def test_the_functions_own_errors_on_floats_still_raise(name, error):
    f = getattr(FLOATS, name)
    with pytest.raises(error):
        f(0.0, 1.0)
    with pytest.raises(error):
        grad(f, wrt=(0, 1))(0.0, 1.0)


def test_a_fractional_power_keeps_numpy_floats():
    # (-0.5) ** 1.5 of a Python float is a complex number; of np.sin's float64, nan.
    f = load('''
import numpy as np

def f(x):
    return np.sin(x) ** 1.5
''').f
    assert "math." not in grad(f).source_for(-0.5)
    with np.errstate(all="ignore"):
        assert np.isnan(grad(f)(-0.5))


def test_the_float_path_takes_python_ints_and_gives_a_float_value():
    f = FLOATS.mixed
    floats = grad(f, wrt=(0, 1))(1.0, 2.0)
    assert grad(f, wrt=(0, 1))(1, 2) == floats
    assert grad(f, wrt=(0, 1))(True, 2) == floats
    value, _ = value_and_grad(f, wrt=(0, 1))(1.0, 2.0)
    assert type(value) is float and value == pytest.approx(float(f(np.float64(1.0), 2.0)))
    # (np.float64 keeps NumPy's functions: its value is NumPy's)
    assert type(value_and_grad(f, wrt=(0, 1))(np.float64(1.0), 2.0)[0]) is np.float64


def test_the_float_path_in_a_container_falls_back_as_a_float_does():
    f = load('''
import numpy as np

def f(d):
    return np.log(d["x"]) * d["y"]
''').f
    g = grad(f)
    assert "math.log" in g.source_for({"x": 2.0, "y": 3.0})
    with np.errstate(all="ignore"):
        for x in (2.0, 0.0, -1.0):
            floats = g({"x": x, "y": 3.0})
            scalars = g({"x": np.float64(x), "y": np.float64(3.0)})
            assert floats.keys() == scalars.keys()
            assert all(_same(floats[k], scalars[k]) for k in floats)
