"""Shared test helpers: central-difference gradient checks and functions built from source."""

from __future__ import annotations

import importlib.util
import itertools
import tempfile
import textwrap
from pathlib import Path

import numpy as np

_counter = itertools.count()
_DIR = Path(tempfile.mkdtemp(prefix="symdiff-tests-"))


def load(source: str, name: str | None = None):
    """Write ``source`` to a fresh module file, import it, and return it (or its ``name``).

    symdiff reads a function's source from its file, so test functions must live in one.
    """
    path = _DIR / f"m{next(_counter)}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name) if name else module


def numeric_grad(f, args, index, h=1e-6):
    """Central differences of scalar ``f(*args)`` with respect to ``args[index]``, float64."""
    args = [np.array(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args]
    x = np.asarray(args[index], dtype=np.float64)
    g = np.zeros_like(x)
    flat = x.reshape(-1)
    for i in range(flat.size):
        step = h * max(1.0, abs(flat[i]))
        plus, minus = flat.copy(), flat.copy()
        plus[i] += step
        minus[i] -= step
        fp = f(*_with(args, index, plus.reshape(x.shape), x))
        fm = f(*_with(args, index, minus.reshape(x.shape), x))
        g.reshape(-1)[i] = (fp - fm) / (2 * step)
    return g if x.ndim else float(g)


def _with(args, index, value, like):
    out = list(args)
    out[index] = value if np.ndim(like) or isinstance(args[index], np.ndarray) else float(value)
    return out


def check_grad(f, args, wrt=(0,), grads=None, rtol=1e-5, atol=1e-6, seed=0):
    """Assert symdiff's gradient of ``f`` matches central differences at ``args``.

    Checks every element, and a random direction (a directional derivative, as
    autograd's ``check_grads`` does). ``grads`` may be passed in if already computed.
    Returns the gradients.
    """
    from symdiff import grad

    if grads is None:
        grads = grad(f, wrt=tuple(wrt))(*args)
    rng = np.random.default_rng(seed)
    for i, g in zip(wrt, grads, strict=True):
        expected = numeric_grad(f, args, i)
        assert np.shape(g) == np.shape(args[i]), (np.shape(g), np.shape(args[i]))
        np.testing.assert_allclose(g, expected, rtol=rtol, atol=atol,
                                   err_msg=f"gradient w.r.t. argument {i}")
        v = rng.standard_normal(np.shape(args[i]))
        x = np.asarray(args[i], dtype=np.float64)
        h = 1e-6 * max(1.0, float(np.max(np.abs(x), initial=0.0)))
        plus = _with(args, i, x + h * v, args[i])
        minus = _with(args, i, x - h * v, args[i])
        directional = (f(*plus) - f(*minus)) / (2 * h)
        np.testing.assert_allclose(np.sum(np.asarray(g) * v), directional, rtol=rtol * 10,
                                   atol=atol * 10, err_msg="random direction")
    return grads
