"""Module-level data and free names a gradient reads: read when it runs, never returned or
mutated, also through other modules' attributes and closures."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import both_one, check_grad, fresh_module, load

from symdiff import SymdiffError, grad

V3 = np.array([0.5, -1.2, 2.0])


# --- module-level data and free names ---------------------------------------------------

def test_module_data_rebound_or_mutated_between_calls():
    m = load("""
import numpy as np
W = np.array([1.0, 2.0, 3.0])
C = 2.0
def helper(u):
    return np.sum(W * u * u)
def f(x):
    return np.sum(W * x) + C * np.sum(x * x)
def g(x):
    return helper(x) * C
""")
    gf, gg = grad(m.f), grad(m.g)
    np.testing.assert_allclose(gf(V3), m.W + 2 * m.C * V3)
    m.W, m.C = np.array([0.0, 0.0, 1.0]), 5.0
    np.testing.assert_allclose(gf(V3), m.W + 2 * m.C * V3)
    m.W[0] = 7.0
    np.testing.assert_allclose(gf(V3), m.W + 2 * m.C * V3)
    np.testing.assert_allclose(gg(V3), 2 * m.W * V3 * m.C)


def test_helper_of_helper_in_other_module_redefined():
    other = fresh_module("import numpy as np\n\ndef inner(u):\n    return u * u\n\n"
                         "def outer(u):\n    return inner(u) * 2.0\n", "adversarial_other")
    replacement = load("def inner(u):\n    return u * u * u\n")
    m = load("import numpy as np\nimport adversarial_other\n\n"
             "def f(x):\n    return np.sum(adversarial_other.outer(x))\n")
    g = grad(m.f)
    x = np.array([1.0, 2.0])
    np.testing.assert_allclose(g(x), 4 * x)
    other.inner = replacement.inner
    np.testing.assert_allclose(g(x), 6 * x ** 2)


@pytest.mark.parametrize("name", ["loop_bound", "slice_bound", "threshold", "mask"])
def test_module_numbers_in_undifferentiated_code_are_read_at_call_time(name):
    m = load("""
import numpy as np
N = 2
K = 1
T = 0.0
W = np.array([1.0, 2.0, 3.0])
def loop_bound(x):
    s = x
    for i in range(N):
        s = s * x
    return np.sum(s)
def slice_bound(x):
    return np.sum(x[:K] ** 2)
def threshold(x):
    if np.sum(x) > T:
        return np.sum(x ** 2)
    return np.sum(x)
def mask(x):
    return np.sum(x[W > 1.5] ** 2)
""")
    f = getattr(m, name)
    x = np.array([0.5, 1.0, 1.5])
    g = grad(f)
    g(x)
    m.N, m.K, m.T, m.W = 3, 3, 10.0, np.array([2.0, 2.0, 2.0])
    check_grad(f, (x,), grads=(g(x),))


def test_rebound_numpy_alias():
    m = load("import numpy as np\nact = np.tanh\n\ndef f(x):\n    return act(x)\n")
    assert grad(m.f)(0.3) == pytest.approx(1 - np.tanh(0.3) ** 2)
    m.act = np.sin
    assert grad(m.f)(0.3) == pytest.approx(np.cos(0.3))


def test_unreadable_helper_is_reported():
    m = load("import numpy as np\n\ndef f(x):\n    return np.sum(h(x) * x)\n")
    exec("def h(u):\n    return u * 2.0\n", vars(m))
    with pytest.raises(SymdiffError, match="source of h"):
        grad(m.f)(np.array([1.0, 2.0]))


U3 = np.array([0.5, -1.0, 2.0])


# --- values read through another module's attributes ---------------------------------

def test_module_attribute_array_is_read_when_the_gradient_runs():
    w = fresh_module("import numpy as np\nW = np.array([1.0, 2.0, 3.0])\n", "adversarial2_w")
    m = load("import numpy as np\nimport adversarial2_w\n\n"
             "def f(x):\n    return np.sum(adversarial2_w.W * x)\n")
    np.testing.assert_allclose(grad(m.f)(U3), [1.0, 2.0, 3.0])
    w.W = np.array([4.0, 5.0, 6.0])
    np.testing.assert_allclose(grad(m.f)(U3), [4.0, 5.0, 6.0])


def test_module_attribute_number_rebound():
    cfg = fresh_module("SCALE = 2.0\n", "adversarial2_cfg")
    m = load("import numpy as np\nimport adversarial2_cfg\n\n"
             "def f(x):\n    return adversarial2_cfg.SCALE * np.sum(x ** 2)\n")
    g = grad(m.f)
    np.testing.assert_allclose(g(U3), 4 * U3)
    cfg.SCALE = 5.0
    np.testing.assert_allclose(g(U3), 10 * U3)


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


# --- a gradient that is another module's array ---------------------------------------

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


X2 = np.array([1.0, 2.0])


def test_module_number_rebound_between_calls_is_read_afresh():
    m = load("""
import numpy as np
SCALE = 2.0
K = np.array([1.0, 2.0])

def scaled(x):
    return np.sum(x * SCALE * SCALE) + np.sum(x * K * K)
""")
    g = grad(m.scaled)
    np.testing.assert_allclose(g(X2), [5.0, 8.0])
    m.SCALE = 3.0
    m.K = np.array([2, 3], dtype=np.uint8)
    np.testing.assert_allclose(g(X2), [13.0, 18.0])
    m.K = [1.0, 1.0]
    np.testing.assert_allclose(g(X2), [10.0, 10.0])


def test_module_data_read_as_an_index_and_by_the_derivatives():
    m = load("""
import numpy as np
IDX = np.array([0, 2, 2])
MASK = np.array([True, False, True, False])
K_float = 3.0

def f(x):
    return np.sum(x[IDX] * IDX) + np.sum(x[MASK] * 2.0) + np.sum(x * MASK * K_float)
""")
    x = np.array([1.0, 2.0, 3.0, 4.0])
    g = both_one(m.f, (x,))
    np.testing.assert_allclose(g, [0.0 + 2.0 + 3.0, 0.0, 4.0 + 2.0 + 3.0, 0.0], rtol=1e-12)
    check_grad(m.f, (x,), grads=(g,))
