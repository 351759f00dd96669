"""Adversarial examples with the fast gradient sign method, and adversarial training.

FGSM (Goodfellow et al., 2015) moves each input by eps in the direction of the sign of the
loss gradient with respect to the input, x_adv = x + eps * sign(d loss / d x): the same
loss as training, differentiated with respect to x instead of the weights (wrt="x"). On a
logistic-regression classifier trained here by gradient descent, a small eps flips many
predictions and raises the loss.

TensorFlow's documentation names adversarial training as a use of stop_gradient: "no
backprop should happen through the adversarial example generation process". In
adversarial_loss the FGSM example is built inside the objective from the current weights
(for this model d loss_i / d x_i = (sigmoid(z_i) - y_i) * w) and wrapped in stop_gradient,
so the weight gradient treats it as data. (np.sign has derivative 0 anyway; stop_gradient
says so, and keeps holding for perturbations that are not piecewise constant: the
stop_gradient audit finds that it blocks nothing here.) Training on
clean plus adversarial inputs moves the classifier's weight from the narrow feature, which
the attack overwhelms, to the wide one: less accurate on clean inputs, more robust.

Run: python examples/fgsm.py [--eps 0.5]
"""

import argparse

import numpy as np

from symdiff import audit, grad, stop_gradient


def loss(w, b, x, y):
    """Mean cross-entropy of the logistic model sigmoid(x @ w + b) against labels y in {0, 1}."""
    z = x @ w + b
    return np.mean(np.logaddexp(0, z) - y * z)


def adversarial_loss(w, b, x, y, eps):
    """Half the loss on x, half on its FGSM example, which is stopped: data, not a function."""
    z = x @ w + b
    x_adv = stop_gradient(x + eps * np.sign(np.outer(1 / (1 + np.exp(-z)) - y, w)))
    z_adv = x_adv @ w + b
    clean = np.mean(np.logaddexp(0, z) - y * z)
    attacked = np.mean(np.logaddexp(0, z_adv) - y * z_adv)
    return 0.5 * clean + 0.5 * attacked


def dataset(rng, n):
    """n points, half labelled 0, half 1, with two features that are both informative.

    Feature 0 is wide (mean -1 or +1, spread 1); feature 1 is narrow and more telling
    (mean -0.3 or +0.3, spread 0.15), and a step of eps = 0.5 overwhelms it.
    """
    y = np.repeat([0.0, 1.0], n // 2)
    sign = 2 * y - 1
    x = np.stack([sign + rng.standard_normal(n), 0.3 * sign + 0.15 * rng.standard_normal(n)],
                 axis=1)
    return x, y


def train(gradient, x, y, steps=200, lr=0.5, extra=()):
    """Gradient descent on (w, b) from zero; ``gradient(w, b, x, y, *extra)``."""
    w, b = np.zeros(2), 0.0
    for _ in range(steps):
        gw, gb = gradient(w, b, x, y, *extra)
        w, b = w - lr * gw, b - lr * gb
    return w, b


def fgsm(grad_x, w, b, x, y, eps):
    """The fast gradient sign method: one step of size eps along sign(d loss / d x)."""
    return x + eps * np.sign(grad_x(w, b, x, y))


def accuracy(w, b, x, y):
    return float(np.mean((x @ w + b > 0) == (y == 1)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, default=0.5, help="size of the FGSM step")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)
    eps = args.eps

    rng = np.random.default_rng(args.seed)
    x_train, y_train = dataset(rng, 200)
    x_test, y_test = dataset(rng, 200)

    w, b = train(grad(loss, wrt=("w", "b")), x_train, y_train)
    print(f"logistic regression trained by gradient descent: w = {w}, b = {b:.4f}")

    grad_x = grad(loss, wrt="x")                # the gradient with respect to the input
    x_adv = fgsm(grad_x, w, b, x_test, y_test, eps)
    before, after = loss(w, b, x_test, y_test), loss(w, b, x_adv, y_test)
    flipped = (x_test @ w + b > 0) != (x_adv @ w + b > 0)
    print(f"\nFGSM with eps = {eps} on {len(y_test)} test points:")
    print(f"  loss      {before:.4f} -> {after:.4f}")
    print(f"  accuracy  {accuracy(w, b, x_test, y_test):.3f} -> "
          f"{accuracy(w, b, x_adv, y_test):.3f}")
    print(f"  predictions flipped: {int(np.sum(flipped))}")
    i = int(np.argmax(flipped))
    p = 1 / (1 + np.exp(-(np.array([x_test[i], x_adv[i]]) @ w + b)))
    print(f"  e.g. point {i} (label {y_test[i]:.0f}): x = {x_test[i]}, p(y=1) = {p[0]:.3f}")
    print(f"       x_adv = {x_adv[i]}, p(y=1) = {p[1]:.3f}")

    report = audit(adversarial_loss, w, b, x_train, y_train, eps, wrt=("w", "b"))
    print("\nthe FGSM example's stop_gradient blocks nothing here: np.sign's derivative is 0, "
          "so no gradient\nflows through the attack either way (it would for a smooth "
          "perturbation)")
    print(report)

    robust = train(grad(adversarial_loss, wrt=("w", "b")), x_train, y_train, extra=(eps,))
    x_adv_robust = fgsm(grad_x, *robust, x_test, y_test, eps)
    print(f"\nadversarial training (FGSM examples stopped inside the loss, eps = {eps}):")
    print(f"  w = {robust[0]}, b = {robust[1]:.4f}")
    print(f"  accuracy on clean inputs: {accuracy(*robust, x_test, y_test):.3f}, "
          f"under FGSM: {accuracy(*robust, x_adv_robust, y_test):.3f} "
          f"(plain training: {accuracy(w, b, x_adv, y_test):.3f})")
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test,
            "eps": eps, "weights": (w, b), "x_adv": x_adv, "loss": (before, after),
            "flipped": int(np.sum(flipped)), "robust": robust, "x_adv_robust": x_adv_robust,
            "audit": report}


if __name__ == "__main__":
    main()
