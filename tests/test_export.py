"""``symdiff --output``: the exported module compiles and matches grad, also in a process
without SymPy or symdiff."""

from __future__ import annotations

import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest
from gradcheck import draw, exported, live, load, run, run_clean, unique, write

from symdiff import SymdiffError, grad
from symdiff.cli import main

X3 = np.array([0.5, -1.0, 2.0])


_X4 = np.array([1.0, 2.0, 3.0, 4.0])

# --- the exported module behaves as grad -------------------------------------------------

EXPORTED = '''
import numpy as np
from symdiff import stop_gradient as sg

K = np.array([1, 2, 3], dtype=np.uint8)

def loss(x, t):
    z = x - sg(np.max(x))
    return np.log(np.sum(np.exp(z))) - np.sum(t * z) + np.sum(x * K * K)

def guarded(x, c):
    return np.sum(x * x) + np.sum(x * 0.0 + 1.0 / c)

def take(x, i):
    return np.sum(x[i] ** 2)
'''


def _export(tmp_path, capsys):
    src = tmp_path / "exp5.py"
    src.write_text(EXPORTED)
    out = tmp_path / "exp5_grads.py"
    status = main([str(src), "--wrt", "x", "-o", str(out)])
    capsys.readouterr()
    assert status == 0
    namespace = {"__name__": "exp5_grads"}
    exec(compile(out.read_text(), str(out), "exec"), namespace)
    module = load(EXPORTED)
    return namespace, module


def test_the_exported_module_matches_grad(tmp_path, capsys):
    ns, m = _export(tmp_path, capsys)
    for t in [np.array([0.0, 1.0, 0.0]), [0.0, 1.0, 0.0], np.array([0, 1, 0]), 1.0]:
        np.testing.assert_allclose(ns["grad_loss"](X3, t), grad(m.loss)(X3, t), rtol=1e-12)
    np.testing.assert_allclose(ns["grad_guarded"](X3, 2.0), grad(m.guarded)(X3, 2.0))
    for c in [0.0, 0]:
        with pytest.raises(ZeroDivisionError):
            ns["grad_guarded"](X3, c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(ns["grad_guarded"](X3, np.float64(0.0)), 2 * X3)


# A bug at 158d6a1 (fixed by e576f9d): the export had the same 'i = _as_float(i)' line.
def test_the_exported_module_keeps_an_index_list(tmp_path, capsys):
    ns, _ = _export(tmp_path, capsys)
    np.testing.assert_allclose(ns["grad_take"](_X4, [0, 2]), [2.0, 0.0, 6.0, 0.0])


ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


# --- --output ---


EXAMPLE_SHAPES = {
    ("cli_demo", "rosenbrock"): [(), ()],
    ("cli_demo", "gaussian"): [(), (), ()],
    ("cli_demo", "straight_through"): [()],
    ("cli_demo", "softmax_ce"): [(3,)],
    ("control_flow", "huber"): [(), ()],
    ("control_flow", "newton_sqrt"): [()],
    ("control_flow", "robust_loss"): [(2,), (4, 2), (4,)],
    ("stable_softmax", "naive"): [(3,), (3,)],
    ("stable_softmax", "stable"): [(3,), (3,)],
    ("em_gmm", "m_step_objective"): [(3,), (3,), (3,), (6, 1)],
    ("fgsm", "loss"): [(2,), (), (5, 2), (5,)],
    ("fgsm", "adversarial_loss"): [(2,), (), (5, 2), (5,), ()],
    ("fgsm", "accuracy"): [(2,), (), (5, 2), (5,)],
    ("rbm_cd", "cd1_objective"): [(3, 2), (3,), (2,), (4, 3), (4, 2)],
    ("rbm_cd", "sigmoid"): [()],
    ("regression_stop_gradient", "loss"): [(3,), (3,), (3,), (4, 3)],
    ("straight_through", "loss"): [(3,), (4, 3), (4,)],
    ("straight_through", "loss_rounded"): [(3,), (4, 3), (4,)],
    ("td_target", "td_loss"): [(3, 2), (4, 3), (4, 2), (4,), (4, 3), (4,), ()],
    ("td_target", "residual_loss"): [(3, 2), (4, 3), (4, 2), (4,), (4, 3), (4,), ()],
    ("var_list", "loss"): [(3,), (3,), (3,), (4, 3)],
    ("var_list", "loss_stopped"): [(3,), (3,), (3,), (4, 3)],
}


def test_every_example_exports_a_module_that_matches_grad_without_sympy(tmp_path, capsys):
    rng = np.random.default_rng(11)
    jobs, expected, modules = [], [], {}
    for example in sorted({e for e, _ in EXAMPLE_SHAPES}):
        out_path = tmp_path / f"grads_{example}.py"
        run(capsys, EXAMPLES / f"{example}.py", "-o", out_path)  # main() etc. fail: fine
        text = out_path.read_text()
        assert "import symdiff" not in text and "sympy" not in text
        modules[example] = live(str(EXAMPLES / f"{example}.py"))
    for (example, name), shapes in EXAMPLE_SHAPES.items():
        args = [draw(s, rng) for s in shapes]
        jobs.append((str(tmp_path / f"grads_{example}.py"), name, args, {}))
        fn = getattr(modules[example], name)
        fn = getattr(fn, "fun", fn)
        params = tuple(list(inspect.signature(fn).parameters)[:len(shapes)])
        expected.append(grad(fn, wrt=params)(
            *[np.array(a) if isinstance(a, list) else a for a in args]))
    result = run_clean(jobs)
    for k, want in enumerate(expected):
        for got, w in zip(result[str(k)], want, strict=True):
            np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-14, err_msg=str(jobs[k]))


# Refused with a located error: one module cannot define GAIN as both 3.0 (read by the
# helper that grad_f inlines) and 0.5 (read by grad_g); writing either is wrong for one.
def test_export_does_not_merge_one_name_meaning_two_things(tmp_path, capsys):
    helpers = unique("adv_gainmod")
    (tmp_path / f"{helpers}.py").write_text(
        "import numpy as np\nGAIN = 3.0\n\ndef boost(a):\n    return np.tanh(a) * GAIN\n")
    path = write(tmp_path, f"""\
        from {helpers} import boost
        GAIN = 0.5

        def f(x):
            return boost(x) * 2.0

        def g(x):
            return x * GAIN
        """)
    out_path = tmp_path / "g.py"
    status, _, err = run(capsys, path, "-o", out_path)
    assert status == 1 and not out_path.exists()
    assert err.startswith(f"{path}:7:1: error: cannot export: 'GAIN' means 3.0 in grad_f and "
                          "0.5 in grad_g"), err


# Refused with a located error: the module would define grad_f twice (the file's helper,
# which grad_g calls, and the gradient of f), and the later would replace the former.
def test_export_keeps_a_user_name_grad_f_apart_from_the_gradient_of_f(tmp_path, capsys):
    path = write(tmp_path, """\
        from symdiff import stop_gradient

        def grad_f(x):
            return 2.0 * x

        def f(x):
            return x ** 3

        def g(x):
            return x * stop_gradient(grad_f(x))
        """)
    out_path = tmp_path / "g.py"
    status, _, err = run(capsys, path, "-f", "f", "-f", "g", "-o", out_path)
    assert status == 1 and not out_path.exists()
    assert err.startswith(f"{path}:3:1: error: cannot export: 'grad_f', which the file defines "
                          "and grad_g reads, is also the name of the gradient of f"), err


def test_export_of_a_constant_named_like_a_runtime_helper(tmp_path, capsys):
    path = write(tmp_path, "_count = 3.0\n\ndef f(x):\n    return x * _count\n")
    out_path = tmp_path / "g.py"
    status, _, _ = run(capsys, path, "-o", out_path)
    if status == 0:
        assert exported(out_path)["grad_f"](1.0)[0] == pytest.approx(3.0)


def test_check_of_a_constant_named_like_a_runtime_helper(tmp_path, capsys):
    # The generated code uses _count for itself: the name is refused, with its location.
    path = write(tmp_path, "_count = 3.0\n\ndef f(x):\n    return x * _count\n")
    status, out, err = run(capsys, path, "--check")
    assert status == 1 and "_count is a name symdiff's generated code uses" in err
    assert ":4:" in err


def test_grad_of_a_helper_named_like_a_runtime_helper(tmp_path):
    m = live(write(tmp_path, """\
        from symdiff import stop_gradient

        def _fit(a):
            return a + 100.0

        def g(x):
            return x * stop_gradient(_fit(x))
        """))
    # The user's _fit would be shadowed by (or shadow) the generated code's: refused.
    with pytest.raises(SymdiffError, match="a name symdiff's generated code uses"):
        grad(m.g)(1.0)


def test_export_keeps_defaults_as_evaluated_at_definition(tmp_path, capsys):
    path = write(tmp_path, """\
        K = 1.0

        def f(x, k=K):
            return x * k

        K = 5.0
        """)
    out_path = tmp_path / "g.py"
    assert run(capsys, path, "--wrt", "x", "-o", out_path)[0] == 0
    assert live(path).f.__defaults__ == (1.0,)
    assert exported(out_path)["grad_f"](2.0) == pytest.approx(1.0)


def test_export_of_a_huge_integer_constant_does_not_crash(tmp_path, capsys):
    path = write(tmp_path, "BIG = 10 ** 5000\n\ndef f(x):\n    return x * (BIG // BIG)\n")
    out_path = tmp_path / "g.py"
    status, _, _ = run(capsys, path, "-o", out_path)
    if status == 0:
        assert exported(out_path)["grad_f"](2.0)[0] == pytest.approx(1.0)
