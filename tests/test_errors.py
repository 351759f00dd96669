"""Exact text of the located errors: file:line:col, the source line, a caret, what to do."""

import inspect
import textwrap
import warnings

import numpy as np
import pytest
from gradcheck import check_grad, load

from symdiff import SymdiffError, grad


def error_text(source, name="f", wrt=0, call=None):
    f = load(source, name)
    with pytest.raises(SymdiffError) as e:
        g = grad(f, wrt=wrt)
        if call is None:
            g.source  # noqa: B018 - building is what raises
        else:
            g(*call)
    return str(e.value).replace(inspect.getsourcefile(f), "F")


CASES = {
    "try": ("""
        def f(x):
            try:
                y = x
            except ValueError:
                y = 0.0
            return y
        """, """
        F:3:5: 'try' statements are not supported
                try:
                ^
          supported instead: assignments, if/else, for, while, return, assert, pass, nested def
        """),
    "static argument varying with the inputs": ("""
        import numpy as np

        def f(x):
            return np.var(x, ddof=x[0] * 0.5)
        """, """
        F:5:27: np.var is not differentiated in ddof, which varies with the inputs
                return np.var(x, ddof=x[0] * 0.5)
                                      ^
          supported instead: a constant ddof, or stop_gradient(ddof) to drop its gradient
        """),
    "with": ("""
        def f(x):
            with open('a') as h:
                pass
            return x
        """, """
        F:3:5: 'with' statements are not supported
                with open('a') as h:
                ^
          supported instead: assignments, if/else, for, while, return, assert, pass, nested def
        """),
    "inplace": ("""
        def f(x):
            x[0] = 1.0
            return x
        """, "F:3:5: x[0] = ... writes into the parameter x: calling a gradient must not change "
        "its arguments, so symdiff does not follow this\n"
        "        x[0] = 1.0\n"
        "        ^\n"
        "  supported instead: write into a copy: x = x.copy() first"),
    "unknown_numpy": ("""
        import numpy as np
        def f(x):
            return np.sum(np.fft.fft(x))
        """, """
        F:4:19: np.fft.fft is not supported
                return np.sum(np.fft.fft(x))
                              ^
          supported instead: the NumPy and math functions: `symdiff coverage` lists them
        """),
    "undefined": ("""
        def f(x):
            return x * nothing_here
        """, """
        F:3:16: name 'nothing_here' is not defined
                return x * nothing_here
                           ^
          supported instead: parameters, local names, and module-level names
        """),
    "starred": ("""
        import numpy as np
        def f(x, *rest):
            return np.hypot(x, *rest)
        """, """
        F:4:24: starred arguments (*args) are not supported
                return np.hypot(x, *rest)
                                   ^
          supported instead: pass each argument by position
        """),
    "yield": ("""
        def f(x):
            y = yield x
            return y
        """, """
        F:3:9: generators and coroutines are not supported
                y = yield x
                    ^
          supported instead: a plain function that returns a scalar
        """),
    "global": ("""
        def f(x):
            global G
            return x
        """, """
        F:3:5: 'global' statements are not supported
                global G
                ^
          supported instead: assignments, if/else, for, while, return, assert, pass, nested def
        """),
    "unsupported_keyword": ("""
        import numpy as np
        def f(x):
            return np.sum(np.exp(x, out=None))
        """, """
        F:4:33: np.exp(..., out=...) is not supported
                return np.sum(np.exp(x, out=None))
                                            ^
          supported instead: np.exp(x); `symdiff coverage` lists them
        """),
    "tuple_return": ("""
        def f(x):
            return x, x
        """, """
        F:3:12: the function returns a tuple; a gradient needs a scalar output
                return x, x
                       ^
          supported instead: return one scalar (np.sum, np.mean reduce an array)
        """),
    "no_return": ("""
        def f(x):
            y = x
        """, """
        F:2:1: f has no return statement
            def f(x):
            ^
          supported instead: return the scalar value to differentiate
        """),
    "star_parameter": ("""
        import numpy as np
        def f(x, *rest):
            return np.sum(x) + len(rest)
        """, "\n".join([
        'F:4:28: the parameter *rest is not supported',
        '        return np.sum(x) + len(rest)',
        '                               ^',
        '  supported instead: name each parameter: def f(x, a, b)',
    ])),
    "wraps_wrapper": ("""
        import functools
        def deco(fn):
            @functools.wraps(fn)
            def wrapper(*a, **k):
                return fn(*a, **k)
            return wrapper
        @deco
        def f(x):
            return x * x
        """, "\n".join([
        'F:5:5: wrt=0 is out of range: wrapper has no named parameter, only *a, **k, '
        'which cannot be differentiated',
        '        def wrapper(*a, **k):',
        '        ^',
        '  supported instead: differentiate a function whose parameters are named (a '
        'functools.wraps wrapper: the function it wraps, __wrapped__)',
    ])),
    "unpacking_an_unsupported_function": ("""
        import numpy as np
        def f(x):
            values, vectors = np.linalg.eig(x)
            return values
        """, "\n".join([
        'F:4:23: np.linalg.eig is not supported',
        '        values, vectors = np.linalg.eig(x)',
        '                          ^',
        '  supported instead: the NumPy and math functions: `symdiff coverage` lists them',
    ])),
    "unpacking_a_helper": ("""
        def h(x):
            return x, 2 * x
        def f(x):
            a, b = h(x)
            return a * b
        """, "\n".join([
        'F:5:12: h returns several values, which symdiff does not support yet',
        '        a, b = h(x)',
        '               ^',
        '  supported instead: a helper for each value, each returning one',
    ])),
    "append": ("""
        import numpy as np
        def f(x, L):
            L.append(x)
            return np.sum(x)
        """, "\n".join([
        'F:4:5: L.append(...) changes L in place, which symdiff does not follow',
        '        L.append(x)',
        '        ^',
        '  supported instead: make a new array: np.stack([a, b]), np.concatenate, arithmetic',
    ])),
    "breakpoint": ("""
        def f(x):
            breakpoint()
            return x
        """, "\n".join([
        'F:3:5: breakpoint() inside a function being differentiated is not supported',
        '        breakpoint()',
        '        ^',
        '  supported instead: remove it, and step into the gradient instead: '
        'pdb.runcall(g.function_for(*args), *args)',
    ])),
    "call_for_its_effect": ("""
        def h(x):
            return x
        def f(x):
            h(x)
            return x
        """, "\n".join([
        'F:5:5: h(...) is called for its effect alone, which symdiff does not follow',
        '        h(x)',
        '        ^',
        '  supported instead: a call whose value is used (y = ...); print, logging and '
        'warnings.warn calls, which run as written',
    ])),
    "not_an_array_method": ("""
        def f(x, parser):
            args = parser.parse_args()
            return x
        """, "\n".join([
        'F:3:12: parser.parse_args() is not supported: symdiff differentiates numbers '
        'and arrays, and .parse_args() is not a method of NumPy arrays',
        '        args = parser.parse_args()',
        '               ^',
        '  supported instead: compute it outside the function and pass the value in',
    ])),
    # Written without dedent: a tab in the source line stays a tab in the caret line.
    "tabs_keep_the_caret_aligned": ("def f(x):\n\ty = x\n\treturn x << y\n",
                                    "F:3:9: operator << is not supported yet\n"
                                    "    \treturn x << y\n"
                                    "    \t       ^\n"
                                    "  supported instead: + - * / ** // % @"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_error_text(case):
    source, expected = CASES[case]
    if expected.startswith("\n"):
        expected = textwrap.dedent(expected).strip("\n")
    assert error_text(source) == expected


def test_every_problem_in_a_function_is_reported_together():
    text = error_text("""
        import numpy as np
        def f(x):
            x[0] = 1.0
            y = np.fft.fft(x)
            z = undefined_name
            return np.sum(y * z)
        """)
    assert text.count("\n    ^") == 0  # carets sit under columns, not at column 1
    assert [line.split(": ")[0] for line in text.splitlines() if line.startswith("F:")] == [
        "F:4:5", "F:5:9", "F:6:9"]


def test_wrt_errors_name_the_parameters():
    assert "f has no parameter 'q'" in error_text("def f(x, y):\n    return x\n", wrt="q")
    assert "wrt=5 is out of range" in error_text("def f(x, y):\n    return x\n", wrt=5)
    assert "f has 1 positional parameter\n" in error_text("def f(x):\n    return x\n", wrt=1)
    assert "f has 1 positional parameter and *a, which cannot" in error_text(
        "def f(x, *a):\n    return x\n", wrt=1)
    assert "cannot differentiate with respect to *rest" in error_text(
        "def f(x, *rest):\n    return x\n", wrt="rest")


def test_non_scalar_output_names_the_shape():
    text = error_text("def f(x):\n    return x * 2\n", call=(np.ones((2, 3)),))
    assert text == ("F:2:5: f returned an array of shape (2, 3); a gradient needs a scalar "
                    "output: reduce it first (np.sum, np.mean), or take jacobian(f) for the "
                    "derivatives of every element\n"
                    "        return x * 2\n"
                    "        ^")


def test_functions_without_source_are_refused_clearly():
    namespace = {}
    exec("def h(x):\n    return x * 2\n", namespace)
    with pytest.raises(SymdiffError, match="cannot read the source of h"):
        grad(namespace["h"])(1.0)
    with pytest.raises(SymdiffError, match="Python functions"):
        grad(np.sin)(1.0)


def test_every_problem_in_an_expression_is_reported():
    text = error_text("""
        import numpy as np
        def f(x):
            return np.sum(np.fft.fft(x)) + np.sum(np.fft.ifft(x)) * np.hypot(x, missing)
        """)
    assert [line for line in text.splitlines() if line.startswith("F:")] == [
        "F:4:19: np.fft.fft is not supported",
        "F:4:43: np.fft.ifft is not supported",
        "F:4:73: name 'missing' is not defined"]


def test_every_problem_in_the_arguments_of_an_array_operation_is_reported():
    text = error_text("""
        import numpy as np
        def f(x):
            return np.sum(np.stack([np.fft.fft(x), np.fft.rfft(x)]))
        """)
    assert text.count("is not supported") == 2


def test_static_arguments_read_through_masks_shapes_and_counts_are_constants():
    """A mask, a shape, a count (int, len) or a stop_gradient of the inputs has no gradient
    to lose: only a value that varies smoothly with them is refused (above)."""
    f = load("""
import numpy as np
from symdiff import stop_gradient


def f(x):
    n = x.shape[0]
    a = np.var(x, ddof=len(x) - 3)
    return a + np.sum(np.where(x > 0.1, x, 0.0)) + np.sum(np.roll(x, int(x[0])) * x) + n


def g(x):  # (the gradient through ddof dropped, as asked)
    return np.var(x, ddof=stop_gradient(x[0] * 0.5))
""")
    x = np.array([0.5, 2.0, 3.0, 1.0])
    check_grad(f.f, [x])
    ddof = 0.25
    expected = 2 * (x - x.mean()) / (x.size - ddof)
    np.testing.assert_allclose(grad(f.g)(x), expected, rtol=1e-12)


def test_print_and_logging_run_in_the_forward_sweep(capsys):
    f = load("""
        import logging
        import numpy as np
        log = logging.getLogger("symdiff-test")
        def f(x):
            y = np.sin(x)
            print("y:", y)
            log.debug("y = %s", y)
            return np.sum(y * x)
        """, "f")
    x = np.array([0.5, 1.5])
    g = grad(f)(x)
    assert capsys.readouterr().out == f"y: {np.sin(x)}\n"
    np.testing.assert_allclose(g, np.sin(x) + x * np.cos(x))


def test_warnings_warn_and_assert_run_in_the_forward_sweep():
    f = load("""
        import warnings
        import numpy as np
        def f(x):
            y = np.sin(x)
            assert np.all(np.abs(y) <= 1.0), "a sine above one"
            if np.any(y < 0):
                warnings.warn(f"negative sines: {y}")
            return np.sum(y * x)
        """, "f")
    x = np.array([0.5, -1.5])
    with pytest.warns(UserWarning, match="negative sines"):
        g = grad(f)(x)
    np.testing.assert_allclose(g, np.sin(x) + x * np.cos(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grad(f)(np.abs(x))  # no warning where the function gives none


def test_np_dot_of_arrays_of_more_axes_is_differentiated():
    """np.dot of stacks: a's last axis with b's second-to-last (it was refused)."""
    f = load("""
        import numpy as np
        W = np.arange(18.0).reshape(2, 3, 3) / 10
        def f(x):
            return np.sum(np.dot(W, x) ** 2) + np.sum(np.dot(x.reshape(1, 1, 3), x) ** 2)
        """, "f")
    check_grad(f, [np.array([0.5, -1.0, 2.0])])


def test_writing_into_a_callers_array_is_refused_when_building():
    text = error_text("""
        import numpy as np
        def h(a, b):
            b -= a
            return np.sum(b)
        def f(x):
            M = np.zeros(2)
            return h(x, M) + np.sum(M * x)
        """)
    assert text == "\n".join([
        "F:4:5: b is an array shared with M, so NumPy's augmented assignment changes M too, "
        "which symdiff does not follow",
        "        b -= a",
        "        ^",
        "  supported instead: b = b - ..., which makes a new array"])


def test_every_problem_in_helper_arguments_and_conditions_is_reported():
    text = error_text("""
        import numpy as np
        def h(a, b):
            return a
        def f(x):
            return np.sum(np.where(x > aa, x, bb)) + h(np.fft.ifft(x), cc)
        """)
    assert [line for line in text.splitlines() if line.startswith("F:")] == [
        "F:6:32: name 'aa' is not defined",
        "F:6:39: name 'bb' is not defined",
        "F:6:48: np.fft.ifft is not supported",
        "F:6:64: name 'cc' is not defined"]


def test_print_sees_values_the_gradient_itself_does_not_need(capsys):
    f = load("""
        import numpy as np
        def f(x):
            y = x * 2.0
            z = np.sum(y)
            print("y", y, z)
            return z
        """, "f")
    np.testing.assert_array_equal(grad(f)(np.array([1.0, 2.0])), [2.0, 2.0])
    assert capsys.readouterr().out == "y [2. 4.] 6.0\n"


def test_an_output_reshaped_to_an_array_is_refused_when_building():
    text = error_text("""
        import numpy as np
        def f(x):
            return np.sum(x * x).reshape(1, 1)
        """)
    assert text == "\n".join([
        "F:4:12: f returns an array of 2 dimensions; a gradient needs a scalar output",
        "        return np.sum(x * x).reshape(1, 1)",
        "               ^",
        "  supported instead: return one scalar (np.sum, np.mean reduce an array)"])


def test_starred_unpacking_is_refused_saying_how_to_index_instead():
    text = error_text("""
        def f(A):
            a, *b = A
            return a
        """)
    assert text == "\n".join([
        "F:3:8: starred unpacking (a, *b = ...) is not supported",
        "        a, *b = A",
        "           ^",
        "  supported instead: indexing: a, b = A[0], A[1:]"])


def test_unpacking_a_value_of_another_length_fails_at_the_users_line():
    f = load("""
        import numpy as np
        def f(A):
            n, m = A.shape
            a, b = A
            return np.sum(a * b) * n * m
        """, "f")
    path = inspect.getsourcefile(f)
    for A, line in ((np.ones((2, 2, 2)), 4), (np.ones((1, 2)), 5)):
        with pytest.raises(ValueError) as python:
            f(A)
        with pytest.raises(ValueError) as e:
            grad(f)(A)
        assert str(e.value) == str(python.value)  # "too many values to unpack", "not enough"
        assert e.value.__notes__[0].startswith(f"{path}:{line}:5: raised by this line of f's")
