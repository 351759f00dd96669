"""Newton's method on a discretised nonlinear elastic bar: a sparse (tridiagonal) Hessian
that symdiff computes from three columns, whatever the number of unknowns.

The bar's displacements u at n interior points (fixed at both ends) minimise the energy
h * sum(d**2 / 2 + d**4 / 4) - h * sum(load * u), where d are the strains (u[i+1] - u[i]) / h.
Each strain involves two neighbouring unknowns, so the Hessian is tridiagonal.

- ``hessian(energy)`` learns that pattern from the columns of its first call; after that
  it runs three compressed columns (columns with no nonzero row in common run as one) and
  two check columns along random directions, which would catch an entry outside the
  pattern, and reads every entry back: Curtis, Powell and Reid's compression.
- Newton's method converges quadratically (the gradient norms printed lose their digits
  twice as fast at each step); the Hessian is checked against its formula,
  (1 + 3 d**2) / h on the strains, assembled by hand.
- At the end one Hessian is timed with the compression and with every column run
  (``symdiff.batch.SPARSE = False``), as a dense Hessian's would be.

Run: python examples/newton_sparse.py [--points 400]
"""

import argparse
import time

import numpy as np

from symdiff import batch, grad, hessian


def energy(u, load, h):
    """The bar's energy: its strains' (quartic) elastic energy, less the load's work."""
    full = np.concatenate(([0.0], u, [0.0]))
    d = (full[1:] - full[:-1]) / h
    return h * np.sum(0.5 * d ** 2 + 0.25 * d ** 4) - h * np.sum(load * u)


def hessian_by_hand(u, h):
    """The tridiagonal Hessian assembled from the strains: w = (1 + 3 d**2) / h per strain."""
    full = np.concatenate(([0.0], u, [0.0]))
    w = (1.0 + 3.0 * ((full[1:] - full[:-1]) / h) ** 2) / h
    return np.diag(w[:-1] + w[1:]) - np.diag(w[1:-1], 1) - np.diag(w[1:-1], -1)


def newton(n, load=10.0, steps=12, tol=1e-9):
    """Newton's method from rest; prints the gradient's norm at each step."""
    h = 1.0 / (n + 1)
    loads = load * np.sin(np.pi * h * np.arange(1, n + 1))
    g, H = grad(energy), hessian(energy)
    u = np.zeros(n)
    for k in range(steps):
        gu = g(u, loads, h)
        print(f"step {k}: |gradient| {np.linalg.norm(gu):.3e}")
        if np.linalg.norm(gu) < tol:
            break
        u = u - np.linalg.solve(H(u, loads, h), gu)
    return u, loads, h


def timed(H, args, calls=20):
    H(*args)
    start = time.perf_counter()
    for _ in range(calls):
        H(*args)
    return (time.perf_counter() - start) / calls


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=400)
    args = parser.parse_args(argv)
    u, loads, h = newton(args.points)
    H = hessian(energy)
    gap = np.max(np.abs(H(u, loads, h) - hessian_by_hand(u, h)))
    print(f"largest midpoint displacement {u.max():.4f}; the Hessian differs from its "
          f"formula by {gap:.1e}")
    compressed = timed(H, (u, loads, h))
    batch.SPARSE = False
    try:
        every = timed(H, (u, loads, h))
    finally:
        batch.SPARSE = True
    print(f"a {args.points}x{args.points} Hessian: {compressed * 1e3:.2f} ms from compressed "
          f"columns, {every * 1e3:.2f} ms with every column run")
    return u, gap


if __name__ == "__main__":
    main()
