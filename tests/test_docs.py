"""The README and the examples stay true: the coverage table is current, examples run."""

import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def test_readme_coverage_table_is_generated_from_the_rules():
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "coverage.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


def test_readme_example_prints_the_source_the_readme_shows(tmp_path):
    readme = (ROOT / "README.md").read_text()
    example, shown = re.findall(r"```python\n(.*?)```", readme, re.S)[:2]
    path = tmp_path / "example.py"
    path.write_text(example)
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         env=dict(os.environ, SYMDIFF_CACHE_DIR="off"))
    assert run.returncode == 0, run.stderr
    printed = run.stdout[run.stdout.index("def grad_loss"):]
    # After the docstring, which the README shortens, line for line.
    assert printed.rstrip("\n").splitlines()[6:] == shown.splitlines()[4:]


def test_stable_softmax_example_runs_and_matches(capsys):
    runpy.run_path(str(ROOT / "examples" / "stable_softmax.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "_sg0 = np.max(x)" in out and "z = x - _sg0" in out
    assert "stable [" in out and "nan" in out.split("stable [")[0].splitlines()[-1]


def test_stable_softmax_gradient_is_softmax_minus_target_with_ties():
    mod = runpy.run_path(str(ROOT / "examples" / "stable_softmax.py"))
    from symdiff import grad

    t = np.array([0.0, 1.0, 0.0, 0.0])
    for x in (np.array([3.0, 1.0, 3.0, 3.0]), np.array([0.1, 0.2, -0.3, 5.0])):
        e = np.exp(x - x.max())
        np.testing.assert_allclose(grad(mod["stable"])(x, t), e / e.sum() - t)
        np.testing.assert_allclose(grad(mod["naive"])(x, t), e / e.sum() - t)


def test_control_flow_example_fits_through_outliers(capsys):
    mod = runpy.run_path(str(ROOT / "examples" / "control_flow.py"))
    w = mod["main"]()
    out = capsys.readouterr().out
    assert "if _t0:  # the branch the forward sweep took" in out
    assert "in reversed(_tape0):" in out
    np.testing.assert_allclose(w, [1.0, -2.0, 0.5], atol=0.1)
