"""The public API on straight-line code: wrt forms, shapes, caching, stop_gradient, source."""

import inspect
import math
import os
import subprocess
import sys
import traceback

import numpy as np
import pytest
from gradcheck import agrees, check_grad, load

from symdiff import SymdiffError, grad, stop_gradient, value_and_grad

M = load("""
import math
import numpy as np
import numpy as xp
from math import exp
from numpy import sin
import symdiff
from symdiff import stop_gradient
from symdiff import stop_gradient as sg

SCALE = 2.0

def chain(x, y, z):
    e = x
    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)
    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)
    return e

def two(x, y):
    return np.sum(np.sin(x) * y) + stop_gradient(np.max(x))

def aliases(x):
    a = xp.tanh(x) + sin(x) * exp(1.0) + math.erf(x) + math.pi * x
    return a

def aug(x, y):
    a = x
    a += y
    a -= 0.5 * y
    a *= x
    a /= y
    a **= 2
    return a

def unpack(x, y):
    a, b = x * y, x + y
    a, b = b, a
    return a * b ** 2

def self_times_sg(x):
    return x * stop_gradient(x)

def straight_through(x):
    return x + sg(np.round(x) - x)

def nested(x):
    return x * sg(x * sg(x) + 1.0) + symdiff.stop_gradient(x) ** 2

def scaled(x):
    return SCALE * x ** 2

def defaults(x, y=3.0, *, k=2.0):
    return x * y * k

def const(x):
    return 4.0

def unused(x, y):
    return x ** 2

def broadcast(x, y):
    return np.sum(x * y + x)

def means(x):
    return np.mean(x ** 2) + np.sum(x) / 2

def collide(x, dx, _t0):
    e = x * dx + _t0
    return e * x

def checked(x):
    assert x > 0, "x must be positive"
    return np.log(x)

def int_ops(x):
    return np.sum(x ** 3 + x / 3)

def softmax_ce(x):
    z = x - stop_gradient(np.max(x))
    return np.log(np.sum(np.exp(z)))
""")

RNG = np.random.default_rng(0)


def test_chain_matches_central_differences_for_every_argument():
    check_grad(M.chain, (0.3, 0.5, 0.7), wrt=(0, 1, 2))


def test_default_wrt_is_first_parameter_and_names_positions_agree():
    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    gx = grad(M.two)(x, y)
    np.testing.assert_allclose(gx, np.cos(x) * y)
    np.testing.assert_allclose(grad(M.two, wrt="y")(x, y), np.sin(x))
    np.testing.assert_allclose(grad(M.two, wrt=1)(x, y), np.sin(x))
    gx2, gy2 = grad(M.two, wrt=("x", "y"))(x, y)
    np.testing.assert_allclose(gx2, gx)
    np.testing.assert_allclose(gy2, np.sin(x))
    (only,) = grad(M.two, wrt=(1,))(x, y)
    np.testing.assert_allclose(only, np.sin(x))
    assert grad(wrt="y")(M.two)(x, y).shape == (4,)


def test_value_and_grad_returns_the_value_and_the_gradients():
    value, (gx, gy) = value_and_grad(M.unpack, wrt=(0, 1))(1.5, -0.5)
    assert value == pytest.approx(M.unpack(1.5, -0.5))
    check_grad(M.unpack, (1.5, -0.5), wrt=(0, 1), grads=(gx, gy))
    v, g = value_and_grad(wrt="x")(M.unpack)(1.5, -0.5)
    assert v == value and g == gx


def test_aliased_imports_resolve_to_the_same_primitives():
    check_grad(M.aliases, (0.4,))
    assert grad(M.aliases)(0.4) == pytest.approx(
        (1 - math.tanh(0.4) ** 2) + math.cos(0.4) * math.e
        + 2 / math.sqrt(math.pi) * math.exp(-0.16) + math.pi)


def test_augmented_assignment_and_tuple_unpacking():
    check_grad(M.aug, (0.7, 1.3), wrt=(0, 1))
    check_grad(M.unpack, (0.7, 1.3), wrt=(0, 1))


def test_gradient_shapes_and_types_follow_the_parameter():
    assert type(grad(M.chain)(0.3, 0.5, 0.7)) is float
    assert type(grad(M.chain)(1, 0.5, 0.7)) is float  # integer input, float gradient
    g = grad(M.const)(np.ones((2, 3)))
    assert g.shape == (2, 3) and g.dtype == np.float64 and not g.any()
    assert grad(M.const)(2.0) == 0.0
    gy = grad(M.unused, wrt="y")(2.0, np.ones((2, 2)))
    assert gy.shape == (2, 2) and gy.dtype == np.float64 and not gy.any()
    g0 = grad(M.means)(np.array(2.0))
    assert isinstance(g0, np.ndarray) and g0.shape == ()
    gi = grad(M.means)(np.arange(4))
    assert gi.dtype == np.float64
    np.testing.assert_allclose(gi, 2 * np.arange(4) / 4 + 0.5)


def test_integer_inputs_are_differentiated_as_floats():
    x = np.array([1, 2, 4])
    g = grad(M.int_ops)(x)
    assert g.dtype == np.float64
    np.testing.assert_allclose(g, 3.0 * x**2 + 1 / 3)
    assert grad(M.int_ops)(2) == 12 + 1 / 3


def test_broadcasting_sums_gradients_back_to_each_shape():
    x, y = RNG.standard_normal((3, 1)), RNG.standard_normal((1, 4))
    gx, gy = check_grad(M.broadcast, (x, y), wrt=(0, 1))
    assert gx.shape == (3, 1) and gy.shape == (1, 4)
    gs, ga = grad(M.broadcast, wrt=(0, 1))(1.5, RNG.standard_normal(5))
    assert type(gs) is float and ga.shape == (5,)
    check_grad(M.broadcast, (1.5, RNG.standard_normal(5)), wrt=(0, 1))
    check_grad(M.means, (RNG.standard_normal((2, 3)),))


def test_inputs_are_never_modified_and_gradients_do_not_alias_them():
    x, y = RNG.standard_normal(5), RNG.standard_normal(5)
    x0, y0 = x.copy(), y.copy()
    gx, gy = grad(M.broadcast, wrt=(0, 1))(x, y)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)
    assert not np.shares_memory(gx, gy) and not np.shares_memory(gy, x)
    gx[:] = 0  # gradients are writable, fresh arrays
    np.testing.assert_array_equal(x, x0)


def test_keyword_arguments_and_defaults():
    g = grad(M.defaults)
    assert g(2.0) == 6.0
    assert g(2.0, k=5.0) == 15.0
    assert g(x=2.0, y=1.0) == 2.0
    assert grad(M.defaults, wrt="k")(2.0, 3.0, k=1.0) == 6.0


def test_module_level_data_is_read_at_call_time():
    g = grad(M.scaled)
    assert g(3.0) == 12.0
    M.SCALE = 5.0
    try:
        assert g(3.0) == 30.0
    finally:
        M.SCALE = 2.0


def test_user_names_are_never_shadowed():
    check_grad(M.collide, (0.5, 2.0, 3.0), wrt=(0, 1, 2))
    src = grad(M.collide, wrt=(0, 1, 2)).source
    assert "dx_1" in src  # the gradient of the parameter dx, since dx itself is taken


def test_assert_is_kept_in_the_forward_sweep():
    assert grad(M.checked)(2.0) == 0.5
    with pytest.raises(AssertionError, match="positive"):
        grad(M.checked)(-1.0)


def test_non_scalar_output_raises_at_the_call():
    f = load("""
    def f(x):
        return x * 2
    """, "f")
    with pytest.raises(SymdiffError, match=r"scalar.*|.*\(3,\).*scalar"):
        grad(f)(np.ones(3))
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.ones((2, 2)))
    assert "(2, 2)" in str(e.value) and "scalar" in str(e.value)


# --- stop_gradient ---


def test_stop_gradient_is_the_identity_when_run():
    x = np.arange(3.0)
    assert stop_gradient(x) is x


def test_x_times_stop_gradient_x():
    assert grad(M.self_times_sg)(3.0) == 3.0


def test_straight_through_estimator_has_gradient_one():
    assert grad(M.straight_through)(2.7) == 1.0
    assert grad(M.straight_through)(-0.4) == 1.0


def test_nested_and_attribute_stop_gradient():
    # d/dx [x * c1 + c2**2] with c1, c2 constants = c1 = x * x + 1
    assert grad(M.nested)(3.0) == 10.0


def test_stop_gradient_is_visible_and_kept_in_the_source():
    src = grad(M.softmax_ce).source
    assert "_sg0 = np.max(x)" in src and "stop_gradient" in src
    assert "z = x - _sg0" in src


def test_stable_softmax_logsumexp_gradient_is_softmax():
    x = np.array([1000.0, 1001.0, 1002.0])  # overflows without the shift
    g = grad(M.softmax_ce)(x)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(g, e / e.sum())


# --- the generated source ---


def test_source_is_deterministic_across_processes():
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import gradcheck, symdiff;"
        "m = gradcheck.load(open(sys.argv[2]).read());"
        "print(symdiff.grad(m.chain, wrt=(0, 1, 2)).source)"
    )
    path = inspect.getsourcefile(M.chain)
    here = os.path.dirname(__file__)
    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        run = subprocess.run([sys.executable, "-c", code, here, path], env=env,
                             capture_output=True, text=True, check=True)
        outs.add(run.stdout.replace(path, "F").split('"""', 2)[2])
    assert len(outs) == 1


def test_source_is_registered_with_linecache_and_inspect():
    g = grad(M.chain)
    assert inspect.getsource(g) == g.source
    assert g.source.startswith("def grad_chain(x, y, z):")
    assert "Gradient of chain (" in g.source and ":13) with respect to x." in g.source


def test_tracebacks_show_generated_lines():
    g = grad(M.checked)
    try:
        g(-1.0)
    except AssertionError:
        text = traceback.format_exc()
    assert "assert x > 0, 'x must be positive'" in text
    assert "grad_checked-" in text


def test_forward_code_calls_what_the_user_called():
    src = grad(M.aliases).source
    assert "math.erf(x)" in src and "xp.tanh(x)" in src and "sin(x) * exp(1.0)" in src


def test_memory_cache_skips_sympy_on_second_grad(monkeypatch):
    f = load("""
    import numpy as np
    def f(x):
        return np.sin(x) ** 2
    """, "f")
    first = grad(f)
    first(1.0)
    import sympy

    def boom(*a, **k):
        raise AssertionError("SymPy called on a cache hit")

    monkeypatch.setattr(sympy, "diff", boom)
    monkeypatch.setattr(sympy, "cse", boom)
    second = grad(f)
    assert second(1.0) == first(1.0)
    assert second.source_for(1.0) is first.source_for(1.0)
    # Different options are a different entry.
    with pytest.raises(SymdiffError, match="cache hit"):
        value_and_grad(f)(1.0)


def test_building_is_local_not_inlined():
    # Ten chained lines: an inlined derivative would be enormous; ours grows linearly.
    body = "\n".join(["    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)"] * 10)
    f = load(f"import numpy as np\ndef f(x, y, z):\n    e = x\n{body}\n    return e\n", "f")
    src = grad(f, wrt=(0, 1, 2)).source
    assert len(src.splitlines()) < 200
    check_grad(f, (0.3, 0.5, 0.7), wrt=(0, 1, 2))


def test_gradients_that_are_one_array_are_returned_as_two():
    f = load("""
import numpy as np
def f(x, y):
    return np.sum(np.sin(x + y))
""", "f")
    x, y = np.array([0.1, 0.2]), np.array([0.3, 0.4])
    gx, gy = grad(f, wrt=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.cos(x + y))
    np.testing.assert_allclose(gy, np.cos(x + y))
    assert gx is not gy and not np.shares_memory(gx, gy)


V3 = np.array([0.5, -1.2, 2.0])


NAMES = load("""
import numpy as xp

def local_named_np(x):
    np = x * 2
    s = 0.0
    for row in x:
        s = s * row + xp.sum(np)
    return s

def local_named_like_runtime_helper(x):
    _zeros = 2.0
    _unbroadcast = x * _zeros
    return xp.sum(_unbroadcast ** 2)

def locals_named_like_temporaries(x):
    _t0 = xp.sin(x)
    d_t0 = _t0 * x
    dx = d_t0 + x
    _t1 = xp.sum(dx * dx)
    d_t1 = _t1 * 2.0
    return d_t1 + xp.sum(_t0)

def locals_named_like_adjoints(x, dx):
    d_ret = x * dx
    _sg0 = xp.exp(d_ret)
    return xp.sum(_sg0)
""")


@pytest.mark.parametrize("name, args, wrt", [
    ("locals_named_like_temporaries", (V3,), (0,)),
    ("locals_named_like_adjoints", (V3, V3 * 2), (0, 1)),
])
def test_user_names_that_look_generated(name, args, wrt):
    agrees(getattr(NAMES, name), args, wrt)


@pytest.mark.parametrize("name", ["local_named_np", "local_named_like_runtime_helper"])
def test_user_names_that_shadow_generated_code(name):
    agrees(getattr(NAMES, name), (V3,))
