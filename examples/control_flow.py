"""Branches, loops and helpers, differentiated as written and kept as control flow.

A Huber loss (if/else), Newton's iteration for a square root (a loop whose gradient flows
through every iteration), and a robust regression that calls the Huber loss for each row
of a data set. The generated gradients keep the if and the loops: the backward sweep tests
the branch the forward sweep took, and replays each loop's iterations in reverse from a
tape.

Run: python examples/control_flow.py
"""

import math

import numpy as np

from symdiff import grad


def huber(r, delta=1.0):
    """Quadratic near 0, linear beyond delta."""
    if abs(r) <= delta:
        return 0.5 * r ** 2
    return delta * (abs(r) - 0.5 * delta)


def newton_sqrt(a):
    """sqrt(a) by six Newton steps; its gradient flows through all six."""
    x = a
    for _ in range(6):
        x = 0.5 * (x + a / x)
    return x


def robust_loss(w, X, y):
    """The mean Huber loss of a linear model over the rows of X."""
    total = 0.0
    for row, target in zip(X, y, strict=True):
        total = total + huber(row @ w - target)
    return total / len(y)


def main():
    print(grad(huber).source)
    for r in (0.3, -2.0):
        print(f"huber'({r}) = {grad(huber)(r)}")

    print(grad(newton_sqrt).source)
    print(f"d newton_sqrt / da at 2: {grad(newton_sqrt)(2.0):.12f}; "
          f"1 / (2 sqrt 2) = {0.5 / math.sqrt(2):.12f}")

    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(50) * 0.1
    y[:5] += 20.0  # outliers: the Huber loss keeps them from dominating
    w = np.zeros(3)
    g = grad(robust_loss)
    for _ in range(300):
        w = w - 0.5 * g(w, X, y)
    print(f"robust fit with 5 outliers: w = {np.round(w, 3)} (true [1, -2, 0.5])")
    return w


if __name__ == "__main__":
    main()
