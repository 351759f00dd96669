"""EM for a 1-D Gaussian mixture: the M-step objective with stop_gradient on the E-step.

TensorFlow's documentation names "the EM algorithm where the M-step should not involve
backpropagation through the output of the E-step" as a use of stop_gradient. Here the
objective is EM's expected complete-data log-likelihood, mean_n sum_k r_nk log(pi_k
N(x_n | mu_k, var_k)), with the responsibilities r computed inside it from the current
parameters and wrapped in stop_gradient: they weigh the terms without being differentiated.

Its gradient with respect to the means, log-variances and mixing logits is zero exactly
where the parameters equal the closed-form M-step of their own responsibilities (weighted
means, weighted variances, average responsibilities), that is, at a fixed point of EM. So
gradient ascent on it (three components, 300 points) reaches the same parameters as EM's
closed-form updates; both are printed. (Without stop_gradient the gradient would also
move r, and the ascent would maximise something else. With it, the gradient equals that
of the log-likelihood itself, Fisher's identity: the ascent climbs the likelihood.) The
stop_gradient audit at the start measures the part of the gradient that stop_gradient
blocks: the derivative through r, which the M-step leaves out.

Run: python examples/em_gmm.py
"""

import argparse

import numpy as np

from symdiff import audit, grad, stop_gradient


def m_step_objective(mu, log_var, logit, x):
    """Expected complete-data log-likelihood per point; x is a column (N, 1) of data.

    (log_joint below, written out: a differentiated function cannot call another.)
    """
    log_pi = logit - np.log(np.sum(np.exp(logit)))
    log_joint = log_pi - 0.5 * (np.log(2 * np.pi) + log_var + np.square(x - mu) / np.exp(log_var))
    r = stop_gradient(np.exp(log_joint) / np.sum(np.exp(log_joint), axis=1, keepdims=True))
    return np.mean(np.sum(r * log_joint, axis=1))


def log_joint(mu, log_var, logit, x):
    """log(pi_k N(x_n | mu_k, var_k)) for every point n and component k: shape (N, K)."""
    log_pi = logit - np.log(np.sum(np.exp(logit)))
    return log_pi - 0.5 * (np.log(2 * np.pi) + log_var + np.square(x - mu) / np.exp(log_var))


def log_likelihood(*params):
    """Mean log-likelihood of the data under the mixture (what EM increases)."""
    return float(np.mean(np.logaddexp.reduce(log_joint(*params), axis=1)))


def responsibilities(*params):
    """The E-step: r_nk = p(component k | x_n) at the given parameters."""
    lj = log_joint(*params)
    return np.exp(lj - np.logaddexp.reduce(lj, axis=1, keepdims=True))


def closed_form_m_step(r, x):
    """EM's M-step: weighted means, weighted variances, average responsibilities."""
    nk = np.sum(r, axis=0)
    mu = np.sum(r * x, axis=0) / nk
    var = np.sum(r * (x - mu) ** 2, axis=0) / nk
    return mu, np.log(var), np.log(nk / len(x))


def readable(mu, log_var, logit):
    """Means, variances and mixing weights (logits are only defined up to a constant)."""
    return mu, np.exp(log_var), np.exp(logit) / np.sum(np.exp(logit))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="gradient ascent steps")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    component = rng.choice(3, size=300, p=[0.3, 0.5, 0.2])
    x = (np.array([-4.0, 0.0, 3.5])[component]
         + np.array([0.8, 1.0, 0.6])[component] * rng.standard_normal(300))[:, None]
    start = (np.array([-2.0, -0.5, 1.0]), np.zeros(3), np.zeros(3))

    gradient = grad(m_step_objective, wrt=("mu", "log_var", "logit"))
    report = audit(m_step_objective, *start, x, wrt=("mu", "log_var", "logit"))
    print("the E-step's stop_gradient blocks the gradient through the responsibilities, which "
          "the M-step\nholds fixed (what is left is the log-likelihood's gradient):")
    print(report)
    params = start
    print(f"\ngradient ascent on the M-step objective ({args.steps} steps, step size 1):")
    for step in range(args.steps + 1):
        if step in (0, 10, 30, 100, 300, args.steps):
            print(f"  step {step:3d}: log-likelihood {log_likelihood(*params, x):.6f}, "
                  f"means {params[0]}")
        if step < args.steps:
            params = tuple(p + g for p, g in zip(params, gradient(*params, x), strict=True))
    ascent = params

    em = start
    for _ in range(args.steps):
        em = closed_form_m_step(responsibilities(*em, x), x)
    m_step = closed_form_m_step(responsibilities(*ascent, x), x)

    print(f"\n  {'':<26}{'means':<26}{'variances':<26}mixing weights")
    for name, p in (("gradient ascent:", ascent), ("closed-form M-step there:", m_step),
                    (f"EM, {args.steps} iterations:", em)):
        mu, var, pi = (str(np.round(v, 4)) for v in readable(*p))
        print(f"  {name:<26}{mu:<26}{var:<26}{pi}")
    gap = max(np.max(np.abs(a - m))
              for a, m in zip(readable(*ascent), readable(*m_step), strict=True))
    print(f"largest difference between the ascent and its M-step: {gap:.1e}")
    return {"x": x, "start": start, "ascent": ascent, "m_step": m_step, "em": em,
            "audit": report}


if __name__ == "__main__":
    main()
