"""Contrastive divergence (CD-1) for a binary RBM: stop_gradient on the model's samples.

TensorFlow's documentation names "contrastive divergence training of Boltzmann machines
where, when differentiating the energy function, the training must not backpropagate
through the graph that generated the samples from the model" as a use of stop_gradient.

An RBM with weights W, visible biases b and hidden biases c has the free energy
F(v) = -v @ b - sum_j log(1 + exp(v @ W + c)_j). CD-1 descends
mean(F(v_data)) - mean(F(v_model)), where v_model comes from one Gibbs step started at
the data: hidden units sampled from p(h | v_data), then the visible probabilities
p(v | h) (Hinton's practical guide uses probabilities for the reconstruction). That Gibbs
step is computed inside the objective from W, b and c, and wrapped in stop_gradient. Its
gradient is then the hand-derived CD-1 rule, e.g. for W:
-(<v sigmoid(v @ W + c)>_data - <v sigmoid(v @ W + c)>_model); main() checks this and
trains an RBM on two noisy 8-pixel patterns with it. Its stop_gradient audit shows what
each stop_gradient does: the sampled hidden units block nothing (np.where's derivative is 0),
the reconstruction's blocks the gradient through the model's sample, which CD-1 leaves out.

Run: python examples/rbm_cd.py
"""

import argparse

import numpy as np

from symdiff import audit, grad, stop_gradient


def cd1_objective(W, b, c, v_data, u_h):
    """Free energy of the data minus that of its one-step reconstruction, which is stopped.

    u_h holds uniform(0, 1) noise, one number per hidden unit and example: the Gibbs step
    samples h = 1 where u_h < p(h = 1 | v_data).
    """
    h_data = stop_gradient(np.where(u_h < 1 / (1 + np.exp(-(v_data @ W + c))), 1.0, 0.0))
    v_model = stop_gradient(1 / (1 + np.exp(-(h_data @ W.T + b))))
    free_data = -(v_data @ b) - np.sum(np.logaddexp(0, v_data @ W + c), axis=1)
    free_model = -(v_model @ b) - np.sum(np.logaddexp(0, v_model @ W + c), axis=1)
    return np.mean(free_data) - np.mean(free_model)


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def cd1_update(W, b, c, v_data, u_h):
    """The CD-1 rule by hand: <v h>_data - <v h>_model, h = sigmoid(v @ W + c)."""
    h_sample = np.where(u_h < sigmoid(v_data @ W + c), 1.0, 0.0)
    v_model = sigmoid(h_sample @ W.T + b)
    h_data, h_model = sigmoid(v_data @ W + c), sigmoid(v_model @ W + c)
    n = len(v_data)
    return ((v_data.T @ h_data - v_model.T @ h_model) / n,
            np.mean(v_data, axis=0) - np.mean(v_model, axis=0),
            np.mean(h_data, axis=0) - np.mean(h_model, axis=0))


def free_energy(W, b, c, v):
    return -(v @ b) - np.sum(np.logaddexp(0, v @ W + c), axis=1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="CD-1 steps")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    patterns = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 0, 0.0]])
    data = patterns[rng.integers(2, size=100)]
    data = np.abs(data - (rng.random(data.shape) < 0.05))        # flip 5% of the pixels
    W, b, c = 0.1 * rng.standard_normal((8, 3)), np.zeros(8), np.zeros(3)

    gradient = grad(cd1_objective, wrt=("W", "b", "c"))
    u_h = rng.random((100, 3))
    ours, by_hand = gradient(W, b, c, data, u_h), cd1_update(W, b, c, data, u_h)
    print("gradient of the CD-1 objective vs the CD-1 rule by hand, at the start:")
    for name, g, update in zip("Wbc", ours, by_hand, strict=True):
        print(f"  d/d{name}: largest |gradient + update| = {np.max(np.abs(g + update)):.1e}")
    report = audit(cd1_objective, W, b, c, data, u_h, wrt=("W", "b", "c"))
    print("\nthe sampled h_data's stop_gradient blocks nothing (np.where's derivative is 0); "
          "v_model's blocks\nthe gradient through the Gibbs step, which CD-1 leaves out:")
    print(report)

    others = np.array([[0, 0, 0, 0, 1, 1, 1, 1], [1, 0, 1, 0, 1, 0, 1, 0.0]])
    before = free_energy(W, b, c, np.vstack([patterns, others]))
    for _ in range(args.steps):
        gW, gb, gc = gradient(W, b, c, data, rng.random((100, 3)))
        W, b, c = W - 0.1 * gW, b - 0.1 * gb, c - 0.1 * gc
    after = free_energy(W, b, c, np.vstack([patterns, others]))
    print(f"\nfree energy after {args.steps} CD-1 steps (lr 0.1); lower is more probable:")
    for v, f0, f1 in zip(np.vstack([patterns, others]), before, after, strict=True):
        kind = "training pattern" if any((v == p).all() for p in patterns) else "other"
        print(f"  {v.astype(int)} ({kind:16}): {f0:7.3f} -> {f1:7.3f}")
    reconstruction = sigmoid(sigmoid(patterns @ W + c) @ W.T + b)
    print("mean-field reconstructions of the training patterns:")
    for row in reconstruction:
        print(f"  {np.round(row, 2)}")
    return {"data": data, "u_h": u_h, "start_grads": ours, "params": (W, b, c),
            "free_energy": (before, after), "reconstruction": reconstruction, "audit": report}


if __name__ == "__main__":
    main()
