"""Dask arrays as data, and arrays of other libraries through NumPy's dispatch: gradients
with respect to NumPy parameters, computed by Dask chunk by chunk in one compute per call,
equal to the NumPy gradients; what is refused, and how.

Computes are counted at the scheduler: every compute (an explicit one, or np.asarray of a
Dask array, which computes it) goes through the ``scheduler`` of dask.config, here the
cluster's client wrapped in a counter.
"""

import numpy as np
import pytest
from gradcheck import load

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("dask.distributed")

from symdiff import SymdiffError, grad, kinds, value_and_grad  # noqa: E402

MODELS = load('''
import numpy as np
from symdiff import stop_gradient


def nll(w, X, y):
    z = X @ w
    return np.sum(np.logaddexp(0.0, z) - y * z) / X.shape[0]


def mlp(W1, b1, W2, X, Y):
    h = np.tanh(X @ W1 + b1)
    return np.mean((h @ W2 - Y) ** 2)


def centre(c, X):
    m = np.mean(X, axis=0)
    return np.sum((m - c) ** 2)


def softmax_ce(W, X, T):
    z = X @ W
    z = z - stop_gradient(np.max(z, axis=1, keepdims=True))
    return -np.sum(T * (z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))))


def variance(w, X):
    return np.var(X @ w) + np.sum(np.std(X * w, axis=0))


def norms(w, X):
    return np.linalg.norm(X @ w) + np.sum(np.linalg.norm(X - w, axis=1))


def products(w, X):
    return np.sum(np.prod(X * w, axis=1))


def tail(w, X):
    return np.sum((X @ w)[1:] ** 2) + np.sum(np.tanh(X.T) * w[:, None])


def taken(w, X):
    return np.sum(np.take(X @ w, [0, 3]) ** 2) + np.average(X @ w)


def padded(w, X):
    return np.sum(np.pad(X * w, ((1, 2), (0, 1))) ** 2)


def padded_edge(w, X):
    return np.sum(np.pad(X @ w, 1, mode="edge") ** 2)


def masked_mean(w, X):
    Z = X[X[:, 0] > 0]
    return np.mean(np.tanh(Z @ w))


def picked(w, X):
    return np.sum((X @ w)[np.array([0, 2, 5])] ** 2)


def nll_accuracy(w, X, y):
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z), {"accuracy": np.mean((z > 0) == (y > 0.5))}


def scaled(w, X, k):
    z = X @ w
    return np.sum((z * k) ** 2)


def picked_twice(w, X):
    return np.sum((X @ w)[np.array([0, 2, 2])] ** 2)
''')


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield client


@pytest.fixture
def computes(client):
    """The computes made while a test runs (a list, one entry per compute), on the cluster."""
    made = []

    def counting_get(dsk, keys, **kwargs):
        made.append(keys)
        return client.get(dsk, keys, **kwargs)

    with dask.config.set(scheduler=counting_get):
        yield made


RNG = np.random.default_rng(16)
N = 60
X = RNG.normal(size=(N, 3))
Y = RNG.normal(size=(N, 2))
LABELS = (RNG.random(N) > 0.5).astype(np.float64)
ONE_HOT = np.eye(3)[RNG.integers(0, 3, N)]
w = RNG.normal(size=3)
W1, b1, W2 = RNG.normal(size=(3, 4)), RNG.normal(size=4), RNG.normal(size=(4, 2))
W = RNG.normal(size=(3, 3))


def lazy(a):
    return da.from_array(a, chunks=(N // 4,) + a.shape[1:])


# name, wrt, the NumPy parameters, the data
CASES = {
    "nll": (0, (w,), (X, LABELS)),
    "mlp": ((0, 1, 2), (W1, b1, W2), (X, Y)),
    "centre": (0, (w,), (X,)),
    "softmax_ce": (0, (W,), (X, ONE_HOT)),
}


def assert_same(got, expected):
    if isinstance(expected, tuple):
        assert type(got) is tuple and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            assert_same(g, e)
        return
    assert type(got) is type(expected)  # NumPy out: no Dask array reaches the caller
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("transform", [grad, value_and_grad])
@pytest.mark.parametrize("name", CASES)
def test_gradient_of_dask_data_equals_numpys_in_one_compute(name, transform, computes):
    wrt, params, data = CASES[name]
    g = transform(getattr(MODELS, name), wrt=wrt)
    expected = g(*params, *data)
    chunked = [lazy(d) for d in data]
    assert computes == []
    got = g(*params, *chunked)
    assert len(computes) == 1  # value and every gradient, together
    assert_same(got, expected)
    got = g(*params, *chunked)  # the build is kept: again one compute
    assert len(computes) == 2
    assert_same(got, expected)


@pytest.mark.parametrize("transform", [grad, value_and_grad])
def test_aux_of_dask_data_is_computed_with_the_gradient(transform, computes):
    g = transform(MODELS.nll_accuracy, has_aux=True)
    expected = g(w, X, LABELS)
    got = g(w, lazy(X), lazy(LABELS))
    assert len(computes) == 1
    if transform is value_and_grad:  # ((value, aux), gradient); grad's: (gradient, aux)
        (got_value, got_aux), got_grad = got
        (value, aux), gradient = expected
        assert_same(got_value, value)
    else:
        (got_grad, got_aux), (gradient, aux) = got, expected
    assert_same(got_grad, gradient)
    assert type(got_aux) is dict and got_aux.keys() == {"accuracy"}
    assert_same(got_aux["accuracy"], aux["accuracy"])


@pytest.mark.parametrize("name", ["variance", "norms", "products", "tail", "picked", "taken",
                                  "padded"])
def test_runtime_helpers_keep_dask_adjoints_lazy(name, computes):
    """np.size, np.asarray, and a NumPy array written into, in the helpers of var, std,
    norm, prod, indexing, take, average and pad, computed a Dask array where it was met
    (np.pad's failed: np.bincount of NumPy's numbers with Dask's weights)."""
    g = value_and_grad(getattr(MODELS, name))
    expected = g(w, X)
    got = g(w, lazy(X))
    assert len(computes) == 1
    assert_same(got, expected)


def test_integer_data_is_made_float_lazily(computes):
    """k ** 2 in the derivative, not in the function: in uint8 it would wrap (as it did
    where a Dask array was passed on as it was), silently wrong."""
    k = RNG.integers(10, 30, N).astype(np.uint8)
    g = grad(MODELS.scaled)
    expected = g(w, X, k)
    assert "k = _as_float(k)" in g.source_for(w, lazy(X), lazy(k))
    got = g(w, lazy(X), lazy(k))
    assert len(computes) == 1
    assert_same(got, expected)


def test_source_for_dask_data_computes_at_the_return_and_numpys_does_not():
    g = value_and_grad(MODELS.mlp, wrt=(0, 1, 2))
    dask_source = g.source_for(W1, b1, W2, lazy(X), lazy(Y))
    numpy_source = g.source_for(W1, b1, W2, X, Y)
    computed = "    _t4, dW1, db1, dW2 = _computed(_t4, dW1, db1, dW2)"
    assert dask_source.splitlines()[-2:] == [
        computed, "    return _t4, (_fit(dW1, W1), _fit(db1, b1, copy=True), _fit(dW2, W2))"]
    assert "asarray" not in dask_source
    assert dask_source.replace(computed + "\n", "") == numpy_source  # (NumPy's: unchanged)


def test_kind_of_a_dask_array_is_read_from_its_metadata(computes):
    x = lazy(X).astype(np.float32)
    assert kinds.kind(x) == kinds.Array("float32", 2, lazy=True)
    assert str(kinds.kind(x)) == "float32 dask array, 2-d"
    assert kinds.key(x) != kinds.key(x[x[:, 0] > 0])  # unknown sizes: checked again
    assert computes == []


def test_dask_array_with_unknown_chunk_sizes_is_refused():
    masked = lazy(X)[lazy(X)[:, 0] > 0]
    with pytest.raises(SymdiffError) as e:
        grad(MODELS.nll)(w, masked, LABELS)
    assert str(e.value).splitlines()[0].endswith(
        ":6:12: X is a Dask array of unknown chunk sizes (shape (nan, 3)); the gradient "
        "needs its shape")
    assert str(e.value).splitlines()[-1] == (
        "  supported instead: its sizes computed first: X.compute_chunk_sizes(), or "
        "lengths=True in to_dask_array()")


def test_mean_over_unknown_chunk_sizes_made_inside_is_refused():
    """Its count is needed by the derivative (1 / n), and is nan until computed."""
    with pytest.raises(SymdiffError) as e:
        grad(MODELS.masked_mean)(w, lazy(X))
    lines = str(e.value).splitlines()
    assert lines[0].endswith(
        ":57:5: the number of entries of a Dask array of unknown chunk sizes (shape (nan,)) "
        "is needed by the gradient here, and is not known before it is computed")
    assert lines[1:] == ["        return np.mean(np.tanh(Z @ w))", "        ^",
                         "  supported instead: the array's sizes computed where it is made: "
                         "x.compute_chunk_sizes()"]


def test_dask_array_in_wrt_is_refused(computes):
    with pytest.raises(SymdiffError) as e:
        grad(MODELS.nll)(lazy(w), lazy(X), lazy(LABELS))
    assert str(e.value).splitlines()[0].endswith(
        ":6:9: w received a Dask array; a differentiated parameter must be held in memory")
    assert str(e.value).splitlines()[-1] == (
        "  supported instead: Dask arrays as data (parameters not differentiated), with the "
        "parameters NumPy arrays: w.compute() if it fits in memory")
    with pytest.raises(SymdiffError, match=r"params\['w'\] is a Dask array; a differentiated "):
        grad(load('''
            def f(params):
                return (params["w"] ** 2).sum()
        ''', "f"))({"w": lazy(w)})
    assert computes == []  # refused before anything was computed


def test_repeated_integer_index_of_a_dask_adjoint_is_refused():
    with pytest.raises(SymdiffError) as e:
        grad(MODELS.picked_twice)(w, lazy(X))
    assert "the gradient of indexing with repeated integer indices is not supported for " \
        "dask arrays (it adds into the repeated entries, which needs np.add.at)" in str(e.value)


def test_pad_of_a_dask_adjoint_in_another_mode_is_refused():
    with pytest.raises(SymdiffError) as e:
        grad(MODELS.padded_edge)(w, lazy(X))
    assert "the gradient of np.pad with mode='edge' is not supported for dask arrays; " \
        "mode='constant' is" in str(e.value)


# --- another array library through NumPy's dispatch, where Dask cannot show a case ---


def _unwrap(v):
    if isinstance(v, Duck):
        return v.a
    return type(v)(map(_unwrap, v)) if type(v) in (list, tuple) else v


def _wrap(v):
    if isinstance(v, np.ndarray):
        return Duck(v)
    return type(v)(map(_wrap, v)) if type(v) in (list, tuple) else v


class Duck(np.lib.mixins.NDArrayOperatorsMixin):
    """An array of its own type that NumPy's functions and ufuncs dispatch to (as CuPy's
    arrays are), counting its conversions to NumPy (np.asarray, np.array)."""

    conversions = 0

    def __init__(self, a):
        self.a = a

    dtype = property(lambda self: self.a.dtype)
    shape = property(lambda self: self.a.shape)
    ndim = property(lambda self: self.a.ndim)
    size = property(lambda self: self.a.size)
    T = property(lambda self: Duck(self.a.T))

    def __len__(self):
        return len(self.a)

    def __getitem__(self, index):
        return _wrap(self.a[_unwrap(index)])

    def __setitem__(self, index, value):
        self.a[_unwrap(index)] = _unwrap(value)

    def astype(self, dtype, copy=True):
        return Duck(self.a.astype(dtype, copy=copy))

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
        return _wrap(getattr(ufunc, method)(*_unwrap(inputs), **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        return _wrap(func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))

    def __array__(self, dtype=None, copy=None):
        Duck.conversions += 1
        return self.a if dtype is None else self.a.astype(dtype)


@pytest.mark.parametrize("name", ["nll", "mlp", "centre", "softmax_ce", "variance", "norms",
                                  "products", "tail", "picked", "picked_twice", "taken",
                                  "padded", "padded_edge"])
def test_dispatching_array_as_data_stays_its_type_until_the_return(name):
    """The intermediate values stay Ducks: each gradient is converted once, by _fit
    (picked_twice: its repeated index adds up with np.add.at, and padded_edge's np.bincount
    takes its weights: both dispatch, where Dask has neither)."""
    wrt, params, data = CASES.get(name, (0, (w,), (X,)))
    g = grad(getattr(MODELS, name), wrt=wrt)
    expected = g(*params, *data)
    Duck.conversions = 0
    got = g(*params, *map(Duck, data))
    assert Duck.conversions == len(params)
    assert_same(got, expected)


@pytest.mark.parametrize("name", ["nll", "mlp", "variance", "tail"])
def test_dispatching_array_as_parameter_gets_a_gradient_of_its_type(name):
    """Parameters and data of another library (as CuPy's on a GPU): nothing is converted to
    NumPy, and each gradient is of the parameter's type (np.array(..., like=x) in _fit)."""
    wrt, params, data = CASES.get(name, (0, (w,), (X,)))
    g = value_and_grad(getattr(MODELS, name), wrt=wrt)
    value, expected = g(*params, *data)
    Duck.conversions = 0
    got_value, got = g(*map(Duck, params), *map(Duck, data))
    assert Duck.conversions == 0
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    expected if isinstance(expected, tuple) else (expected,), strict=True):
        assert type(a) is Duck and a.dtype == b.dtype
        np.testing.assert_allclose(a.a, b, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.asarray(got_value), value, rtol=1e-12)
