"""Closed formulas (symdiff.formula, Gradient.math/latex) and reading files statically."""

import inspect
import textwrap

import numpy as np
import pytest
import sympy as sp
from gradcheck import live, load, run, write

from symdiff import grad, hessian, jacobian
from symdiff.errors import SymdiffError
from symdiff.formula import MAX_OPS, StopGradient, _display, formula, hessian_formula
from symdiff.ir import symbol
from symdiff.lower import lower
from symdiff.parse import MISSING, FunctionSource, parse
from symdiff.static import read_module

M = load('''
import math
import numpy as np
from symdiff import stop_gradient as sg

RATE = 0.5

def smooth(x, y):
    z = np.exp(x * y)
    return np.log(1.0 + z) + RATE * x ** 2

def stopped(x):
    return x * sg(x ** 2) + sg(np.sin(x))

def maximum(a, b):
    return np.maximum(a, b) + abs(a)

def reduced(x):
    return np.sum(x ** 2)

def branch(x):
    if x > 0:
        return x
    return -x

def chain(x, y, z):
    e = x
    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)
    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)
    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)
    return e

def masked(x):
    return x * (x > 0)

def sg_product(x, y):
    return x * sg(x) * y

def tabled(x, y):
    a = np.maximum(x, y) * x + np.abs(x) * y + np.logaddexp(x, y) * np.hypot(x, y)
    return a + np.tanh(x) ** y + np.log1p(x * x) / y + np.sqrt(x * y) ** 3
''')

x, y = symbol("x"), symbol("y")


def closed(fn, wrt):
    return formula(lower(parse(fn), wrt))


def test_straight_line_code_is_substituted_and_differentiated():
    f = closed(M.smooth, ("x", "y"))
    assert f.closed and f.params == ("x", "y")
    rate = symbol("RATE")  # module-level data stays a name, as in the generated code
    assert sp.simplify(f.value - (sp.log(1 + sp.exp(x * y)) + rate * x**2)) == 0
    for p, d in f.partials:
        assert sp.simplify(d - sp.diff(f.value, symbol(p))) == 0


def test_stop_gradient_is_kept_and_has_zero_derivative():
    f = closed(M.stopped, ("x",))
    assert f.value == x * StopGradient(x**2) + StopGradient(sp.sin(x))
    assert f.partials == (("x", StopGradient(x**2)),)
    assert "dstopped/dx = stop_gradient" in f.pretty(unicode=False)
    assert f.latex().splitlines()[1] == ("\\frac{\\partial \\operatorname{stopped}}"
                                         "{\\partial x} = \\operatorname{stop\\_gradient}"
                                         "\\left(x^{2}\\right)")


def test_the_tables_functions_are_shown_as_the_mathematical_ones():
    text = closed(M.maximum, ("a", "b")).pretty(unicode=False)
    assert "Max(a, b)" in text and "Heaviside" in text and "sign(a)" in text


@pytest.mark.parametrize("name, reason", [
    ("reduced", "np.sum at line 19 is an array operation"),
    ("branch", "it has control flow at line 22"),
    ("chain", f"more than {MAX_OPS} operations"),
])
def test_not_a_closed_formula_says_why(name, reason):
    f = closed(getattr(M, name), (0,))
    assert not f.closed and reason in f.reason
    assert f.pretty() == f"{name}: not a closed formula ({f.reason}); shown as a program"
    assert f.latex() == f"% {name}: not a closed formula ({f.reason}); shown as a program"


def test_a_constant_without_a_formula_is_shown_as_its_code():
    f = closed(M.masked, ("x",))
    assert f.pretty(unicode=False) == "masked(x) = (x > 0)*x\ndmasked/dx = (x > 0)"
    assert f.latex().endswith("= \\texttt{(x > 0)}")


def test_gradient_math_latex_and_notebook_display():
    g = grad(M.smooth, wrt=("x", "y"))
    assert "smooth(x, y) = " in g.math() and "∂smooth/∂x = " in g.math()
    assert "dsmooth/dx = " in g.math(unicode=False) and "∂" not in g.math(unicode=False)
    assert g.latex().splitlines()[1].startswith(
        "\\frac{\\partial \\operatorname{smooth}}{\\partial x} = ")
    assert g._repr_latex_().startswith("$$\\begin{aligned}") and " &= " in g._repr_latex_()
    md = g._repr_markdown_()
    assert md.startswith("$$") and md.endswith(f"```python\n{g.source}```\n")


def test_gradient_of_array_code_is_shown_as_a_program():
    g = grad(M.reduced)
    assert g.math() == ("reduced: not a closed formula (np.sum at line 19 is an array "
                        "operation); shown as a program")
    assert g._repr_latex_() is None
    assert g._repr_markdown_() == (f"*{g.math()}:*\n\n```python\n{g.source}```\n")


# --- second derivatives: hessian(f).math() ---


def test_hessian_math_and_latex_print_each_mixed_partial_once():
    h = hessian(M.smooth, wrt=("x", "y"))
    text = h.math(unicode=False)
    assert [line.split(" = ")[0] for line in text.splitlines() if " = " in line] == [
        "smooth(x, y)", "d^2smooth/dx^2", "d^2smooth/dx dy", "d^2smooth/dy^2"]
    assert "∂²smooth/∂x∂y = " in h.math() and "∂²smooth/∂y² = " in h.math()
    assert h.latex().splitlines()[2].startswith(
        "\\frac{\\partial^{2} \\operatorname{smooth}}{\\partial x \\partial y} = ")


def test_hessian_formulas_exact_text():
    def f(x, y):  # (y is also a global of this module: the parameter is meant)
        return np.sin(x) * y ** 3

    assert hessian(f, wrt=("x", "y")).latex() == "\n".join([
        "f(x, y) = y^{3} \\sin{\\left(x \\right)}",
        "\\frac{\\partial^{2} f}{\\partial x^{2}} = - y^{3} \\sin{\\left(x \\right)}",
        "\\frac{\\partial^{2} f}{\\partial x \\partial y} = 3 y^{2} \\cos{\\left(x \\right)}",
        "\\frac{\\partial^{2} f}{\\partial y^{2}} = 6 y \\sin{\\left(x \\right)}"])
    assert hessian(f, wrt="x").math(unicode=False) == "\n\n".join([
        "           3\nf(x, y) = y *sin(x)", "              3\nd^2f/dx^2 = -y *sin(x)"])


def test_hessian_formulas_are_the_hessian_the_program_computes():
    h = hessian_formula(M.smooth, ("x", "y"))
    at = {x: 0.3, y: -0.7, symbol("RATE"): M.RATE}
    numbers = hessian(M.smooth, wrt=("x", "y"))(0.3, -0.7)
    for (a, b), e in h.entries:
        i, j = "xy".index(a), "xy".index(b)
        assert abs(float(e.subs(at)) - float(numbers[i][j])) < 1e-12


@pytest.mark.parametrize("point", [(0.7, 1.3), (1.9, 0.4)])
def test_hessian_formulas_of_the_tables_functions_are_what_the_program_computes(point):
    # The first derivatives' derivative-only forms (a quotient that is 0 where its divisor
    # is, the slope of a power) are differentiated again, and abs's sign has derivative
    # 0 as in the programs, not a Dirac delta.
    h = hessian_formula(M.tabled, ("x", "y"))
    numbers = hessian(M.tabled, wrt=("x", "y"))(*point)
    assert h.closed and len(h.entries) == 3
    for (a, b), e in h.entries:
        assert not e.has(sp.Derivative, sp.Subs, sp.DiracDelta)
        value = float(sp.N(_display(e).subs({x: point[0], y: point[1]})))
        assert abs(value - float(numbers["xy".index(a)]["xy".index(b)])) < 1e-10


def test_stop_gradient_is_a_constant_at_second_order():
    h = hessian(M.sg_product, wrt=("x", "y"))
    assert h.math(unicode=False) == ("sg_product(x, y) = x*y*stop_gradient(x)\n"
                                     "d^2sg_product/dx^2 = 0\n"
                                     "d^2sg_product/dx dy = stop_gradient(x)\n"
                                     "d^2sg_product/dy^2 = 0")
    assert hessian_formula(M.stopped, "x").entries == ((("x", "x"), 0),)


def test_a_block_of_mixed_partials():
    block = jacobian(grad(M.sg_product, wrt="x"), wrt="y")
    assert block.math(unicode=False).splitlines()[1:] == [
        "d^2sg_product/dx dy = stop_gradient(x)"]


def test_hessian_of_array_code_is_not_a_closed_formula():
    h = hessian(M.reduced)
    note = ("reduced: not a closed formula (np.sum at line 19 is an array operation); shown "
            "as a program")
    assert h.math() == note and h.latex() == "% " + note
    assert h._repr_latex_() is None
    assert h._repr_markdown_().startswith(f"*{note}:*\n\n```")


def test_math_of_a_jacobian_of_a_function_is_refused():
    with pytest.raises(SymdiffError) as e:
        jacobian(M.reduced).math()
    assert str(e.value) == ("math() and latex() are for hessians (hessian(f), the Jacobian "
                            "of grad(f)); jacobian(reduced) is the Jacobian of a function: "
                            "grad(reduced).math() prints first derivatives")
    assert jacobian(M.reduced)._repr_latex_() is None


def test_hessian_notebook_display_shows_formulas_and_the_program():
    h = hessian(M.smooth, wrt=("x", "y"))
    assert h._repr_latex_().startswith("$$\\begin{aligned}")
    md = h._repr_markdown_()
    assert md.startswith(h._repr_latex_()) and "def grad_jvp_smooth(x, y, x_dot, y_dot):" in md


def test_hessian_docstring_examples_hold():
    import doctest

    from symdiff.higher import Jacobian

    for method in (Jacobian.math, Jacobian.latex):
        finder = doctest.DocTestFinder().find(method, globs={})
        runner = doctest.DocTestRunner()
        for test in finder:
            runner.run(test)
        assert runner.failures == 0 and runner.tries > 0


# --- reading a file without running it ---


def read(tmp_path, text):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent(text))
    return read_module(str(path))


def test_imports_constants_and_functions_are_resolved_statically(tmp_path):
    m = read(tmp_path, """\
        import math, os.path as osp
        import numpy as np
        import numpy.linalg
        from math import exp, pi as PI
        from symdiff import stop_gradient as sg
        from symdiff.runtime import stop_gradient
        N = 3
        SCALE = 2.0 * N
        SCALE *= 2
        A, B = 1, -2.5
        W = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
        Z = np.zeros((N, 2)) + np.sqrt(4.0)
        L = math.log(2)
        AXES = (0, 1)
        def f(x):
            return x
        print("not run")
        """)
    look = m.namespace.lookup
    assert look("np") is np and look("numpy") is np and look("osp").__name__ == "posixpath"
    assert look("exp") is __import__("math").exp and look("PI") == np.pi
    assert look("sg") is look("stop_gradient")
    assert (look("N"), look("SCALE"), look("A"), look("B"), look("AXES")) == (3, 12.0, 1, -2.5,
                                                                             (0, 1))
    assert look("W").dtype == np.float32 and np.all(look("Z") == 2.0)
    assert look("L") == np.log(2)
    assert isinstance(look("f"), FunctionSource) and look("f").namespace is m.namespace
    assert list(m.functions) == ["f"] and not m.unresolved
    assert m.imports["osp"] == "import os.path as osp"
    assert m.imports["PI"] == "from math import pi as PI"


def test_what_only_running_the_file_would_give_is_unresolved_with_a_reason(tmp_path):
    m = read(tmp_path, """\
        import numpy as np
        import no_such_module_here
        from . import sibling
        BIG = np.zeros(10 ** 9)
        HUGE = 10 ** 10 ** 10
        F = open("x")
        G = F
        if True:
            C = 1.0
        class K:
            pass
        """)
    reasons = {name: u.reason for name, u in m.unresolved.items()}
    assert reasons["no_such_module_here"].startswith(
        "import no_such_module_here failed: ModuleNotFoundError")
    assert reasons["sibling"] == "a relative import, which needs the file's package"
    assert reasons["BIG"] == "an array too large to build here"
    assert reasons["HUGE"] == "an integer power too large to evaluate here"
    assert reasons["F"] == "a call of open"
    assert reasons["G"].startswith("F is not known")
    assert (reasons["C"], reasons["K"]) == ("an if block", "a class definition")
    assert all(m.namespace.lookup(n) is MISSING for n in reasons)


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
