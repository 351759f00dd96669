"""Finding what went wrong: located errors, tracebacks into the generated code, and pdb.

A gradient is ordinary Python in a real file, so the tools you debug NumPy code with work
on it unchanged:

1. What symdiff cannot differentiate is refused when the gradient is built, every problem
   of the function at once, each with its file, line, column and a caret.
2. An error raised while a gradient runs names the line of *your* function it comes from
   (a note on the exception), and the traceback shows the generated line as well: the
   generated source lives in a file (under the cache directory) that tracebacks can read.
3. `pdb.runcall(g.function_for(*args), *args)` steps through the generated gradient line by line
   (`n`, `s`, `p dz`, `l`); `python examples/debugging.py --pdb` does it here.

Run: python examples/debugging.py [--pdb]
"""

import pdb
import sys
import traceback

import numpy as np

from symdiff import SymdiffError, grad


def logistic_loss(w, X, y):
    """Mean negative log-likelihood of labels y in {0, 1} under a logistic model."""
    z = X @ w
    p = 1.0 / (1.0 + np.exp(-z))
    return -np.mean(y * np.log(p) + (1.0 - y) * np.log(1.0 - p))


def unsupported(x):
    """Three things symdiff does not differentiate (yet), reported together."""
    return np.sum(np.unwrap(x)) + np.sum(np.interp(x, x, x)) + np.sum(np.convolve(x, x))


def main(argv=()):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(5, 3)), np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    g = grad(logistic_loss)

    print("1. refused when built, every problem at once:\n")
    try:
        grad(unsupported)(np.ones(4))
    except SymdiffError as e:
        print(e, "\n")

    print("2. an error while the gradient runs names your line (and the generated one):\n")
    try:
        g(np.ones(4), X, y)  # w has 4 entries, X 3 columns
    except ValueError:
        traceback.print_exc(limit=-1, file=sys.stdout)
    print()

    print("3. the gradient's source, which pdb steps through:\n")
    print(g.source)
    w = np.zeros(3)
    if "--pdb" in argv:
        print(pdb.runcall(g.function_for(w, X, y), w, X, y))
    else:
        print("python examples/debugging.py --pdb  steps into it:"
              " pdb.runcall(g.function_for(w, X, y), w, X, y)")
    return g(w, X, y)


if __name__ == "__main__":
    main(sys.argv[1:])
