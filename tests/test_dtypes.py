"""Integer, float16, float32, boolean and list arguments and module data: what the gradient
converts to float64 and what it keeps, against the function's own arithmetic."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_grad, load
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
