"""Property tests: symdiff's gradients of random programs (elementwise, over arrays, with control
flow) match central differences.

Hypothesis builds random expression source over ``x`` and ``y`` (arithmetic, unary minus,
smooth NumPy calls, small integer powers, float constants), and random straight-line
programs of 2-5 statements (assignments, augmented assignments, reassignments, tuple
unpacking), writes each into a module with ``load`` and compares ``grad`` with respect to
both parameters against central differences. Points where the function or its gradient
is not finite, or is huge, or where central differences themselves are unreliable (two
step sizes disagree) are skipped with ``assume``.

Random programs with control flow (branches, for and while loops that may run zero times,
branches inside loops that reset a carried value, dead code whose derivative is nan, a
helper that rebinds its argument) are compared with central differences too, away from
the points where a branch's condition changes; straight-line programs with dead code are
compared with JAX where it is installed.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from gradcheck import both, frozen_reference, load, numeric_grad, outcome, random_body, random_data
from gradcheck import contract_grads as run
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from symdiff import SymdiffError, grad, value_and_grad

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
HUGE = 1e6
# Points on a grid of 1/1000 in [-1.5, 1.5]: tiny nonzero floats (1e-21) would only test
# floating-point cancellation (x / sin(x) has the exact derivative 1/sin(x) - x*cos(x)/sin(x)**2,
# which no evaluation order keeps accurate there), not symdiff.
POINT = st.integers(-1500, 1500).map(lambda k: k / 1000)

CONSTANTS = st.sampled_from(["0.5", "1.5", "2.0", "3", "0.25", "1.75", "-0.3", "2.5", "0.1"])
UNARY = (
    "-({})", "np.sin({})", "np.cos({})", "np.exp({})", "np.tanh({})", "np.arctan({})",
    "np.log(1 + ({})**2)", "np.sqrt(1 + ({})**2)", "({})**2", "({})**3",
)
BINARY = ("({} + {})", "({} - {})", "({} * {})", "({} / {})")


@st.composite
def expressions(draw, names=("x", "y"), depth=3, top=True):
    """Source text of a random expression over ``names``, at most ``depth`` levels deep.

    The top level is always an operation; leaves are names twice as often as constants.
    """
    variable = st.sampled_from(list(names))
    leaf = st.one_of(variable, variable, CONSTANTS)
    if depth == 0:
        return draw(leaf)
    kind = draw(st.sampled_from(["unary", "binary", "binary"] if top else
                                ["leaf", "unary", "binary", "binary"]))
    if kind == "leaf":
        return draw(leaf)
    if kind == "unary":
        return draw(st.sampled_from(UNARY)).format(draw(expressions(names, depth - 1, False)))
    left = draw(expressions(names, depth - 1, False))
    right = draw(expressions(names, depth - 1, False))
    return draw(st.sampled_from(BINARY)).format(left, right)


@st.composite
def programs(draw, unpack_into_parameters=True):
    """A function body: 2-5 statements over x, y and earlier names, then a return.

    With ``unpack_into_parameters``, tuple assignments may rebind a parameter that still
    holds its argument (x, y before any assignment to them), which once lost gradients
    (see test_tuple_unpacking_that_rebinds_a_parameter below).
    """
    names = ["x", "y"]  # everything assigned so far, parameters included
    pristine = {"x", "y"}  # parameters not assigned yet
    lines = []
    fresh = iter(range(100))
    for _ in range(draw(st.integers(2, 5))):
        kind = draw(st.sampled_from(["assign", "augment", "reassign", "unpack", "swap"]))
        expr = draw(expressions(tuple(names), depth=2))
        unpackable = [n for n in names if unpack_into_parameters or n not in pristine]
        if kind == "swap" and len(unpackable) < 2:
            kind = "unpack"
        if kind == "assign":
            target = f"v{next(fresh)}"
            lines.append(f"{target} = {expr}")
            names.append(target)
        elif kind in ("augment", "reassign"):
            target = draw(st.sampled_from(names))
            op = draw(st.sampled_from(["+=", "-=", "*=", "/="])) if kind == "augment" else "="
            lines.append(f"{target} {op} {expr}")
            pristine.discard(target)
        elif kind == "unpack":
            first = draw(st.sampled_from([*unpackable, f"v{next(fresh)}"]))
            second = draw(st.sampled_from([n for n in [*unpackable, f"v{next(fresh)}"]
                                           if n != first]))
            other = draw(expressions(tuple(names), depth=2))
            lines.append(f"{first}, {second} = {expr}, {other}")
            names.extend(n for n in (first, second) if n not in names)
            pristine -= {first, second}
        else:
            a, b = draw(st.permutations(unpackable))[:2]
            lines.append(f"{a}, {b} = {b}, {a}")
    # The result depends on every name, so every statement matters.
    lines.append(f"return {draw(expressions(tuple(names), depth=1))} + " + " + ".join(names))
    return lines


def build(lines: list[str], reduce: bool = False):
    body = "\n".join("    " + line for line in lines)
    if reduce:
        body = body.replace("    return ", "    return np.sum(", 1) + ")"
    return load(f"import numpy as np\n\n\ndef f(x, y):\n{body}\n", "f")


def evaluate(f, *args):
    """f(*args) as a float, or None where it fails or is not finite and moderate."""
    try:
        with np.errstate(all="ignore"):
            value = float(np.sum(f(*args)))
    except (ArithmeticError, ValueError):
        return None
    return value if np.isfinite(value) and abs(value) < HUGE else None


def central(f, args, index, h):
    """Central difference of f with respect to the scalar ``args[index]`` (None if failed)."""
    x = args[index]
    step = h * max(1.0, abs(x))
    plus, minus = list(args), list(args)
    plus[index], minus[index] = x + step, x - step
    fp, fm = evaluate(f, *plus), evaluate(f, *minus)
    if fp is None or fm is None:
        return None
    return (fp - fm) / (2 * step)


def reliable_central(f, args, index):
    """Central differences at two step sizes; None unless they agree (f smooth enough there)."""
    fine, coarse = central(f, args, index, 1e-6), central(f, args, index, 1e-5)
    if fine is None or coarse is None:
        return None
    if abs(fine - coarse) > 1e-6 * max(1.0, abs(fine)):
        return None
    return fine


def check_scalar_point(f, x, y):
    value = evaluate(f, x, y)
    assume(value is not None)
    with np.errstate(all="ignore"):
        try:
            v, (gx, gy) = value_and_grad(f, wrt=(0, 1))(x, y)
        except (ArithmeticError, ValueError):
            # Python floats raise where NumPy returns inf: a singular derivative.
            assume(False)
    assert type(gx) is float and type(gy) is float
    assume(all(np.isfinite(g) and abs(g) < HUGE for g in (gx, gy)))
    assert v == value or np.isclose(v, value, rtol=1e-12, atol=1e-12)
    for i, g in enumerate((gx, gy)):
        expected = reliable_central(f, [x, y], i)
        assume(expected is not None)
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-5,
                                   err_msg=f"d/d{'xy'[i]} at x={x!r}, y={y!r}")


@SETTINGS
@given(expressions(), POINT, POINT)
def test_random_expression_gradients(expr, x, y):
    f = build([f"return {expr}"])
    check_scalar_point(f, x, y)


@SETTINGS
@given(programs(), POINT, POINT)
def test_random_program_gradients(lines, x, y):
    f = build(lines)
    check_scalar_point(f, x, y)


@SETTINGS
@given(expressions(), st.lists(POINT, min_size=3, max_size=3), POINT)
def test_random_expression_gradients_broadcast(expr, xs, y):
    """x an array of shape (3,), y a scalar broadcast against it: dy sums over x."""
    f = build([f"return {expr}"], reduce=True)
    x = np.array(xs)
    assume(evaluate(f, x, y) is not None)
    with np.errstate(all="ignore"):
        gx, gy = grad(f, wrt=(0, 1))(x, y)
    assert isinstance(gx, np.ndarray) and gx.shape == (3,) and gx.dtype == np.float64
    assert type(gy) is float
    assume(np.all(np.isfinite(gx)) and np.all(np.abs(gx) < HUGE))
    assume(np.isfinite(gy) and abs(gy) < HUGE)
    # dy against central differences; each dx[i] against the scalar function of x[i] alone.
    expected = reliable_central(f, [x, y], 1)
    assume(expected is not None)
    np.testing.assert_allclose(gy, expected, rtol=1e-4, atol=1e-5, err_msg="d/dy")
    for i in range(3):
        def one(t, i=i):
            return f(np.concatenate([x[:i], [t], x[i + 1:]]), y)

        expected = reliable_central(lambda t, _y: one(t), [float(x[i]), y], 0)
        assume(expected is not None)
        np.testing.assert_allclose(gx[i], expected, rtol=1e-4, atol=1e-5,
                                   err_msg=f"d/dx[{i}]")


# --- bugs the property tests found, pinned: unpacking that rebinds a parameter ---

def test_tuple_unpacking_that_rebinds_a_parameter():
    f = build(["x, y = y, x", "return 2 * x + y"])
    assert grad(f, wrt=(0, 1))(1.0, 2.0) == (1.0, 2.0)


def test_tuple_unpacking_reads_a_parameter_it_rebinds():
    f = load("""
        def f(x):
            x, y = 2 * x, x
            return y
        """, "f")
    assert grad(f)(1.0) == 1.0


def test_tuple_unpacking_of_locals_keeps_every_gradient():
    """The same swap on locals, and on parameters already reassigned, is differentiated."""
    f = build(["a, b = x, y", "a, b = b, a", "return 2 * a + b"])
    assert grad(f, wrt=(0, 1))(1.0, 2.0) == (1.0, 2.0)
    f = build(["x = x * 1.0", "y = y * 1.0", "x, y = y, x", "return 2 * x + y"])
    assert grad(f, wrt=(0, 1))(1.0, 2.0) == (1.0, 2.0)


def test_strategies_make_varied_programs():
    """The generators reach every construct (a guard against a strategy that degenerates)."""
    seen = set()

    @settings(max_examples=80, deadline=None, derandomize=True)
    @given(programs())
    def collect(lines):
        text = "\n".join(lines)
        for token in ("+=", "*=", "np.sin", "np.exp", "np.log(1 +", "np.sqrt(1 +", "**",
                      " / ", "-(", ", "):
            if token in text:
                seen.add(token)

    collect()
    assert {"+=", "*=", "np.sin", "**", " / ", ", "} <= seen, seen


# --- random programs with control flow: loops that may run zero times, branches inside
# loops that reset carried values, dead code, helpers that rebind their arguments ---

SMOOTH = ("np.tanh({})", "np.sin({})", "0.5 * ({})", "({}) * 0.9")
# Dead code whose local derivative is nan or inf at many points: it must add nothing.
DEAD_CODE = ("np.sqrt({} - 2.0)", "np.log({} - 2.0)", "np.arcsin(({}) * 3.0)",
             "np.hypot({0} * 0.0, {0} * 0.0)", "({} - 2.0) ** 0.5")
VARIABLES = ("a", "b", "c")


@st.composite
def blocks(draw, depth=2, indent="    ", loop_vars=()):
    """Statement lines over x, y and the locals a, b, c (bound before the first block)."""
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["update", "update", "dead", "call"] + (["if", "for", "while"] if depth else [])
        if loop_vars:
            kinds += ["reset", "reset"]
        kind = draw(st.sampled_from(kinds))
        target = draw(st.sampled_from(VARIABLES))
        # No division: x / y at y = 0 is inf, and inf * 0 in a live derivative is a nan that
        # JAX gives too; the nans this test looks for come from dead code alone.
        expr = draw(expressions(("x", "y", *VARIABLES), depth=2, top=False)).replace(" / ", " * ")
        if kind == "update":
            wrap = draw(st.sampled_from(SMOOTH))
            lines.append(f"{indent}{target} = {target} * 0.5 + {wrap.format(expr)}")
        elif kind == "dead":
            lines.append(f"{indent}dead = {draw(st.sampled_from(DEAD_CODE)).format(expr)}")
        elif kind == "call":
            lines.append(f"{indent}{target} = scaled({target}, {expr})")
        elif kind == "reset":
            # A branch that never runs (i only counts up to 3), or runs once.
            index = draw(st.sampled_from(loop_vars))
            when = draw(st.sampled_from(["10", "0", "1"]))
            value = draw(st.sampled_from(["0.0", "x", "b * 0.25"]))
            lines.append(f"{indent}if {index} == {when}:")
            lines.append(f"{indent}    {target} = {value}")
        elif kind == "if":
            lines.append(f"{indent}if {expr} > {draw(st.sampled_from(['0.0', '0.5', '-0.5']))}:")
            lines += draw(blocks(depth - 1, indent + "    ", loop_vars))
            if draw(st.booleans()):
                lines.append(f"{indent}else:")
                lines += draw(blocks(depth - 1, indent + "    ", loop_vars))
        else:
            index = f"i{len(indent)}"
            trips = draw(st.sampled_from(["0", "1", "3"]))
            if kind == "for":
                lines.append(f"{indent}for {index} in range({trips}):")
            else:
                lines.append(f"{indent}{index} = 0")
                lines.append(f"{indent}while {index} < {trips}:")
            lines += draw(blocks(depth - 1, indent + "    ", (*loop_vars, index)))
            if kind == "while":
                lines.append(f"{indent}    {index} += 1")
    return lines


@st.composite
def control_programs(draw):
    """A function of scalars x, y with branches, loops and dead code, then a return."""
    lines = ["    a = x * 1.0", "    b = y * 1.0", "    c = 0.5"]
    lines += draw(blocks())
    lines.append("    return a + 2.0 * b + 3.0 * c")
    return lines


def build_control(lines):
    source = "\n".join([
        "import numpy as np", "", "",
        "def scaled(u, v):",
        "    u = u * 0.5",  # a helper rebinding its argument, a caller's variable
        "    for k in range(2):",
        "        if k == 10:",
        "            u = 0.0",
        "        u = u + np.tanh(v) * 0.25",
        "    return u", "", "",
        "def f(x, y):", *lines, ""])
    return load(source, "f")


def kinked(f, args, index, value):
    """Whether f's one-sided slopes differ at args (a branch's condition changes there):
    central differences average them, which no gradient has to match."""
    slopes = []
    for step in (1e-5, -1e-5):
        moved = list(args)
        moved[index] = args[index] + step
        other = evaluate(f, *moved)
        if other is None:
            return True
        slopes.append((other - value) / step)
    return abs(slopes[0] - slopes[1]) > 1e-3 * max(1.0, abs(slopes[0]))


CONTROL_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                            suppress_health_check=[HealthCheck.too_slow,
                                                   HealthCheck.filter_too_much])


@CONTROL_SETTINGS
@given(control_programs(), POINT, POINT)
def test_random_control_flow_gradients(lines, x, y):
    f = build_control(lines)
    value = evaluate(f, x, y)
    assume(value is not None)
    with np.errstate(all="ignore"):
        v, (gx, gy) = value_and_grad(f, wrt=(0, 1))(x, y)
    assert v == value or np.isclose(v, value, rtol=1e-12, atol=1e-12)
    for i, g in enumerate((gx, gy)):
        expected = reliable_central(f, [x, y], i)
        assume(expected is not None and not kinked(f, [x, y], i, value))
        # Not assumed finite: dead code's nan derivative must not reach the gradient.
        np.testing.assert_allclose(g, expected, rtol=1e-4, atol=1e-5,
                                   err_msg=f"d/d{'xy'[i]} at x={x!r}, y={y!r}")


@st.composite
def programs_with_dead_code(draw):
    """A straight-line program with a statement whose value never reaches the return."""
    lines = draw(programs())
    dead = draw(st.sampled_from(DEAD_CODE)).format(draw(st.sampled_from(["x", "y"])))
    lines.insert(draw(st.integers(0, len(lines) - 1)), f"dead = {dead}")
    return lines


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(programs_with_dead_code(), POINT, POINT)
def test_random_dead_code_against_jax(lines, x, y):
    jax = pytest.importorskip("jax")
    f = build(lines)
    body = "\n".join("    " + line for line in lines)
    f_jax = load(f"import jax.numpy as np\n\n\ndef f(x, y):\n{body}\n", "f")
    assume(evaluate(f, x, y) is not None)
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        expected = [float(g) for g in jax.grad(f_jax, argnums=(0, 1))(x, y)]
    finally:
        jax.config.update("jax_enable_x64", previous)
    assume(all(np.isfinite(expected)))
    with np.errstate(all="ignore"):
        got = grad(f, wrt=(0, 1))(x, y)
    np.testing.assert_allclose(got, expected, rtol=1e-7, atol=1e-9)


def test_control_strategies_reach_every_construct():
    seen = set()

    @settings(max_examples=80, deadline=None, derandomize=True)
    @given(control_programs())
    def collect(lines):
        text = "\n".join(lines)
        for token in ("if ", "else:", "for ", "while ", "range(0)", "== 10", "dead = ",
                      "scaled("):
            if token in text:
                seen.add(token)

    collect()
    assert seen == {"if ", "else:", "for ", "while ", "range(0)", "== 10", "dead = ",
                    "scaled("}, seen


ARRAY_UPDATES = ("np.sin(a)", "a * x", "np.tanh(b) * a", "a * 0.5 + x", "np.exp(-a ** 2)",
                 "b * np.sum(a) * 0.1", "np.sqrt(a ** 2 + 1.0)", "a[::-1] * 0.5",
                 "np.cos(x) * b")
ARRAY_CONDITIONS = ("np.sum(a) > 0.5", "np.max(b) < 1.0", "np.mean(x) > 0",
                    "np.sum(a * b) > 1.0")


@st.composite
def array_blocks(draw, depth=2, indent="    "):
    """Statements over the arrays x, a, b: branches on reductions, loops, dead np.std."""
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["assign", "add", "dead"] +
                                    (["if", "for", "while"] if depth else [])))
        target = draw(st.sampled_from(["a", "b"]))
        update = draw(st.sampled_from(ARRAY_UPDATES))
        if kind == "assign":
            lines.append(f"{indent}{target} = {update}")
        elif kind == "add":
            lines.append(f"{indent}{target} = {target} + {update}")
        elif kind == "dead":  # np.std of equal entries: its derivative is nan
            lines.append(f"{indent}dead = np.std({update} * 0.0)")
        elif kind == "if":
            lines.append(f"{indent}if {draw(st.sampled_from(ARRAY_CONDITIONS))}:")
            lines += draw(array_blocks(depth - 1, indent + "    "))
            if draw(st.booleans()):
                lines.append(f"{indent}else:")
                lines += draw(array_blocks(depth - 1, indent + "    "))
        else:
            trips = draw(st.sampled_from(["0", "1", "2"]))
            index = f"k{len(indent)}"
            if kind == "for":
                lines.append(f"{indent}for {index} in range({trips}):")
                lines += draw(array_blocks(depth - 1, indent + "    "))
            else:
                lines.append(f"{indent}{index} = 0")
                lines.append(f"{indent}while {index} < {trips}:")
                lines += draw(array_blocks(depth - 1, indent + "    "))
                lines.append(f"{indent}    {index} = {index} + 1")
    return lines


@CONTROL_SETTINGS
@given(array_blocks(), st.lists(st.integers(-10, 10), min_size=3, max_size=3))
def test_random_array_control_flow_gradients(lines, points):
    source = "\n".join(["import numpy as np", "", "", "def f(x):", "    a = x * 1.0",
                        "    b = x * 0.5", *lines, "    return np.sum(a * b)", ""])
    f = load(source, "f")
    x = np.array(points) / 7.0 + 0.01
    value = evaluate(f, x.copy())
    assume(value is not None)
    with np.errstate(all="ignore"):
        g = grad(f)(x.copy())
    fine, coarse = numeric_grad(f, [x.copy()], 0), numeric_grad(f, [x.copy()], 0, h=1e-5)
    assume(np.all(np.isfinite(fine)) and np.all(np.abs(fine) < HUGE))
    assume(np.allclose(fine, coarse, rtol=1e-4, atol=1e-5))  # not across a branch's edge
    np.testing.assert_allclose(g, fine, rtol=1e-4, atol=1e-5, err_msg=source)


# --- random programs mixing arrays and control flow (hypothesis) ---------------------------

PROGRAM_HEAD = """
import numpy as np
from symdiff import stop_gradient as sg

M = np.array([[0.5, -0.3, 0.2], [0.1, 0.4, -0.6], [-0.2, 0.3, 0.7]])

def h_early(u, t):
    if np.sum(u) > t:
        return np.sin(u) * t
    v = u * u
    return v + t

def h_loop(u, n):
    acc = 0.0
    for k in range(n):
        acc = acc + np.cos(u * k)
    return acc * u

def h_while(u):
    w = u
    k = 0
    while True:
        w = w * 1.3 + 0.1
        k = k + 1
        if k >= 3 or np.sum(w * w) > 10.0:
            break
    return w

def h_rows(A, u):
    s = 0.0
    for r in A:
        s = s + np.tanh(np.sum(r * u))
    return s

def h_flag(u):
    found = 0.0
    acc = u * 0.0
    for j in range(3):
        if np.sum(u) * (j + 1) > 0.8:
            found = 1.0
            acc = u * (j + 1)
            break
        acc = acc + np.sin(u)
    if found > 0.5:
        return acc * 2.0
    return acc
"""


PROGRAM_UNARY = ("np.sin({})", "np.cos({})", "np.tanh({})", "np.exp(-({})**2)", "({0})*({0})",
         "np.log(1.0 + ({})**2)", "np.arctan({})", "-({})", "sg({})", "h_while({})",
         "h_flag({})", "h_loop({}, 2)")

PROGRAM_BINARY = ("({} + {})", "({} - {})", "({} * {})", "({0} / (1.0 + ({1})**2))",
          "h_early({}, np.sum({}))")


class _Program:
    """Source of a random function f(x, y, s): x, y arrays of shape (3,), s a number.

    Every loop runs at least once (range(1..3), rows of M, do-while loops that break), so
    no name is read unbound. Kinds: "vec" (shape (3,)), "num" (a number), "any" (either,
    after branches that disagree).
    """

    def __init__(self, draw):
        self.draw = draw
        self.count = 0

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def const(self):
        return repr(self.draw(st.integers(-15, 15)) / 10)

    def expr(self, env, depth):
        vecs = [n for n, k in env.items() if k == "vec"]
        kind = self.pick(["leaf", "unary", "binary", "binary", "array"] if depth else ["leaf"])
        if kind == "leaf":
            name = self.pick([*env, "const"])
            return (self.const(), "num") if name == "const" else (name, env[name])
        if kind == "unary":
            code, k = self.expr(env, depth - 1)
            return self.pick(PROGRAM_UNARY).format(code), k
        if kind == "binary" or not vecs:
            (a, ka), (b, kb) = self.expr(env, depth - 1), self.expr(env, depth - 1)
            joined = ka if ka == kb else "vec" if "vec" in (ka, kb) else "any"
            return self.pick(PROGRAM_BINARY).format(a, b), joined
        v = self.pick(vecs)
        a, ka = self.expr(env, depth - 1)
        index = self.pick([n for n in env if n.startswith("i")] + ["0", "-1", "2"])
        return self.pick([
            (f"np.sum({a})", "num"), (f"{v}[{index} % 3]", "num"), (f"(M @ {v})", "vec"),
            (f"np.concatenate([{v}[1:], {v}[:1] * np.sum({a})])", "vec"),
            (f"np.where({v} > {self.const()}, {v} * 2.0, {a} + {v})", "vec"),
            (f"np.mean({v} ** 2)", "num"), (f"np.sum({v} * {v}[::-1])", "num"),
            (f"h_rows(M, {v})", "num"), (f"(M @ {v}) @ {v}", "num"),
            (f"np.stack([{v}, {v} * {a}]).sum(0)", "vec"),
        ])

    def cond(self, env):
        code, kind = self.expr(env, 1)
        return f"np.sum({code}) > {self.const()}"

    def block(self, env, depth, pad):
        lines = []
        for _ in range(self.draw(st.integers(1, 3))):
            what = self.pick(["assign", "assign", "assign", "if", "for", "rows", "while",
                              "swap"] if depth else ["assign"])
            names = [n for n in env if not n.startswith(("i", "r"))]
            if what == "assign":
                self.count += 1
                target = self.pick([*names, f"v{self.count}"])
                code, kind = self.expr(env, 2)
                lines.append(f"{pad}{target} = {code}")
                env[target] = kind if env.get(target, kind) == kind else "any"
            elif what == "swap" and len(names) >= 2:
                a, b = self.draw(st.permutations(names))[:2]
                code, kind = self.expr(env, 1)
                lines.append(f"{pad}{a}, {b} = {b}, {code}")
                env[a], env[b] = env[b], kind
            elif what == "if":
                then, orelse = dict(env), dict(env)
                lines.append(f"{pad}if {self.cond(env)}:")
                lines += self.block(then, depth - 1, pad + "    ")
                lines.append(f"{pad}else:")
                lines += self.block(orelse, depth - 1, pad + "    ")
                _merge(env, then, orelse)
            elif what in ("for", "rows", "while"):
                index = f"i{len(pad)}"
                inner = dict(env)
                inner[index] = "num"
                if what == "rows":
                    inner["r" + index] = "vec"
                    head = self.pick([f"for r{index} in M:",
                                      f"for {index}, r{index} in enumerate(x * M):"])
                    if head.startswith("for r"):
                        del inner[index]
                elif what == "for":
                    head = f"for {index} in range({self.draw(st.integers(1, 3))}):"
                else:
                    lines.append(f"{pad}{index} = 0")
                    head = "while True:"
                lines.append(pad + head)
                lines += self.block(inner, depth - 1, pad + "    ")
                if what == "while":
                    lines.append(f"{pad}    {index} = {index} + 1")
                    lines.append(f"{pad}    if {index} >= {self.draw(st.integers(1, 3))} "
                                 f"or {self.cond(inner)}:")
                    lines.append(f"{pad}        break")
                elif self.draw(st.booleans()):
                    lines.append(f"{pad}    if {self.cond(inner)}:")
                    lines.append(f"{pad}        {self.pick(['break', 'continue'])}")
                _merge(env, inner, env)
        return lines


def _merge(env, a, b):
    for name in set(a) & set(b):
        if not name.startswith(("i", "r")):
            env[name] = a[name] if a[name] == b[name] else "any"


@st.composite
def mixed_programs(draw):
    program = _Program(draw)
    env = {"x": "vec", "y": "vec", "s": "num"}
    lines = program.block(env, 2, "    ")
    if draw(st.booleans()):
        lines.append(f"    if {program.cond(env)}:")
        lines.append(f"        return np.sum({program.expr(env, 2)[0]})")
    names = [n for n in env if not n.startswith(("i", "r"))]
    lines.append("    return " + " + ".join(f"np.sum({n})" for n in names[-3:]) +
                 f" + np.sum({program.expr(env, 2)[0]})")
    return "def f(x, y, s):\n" + "\n".join(lines) + "\n"


def _reliable(source, args):
    """Frozen-stop_gradient central differences, or None where two step sizes disagree
    (a kink or a branch flips within the step) or anything fails."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fine = frozen_reference(source, args, (0, 1, 2), h=1e-6)
            coarse = frozen_reference(source, args, (0, 1, 2), h=1e-5)
        except (ArithmeticError, ValueError, IndexError, TypeError):
            return None
    for a, b in zip(fine, coarse, strict=True):
        if not np.all(np.isfinite(a)) or not np.allclose(a, b, rtol=1e-4, atol=1e-6):
            return None
    return fine


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mixed_programs(), st.integers(0, 2 ** 16))
def test_random_programs_with_arrays_and_control_flow(body, seed):
    rng = np.random.default_rng(seed)
    args = (rng.uniform(-1.2, 1.2, 3), rng.uniform(-1.2, 1.2, 3), float(rng.uniform(-1.2, 1.2)))
    source = PROGRAM_HEAD + body
    f = load(source, "f")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = f(*args)
        except (ArithmeticError, ValueError, IndexError, TypeError, NameError):
            assume(False)  # the generator's kinds were wrong: not a symdiff question
        assume(np.ndim(value) == 0 and np.isfinite(value) and abs(value) < 1e6)
        expected = _reliable(source, args)
        assume(expected is not None)
        grads = run(f, args, (0, 1, 2))
        assert value_and_grad(f)(*args)[0] == pytest.approx(value, rel=1e-12, abs=1e-300)
    for i, (g, e) in enumerate(zip(grads, expected, strict=True)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5,
                                   err_msg=f"gradient {i} of\n{body}")


random_data()  # (the programs below read adv4rand.A and adv4rand.B)

HEAD = """import math
import numpy as np
import adv4rand
from symdiff import stop_gradient as sg
W = np.linspace(0.2, 1.0, 4)

def h1(p, q):
    t = p * q
    u = np.sum(t, axis=-1, keepdims=True)
    return u / (1.0 + t * t) + p

"""


SHAPES = [(), (4,), (3, 1), (3, 4), (2, 1, 4), (1,), (1, 4), (2, 3, 1), (1, 1)]

OPS = ["{a} + {b}", "{a} * {b}", "{a} - 2.0 * {b}", "np.sin({a}) * {b}",
       "{a} / (1.5 + {b} * {b})", "np.tanh({a} * {b})", "{a} ** 2 * {b}", "{a} * W",
       "{a} + adv4rand.A", "{a} * adv4rand.B", "{a} * sg({b})", "{a} * np.sum({b})",
       "{a} / np.mean({b} * {b})", "h1({a}, {b})", "np.sum({a}, axis=-1, keepdims=True) * {b}",
       "np.mean({a}, axis=0)", "np.sum({a}, axis=0, keepdims=True) / (1.0 + {b} ** 2)",
       "{a} * sg(np.max({b}))", "np.clip({a}, -0.8, None) * {b}", "{a} / {b} ** 2",
       "math.exp(float(np.mean({a}))) * {b}"]

FINALS = ["np.sum({v})", "np.mean({v})", "np.sum({v} * {o})", "np.mean({v}) * np.sum({o})",
          "math.tanh(float(np.mean({v})))", "np.mean({v} / (1.0 + {o} ** 2))"]


def _program(rnd: random.Random):
    n = rnd.randint(1, 3)
    rng = np.random.default_rng(rnd.randrange(10**6))
    args = []
    for _ in range(n):
        shape = rnd.choice(SHAPES)
        args.append(rng.uniform(0.5, 1.5, shape) if shape or rnd.random() < 0.5
                    else float(rng.uniform(0.5, 1.5)))
    names = [f"p{i}" for i in range(n)]
    body = random_body(rnd, names, OPS, split=(0.65, 0.85), limits=[1.0, 3.0, 6.0],
                       trips=(1, 3))
    final = rnd.choice(FINALS).format(v=names[-1], o=rnd.choice(names))
    source = (HEAD + f"def f({', '.join(f'p{i}' for i in range(n))}):\n" + "\n".join(body)
              + f"\n    return {final}\n")
    wrt = tuple(sorted(rnd.sample(range(n), rnd.randint(1, n))))
    return source, tuple(args), wrt


def _usable(f, args):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            value = f(*args)
            return np.ndim(value) == 0 and bool(np.isfinite(value))
        except Exception:  # noqa: BLE001 - a program the generator made that does not run
            return False


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_random_programs_against_central_differences(seed):
    source, args, wrt = _program(random.Random(seed))
    f = load(source, "f")
    if not _usable(f, args):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = outcome(lambda: both(f, args, wrt))
        assert not isinstance(got, Exception), (source, got)
        want = frozen_reference(source, args, wrt)
    for i, g, w in zip(wrt, got, want, strict=True):
        assert np.shape(g) == np.shape(args[i])
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6, err_msg=source)


BAD_SHAPES = [(2,), (5,), (3, 2), (0,), (0, 4)]


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10**9))
def test_random_programs_refuse_what_the_function_refuses(seed):
    rnd = random.Random(seed)
    source, args, wrt = _program(rnd)
    f = load(source, "f")
    args = list(args)
    args[rnd.randrange(len(args))] = np.full(rnd.choice(BAD_SHAPES), 0.7)
    error = outcome(lambda: f(*args))
    if not isinstance(error, Exception) or "axis" in str(error):
        return  # (a mismatch of axes: see the _reduced_shape tests above)
    for make in (grad, value_and_grad):
        got = outcome(lambda m=make: m(f, wrt=wrt)(*args))
        assert isinstance(got, (type(error), SymdiffError)), (source, error, got)
