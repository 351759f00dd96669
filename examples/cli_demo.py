"""Small functions to run the symdiff command line on; this file is read, never run by it.

    symdiff examples/cli_demo.py                   # the gradient source of each function
    symdiff examples/cli_demo.py --format math     # closed formulas where they are small
    symdiff examples/cli_demo.py --format latex
    symdiff examples/cli_demo.py --check           # compare with central differences
    symdiff examples/cli_demo.py -o grads.py       # a module that needs only NumPy
    symdiff examples/cli_demo.py -f rosenbrock --wrt x

(or python -m symdiff ...). ``softmax_ce`` has array operations, so --format math shows it
as a program; ``straight_through`` shows stop_gradient in its formula, and --check freezes
its argument, so the check agrees with the gradient 1.
"""

import math

import numpy as np

from symdiff import stop_gradient

A = 1.0
B = 100.0
TARGETS = np.array([0.0, 1.0, 0.0])


def rosenbrock(x, y):
    """The Rosenbrock valley: minimum 0 at (A, A**2)."""
    return (A - x) ** 2 + B * (y - x**2) ** 2


def gaussian(x, mu, sigma):
    """The log-density of a normal distribution."""
    z = (x - mu) / sigma
    return -0.5 * z**2 - np.log(sigma) - 0.5 * math.log(2 * math.pi)


def straight_through(w):
    """Rounds in the value, but passes the gradient straight through."""
    q = w + stop_gradient(np.round(w) - w)
    return q * q


def softmax_ce(x: "(3,)"):
    """Cross-entropy of softmax(x) against TARGETS, shifted for stability."""
    z = x - stop_gradient(np.max(x))
    return np.log(np.sum(np.exp(z))) - np.sum(TARGETS * z)
