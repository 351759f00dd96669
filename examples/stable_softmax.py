"""Stable softmax cross-entropy: stop_gradient(np.max(x)) shifts the values, not the gradient.

Subtracting the maximum keeps np.exp from overflowing. Because the shift is wrapped in
stop_gradient, no gradient flows through np.max, and the gradient equals the naive
version's (where the shift cancels exactly) -- also when the maximum is tied, where the
max's own derivative would be ambiguous. The generated source shows the shift kept, and
the stop_gradient audit shows that it blocks nothing: the shift is for numerics only.

Run: python examples/stable_softmax.py
"""

import numpy as np

from symdiff import audit, grad, stop_gradient


def naive(x, t):
    """Cross-entropy of softmax(x) against the one-hot (or soft) target t."""
    return np.log(np.sum(np.exp(x))) - np.sum(t * x)


def stable(x, t):
    """The same loss, shifted by the (constant) maximum so np.exp cannot overflow."""
    z = x - stop_gradient(np.max(x))
    return np.log(np.sum(np.exp(z))) - np.sum(t * z)


def softmax(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


def main():
    grad_naive, grad_stable = grad(naive), grad(stable)
    t = np.array([0.0, 1.0, 0.0, 0.0])
    print("generated gradient of the stable loss:\n")
    print(grad_stable.source)
    for x in (np.array([0.5, -1.0, 2.0, 0.1]),   # ordinary values
              np.array([3.0, 1.0, 3.0, 3.0])):   # the maximum tied three times
        a, b = grad_naive(x, t), grad_stable(x, t)
        print(f"x = {x}")
        print(f"  naive  gradient: {a}")
        print(f"  stable gradient: {b}")
        print(f"  softmax - t:     {softmax(x) - t}")
        assert np.allclose(a, b) and np.allclose(b, softmax(x) - t)
    big = np.array([1000.0, 1001.0, 1002.0, 999.0])
    with np.errstate(over="ignore", invalid="ignore"):
        print(f"\nat x = {big}: naive {grad_naive(big, t)}, stable {grad_stable(big, t)}")
    report = audit(stable, np.array([0.5, -1.0, 2.0, 0.1]), t)
    print("\nthe shift's stop_gradient blocks nothing: the same gradient flows without it, "
          "so it only keeps np.exp finite:")
    print(report)
    return {"audit": report}


if __name__ == "__main__":
    main()
