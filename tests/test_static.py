"""The command line's static reader: which imports, constants and helpers of FILE it reads
without running it, and located errors for what it cannot read."""

from __future__ import annotations

import inspect
import sys

import numpy as np
import pytest
from gradcheck import draw, exported, live, run, run_clean, unique, write

from symdiff import grad
from symdiff.check import parameter_shape
from symdiff.cli import main

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
    status, out, err = run(capsys, path, "-f", "uses", "-f", "f")
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
    status, out, err = run(capsys, path, "-f", "f", "-f", "g")
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
    assert err.startswith(f"{path}:4: note: skipped dsq: it is decorated (@grad)"), err
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
