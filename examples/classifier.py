"""A small classifier written as people write one: parameters in a dict, the loss a method
that reads its settings from self, the accuracy returned alongside the loss.

- Containers: ``params`` is a dict of arrays, and its gradient is a dict of the same keys
  (as in JAX and autograd), so the update is one line over the keys.
- Methods: ``value_and_grad(model.loss, has_aux=True)`` differentiates the bound method with
  respect to its first parameter after self; ``self.l2`` is read at each call, as a value.
- has_aux: ``loss`` returns ``(nll, accuracy)``; the accuracy comes from the same forward
  sweep, and is not differentiated.
- Kinds: the same gradient trains in float32 when the data and parameters are float32,
  computing in float32 (a second build, made on the first float32 call).

The logits are shifted by their row maximum under stop_gradient, for stability, as in the
README's example.

Run: python examples/classifier.py [--steps 300] [--float32]
"""

import argparse

import numpy as np

from symdiff import audit, stop_gradient, value_and_grad


class Classifier:
    """A one-hidden-layer tanh network with a softmax output and an L2 penalty."""

    def __init__(self, l2=1e-3):
        self.l2 = l2

    def loss(self, params, X, Y):
        """Mean cross-entropy against one-hot Y, plus the penalty; and the accuracy."""
        H = np.tanh(X @ params["W1"] + params["b1"])
        Z = H @ params["W2"] + params["b2"]
        Z = Z - stop_gradient(np.max(Z, axis=1, keepdims=True))
        logp = Z - np.log(np.sum(np.exp(Z), axis=1, keepdims=True))
        nll = -np.mean(np.sum(Y * logp, axis=1))
        penalty = self.l2 * (np.sum(params["W1"] ** 2) + np.sum(params["W2"] ** 2))
        return nll + penalty, np.mean(np.argmax(Z, axis=1) == np.argmax(Y, axis=1))


def dataset(rng, n, dtype=np.float64):
    """Three classes of points on three arms of a spiral, with one-hot labels."""
    labels = np.repeat(np.arange(3), n // 3)
    r = np.tile(np.linspace(0.1, 1.0, n // 3), 3)
    angle = labels * 2.1 + r * 3.0 + 0.1 * rng.standard_normal(len(r))
    X = np.stack([r * np.cos(angle), r * np.sin(angle)], axis=1)
    return X.astype(dtype), np.eye(3)[labels].astype(dtype)


def initial(rng, hidden=16, dtype=np.float64):
    return {"W1": (rng.standard_normal((2, hidden)) * 1.0).astype(dtype),
            "b1": np.zeros(hidden, dtype),
            "W2": (rng.standard_normal((hidden, 3)) * 0.3).astype(dtype),
            "b2": np.zeros(3, dtype)}


def train(model, params, X, Y, steps, lr=0.5):
    """Gradient descent; returns the parameters and the (loss, accuracy) of every step."""
    step = value_and_grad(model.loss, has_aux=True)
    history = []
    for _ in range(steps):
        (value, accuracy), g = step(params, X, Y)
        params = {k: params[k] - lr * g[k] for k in params}
        history.append((float(value), float(accuracy)))
    return params, history


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--float32", action="store_true", help="train in float32")
    opts = parser.parse_args(argv)
    dtype = np.float32 if opts.float32 else np.float64
    rng = np.random.default_rng(0)
    X, Y = dataset(rng, 300, dtype)
    model = Classifier()
    params, history = train(model, initial(rng, dtype=dtype), X, Y, opts.steps)
    for i in (0, opts.steps // 2, opts.steps - 1):
        print(f"step {i:4d}: loss {history[i][0]:.4f}, accuracy {history[i][1]:.3f}")
    kinds = sorted({str(v.dtype) for v in params.values()})
    print(f"parameters: {', '.join(f'{k} {v.shape}' for k, v in params.items())}; "
          f"dtype {', '.join(kinds)}")
    print("\nthe logits' shift blocks nothing (it only keeps np.exp finite), at the trained "
          "parameters:")
    print(audit(model.loss, params, X, Y, has_aux=True))
    return params, history


if __name__ == "__main__":
    main()
