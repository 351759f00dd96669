"""Methods: grad of a bound method, @grad in a class body, classmethods and staticmethods.

As jax.grad does with a bound method, the gradient is with respect to the parameters after
self (wrt=0 is the first of them); what a method reads from self is a value, read at each
call, and not differentiated.
"""

import copy
import importlib
import inspect
import pickle
import sys
import textwrap

import numpy as np
import pytest
from gradcheck import check_grad, load, numeric_grad

from symdiff import SymdiffError, grad, value_and_grad

SOURCE = """
    import numpy as np
    from symdiff import grad, value_and_grad


    class Config:
        def __init__(self, lr):
            self.lr = lr


    def penalty(model, x):
        return model.scale * np.sum(x ** 2)


    class Model:
        k = 2.0

        def __init__(self, W, scale):
            self.W = W
            self.scale = scale
            self.cfg = Config(0.5)

        def loss(self, x, y=1.0):
            h = np.tanh(self.W @ x) * self.scale
            return np.sum(h ** 2) * self.cfg.lr + np.sum(self.W[0] * x) * y + penalty(self, x)

        def energy(self, x):
            return np.sum(np.sin(self.W @ x)) * self.k

        denergy = grad(energy)
        value_and_denergy = value_and_grad(energy)

        def pair(self, a, b):
            return np.sum(a * b * self.W[1]) + self.k * np.sum(a ** 2 * b)

        dpair_b = grad(pair, wrt="b")
        dpair_both = grad(pair, wrt=(0, 1))

        @grad(wrt=1)
        def dpair_at_1(self, a, b):
            return np.sum(a * b * self.W[1]) + self.k * np.sum(a ** 2 * b)

        @classmethod
        def cubic(cls, x):
            return cls.k * x ** 3

        @classmethod
        @grad
        def dcubic(cls, x):
            return cls.k * x ** 3

        @grad
        @classmethod
        def dcubic_too(cls, x):
            return cls.k * x ** 3

        @staticmethod
        def square(x):
            return x ** 2

        @staticmethod
        @grad
        def dsquare(x):
            return x ** 2

        @grad
        @staticmethod
        def dsquare_too(x):
            return x ** 2


    class Bigger(Model):
        k = 5.0


    class MLP:
        def __init__(self, layers, bias):
            self.layers = layers
            self.params = {"bias": bias, "steps": 2}
            self.centred = True

        def loss(self, x):
            for W in self.layers:
                x = np.tanh(W @ x)
            for i in range(self.params["steps"]):
                x = x * self.layers[i][0]
            if self.centred:
                x = x - self.params["bias"]
            return np.sum(x ** 2) + len(self.layers) * np.sum(x)
"""

M = load(SOURCE)
RNG = np.random.default_rng(7)
W = RNG.standard_normal((3, 4))
X = RNG.standard_normal(4)
Y = RNG.standard_normal(4)


def model(cls=None, scale=1.5):
    return (cls or M.Model)(W.copy(), scale)


@pytest.fixture(scope="module")
def jax_module():
    """The same classes over jax.numpy, for jax.grad of the same bound methods."""
    jax = pytest.importorskip("jax")
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield jax, load(SOURCE.replace("import numpy as np", "import jax.numpy as np"))
    jax.config.update("jax_enable_x64", previous)


# --- grad of a bound method: with respect to the parameters after self ---

def test_a_bound_method_is_differentiated_after_self():
    m = model()
    g = check_grad(m.loss, (X, 2.0), wrt=(0, 1))
    np.testing.assert_allclose(grad(m.loss)(X, 2.0), g[0])
    np.testing.assert_allclose(grad(m.loss, wrt=1)(X, 2.0), g[1])
    np.testing.assert_allclose(grad(m.loss, wrt="y")(X, 2.0), g[1])
    np.testing.assert_allclose(grad(m.loss, wrt=-1)(X, 2.0), g[1])


def test_attributes_are_read_at_each_call():
    m = model()
    g = grad(m.loss)
    before = g(X)
    m.scale, m.W, m.cfg.lr = 4.0, 2.0 * W, 3.0  # after the gradient is built
    after = g(X)
    np.testing.assert_allclose(after, numeric_grad(m.loss, [X], 0), rtol=1e-6, atol=1e-7)
    assert not np.allclose(before, after)


def test_each_object_gives_its_own_gradient():
    a, b = model(scale=1.0), model(M.Bigger, scale=3.0)
    for m in (a, b):
        np.testing.assert_allclose(grad(m.energy)(X), numeric_grad(m.energy, [X], 0),
                                   rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(grad(m.loss)(X), numeric_grad(m.loss, [X], 0),
                                   rtol=1e-6, atol=1e-7)


def test_value_and_grad_of_a_bound_method():
    m = model()
    value, g = value_and_grad(m.loss, wrt=(0, 1))(X, 2.0)
    assert value == pytest.approx(m.loss(X, 2.0))
    np.testing.assert_allclose(g[0], numeric_grad(m.loss, [X, 2.0], 0), rtol=1e-6, atol=1e-7)
    assert g[1] == pytest.approx(numeric_grad(m.loss, [X, 2.0], 1))


def test_the_generated_source_keeps_self_as_its_parameter():
    m = model()
    source = grad(m.loss).source
    assert source.startswith("def grad_loss(self, x, y=1.0):\n")
    assert "= self.W  # line" in source and "= self.cfg.lr  # line" in source
    assert M.Model.denergy.source.startswith("def grad_energy(self, x):\n")


def test_a_bound_gradient_shows_its_method():
    m = model()
    g = grad(m.loss, wrt="y")
    assert g.fun == m.loss and g.wrt == ("y",)
    assert repr(g).startswith("<symdiff grad of Model.loss bound to <")
    assert repr(g).endswith(" wrt ('y',)>")
    assert repr(M.Model.dpair_at_1) == "<symdiff grad of Model.dpair_at_1 wrt (1,)>"
    assert inspect.getsource(g).startswith("def grad_loss(self, x, y=1.0):")


def test_a_callable_object_is_differentiated_through_its_call_method():
    quadratic = load("""
        import numpy as np

        class Quadratic:
            def __init__(self, A):
                self.A = A

            def __call__(self, x):
                return 0.5 * x @ self.A @ x
        """)
    A = W.T @ W + np.eye(4)
    q = quadratic.Quadratic(A)
    np.testing.assert_allclose(grad(q)(X), A @ X)
    assert grad(q).fun == q.__call__


def test_attributes_of_any_parameter_that_is_not_differentiated_are_values():
    f = load("""
        import numpy as np

        def f(x, cfg):
            return np.sum(cfg.W[1] * x) * cfg.scale
        """, "f")
    cfg = model()
    np.testing.assert_allclose(grad(f)(X, cfg), W[1] * cfg.scale)


def test_attributes_of_module_level_objects_and_classes_are_read_at_each_call():
    module = load("""
        import numpy as np

        class Config:
            lr = 2.0

        CONFIG = Config()
        CONFIG.W = np.ones(4)

        def f(x):
            return CONFIG.lr * np.sum(CONFIG.W * x ** 2) + Config.lr * np.sum(x)
        """)
    g = grad(module.f)
    g(X)  # built with the values of now
    module.CONFIG.lr, module.CONFIG.W, module.Config.lr = 5.0, W[0], 3.0
    np.testing.assert_allclose(g(X), 10.0 * W[0] * X + 3.0)


def test_a_def_inside_a_method_reads_self():
    nested = load("""
        import numpy as np

        class Model:
            k = 3.0

            def loss(self, x):
                def term(z):
                    return self.k * np.sum(z ** 2)
                return term(x) + term(2.0 * x)
        """)
    np.testing.assert_allclose(grad(nested.Model().loss)(X), 30.0 * X)


def test_a_local_class_method():
    make = load("""
        def make(k):
            class Local:
                def loss(self, x):
                    return k * self.scale * x ** 2
            return Local
        """, "make")
    m = make(3.0)()
    m.scale = 2.0
    assert grad(m.loss)(1.5) == 18.0 and grad(make(3.0).loss)(m, 1.5) == 18.0


def mlp():
    rng = np.random.default_rng(11)
    return M.MLP([rng.standard_normal((4, 4)) for _ in range(3)], W[2])


def test_a_network_whose_layers_are_attributes():
    net = mlp()
    np.testing.assert_allclose(grad(net.loss)(X), numeric_grad(net.loss, [X], 0),
                               rtol=1e-6, atol=1e-7)
    net.centred, net.layers = False, net.layers[:2]  # another path, read at the call
    np.testing.assert_allclose(grad(net.loss)(X), numeric_grad(net.loss, [X], 0),
                               rtol=1e-6, atol=1e-7)


# --- @grad in a class body gives a method ---

def test_grad_in_a_class_body_is_a_method():
    m = model()
    expected = numeric_grad(m.energy, [X], 0)
    np.testing.assert_allclose(m.denergy(X), expected, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(M.Model.denergy(m, X), expected, rtol=1e-6, atol=1e-7)
    value, g = m.value_and_denergy(X)
    assert value == pytest.approx(m.energy(X))
    np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-7)


def test_wrt_in_a_class_body_counts_after_self():
    m = model()
    expected = [numeric_grad(m.pair, [X, Y], i) for i in (0, 1)]
    np.testing.assert_allclose(m.dpair_b(X, Y), expected[1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(m.dpair_at_1(X, Y), expected[1], rtol=1e-6, atol=1e-7)
    for got, want in zip(m.dpair_both(X, Y), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_a_subclass_overriding_an_attribute_gets_its_own_gradient():
    a, b = model(), model(M.Bigger)
    assert np.allclose(b.denergy(X), 2.5 * a.denergy(X))
    np.testing.assert_allclose(b.denergy(X), numeric_grad(b.energy, [X], 0),
                               rtol=1e-6, atol=1e-7)


def test_the_gradient_of_a_method_is_built_once_for_every_object():
    a, b = model(), model(M.Bigger, scale=2.0)
    assert a.denergy.gradient is b.denergy.gradient is M.Model.denergy
    a.denergy(X)
    b.denergy(X)
    # (a key per class, each checked at its first call; one build for all)
    assert len({id(spec.built) for spec in M.Model.denergy._specs.values()}) == 1


def test_a_gradient_of_a_plain_function_kept_in_a_class_stays_a_function():
    # Not a method: no self is passed (as before gradients were descriptors).
    holder = load("""
        from symdiff import grad

        def cube(x):
            return x ** 3

        class Holder:
            dcube = grad(cube)
        """)
    assert holder.Holder().dcube(2.0) == 12.0 and holder.Holder.dcube(2.0) == 12.0


# --- classmethods and staticmethods ---

@pytest.mark.parametrize("cls", ["Model", "Bigger"])
def test_classmethods_in_each_spelling(cls):
    owner = getattr(M, cls)
    expected = 3.0 * owner.k * 2.0 ** 2
    assert grad(owner.cubic)(2.0) == expected
    assert owner.dcubic(2.0) == expected and owner.dcubic_too(2.0) == expected
    m = model(owner)
    assert m.dcubic(2.0) == expected and m.dcubic_too(2.0) == expected
    assert grad(m.cubic)(2.0) == expected  # bound to the class, through an object


def test_staticmethods_in_each_spelling():
    m = model()
    for g in [grad(M.Model.square), grad(m.square), M.Model.dsquare, m.dsquare,
              M.Model.dsquare_too, m.dsquare_too]:
        assert g(3.0) == 6.0


# --- against jax.grad of the same bound methods ---

def test_bound_methods_agree_with_jax(jax_module):
    jax, J = jax_module
    import jax.numpy as jnp

    for cls in ("Model", "Bigger"):
        m, mj = model(getattr(M, cls)), getattr(J, cls)(jnp.asarray(W), 1.5)
        np.testing.assert_allclose(grad(m.loss)(X, 2.0), jax.grad(mj.loss)(X, 2.0))
        np.testing.assert_allclose(grad(m.loss, wrt="y")(X, 2.0),
                                   jax.grad(mj.loss, argnums=1)(X, 2.0))
        np.testing.assert_allclose(m.denergy(X), jax.grad(mj.energy)(X))
        for got, want in zip(m.dpair_both(X, Y), jax.grad(mj.pair, argnums=(0, 1))(X, Y),
                             strict=True):
            np.testing.assert_allclose(got, want)
        assert m.dcubic(2.0) == pytest.approx(float(jax.grad(mj.cubic)(2.0)))
    net = mlp()
    net_jax = J.MLP([jnp.asarray(layer) for layer in net.layers],
                    jnp.asarray(net.params["bias"]))
    np.testing.assert_allclose(grad(net.loss)(X), jax.grad(net_jax.loss)(X))


# --- what is refused, where ---

REFUSED = load("""
    import numpy as np


    class Model:
        scale = 2.0

        def helper(self, x):
            return self.scale * x

        def loss(self, x):
            return np.sum(self.helper(x) ** 2)

        def ops(x):
            return x ** 2

        def keyword(self, *, x):
            return x ** 2
    """)
F = inspect.getsourcefile(REFUSED.Model.loss)


def text_of(call) -> str:
    with pytest.raises(SymdiffError) as e:
        call()
    return str(e.value).replace(F, "F")


@pytest.mark.parametrize("wrt", ["self", ("x", "self")])
def test_self_cannot_be_differentiated(wrt):
    assert text_of(lambda: grad(REFUSED.Model().helper, wrt=wrt)) == (
        "F:8:16: cannot differentiate Model.helper with respect to self: the object a method "
        "is called on is read, not differentiated\n"
        "        def helper(self, x):\n"
        "                   ^\n"
        "  supported instead: a parameter after self (wrt=0 is the first), with what it reads "
        "from self as a parameter")


@pytest.mark.parametrize("wrt", [1, -2])
def test_wrt_out_of_range_counts_after_self(wrt):
    assert text_of(lambda: grad(REFUSED.Model.helper, wrt=wrt)) == (
        f"F:8:5: wrt={wrt} is out of range: Model.helper has 1 positional parameter after "
        "self\n"
        "        def helper(self, x):\n"
        "        ^\n"
        "  supported instead: wrt=0 for the first parameter after self")


def test_keyword_only_parameters_of_a_method_are_named():
    assert text_of(lambda: grad(REFUSED.Model.keyword)).endswith(
        "  supported instead: a keyword-only parameter by name: wrt='x'")
    assert grad(REFUSED.Model().keyword, wrt="x")(x=2.0) == 4.0


def test_a_function_of_a_class_body_without_self_says_to_mark_it_static():
    assert text_of(lambda: grad(REFUSED.Model.ops)).startswith(
        "F:14:13: Model.ops is defined in a class body, so its only parameter, x, is taken "
        "for self\n")


def test_a_call_of_another_method_of_self_is_refused_at_the_call():
    assert text_of(lambda: grad(REFUSED.Model().loss)(np.ones(2))) == (
        "F:12:23: self.helper(...) calls a method of self, which symdiff does not follow (a "
        "subclass may override it)\n"
        "            return np.sum(self.helper(x) ** 2)\n"
        "                          ^\n"
        "  supported instead: a module-level function taking self, def helper(obj, ...), "
        "called as helper(self, ...): symdiff differentiates through it")


def test_setting_an_attribute_is_refused():
    counting = load("""
        class Model:
            def loss(self, x):
                self.calls = 1
                return x ** 2
        """)
    text = str(pytest.raises(SymdiffError, grad(counting.Model().loss), 1.0).value)
    assert text.endswith(
        ":4:9: setting the attribute self.calls is not supported: a gradient changes nothing "
        "outside itself\n"
        "            self.calls = 1\n"
        "            ^\n"
        "  supported instead: set it outside the function being differentiated (a method's "
        "gradient may read attributes of self)")


def test_a_gradient_of_a_method_gradient_is_refused():
    m = model()
    for g in [m.denergy, grad(m.loss)]:
        assert "higher-order derivatives are not supported yet" in str(
            pytest.raises(SymdiffError, grad, g).value)


# --- pickling and copying ---

@pytest.fixture
def importable(tmp_path, monkeypatch):
    name = f"symdiff_methods_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(SOURCE))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)
    sys.modules.pop(name, None)


def test_a_bound_gradient_pickles_with_its_object(importable):
    m = importable.Bigger(W, 1.5)
    for g in [grad(m.loss, wrt="y"), m.denergy, importable.Model.denergy]:
        again = pickle.loads(pickle.dumps(g))
        args = (m, X) if g is importable.Model.denergy else (X, 2.0) \
            if g.fun.__name__ == "loss" else (X,)
        np.testing.assert_allclose(again(*args), g(*args))
    for g in [m.dpair_at_1, importable.Bigger.dcubic, m.dcubic_too, m.dsquare_too]:
        again = pickle.loads(pickle.dumps(g))
        args = (X, Y) if g.fun.__name__ == "dpair_at_1" else (2.0,)
        np.testing.assert_allclose(again(*args), g(*args))


def test_a_bound_gradient_copies():
    m = model()
    g = grad(m.loss)
    shallow, deep = copy.copy(g), copy.deepcopy(g)
    assert shallow.obj is m and deep.obj is not m
    np.testing.assert_allclose(shallow(X), g(X))
    np.testing.assert_allclose(deep(X), g(X))


def test_source_for_a_bound_gradient_is_built_for_its_object_and_arguments():
    from symdiff import kinds

    m = load("""
        import numpy as np
        class Net:
            def loss(self, params, X):
                return np.sum(np.tanh(X @ params["W"]) ** 2)
    """)
    params, X = {"W": np.ones((2, 3))}, np.ones((4, 2))
    g = grad(m.Net().loss)
    text = g.source_for(params, X)
    assert "params_W = params['W']" in text and "return {'W': " in text
    spec, = g.gradient._specs.values() if g.gradient._specs else (None,)
    assert spec is None or spec.kinds[0] == ("self", kinds.Other("object"))
    assert g.source.startswith("def grad_loss(self, params, X):")
