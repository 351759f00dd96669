"""Containers as parameters (JAX's pytrees): a dict, tuple or list of numbers and arrays,
nested, gets a gradient of the same structure; what symdiff cannot follow is refused."""

import numpy as np
import pytest
from gradcheck import load, numeric_grad

from symdiff import SymdiffError, grad, value_and_grad

M = load("""
    import numpy as np

    def dense(params, X):
        W, b = params["W"], params["b"]
        return np.sum(np.tanh(X @ W + b) ** 2)

    def unpacked(p, x):
        W, b = p
        return np.sum(np.sin(W * x) + b * x)

    def indexed(p, x):
        return np.sum(p[0] * x) * p[-1] + p[1][0] ** 2

    def mlp(layers, X):
        h = X
        for W, b in layers:
            h = np.tanh(h @ W + b)
        return np.mean(h ** 2)

    def two_layers(layers, X):
        (W1, b1), (W2, b2) = layers
        return np.sum(np.tanh(np.tanh(X @ W1 + b1) @ W2 + b2))

    def each(ws, x):
        s = 0.0
        for w in ws:
            s = s + np.sum(np.cos(w * x))
        return s

    def counted(ws, x):
        s = 0.0
        for i in range(len(ws)):
            s = s + np.sum(ws[i] * x) * (i + 1)
        return s + len(ws)

    def numbered(ws, x):
        s = 0.0
        for i, w in enumerate(ws):
            s = s + i * np.sum(w * x)
        return s

    def zipped(ws, bs, x):
        s = 0.0
        for w, b in zip(ws, bs):
            s = s + np.sum(np.tanh(w * x + b))
        return s

    def by_items(p):
        s = 0.0
        for k, v in p.items():
            s = s + np.sum(v ** 2) * len(k)
        for v in p.values():
            s = s + np.sum(v)
        return s

    def layer(p, h):
        return np.tanh(h @ p["W"] + p["b"])

    def network(params, X):
        h = X
        for p in params["layers"]:
            h = layer(p, h)
        return np.sum((h - params["target"]) ** 2)

    def nested(tree, x):
        a = tree["a"]
        return np.sum(a[0] * x) + a[1]["c"] * tree["b"][1] + np.sum(tree["b"][0])

    def data(w, xs, ys):
        s = 0.0
        for x, y in zip(xs, ys):
            s = s + (np.sum(w * x) - y) ** 2
        return s

    def sliced(ws, x):
        s = 0.0
        for w in ws[1:]:
            s = s + np.sum(w * x)
        return s * ws[0]

    def counted_by_name(ws, x):
        n = len(ws)
        last = n - 1
        s = np.sum(ws[last] ** 2)
        for i in range(n):
            s = s + np.sum(ws[i] * x) * (i + 1)
        return s
""")


E = load("""
    import numpy as np
    from symdiff import stop_gradient

    def skips(ws, x):
        s = 0.0
        for w in ws:
            if np.sum(w) > 0:
                continue
            s = s + np.sum(w * x)
        return s

    def inside(layers, x, n):
        s = 0.0
        for t in range(n):
            for layer in layers:
                for w in layer:
                    s = s + np.sum(np.sin(w * x)) * t
        return s

    def stacked(ws, x):
        return np.sum(np.stack(ws) * x) + np.sum(np.concatenate(ws[1:]) ** 2)

    def backwards(ws, x):
        s = x
        for w in reversed(ws):
            s = np.tanh(s * w)
        return np.sum(s)

    def branches(p, x):
        if p[1] > 0:
            return p[0] * x + p[1]
        return p[0] * x

    def defaulted(x, p=(1.0, 2.0)):
        return x * p[0] * p[1] ** 2

    def rebinds(p, x):
        W = x * 2.0
        s = np.sum(W)
        W = p["W"]
        W = W * 2.0
        W, b = p["W"] * W, p["b"]
        return s + np.sum(W * x) + np.sum(p["W"]) * b
""")


# --- central differences over a container's leaves ---

def _leaf(value) -> bool:
    """A leaf: not a dict or tuple, nor a list holding anything but numbers."""
    if type(value) in (dict, tuple):
        return False
    if type(value) is list:
        return all(_leaf(v) and type(v) is not np.ndarray for v in value)
    return True


def _paths(tree, path=()):
    if _leaf(tree):
        yield path
        return
    for key, item in tree.items() if type(tree) is dict else enumerate(tree):
        yield from _paths(item, (*path, key))


def _get(tree, path):
    for key in path:
        tree = tree[key]
    return tree


def _put(tree, path, value):
    if not path:
        return value
    key, rest = path[0], path[1:]
    if type(tree) is dict:
        return {k: _put(v, rest, value) if k == key else v for k, v in tree.items()}
    return type(tree)(_put(v, rest, value) if k == key else v for k, v in enumerate(tree))


def numeric_tree(f, args, index):
    """Central differences of ``f(*args)`` with respect to each leaf of ``args[index]``, in
    a container of the same structure."""
    tree = args[index]
    out = tree
    for path in _paths(tree):
        def at(leaf, path=path):
            return f(*[_put(a, path, leaf) if i == index else a for i, a in enumerate(args)])
        out = _put(out, path, numeric_grad(at, [_get(tree, path)], 0))
    return out


def assert_tree(got, expected, like, rtol=1e-6, atol=1e-7):
    """``got`` has ``like``'s structure (container types, keys in order), each leaf the
    kind of gradient a parameter of its own gets, and the values ``expected``."""
    if not _leaf(like):
        assert type(got) is type(like), (got, like)
        if type(like) is dict:
            assert list(got) == list(like)
            pairs = [(got[k], expected[k], like[k]) for k in like]
        else:
            assert len(got) == len(like)
            pairs = list(zip(got, expected, like, strict=True))
        for g, e, x in pairs:
            assert_tree(g, e, x, rtol, atol)
        return
    assert np.shape(got) == np.shape(like)
    if isinstance(like, float):
        assert type(got) is float, (got, like)
    if isinstance(like, np.ndarray):
        assert isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)


def check_tree(f, args, index=0):
    got = grad(f, wrt=index)(*args)
    assert_tree(got, numeric_tree(f, args, index), args[index])
    return got


RNG = np.random.default_rng(0)
X = RNG.normal(size=(5, 3))


def arrays(*shapes):
    return [RNG.normal(size=s) for s in shapes]


# --- each way of reading a container ---

@pytest.mark.parametrize(("f", "args"), [
    (M.dense, ({"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}, X)),
    (M.dense, ({"b": 0.5, "W": RNG.normal(size=(3, 2))}, X)),
    (M.unpacked, ((RNG.normal(size=3), 0.7), RNG.normal(size=3))),
    (M.unpacked, ([RNG.normal(size=3), RNG.normal(size=3)], RNG.normal(size=3))),
    (M.indexed, ((RNG.normal(size=3), RNG.normal(size=2), 1.5), RNG.normal(size=3))),
    (M.mlp, ([tuple(arrays((3, 4), 4)), tuple(arrays((4, 2), 2))], X)),
    (M.mlp, ([tuple(arrays((3, 4), 4)), (RNG.normal(size=(4, 1)), 0.3)], X)),
    (M.two_layers, (((*arrays((3, 4), 4),), (*arrays((4, 2)), 0.1)), X)),
    (M.each, (arrays(3, (2, 3), ()), RNG.normal(size=3))),
    (M.each, ((1.0, 2.0, np.float64(3.0)), 0.5)),
    (M.counted, (arrays(3, 3, 3), RNG.normal(size=3))),
    (M.numbered, (arrays(3, 3), RNG.normal(size=3))),
    (M.by_items, ({"ab": RNG.normal(size=3), "c": 2.0},)),
    (M.network, ({"layers": [{"W": w, "b": b} for w, b in [arrays((3, 4), 4),
                                                         arrays((4, 2), 2)]],
                  "target": RNG.normal(size=2)}, X)),
    (M.nested, ({"a": (RNG.normal(size=3), {"c": 1.5}), "b": [RNG.normal(size=2), 0.5]},
                RNG.normal(size=3))),
    (M.sliced, ((2.0, *arrays(3, 3)), RNG.normal(size=3))),
    (M.counted_by_name, (arrays(3, 3, 3), RNG.normal(size=3))),
])
def test_a_container_gets_a_gradient_of_its_structure(f, args):
    check_tree(f, args)


X3 = np.array([0.3, -0.2, 0.5])


@pytest.mark.parametrize(("f", "args"), [
    (E.skips, ([np.ones(3), -np.ones(3), -0.5 * np.ones(3)], X3)),
    (E.inside, (([np.ones(3)], (-np.ones(3), 0.5)), X3, 2)),
    (E.stacked, ((np.ones(3), -np.ones(3), np.arange(3.0)), X3)),
    (E.backwards, ([0.5, np.ones(3), -np.ones(3)], X3)),
    (E.branches, ({0: 2.0, 1: 3.0}, 1.5)),
    (E.branches, ({0: 2.0, 1: -3.0}, 1.5)),
    (E.rebinds, ({"W": np.arange(3.0), "b": 0.5}, X3)),
])
def test_containers_in_control_flow_and_numpy_sequences(f, args):
    check_tree(f, args)


def test_empty_containers_defaults_and_stop_gradient():
    assert grad(M.by_items)({}) == {}
    assert grad(E.defaulted, wrt="p")(2.0) == (8.0, 8.0)
    f = load("""
        import numpy as np
        from symdiff import stop_gradient
        def f(ws, x):
            s = 0.0
            for w in stop_gradient(ws):
                s = s + np.sum(w * x)
            return s + np.sum(ws[0] * x)
        """, "f")
    g = grad(f)([np.ones(3), np.ones(3)], X3)
    assert type(g) is list and [a.tolist() for a in g] == [X3.tolist(), [0.0] * 3]


def test_several_containers_and_wrt_tuples_holding_them():
    ws, bs, x = tuple(arrays(3, 3)), [0.5, RNG.normal(size=3)], RNG.normal(size=3)
    dws, dbs, dx = grad(M.zipped, wrt=("ws", "bs", "x"))(ws, bs, x)
    assert_tree(dws, numeric_tree(M.zipped, (ws, bs, x), 0), ws)
    assert_tree(dbs, numeric_tree(M.zipped, (ws, bs, x), 1), bs)
    np.testing.assert_allclose(dx, numeric_grad(M.zipped, [ws, bs, x], 2), rtol=1e-6)
    params = {"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}
    dp, dX = grad(M.dense, wrt=("params", "X"))(params, X)
    assert_tree(dp, numeric_tree(M.dense, (params, X), 0), params)
    np.testing.assert_allclose(dX, numeric_grad(M.dense, [params, X], 1), rtol=1e-6)
    (dp,) = grad(M.dense, wrt=(0,))(params, X)
    assert list(dp) == ["W", "b"]


def test_value_and_grad_of_a_container():
    params = {"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}
    value, dp = value_and_grad(M.dense)(params, X)
    assert value == M.dense(params, X)
    assert_tree(dp, numeric_tree(M.dense, (params, X), 0), params)


def test_has_aux_and_keywords_with_a_container():
    params = {"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}
    f = load("""
        import numpy as np
        def f(params, X):
            h = np.tanh(X @ params["W"] + params["b"])
            return np.sum(h ** 2), {"h": h}
        """, "f")
    dp, aux = grad(f, has_aux=True)(params, X)
    assert_tree(dp, numeric_tree(lambda p, X: f(p, X)[0], (params, X), 0), params)
    np.testing.assert_array_equal(aux["h"], f(params, X)[1]["h"])
    assert_tree(grad(M.dense)(X=X, params=params), dp, params, rtol=1e-12)


def test_a_list_of_arrays_as_data_is_read_as_it_is():
    w, xs, ys = RNG.normal(size=3), arrays(3, 3, 3), [1.0, 2.0, 0.5]
    np.testing.assert_allclose(grad(M.data)(w, xs, ys), numeric_grad(M.data, [w, xs, ys], 0),
                               rtol=1e-6)
    dxs = grad(M.data, wrt="xs")(w, xs, ys)
    assert_tree(dxs, numeric_tree(M.data, (w, xs, ys), 1), xs)


def test_float32_and_int_leaves():
    p = {"W": RNG.normal(size=(3, 2)).astype(np.float32), "b": 2, "c": [1, 2]}
    g = load("""
        import numpy as np
        def f(p, X):
            return np.sum(X @ p["W"]) * p["b"] + np.sum(p["c"]) * 3.0
        """, "f")
    got = grad(g)(p, X)
    assert list(got) == ["W", "b", "c"]
    np.testing.assert_allclose(got["W"], np.broadcast_to(X.sum(0)[:, None] * 2, (3, 2)),
                               rtol=1e-5)
    assert got["b"] == pytest.approx(float(np.sum(X @ p["W"])), rel=1e-5)
    np.testing.assert_allclose(got["c"], [3.0, 3.0])


def test_a_leaf_the_function_names_is_read_into_that_name():
    source = grad(M.dense).source_for({"W": np.ones((3, 2)), "b": np.ones(2)}, X)
    assert "    W = params['W']\n    b = params['b']\n    _t0 = X @ W  # line 6\n" in source
    assert source.endswith("    return {'W': _fit(dW, W), 'b': _fit(db, b, copy=True)}\n")
    source = grad(M.two_layers).source_for(((np.ones((3, 4)), np.ones(4)), (np.ones(
        (4, 2)), 0.5)), X)
    assert "    W1 = layers[0][0]\n    b1 = layers[0][1]\n    W2 = layers[1][0]\n" in source


def test_the_generated_code_unpacks_the_leaves_and_returns_the_structure():
    source = grad(M.mlp).source_for([tuple(arrays((3, 4), 4)), tuple(arrays((4, 2), 2))], X)
    assert source.startswith("def grad_mlp(layers, X):\n")
    assert "    layers_0_0 = layers[0][0]\n    layers_0_1 = layers[0][1]\n" in source
    assert "    return [(_fit(dlayers_0_0, layers_0_0)" in source


# --- against JAX ---

def test_a_container_agrees_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def loss(params, X):
        h = X
        for p in params["layers"]:
            h = jnp.tanh(h @ p["W"] + p["b"])
        return jnp.sum((h - params["target"]) ** 2)

    params = {"layers": [{"W": w, "b": b} for w, b in [arrays((3, 4), 4), arrays((4, 2), 2)]],
              "target": RNG.normal(size=2)}
    expected = jax.grad(loss)(params, X)
    got = grad(M.network)(params, X)
    assert_tree(got, jax.tree_util.tree_map(np.asarray, expected), params, rtol=1e-10)

    def mlp(layers, X):
        h = X
        for W, b in layers:
            h = jnp.tanh(h @ W + b)
        return jnp.mean(h ** 2)

    layers = [tuple(arrays((3, 4), 4)), tuple(arrays((4, 2), 2))]
    expected = jax.grad(mlp)(layers, X)
    assert_tree(grad(M.mlp)(layers, X), jax.tree_util.tree_map(np.asarray, expected),
                layers, rtol=1e-10)
    layers = (tuple(arrays((3, 4), 4)), tuple(arrays((4, 2), 2)))
    expected = jax.grad(lambda layers, X: jnp.sum(jnp.tanh(jnp.tanh(
        X @ layers[0][0] + layers[0][1]) @ layers[1][0] + layers[1][1])))(layers, X)
    assert_tree(grad(M.two_layers)(layers, X), jax.tree_util.tree_map(np.asarray, expected),
                layers, rtol=1e-10)


# --- what is refused, and how ---

R = load("""
    import numpy as np

    def appends(ws, x):
        ws.append(x)
        return np.sum(ws[0])

    def whole(ws, x):
        return np.sum(ws) * x

    def keyed(p, k):
        return np.sum(p[k])

    def writes(p, x):
        p["W"][0] = x
        return np.sum(p["W"])

    def ranged(ws, n):
        s = 0.0
        for i in range(n):
            s = s + np.sum(ws[i])
        return s

    def breaks(ws):
        s = 0.0
        for w in ws:
            if np.sum(w) > 3:
                break
            s = s + np.sum(w)
        return s

    def missing(p):
        return np.sum(p["Z"])

    def outside(ws):
        return np.sum(ws[5])

    def branch(p, c):
        if c > 0:
            q = p["a"]
        else:
            q = p["b"]
        return np.sum(q[0])

    def three(p):
        a, b, c = p
        return a * b

    def shares(p, x):
        W = p["W"]
        W += x
        return np.sum(p["W"] * W)

    def zipped(ws, xs):
        s = 0.0
        for w, x in zip(ws, xs):
            s = s + np.sum(w * x)
        return s
""")


def text(call) -> str:
    with pytest.raises(SymdiffError) as info:
        call()
    return str(info.value).replace(R.__file__, "F")


TWO = [np.ones(2), np.ones(2)]


@pytest.mark.parametrize(("f", "args", "expected"), [
    (R.appends, (list(TWO), 1.0),
     "F:5:5: ws.append(...) changes ws in place, which symdiff does not follow\n"
     "        ws.append(x)\n        ^\n"
     "  supported instead: make a new array: np.stack([a, b]), np.concatenate, arithmetic"),
    (R.whole, (TWO, 2.0),
     "F:9:19: ws is a list being differentiated, used here as a whole, which symdiff does "
     "not differentiate\n        return np.sum(ws) * x\n                      ^\n"
     "  supported instead: read its items (ws[0]), unpack it, loop over it, or pass it to "
     "a function of your own"),
    (R.keyed, ({"a": np.ones(2)}, "a"),
     "F:12:21: p[k]: the key of a dict being differentiated must be known when the "
     "gradient is built\n        return np.sum(p[k])\n                        ^\n"
     "  supported instead: a constant (params[\"W\"], layers[0], layers[-1]), or the "
     "counter of a loop over range(len(...)) of the container"),
    (R.writes, ({"W": np.ones(2)}, 3.0),
     "F:15:5: p['W'][0] = ... changes p['W'] in place, which symdiff does not follow: it "
     "is (part of) a container being differentiated\n        p[\"W\"][0] = x\n        ^\n"
     "  supported instead: a new value under a name of its own (W2 = W + ...)"),
    (R.ranged, (TWO, 2), "F:21:27: ws[i]: the key of a list being differentiated"),
    (R.breaks, (TWO,),
     "F:26:5: break in a loop over a container being differentiated (which symdiff "
     "unrolls) is not supported\n        for w in ws:\n        ^\n"
     "  supported instead: an if around the rest of the body"),
    (R.missing, ({"W": 1.0, "b": 2.0},),
     "F:33:19: p has no key 'Z' (its keys: 'W', 'b')\n        return np.sum(p[\"Z\"])\n"
     "                      ^\n  supported instead: one of its keys"),
    (R.outside, (TWO,),
     "F:36:19: ws is a list of 2 items: ws[5] is not one of them\n"
     "        return np.sum(ws[5])\n                      ^\n"
     "  supported instead: an index from -2 to 1, or a slice"),
    (R.branch, ({"a": (np.ones(2),), "b": (np.ones(2),)}, 1.0),
     "F:39:5: q holds a container being differentiated on one path and another value on "
     "another, which symdiff does not follow\n        if c > 0:\n        ^\n"
     "  supported instead: bind the container before the branch or loop, and read its "
     "items inside"),
    (R.three, ((1.0, 2.0),),
     "F:46:5: p is a tuple of 2 items, unpacked here into 3\n        a, b, c = p\n"
     "        ^\n  supported instead: 2 names"),
])
def test_what_cannot_be_followed_is_refused_where_it_is(f, args, expected):
    assert text(lambda: grad(f)(*args)).startswith(expected)


def test_a_name_sharing_a_leaf_is_not_changed_in_place():
    message = text(lambda: grad(R.shares)({"W": np.ones(2)}, np.ones(2)))
    assert message == ("F:51:5: W is an array shared with p['W'], so NumPy's augmented "
                       "assignment changes p['W'] too, which symdiff does not follow\n"
                       "        W += x\n        ^\n"
                       "  supported instead: W = W + ..., which makes a new array")


def test_data_zipped_with_a_container_must_be_long_enough():
    ws, xs = arrays(2, 2), arrays(2, 2, 2)
    np.testing.assert_allclose(grad(R.zipped)(ws, xs)[1], xs[1])
    message = text(lambda: grad(R.zipped)(ws, xs[:1]))
    assert "xs has fewer items than the 2 of the container being differentiated that it " \
        "is zipped with, which symdiff unrolls the loop over; give it 2 items or more, or " \
        "zip the container with a part of it: xs[:2]" in message


@pytest.mark.parametrize(("value", "expected"), [
    ({"W": "a"}, "ws['W'] is a str, which cannot be differentiated"),
    ({"W": [np.ones(2), None]}, "ws['W'][1] is None, which cannot be differentiated"),
    ((np.ones(2), {"b": np.array(["x"])}),
     "ws[1]['b'] is an array of dtype <U1, which cannot be differentiated"),
])
def test_a_leaf_that_is_not_a_number_is_refused_at_the_call(value, expected):
    assert text(lambda: grad(R.whole)(value, 1.0)) == (
        f"F:8:11: {expected}\n    def whole(ws, x):\n              ^\n"
        "  supported instead: floats, ints and NumPy arrays of real numbers, in dicts, "
        "tuples and lists (pass other values as parameters that are not differentiated)")


def test_complex_leaves_ragged_lists_and_odd_keys_are_refused():
    assert text(lambda: grad(R.whole)((1j, 2.0), 1.0)).startswith(
        "F:8:11: ws[0] is a complex number; complex numbers are not supported\n")
    assert text(lambda: grad(R.whole)([[1.0, 2.0], [3.0]], 1.0)) == (
        "F:8:11: ws received a list of lists of different lengths, which NumPy cannot read "
        "as an array\n    def whole(ws, x):\n              ^\n"
        "  supported instead: lists of one length, an array, or a tuple of lists (each its "
        "own item)")
    assert text(lambda: grad(R.whole)({1.5: 1.0}, 1.0)) == (
        "F:8:11: ws has the key 1.5 (float); a container being differentiated may have "
        "keys that are strings or integers\n    def whole(ws, x):\n              ^\n"
        "  supported instead: string or integer keys (or tuples of them)")


# --- Calls returning several values (np.linalg.eigh, np.split): read item by item too ---

S = load("""
    import numpy as np

    K = np.array([[2.0, 0.5], [0.5, 1.0]])

    def three(a):
        w, v, z = np.linalg.eigh(a)
        return np.sum(w)

    def whole(a):
        return np.sum(np.linalg.slogdet(a)) * 2

    def constant(x):
        w, v = np.linalg.eigh(K)
        return np.sum(v @ x * w)

    def branch(a, c):
        if c > 0:
            w, v = np.linalg.eigh(a)
        else:
            w, v = np.linalg.eigh(a.T)
        return np.sum(w ** 2) + np.sum(v ** 4)

    def loop(a):
        t = 0.0
        for i in range(2):
            s, logdet = np.linalg.slogdet(a * (i + 1))
            t = t + logdet * s
        return t

    def held(a):
        r = np.linalg.slogdet(a)
        s, logdet = r
        return logdet + r[1] * len(r)

    def helper(a):
        return np.sum(_eig(a) ** 2)

    def _eig(a):
        w, v = np.linalg.eigh(a)
        return w * v[0]
""")


def test_a_call_returning_several_values_is_read_item_by_item():
    a = np.array([[2.0, 0.3], [0.7, 1.0]])
    for f in (S.branch, S.loop, S.held, S.helper):
        args = [a, 1.0] if f is S.branch else [a]
        np.testing.assert_allclose(grad(f)(*args), numeric_grad(f, args, 0), rtol=1e-6,
                                   atol=1e-8)
    np.testing.assert_allclose(grad(S.branch)(a, -1.0), numeric_grad(S.branch, [a, -1.0], 0),
                               rtol=1e-6, atol=1e-8)
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(grad(S.constant)(x), numeric_grad(S.constant, [x], 0))


HELD_TWICE = load("""
import numpy as np


def qr_r_named_then_read_again(a):
    factors = np.linalg.qr(a)
    r = factors[1]
    return np.sum(np.cos(factors[1] @ factors[0])) + np.sum(r)


def svd_vh_named_then_read_again(a):
    factors = np.linalg.svd(a, full_matrices=False)
    vh = factors[2]
    return np.sum(np.cos(np.swapaxes(factors[2], -1, -2) * factors[1])) + np.sum(vh ** 2)
""")


@pytest.mark.parametrize("name", ["qr_r_named_then_read_again", "svd_vh_named_then_read_again"])
def test_an_output_named_and_read_again_from_its_holder(name):
    """r = factors[1] named the last output's equation r, and factors[1] read after it the
    name it had before: unbound (or, with a stale value of that name, a wrong gradient)."""
    f = getattr(HELD_TWICE, name)
    a = np.array([[2.0, 0.3, 0.1], [0.7, 1.0, -0.4], [0.2, 0.5, 1.5]])
    np.testing.assert_allclose(grad(f)(a), numeric_grad(f, [a], 0), rtol=1e-6, atol=1e-8)


def test_the_outputs_are_named_as_the_function_names_them():
    source = grad(S.constant).source
    assert "    _t0 = np.linalg.eigh(K)  # line 14\n    w = _t0[0]  # line 14\n" \
        "    v = _t0[1]  # line 14\n" in source


def test_several_values_unpacked_into_too_many_names_or_used_whole_are_refused():
    with pytest.raises(SymdiffError) as e:
        grad(S.three)(np.eye(2))
    assert str(e.value).splitlines()[0].endswith(
        ":7:5: np.linalg.eigh returns 2 values, unpacked here into 3")
    with pytest.raises(SymdiffError) as e:
        grad(S.whole)(np.eye(2))
    assert str(e.value).splitlines()[0].endswith(
        ":11:19: np.linalg.slogdet(a) holds the 2 values np.linalg.slogdet returns, used "
        "here as a whole, which symdiff does not differentiate")
    assert "supported instead: unpack them (a, b = ...), or read one by its index" in \
        str(e.value)


def test_get_of_a_dict_being_differentiated():
    """d.get(key, default): the item where the dict has the key (known when building),
    else the default, differentiated as written."""
    m = load("""
        import numpy as np


        def f(d, x):
            return d.get("w", x) ** 2 + np.sum(d.get("b", np.zeros(2)) * x)
        """)
    for d, expected in [({"w": 3.0, "b": np.array([1.0, 2.0])},
                         ({"w": 6.0, "b": np.array([2.0, 2.0])}, 3.0)),
                        ({"v": 4.0}, ({"v": 0.0}, 4.0))]:
        dd, dx = grad(m.f, wrt=(0, 1))(d, 2.0)
        assert dx == expected[1]
        for k in d:
            np.testing.assert_allclose(dd[k], expected[0][k])


def test_named_attributes_of_several_values_are_refused_not_zero():
    """r = np.linalg.slogdet(A); r.logabsdet read the attribute as a constant: zero
    gradient (review finding). Refused: unpack or index instead."""
    f = load("""
        import numpy as np


        def f(A):
            r = np.linalg.slogdet(A)
            return r.logabsdet
        """, "f")
    with pytest.raises(SymdiffError) as e:
        grad(f)(np.eye(3) * 2.0)
    assert "r.logabsdet: attributes of values being differentiated" in str(e.value)
