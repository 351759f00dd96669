"""Integer, float16, float32, boolean and list arguments and module data: what the gradient
converts to float64 and what it keeps, against the function's own arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_grad, fresh_module, load
from gradcheck import contract_grads as run

from symdiff import grad

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
    else:
        assert type(g) is float
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

fresh_module("import numpy as np\nA = np.linspace(0.5, 1.5, 4)\n"
             "B = np.linspace(-1.0, 1.0, 3).reshape(3, 1)\n", "adv4rand")
