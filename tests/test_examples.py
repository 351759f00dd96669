"""The stop_gradient examples: their gradients and results against independent references.

Each example's differentiated functions are checked against gradients derived by hand in
NumPy, and those references are themselves checked against central differences of a copy
of the function in which every stop_gradient(expr) is a constant passed in (frozen at its
value at the point). Each main() is run with its output captured, and its numbers are
compared with the same procedure driven by the hand-derived gradients. Each example's
stop_gradient audit is checked the same way: what a site blocks is the gradient with the
site an identity (the hand-derived gradient of the unstopped function, or central
differences of a copy without the stop_gradient) minus the gradient as written.
"""

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gradcheck import load, numeric_grad

from symdiff import audit, grad, value_and_grad

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def example(name):
    """The example's globals (its functions keep their file, so symdiff can read them)."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"))


def run_main(name, capsys, argv=()):
    mod = example(name)
    result = mod["main"](list(argv))
    return mod, result, capsys.readouterr().out


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def assert_close(actual, expected, rtol=1e-9, atol=1e-12):
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def norm(g):
    return float(np.linalg.norm(np.ravel(g)))


def assert_blocks(entry, removed, written, rtol=1e-9, atol=1e-12):
    """``entry`` blocks ``removed - written`` per parameter (gradients without the site and
    as written, as dicts), as a norm and as its share of the two parts' sizes. (``removed``
    by central differences: rtol and atol of their error, 1e-6 and 1e-7.)"""
    for p in removed:
        blocked = norm(removed[p] - written[p])
        share = blocked / (blocked + norm(written[p])) if blocked else 0.0
        assert entry.blocked[p].norm == pytest.approx(blocked, rel=rtol, abs=atol)
        assert entry.blocked[p].share == pytest.approx(share, rel=rtol, abs=atol)


# --- stable_softmax.py ---


@pytest.mark.parametrize("x", [[0.5, -1.0, 2.0, 0.1],        # ordinary values
                               [3.0, 1.0, 3.0, 3.0],         # the maximum tied
                               [1000.0, 1001.0, 1002.0, 999.0]])  # np.exp(x) overflows
def test_stable_softmax_audit_the_shift_blocks_nothing(x):
    """Without the stop_gradient the shift cancels (the naive loss's gradient, softmax - t,
    which the gradient as written already is), so the site blocks nothing."""
    mod = example("stable_softmax")
    x, t = np.array(x), np.array([0.0, 1.0, 0.0, 0.0])
    report = audit(mod["stable"], x, t)
    (entry,) = report.entries
    assert entry.effect == "blocks nothing" and not entry.likely_bug
    assert (entry.blocked["x"].norm, entry.blocked["x"].share) == (0, 0)
    assert entry.verdict.startswith("blocks nothing here: the gradient is the same without it")
    e = np.exp(x - np.max(x))
    assert report.gradient_norm["x"] == pytest.approx(norm(e / e.sum() - t), rel=1e-12)


def test_stable_softmax_main_prints_and_returns_the_audit(capsys):
    mod = example("stable_softmax")
    report = mod["main"]()["audit"]
    out = capsys.readouterr().out
    assert [e.effect for e in report.entries] == ["blocks nothing"]
    assert "the shift's stop_gradient blocks nothing" in out and str(report) in out


# --- regression_stop_gradient.py and var_list.py ---


def regression_value(w1, w2, w3, x, target=None):
    """The regression loss; ``target`` given: the stopped x @ (w2 * w3), frozen."""
    a2 = x @ (w2 * w3) if target is None else target
    return np.mean(np.square(x @ w1 - a2))


def regression_grads(w1, w2, w3, x, stopped):
    """By hand: L = mean(r**2), r = x @ w1 - x @ (w2 * w3) of shape (N, 1)."""
    xr = 2 * x.T @ (x @ w1 - x @ (w2 * w3)) / len(x)
    if stopped:
        return xr, np.zeros_like(w2), np.zeros_like(w3)
    return xr, -xr * w3, -xr * w2


def regression_point(seed=1, n=20):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((5, 1)) for _ in range(3)] + [rng.standard_normal((n, 5))]


def test_regression_references_match_central_differences():
    w1, w2, w3, x = args = regression_point()
    frozen = x @ (w2 * w3)
    stopped = regression_grads(*args, stopped=True)
    for i, g in enumerate(stopped):
        assert_close(g, numeric_grad(regression_value, [*args, frozen], i), 1e-6, 1e-8)
    for i, g in enumerate(regression_grads(*args, stopped=False)):
        assert_close(g, numeric_grad(regression_value, args, i), 1e-6, 1e-8)


def test_regression_gradient_matches_hand_derived():
    mod = example("regression_stop_gradient")
    args = regression_point()
    ours = grad(mod["loss"], wrt=("w1", "w2", "w3"))(*args)
    for g, ref in zip(ours, regression_grads(*args, stopped=True), strict=True):
        assert g.shape == (5, 1)
        assert_close(g, ref)
    assert not np.any(ours[1]) and not np.any(ours[2])


def test_regression_main_w1_converges_w2_w3_stay(capsys):
    mod, res, out = run_main("regression_stop_gradient", capsys)
    rng = np.random.default_rng(0)
    w1, w2, w3 = (rng.standard_normal((5, 1)) for _ in range(3))
    x0 = rng.standard_normal((100, 5))
    for g, ref in zip(res["start_grads"], regression_grads(w1, w2, w3, x0, True), strict=True):
        assert_close(g, ref)
    expected = mod["descend"](lambda *a: regression_grads(*a, stopped=True), w1, w2, w3, rng)
    for got, ref in zip((res["w1"], res["w2"], res["w3"]), expected, strict=True):
        assert got.shape == (101, 5)
        assert_close(got, ref, 1e-9, 1e-10)
    assert (res["w2"] == w2[:, 0]).all() and (res["w3"] == w3[:, 0]).all()
    assert np.max(np.abs(res["w1"][-1] - (w2 * w3)[:, 0])) < 1e-6
    assert np.max(np.abs(res["w1"][0] - (w2 * w3)[:, 0])) > 0.5
    assert "w2 moved by 0.0e+00, w3 moved by 0.0e+00" in out
    assert "wrote" not in out
    report = res["audit"]
    assert [e.effect for e in report.entries] == ["zero gradient"]
    assert report.gradient_norm == pytest.approx(
        {"w1": norm(res["start_grads"][0]), "w2": 0, "w3": 0})
    assert "the audit marks the stop_gradient !" in out and str(report) in out


def test_regression_audit_marks_the_zero_gradients_of_w2_and_w3():
    mod = example("regression_stop_gradient")
    args = regression_point()
    (entry,) = audit(mod["loss"], *args, wrt=("w1", "w2", "w3")).entries
    assert entry.effect == "zero gradient" and entry.likely_bug
    assert entry.verdict.startswith("the gradients of w2, w3 are zero")
    assert list(entry.depends_on) == ["w2", "w3"]
    names = ("w1", "w2", "w3")
    assert_blocks(entry, dict(zip(names, regression_grads(*args, stopped=False), strict=True)),
                  dict(zip(names, regression_grads(*args, stopped=True), strict=True)))
    assert entry.blocked["w1"].norm == 0 and entry.blocked["w2"].share == 1


def test_regression_plot_writes_a_png(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "weights.png"
    _, _, out = run_main("regression_stop_gradient", capsys, ["--steps", "20", "--plot",
                                                                str(path)])
    assert f"wrote {path}" in out
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_regression_plot_without_matplotlib_says_so(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    path = tmp_path / "weights.png"
    _, res, out = run_main("regression_stop_gradient", capsys, ["--steps", "5", "--plot",
                                                                  str(path)])
    assert "--plot needs matplotlib" in out and not path.exists()
    assert res["w1"].shape == (6, 5)


def test_var_list_gradient_matches_hand_derived():
    mod = example("var_list")
    args = regression_point(seed=2)
    assert_close(grad(mod["loss"], wrt="w1")(*args), regression_grads(*args, stopped=False)[0])
    plain = grad(mod["loss"], wrt=("w1", "w2", "w3"))(*args)
    for g, ref in zip(plain, regression_grads(*args, stopped=False), strict=True):
        assert_close(g, ref)
    stopped = grad(mod["loss_stopped"], wrt=("w1", "w2", "w3"))(*args)
    for g, ref in zip(stopped, regression_grads(*args, stopped=True), strict=True):
        assert_close(g, ref)


def test_var_list_main_matches_stop_gradient_and_updates_w1_only(capsys):
    _, res, out = run_main("var_list", capsys)
    rng = np.random.default_rng(0)
    w1, w2, w3 = (rng.standard_normal((5, 1)) for _ in range(3))
    x = rng.standard_normal((100, 5))
    for a, b in zip(res["start"], (w1, w2, w3), strict=True):
        assert (a == b).all()
    plain, stopped = regression_grads(w1, w2, w3, x, False), regression_grads(w1, w2, w3, x, True)
    assert_close(res["grad_w1"], plain[0])
    assert_close(res["grad_w1"], res["stopped"][0])
    for got, ref in zip(res["stopped"], stopped, strict=True):
        assert_close(got, ref)
    for got, ref in zip(res["plain"], plain, strict=True):
        assert_close(got, ref)
    assert np.min(np.abs(res["plain"][1])) > 0 and not np.any(res["stopped"][1])
    w = w1
    for _ in range(100):
        w = w - 0.1 * regression_grads(w, w2, w3, rng.standard_normal((100, 5)), True)[0]
    assert_close(res["w1"][-1], w[:, 0], 1e-9, 1e-10)
    assert np.max(np.abs(res["w1"][-1] - (w2 * w3)[:, 0])) < 1e-6
    assert "w2, w3 unchanged: True" in out
    (entry,) = res["audit"].entries
    assert entry.effect == "zero gradient"
    names = ("w1", "w2", "w3")
    assert_blocks(entry, dict(zip(names, plain, strict=True)),
                  dict(zip(names, stopped, strict=True)))
    assert str(res["audit"]) in out


def test_var_list_audit_blocks_the_plain_loss_gradient_by_central_differences():
    """What the stop_gradient blocks, against central differences of the loss without it."""
    mod = example("var_list")
    args = regression_point(seed=2)
    (entry,) = audit(mod["loss_stopped"], *args, wrt=("w1", "w2", "w3")).entries
    removed = {p: numeric_grad(regression_value, args, i) for i, p in enumerate(("w1", "w2",
                                                                                    "w3"))}
    written = dict(zip(("w1", "w2", "w3"), regression_grads(*args, stopped=True), strict=True))
    assert_blocks(entry, removed, written, rtol=1e-6, atol=1e-7)
    assert entry.blocked["w2"].norm > 1 and entry.blocked["w1"].norm == 0


# --- fgsm.py ---


def logistic_grads(w, b, x, y):
    """By hand: d/dz_i mean(softplus(z) - y z) = (sigmoid(z_i) - y_i) / N, z = x @ w + b."""
    dz = (sigmoid(x @ w + b) - y) / len(y)
    return x.T @ dz, float(np.sum(dz)), np.outer(dz, w)


def logistic_value(w, b, x, y):
    z = x @ w + b
    return np.mean(np.logaddexp(0, z) - y * z)


def adversarial_value(w, b, x, y, x_adv):
    """adversarial_loss with the stopped FGSM example ``x_adv`` frozen."""
    return 0.5 * logistic_value(w, b, x, y) + 0.5 * logistic_value(w, b, x_adv, y)


def fgsm_example(w, b, x, y, eps):
    return x + eps * np.sign(np.outer(sigmoid(x @ w + b) - y, w))


def adversarial_grads(w, b, x, y, eps):
    gw, gb, _ = logistic_grads(w, b, x, y)
    aw, ab, _ = logistic_grads(w, b, fgsm_example(w, b, x, y, eps), y)
    return 0.5 * (gw + aw), 0.5 * (gb + ab)


def logistic_point(seed=3, n=12):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(2), float(rng.standard_normal()), rng.standard_normal((n, 2)),
            rng.integers(2, size=n).astype(float))


def test_fgsm_references_match_central_differences():
    w, b, x, y = args = logistic_point()
    for i, g in zip((0, 1, 2), logistic_grads(*args), strict=True):
        assert_close(g, numeric_grad(logistic_value, args, i), 1e-6, 1e-8)
    frozen = [*args, fgsm_example(*args, 0.3)]
    for i, g in enumerate(adversarial_grads(*args, 0.3)):
        assert_close(g, numeric_grad(adversarial_value, frozen, i), 1e-6, 1e-8)


def test_fgsm_gradients_match_hand_derived():
    mod = example("fgsm")
    args = logistic_point()
    gw, gb, gx = logistic_grads(*args)
    ours_w, ours_b = grad(mod["loss"], wrt=("w", "b"))(*args)
    assert_close(ours_w, gw)
    assert_close(ours_b, gb)
    assert isinstance(ours_b, float)
    assert_close(grad(mod["loss"], wrt="x")(*args), gx)
    aw, ab = grad(mod["adversarial_loss"], wrt=("w", "b"))(*args, 0.3)
    rw, rb = adversarial_grads(*args, 0.3)
    assert_close(aw, rw)
    assert_close(ab, rb)


def adversarial_unstopped(w, b, x, y, eps):
    """adversarial_loss without its stop_gradient: the FGSM example moves with w and b."""
    x_adv = fgsm_example(w, b, x, y, eps)
    return 0.5 * logistic_value(w, b, x, y) + 0.5 * logistic_value(w, b, x_adv, y)


def test_fgsm_audit_the_stopped_example_blocks_nothing():
    """np.sign is piecewise constant: the gradient without the stop_gradient is the same
    (central differences of the function without it say so), and the audit finds it."""
    mod = example("fgsm")
    args = (*logistic_point(), 0.3)
    written = dict(zip("wb", adversarial_grads(*args), strict=True))
    for i, p in enumerate("wb"):
        assert_close(numeric_grad(adversarial_unstopped, args, i), written[p], 1e-6, 1e-8)
    report = audit(mod["adversarial_loss"], *args, wrt=("w", "b"))
    (entry,) = report.entries
    assert entry.effect == "blocks nothing" and not entry.likely_bug
    assert entry.depends_on == {"w": ("w", "z"), "b": ("z",)}  # np.outer(..., w) reads w
    assert {p: (b.norm, b.share) for p, b in entry.blocked.items()} == {"w": (0, 0),
                                                                          "b": (0, 0)}
    assert report.gradient_norm == pytest.approx({p: norm(g) for p, g in written.items()})


def test_fgsm_audit_a_smooth_perturbation_would_block_its_gradient():
    """What main() says after "blocks nothing": with np.tanh for np.sign, the perturbation
    moves with w, and the stop_gradient blocks that (central differences without it)."""
    smooth = load("""
        import numpy as np
        from symdiff import stop_gradient

        def smooth_loss(w, b, x, y, eps):
            z = x @ w + b
            x_adv = stop_gradient(x + eps * np.tanh(np.outer(1 / (1 + np.exp(-z)) - y, w)))
            z_adv = x_adv @ w + b
            return np.mean(np.logaddexp(0, z_adv) - y * z_adv)
        """, "smooth_loss")

    def unstopped(w, b, x, y, eps):
        return logistic_value(w, b, x + eps * np.tanh(np.outer(sigmoid(x @ w + b) - y, w)), y)

    args = (*logistic_point(), 0.3)
    x_adv = args[2] + 0.3 * np.tanh(np.outer(sigmoid(args[2] @ args[0] + args[1]) - args[3],
                                             args[0]))
    written = dict(zip("wb", logistic_grads(args[0], args[1], x_adv, args[3])[:2], strict=True))
    removed = {p: numeric_grad(unstopped, args, i) for i, p in enumerate("wb")}
    (entry,) = audit(smooth, *args, wrt=("w", "b")).entries
    assert entry.effect == "blocks"
    assert_blocks(entry, removed, written, rtol=1e-6, atol=1e-7)
    assert entry.blocked["w"].norm > 1e-3


def test_fgsm_main_flips_predictions_and_raises_the_loss(capsys):
    mod, res, out = run_main("fgsm", capsys)
    x, y, xt, yt, eps = (res[k] for k in ("x_train", "y_train", "x_test", "y_test", "eps"))
    w, b = mod["train"](lambda *a: logistic_grads(*a)[:2], x, y)
    assert_close(res["weights"][0], w)
    assert_close(res["weights"][1], b)
    x_adv = xt + eps * np.sign(logistic_grads(w, b, xt, yt)[2])
    assert_close(res["x_adv"], x_adv)
    before, after = logistic_value(w, b, xt, yt), logistic_value(w, b, x_adv, yt)
    assert_close(res["loss"], (before, after))
    assert after > before + 0.2
    flipped = int(np.sum((xt @ w + b > 0) != (x_adv @ w + b > 0)))
    assert res["flipped"] == flipped > 20
    assert f"predictions flipped: {flipped}" in out
    robust = mod["train"](adversarial_grads, x, y, extra=(eps,))
    assert_close(res["robust"][0], robust[0])
    assert_close(res["robust"][1], robust[1])
    x_adv_robust = xt + eps * np.sign(logistic_grads(*robust, xt, yt)[2])

    def accuracy(w, b, x):
        return np.mean((x @ w + b > 0) == (yt == 1))

    assert accuracy(*robust, x_adv_robust) > accuracy(w, b, x_adv)
    report = res["audit"]
    assert [e.effect for e in report.entries] == ["blocks nothing"]
    assert report.gradient_norm["w"] == pytest.approx(
        norm(adversarial_grads(w, b, x, y, eps)[0]), rel=1e-9)
    assert "stop_gradient blocks nothing here: np.sign's derivative is 0" in out


# --- em_gmm.py ---


def gmm_log_joint(mu, log_var, logit, x):
    """log(pi_k N(x_n | mu_k, var_k)), shape (N, K), for x of shape (N, 1)."""
    log_pi = logit - np.log(np.sum(np.exp(logit)))
    var = np.exp(log_var)
    return log_pi - 0.5 * np.log(2 * np.pi * var) - (x - mu) ** 2 / (2 * var)


def gmm_responsibilities(*params):
    lj = gmm_log_joint(*params)
    p = np.exp(lj - lj.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def gmm_objective_frozen(mu, log_var, logit, x, r):
    """m_step_objective with the stopped responsibilities ``r`` frozen."""
    return np.mean(np.sum(r * gmm_log_joint(mu, log_var, logit, x), axis=1))


def gmm_log_likelihood(mu, log_var, logit, x):
    lj = gmm_log_joint(mu, log_var, logit, x)
    top = lj.max(axis=1, keepdims=True)
    return np.mean(np.log(np.sum(np.exp(lj - top), axis=1)) + top[:, 0])


def gmm_grads(mu, log_var, logit, x):
    """By hand, r fixed: r-weighted Gaussian score terms, and mean(r) - pi for the logits."""
    r = gmm_responsibilities(mu, log_var, logit, x)
    var = np.exp(log_var)
    n = len(x)
    d_mu = np.sum(r * (x - mu), axis=0) / var / n
    d_log_var = np.sum(r * ((x - mu) ** 2 / (2 * var) - 0.5), axis=0) / n
    d_logit = np.mean(r, axis=0) - np.exp(logit) / np.sum(np.exp(logit))
    return d_mu, d_log_var, d_logit


def gmm_point(seed=4):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(-2, 1, 15), rng.normal(1.5, 0.7, 10)])[:, None]
    return [rng.normal(0, 1, 3), rng.normal(0, 0.3, 3), rng.normal(0, 0.5, 3), x]


def test_em_references_match_central_differences_and_the_likelihood():
    args = gmm_point()
    r = gmm_responsibilities(*args)
    for i, g in enumerate(gmm_grads(*args)):
        assert_close(g, numeric_grad(gmm_objective_frozen, [*args, r], i), 1e-6, 1e-8)
        # Fisher's identity: with r stopped, the gradient is the log-likelihood's.
        assert_close(g, numeric_grad(gmm_log_likelihood, args, i), 1e-6, 1e-8)


def test_em_gradient_matches_hand_derived():
    mod = example("em_gmm")
    args = gmm_point()
    ours = grad(mod["m_step_objective"], wrt=("mu", "log_var", "logit"))(*args)
    for g, ref in zip(ours, gmm_grads(*args), strict=True):
        assert g.shape == (3,)
        assert_close(g, ref)
    assert_close(mod["m_step_objective"](*args),
                 gmm_objective_frozen(*args, gmm_responsibilities(*args)))


def gmm_objective_unstopped(mu, log_var, logit, x):
    """m_step_objective without its stop_gradient: the responsibilities move too."""
    return gmm_objective_frozen(mu, log_var, logit, x, gmm_responsibilities(mu, log_var, logit, x))


def test_em_audit_blocks_the_gradient_through_the_responsibilities():
    """What the E-step's stop_gradient blocks, against central differences of the objective
    without it (which is not the likelihood's gradient: that is the one left)."""
    mod = example("em_gmm")
    args = gmm_point()
    names = ("mu", "log_var", "logit")
    (entry,) = audit(mod["m_step_objective"], *args, wrt=names).entries
    assert entry.effect == "blocks" and not entry.likely_bug
    assert entry.depends_on == {"mu": ("log_joint",), "log_var": ("log_joint",),
                                "logit": ("log_pi", "log_joint")}
    removed = {p: numeric_grad(gmm_objective_unstopped, args, i) for i, p in enumerate(names)}
    written = dict(zip(names, gmm_grads(*args), strict=True))
    assert_blocks(entry, removed, written, rtol=1e-6, atol=1e-7)
    assert all(b.norm > 1e-3 for b in entry.blocked.values())


def test_em_main_gradient_ascent_reaches_the_closed_form_m_step(capsys):
    _, res, out = run_main("em_gmm", capsys)
    x = res["x"]
    params = res["start"]
    for _ in range(500):
        params = tuple(p + g for p, g in zip(params, gmm_grads(*params, x), strict=True))
    for got, ref in zip(res["ascent"], params, strict=True):
        assert_close(got, ref, 1e-8, 1e-10)

    def readable(mu, log_var, logit):
        return mu, np.exp(log_var), np.exp(logit) / np.sum(np.exp(logit))

    # The closed-form M-step, written afresh: weighted means, variances, fractions.
    r = gmm_responsibilities(*params, x)
    nk = r.sum(axis=0)
    mu = (r * x).sum(axis=0) / nk
    m_step = (mu, (r * (x - mu) ** 2).sum(axis=0) / nk, nk / len(x))
    for got, ref in zip(readable(*params), m_step, strict=True):
        assert_close(got, ref, 0, 1e-7)
    for got, ref in zip(readable(*res["m_step"]), m_step, strict=True):
        assert_close(got, ref)
    for got, ref in zip(readable(*res["em"]), m_step, strict=True):
        assert_close(got, ref, 0, 1e-7)
    assert np.all(np.abs(np.sort(mu) - [-4.0, 0.0, 3.5]) < 0.3)
    assert gmm_log_likelihood(*params, x) > gmm_log_likelihood(*res["start"], x) + 0.5
    gap = float(out.rsplit("largest difference between the ascent and its M-step:", 1)[1])
    assert gap < 1e-7
    (entry,) = res["audit"].entries
    assert entry.effect == "blocks"
    assert res["audit"].gradient_norm == pytest.approx(
        dict(zip(("mu", "log_var", "logit"), map(norm, gmm_grads(*res["start"], x)),
                 strict=True)), rel=1e-9)
    assert out.index(str(res["audit"])) < out.index("gradient ascent on the M-step objective")


# --- rbm_cd.py ---


def rbm_gibbs_reconstruction(W, b, c, v, u_h):
    h = (u_h < sigmoid(v @ W + c)).astype(float)
    return sigmoid(h @ W.T + b)


def rbm_grads(W, b, c, v, u_h):
    """By hand: d F(v) / dW = -v.T sigmoid(v W + c) etc.; the CD-1 gradient is data - model."""
    vm = rbm_gibbs_reconstruction(W, b, c, v, u_h)
    hd, hm = sigmoid(v @ W + c), sigmoid(vm @ W + c)
    n = len(v)
    return (-(v.T @ hd - vm.T @ hm) / n, -(v.sum(0) - vm.sum(0)) / n,
            -(hd.sum(0) - hm.sum(0)) / n)


def rbm_objective_frozen(W, b, c, v, v_model):
    """cd1_objective with the stopped reconstruction ``v_model`` frozen."""
    def free(u):
        return -(u @ b) - np.sum(np.log1p(np.exp(u @ W + c)), axis=1)

    return np.mean(free(v)) - np.mean(free(v_model))


def rbm_point(seed=5):
    rng = np.random.default_rng(seed)
    return (rng.normal(0, 0.5, (6, 4)), rng.normal(0, 0.5, 6), rng.normal(0, 0.5, 4),
            (rng.random((9, 6)) < 0.5).astype(float), rng.random((9, 4)))


def test_rbm_references_match_central_differences():
    args = rbm_point()
    frozen = [*args[:4], rbm_gibbs_reconstruction(*args)]
    for i, g in enumerate(rbm_grads(*args)):
        assert_close(g, numeric_grad(rbm_objective_frozen, frozen, i), 1e-6, 1e-8)


def test_rbm_gradient_is_the_cd1_rule():
    mod = example("rbm_cd")
    args = rbm_point()
    ours = grad(mod["cd1_objective"], wrt=("W", "b", "c"))(*args)
    for g, ref in zip(ours, rbm_grads(*args), strict=True):
        assert_close(g, ref)
    frozen = [*args[:4], rbm_gibbs_reconstruction(*args)]
    assert_close(mod["cd1_objective"](*args), rbm_objective_frozen(*frozen))


def rbm_objective_unstopped(W, b, c, v, u_h):
    """cd1_objective with the reconstruction's stop_gradient removed (the sampled hidden
    units stay as they are: piecewise constant, central differences do not see them move)."""
    return rbm_objective_frozen(W, b, c, v, rbm_gibbs_reconstruction(W, b, c, v, u_h))


def test_rbm_audit_the_samples_block_nothing_the_reconstruction_blocks_its_gradient():
    mod = example("rbm_cd")
    args = rbm_point()
    h_data, v_model = audit(mod["cd1_objective"], *args, wrt=("W", "b", "c")).entries
    assert h_data.site.text.startswith("np.where(") and h_data.effect == "blocks nothing"
    assert all(b.norm == 0 for b in h_data.blocked.values())
    assert list(h_data.depends_on) == ["W", "c"] and list(v_model.depends_on) == ["W", "b"]
    assert v_model.effect == "blocks" and not v_model.likely_bug
    removed = {p: numeric_grad(rbm_objective_unstopped, args, i) for i, p in enumerate("Wbc")}
    written = dict(zip("Wbc", rbm_grads(*args), strict=True))
    assert_blocks(v_model, removed, written, rtol=1e-6, atol=1e-7)
    assert v_model.blocked["c"].norm == 0 and v_model.blocked["W"].norm > 1e-3


def test_rbm_main_trains_with_the_cd1_rule(capsys):
    _, res, out = run_main("rbm_cd", capsys)
    rng = np.random.default_rng(0)
    patterns = np.array([[1, 1, 1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 1, 0, 0.0]])
    data = patterns[rng.integers(2, size=100)]
    data = np.abs(data - (rng.random(data.shape) < 0.05))
    assert (res["data"] == data).all()
    W, b, c = 0.1 * rng.standard_normal((8, 3)), np.zeros(8), np.zeros(3)
    u_h = rng.random((100, 3))
    for got, ref in zip(res["start_grads"], rbm_grads(W, b, c, data, u_h), strict=True):
        assert_close(got, ref)
    for _ in range(300):
        gW, gb, gc = rbm_grads(W, b, c, data, rng.random((100, 3)))
        W, b, c = W - 0.1 * gW, b - 0.1 * gb, c - 0.1 * gc
    for got, ref in zip(res["params"], (W, b, c), strict=True):
        assert_close(got, ref, 1e-7, 1e-9)
    before, after = res["free_energy"]
    assert np.max(after[:2]) < np.min(after[2:]) - 2      # the patterns became probable
    assert np.all(np.abs(res["reconstruction"] - patterns) < 0.25)
    assert out.count("largest |gradient + update| =") == 3
    report = res["audit"]
    assert [e.effect for e in report.entries] == ["blocks nothing", "blocks"]
    assert report.gradient_norm == pytest.approx(  # at the start, where start_grads are
        dict(zip("Wbc", map(norm, res["start_grads"]), strict=True)), rel=1e-12)
    assert "v_model's blocks\nthe gradient through the Gibbs step" in out


# --- straight_through.py ---


def ste_value(w, x, y, correction):
    """loss with the stopped round(w / step) * step - w frozen."""
    return np.mean(np.square(x @ (w + correction) - y))


def ste_grad(w, x, y, step=0.25):
    """By hand: the unrounded model's gradient 2/N x.T (x q - y), at q = the rounded w."""
    q = np.round(w / step) * step
    return 2 * x.T @ (x @ q - y) / len(y)


def ste_point(seed=6):
    rng = np.random.default_rng(seed)
    return rng.normal(0, 1, 3), rng.standard_normal((15, 3)), rng.standard_normal(15)


def test_straight_through_reference_matches_central_differences():
    w, x, y = ste_point()
    correction = np.round(w / 0.25) * 0.25 - w
    assert_close(ste_grad(w, x, y), numeric_grad(ste_value, [w, x, y, correction], 0),
                 1e-6, 1e-8)


def test_straight_through_gradient_matches_hand_derived():
    mod = example("straight_through")
    w, x, y = ste_point()
    assert_close(grad(mod["loss"], wrt="w")(w, x, y), ste_grad(w, x, y))
    assert not np.any(grad(mod["loss_rounded"], wrt="w")(w, x, y))
    assert_close(mod["loss"](w, x, y), mod["loss_rounded"](w, x, y))


def test_straight_through_audit_blocks_the_opposite_of_the_gradient():
    """Without the stop_gradient, the loss is rounding's: a zero gradient (central
    differences of that copy say so), so the site blocks minus the straight-through one."""
    mod = example("straight_through")
    w, x, y = ste_point()

    def unstopped(w, x, y):
        return np.mean(np.square(x @ (w + (np.round(w / 0.25) * 0.25 - w)) - y))

    removed = numeric_grad(unstopped, [w, x, y], 0)
    assert not np.any(removed)
    (entry,) = audit(mod["loss"], w, x, y, wrt="w").entries
    assert entry.effect == "blocks" and entry.depends_on == {"w": ("w",)}
    assert_blocks(entry, {"w": removed}, {"w": ste_grad(w, x, y)})
    assert entry.blocked["w"].share == 0.5
    assert entry.verdict == "blocks 50% of the gradient of w"


def test_straight_through_main(capsys):
    _, res, out = run_main("straight_through", capsys)
    x, y, w = res["x"], res["y"], res["w0"]
    assert (res["rounding only"] == w).all()               # zero gradient: never moves
    for _ in range(100):
        w = w - 0.1 * ste_grad(w, x, y)
    assert_close(res["straight-through"], w, 1e-9, 1e-12)
    # The best weights on the grid, by brute force over a wide box around the true ones.
    grid = np.arange(-8, 9) * 0.25
    candidates = np.stack(np.meshgrid(grid, grid, grid), axis=-1).reshape(-1, 3)
    losses = np.mean(np.square(candidates @ x.T - y), axis=1)
    best = candidates[np.argmin(losses)]
    assert_close(res["grid best"][1], best)
    assert_close(res["grid best"][0], np.min(losses))
    track = res["straight-through track"]
    last = [q for _, q in track[50:]]
    assert max(set(last), key=last.count) == tuple(best)  # mostly at the best grid point
    assert min(track)[0] == pytest.approx(np.min(losses), rel=1e-12)
    assert "gradient, rounding only:    [0. 0. 0.]" in out
    (entry,) = res["audit"].entries
    assert entry.blocked["w"].norm == pytest.approx(norm(ste_grad(res["w0"], x, y)), rel=1e-12)
    assert "the stopped correction blocks the negative" in out and str(res["audit"]) in out


# --- td_target.py ---


def td_grads(W, s, a, r, s_next, done, gamma, stopped=True):
    """By hand: d/dW of 0.5 mean(delta**2), delta = target - Q(s, a), Q(s) = s @ W."""
    q_next = s_next @ W
    delta = r + gamma * (1 - done) * q_next.max(axis=1) - np.sum((s @ W) * a, axis=1)
    g = -s.T @ (delta[:, None] * a) / len(r)
    if not stopped:  # the target's own derivative, at its (unique) argmax
        best = np.eye(W.shape[1])[np.argmax(q_next, axis=1)]
        g = g + gamma * s_next.T @ ((delta * (1 - done))[:, None] * best) / len(r)
    return g


def td_value(W, s, a, r, s_next, done, gamma, frozen_max=None):
    q_next = (s_next @ W).max(axis=1) if frozen_max is None else frozen_max
    return 0.5 * np.mean(np.square(r + gamma * (1 - done) * q_next - np.sum((s @ W) * a, 1)))


def td_point(seed=7, n=8):
    rng = np.random.default_rng(seed)
    eye = np.eye(4)
    return [rng.standard_normal((4, 3)), rng.standard_normal((n, 4)),
            eye[rng.integers(3, size=n)][:, :3], rng.standard_normal(n),
            rng.standard_normal((n, 4)), (rng.random(n) < 0.25).astype(float), 0.9]


def test_td_references_match_central_differences():
    args = td_point()
    frozen = (args[4] @ args[0]).max(axis=1)
    assert_close(td_grads(*args), numeric_grad(td_value, [*args, frozen], 0), 1e-6, 1e-8)
    assert_close(td_grads(*args, stopped=False), numeric_grad(td_value, args, 0), 1e-6, 1e-8)


def test_td_gradient_flows_only_through_q_of_s():
    mod = example("td_target")
    args = td_point()
    assert_close(grad(mod["td_loss"], wrt="W")(*args), td_grads(*args))
    assert_close(grad(mod["residual_loss"], wrt="W")(*args), td_grads(*args, stopped=False))


def test_td_audit_blocks_the_residual_minus_the_semi_gradient():
    """The target's stop_gradient blocks the residual gradient minus the semi-gradient: by
    hand, and by central differences of the loss with the target not stopped."""
    mod = example("td_target")
    args = td_point()
    (entry,) = audit(mod["td_loss"], *args, wrt="W").entries
    assert entry.effect == "blocks" and entry.site.text == "np.max(s_next @ W, axis=1)"
    assert entry.depends_on == {"W": ("W",)}
    assert_blocks(entry, {"W": td_grads(*args, stopped=False)}, {"W": td_grads(*args)})
    assert_blocks(entry, {"W": numeric_grad(td_value, args, 0)}, {"W": td_grads(*args)},
                  1e-6, 1e-7)


def test_td_main_converges_to_q_star(capsys):
    mod, res, out = run_main("td_target", capsys)
    s, a, r, s_next, done = mod["chain"]()
    gamma = 0.9
    one = res["one"]
    assert (one[0] == np.eye(5)[2]).all() and (one[3] == np.eye(5)[3]).all()
    semi = td_grads(res["W0"], *one, gamma)
    assert np.count_nonzero(semi) == 1 and semi[2, 1] != 0
    residual = td_grads(res["W0"], *one, gamma, stopped=False)
    assert np.count_nonzero(residual) == 2 and np.count_nonzero(residual[3]) == 1
    W = res["W0"]
    for _ in range(300):
        W = W - 5.0 * td_grads(W, s, a, r, s_next, done, gamma)
    assert_close(res["W"], W, 1e-9, 1e-12)
    q_star = np.array([[gamma ** (5 - max(i - 1, 0)), gamma ** (4 - i)] for i in range(5)])
    assert_close(res["q_star"], q_star)
    assert np.max(np.abs(res["W"] - q_star)) < 1e-6
    assert "largest difference:" in out
    # One transition, not terminal: the semi-gradient is -delta at Q(s, a), the residual
    # part gamma * delta at Q(s', argmax); the stop_gradient blocks gamma / (1 + gamma).
    (entry,) = res["audit"].entries
    assert entry.blocked["W"].norm == pytest.approx(norm(residual - semi), rel=1e-12)
    assert entry.blocked["W"].share == pytest.approx(gamma / (1 + gamma), rel=1e-12)
    assert entry.verdict == "blocks 47% of the gradient of W"
    assert "blocks the residual part of the gradient" in out and str(res["audit"]) in out


# --- cli_demo.py (read by the command line, never run) ---


def test_cli_demo_audit_from_the_command_line(capsys):
    from symdiff.cli import main

    status = main(["audit", str(EXAMPLES / "cli_demo.py"), "--format", "json"])
    reports = {r["function"]: r for r in json.loads(capsys.readouterr().out)}
    assert status == 0
    assert list(reports) == ["rosenbrock", "gaussian", "straight_through", "softmax_ce"]
    assert reports["rosenbrock"]["sites"] == reports["gaussian"]["sites"] == []
    (ste,) = reports["straight_through"]["sites"]
    assert (ste["argument"], ste["effect"]) == ("np.round(w) - w", "blocks")
    # q * q, q = round(w) in value, dq/dw = 1 as written and 0 without the stop_gradient
    assert ste["blocked"]["w"]["share"] == 0.5
    assert ste["blocked"]["w"]["norm"] == pytest.approx(
        reports["straight_through"]["gradient_norm"]["w"], rel=1e-12)
    (shift,) = reports["softmax_ce"]["sites"]
    assert (shift["effect"], shift["blocked"]["x"]["norm"]) == ("blocks nothing", 0)


def test_debugging_shows_located_errors_and_the_generated_line(capsys):
    mod, result, out = run_main("debugging", capsys)
    path = str(EXAMPLES / "debugging.py")
    for col, name in ((19, "np.unwrap"), (42, "np.interp"), (71, "np.convolve")):
        assert f"{path}:35:{col}: {name} is not supported" in out
    # The traceback reads the generated file; the note names the user's line.
    assert "    z = X @ w  # line 28\n" in out
    assert f"{path}:28:5: raised by this line of logistic_loss's own code" in out
    X = np.random.default_rng(0).normal(size=(5, 3))
    y = np.array([0.0, 1.0, 1.0, 0.0, 1.0])
    assert_close(result, X.T @ (sigmoid(X @ np.zeros(3)) - y) / 5)


def test_debugging_pdb_steps_through_the_generated_gradient(tmp_path):
    env = {**os.environ, "SYMDIFF_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, str(EXAMPLES / "debugging.py"), "--pdb"],
                         input="n\nn\np z.shape\nc\n", capture_output=True, text=True,
                         env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "grad_logistic_loss-" in run.stdout and "z = X @ w  # line 28" in run.stdout
    assert "(5,)" in run.stdout  # p z.shape, after the first line ran


def classifier_hand(params, X, Y, l2):
    """The classifier's loss gradient, derived by hand (softmax cross-entropy through tanh)."""
    H = np.tanh(X @ params["W1"] + params["b1"])
    Z = H @ params["W2"] + params["b2"]
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dZ = (P - Y) / len(X)
    dH = dZ @ params["W2"].T * (1 - H ** 2)
    return {"W1": X.T @ dH + 2 * l2 * params["W1"], "b1": dH.sum(axis=0),
            "W2": H.T @ dZ + 2 * l2 * params["W2"], "b2": dZ.sum(axis=0)}


def test_classifier_gradient_is_a_dict_of_the_hand_derived_gradients():
    mod = example("classifier")
    rng = np.random.default_rng(3)
    X, Y = mod["dataset"](rng, 30)
    params = mod["initial"](rng)
    model = mod["Classifier"](l2=0.01)
    (value, accuracy), g = value_and_grad(model.loss, has_aux=True)(params, X, Y)
    assert list(g) == list(params)
    hand = classifier_hand(params, X, Y, 0.01)
    for k in params:
        assert_close(g[k], hand[k], 1e-9, 1e-12)
        # and the hand derivation against central differences
        numeric = numeric_grad(lambda w, k=k: model.loss({**params, k: w}, X, Y)[0],
                               [params[k]], 0)
        assert_close(hand[k], numeric, 1e-6, 1e-8)
    assert value == model.loss(params, X, Y)[0]
    assert accuracy == model.loss(params, X, Y)[1]


def test_classifier_audit_the_shift_blocks_nothing():
    mod = example("classifier")
    rng = np.random.default_rng(3)
    X, Y = mod["dataset"](rng, 30)
    report = audit(mod["Classifier"](l2=0.01).loss, mod["initial"](rng), X, Y, has_aux=True)
    assert [e.effect for e in report.entries] == ["blocks nothing"]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_classifier_trains_in_the_dtype_it_is_given(capsys, dtype):
    argv = ["--steps", "60"] + (["--float32"] if dtype == "float32" else [])
    mod, (params, history), out = run_main("classifier", capsys, argv)
    assert history[-1][0] < history[0][0] and history[-1][1] > history[0][1]
    assert {str(v.dtype) for v in params.values()} == {dtype}
    assert f"dtype {dtype}" in out
    # the same steps, driven by the hand-derived gradient
    rng = np.random.default_rng(0)
    X, Y = mod["dataset"](rng, 300, np.dtype(dtype))
    p = mod["initial"](rng, dtype=np.dtype(dtype))
    for _ in range(60):
        g = classifier_hand(p, X, Y, 1e-3)
        p = {k: p[k] - 0.5 * g[k] for k in p}
    tol = 1e-4 if dtype == "float32" else 1e-9
    for k in p:
        assert_close(params[k], p[k], tol, tol)


# --- gp_fit.py ---


def gp_nll_jax(log_params, X, y):
    """The same negative log marginal likelihood in JAX (the reference gradient)."""
    jnp = pytest.importorskip("jax.numpy")
    jsl = pytest.importorskip("jax.scipy.linalg")
    sq = jnp.sum((X[:, None, :] - X[None, :, :]) ** 2, axis=-1)
    K = jnp.exp(2 * log_params[0]) * jnp.exp(-0.5 * sq / jnp.exp(log_params[1]) ** 2) + \
        (jnp.exp(2 * log_params[2]) + 1e-8) * jnp.eye(len(X))
    L = jnp.linalg.cholesky(K)
    alpha = jsl.solve_triangular(L.T, jsl.solve_triangular(L, y, lower=True), lower=False)
    return 0.5 * y @ alpha + jnp.sum(jnp.log(jnp.diag(L))) + 0.5 * len(y) * jnp.log(2 * jnp.pi)


def test_gp_gradient_matches_jax_and_central_differences():
    pytest.importorskip("scipy")
    mod = example("gp_fit")
    X, y = mod["dataset"](np.random.default_rng(3), 15)
    for log_params in (np.zeros(3), np.array([0.4, -0.7, -2.0])):
        ours = grad(mod["nll"])(log_params, X, y)
        assert_close(ours, numeric_grad(mod["nll"], [log_params, X, y], 0), 1e-6, 1e-8)
        jax = pytest.importorskip("jax")
        jax.config.update("jax_enable_x64", True)
        assert_close(ours, jax.grad(gp_nll_jax)(log_params, X, y), 1e-9, 1e-11)


def test_gp_main_fits_the_hyperparameters(capsys):
    pytest.importorskip("scipy")
    mod, result, out = run_main("gp_fit", capsys, ["--points", "30"])
    assert result.success
    lines = out.splitlines()
    assert lines[0].startswith("start: nll ") and lines[1].startswith("step   1: nll ")
    assert lines[-2].startswith(f"fitted in {result.nit} steps: nll {result.fun:.4f};")
    # at the optimum the gradient vanishes, and the noise found is near the data's 0.1
    assert np.max(np.abs(grad(mod["nll"])(result.x, *mod["dataset"](
        np.random.default_rng(0), 30)))) < 1e-3
    assert 0.05 < np.exp(result.x[2]) < 0.2
    start = float(lines[0].split()[-1])
    assert result.fun < start - 10


# --- newton_laplace.py ---


def test_newton_laplace_hessian_is_the_logistic_formula():
    mod = example("newton_laplace")
    X, y = mod["dataset"](np.random.default_rng(5), 40, 3)
    w = np.array([0.3, -0.2, 0.5])
    p = sigmoid(X @ w)
    hand = X.T @ ((p * (1 - p))[:, None] * X) + 2.0 * np.eye(3)
    assert_close(mod["hessian"](mod["neg_log_posterior"])(w, X, y, 2.0), hand, 1e-10, 1e-12)


def test_newton_laplace_main_converges_quadratically(capsys):
    mod, (w, sd), out = run_main("newton_laplace", capsys, ["--features", "3", "--points", "80"])
    norms = [float(line.split()[-1]) for line in out.splitlines() if line.startswith("step")]
    assert norms[-1] < 1e-10 and all(b < a for a, b in zip(norms, norms[1:], strict=False))
    assert np.all(sd > 0) and "differs from the direct solve by" in out
    assert float(out.split("direct solve by")[1]) < 1e-10


# --- newton_sparse.py ---


def test_newton_sparse_hessian_is_the_tridiagonal_formula(monkeypatch):
    from symdiff import sparsity

    mod = example("newton_sparse")
    checks = []
    rebuilt = sparsity.Compression.rebuilt

    def recorded(self, compressed):
        out = rebuilt(self, compressed)
        checks.append((out is not None, len(self.seeds)))
        return out

    monkeypatch.setattr(sparsity.Compression, "rebuilt", recorded)
    rng = np.random.default_rng(6)
    H, h, load = mod["hessian"](mod["energy"]), 1.0 / 31, rng.normal(size=30)
    for _ in range(3):  # (the first call runs every column; the next two, 3 and 2 checks)
        u = rng.normal(size=30)
        assert_close(H(u, load, h), mod["hessian_by_hand"](u, h), 1e-12, 1e-9)
    assert checks == [(True, 5), (True, 5)]


def test_newton_sparse_main_converges_quadratically(capsys):
    mod, (u, gap), out = run_main("newton_sparse", capsys, ["--points", "60"])
    norms = [float(line.split()[-1]) for line in out.splitlines() if line.startswith("step")]
    assert norms[-1] < 1e-9 and norms[-1] < norms[-2] ** 1.5
    assert gap < 1e-9 and u.max() > 0
    assert "from compressed columns" in out.splitlines()[-1]


# --- dask_logistic.py ---


def test_dask_logistic_gradient_matches_hand_derived():
    pytest.importorskip("dask")
    mod = example("dask_logistic")
    X, y, _ = mod["dataset"](300, 100, seed=3)
    Xn, yn = X.compute(), y.compute()
    w = np.random.default_rng(4).normal(size=Xn.shape[1])
    value, g = value_and_grad(mod["nll"])(w, X, y, 0.01)
    hand = Xn.T @ (sigmoid(Xn @ w) - yn) / len(yn) + 0.02 * w
    assert type(g) is np.ndarray and type(value) is np.float64
    assert_close(g, hand, 1e-12, 1e-15)
    assert_close(value, mod["nll"](w, Xn, yn, 0.01), 1e-12, 1e-15)


def test_dask_logistic_main_fits_as_numpy_data_would(capsys):
    pytest.importorskip("dask")
    mod, (result, losses, accuracy), out = run_main("dask_logistic", capsys,
                                                    ["--rows", "4000", "--chunk", "1000"])
    lines = [line for line in out.splitlines() if line.startswith("iteration")]
    assert len(lines) == len(losses) == result.nit and result.success
    assert all(b <= a for a, b in zip(losses, losses[1:], strict=False))
    assert accuracy > 0.8 and "accuracy" in out.splitlines()[-1]
    # the same L-BFGS-B run on the data computed whole: the same iterates
    X, y, _ = mod["dataset"](4000, 1000)
    numpy_result, _ = mod["fit"](X.compute(), y.compute(), say=lambda line: None)
    assert numpy_result.nit == result.nit
    assert_close(result.x, numpy_result.x, 1e-8, 1e-10)
