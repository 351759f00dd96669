"""Newton's method and a Laplace approximation for Bayesian logistic regression, with the
Hessian symdiff derives from the negative log posterior written the usual way.

- ``hessian(neg_log_posterior)`` is the matrix of second derivatives (parameter shape
  twice, JAX's layout), made a column at a time: each column is the gradient of the
  function's tangent program (forward mode, generated as NumPy source) along a basis
  vector: reverse over forward mode.
- A Newton step solves H dw = -g; near the optimum it converges quadratically, which the
  printed gradient norms show (the digits double at each step).
- The Laplace approximation of the posterior is the normal distribution at the optimum
  whose covariance is the inverse Hessian there; its standard deviations are printed.
- For a problem too large to form H, ``jvp(grad(f), (w,), (v,))`` gives the product H v
  (a Hessian-vector product at a small multiple of the gradient's cost): the conjugate
  gradient solve at the end uses only such products, and agrees with the Newton step.

Run: python examples/newton_laplace.py [--features 5] [--points 200]
"""

import argparse

import numpy as np

from symdiff import grad, hessian, jvp


def neg_log_posterior(w, X, y, prior):
    """The logistic regression's negative log likelihood plus a Gaussian prior's."""
    z = X @ w
    return np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * prior * np.sum(w ** 2)


def dataset(rng, points, features):
    X = rng.normal(size=(points, features))
    w_true = rng.normal(size=features)
    y = (rng.random(points) < 1 / (1 + np.exp(-X @ w_true))).astype(float)
    return X, y


def newton(X, y, prior=1.0, steps=8, tol=1e-10):
    """Newton's method from zero; prints the gradient's norm at each step."""
    g, H = grad(neg_log_posterior), hessian(neg_log_posterior)
    w = np.zeros(X.shape[1])
    for k in range(steps):
        gw = g(w, X, y, prior)
        print(f"step {k}: |gradient| {np.linalg.norm(gw):.3e}")
        if np.linalg.norm(gw) < tol:
            break
        w = w - np.linalg.solve(H(w, X, y, prior), gw)
    return w


def conjugate_gradient(w, X, y, prior, rhs, iterations=50):
    """Solve H v = rhs with Hessian-vector products alone (H is never formed)."""
    hvp = grad(neg_log_posterior)
    v = np.zeros_like(rhs)
    r = rhs.copy()
    p = r.copy()
    for _ in range(iterations):
        Hp = jvp(hvp, (w, X, y, prior), (p, np.zeros_like(X), np.zeros_like(y), 0.0))[1]
        step = (r @ r) / (p @ Hp)
        v, r_new = v + step * p, r - step * Hp
        if np.linalg.norm(r_new) < 1e-12:
            break
        p = r_new + (r_new @ r_new) / (r @ r) * p
        r = r_new
    return v


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=5)
    parser.add_argument("--points", type=int, default=200)
    args = parser.parse_args(argv)
    X, y = dataset(np.random.default_rng(0), args.points, args.features)
    w = newton(X, y)
    H = hessian(neg_log_posterior)(w, X, y, 1.0)
    sd = np.sqrt(np.diag(np.linalg.inv(H)))
    print("posterior mean:", np.array2string(w, precision=3))
    print("posterior sd:  ", np.array2string(sd, precision=3))
    # One Newton step from a point off the optimum, by products H v alone:
    w0 = w + 0.1
    g0 = grad(neg_log_posterior)(w0, X, y, 1.0)
    by_cg = conjugate_gradient(w0, X, y, 1.0, g0)
    direct = np.linalg.solve(hessian(neg_log_posterior)(w0, X, y, 1.0), g0)
    print(f"Newton step by Hessian-vector products differs from the direct solve by "
          f"{np.max(np.abs(by_cg - direct)):.1e}")
    return w, sd


if __name__ == "__main__":
    main()
