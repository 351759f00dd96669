"""Choosing what to differentiate instead of stopping it: the Q&A's var_list, as wrt.

The other answer to "How to use stop_gradient in Tensorflow": leave the loss alone,
mean((x @ w1 - x @ (w2 * w3))**2), and tell the optimizer which variables to update
(var_list=[w1]). Here that is grad(loss, wrt="w1"). Its gradient equals the w1 gradient of
the stop_gradient version (examples/regression_stop_gradient.py), and as w2 and w3 get no
gradient they are not updated: w1 converges to w2 * w3 along the same path. What differs is
the gradient that would exist for w2 and w3: the plain loss has one (printed below),
the stopped loss has none. The stop_gradient audit of the stopped loss says so: it marks the
stop_gradient as a likely bug, since w2 and w3 get a zero gradient through it, and measures
the gradients it blocks, the plain loss's.

Run: python examples/var_list.py
"""

import argparse

import numpy as np

from symdiff import audit, grad, stop_gradient


def loss(w1, w2, w3, x):
    """The regression loss, nothing stopped."""
    return np.mean(np.square(x @ w1 - x @ (w2 * w3)))


def loss_stopped(w1, w2, w3, x):
    """The same loss with the target stopped, as in regression_stop_gradient.py."""
    return np.mean(np.square(x @ w1 - stop_gradient(x @ (w2 * w3))))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="gradient descent steps")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    w1, w2, w3 = (rng.standard_normal((5, 1)) for _ in range(3))
    x = rng.standard_normal((100, 5))

    grad_w1 = grad(loss, wrt="w1")                          # var_list=[w1]
    grad_stopped = grad(loss_stopped, wrt=("w1", "w2", "w3"))
    grad_all = grad(loss, wrt=("w1", "w2", "w3"))           # what var_list leaves out
    g1 = grad_w1(w1, w2, w3, x)
    s1, s2, s3 = grad_stopped(w1, w2, w3, x)
    a1, a2, a3 = grad_all(w1, w2, w3, x)
    print("d loss / d w1:")
    print(f"  wrt='w1' on the plain loss:          {g1[:, 0]}")
    print(f"  wrt=all three on the stopped loss:   {s1[:, 0]}")
    print(f"  largest difference: {np.max(np.abs(g1 - s1)):.1e}")
    print("gradients of w2 and w3, which var_list / wrt leave out:")
    print(f"  stopped loss: d/dw2 = {s2[:, 0]}, d/dw3 = {s3[:, 0]}")
    print(f"  plain loss:   d/dw2 = {a2[:, 0]}")
    print(f"                d/dw3 = {a3[:, 0]}")
    report = audit(loss_stopped, w1, w2, w3, x, wrt=("w1", "w2", "w3"))
    print("\nthe stopped loss's stop_gradient blocks all of w2's and w3's gradients (the plain "
          "loss's above)\nand none of w1's: it freezes w2 and w3 as var_list=[w1] does, and is "
          "marked ! for it")
    print(report)

    start = (w1, w2, w3)
    w1s = [w1]
    for _ in range(args.steps):
        batch = rng.standard_normal((100, 5))
        w1 = w1 - 0.1 * grad_w1(w1, w2, w3, batch)             # only w1 is in the var_list
        w1s.append(w1)
    w1s = np.stack([w[:, 0] for w in w1s])
    print(f"\nafter {args.steps} steps updating w1 only (lr 0.1):")
    print(f"  w1 end    {w1s[-1]}")
    print(f"  w2 * w3   {(w2 * w3)[:, 0]}")
    print(f"  w2, w3 unchanged: {np.array_equal(w2, start[1]) and np.array_equal(w3, start[2])}")
    print(f"  max |w1 - w2 * w3| = {np.max(np.abs(w1s[-1] - (w2 * w3)[:, 0])):.1e}")
    return {"start": start, "x": x, "w1": w1s, "grad_w1": g1, "stopped": (s1, s2, s3),
            "plain": (a1, a2, a3), "audit": report}


if __name__ == "__main__":
    main()
