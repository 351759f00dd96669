"""The straight-through estimator: round in the forward pass, identity in the backward pass.

q = w + stop_gradient(np.round(w / STEP) * STEP - w) has the value of the rounded weights
(w cancels), but its derivative with respect to w is 1: the stopped correction contributes
none. Used in quantization-aware training (and with np.round replaced by sampling, in
binary networks and VQ-VAEs), it gives the gradient as if there were no rounding,
evaluated at the rounded weights. Plain np.round has derivative 0, so the same loss with
rounding alone gives a zero gradient and gradient descent never moves.

main() fits a linear model whose weights are used rounded to multiples of 0.25, both ways.
Its stop_gradient audit shows the stopped correction blocking a gradient equal and opposite
to the straight-through one (blocked |g| = |g|, half of the two together): without it the
gradient would be rounding's zero.

Run: python examples/straight_through.py
"""

import argparse
from collections import Counter

import numpy as np

from symdiff import audit, grad, stop_gradient

STEP = 0.25  # the quantization step


def loss(w, x, y):
    """Mean squared error of the model with quantized weights, straight-through."""
    q = w + stop_gradient(np.round(w / STEP) * STEP - w)
    return np.mean(np.square(x @ q - y))


def loss_rounded(w, x, y):
    """The same value, rounding only: d round / d w = 0 everywhere."""
    q = np.round(w / STEP) * STEP
    return np.mean(np.square(x @ q - y))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="gradient descent steps")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    w_true = np.array([0.8, -1.3, 0.45])
    x = rng.standard_normal((200, 3))
    y = x @ w_true + 0.1 * rng.standard_normal(200)
    w0 = np.array([0.3, 0.1, -0.2])

    ste, rounded = grad(loss, wrt="w"), grad(loss_rounded, wrt="w")
    q0 = np.round(w0 / STEP) * STEP
    print(f"at w = {w0} (used as q = {q0}):")
    print(f"  loss, straight-through: {loss(w0, x, y):.6f}   rounding only: "
          f"{loss_rounded(w0, x, y):.6f}")
    print(f"  gradient, straight-through: {ste(w0, x, y)}")
    print(f"  gradient, rounding only:    {rounded(w0, x, y)}")
    print(f"  2/N x.T @ (x @ q - y):      {2 * x.T @ (x @ q0 - y) / len(y)}")
    report = audit(loss, w0, x, y, wrt="w")
    print("\nthe stopped correction blocks the negative of the straight-through gradient, as "
          "large as it\n(so a 50% share): without it the gradient would be rounding's zero")
    print(report)

    results = {"x": x, "y": y, "w0": w0, "audit": report}
    for name, g in (("straight-through", ste), ("rounding only", rounded)):
        w, track = w0, []
        for _ in range(args.steps):
            w = w - 0.1 * g(w, x, y)
            track.append((loss(w, x, y), tuple(np.round(w / STEP) * STEP + 0.0)))  # no -0.
        results[name] = w
        results[name + " track"] = track
        print(f"\n{args.steps} steps of gradient descent (lr 0.1), {name}:")
        for step in (1, 5, 10):
            print(f"  step {step:3d}: w used as {np.array(track[step - 1][1])}, "
                  f"loss {track[step - 1][0]:.6f}")
        last = track[len(track) // 2:]
        print(f"  the quantized weights used in the last {len(last)} steps:")
        for (value, q), count in Counter(last).most_common():
            print(f"    {count:3d} x {np.array(q)}, loss {value:.6f}")

    # The best quantized weights near the least-squares solution, by trying them all.
    w_ls = np.linalg.lstsq(x, y, rcond=None)[0]
    offsets = np.stack(np.meshgrid([-1, 0, 1], [-1, 0, 1], [-1, 0, 1]), axis=-1).reshape(-1, 3)
    near = (np.round(w_ls / STEP) + offsets) * STEP
    grid_best = min((loss(q, x, y), tuple(q)) for q in near)
    print(f"\nleast squares without quantization: {w_ls}")
    print(f"best quantized weights near it: {np.array(grid_best[1])}, loss {grid_best[0]:.6f}")
    print("(the latent w keeps drifting towards the least-squares weights, so with a constant\n"
          " step size it goes back and forth across rounding boundaries near them)")
    results["grid best"] = grid_best
    return results


if __name__ == "__main__":
    main()
