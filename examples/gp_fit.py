"""Fitting a Gaussian process's hyperparameters by maximum marginal likelihood, with the
gradient symdiff derives from the negative log marginal likelihood written the usual way.

- Linear algebra: the kernel matrix K is factored by ``np.linalg.cholesky``, two triangular
  solves with ``scipy.linalg.solve_triangular`` give alpha = K^-1 y, and log det K is twice
  the sum of the log of the factor's diagonal. symdiff differentiates through each of them
  (the Cholesky factor's adjoint is Murray's, 2016), never forming K^-1.
- SciPy's optimizer: ``scipy.optimize.minimize(nll, ..., jac=grad(nll))`` takes the
  generated gradient as it is: a function of the same arguments returning an array of the
  parameters' shape.
- Log-hyperparameters: the amplitude, length scale and noise are exp of the parameters, so
  the search is unconstrained.

Run: python examples/gp_fit.py [--points 40]
"""

import argparse

import numpy as np
from scipy.linalg import solve_triangular
from scipy.optimize import minimize

from symdiff import grad


def kernel(log_params, X):
    """A squared-exponential kernel plus noise on the diagonal, from log-hyperparameters."""
    amplitude = np.exp(2 * log_params[0])
    length = np.exp(log_params[1])
    noise = np.exp(2 * log_params[2])
    sq = np.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    return amplitude * np.exp(-0.5 * sq / length**2) + (noise + 1e-8) * np.eye(len(X))


def nll(log_params, X, y):
    """The negative log marginal likelihood of y under the GP: 0.5 y.T K^-1 y +
    0.5 log det K + n/2 log(2 pi)."""
    K = kernel(log_params, X)
    L = np.linalg.cholesky(K)
    alpha = solve_triangular(L.T, solve_triangular(L, y, lower=True), lower=False)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(L))) + 0.5 * len(y) * np.log(2 * np.pi)


def predict(log_params, X, y, Xs):
    """The posterior mean at Xs."""
    amplitude, length = np.exp(2 * log_params[0]), np.exp(log_params[1])
    L = np.linalg.cholesky(kernel(log_params, X))
    alpha = solve_triangular(L.T, solve_triangular(L, y, lower=True), lower=False)
    sq = np.sum((Xs[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    return amplitude * np.exp(-0.5 * sq / length**2) @ alpha


def dataset(rng, n):
    """Noisy samples of sin(2x) at n points in [0, 5]."""
    X = np.sort(rng.uniform(0.0, 5.0, n))[:, None]
    return X, np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(n)


def fit(X, y, start):
    """L-BFGS on the NLL with symdiff's gradient; prints every few steps."""
    steps = []

    def progress(p):
        steps.append(float(nll(p, X, y)))
        if len(steps) % 5 == 1:
            print(f"step {len(steps):3d}: nll {steps[-1]:.4f}")

    return minimize(nll, start, args=(X, y), jac=grad(nll), method="L-BFGS-B",
                    callback=progress), steps


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=40)
    opts = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    X, y = dataset(rng, opts.points)
    start = np.zeros(3)
    print(f"start: nll {nll(start, X, y):.4f}")
    result, _ = fit(X, y, start)
    amplitude, length, noise = np.exp(result.x)
    print(f"fitted in {result.nit} steps: nll {result.fun:.4f}; amplitude {amplitude:.3f}, "
          f"length scale {length:.3f}, noise {noise:.3f} (the data's: 0.100)")
    Xs = np.linspace(0.5, 4.5, 5)[:, None]
    error = np.max(np.abs(predict(result.x, X, y, Xs) - np.sin(2 * Xs[:, 0])))
    print(f"posterior mean within {error:.3f} of sin(2x) at {len(Xs)} test points")
    return result


if __name__ == "__main__":
    main()
