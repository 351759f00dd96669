"""Property tests: symdiff's gradients of random elementwise programs match central differences.

Hypothesis builds random expression source over ``x`` and ``y`` (arithmetic, unary minus,
smooth NumPy calls, small integer powers, float constants), and random straight-line
programs of 2-5 statements (assignments, augmented assignments, reassignments, tuple
unpacking), writes each into a module with ``load`` and compares ``grad`` with respect to
both parameters against central differences. Points where the function or its gradient
is not finite, or is huge, or where central differences themselves are unreliable (two
step sizes disagree) are skipped with ``assume``.
"""

from __future__ import annotations

import numpy as np
from gradcheck import load
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from symdiff import grad, value_and_grad

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
HUGE = 1e6
POINT = st.floats(-1.5, 1.5, allow_nan=False, allow_infinity=False)

CONSTANTS = st.sampled_from(["0.5", "1.5", "2.0", "3", "0.25", "1.75", "-0.3", "2.5", "0.1"])
UNARY = (
    "-({})", "np.sin({})", "np.cos({})", "np.exp({})", "np.tanh({})", "np.arctan({})",
    "np.log(1 + ({})**2)", "np.sqrt(1 + ({})**2)", "({})**2", "({})**3",
)
BINARY = ("({} + {})", "({} - {})", "({} * {})", "({} / {})")


@st.composite
def expressions(draw, names=("x", "y"), depth=3):
    """Source text of a random expression over ``names``, at most ``depth`` levels deep."""
    leaf = st.one_of(st.sampled_from(list(names)), CONSTANTS)
    if depth == 0:
        return draw(leaf)
    kind = draw(st.sampled_from(["leaf", "unary", "binary", "binary"]))
    if kind == "leaf":
        return draw(leaf)
    if kind == "unary":
        return draw(st.sampled_from(UNARY)).format(draw(expressions(names, depth - 1)))
    left = draw(expressions(names, depth - 1))
    right = draw(expressions(names, depth - 1))
    return draw(st.sampled_from(BINARY)).format(left, right)


@st.composite
def programs(draw):
    """A function body: 2-5 statements over x, y and earlier names, then a return."""
    names = ["x", "y"]  # everything assigned so far, parameters included
    lines = []
    fresh = iter(range(100))
    for _ in range(draw(st.integers(2, 5))):
        kind = draw(st.sampled_from(["assign", "augment", "reassign", "unpack", "swap"]))
        expr = draw(expressions(tuple(names), depth=2))
        if kind == "assign":
            target = f"v{next(fresh)}"
            lines.append(f"{target} = {expr}")
            names.append(target)
        elif kind == "augment":
            target = draw(st.sampled_from(names))
            op = draw(st.sampled_from(["+=", "-=", "*=", "/="]))
            lines.append(f"{target} {op} {expr}")
        elif kind == "reassign":
            target = draw(st.sampled_from(names))
            lines.append(f"{target} = {expr}")
        elif kind == "unpack":
            first = draw(st.sampled_from([*names, f"v{next(fresh)}"]))
            second = draw(st.sampled_from([n for n in [*names, f"v{next(fresh)}"]
                                           if n != first]))
            other = draw(expressions(tuple(names), depth=2))
            lines.append(f"{first}, {second} = {expr}, {other}")
            names.extend(n for n in (first, second) if n not in names)
        else:
            a, b = draw(st.permutations(names))[:2]
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
