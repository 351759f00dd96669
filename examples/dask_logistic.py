"""A logistic regression fitted on data that Dask generates chunk by chunk, never whole.

- Dask arrays as data: ``X`` and ``y`` are ``dask.array`` arrays, the weights ``w`` a NumPy
  array. The gradient symdiff generates for ``nll`` is the same NumPy code as for NumPy
  data; on Dask arrays each line adds to a task graph, and the value and the gradient are
  computed together at the return, in one ``dask.compute``, chunk by chunk: they come back
  as NumPy, for SciPy.
- ``value_and_grad(nll)`` is SciPy's ``fun`` with ``jac=True``: one pass over the data per
  evaluation gives both the loss and its gradient.
- The data are a graph of random chunks with fixed seeds: every pass generates the same
  chunks again, one at a time per thread, so the memory held is a few chunks' worth, whatever
  the size (``--large``: 8 GB of float64 at full size, more than fits comfortably here).

Run: python examples/dask_logistic.py [--rows 100000] [--large] [--chunk 25000]
(on a cluster: create a ``dask.distributed.Client`` first; the same code runs there.)
"""

import argparse
import time

import dask
import dask.array as da
import numpy as np
from scipy.optimize import minimize

from symdiff import value_and_grad

FEATURES = 20


def nll(w, X, y, l2):
    """Mean negative log-likelihood of labels y (0 or 1) under P(y=1) = sigmoid(X @ w),
    plus an L2 penalty."""
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z) + l2 * np.sum(w ** 2)


def dataset(rows, chunk, seed=0):
    """``(X, y, w_true)``: Gaussian features and labels drawn from a logistic model, as Dask
    arrays of ``chunk`` rows each (nothing is generated until a compute asks for it)."""
    w_true = np.random.default_rng(seed).normal(size=FEATURES)
    rng = da.random.default_rng(seed)
    X = rng.standard_normal((rows, FEATURES), chunks=(chunk, FEATURES))
    noise = rng.logistic(size=rows, chunks=chunk)
    y = (X @ w_true + noise > 0).astype(np.float64)
    return X, y, w_true


def fit(X, y, l2=1e-4, say=print):
    """Minimise ``nll`` with L-BFGS-B from zeros; ``say`` gets one line per iteration.
    Returns SciPy's result and the loss of each iteration."""
    fun = value_and_grad(nll)
    losses = []
    last = {}

    def evaluate(w):
        last["value"], gradient = fun(w, X, y, l2)
        return last["value"], gradient

    def progress(w):
        losses.append(float(last["value"]))
        say(f"iteration {len(losses):3d}: loss {losses[-1]:.6f}")

    w0 = np.zeros(X.shape[1])
    result = minimize(evaluate, w0, jac=True, method="L-BFGS-B", callback=progress)
    return result, losses


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--chunk", type=int, default=25_000)
    parser.add_argument("--large", action="store_true",
                        help="50 million rows (8 GB of float64 at full size)")
    opts = parser.parse_args(argv)
    rows = 50_000_000 if opts.large else opts.rows
    chunk = 1_000_000 if opts.large and opts.chunk == 25_000 else opts.chunk
    X, y, w_true = dataset(rows, chunk)
    print(f"{rows} rows x {FEATURES} features in chunks of {chunk} rows "
          f"({X.nbytes / 2**20:.0f} MiB at full size, never held whole)")
    start = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        result, losses = fit(X, y)
        accuracy = float(da.mean((X @ result.x > 0) == (y > 0.5)).compute())
    print(f"{result.message} after {result.nit} iterations ({result.nfev} passes over the "
          f"data) in {time.perf_counter() - start:.1f} s")
    cosine = result.x @ w_true / np.linalg.norm(result.x) / np.linalg.norm(w_true)
    print(f"accuracy {accuracy:.4f}; cosine of the fitted and the true weights {cosine:.4f}")
    return result, losses, accuracy


if __name__ == "__main__":
    main()
