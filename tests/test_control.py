"""Branches, loops, calls of user functions, lambdas: against central differences and by hand."""

import inspect
import math

import numpy as np
import pytest
from gradcheck import agrees, check_grad, equals, load, numeric_grad
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from symdiff import SymdiffError, grad, value_and_grad

OTHER = load("""
import numpy as xp

OFFSET = 0.25

def scaled_tanh(u, k=1.5):
    return k * xp.tanh(u) + OFFSET
""")

M = load("""
import numpy as np
from symdiff import stop_gradient

W = np.array([0.5, -1.0, 2.0])

def huber(x, d=1.0):
    if abs(x) <= d:
        return 0.5 * x ** 2
    return d * (abs(x) - 0.5 * d)

def newton_sqrt(a):
    x = a
    for i in range(6):
        x = 0.5 * (x + a / x)
    return x

def exp_series(x, n=12):
    s = 1.0
    term = 1.0
    for k in range(1, n):
        term = term * x / k
        s += term
    return s

def piecewise(x):
    if x < -1:
        y = -x
    elif x < 1:
        y = x ** 2
    else:
        y = np.sin(x) + 2
    return y * x

def helper(u, scale=2.0):
    return scale * np.sin(u) + stop_gradient(u) * u

def twice(x, y):
    return helper(x) * helper(y, scale=3.0)

def rows(X, w):
    total = 0.0
    for row in X:
        total = total + np.tanh(row @ w)
    return total

def halvings(x):
    y = x
    while y > 1.0:
        y = y / 2
    return y * x

def first_over(x):
    s = 0.0
    for i in range(10):
        s = s + x * i
        if s > 5:
            break
    return s

def odd_powers(x):
    s = 0.0
    for i in range(7):
        if i % 2 == 0:
            continue
        s += x ** i
    return s

def nested_helper(x):
    def inner(z):
        return z * x + np.sum(W * z)
    return inner(x) + inner(2.0)

def conditional_expression(x):
    return x ** 2 if x > 0 else -x

def enumerate_zip(X, w):
    s = 0.0
    for i, row in enumerate(X):
        s = s + i * np.sum(row * w)
    for a, b in zip(X, X):
        s = s + np.sum(a * b)
    return s

def nested_loops(x, n):
    s = 0.0
    for i in range(n):
        t = x
        for j in range(i):
            t = np.sin(t) * x
        s = s + t
    return s

def smooth(u, scale=2.0):
    return scale * np.sin(u) + u ** 2

def calls_in_loop(x):
    s = 0.0
    for k in range(3):
        s = s + smooth(x * k, scale=k)
    return s

def module_constant(x):
    return np.sum(W * x ** 2)

def branch_on_array(x):
    if np.sum(x) > 0:
        y = x * 2
    else:
        y = x ** 3
    return np.sum(y)

def use_other(x):
    return other.scaled_tanh(x) + other.scaled_tanh(x, k=0.5) ** 2

def sum_rows_then_mean(X):
    acc = np.zeros(X.shape[1])
    for row in X:
        acc = acc + row ** 2
    return np.mean(acc)
""")
M.other = OTHER


def test_huber_on_both_branches():
    for x in (0.5, -0.3, 2.5, -4.0):
        check_grad(M.huber, (x,))
        assert grad(M.huber)(x) == pytest.approx(x if abs(x) <= 1 else math.copysign(1, x))


def test_newton_iteration_for_sqrt_through_six_iterations():
    g = grad(M.newton_sqrt)
    check_grad(M.newton_sqrt, (2.0,))
    assert g(2.0) == pytest.approx(0.5 / math.sqrt(2.0), rel=1e-8)
    assert g(9.0) == pytest.approx(1 / 6, rel=1e-3)


def test_power_series_accumulated_in_a_loop():
    check_grad(M.exp_series, (0.7,))
    assert grad(M.exp_series)(0.7) == pytest.approx(math.exp(0.7), rel=1e-6)
    assert grad(M.exp_series)(0.7, n=1) == 0.0  # the loop runs zero times


def test_piecewise_with_elif():
    for x in (-1.5, 0.3, 1.7):
        check_grad(M.piecewise, (x,))


def test_helper_called_twice_with_keywords_defaults_and_stop_gradient():
    x, y = 0.3, 0.8
    gx, gy = grad(M.twice, wrt=(0, 1))(x, y)
    # helper(u, s) = s sin u + c u with c = u frozen: d/du = s cos u + u.
    hx, hy = 2 * math.sin(x) + x * x, 3 * math.sin(y) + y * y
    assert gx == pytest.approx((2 * math.cos(x) + x) * hy)
    assert gy == pytest.approx(hx * (3 * math.cos(y) + y))


def test_loop_over_the_rows_of_a_matrix():
    rng = np.random.default_rng(1)
    check_grad(M.rows, (rng.standard_normal((4, 3)), rng.standard_normal(3)), wrt=(0, 1))
    check_grad(M.sum_rows_then_mean, (rng.standard_normal((5, 3)),))


def test_while_whose_trip_count_depends_on_the_input():
    for x in (0.7, 3.3, 17.0):
        check_grad(M.halvings, (x,))
    n = 5  # 17 halves 5 times to 0.53
    assert grad(M.halvings)(17.0) == pytest.approx(2 * 17.0 / 2 ** n)


def test_break_and_continue():
    check_grad(M.first_over, (0.4,))
    # s = 0.4 * (0 + 1 + ... + i) first exceeds 5 at i = 5: the loop breaks after it.
    assert grad(M.first_over)(0.4) == pytest.approx(sum(range(6)))
    check_grad(M.odd_powers, (0.9,))


def test_nested_helper_sees_the_enclosing_variables():
    check_grad(M.nested_helper, (0.7,))


def test_conditional_expression():
    for x in (0.7, -0.7):
        check_grad(M.conditional_expression, (x,))


def test_enumerate_and_zip_over_arrays():
    rng = np.random.default_rng(2)
    check_grad(M.enumerate_zip, (rng.standard_normal((4, 3)), rng.standard_normal(3)),
               wrt=(0, 1))


def test_nested_loops_and_calls_inside_loops():
    check_grad(M.nested_loops, (0.6, 4))
    check_grad(M.calls_in_loop, (0.6,))


def test_module_constants_and_branches_on_arrays():
    x = np.array([0.3, -0.2, 0.9])
    check_grad(M.module_constant, (x,))
    check_grad(M.branch_on_array, (x,))
    check_grad(M.branch_on_array, (-x,))


def test_helper_from_another_module_with_its_own_aliases():
    check_grad(M.use_other, (0.4,))


def test_value_and_grad_through_control_flow():
    value, g = value_and_grad(M.piecewise)(0.3)
    assert value == M.piecewise(0.3) and g == pytest.approx(3 * 0.3 ** 2)


def test_lambdas_are_located_by_their_columns():
    L = load("""
import numpy as np
f = lambda x: np.sin(x) * x
g, h = (lambda x: x ** 2), (lambda x: x ** 3)
""")
    assert grad(L.f)(1.0) == pytest.approx(math.cos(1.0) + math.sin(1.0))
    assert grad(L.g)(2.0) == 4.0 and grad(L.h)(2.0) == 12.0
    assert grad(L.h).source.startswith("def grad_lambda(x):")


def test_generated_loops_say_what_they_keep():
    src = grad(M.exp_series).source
    assert "# line 21: each iteration's values, for the backward sweep" in src
    assert "for k in range(1, n):" in src and "in reversed(_tape0):" in src
    assert "carried from one iteration to the next" in src
    assert "if _t0:  # the branch the forward sweep took" in grad(M.huber).source


def test_the_source_of_a_branch_reads_as_the_users():
    src = grad(M.piecewise).source.replace(inspect.getsourcefile(M.piecewise), "F")
    body = src.split('"""', 2)[2]
    assert body == '''
    _t0 = x < -1  # line 27
    if _t0:
        y = -x  # line 28
        y_4 = y  # line 27
    else:
        _t1 = x < 1  # line 29
        if _t1:
            y_1 = x ** 2  # line 30
            y_3 = y_1  # line 29
        else:
            y_2 = np.sin(x) + 2  # line 32
            y_3 = y_2  # line 29
        y_4 = y_3  # line 27
    _ret = y_4 * x  # line 33
    if type(_ret) is not float: _check_scalar(_ret, 'piecewise')
    d_ret = 1.0
    if type(x) is not float: x = _as_float(x)
    # grad of line 33: return y * x
    dy_4 = x
    dx = y_4
    # grad of line 27: if x < -1:
    if _t0:  # the branch the forward sweep took
        dy = dy_4
        # grad of line 28: y = -x
        dx = dx - dy
    else:
        dy_3 = dy_4
        # grad of line 29: elif x < 1:
        if _t1:  # the branch the forward sweep took
            dy_1 = dy_3
            # grad of line 30: y = x ** 2
            dx = dx + 2*dy_1*x
        else:
            dy_2 = dy_3
            # grad of line 32: y = np.sin(x) + 2
            dx = dx + dy_2*np.cos(x)
    return _fit(dx, x, copy=True)
'''


# --- refused constructs: exact text of the located errors ---

def error(source, name="f"):
    f = load(source, name)
    with pytest.raises(SymdiffError) as e:
        grad(f).source  # noqa: B018
    return str(e.value).replace(inspect.getsourcefile(f), "F")


def test_recursion_is_refused():
    assert error("""
def f(x):
    if x > 1:
        return f(x / 2)
    return x
""") == """F:4:16: f calls itself (recursion is not supported)
            return f(x / 2)
                   ^
  supported instead: a loop"""


def test_for_else_is_refused():
    assert error("""
def f(x):
    for i in range(3):
        x = x * 2
    else:
        x = x + 1
    return x
""") == """F:6:9: for/else is not supported
            x = x + 1
            ^
  supported instead: a flag set before break, tested after the loop"""


def test_return_inside_a_loop_is_refused():
    assert error("""
def f(x):
    for i in range(3):
        if x > 2:
            return x
        x = x * 2
    return x
""") == """F:5:13: return inside a loop is not supported
                return x
                ^
  supported instead: assign the result to a name and break, then return it"""


def test_comprehensions_and_generators_are_refused():
    assert "comprehensions are not supported" in error("""
def f(x):
    v = [x * i for i in range(3)]
    return v
""")
    assert "generators and coroutines are not supported" in error("""
def f(x):
    yield x
    return x
""")


def test_with_and_try_are_refused_inside_loops_too():
    text = error("""
def f(x):
    for i in range(2):
        with open('a') as h:
            x = x * 2
    return x
""")
    assert text.startswith("F:4:9: 'with' statements are not supported")


def test_not_every_path_returns():
    assert "f does not return a value on every path" in error("""
def f(x):
    if x > 0:
        return x
""")


def test_loop_over_a_non_array_is_refused():
    assert "cannot loop over" in error("""
def f(x):
    for c in "abc":
        x = x * 2
    return x
""")


# --- random programs with branches and loops ---

EXPRS = ["x * y", "np.sin(v) + x", "v * v - y", "np.tanh(v * x)", "v / (1 + v ** 2)",
         "0.5 * v + np.cos(y)", "v * 1.5", "np.exp(-v ** 2) * x"]


@st.composite
def programs(draw):
    lines = ["v = x + 0.1"]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["assign", "if", "for", "while"]))
        e1, e2 = draw(st.sampled_from(EXPRS)), draw(st.sampled_from(EXPRS))
        if kind == "assign":
            lines.append(f"v = {e1}")
        elif kind == "if":
            threshold = draw(st.sampled_from([-0.5, 0.0, 0.4]))
            lines += [f"if v > {threshold}:", f"    v = {e1}", "else:", f"    v = {e2}"]
        elif kind == "for":
            n = draw(st.integers(0, 3))
            lines += [f"for i in range({n}):", f"    v = {e1} + 0.1 * i"]
        else:
            lines += ["k = 0", "while k < 2 and v < 3.0:", f"    v = {e1} + 1.0", "    k += 1"]
    lines.append(f"return {draw(st.sampled_from(EXPRS))}")
    return "import numpy as np\ndef f(x, y):\n" + "\n".join("    " + s for s in lines) + "\n"


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs(), st.integers(-150, 150), st.integers(-150, 150))
def test_random_programs_with_branches_and_loops(source, xi, yi):
    f = load(source, "f")
    x, y = xi / 100, yi / 100
    with np.errstate(all="ignore"):
        try:
            value = f(x, y)
        except (ZeroDivisionError, OverflowError):
            assume(False)
        assume(np.isfinite(value) and abs(value) < 1e6)
        for i in (0, 1):
            # Away from a branch boundary, two step sizes agree; near one they do not.
            args = [x, y]
            a, b = numeric_grad(f, args, i, h=1e-6), numeric_grad(f, args, i, h=1e-4)
            assume(np.isfinite(a) and abs(a - b) <= 1e-4 * max(1.0, abs(a)))
    gx, gy = grad(f, wrt=(0, 1))(x, y)
    np.testing.assert_allclose([gx, gy], [numeric_grad(f, [x, y], 0),
                                          numeric_grad(f, [x, y], 1)], rtol=1e-4, atol=1e-6,
                               err_msg=source)


def test_closures_capture_floats_arrays_and_helpers():
    L = load("""
import numpy as np

def make(scale, weights):
    def square(z):
        return z ** 2
    def loss(x):
        return scale * np.sum(weights * square(x))
    return loss
""")
    w = np.array([1.0, 2.0, 3.0])
    loss = L.make(0.5, w)
    x = np.array([0.2, -0.4, 1.1])
    np.testing.assert_allclose(grad(loss)(x), 0.5 * w * 2 * x)
    check_grad(loss, (x,))


def test_redefining_a_called_helper_rebuilds_the_gradient():
    L = load("""
import numpy as np

def inner(x):
    return x ** 2

def outer(x):
    return inner(x) * 3
""")
    g = grad(L.outer)
    assert g(2.0) == 12.0
    L.inner = lambda x: x ** 3  # noqa: E731 - a redefinition, as in a notebook
    assert g(2.0) == 36.0
    assert grad(L.outer)(2.0) == 36.0


def test_library_functions_are_not_inlined():
    text = error("""
from symdiff import grad

def h(x):
    return x * x

def f(x):
    return grad(h)(x) * 2.0
""")
    assert "grad inside a function being differentiated is not supported" in text
    assert text.startswith("F:8:12: ")
    assert "np.linalg.slogdet is not supported" in error("""
import numpy as np
def f(x):
    return np.linalg.slogdet(x)[1]
""")


RESETS = load("""
import numpy as np

def squares(x):
    acc = 0.0
    for xi in x:
        if xi > 100.0:
            acc = 0.0
        acc = acc + xi ** 2
    return acc

def counted(x):
    v = 0.0
    for i in range(3):
        if i == 10:
            v = 0.0
        v = v + x
    return v

def in_while(x):
    v = 0.0
    i = 0
    while i < 3:
        if i == 10:
            v = 0.0
        v = v + x
        i += 1
    return v

def in_elif(x):
    v = 0.0
    for i in range(3):
        if i == 10:
            v = 0.0
        elif i == 11:
            v = 1.0
        v = v + x * i
    return v

def in_inner_loop(x):
    v = 0.0
    for i in range(2):
        for j in range(3):
            if j == 10:
                v = 0.0
            v = v + x
    return v

def before_inner_loop(x):
    v = 0.0
    for i in range(2):
        if i == 10:
            v = 0.0
        for j in range(3):
            v = v + x
    return v

def through_another(x):
    a = 0.0
    b = 0.0
    for i in range(3):
        if i == 10:
            a = 0.0
        a = a + b
        b = x
    return a

def with_break(x):
    v = 0.0
    for i in range(5):
        if i == 10:
            v = 0.0
        v = v + x
        if i == 2:
            break
    return v

def arrays(x):
    acc = np.zeros(2)
    for xi in x:
        if xi > 100.0:
            acc = np.zeros(2)
        acc = acc + xi * np.ones(2)
    return np.sum(acc)
""")


def test_a_reset_in_a_branch_not_taken_keeps_the_earlier_iterations():
    # The variable turns active only at the end of the first iteration: the branch's merge
    # of it must be active too, or the backward sweep drops every earlier iteration.
    equals(RESETS.squares, (np.array([1.0, 2.0, 3.0]),), [np.array([2.0, 4.0, 6.0])])
    equals(RESETS.counted, (1.5,), [3.0])
    equals(RESETS.in_while, (1.5,), [3.0])
    equals(RESETS.in_elif, (1.5,), [3.0])
    equals(RESETS.in_inner_loop, (1.5,), [6.0])
    equals(RESETS.before_inner_loop, (1.5,), [6.0])
    equals(RESETS.through_another, (1.5,), [2.0])
    equals(RESETS.with_break, (1.5,), [3.0])
    equals(RESETS.arrays, (np.array([1.0, 2.0, 3.0]),), [np.array([2.0, 2.0, 2.0])])


DEAD = load("""
import numpy as np

def power_twice(u, k):
    for i in range(2):
        u = np.power(u, k)
    return 1.0

def helper_result_dropped(x):
    t = power_twice(x, 0.5)
    return np.sum(x * 2.0)

def loop_result_dropped(x):
    s = np.zeros_like(x)
    for i in range(3):
        s = s + x ** 0.5
    return np.sum(x * 2.0)

def branch_in_loop_dropped(x):
    s = np.zeros_like(x)
    for i in range(2):
        if np.sum(x) > -10.0:
            s = s + np.sqrt(x)
        s = s * 1.0
    return np.sum(x * 2.0)

def std_dropped(x):
    d = np.std(x * 0.0 + 1.0)
    h = np.hypot(x, x)
    return np.sum(x ** 2)
""")


@pytest.mark.parametrize("name", ["helper_result_dropped", "loop_result_dropped",
                                  "branch_in_loop_dropped"])
def test_dead_code_adds_nothing_to_the_gradient(name):
    # Its local derivative is nan at a negative entry; a zero adjoint times nan is nan.
    with np.errstate(invalid="ignore"):
        equals(getattr(DEAD, name), (np.array([-1.0, 2.0]),), [np.array([2.0, 2.0])])


def test_dead_code_is_not_in_the_backward_sweep():
    source = grad(DEAD.loop_result_dropped).source
    assert "_tape" not in source and "ds" not in source
    source = grad(DEAD.std_dropped).source
    assert "dd" not in source and "dh" not in source
    equals(DEAD.std_dropped, (np.array([0.0, 0.0]),), [np.array([0.0, 0.0])])


def test_a_helper_called_twice_with_the_same_subscript():
    L = load("""
def h(a, b):
    return a * b

def f(x):
    return h(x[0], x[0])

def g(x):
    return h(x[0], x[0] + 1.0) + h(x[1], x[0])
""")
    equals(L.f, (np.array([1.5, 2.0]),), [np.array([3.0, 0.0])])
    agrees(L.g, (np.array([1.5, 2.0]),))


def test_values_that_cannot_depend_on_the_inputs_are_not_differentiated():
    # hypot's derivative at (0, 0) divides by zero; the point is a constant here.
    L = load("""
import math

def h1(t):
    return t * 0.0

def f(x):
    return math.hypot(h1(0.25), h1(0.5)) + x * math.hypot(h1(0.25), h1(0.5)) + x
""")
    equals(L.f, (2.0,), [1.0])


def test_a_while_loop_that_runs_zero_times_inside_a_branch():
    L = load("""
import numpy as np

def f(x, n):
    s = 0.0
    if x > 0:
        i = 0
        while i < n:
            if s > 1.0:
                s = s * x
            else:
                s = s + np.sin(x) ** 2
            i += 1
    else:
        s = x
    return s + x
""")
    for n in (0, 1, 3):
        agrees(L.f, (1.5, n))
        agrees(L.f, (-0.5, n))


@pytest.mark.xfail(strict=True, reason="a value read only in a loop that ran zero times, or "
                   "in a branch not taken, gets a zero adjoint at run time, and zero times "
                   "its nan local derivative is nan (JAX: 0); needs adjoints that stay "
                   "symbolic zeros until something flows into them")
def test_a_value_read_only_on_a_path_not_taken_adds_nothing():
    L = load("""
import numpy as np

def f(x, n):
    s = np.sqrt(x)
    y = x
    for i in range(n):
        y = y + s
    return np.sum(y)
""")
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(grad(L.f)(np.array([-1.0, 4.0]), 0), [1.0, 1.0])


@pytest.mark.parametrize("outer", ["for i in range(n):", "while k < n:"])
@pytest.mark.parametrize("inner_exit", ["break", "continue"])
def test_an_inner_loop_exit_inside_an_outer_loop_that_runs_zero_times_in_a_branch(
        outer, inner_exit):
    # The inner loop's break flag was read after the outer loop as if the outer loop had
    # carried it: UnboundLocalError from the generated code when the outer loop ran zero times.
    L = load(f"""
def f(x, n):
    a = x
    k = 0
    if x > 0:
        {outer}
            for j in range(2):
                a = a * x
                if a > 5.0:
                    {inner_exit}
            k += 1
    return a * x
""")
    assert grad(L.f)(0.7, 0) == pytest.approx(1.4)
    assert value_and_grad(L.f)(0.7, 0)[1] == pytest.approx(1.4)
    for n in (0, 1, 3):
        for x in (0.7, 1.9, -0.5):
            agrees(L.f, (x, n))


def test_breaks_of_three_nested_loops_inside_a_branch_whose_loops_may_not_run():
    L = load("""
def f(x, n):
    a = x
    if x > 0:
        for i in range(n):
            for j in range(n):
                k = 0
                while k < 2:
                    a = a * x
                    k += 1
                    if a > 5.0:
                        break
                if a > 4.0:
                    break
            if a > 3.0:
                break
    return a * x
""")
    for n in (0, 1, 2, 3):
        for x in (0.7, 1.9):
            agrees(L.f, (x, n))


@pytest.mark.parametrize("inner", [
    "for v in np.sin(x) * np.ones(2):\n                a = a * v",
    "a = a * (1.5 if a > 1 else x)",
    "a, b = np.ones(2) * a"])
def test_a_loop_that_runs_zero_times_in_a_branch_after_statements_with_temporaries(inner):
    # The array a loop runs over, a conditional expression's value, the value unpacked:
    # each lived in a temporary read after the outer loop as if it carried it
    # (UnboundLocalError: '_t2' when the loop ran zero times).
    L = load(f"""
import numpy as np

def f(x, n):
    a = x
    if x > 0:
        k = 0
        while k < n:
            {inner}
            k += 1
    return a * x
""")
    for n in (0, 1, 2):
        for x in (0.7, -0.5):
            agrees(L.f, (x, n))
