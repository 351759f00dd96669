"""What generated gradients call at run time: NumPy-only helpers, and ``stop_gradient``.

Nothing here imports SymPy: a compiled (or exported) gradient needs only this module's
helpers, whose source is copied into exported files.
"""

import numpy as np

from .errors import SymdiffError


def stop_gradient(x):
    """Return ``x`` unchanged; to the differentiator, a constant.

    Like ``jax.lax.stop_gradient`` and ``tf.stop_gradient``: the value flows forward, no
    gradient flows back through it.

    >>> import numpy as np
    >>> from symdiff import grad, stop_gradient
    >>> def f(x):
    ...     return x * stop_gradient(x)
    >>> grad(f)(3.0)
    3.0
    """
    return x


_SCALARS = (float, int, np.float64)


def _unbroadcast(g, x):
    """Sum the adjoint ``g`` down to the shape of ``x``, undoing NumPy broadcasting."""
    if type(g) in _SCALARS and type(x) in _SCALARS:
        return g  # the common scalar case, without NumPy's shape machinery
    gs = np.shape(g)
    xs = np.shape(x)
    if gs == xs:
        return g
    lead = len(gs) - len(xs)
    if lead > 0:
        g = np.sum(g, axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(xs) if n == 1 and np.shape(g)[i] != 1)
    if axes:
        g = np.sum(g, axis=axes, keepdims=True)
    if np.shape(g) != xs:
        # g is smaller than x (x was broadcast against nothing larger): spread it out.
        g = np.broadcast_to(g, xs)
    return g


def _fit(g, x):
    """The gradient ``g`` as the caller expects it: x's shape, float64, a fresh array."""
    if type(g) is float and type(x) is float:
        return g
    if np.ndim(x) == 0 and not isinstance(x, np.ndarray):
        return float(np.asarray(g, dtype=np.float64).reshape(()))
    return np.array(np.broadcast_to(g, np.shape(x)), dtype=np.float64)


def _check_scalar(value, name):
    """Refuse a non-scalar output: a gradient needs a scalar function."""
    if type(value) is float or np.ndim(value) == 0:
        return
    raise SymdiffError(
        f"{name} returned an array of shape {np.shape(value)}; a gradient needs a scalar "
        "output: reduce it first (np.sum, np.mean) or differentiate each element"
    )


HELPERS = (_unbroadcast, _fit, _check_scalar)
