"""Adversarial tests of the command line, the static reader, --check, --output, the formulas
and the caches: inputs chosen to make them crash, lie, or silently give a wrong gradient.

Passing tests are regressions. Tests marked ``xfail(strict=True)`` are bugs; each reason
says what is wrong. When a bug is fixed its test starts passing and strict xfail makes
that visible: remove the marker then.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import itertools
import json
import linecache
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from symdiff import SymdiffError, cache, grad
from symdiff.check import parameter_shape
from symdiff.cli import main
from symdiff.formula import StopGradient, _display, formula
from symdiff.ir import symbol
from symdiff.lower import lower
from symdiff.parse import parse

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
_count = itertools.count()


# --- helpers ---


def write(directory, text, name="m.py"):
    path = Path(directory) / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def live(path):
    """Import ``path`` under a fresh module name, as --check does."""
    name = f"adv_cli_live_{next(_count)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exported(path):
    """Exec an exported module's text in a fresh namespace (symdiff not needed by it)."""
    namespace = {"__name__": f"adv_cli_exported_{next(_count)}"}
    exec(compile(Path(path).read_text(), str(path), "exec"), namespace)
    return namespace


def unique(prefix):
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# In a clean interpreter where importing SymPy or symdiff fails: import each exported
# module and evaluate the named gradients at the given points.
_CLEAN = """
import importlib.util, json, sys
sys.modules["sympy"] = None
sys.modules["symdiff"] = None
import numpy as np
jobs = json.loads(sys.argv[1])
out = {}
for k, (path, name, args, kwargs) in enumerate(jobs):
    spec = importlib.util.spec_from_file_location(f"exported_{k}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = [np.array(a) if isinstance(a, list) else a for a in args]
    kwargs = {n: np.array(a) if isinstance(a, list) else a for n, a in kwargs.items()}
    gradient = getattr(module, "grad_" + name)
    out[str(k)] = [np.asarray(g).tolist() for g in gradient(*args, **kwargs)]
print(json.dumps(out))
"""


def run_clean(jobs):
    done = subprocess.run([sys.executable, "-c", _CLEAN, json.dumps(jobs)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def draw(shape, rng):
    return rng.uniform(0.5, 1.5, shape).tolist() if shape else float(rng.uniform(0.5, 1.5))


# --- reading FILE without running it: imports and constants ---


IMPORTS = '''\
import math as m
import numpy.linalg as la
import numpy as np
import numpy as xp
from math import exp
from typing import TYPE_CHECKING
from numpy import *

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

A = 2.0
B = A * 3 + 1            # 7.0, read before A is reassigned below
C = (1.5, -2.0)
D = -B
E = np.array([1.0, 2.0, 3.0])
F = np.arange(3) * 0.5
G = np.float32(0.25)
H = {"k": 2.0}
A = 4.0


def norm2(v: "(3,)"):
    return la.norm(v) * A + np.sum(E * F * v) * H["k"]


def star(x: "ArrayLike"):
    return sin(x) * exp(x) + m.pi * x + tanh(x) * C[1]


def late(x, y=1.5):
    return x * LATE + xp.cos(y) * D + G * x * B


def kwonly(x, *, t=2.0):
    return x ** t


def posonly(x, /, y):
    return x * y


LATE = 7.0
'''


def test_unusual_imports_and_constants_print_what_grad_compiles(tmp_path, capsys):
    path = write(tmp_path, IMPORTS)
    status, out, err = run(capsys, path)
    assert (status, err) == (0, ""), err
    m = live(path)
    names = ["norm2", "star", "late", "kwonly", "posonly"]
    expected = [grad(getattr(m, n), wrt=tuple(inspect.signature(getattr(m, n)).parameters))
                .source for n in names]
    assert out == "\n\n".join(expected)


def test_unusual_imports_and_constants_export_matches_grad_in_a_clean_process(tmp_path,
                                                                             capsys):
    path = write(tmp_path, IMPORTS)
    out_path = tmp_path / "adv_exported_imports.py"
    status, _, err = run(capsys, path, "-o", out_path)
    assert (status, err) == (0, ""), err
    text = out_path.read_text()
    assert "B = 7.0" in text and "A = 4.0" in text and "LATE = 7.0" in text
    m = live(path)
    rng = np.random.default_rng(3)
    jobs, expected = [], []
    for name in ["norm2", "star", "late", "kwonly", "posonly"]:
        fn = getattr(m, name)
        params = list(inspect.signature(fn).parameters.values())
        args, kwargs = [], {}
        for p in params:
            value = draw(parameter_shape(p, {}), rng)
            if p.kind == p.KEYWORD_ONLY:
                kwargs[p.name] = value
            else:
                args.append(value)
        jobs.append((str(out_path), name, args, kwargs))
        expected.append(grad(fn, wrt=tuple(p.name for p in params))(
            *[np.array(a) if isinstance(a, list) else a for a in args], **kwargs))
    result = run_clean(jobs)
    for k, want in enumerate(expected):
        for got, w in zip(result[str(k)], want, strict=True):
            np.testing.assert_allclose(got, w, rtol=1e-12)


def test_an_import_inside_a_function_is_a_located_error(tmp_path, capsys):
    path = write(tmp_path, """\
        def f(x):
            import math
            return math.sin(x)
        """)
    status, out, err = run(capsys, path)
    assert (status, out) == (1, "")
    assert err.startswith(f"{path}:2:5: error: 'import' statements are not supported")


def test_a_relative_import_used_by_a_function_is_explained(tmp_path, capsys):
    path = write(tmp_path, """\
        from .sibling import helper

        def f(x):
            return helper(x)
        """)
    status, _, err = run(capsys, path)
    assert status == 1
    assert err.startswith(f"{path}:4:12: error: 'helper' is set at module level (line 1)")
    assert "a relative import, which needs the file's package" in err


def test_helpers_calling_each_other_with_constants_defined_after_them(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np
        from symdiff import stop_gradient as sg

        def a(u):
            return b(u) * K1

        def b(u):
            return np.tanh(u) + c(u)

        def c(u, k=2.0):
            return u ** 2 * k + T[0]

        def f(x):
            return a(x) * sg(a(x * 2.0)) + c(x, k=K2)

        K1 = 1.5
        K2 = -0.5
        T = (0.25, 9.0)
        """)
    status, out, err = run(capsys, path, "--check")
    assert (status, err) == (0, ""), err
    assert out.count(": ok") == 4
    out_path = tmp_path / "g.py"
    assert run(capsys, path, "-o", out_path)[0] == 0
    ns = exported(out_path)
    m = live(path)
    for x in (0.3, -1.1):
        assert ns["grad_f"](x)[0] == pytest.approx(grad(m.f)(x), rel=1e-12)


def test_classes_and_lambdas_are_skipped_and_their_use_is_a_located_error(tmp_path, capsys):
    path = write(tmp_path, """\
        class Model:
            def loss(self, x):
                return x * 2.0

        sq = lambda u: u ** 2

        def uses(x):
            return Model().loss(x)

        def f(x):
            return x * 3.0
        """)
    status, out, err = run(capsys, path)
    assert status == 1 and out.startswith("def grad_f(x):")
    assert err.startswith(f"{path}:8:12: error: 'Model' is set at module level (line 1)")
    assert "a class definition" in err
    with pytest.raises(SystemExit) as e:
        main([path, "-f", "sq"])
    assert e.value.code == 2


# A name changed in place at module level is refused where it is read (a located error),
# not exported: the static reader does not run the statements that change it, so the only
# value it could write is the first one, which is wrong.
@pytest.mark.parametrize("change, shown", [
    ("W[0] = 5.0", "W[0] = 5.0"),
    ("W += 1.0", "W += 1.0"),
    ("W.fill(5.0)", "W.fill(5.0)"),
    ("np.copyto(W, 5.0)", "np.copyto(W, 5.0)"),
    ("for i in range(3):\n    W[i] = i", "W[i] = i"),
])
def test_a_constant_mutated_in_place_is_not_exported_with_its_first_value(tmp_path, capsys,
                                                                          change, shown):
    path = write(tmp_path, "import numpy as np\n\nW = np.zeros(3)\n" + change + """

def f(x: "(3,)"):
    return np.sum(W * x)
""")
    out_path = tmp_path / "g.py"
    status, _, err = run(capsys, path, "-o", out_path)
    extra = change.count("\n")
    assert status == 1 and not out_path.exists()
    assert err.startswith(f"{path}:{7 + extra}:19: error: 'W' is changed in place at module "
                          f"level (line {4 + extra}: {shown})"), err


def test_names_sharing_data_with_a_changed_name_and_lists_are_refused(tmp_path, capsys):
    # V = W is the same array (and T holds it): changing W changes them too.
    path = write(tmp_path, """\
        import numpy as np

        W = np.zeros(3)
        V = W
        T = (W, 1.0)
        L = [1.0]
        W[0] = 5.0
        L.append(2.0)
        S = 2.0
        S += 1.0

        def f(x):
            return x * V[0] + x * T[1] + x * L[0]

        def g(x):
            return x * S
        """)
    status, out, err = run(capsys, path)
    assert status == 1 and out.startswith("def grad_g(x):")  # S, a float, is rebound
    assert f"{path}:13:16: error: 'V' shares its data with 'W', which is changed in place" in err
    assert f"{path}:13:27: error: 'T' shares its data with 'W'" in err
    assert f"{path}:13:38: error: 'L' is changed in place at module level (line 8: " \
        "L.append(2.0))" in err


def test_a_function_name_reused_in_the_main_block_is_still_differentiated(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def loss(x):
            return np.sin(x) * x

        if __name__ == "__main__":
            for loss in (1.0, 2.0):
                print(loss)
        """)
    status, out, _ = run(capsys, path)
    assert status == 0 and "def grad_loss(x):" in out


# A decorated helper is refused where it is called (a located error): the decorator could
# change what it computes (here @grad makes dsq the derivative 2x), so its body is not it.
# A decorated top-level function is skipped with a note, and -f on it is a usage error.
def test_a_decorated_helper_is_not_differentiated_as_its_undecorated_body(tmp_path, capsys):
    path = write(tmp_path, """\
        from symdiff import grad

        @grad
        def dsq(x):
            return x ** 2

        def f(x):
            return dsq(x) * 3.0
        """)
    out_path = tmp_path / "g.py"
    status, _, err = run(capsys, path, "-f", "f", "-o", out_path)
    assert status == 1 and not out_path.exists()
    assert err.startswith(f"{path}:8:12: error: 'dsq' is decorated (@grad, line 4): decorated "
                          "functions are not read statically"), err
    status, out, err = run(capsys, path)
    assert status == 1 and out == ""
    assert err.startswith(f"{path}:4:1: note: skipped dsq: it is decorated (@grad)"), err
    with pytest.raises(SystemExit) as e:
        main([path, "-f", "dsq"])
    assert e.value.code == 2
    assert "cannot differentiate dsq: it is decorated (@grad)" in capsys.readouterr().err


def test_a_nested_function_parameter_does_not_read_the_module_level_name(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np
        W = np.load("w.npy")

        def f(x):
            def inner(W):
                return W * 2.0
            return inner(x) * x
        """)
    status, out, err = run(capsys, path)
    assert (status, err) == (0, ""), err
    assert out.startswith("def grad_f(x):")


def test_a_sibling_module_that_exits_on_import_does_not_end_the_cli(tmp_path, capsys):
    sidecar = unique("adv_sidecar")
    (tmp_path / f"{sidecar}.py").write_text("import sys\nsys.exit('refusing to import')\n")
    path = write(tmp_path, f"""\
        import {sidecar}

        def f(x):
            return x * 2.0
        """)
    try:
        status, out, _ = run(capsys, path)
    except SystemExit as e:
        status, out = ("SystemExit", e.code), ""
    assert status == 0 and out.startswith("def grad_f(x):")


def circular(tmp_path, capsys, helper_imports, file_head, body="u * 3.0"):
    """Run the CLI on FILE whose helper module imports FILE back; ``(status, out, err)``."""
    name, helpers = unique("adv_model"), unique("adv_utils")
    (tmp_path / f"{helpers}.py").write_text(helper_imports.format(name=name) +
                                            f"\n\ndef helper(u):\n    return {body}\n")
    path = write(tmp_path, f"""\
        print("THE FILE WAS RUN")
        {file_head}
        from {helpers} import helper

        def f(x):
            return helper(x) * 2.0
        """, name=f"{name}.py")
    try:
        return (*run(capsys, path), helpers)
    finally:
        for n in (name, helpers):
            sys.modules.pop(n, None)


def test_a_circular_import_does_not_run_the_file(tmp_path, capsys):
    status, out, err, _ = circular(tmp_path, capsys, "import {name}", "")
    assert "THE FILE WAS RUN" not in out + err
    assert status == 0 and out.startswith("def grad_f(x):"), err


def test_a_circular_import_that_reads_the_file_is_reported_not_run(tmp_path, capsys):
    status, out, err, helpers = circular(tmp_path, capsys, "from {name} import SCALE",
                                         "SCALE = 3.0", body="u * SCALE")
    assert "THE FILE WAS RUN" not in out + err
    assert status != 0 and f"{helpers}.py:4:16: error: 'SCALE' is set at module level" in err
    assert "cannot import name 'SCALE'" in err and "(a circular import)" in err, err


def test_the_optional_import_fallback_in_an_except_handler_is_read(tmp_path, capsys):
    path = write(tmp_path, """\
        try:
            import cupy_not_installed_here as xp
        except ImportError:
            import numpy as xp

        try:
            from scipy_not_installed_here.special import expit
        except ImportError:
            def expit(z):
                return 1.0 / (1.0 + xp.exp(-z))

        def f(x):
            return xp.sin(x) * expit(x)
        """)
    status, out, err = run(capsys, path)
    assert (status, err) == (0, ""), err
    assert out == grad(live(path).f, wrt=("x",)).source


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
    assert (status, out) == (1, "") and "error: source code string cannot contain null" in err
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
    assert err.startswith(f"{path}:1:1: note: skipped af: async functions are not supported")


# --- --format math / latex ---


FORMULAS = '''\
import math
import numpy as np
from symdiff import stop_gradient as sg

C = 0.3

def ab(x):
    return abs(x) * x

def mx(x, y):
    return np.maximum(x, y) * x + min(x, y)

def clip(x):
    return np.clip(x, -0.5, 0.5) * x + np.clip(x, None, 0.7)

def relu2(x):
    return max(x, 0.0) ** 2

def fm(x):
    return np.fmax(x, 0.3) + np.fmin(x, -0.2)

def flat(x):
    return np.sign(x) * x + np.floor(x) + np.round(x, 1) + x % 1.0 + x // 0.5

def stopped(x):
    return x * sg(x) + sg(x ** 2) * C

def special(x):
    return np.hypot(x, 2.0) + np.logaddexp(x, 1.0) + np.logaddexp2(x, 0.5) + np.cbrt(x)

def trig(x, y):
    return math.erf(x) + np.arctan2(y, x) + math.hypot(x, y) + np.arctanh(x / 3.0)

def powers(x, y):
    return np.power(abs(x), y) + x ** -1 + math.pow(y, 3) + np.float_power(abs(y), 0.5)

def augmented(x):
    y = x
    y += 1.0
    y *= x
    y **= 2
    y /= 3.0
    return y
'''


def _lambdified(expr, params, data):
    expr = _display(expr).replace(StopGradient, lambda a: a).subs(data)
    expr = expr.replace(sp.Function("round"), lambda *a: sp.Function("np_round")(*a))
    table = {"Heaviside": lambda a, h=0.5: np.heaviside(a, h), "cbrt": np.cbrt,
             "np_round": np.round, "FMax": np.fmax, "FMin": np.fmin,
             "NanStep": lambda a, b: np.heaviside(a - b, 0.5)}
    return sp.lambdify([symbol(p) for p in params], expr, modules=[table, "numpy", "scipy"])


def test_closed_formulas_equal_the_function_and_the_gradient_numerically(tmp_path):
    m = live(write(tmp_path, FORMULAS))
    rng = np.random.default_rng(7)
    for name in ["ab", "mx", "clip", "relu2", "fm", "flat", "stopped", "special", "trig",
                 "powers", "augmented"]:
        fn = getattr(m, name)
        params = tuple(inspect.signature(fn).parameters)
        f = formula(lower(parse(fn), params))
        assert f.closed, (name, f.reason)
        data = {s: getattr(m, s.name) for s in f.value.free_symbols if s.name not in params}
        value = _lambdified(f.value, params, data)
        partials = [_lambdified(d, params, data) for _, d in f.partials]
        for _ in range(4):
            point = [float(rng.uniform(0.2, 1.4) * rng.choice([-1.0, 1.0])) for _ in params]
            assert float(value(*point)) == pytest.approx(fn(*point), rel=1e-9), name
            want = grad(fn, wrt=params)(*point)
            got = [float(d(*point)) for d in partials]
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=name)


def test_latex_of_stop_gradient_and_operators(tmp_path, capsys):
    path = write(tmp_path, FORMULAS)
    status, out, _ = run(capsys, path, "--format", "latex", "-f", "stopped", "-f", "clip")
    assert status == 0
    assert out.splitlines()[:2] == [
        "\\operatorname{stopped}(x) = C \\operatorname{stop\\_gradient}\\left(x^{2}\\right)"
        " + x \\operatorname{stop\\_gradient}\\left(x\\right)",
        "\\frac{\\partial \\operatorname{stopped}}{\\partial x} = "
        "\\operatorname{stop\\_gradient}\\left(x\\right)"]
    assert out.count("{") == out.count("}")


def test_fmax_and_fmin_are_shown_as_mathematical_functions(tmp_path, capsys):
    path = write(tmp_path, FORMULAS)
    status, out, _ = run(capsys, path, "--format", "math", "-f", "fm")
    assert status == 0
    assert not {"FMax", "FMin", "NanStep"} & set(out.replace("(", " ").split())


def test_a_formula_names_only_parameters_and_module_names(tmp_path, capsys):
    path = write(tmp_path, """\
        def f(x, y):
            x = x * 2.0
            return x * (x > y)
        """)
    status, out, _ = run(capsys, path, "--format", "math")
    assert status == 0 and "x_1" not in out


def test_parameters_named_like_constants_are_told_apart_in_formulas(tmp_path, capsys):
    path = write(tmp_path, """\
        import numpy as np

        def f(pi, e):
            return pi * e + np.pi * np.e
        """)
    status, out, _ = run(capsys, path, "--format", "math")
    assert status == 0 and "e*pi + e*pi" not in out


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


def test_check_of_a_correct_gradient_with_a_large_offset_agrees(tmp_path, capsys):
    path = write(tmp_path, "def f(x):\n    return 1e7 + x * x\n")
    status, out, err = run(capsys, path, "--check")
    assert (status, err) == (0, ""), err


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


# --- caches ---


def test_cache_dir_that_is_a_file_turns_the_cache_off(tmp_path, monkeypatch, capsys):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(not_a_dir))
    m = live(write(tmp_path, "def f(x):\n    return x ** 3\n"))
    assert grad(m.f)(2.0) == pytest.approx(12.0)
    assert not_a_dir.read_text() == "x"
    assert main(["cache", "info"]) == 0
    assert "unusable" in capsys.readouterr().out


def test_cache_dir_symlinked_and_very_long(tmp_path, monkeypatch):
    target = tmp_path / "real"
    target.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(target)
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(link))
    m = live(write(tmp_path, "def f(x):\n    return x ** 3\n"))
    assert grad(m.f)(2.0) == pytest.approx(12.0)
    assert len(cache.entries(target)) == 1
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / ("d" * 250) / ("e" * 250)
                                                 / ("f" * 4000)))
    m = live(write(tmp_path, "def f(x):\n    return x ** 4\n", name="m2.py"))
    assert grad(m.f)(2.0) == pytest.approx(32.0)


def test_an_entry_that_is_a_directory_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / "c"))
    path = write(tmp_path, "def f(x):\n    return x ** 3\n")
    m = live(path)
    k = cache.key(m.f, (("x",), False, False))
    entry = tmp_path / "c" / k[:2] / f"{k}.json"
    entry.mkdir(parents=True)
    assert grad(m.f, wrt="x")(2.0) == pytest.approx(12.0)


def test_closures_over_different_library_functions_share_no_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / "c"))
    m = live(write(tmp_path, """\
        def make(act):
            def f(x):
                return act(x) * 2.0
            return f
        """))
    x = 0.5
    assert grad(m.make(np.sin))(x) == pytest.approx(2 * np.cos(x))
    assert grad(m.make(np.tanh))(x) == pytest.approx(2 * (1 - np.tanh(x) ** 2))


def test_a_helper_redefined_in_a_notebook_cell_rebuilds(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path / "c"))
    tag = uuid.uuid4().hex[:8]
    namespace = {"__name__": "__main__"}

    def cell(number, source):
        name = f"<ipython-input-{number}-{tag}>"
        linecache.cache[name] = (len(source), None, source.splitlines(True), name)
        exec(compile(source, name, "exec"), namespace)

    cell(1, "def helper(u):\n    return u * 2.0\n")
    cell(2, "def f(x):\n    return helper(x) * x\n")
    assert grad(namespace["f"])(1.0) == pytest.approx(4.0)
    cell(3, "def helper(u):\n    return u * 5.0\n")
    assert grad(namespace["f"])(1.0) == pytest.approx(10.0)


def test_the_memory_cache_notices_a_replaced_code_object(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "off")
    m = live(write(tmp_path, """\
        def f(x):
            return x * 2.0

        def cube(x):
            return x ** 3
        """))
    assert grad(m.f)(2.0) == pytest.approx(2.0)
    m.f.__code__ = m.cube.__code__
    assert m.f(2.0) == 8.0
    assert grad(m.f)(2.0) == pytest.approx(12.0)


def test_editing_and_reimporting_a_module_with_the_cache_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "off")
    path = tmp_path / f"{unique('adv_edited')}.py"
    path.write_text("def f(x):\n    return x * 2.0\n")
    assert grad(live(str(path)).f)(1.0) == pytest.approx(2.0)
    path.write_text("def f(x):\n    return x * x * x\n")
    later = path.stat().st_mtime + 10
    os.utime(path, (later, later))
    m = live(str(path))
    assert m.f(2.0) == 8.0
    assert grad(m.f)(1.0) == pytest.approx(3.0)


def test_an_entry_built_under_main_is_not_resolved_in_another_main(tmp_path):
    (tmp_path / "adv_mainmod.py").write_text(textwrap.dedent("""\
        from symdiff import grad

        SCALE = 3.0

        def f(x):
            return x * SCALE

        if __name__ == "__main__":
            print(grad(f)(1.0))
        """))
    (tmp_path / "driver.py").write_text(textwrap.dedent("""\
        SCALE = 100.0
        import adv_mainmod
        from symdiff import grad
        print(grad(adv_mainmod.f)(1.0))
        """))
    env = dict(os.environ, SYMDIFF_CACHE_DIR=str(tmp_path / "c"))
    first = subprocess.run([sys.executable, "-m", "adv_mainmod"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert first.returncode == 0 and float(first.stdout) == 3.0, first.stderr
    second = subprocess.run([sys.executable, "driver.py"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert float(second.stdout) == 3.0


def test_an_empty_cache_dir_variable_does_not_cache_in_the_current_directory(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    work.mkdir(mode=0o755)
    monkeypatch.chdir(work)
    root = cache.directory()
    assert root is None or root.resolve() != work.resolve()
