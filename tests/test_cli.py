"""The command line through ``main(argv)``: what it prints, exports and checks, exit statuses."""

import dataclasses
import importlib.util
import io
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from gradcheck import exported, run, write

from symdiff import grad, rules
from symdiff.check import check_gradient
from symdiff.cli import main

ROOT = Path(__file__).resolve().parent.parent

SAMPLE = '''\
"""A module the CLI reads; running it prints and exits, which the CLI must not do."""
import math
import numpy as np
import numpy as xp
from math import exp
from numpy import sin
import symdiff
from symdiff import stop_gradient as sg

SCALE = 2.0
HALF = SCALE / 4
W = np.array([[1.0, 2.0], [3.0, -1.0]])
AXIS = 0
print("the sample ran")


def helper(a):
    return xp.tanh(a) * SCALE


def scalar(x, y):
    """A docstring."""
    z = sin(x) * exp(y) + math.erf(x) * HALF
    return z + helper(x * y)


def straight_through(x):
    return x + sg(np.round(x) - x) * symdiff.stop_gradient(x)


def arrays(v: (2,), t):
    u = np.sum(W @ v, axis=AXIS)
    return np.log(np.sum(np.exp(u - sg(np.max(u))))) * t


def branchy(x, n=3):
    s = 0.0
    for i in range(n):
        if x > 0:
            s = s + x ** 2 / (i + 1)
        else:
            s = s - x
    return s


def keywords(x, *, scale=1.5):
    return x ** 3 * scale


raise SystemExit("the sample ran to its end")
'''


@pytest.fixture
def sample(tmp_path):
    path = tmp_path / "sample.py"
    path.write_text(SAMPLE)
    return str(path)


_modules = itertools.count()


def live(path):
    """Import ``path`` under a fresh name (its top level raises SystemExit at the end:
    the functions are defined by then)."""
    spec = importlib.util.spec_from_file_location(f"cli_live_{next(_modules)}", path)
    module = importlib.util.module_from_spec(spec)
    with pytest.raises(SystemExit):
        spec.loader.exec_module(module)
    return module


PARAMS = {"helper": ("a",), "scalar": ("x", "y"), "straight_through": ("x",),
          "arrays": ("v", "t"), "branchy": ("x",), "keywords": ("x", "scale")}
# (branchy's n only bounds a loop: it is left out, with a note)
BRANCHY_NOTE = ": note: branchy: n is used only as an integer (an index, a count): not " \
               "differentiated; --wrt names it to differentiate it anyway\n"


# --- printing the source ---


def test_prints_exactly_the_source_grad_compiles_for_every_function(sample, capsys):
    status, out, err = run(capsys, sample)
    assert (status, err) == (0, f"{sample}:36{BRANCHY_NOTE}")
    m = live(sample)
    expected = [grad(getattr(m, name), wrt=params).source for name, params in PARAMS.items()]
    assert out == "\n\n".join(expected)


def test_a_relative_path_gives_the_same_text_and_errors_name_it_as_given(tmp_path, capsys,
                                                                        monkeypatch):
    (tmp_path / "rel.py").write_text("import numpy as np\n\ndef f(x):\n    return np.sin(x)"
                                     "\n\ndef g(x):\n    return nothing(x)\n")
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "rel.py", "-f", "f", "-f", "g")  # g must work
    spec = importlib.util.spec_from_file_location("cli_rel", "rel.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    assert status == 1 and out == grad(m.f, wrt=("x",)).source  # which names the full path
    assert str(tmp_path / "rel.py") in out
    assert err.startswith("rel.py:7:12: error: name 'nothing' is not defined\n")


def test_does_not_run_the_file(sample, capsys):
    status, out, err = run(capsys, sample)
    assert status == 0 and "the sample ran" not in out + err


def test_function_and_wrt_select_and_mirror_grad(sample, capsys):
    m = live(sample)
    capsys.readouterr()  # what importing it printed
    status, out, _ = run(capsys, sample, "--function", "scalar", "--wrt", "y")
    assert status == 0 and out == grad(m.scalar, wrt="y").source
    status, out, _ = run(capsys, sample, "-f", "keywords", "-f", "scalar", "--wrt", "x,")
    assert status == 0
    assert out == grad(m.keywords, wrt=("x",)).source + "\n\n" + grad(m.scalar, wrt=(
        "x",)).source


REAL_FILE = """\
    import numpy as np

    def good(x):
        return np.sin(x)

    def bad(x):
        y = x
        y[0] = 1.0
        return np.fft.fft(y)

    def main():
        print(good(1.0))

    if __name__ == "__main__":
        main()
    """


def test_a_function_that_fails_is_skipped_with_a_note_unless_named(tmp_path, capsys):
    path = write(tmp_path, REAL_FILE)
    status, out, err = run(capsys, path)
    assert status == 0
    assert out.startswith("def grad_good(x):") and "grad_bad" not in out
    assert err == (
        f"{path}:8: note: skipped bad: y[0] = ... writes into y, which may be the parameter "
        "x (or a view of it): calling a gradient must not change its arguments, so symdiff "
        "does not follow this\n"
        f"{path}:11: note: skipped main: it has no parameter to differentiate\n")
    status, out, err = run(capsys, path, "-f", "good", "-f", "bad")
    assert status == 1
    assert out.startswith("def grad_good(x):") and "grad_bad" not in out
    assert err == (
        f"{path}:8:5: error: y[0] = ... writes into y, which may be the parameter x (or a "
        "view of it): calling a gradient must not change its arguments, so symdiff does not "
        "follow this\n"
        "        y[0] = 1.0\n"
        "        ^\n"
        "  supported instead: write into a copy: y = y.copy() first\n"
        f"{path}:9:12: error: np.fft.fft is not supported\n"
        "        return np.fft.fft(y)\n"
        "               ^\n"
        "  supported instead: the NumPy and math functions: `symdiff coverage` lists them\n")


def test_exit_status_1_when_nothing_at_all_could_be_differentiated(tmp_path, capsys):
    path = write(tmp_path, REAL_FILE.replace("def good(x):\n        return np.sin(x)\n", ""))
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    # In full, then, as for -f bad.
    assert err.startswith(f"{path}:6:5: error: y[0] = ... writes into y"), err
    assert "        ^\n  supported instead: write into a copy" in err
    status, out, err = run(capsys, "audit", path)
    assert (status, out.strip()) == (1, "")
    assert err.startswith("error: cannot audit bad: it raised")


def test_skipping_as_a_subprocess(tmp_path):
    path = write(tmp_path, REAL_FILE)
    done = _symdiff(tmp_path, path)
    assert done.returncode == 0 and done.stdout.startswith("def grad_good(x):")
    assert done.stderr.splitlines()[0].startswith(f"{path}:8: note: skipped bad: y[0] = ")
    done = _symdiff(tmp_path, path, "-f", "bad")
    assert done.returncode == 1 and done.stdout == "" and f"{path}:8:5: error: " in done.stderr
    done = _symdiff(tmp_path, "audit", path)  # good has no stop_gradient: nothing to flag
    assert done.returncode == 0 and "good calls no stop_gradient" in done.stdout
    assert f"{path}:6: note: skipped bad: it raised " in done.stderr
    assert f"{path}:11: note: skipped main: it has no parameter to differentiate" in done.stderr


def test_a_constant_only_running_the_file_would_give_has_a_located_error(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np
        W = np.load("weights.npy")

        def f(x):
            return np.sum(W * x)
        """)
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    assert err == (
        f"{path}:5:19: error: 'W' is set at module level (line 2) by code symdiff does not "
        "run when it reads a file: a call of np.load\n"
        "        return np.sum(W * x)\n"
        "                      ^\n"
        "  supported instead: numbers, literals, arithmetic on them, and NumPy constructors "
        "of literals (np.array([...]), np.zeros((3, 4))); or use grad() in Python\n")


def test_an_unresolved_name_in_a_helper_is_explained_where_the_helper_reads_it(tmp_path,
                                                                              capsys):
    path = write(tmp_path, """\
        import numpy as np
        if np.pi > 3:
            K = 2.0

        def helper(a):
            return a * K

        def f(x):
            return helper(x) + 1.0
        """)
    status, _, err = run(capsys, path, "-f", "f")
    assert status == 1
    assert err.startswith(f"{path}:6:16: error: 'K' is set at module level (line 2) by code "
                          "symdiff does not run when it reads a file: an if block\n")


def test_functions_without_parameters_are_skipped_with_a_note(tmp_path, capsys):
    path = write(tmp_path, """\
        def main():
            return 1.0

        def f(x):
            return x
        """)
    status, out, err = run(capsys, path)
    assert status == 0 and out.startswith("def grad_f(x):")
    assert err == f"{path}:1: note: skipped main: it has no parameter to differentiate\n"
    status, _, err = run(capsys, path, "-f", "main")
    assert status == 1 and "error: main has no parameter to differentiate" in err


def test_a_syntax_error_is_located(tmp_path, capsys):
    path = write(tmp_path, "def f(x):\n    return x +\n")
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    assert err.startswith(f"{path}:2:15: error: invalid syntax\n    ")


def test_help_exits_0_and_usage_errors_exit_2(sample, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "--format" in capsys.readouterr().out
    for argv in ([sample, "--bogus"], [sample, "--format", "pdf"], [],
                 [sample, "--wrt", "1x"], [sample, "--shape", "x=a"],
                 [sample, "--function", "nope"], [sample + ".missing"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2, argv
        assert "usage: symdiff" in capsys.readouterr().err


def test_python_m_symdiff_works(sample):
    run = subprocess.run([sys.executable, "-m", "symdiff", sample, "-f", "scalar"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("def grad_scalar(x, y):") and "sample ran" not in run.stdout


# --- formulas ---


def test_format_math_prints_closed_formulas_in_ascii_when_not_a_terminal(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np
        from symdiff import stop_gradient

        def f(x, y):
            z = x * y
            return np.sin(z) + 3.0 * x

        def st(w):
            return w + stop_gradient(np.round(w) - w)
        """)
    status, out, _ = run(capsys, path, "--format", "math")
    assert status == 0
    assert out == ("f(x, y) = 3*x + sin(x*y)\n"
                   "df/dx = y*cos(x*y) + 3\n"
                   "df/dy = x*cos(x*y)\n"
                   "\n"
                   "st(w) = w + stop_gradient(-w + round(w))\n"
                   "dst/dw = 1\n")


def test_format_math_shows_array_code_and_control_flow_as_a_program(sample, capsys):
    status, out, _ = run(capsys, sample, "--format", "math", "-f", "arrays", "-f", "branchy")
    assert status == 0
    m = live(sample)
    assert out == (
        "# arrays: not a closed formula (np.matmul at line 32 is an array operation); "
        "shown as a program:\n\n" + grad(m.arrays, wrt=("v", "t")).source + "\n\n"
        "# branchy: not a closed formula (it has control flow at line 38); "
        "shown as a program:\n\n" + grad(m.branchy, wrt=("x",)).source)


def test_format_latex(tmp_path, capsys):
    path = write(tmp_path, """\
        def my_f(x, y):
            return x ** 2 * y
        """)
    status, out, _ = run(capsys, path, "--format", "latex")
    assert status == 0
    assert out == ("\\operatorname{my\\_f}(x, y) = x^{2} y\n"
                   "\\frac{\\partial \\operatorname{my\\_f}}{\\partial x} = 2 x y\n"
                   "\\frac{\\partial \\operatorname{my\\_f}}{\\partial y} = x^{2}\n")


# --- --check ---


def test_check_runs_the_file_and_agrees(sample, capsys):
    status, out, err = run(capsys, sample, "--check", "--shape", "t=")
    assert "the sample ran to its end" in err  # running the sample ends in SystemExit
    assert status == 1


def test_check_agrees_on_every_kind_of_function(tmp_path, capsys):
    text = SAMPLE.replace('raise SystemExit("the sample ran to its end")\n', "")
    path = write(tmp_path, text)
    status, out, err = run(capsys, path, "--check")
    assert (status, err) == (0, f"{path}:36{BRANCHY_NOTE}"), err
    lines = out.splitlines()
    assert lines[0] == "the sample ran"  # --check, and only --check, runs the file
    assert [line.split(":")[0] for line in lines[1:]] == list(PARAMS)
    assert all(line.endswith("over 3 random points: ok") for line in lines[1:])


def test_check_catches_a_wrong_derivative_rule_and_names_the_function(tmp_path, capsys,
                                                                     monkeypatch):
    path = write(tmp_path, """\
        import numpy as np

        def fine(x):
            return x * x

        def wrong(x):
            return np.sin(x) * 2.0
        """)
    row = rules.lookup(np.sin)
    # The forward code still calls np.sin; the derivative now comes from cos: -sin.
    monkeypatch.setitem(rules._BY_ID, id(np.sin), (np.sin, dataclasses.replace(
        row, sympy=sp.cos)))
    status, out, err = run(capsys, path, "--check")
    assert status == 1
    assert "fine: largest relative error" in out and "fine: " in out and ": ok" in out
    # The failure is said once, on stderr (not also as a line of the summary).
    assert "wrong:" not in out and "DISAGREES" not in out and err.count("of wrong") == 1
    assert err.startswith(f"{path}:6:1: error: the gradient of wrong disagrees with central "
                          "differences: relative error ")
    assert " (over 3 random points)\n" in err
    assert err.splitlines()[1:] == ["    def wrong(x):", "    ^"]


def test_check_freezes_stop_gradient_arguments_at_the_point():
    from symdiff import stop_gradient

    def st(x):
        return x + stop_gradient(np.round(x) - x)

    # The straight-through gradient 1 agrees once the stopped part is frozen; the true
    # derivative of the rounded value (0) does not.
    assert check_gradient(st, lambda x: (1.0,), ("x",)).ok
    assert not check_gradient(st, lambda x: (0.0,), ("x",)).ok


def test_check_takes_shapes_from_options_annotations_and_defaults(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def f(a, b: "(2, 3)", c=np.ones(4), n=2):
            assert np.shape(a) == (3, 1) and np.shape(b) == (2, 3) and np.shape(c) == (4,)
            return np.sum(a * np.sum(b) * n) + np.sum(c ** 2)
        """)
    status, out, err = run(capsys, path, "--check", "--shape", "a=3,1")
    assert (status, err) == (0, ""), err
    status, out, err = run(capsys, path, "--check")
    assert status == 1 and "AssertionError" in err and "AssertionError" not in out


def test_check_reports_a_function_that_is_never_finite(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def f(x):
            return np.log(x - 10.0)
        """)
    status, out, err = run(capsys, path, "--check")
    assert status == 1
    assert out == "" and err.count("not finite") == 1
    assert err.startswith(f"{path}:3:1: error: cannot check the gradient of f: it is not "
                          "finite")


def test_check_of_the_cli_demo_example_agrees(capsys):
    status, out, err = run(capsys, str(ROOT / "examples" / "cli_demo.py"), "--check")
    assert (status, err) == (0, ""), err
    assert out.count(": ok") == 4


# --- --output ---


def test_output_module_needs_only_numpy_and_matches_grad(sample, tmp_path, capsys):
    out_path = tmp_path / "grads.py"
    status, out, err = run(capsys, sample, "--output", str(out_path))
    assert (status, out, err) == (0, "", f"{sample}:36{BRANCHY_NOTE}")
    text = out_path.read_text()
    assert "import symdiff" not in text and "sympy" not in text
    assert text.startswith('"""Gradients of the functions in ')
    assert "W = np.array([[1.0, 2.0], [3.0, -1.0]])" in text and "SCALE = 2.0" in text
    assert "class SymdiffError(ValueError):" in text
    points = {"helper": [0.3], "scalar": [0.3, -0.7], "straight_through": [1.3],
              "arrays": [[0.5, -1.5], 2.0], "branchy": [0.7], "keywords": [2.0]}
    script = textwrap.dedent(f"""\
        import json, sys
        sys.modules["sympy"] = None  # importing SymPy (or symdiff) now fails
        sys.modules["symdiff"] = None
        sys.path.insert(0, {str(tmp_path)!r})
        import numpy as np
        import grads
        points = json.loads({json.dumps(points)!r})
        out = {{}}
        for name, args in points.items():
            args = [np.array(a) if isinstance(a, list) else a for a in args]
            out[name] = [np.asarray(g).tolist() for g in getattr(grads, "grad_" + name)(*args)]
        try:
            grads.grad_helper(np.ones(2))
        except grads.SymdiffError as e:
            out["error"] = str(e)
        print(json.dumps(out))
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    m = live(sample)
    for name, args in points.items():
        args = [np.array(a) if isinstance(a, list) else a for a in args]
        expected = grad(getattr(m, name), wrt=PARAMS[name])(*args)
        for got, want in zip(result[name], expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    assert "a gradient needs a scalar output" in result["error"]


def test_output_copies_helpers_called_inside_stop_gradient(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np
        from symdiff import stop_gradient

        OFFSET = (1.5, 2)

        def shift(x):
            return np.max(x) + OFFSET[0]

        def f(x: "(3,)"):
            return np.sum(x * stop_gradient(shift(x)))
        """)
    out_path = tmp_path / "g.py"
    assert run(capsys, path, "-o", str(out_path))[0] == 0
    text = out_path.read_text()
    assert "def shift(x):" in text and "OFFSET = (1.5, 2)" in text
    namespace = {}
    exec(compile(text, str(out_path), "exec"), namespace)
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(namespace["grad_f"](x)[0], np.full(3, 4.5))


def test_output_copies_the_stand_in_for_values_needed_only_for_their_shape(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def xent(z: "(4, 3)", t: "(4, 3)"):
            return np.mean(np.log(np.sum(np.exp(z), axis=1)) - np.sum(t * z, axis=1))
        """)
    out_path = tmp_path / "g.py"
    assert run(capsys, path, "-o", str(out_path))[0] == 0
    text = out_path.read_text()
    assert "class _Shape:" in text and "_reduced_shape(" in text
    namespace = {}
    exec(compile(text, str(out_path), "exec"), namespace)
    rng = np.random.default_rng(0)
    z, t = rng.standard_normal((4, 3)), rng.random((4, 3))
    p = np.exp(z) / np.sum(np.exp(z), axis=1, keepdims=True)
    np.testing.assert_allclose(namespace["grad_xent"](z, t)[0], (p - t) / 4, rtol=1e-12)


def test_output_raises_unbound_local_error_where_the_function_would(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def f(x: "(3,)", c: "()"):
            if c > 0:
                y = x * 2.0
            return np.sum(y * x)
        """)
    out_path = tmp_path / "g.py"
    assert run(capsys, path, "-o", str(out_path), "--wrt", "x")[0] == 0
    text = out_path.read_text()
    assert "class _Unbound:" in text
    namespace = {}
    exec(compile(text, str(out_path), "exec"), namespace)
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(namespace["grad_f"](x, 1.0), 4 * x)
    with pytest.raises(UnboundLocalError, match="'y'"):
        namespace["grad_f"](x, -1.0)


# --- the generated code in a debugger ---


def test_pdb_steps_into_the_generated_code(tmp_path):
    path = write(tmp_path, """\
        import numpy as np

        def f(x: float):  # (so that .source shows the build the call below runs)
            y = np.sin(x) * x
            return y * 2.0
        """)
    script = textwrap.dedent(f"""\
        import importlib.util, io, pdb, sys
        spec = importlib.util.spec_from_file_location("m", {path!r})
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        from symdiff import grad
        g = grad(m.f)
        print(g.source)  # built now, so that the breakpoint below goes straight into it
        print("=" * 20)
        # Stop in the generated function (the Gradient's __wrapped__), then step through it.
        commands = io.StringIO("break self.__wrapped__\\ncontinue\\n" + "next\\n" * 3
                               + "continue\\n")
        debugger = pdb.Pdb(stdin=commands, stdout=sys.stdout, nosigint=True)
        debugger.use_rawinput = False
        print(debugger.runcall(g, 0.5))
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    source, _, session = done.stdout.partition("=" * 20 + "\n")
    assert "/grad_f-" in session  # the frame is in the generated function's file
    body = [line.strip() for line in source.splitlines()[6:]  # after the docstring
            if not line.strip().startswith("#")]  # (pdb stops at statements)
    shown = [line[3:] for line in session.splitlines() if line.startswith("-> ")]
    # The first four statements of the generated code, each shown as pdb reaches it.
    assert [s for s in shown if s in body] == body[:4], session


def test_a_helper_imported_from_another_module_is_checked_and_exported(tmp_path, capsys):
    (tmp_path / "cli_helpers_mod.py").write_text(
        "import numpy\n\nGAIN = 3.0\n\n\ndef boost(a):\n    return numpy.tanh(a) * GAIN\n")
    path = write(tmp_path, """\
        from cli_helpers_mod import boost

        def f(x):
            return boost(x) * x
        """)
    status, out, err = run(capsys, path, "--check")
    assert (status, err) == (0, ""), err
    out_path = tmp_path / "exported.py"
    assert run(capsys, path, "-o", str(out_path))[0] == 0
    text = out_path.read_text()
    assert "GAIN = 3.0" in text  # read by the inlined helper, from its own module
    namespace = {}
    exec(compile(text, str(out_path), "exec"), namespace)
    x = 0.4
    expected = np.tanh(x) * 3.0 + x * 3.0 / np.cosh(x) ** 2
    assert abs(namespace["grad_f"](x)[0] - expected) < 1e-12


@pytest.mark.parametrize("name", ["cli", "static", "static_unresolved", "check", "export",
                                  "formula", "coverage"])
def test_docstring_examples_hold(name):
    import doctest
    import importlib

    results = doctest.testmod(importlib.import_module(f"symdiff.{name}"))
    assert results.failed == 0 and results.attempted > 0


def test_cache_info_and_clear(capsys, monkeypatch, tmp_path):
    from symdiff.cli import main

    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / "c"))
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out == f"symdiff cache: {tmp_path / 'c'}\n0 entries, 0 bytes\n"
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == "removed 0 entries\n"
    with pytest.raises(SystemExit) as e:
        main(["cache", "nonsense"])
    assert e.value.code == 2


# --- reading FILE: defaults at the def, try/except imports, __main__ blocks, encodings ---


def test_a_default_is_the_value_at_its_def_in_export_and_in_helper_calls(tmp_path, capsys):
    path = write(tmp_path, """\
        K = 1.0

        def c(u, k=K):
            return u * k

        def f(x):
            return c(x)

        def g(x):
            return c(x, 3.0) + c(x, k=2.0)

        K = 5.0
        """)
    status, out, err = run(capsys, path, "-f", "f")
    # symdiff would read K's last value where Python gives c's default its value at the def.
    assert (status, out) == (1, "")
    assert err.startswith(f"{path}:7:12: error: this call of c leaves k to its default K, "
                          "which was 1.0 when c was defined (line 3)"), err
    out_path = tmp_path / "out.py"
    status, _, err = run(capsys, path, "-f", "c", "-f", "g", "-o", str(out_path))
    assert (status, err) == (0, ""), err
    namespace = {}
    exec(compile(out_path.read_text(), str(out_path), "exec"), namespace)
    assert namespace["grad_c"](2.0) == (1.0, 2.0)  # k=1.0, as c.__defaults__
    assert namespace["grad_g"](2.0) == (5.0,)


def test_try_except_import_fallbacks_and_main_blocks(tmp_path, capsys):
    path = write(tmp_path, """\
        try:
            import numpy as xp
        except ImportError:
            import not_a_module_anywhere as xp
        else:
            A = 2.0

        try:
            import not_a_module_anywhere
        except ValueError:
            B = 1.0

        if __name__ != "__main__":
            C = 3.0
        else:
            C = 4.0

        if __name__ == "__main__":
            def f(x):
                return x

        def f(x):
            return xp.sin(x) * A * C

        def g(x):
            return x * B
        """)
    status, out, err = run(capsys, path, "-f", "f", "-f", "g")
    assert status == 1 and out.startswith("def grad_f(x):") and "grad_g" not in out
    # ValueError does not catch the failed import: B is only set if the try block fails.
    assert err.startswith(f"{path}:26:16: error: 'B' is set at module level (line 11)"), err
    assert "set in an except block (line 10)" in err
    from symdiff.static import read_module

    look = read_module(path).namespace.lookup
    assert (look("xp"), look("A"), look("C")) == (np, 2.0, 3.0)


def test_bad_encodings_are_located_errors(tmp_path, capsys):
    cookie = tmp_path / "cookie.py"
    cookie.write_bytes(b"# -*- coding: no-such-codec -*-\ndef f(x):\n    return x\n")
    status, out, err = run(capsys, str(cookie))
    assert (status, out) == (1, "") and err.startswith(f"{cookie}:1:1: error: unknown encoding")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"def f(x):\n    s = 'caf\xe9'\n    return x\n")
    status, out, err = run(capsys, str(latin))
    assert (status, out) == (1, "")
    assert err.startswith(f"{latin}:2:13: error: the file is not valid utf-8: byte 0xe9"), err


# --- FILE's own modules are read like FILE, never run ---


# Each writes a marker file when run: the CLI must never create one without --check.
_MARKS = 'open(__file__ + ".ran", "w").close()\n'
LOCAL_FILES = {
    "helpers.py": _MARKS + textwrap.dedent("""\
        import numpy as np
        from pkg import consts
        GAIN = 3.0

        def boost(a, k=0.5):
            return np.tanh(a) * GAIN * k * consts.K
        """),
    "pkg/__init__.py": _MARKS + "from .core import square\n",
    "pkg/core.py": _MARKS + "from . import consts\n\n\ndef square(a):\n"
                   "    return a * a * consts.K\n",
    "pkg/consts.py": _MARKS + "K = 2.0\n",
    # Named like standard modules: a plain `import wave` must not run them either.
    "wave.py": _MARKS,
    "mailbox.py": _MARKS,
}
LOCAL_MAIN = """\
import mailbox
import wave

import helpers
import pkg.core as core
from helpers import boost
from pkg import square


def f(x):
    return boost(x) * x + helpers.GAIN * square(x) + core.square(x)
"""


def _symdiff(cwd, *argv):
    """``python -m symdiff`` in ``cwd``, which Python puts first on sys.path."""
    return subprocess.run([sys.executable, "-m", "symdiff", *argv], capture_output=True,
                          text=True, cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=300)


def _local_project(tmp_path):
    for name, text in LOCAL_FILES.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "model.py").write_text(_MARKS + LOCAL_MAIN)
    return sorted(p.name for p in tmp_path.rglob("*.ran"))


def test_modules_next_to_file_are_read_not_run(tmp_path):
    _local_project(tmp_path)
    done = _symdiff(tmp_path, "model.py")
    assert sorted(tmp_path.rglob("*.ran")) == [], "the CLI ran a module"
    assert done.returncode == 0, done.stderr
    # A note for each file named like a standard module, which stays the standard one.
    assert done.stderr.startswith("model.py:2:1: note: mailbox is the standard module "
                                  "mailbox here, not mailbox.py in the file's folder: "
                                  "symdiff never "
                                  "reads or runs a file named like a standard module "
                                  "(python FILE would import that file instead)\n"), \
        done.stderr
    assert "model.py:3:1: note: wave is the standard module wave here" in done.stderr
    # What grad() compiles once the modules have really run (in another process).
    script = ("import sys; sys.path.insert(0, '.'); import model; from symdiff import grad; "
              "print(grad(model.f, wrt=('x',)).source, end='')")
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert ran.returncode == 0, ran.stderr
    assert done.stdout == ran.stdout


def test_check_alone_runs_the_modules_next_to_file(tmp_path):
    _local_project(tmp_path)
    done = _symdiff(tmp_path, "model.py", "--check")
    assert done.returncode == 0, done.stderr
    assert "f: largest relative error" in done.stdout and done.stdout.endswith(": ok\n")
    ran = {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.ran")}
    assert {"model.py.ran", "helpers.py.ran", "pkg/core.py.ran"} <= ran


def test_unknown_names_of_a_local_module_are_located_in_it(tmp_path, capsys):
    (tmp_path / "cli_weights_mod.py").write_text(
        "import numpy as np\nW = np.load('w.npy')\n\n\ndef scaled(a):\n    return a * W\n")
    path = write(tmp_path, """\
        import cli_weights_mod
        from cli_weights_mod import W, scaled

        def f(x):
            return scaled(x)

        def g(x):
            return cli_weights_mod.W * x

        def h(x):
            return W * x
        """)
    status, out, err = run(capsys, path)
    helpers = tmp_path / "cli_weights_mod.py"
    assert (status, out) == (1, "")
    assert err.startswith(f"{helpers}:6:16: error: 'W' is set at module level (line 2) by "
                          "code symdiff does not run when it reads a file: a call of "
                          "np.load\n"), err
    assert (f"{path}:8:12: error: cli_weights_mod.W is not known: cli_weights_mod sets it at "
            "module level (line 2) by code symdiff does not run when it reads a file: a call "
            "of np.load\n") in err
    assert (f"{path}:11:12: error: 'W' is set at module level (line 2) by code symdiff does "
            "not run when it reads a file: W in cli_weights_mod (cli_weights_mod.py, line 2) "
            "is not known: a call of np.load\n") in err


def test_a_local_module_that_does_not_parse_is_a_failed_import(tmp_path, capsys):
    (tmp_path / "cli_broken_mod.py").write_text("def h(a):\n    return a +\n")
    path = write(tmp_path, """\
        try:
            from cli_broken_mod import h
        except SyntaxError:
            def h(a):
                return a * 2.0

        def f(x):
            return h(x)
        """)
    status, out, err = run(capsys, path)
    assert (status, err) == (0, "") and "# grad of line 5 of h: return a * 2.0" in out, err


# --- no traceback, whatever the file ---


def test_an_expression_too_deep_for_the_parser_is_located(tmp_path, capsys):
    path = write(tmp_path, "import numpy as np\n\ndef f(x):\n    return " + "-" * 5000 + "x\n")
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    assert err.startswith(f"{path}:4:1: error: an expression nested too deeply for Python's "
                          "parser (RecursionError): Python cannot run this file either\n"), err


def test_recursion_and_memory_errors_of_one_function_are_located(tmp_path, capsys,
                                                                 monkeypatch):
    import symdiff.api

    path = write(tmp_path, "def f(x):\n    return x * x\n\ndef g(x):\n    return x * 3.0\n")
    real = symdiff.api.build_source

    def failing(parsed, *args):
        if parsed.name == "g":
            raise RecursionError("maximum recursion depth exceeded")
        return real(parsed, *args)

    monkeypatch.setattr(symdiff.api, "build_source", failing)
    status, out, err = run(capsys, path, "-f", "f", "-f", "g")
    assert status == 1 and out.startswith("def grad_f(x):")
    assert err == (f"{path}:4:1: error: cannot differentiate g: an expression in it is nested "
                   "too deeply for symdiff (RecursionError)\n    def g(x):\n    ^\n"
                   "  supported instead: split the expression into several statements\n")
    # Unnamed, g is skipped with a note; alone in its file, it fails in full.
    status, out, err = run(capsys, path)
    assert status == 0 and err == (f"{path}:4: note: skipped g: an expression in it is "
                                   "nested too deeply for symdiff (RecursionError)\n")
    status, out, err = run(capsys, write(tmp_path, "def g(x):\n    return x\n", "g.py"))
    assert (status, out) == (1, "") and err.endswith("  supported instead: split the "
                                                    "expression into several statements\n")


def test_a_module_level_constant_too_deep_to_read_is_unknown_not_a_crash(tmp_path, capsys):
    path = write(tmp_path, "A = " + " + ".join(["1.0"] * 1500) + "\n\ndef f(x):\n"
                 "    return A * x\n\ndef g(x):\n    return x * x\n")
    status, out, err = run(capsys, path, "-f", "f", "-f", "g")
    assert status == 1 and out.startswith("def grad_g(x):")
    assert err.startswith(f"{path}:4:12: error: 'A' is set at module level (line 1) by code "
                          "symdiff does not run when it reads a file: an expression nested "
                          "too deeply to read\n"), err


def test_check_refuses_shapes_too_large_before_allocating(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def f(x, data):
            return np.sum(x * x) + np.sum(data)
        """)
    status, out, err = run(capsys, path, "--check", "--shape", "x=100000,100000")
    assert status == 1 and out == ""
    assert err.startswith(f"{path}:3:1: error: cannot check the gradient of f: x of shape "
                          "(100000, 100000) has 10000000000 elements; --check differentiates "
                          "element by element and takes at most 10000 (give a smaller shape "
                          "with --shape x=...)\n"), err
    status, out, err = run(capsys, path, "--check", "--wrt", "x", "--shape", "x=3",
                           "--shape", "data=10000,10000")
    assert status == 1 and "data of shape (10000, 10000) has 100000000 elements; --check " \
        "draws values and takes at most 10000000" in err, err
    status, out, err = run(capsys, path, "--check", "--wrt", "x", "--shape", "x=3",
                           "--shape", "data=1000,100")
    assert (status, err) == (0, ""), err


def test_output_never_overwrites_a_file_symdiff_did_not_write(tmp_path, capsys):
    path = write(tmp_path, "def f(x):\n    return x * x\n")
    mine = tmp_path / "helpers.py"
    mine.write_text("# the user's own module\n")
    with pytest.raises(SystemExit) as e:
        main([path, "-o", str(mine)])
    assert e.value.code == 2 and mine.read_text() == "# the user's own module\n"
    assert capsys.readouterr().err.endswith(
        f"symdiff: error: --output {mine} exists and was not written by symdiff: it would be "
        "overwritten (remove it first, or write to another file)\n")
    out_path = tmp_path / "grads.py"
    out_path.touch()  # empty: nothing to lose
    assert run(capsys, path, "-o", str(out_path))[0] == 0
    path = write(tmp_path, "def f(x):\n    return x * x * x\n")
    assert run(capsys, path, "-o", str(out_path))[0] == 0  # regenerating is fine
    assert "3*x**2" in out_path.read_text()


def test_a_file_without_functions_says_so(tmp_path, capsys):
    path = write(tmp_path, "")
    assert run(capsys, path) == (0, "", f"{path}: note: it defines no top-level function to "
                                 "differentiate (methods and lambdas are not read)\n")


def test_a_local_module_changed_by_the_file_is_not_read_with_its_old_values(tmp_path, capsys):
    (tmp_path / "cli_gain_mod.py").write_text(
        "import numpy as np\nGAIN = 3.0\nW = np.ones(3)\n\n\ndef boost(a):\n"
        "    return a * GAIN\n")
    path = write(tmp_path, """\
        import numpy as np
        import cli_gain_mod
        from cli_gain_mod import W, boost
        cli_gain_mod.GAIN = 5.0
        cli_gain_mod.W[0] = 2.0

        def f(x):
            return boost(x)

        def g(x):
            return np.sum(W * x)

        def h(x):
            return cli_gain_mod.GAIN * x
        """)
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    changed = ("'GAIN' of cli_gain_mod is changed at module level (m.py, line 4: "
               "cli_gain_mod.GAIN = 5.0); symdiff reads the files without running them and "
               "does not follow that\n")
    assert err.startswith(f"{tmp_path / 'cli_gain_mod.py'}:7:16: error: {changed}"), err
    assert f"{path}:14:12: error: {changed}" in err
    assert (f"{path}:11:19: error: 'W' is set at module level (line 5) by code symdiff does "
            "not run when it reads a file: it shares its data with cli_gain_mod.W, changed in "
            "place at m.py, line 5: cli_gain_mod.W[0] = 2.0\n") in err


def test_a_shape_for_no_parameter_is_a_usage_error(tmp_path, capsys):
    path = write(tmp_path, "import numpy as np\n\ndef f(x):\n    return np.sum(x * x)\n")
    with pytest.raises(SystemExit) as e:
        main([path, "--check", "--shape", "X=3"])  # x would be checked as a scalar
    assert e.value.code == 2
    assert capsys.readouterr().err.endswith("symdiff: error: --shape X=...: no function "
                                            "differentiated has a parameter 'X' (they have: "
                                            "x)\n")


def test_check_of_a_local_helper_calling_stop_gradient_on_its_own_helper(tmp_path, capsys):
    # inner is only a name of the helper's module: the check calls it as that module has it,
    # and freezes the stop_gradient that module calls.
    (tmp_path / "cli_sg_helpers.py").write_text(textwrap.dedent("""\
        from symdiff import stop_gradient

        def inner(a):
            return a * 2.0

        def outer(a):
            return a * stop_gradient(inner(a))
        """))
    path = write(tmp_path, "from cli_sg_helpers import outer\n\ndef f(x):\n"
                 "    return outer(x)\n")
    try:
        status, out, err = run(capsys, path, "--check")
    finally:
        sys.modules.pop("cli_sg_helpers", None)
    assert (status, err) == (0, ""), err
    assert out.startswith("f: largest relative error") and out.endswith(": ok\n")


def test_output_copies_a_local_helper_under_the_name_it_is_imported_as(tmp_path, capsys):
    (tmp_path / "cli_alias_helpers.py").write_text(
        "def inner(a):\n    return a * 2.0\n\n\ndef outer(a):\n    return a * inner(a)\n")
    path = write(tmp_path, """\
        from symdiff import stop_gradient
        from cli_alias_helpers import inner as twice, outer

        def f(x):
            return x * stop_gradient(twice(x))

        def g(x):
            return x * stop_gradient(outer(x))
        """)
    out_path = tmp_path / "grads.py"
    assert run(capsys, path, "-o", str(out_path)) == (0, "", "")
    text = out_path.read_text()
    assert "import cli_alias_helpers" not in text and "from cli_alias_helpers" not in text
    namespace = {}
    exec(compile(text, str(out_path), "exec"), namespace)
    assert namespace["grad_f"](1.5) == (3.0,)  # d/dx of x * c, c = 2x frozen
    assert namespace["grad_g"](1.5) == (4.5,)  # c = outer(x) = 2x**2 frozen


def test_python_m_does_not_run_a_module_of_the_current_folder_either(tmp_path):
    here, there = tmp_path / "cwd", tmp_path / "project"
    here.mkdir()
    there.mkdir()
    (here / "wave.py").write_text(_MARKS)
    (here / "cli_cwd_helper.py").write_text(_MARKS + "def h(a):\n    return a\n")
    (there / "model.py").write_text("import wave\nfrom cli_cwd_helper import h\n\n\n"
                                    "def f(x):\n    return x * x\n")
    done = _symdiff(here, str(there / "model.py"))
    assert done.returncode == 0 and done.stdout.startswith("def grad_f(x):"), done.stderr
    assert sorted(tmp_path.rglob("*.ran")) == []


def test_a_deep_expression_python_runs_gives_a_gradient_or_a_located_error(tmp_path, capsys):
    path = write(tmp_path, "def f(x):\n    return " + "+".join(["x"] * 900) + "\n")
    status, out, err = run(capsys, path)  # a RecursionError inside must not escape
    # Here: "{path}:1:1: error: cannot differentiate f: an expression in it is nested too
    # deeply for symdiff (RecursionError)", unless the library learns to build it.
    assert status == 0 and out.startswith("def grad_f(x):") or status == 1 and (
        err.startswith(f"{path}:") and "symdiff failed" not in err), err


def test_check_refuses_an_annotation_with_a_negative_size(tmp_path, capsys):
    path = write(tmp_path, 'import numpy as np\n\ndef f(x: "(3, -1)"):\n'
                 "    return np.sum(x * x)\n")
    status, out, err = run(capsys, path, "--check")
    assert status == 1 and err.startswith(
        f"{path}:3:1: error: cannot check the gradient of f: x would have the shape (3, -1), "
        "which has a negative size (give one with --shape x=3,4)\n"), err


def test_a_copy_of_symdiff_next_to_file_is_not_read_for_symdiff(tmp_path, capsys):
    # Read statically, its stop_gradient would be a plain identity to differentiate through.
    (tmp_path / "symdiff").mkdir()
    (tmp_path / "symdiff" / "__init__.py").write_text("def stop_gradient(x):\n    return x\n")
    path = write(tmp_path, "from symdiff import stop_gradient\n\ndef f(x):\n"
                 "    return x * stop_gradient(x)\n")
    status, out, err = run(capsys, path, "--format", "math")
    assert (status, err) == (0, "")
    assert out.endswith("df/dx = stop_gradient(x)\n"), out


def test_a_local_module_that_is_not_utf8_is_named_where_it_is_used(tmp_path, capsys):
    (tmp_path / "cli_latin_mod.py").write_bytes(b"def h(a):\n    s = 'caf\xe9'\n    return a\n")
    path = write(tmp_path, "from cli_latin_mod import h\n\ndef f(x):\n    return h(x)\n")
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    assert err == (f"{path}:4:12: error: 'h' is set at module level (line 1) by code symdiff "
                   "does not run when it reads a file: from cli_latin_mod import h failed: "
                   f"SyntaxError: {tmp_path / 'cli_latin_mod.py'}:2:13: the file is not valid "
                   "utf-8: byte 0xe9 cannot be decoded\n"
                   "        return h(x)\n               ^\n"
                   "  supported instead: fix that file; or use grad() in Python\n")


# --- the command line: usage, unusual files, exit statuses ---


def test_missing_file_directory_and_bad_options_are_usage_errors(tmp_path, capsys):
    path = write(tmp_path, "def f(x, y):\n    return x * y\n")
    for argv in ([str(tmp_path / "nope.py")], [str(tmp_path)], [path, "--shape", "x=3.5"],
                 [path, "--shape", "=3"], [path, "--shape", "x=-1"], [path, "--shape", "x"],
                 [path, "--shape", "x=3 4"], [path, "--wrt", ","], [path, "--wrt", "x.y"],
                 [path, "-f", "g"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2, argv
        assert "usage: symdiff" in capsys.readouterr().err


def test_unknown_wrt_is_a_located_error_per_function(tmp_path, capsys):
    path = write(tmp_path, "def f(x, y):\n    return x * y\n")
    status, out, err = run(capsys, path, "--wrt", "z")
    assert (status, out) == (1, "")
    assert err.startswith(f"{path}:1:1: error: f has no parameter 'z'")


def test_null_bytes_and_syntax_errors_are_located(tmp_path, capsys):
    path = tmp_path / "nul.py"
    path.write_bytes(b"def f(x):\n    return x\x00 * x\n")
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    assert err == (f"{path}:2:13: error: the file is binary, not Python source: it holds a "
                   "NUL byte\n  supported instead: give symdiff a Python source file\n")
    path = write(tmp_path, 'def f(x):\n    s = "\u00e9\u00e9\u00e9" + x +\n    return s\n')
    status, _, err = run(capsys, path)
    assert status == 1 and err.startswith(f"{path}:2:20: error: invalid syntax")


def test_a_coding_cookie_and_a_bom_are_honoured(tmp_path, capsys):
    cookie = tmp_path / "cookie.py"
    cookie.write_bytes(b"# -*- coding: latin-1 -*-\nS = '\xe9'\ndef f(x):\n    return x * x\n")
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfdef f(x):\n    return x * x\n")
    for path in (cookie, bom):
        status, out, err = run(capsys, path)
        assert (status, err) == (0, "") and out.startswith("def grad_f(x):")


@pytest.mark.parametrize("line", [1, 5])
def test_a_file_that_is_not_utf8_is_a_clean_error(tmp_path, capsys, line):
    lines = [b"import math", b"", b"def f(x):", b"    return x * x", b"# end"]
    lines[line - 1] += b"  # caf\xe9"
    path = tmp_path / "latin.py"
    path.write_bytes(b"\n".join(lines) + b"\n")
    try:
        status = main([str(path)])
    except SystemExit as e:
        status = e.code
    assert status in (1, 2)
    assert "latin.py" in capsys.readouterr().err


def test_check_of_a_script_without_py_suffix(tmp_path, capsys):
    path = tmp_path / "train"
    path.write_text("def f(x):\n    return x * x\n")
    assert run(capsys, path)[0] == 0
    status, out, _ = run(capsys, path, "--check")
    assert status == 0 and ": ok" in out


def test_a_path_with_a_backslash_gives_source_that_compiles(tmp_path, capsys):
    directory = tmp_path / "C:\\Users\\me"
    directory.mkdir()
    path = write(directory, "def f(x):\n    return x * x\n")
    status, out, _ = run(capsys, path)
    assert status == 0
    compile(out, "printed", "exec")


def test_a_path_with_triple_quotes_is_differentiated(tmp_path, capsys):
    directory = tmp_path / 'q"""q'
    directory.mkdir()
    path = write(directory, "def f(x):\n    return x * x\n")
    status, out, err = run(capsys, path)
    assert (status, err) == (0, ""), err
    compile(out, "printed", "exec")


@pytest.mark.parametrize("name", ["out\\Users\\g.py", 'o"""x.py'])
def test_the_exported_module_compiles_whatever_the_output_path(tmp_path, capsys, name):
    path = write(tmp_path, "def f(x):\n    return x * x\n")
    out_path = tmp_path / name
    assert run(capsys, path, "-o", out_path)[0] == 0
    assert exported(out_path)["grad_f"](3.0) == (6.0,)


def test_output_onto_the_input_file_is_refused(tmp_path, capsys):
    source = "def f(x):\n    return x * x\n"
    path = write(tmp_path, source)
    try:
        main([path, "-o", path])
    except SystemExit:
        pass
    capsys.readouterr()
    assert Path(path).read_text() == source


def test_an_async_def_is_refused_as_such(tmp_path, capsys):
    path = write(tmp_path, "async def af(x):\n    return x\n\ndef f(x):\n    return x\n")
    with pytest.raises(SystemExit) as e:
        main([path, "-f", "af"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "has no top-level function 'af'" not in err
    assert f"{path}:1:1: cannot differentiate af: async functions are not supported" in err
    status, out, err = run(capsys, path)
    assert status == 0 and out.startswith("def grad_f(x):")
    assert err.startswith(f"{path}:1: note: skipped af: async functions are not supported")


# --- --check ---


def test_check_handles_domains_kinks_and_stop_gradient(tmp_path, capsys):
    path = write(tmp_path, """\
        import math
        import numpy as np
        from symdiff import stop_gradient as sg

        def logs(x, y):
            return np.log(x) + math.sqrt(y) + np.arcsin(x / 2.0)

        def kinks(x, y):
            return abs(x) + np.maximum(x, y) + np.clip(y, -0.1, 0.1)

        def straight(x):
            return x + sg(np.round(x) - x)

        def small(x):
            return np.arctanh(x) + np.arcsin(x)
        """)
    status, out, err = run(capsys, path, "--check")
    assert (status, err) == (0, ""), err
    assert out.count(": ok") == 4


def test_check_does_not_claim_ok_when_it_compared_nothing(tmp_path, capsys):
    path = write(tmp_path, "def f(x, n=3):\n    return x ** n\n")
    status, out, _ = run(capsys, path, "--check", "--wrt", "n")
    assert "()" not in out
    # Said as such, and not a failure (see symdiff --help).
    assert (status, out) == (0, "f: nothing to compare: n has an integer default\n")


def test_a_container_default_is_kept_and_its_gradient_has_its_structure(tmp_path, capsys):
    path = write(tmp_path, """\
        def f(x, p=(1.0, 2.0)):
            return x * p[0] * p[1] ** 2
        """)
    status, out, err = run(capsys, path)
    assert (status, err) == (0, ""), err
    assert "    p_0 = p[0]\n    p_1 = p[1]\n" in out
    assert out.endswith("    return (_fit(dx, x), (_fit(dp_0, p_0), _fit(dp_1, p_1)))\n")
    status, out, _ = run(capsys, path, "--check")
    assert (status, out.split(":")[0]) == (0, "f") and out.endswith(": ok\n")
    status, out, _ = run(capsys, path, "--check", "--wrt", "p")
    assert (status, out) == (0, "f: nothing to compare: p has a container default\n")


def test_check_of_a_correct_gradient_with_a_large_offset_agrees(tmp_path, capsys):
    path = write(tmp_path, "def f(x):\n    return 1e7 + x * x\n")
    status, out, err = run(capsys, path, "--check")
    assert (status, err) == (0, ""), err


# --- the kinds a file's function is built for ------------------------------------------

def test_kinds_come_from_shape_annotations_and_defaults():
    import ast as python_ast

    from symdiff import kinds
    from symdiff.cli import _kinds

    node = python_ast.parse(
        'def f(a, b: float, c: "(3, 4)", d: int, e=2, g=0.5, h=np.ones(3), *, k=None, m):\n'
        '    pass\n').body[0]
    found = _kinds(node, {"a": (2,), "m": ()}, kinds.FLOAT64)
    assert found == {"a": kinds.Array("float64", 1), "b": kinds.FLOAT,
                     "c": kinds.Array("float64", 2), "d": kinds.Number("int"),
                     "e": kinds.Number("int"), "g": kinds.FLOAT, "h": kinds.FLOAT64,
                     "k": kinds.Other("None"), "m": kinds.FLOAT}
    assert _kinds(node, {}, kinds.FLOAT)["a"] == kinds.FLOAT  # what --check draws


# --- Hessians: --order 2 (--hessian) ---

SECOND = '''\
import numpy as np
from symdiff import stop_gradient as sg

SCALE = 2.0
print("the file ran")


def f(x, y):
    return np.sin(x) * y ** 3 + x * sg(y)


def scaled(x, y):
    return sg(SCALE) * x ** 3 * y


def smooth(x, y):
    return np.exp(x * y) + np.log(1.0 + x ** 2) * y
'''


@pytest.fixture
def second(tmp_path):
    return write(tmp_path, SECOND, "second.py")


def test_order_2_prints_the_hessians_closed_formulas(second, capsys):
    status, out, err = run(capsys, second, "--order", "2", "--format", "math", "--ascii",
                           "-f", "f")
    assert (status, err) == (0, "")
    assert out == textwrap.dedent("""\
                                        3
        f(x, y) = x*stop_gradient(y) + y *sin(x)

                      3
        d^2f/dx^2 = -y *sin(x)

                        2
        d^2f/dx dy = 3*y *cos(x)

        d^2f/dy^2 = 6*y*sin(x)
        """)
    status, out, err = run(capsys, second, "--hessian", "--format", "latex", "-f", "scaled",
                           "--wrt", "x")
    assert (status, err) == (0, "")
    assert out == ("\\operatorname{scaled}(x, y) = x^{3} y "
                   "\\operatorname{stop\\_gradient}\\left(SCALE\\right)\n"
                   "\\frac{\\partial^{2} \\operatorname{scaled}}{\\partial x^{2}} = 6 x y "
                   "\\operatorname{stop\\_gradient}\\left(SCALE\\right)\n")


def test_order_2_source_is_one_program_per_row_that_computes_the_hessian(second, capsys):
    import gradcheck

    from symdiff import hessian
    from symdiff.compile import compile_source

    status, out, err = run(capsys, second, "--order", "2", "-f", "smooth")
    assert (status, err) == (0, "") and "the file ran" not in out
    assert out.startswith("# The Hessian of smooth in (x, y): row a is grad_dsmooth_da, the "
                          "gradient of dsmooth/da\n\ndef grad_dsmooth_dx(x, y):\n    \"\"\""
                          f"Gradient of dsmooth_dx ({second}:16) with respect to x, y.")
    assert "\ndef grad_dsmooth_dy(x, y):\n" in out
    assert "# grad of line 17: return np.exp(x * y)" in out
    module = gradcheck.live(second)
    h = hessian(module.smooth, wrt=("x", "y"))(0.3, -0.7)
    for i, row in enumerate(("dx", "dy")):
        source = out[out.index(f"def grad_dsmooth_{row}"):].split("\n\n\n")[0] + "\n"
        fn, _ = compile_source(source, f"grad_dsmooth_{row}", {}, "np")
        np.testing.assert_allclose(fn(0.3, -0.7), [h[i][0], h[i][1]], rtol=1e-12)


def test_order_2_with_an_array_prints_a_hessian_vector_product(tmp_path, capsys):
    path = write(tmp_path, "import numpy as np\n\ndef g(v, t):\n    return np.tanh(v) * t\n")
    status, out, err = run(capsys, path, "--order", "2", "--shape", "v=3")
    assert (status, err) == (0, "")
    assert out.startswith("# The Hessian of g in (v, t): grad_jvp_g(...) is H @ the tangents")
    assert "\ndef grad_jvp_g(v, t, v_dot, t_dot):\n" in out


def test_order_2_of_a_function_with_defaults_puts_the_tangents_after_its_parameters(
        tmp_path, capsys):
    path = write(tmp_path, "import numpy as np\n\ndef h(v: (3,), s=2.0):\n"
                           "    return np.sin(v) * s\n")
    status, out, err = run(capsys, path, "--order", "2")
    assert (status, err) == (0, "")
    assert "\ndef grad_jvp_h(v, s, v_dot, s_dot):\n" in out


def test_order_2_of_code_without_a_closed_formula_prints_the_note_and_programs(tmp_path,
                                                                              capsys):
    path = write(tmp_path, """\
        def h(x):
            if x > 0:
                return x ** 3
            return -x
        """)
    status, out, err = run(capsys, path, "--order", "2", "--format", "math")
    assert (status, err) == (0, "")
    assert out.startswith("# h: not a closed formula (it has control flow at line 2); shown "
                          "as a program:\n\n# The Hessian of h in (x): ")
    assert "def grad_dh_dx(x):" in out


def test_order_2_check_passes_with_stop_gradient_frozen(second, capsys):
    status, out, err = run(capsys, second, "--hessian", "--check", "-f", "scaled")
    assert (status, err) == (0, ""), err
    assert out.startswith("the file ran\nscaled: largest relative error ")
    assert out.endswith(" over 3 random points: ok\n")


def test_order_2_check_of_a_stop_gradient_of_a_parameter(second, capsys):
    status, out, err = run(capsys, second, "--hessian", "--check", "-f", "f")
    assert (status, err) == (0, "") and out.endswith(" over 3 random points: ok\n")
    status, out, err = run(capsys, second, "--hessian", "-f", "f")
    assert status == 0 and "_sg0 = y  # line 9: stop_gradient: no gradient flows back" in out


def test_order_2_writes_stop_gradient_by_the_files_own_name(tmp_path, capsys):
    path = write(tmp_path, """\
        from symdiff import stop_gradient as sg

        def stop_gradient(x):
            return x

        def g(x):
            return x * sg(x) ** 2
        """)
    status, out, err = run(capsys, path, "--hessian", "-f", "g")
    assert (status, err) == (0, "")
    # (the second derivative through the stop_gradient is zero)
    assert "stop_gradient: no gradient flows back" in out and "return (0.0,)" in out


def test_order_2_check_fails_where_the_hessian_is_wrong(second, capsys, monkeypatch):
    import symdiff.higher

    real = symdiff.higher._hessian_blocks

    def off(*args):
        rows = real(*args)
        return ((rows[0][0], rows[0][1] + 1e-3), rows[1])

    monkeypatch.setattr(symdiff.higher, "_hessian_blocks", off)
    status, out, err = run(capsys, second, "--order", "2", "--check", "-f", "scaled")
    assert status == 1
    assert "scaled" not in out and "DISAGREES" not in out
    assert err.startswith(f"{second}:12:1: error: the Hessian of scaled disagrees with central "
                          "differences of its gradient: relative error ")
    assert "in d^2scaled/dx dy at point " in err


def test_order_2_refuses_output(second, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main([second, "--order", "2", "-o", str(tmp_path / "out.py")])
    assert e.value.code == 2
    assert capsys.readouterr().err.endswith(
        "error: --output writes gradients; it does not write Hessians (--order 2): print "
        "their source instead (--format source)\n")
    for argv in ([second, "--order", "3"], [second, "--hessian=2"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2


def test_order_2_a_function_without_a_tangent_program_fails_located(tmp_path, capsys):
    path = write(tmp_path, """\
        def k(x):
            return {"a": x}["a"] * x
        """)
    status, out, err = run(capsys, path, "--order", "2")
    assert status == 1 and out == ""
    assert err.startswith(f"{path}:")


def test_hessian_as_a_subprocess(second):
    done = subprocess.run([sys.executable, "-m", "symdiff", second, "--hessian", "--format",
                           "math", "--ascii", "-f", "scaled", "--wrt", "y"],
                          capture_output=True, text=True, cwd=ROOT)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[-1] == "d^2scaled/dy^2 = 0"
    assert "--order {1,2}" in subprocess.run(
        [sys.executable, "-m", "symdiff", "--help"], capture_output=True, text=True,
        cwd=ROOT).stdout


def test_order_2_says_why_a_second_derivative_is_refused(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def s(x):
            return np.sinc(x) * x
        """)
    status, out, err = run(capsys, path, "--hessian")
    assert status == 1
    assert "second derivatives through this line are not supported" in err
    assert "generated code uses for itself" not in err


def test_a_gradient_called_inside_a_function_is_for_the_api(tmp_path, capsys):
    path = write(tmp_path, """\
        from symdiff import grad

        def f0(x):
            return x ** 3

        def g(x):
            return grad(f0)(x) ** 2
        """)
    status, out, err = run(capsys, path, "-f", "g")
    assert status == 1
    assert "a gradient called inside a function is differentiated by the Python API" in err


# --- symdiff audit FILE: the stop_gradient audit of each function ---

AUDITED = """\
import numpy as np
from symdiff import stop_gradient as sg

print("the audited file ran")


def softmax_nll(x: 5, k=2):
    z = x - sg(np.max(x))
    return np.log(np.sum(np.exp(z))) - z[k]


def td(w: 3, s: 3, s2: 3, r):
    return (r + 0.9 * sg(np.dot(w, s2)) - np.dot(w, s)) ** 2


def useless(w: 3, c: 3):
    return np.sum(w * sg(c ** 2))


def plain(x):
    return x ** 2


def odd(x: 4):
    return np.fft.fft(x).real.sum()
"""


def test_audit_prints_each_functions_sites_and_exits_0_when_none_looks_like_a_bug(tmp_path,
                                                                                   capsys):
    path = write(tmp_path, AUDITED)
    status, out, err = run(capsys, "audit", path, "-f", "softmax_nll", "-f", "td", "-f",
                           "plain", "--wrt", "x,w")
    assert (status, err) == (0, ""), err
    assert out.startswith("the audited file ran\n")  # audit runs FILE, as --check does
    blocks = out.split("\n\n")
    assert blocks[0].splitlines()[1].startswith("stop_gradient audit of softmax_nll (m.py:7)")
    assert "blocks nothing here: the gradient is the same without it" in blocks[0]
    assert "line 13:23" in blocks[1] and "% of the gradient of w" in blocks[1]
    assert "plain calls no stop_gradient" in blocks[2]


def test_audit_exits_1_on_a_stop_gradient_with_no_effect(tmp_path, capsys):
    path = write(tmp_path, AUDITED)
    status, out, err = run(capsys, "audit", path, "-f", "useless", "--wrt", "w")
    assert status == 1 and err == ""
    assert "! no effect: c ** 2 does not depend on w" in out
    # Every parameter differentiated by default (as --check): c's gradient is then zero.
    status, out, _ = run(capsys, "audit", path, "-f", "useless")
    assert status == 1 and "! the gradient of c is zero" in out


def test_audit_skips_what_it_cannot_differentiate_unless_named(tmp_path, capsys):
    path = write(tmp_path, AUDITED)
    status, out, err = run(capsys, "audit", path, "--wrt", "x,w")
    assert f"{path}:25: note: skipped odd: attribute .real is not supported\n" in err
    assert status == 1  # useless, with w alone, has no effect
    status, out, err = run(capsys, "audit", path, "-f", "odd")
    assert status == 1 and "attribute .real is not supported" in err and "note" not in err
    assert "^" in err  # named, it fails with the located error in full


def test_audit_json_is_a_list_of_reports(tmp_path, capsys):
    path = write(tmp_path, AUDITED.replace('print("the audited file ran")\n', ""))
    status, out, err = run(capsys, "audit", path, "-f", "td", "--wrt", "w", "--shape", "w=3",
                           "--format", "json")
    data = json.loads(out)
    assert status == 0 and [r["function"] for r in data] == ["td"]
    assert data[0]["schema"] == "symdiff.audit/1" and data[0]["wrt"] == ["w"]
    assert data[0]["sites"][0]["effect"] == "blocks"
    # Data differentiated too (every parameter, by default): s2's gradient is zero.
    status, out, _ = run(capsys, "audit", path, "-f", "td", "--format", "json")
    sites = json.loads(out)[0]["sites"]
    assert status == 1 and sites[0]["effect"] == "zero gradient" and sites[0]["likely_bug"]


def test_audit_usage_errors(tmp_path, capsys):
    path = write(tmp_path, AUDITED)
    with pytest.raises(SystemExit) as e:
        main(["audit", path, "-f", "nope"])
    assert e.value.code == 2 and "has no top-level function 'nope'" in capsys.readouterr().err
    raising = write(tmp_path, "raise ValueError('boom')\n", name="bad.py")
    status, out, err = run(capsys, "audit", raising)
    assert status == 1 and "audit runs" in err and "ValueError: boom" in err


def test_audit_as_a_command(tmp_path):
    path = write(tmp_path, AUDITED)
    done = subprocess.run([sys.executable, "-m", "symdiff", "audit", path, "-f", "useless",
                           "--wrt", "w"], capture_output=True, text=True)
    assert done.returncode == 1 and "no effect" in done.stdout


# --- the command line on real files: version, standard input, binary files, --shape ---


def test_version(capsys):
    from symdiff import __version__

    for argv in (["--version"], ["audit", "--version"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert (e.value.code, capsys.readouterr().out) == (0, f"symdiff {__version__}\n")
    done = _symdiff(ROOT, "--version")
    assert (done.returncode, done.stdout) == (0, f"symdiff {__version__}\n")


STDIN_SOURCE = "import numpy as np\n\ndef f(x):\n    return np.sin(x)\n\ndef g(x):\n" \
               "    return np.fft.fft(x)\n"


def test_dash_reads_the_source_from_standard_input(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(STDIN_SOURCE.encode())))
    status, out, err = run(capsys, "-", "--format", "math")
    assert (status, out) == (0, "f(x) = sin(x)\ndf/dx = cos(x)\n")
    assert err == "<stdin>:7: note: skipped g: np.fft.fft is not supported\n"
    done = subprocess.run([sys.executable, "-m", "symdiff", "-", "-f", "g"], input=STDIN_SOURCE,
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("<stdin>:7:12: error: np.fft.fft is not supported\n"
                                  "        return np.fft.fft(x)\n")
    done = subprocess.run([sys.executable, "-m", "symdiff", "-"], input=STDIN_SOURCE,
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 0 and 'Gradient of f (<stdin>:3)' in done.stdout


@pytest.mark.parametrize("argv", [["-", "--check"], ["-", "-o", "g.py"], ["audit", "-"]])
def test_dash_with_what_runs_or_reads_the_file_again_is_a_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "standard input (-)" in capsys.readouterr().err


@pytest.mark.parametrize("data", [bytes(range(256)) * 4, b"\x89PNG\r\n\x1a\n\xff\xfe",
                                  b"def f(x):\n    return x\x00\x01\xff * x\n"])
def test_a_binary_file_is_an_error_that_does_not_echo_its_bytes(tmp_path, capsys, data):
    path = tmp_path / "blob.py"
    path.write_bytes(data)
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    assert err.startswith(f"{path}:") and "binary" in err
    assert err.endswith("\n  supported instead: give symdiff a Python source file\n")
    assert len(err.splitlines()) == 2 and "\ufffd" not in err and "PNG" not in err
    done = _symdiff(tmp_path, str(path))
    assert done.returncode == 1 and done.stderr == err and done.stdout == ""


def test_a_latin1_file_is_still_echoed_with_a_caret(tmp_path, capsys):
    path = tmp_path / "latin.py"
    path.write_bytes(b"def f(x):\n    s = 'caf\xe9'\n    return x\n")
    status, _, err = run(capsys, path)
    assert status == 1 and err.splitlines()[1:3] == ["        s = 'caf\ufffd'",
                                                     "                ^"]


def test_shape_without_check_or_naming_no_parameter_is_a_usage_error(tmp_path, capsys):
    path = write(tmp_path, "import numpy as np\n\ndef f(x):\n    return np.sum(x * x)\n")
    for argv in ([path, "--shape", "x=3"], [path, "--shape", "x=3", "-o", tmp_path / "g.py"],
                 ["audit", path, "--shape", "X=3"]):
        with pytest.raises(SystemExit) as e:
            main([str(a) for a in argv])
        assert e.value.code == 2, argv
        assert "--shape" in capsys.readouterr().err
    # Where it is used: --check, --order 2 (its programs), audit.
    assert run(capsys, path, "--check", "--shape", "x=3")[0] == 0
    status, out, _ = run(capsys, path, "--order", "2", "--shape", "x=3")
    assert status == 0 and "grad_jvp_f" in out
    assert run(capsys, "audit", path, "--shape", "x=3")[0] == 0
    done = _symdiff(tmp_path, path, "--shape", "x=3")
    assert done.returncode == 2 and "--shape gives the shapes" in done.stderr


def test_coverage_prints_the_readme_table_the_hints_point_to(capsys):
    from symdiff.coverage import table

    assert run(capsys, "coverage") == (0, table() + "\n", "")
    readme = (ROOT / "README.md").read_text()
    assert table() in readme  # (tools/coverage.py writes it there)
    assert "| `np.sin`, `math.sin` | elementwise |" in table()
    done = _symdiff(ROOT, "coverage")
    assert (done.returncode, done.stdout) == (0, table() + "\n")
    with pytest.raises(SystemExit) as e:
        main(["coverage", "--bogus"])
    assert e.value.code == 2


DATA_FILE = """\
    import numpy as np

    rng = np.random.default_rng(0)
    DATA = rng.normal(size=(5, 3))
    print("ran")


    def loss(w: 3):
        return np.sum(np.tanh(DATA @ w) ** 2)


    def plain(x):
        return x * x
    """


def test_check_builds_from_the_run_file_what_reads_data_computed_when_it_runs(tmp_path, capsys):
    path = write(tmp_path, DATA_FILE)
    # Read without running it, DATA is not known: loss is skipped.
    status, out, err = run(capsys, path)
    assert status == 0 and "grad_loss" not in out and "grad_plain" in out
    assert err.startswith(f"{path}:9: note: skipped loss: 'DATA' is set at module level")
    # --check runs the file (once), and checks loss on DATA as loss sees it.
    status, out, err = run(capsys, path, "--check")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "ran" and lines.count("ran") == 1
    assert lines[1].startswith("loss: largest relative error") and lines[1].endswith(": ok")
    status, out, err = run(capsys, path, "--check", "--format", "source", "-f", "loss")
    assert (status, err) == (0, "") and "_t0 = DATA @ w  # line 9" in out
    status, out, err = run(capsys, path, "--check", "--order", "2", "-f", "loss")
    assert (status, err) == (0, "") and out.startswith("ran\nloss: largest relative error")
    assert out.endswith(": ok\n")
    done = _symdiff(tmp_path, path, "--check")
    assert (done.returncode, done.stderr) == (0, "") and done.stdout.count(": ok") == 2
    # Not exported: the module written would hold this run's DATA as a constant.
    status, out, err = run(capsys, path, "--check", "-o", tmp_path / "g.py")
    assert status == 0 and "def grad_loss" not in (tmp_path / "g.py").read_text()
    assert f"{path}:9: note: skipped loss: 'DATA' is set at module level" in err


def test_check_of_data_computed_when_the_file_runs_still_catches_a_wrong_gradient(
        tmp_path, capsys, monkeypatch):
    path = write(tmp_path, DATA_FILE)
    row = rules.lookup(np.tanh)
    monkeypatch.setitem(rules._BY_ID, id(np.tanh), (np.tanh, dataclasses.replace(
        row, sympy=sp.sin)))
    status, out, err = run(capsys, path, "--check", "-f", "loss")
    assert (status, out) == (1, "ran\n")
    assert err.startswith(f"{path}:8:1: error: the gradient of loss disagrees with central "
                          "differences")


# --- parameters used only as integers are not differentiated by default ---


INTEGER_FILE = """\
    import numpy as np
    from symdiff import stop_gradient


    def pick(x, i):
        return x[i] * 2.0


    def loop(x, n, steps=2):
        s = 0.0
        for _ in range(steps):
            s = s + np.sum(np.zeros(n) + x * x)
        return s


    def kept(x, c, k):
        return np.sum(x * c) + x[k] * k + stop_gradient(c)
    """
INTEGER_NOTE = ("note: {f}: {p} is used only as an integer (an index, a count): not "
                "differentiated; --wrt names it to differentiate it anyway")


def test_parameters_used_only_as_integers_are_left_out_of_the_default_wrt(tmp_path, capsys):
    path = write(tmp_path, INTEGER_FILE)
    status, out, err = run(capsys, path)
    assert status == 0 and out.count("def grad_") == 2, err  # kept: x[k] with k in wrt
    assert err.splitlines()[:3] == [
        f"{path}:5: " + INTEGER_NOTE.format(f="pick", p="i"),
        f"{path}:9: " + INTEGER_NOTE.format(f="loop", p="n"),
        f"{path}:9: " + INTEGER_NOTE.format(f="loop", p="steps")]
    assert "with respect to x.\n" in out and "return (_fit(dx, x),)" in out
    assert f"{path}:17: note: skipped kept: index must not depend" in err
    assert "kept:" not in err.replace(f"{path}:17: note: skipped kept", "")
    # --wrt names it: differentiated anyway (n's gradient is zero), no note.
    status, out, err = run(capsys, path, "-f", "loop", "--wrt", "x,n")
    assert (status, err) == (0, "") and "return (_fit(dx, x), _fit(0.0, n))" in out
    status, out, _ = run(capsys, path, "-f", "pick")
    assert status == 0 and "dx = _scatter(d_t0, x, np.index_exp[i])" in out
    done = _symdiff(tmp_path, path, "-f", "loop")
    assert done.returncode == 0 and done.stderr.count("is used only as an integer") == 2


def test_check_draws_parameters_used_only_as_integers_as_integers(tmp_path, capsys):
    path = write(tmp_path, INTEGER_FILE)
    status, out, err = run(capsys, path, "--check", "--shape", "x=3", "-f", "pick", "-f",
                           "loop")
    assert status == 0, err
    assert out.splitlines() == [line for line in out.splitlines() if line.endswith(": ok")]
    assert len(out.splitlines()) == 2
    # Named with --wrt, i is a float again: x[i] then fails (as it does in NumPy).
    status, out, err = run(capsys, path, "--check", "--shape", "x=3", "-f", "pick",
                           "--wrt", "x,i")
    assert status == 1 and err.startswith(f"{path}:6:14: error: index must not depend on the "
                                          "differentiated inputs")


@pytest.mark.parametrize("source, expected", [
    ("def f(x, i):\n    return x[i]\n", ("i",)),
    ("def f(x, i):\n    return x[i + 1, :] @ x[:, 2 * i]\n", ("i",)),
    ("def f(x, a, b):\n    return x[a:b].sum()\n", ("a", "b")),
    ("def f(x, n):\n    return np.sum(np.ones((n, 2)) * x)\n", ("n",)),
    ("def f(x, k):\n    return np.sum(x, axis=k)\n", ("k",)),
    ("def f(x, i=2):\n    return x[i]\n", ("i",)),
    ("def f(x, i: int):\n    return x[i]\n", ("i",)),
    # Kept (a float would be a silently missing gradient): any other use, a float
    # annotation or default, rebinding, another scope, a division.
    ("def f(x, k):\n    return x[k] * k\n", ()),
    ("def f(x, c):\n    return np.full(3, c) * x\n", ()),
    ("def f(x, c):\n    return x[0] if c > 0 else x[1]\n", ()),
    ("def f(x, i: float):\n    return x[i]\n", ()),
    ("def f(x, i=2.0):\n    return x[int(i)]\n", ()),
    ("def f(x, i):\n    i = i + 1\n    return x[i]\n", ()),
    ("def f(x, i):\n    return (lambda: x[i])()\n", ()),
    ("def f(x, i):\n    return x[i / 2]\n", ()),
    ("def f(x, i):\n    return helper(x, i)\n", ()),
])
def test_integer_only_reads_uses_conservatively(source, expected):
    import ast

    from symdiff.integer_uses import integer_only

    assert integer_only(ast.parse(source).body[0]) == expected


def test_audit_leaves_out_and_draws_integer_parameters_as_the_check_does(tmp_path, capsys):
    path = write(tmp_path, textwrap.dedent(INTEGER_FILE) + "\n\ndef st(x, i):\n"
                 "    return x[i] * stop_gradient(x[i])\n")
    status, out, err = run(capsys, "audit", path, "-f", "st", "--shape", "x=3")
    assert f"{path}:20: " + INTEGER_NOTE.format(f="st", p="i") in err
    assert "error" not in err and "stop_gradient audit of st" in out
    assert out.startswith("stop_gradient audit of st (m.py:20) with respect to x\n")
    assert "blocks 50% of the gradient of x" in out and status == 0
