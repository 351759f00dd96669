"""stop_gradient in a regression: w1 learns, w2 and w3 stay where they started.

The well-known Q&A "How to use stop_gradient in Tensorflow" fits x @ w1 to x @ (w2 * w3)
and wraps the second product in stop_gradient. Gradient descent then updates all three
weights (here: our gradient with wrt=("w1", "w2", "w3")), but the gradients of w2 and w3
are exactly zero: they keep their initial values, and w1 converges to w2 * w3. The loss is
the Q&A's, in NumPy; each step draws a fresh batch of inputs, as its feed_dict did. The
stop_gradient audit marks the stop_gradient as a likely bug because it makes the gradients
of w2 and w3 zero: here that is the point (examples/var_list.py does it with wrt instead).

Run: python examples/regression_stop_gradient.py [--steps 100] [--plot weights.png]
(--plot draws w1, w2 and w3 over the iterations, like the Q&A's figure; it needs
matplotlib: pip install -e '.[plot]')
"""

import argparse

import numpy as np

from symdiff import audit, grad, stop_gradient


def loss(w1, w2, w3, x):
    """Mean squared difference between x @ w1 and the stopped target x @ (w2 * w3)."""
    a1 = x @ w1
    a2 = stop_gradient(x @ (w2 * w3))
    return np.mean(np.square(a1 - a2))


def descend(gradient, w1, w2, w3, rng, steps=100, lr=0.1, batch=100):
    """Plain gradient descent on all three weights; returns their values at every step."""
    history = [(w1, w2, w3)]
    for _ in range(steps):
        x = rng.standard_normal((batch, 5))
        g1, g2, g3 = gradient(w1, w2, w3, x)
        w1, w2, w3 = w1 - lr * g1, w2 - lr * g2, w3 - lr * g3
        history.append((w1, w2, w3))
    return [np.stack([h[i][:, 0] for h in history]) for i in range(3)]


def plot(w1s, w2s, w3s, path):
    """Draw the three weights over the iterations into ``path``; False if no matplotlib."""
    try:
        import matplotlib
    except ImportError:
        print("--plot needs matplotlib, which is not installed: pip install -e '.[plot]'")
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), sharey=True)
    for ax, ws, name in zip(axes, (w1s, w2s, w3s), ("w1", "w2", "w3"), strict=True):
        for j in range(ws.shape[1]):
            ax.plot(ws[:, j], color=f"C{j}", label=f"[{j}]")
        ax.set_title(name)
        ax.set_xlabel("iteration")
    for j, target in enumerate(w2s[0] * w3s[0]):
        axes[0].axhline(target, color=f"C{j}", linestyle=":", linewidth=1)
    axes[2].legend(title="component", fontsize="small", loc="center left",
                   bbox_to_anchor=(1.02, 0.5))
    axes[0].set_title("w1 (dotted: w2 * w3)")
    fig.suptitle("stop_gradient(x @ (w2 * w3)): only w1 learns")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100, help="gradient descent steps")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--plot", metavar="FILE", help="draw the weights into FILE (matplotlib)")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    w1, w2, w3 = (rng.standard_normal((5, 1)) for _ in range(3))
    gradient = grad(loss, wrt=("w1", "w2", "w3"))
    x = rng.standard_normal((100, 5))
    g1, g2, g3 = gradient(w1, w2, w3, x)
    print("gradients at the start (one batch of 100):")
    print(f"  d loss / d w1 = {g1[:, 0]}")
    print(f"  d loss / d w2 = {g2[:, 0]}")
    print(f"  d loss / d w3 = {g3[:, 0]}")
    report = audit(loss, w1, w2, w3, x, wrt=("w1", "w2", "w3"))
    print("\nthe audit marks the stop_gradient ! as it leaves w2 and w3 no gradient: here on "
          "purpose")
    print(report)

    w1s, w2s, w3s = descend(gradient, w1, w2, w3, rng, steps=args.steps)
    target = w2s[0] * w3s[0]
    print(f"\nafter {args.steps} steps of gradient descent on w1, w2 and w3 (lr 0.1):")
    print(f"  w1 start  {w1s[0]}")
    print(f"  w1 end    {w1s[-1]}")
    print(f"  w2 * w3   {target}")
    print(f"  w2 moved by {np.max(np.abs(w2s - w2s[0])):.1e}, "
          f"w3 moved by {np.max(np.abs(w3s - w3s[0])):.1e}")
    gaps = np.max(np.abs(w1s - target), axis=1)
    print("  max |w1 - w2 * w3| by step: " + ", ".join(
        f"{i}: {gaps[i]:.1e}" for i in np.linspace(0, args.steps, 5).astype(int)))
    if args.plot and plot(w1s, w2s, w3s, args.plot):
        print(f"\nwrote {args.plot}")
    return {"w1": w1s, "w2": w2s, "w3": w3s, "start_grads": (g1, g2, g3), "audit": report}


if __name__ == "__main__":
    main()
