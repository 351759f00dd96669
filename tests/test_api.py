"""Calling a gradient: the kinds of arguments it takes, what grad() refuses (methods,
gradients), defaults, pickling and copying, errors raised at the call, the output contract
(gradients never alias) and the check that the value is a scalar."""

from __future__ import annotations

import copy
import importlib
import inspect
import multiprocessing
import pickle
import sys
import textwrap
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from gradcheck import both_one, check_grad, load

from symdiff import SymdiffError, grad, value_and_grad
from symdiff.api import Gradient

M = load("""
    import numpy as np

    def f(x, y):
        return x * y + 2.0 * x

    def scaled(x, s):
        return np.sum(x * s[0])

    def keyed(x, d):
        return x * d["a"]

    def first(p):
        return p[0] * p[1]

    def total(p):
        return np.sum(p[0] * p[1])

    def tail(p):
        return np.sum(p[1:]) * 2.0

    def sines(p):
        return np.sum(np.sin(p))

    def optional(x, y=None):
        return x * 2.0

    def keyword_only(x, *, w):
        return x * w

    def starred(x, *rest):
        return x * 3.0

    def norm1(x):
        y = x * 2.0
        return np.linalg.norm(y, ord=ORD)

    def dot_of_stacks(x):
        return np.sum(np.dot(x, x))

    def matrix_out(x):
        return x @ x.T

    def reciprocal(x):
        y = 1.0 / x
        return y * 2.0

    def checked(x):
        assert x > 0, "positive"
        return x * 2.0

    def helper(a):
        return np.linalg.norm(a, ord=ORD)

    def calls_helper(x):
        y = x * 2.0
        return helper(y)

    class Scale:
        def __rmul__(self, other):
            return other * 2.0

    def times(x, s):
        y = x * s
        return y

    ORD = 2  # a name, not a literal: only the call can tell that np.linalg.norm refuses it
""")


def error_of(call) -> SymdiffError:
    with pytest.raises(SymdiffError) as e:
        call()
    return e.value


def text_of(call, module=M) -> str:
    return str(error_of(call)).replace(inspect.getsourcefile(module.f), "F")


# --- functions that look like methods and are not (methods: test_methods.py) ---

C = load("""
    from symdiff import grad

    class Model:
        @staticmethod
        @grad
        def static_loss(x):
            return x ** 2

    def outer():
        def inner(x):
            return x ** 3
        return inner

    squares = [lambda x: x ** 2 for _ in range(2)]
""")


def test_functions_that_are_not_methods_are_differentiated():
    assert C.Model.static_loss(3.0) == 6.0
    assert grad(C.outer())(2.0) == 12.0
    assert [grad(f)(3.0) for f in C.squares] == [6.0, 6.0]


# --- the kinds of arguments at a differentiated position ---

@pytest.mark.parametrize(("value", "kind"), [
    ("s", "a str"), (None, "None"), (object(), "an object"), (M.Scale(), "a Scale"),
    (np.array(["a"]), "an array of dtype <U1"), (np.array([1.0, None]),
                                                 "an array of dtype object"),
])
def test_a_value_that_is_not_a_number_is_refused_at_the_call(value, kind):
    text = text_of(lambda: grad(M.f, wrt=1)(2.0, value))
    assert text == (f"F:4:10: y received {kind}, which cannot be differentiated\n"
                    "    def f(x, y):\n"
                    "             ^\n"
                    "  supported instead: a float, an int, a NumPy array (or a list) of real "
                    "numbers, or a dict, tuple or list of those")


def test_a_list_holding_what_is_not_a_number_names_the_item():
    # (a list holding a str is a container, not a list NumPy reads as numbers)
    text = text_of(lambda: grad(M.f, wrt=1)(2.0, [1.0, "a"]))
    assert text.startswith("F:4:10: y[1] is a str, which cannot be differentiated\n")


def test_the_kind_is_checked_however_the_argument_is_passed():
    assert "y received None" in text_of(lambda: grad(M.f, wrt=1)(2.0, y=None))
    assert "y received None" in text_of(lambda: grad(M.optional, wrt=1)(2.0))
    assert "w received a str" in text_of(lambda: grad(M.keyword_only, wrt="w")(2.0, w="a"))
    assert "x received a str" in text_of(lambda: grad(M.f)(x="s", y=2.0))


def test_containers_get_gradients_of_their_structure():
    # (tests/test_containers.py has the rest)
    assert grad(M.first)((2.0, 3.0)) == (3.0, 2.0)
    assert grad(M.first)({0: 2.0, 1: 3.0}) == {0: 3.0, 1: 2.0}
    g = grad(M.total)([np.ones(2), np.full(2, 3.0)])
    assert type(g) is list and [a.tolist() for a in g] == [[3.0, 3.0], [1.0, 1.0]]
    assert text_of(lambda: grad(M.tail)([np.ones(2)] * 3)).startswith(
        "F:20:19: p[1:] is a list being differentiated, used here as a whole")


def test_a_ragged_list_is_refused_at_the_call():
    text = text_of(lambda: grad(M.total)([[1.0, 2.0], [3.0]]))
    assert text.startswith("F:16:11: p received a list of lists of different lengths, which "
                           "NumPy cannot read as an array\n")


def test_numbers_arrays_and_lists_of_numbers_are_differentiated():
    check_grad(M.first, ([2.0, 3.0],))
    np.testing.assert_allclose(grad(M.first)([2.0, 3.0]), [3.0, 2.0])
    np.testing.assert_allclose(grad(M.tail)([1.0, 2.0, 3.0]), [0.0, 2.0, 2.0])
    np.testing.assert_allclose(grad(M.sines)([[1.0, 2.0], [3.0, 4.0]]),
                               np.cos([[1.0, 2.0], [3.0, 4.0]]))
    for x in [2, True, np.float32(2.0), np.int64(2), np.array(2.0), np.array(3)]:
        np.testing.assert_allclose(grad(M.f)(x, 3.0), 5.0)


def test_containers_that_are_not_differentiated_are_read_as_they_are():
    assert grad(M.scaled)(np.ones(2), (3.0, 4.0)).tolist() == [3.0, 3.0]
    assert grad(M.keyed)(2.0, {"a": 3.0}) == 3.0
    assert grad(M.optional)(2.0, "anything") == 2.0


@pytest.mark.parametrize(("call", "name", "kind"), [
    (lambda: grad(M.f)(1 + 2j, 3.0), "x", "a complex number"),
    (lambda: grad(M.f)(np.complex128(1.0), 3.0), "x", "a NumPy scalar of complex numbers"),
    (lambda: grad(M.f)(1.0, np.array([1j])), "y", "an array of complex numbers"),
    (lambda: grad(M.f)(1.0, y=2j), "y", "a complex number"),
    (lambda: grad(M.starred)(1.0, 2.0, 1j), "*rest", "a complex number"),
])
def test_complex_numbers_are_refused_wherever_they_are_passed(call, name, kind):
    text = text_of(call)
    assert f"{name} received {kind}; complex numbers are not supported\n" in text
    assert text.endswith("supported instead: real arguments: pass the real and imaginary "
                         "parts as two parameters")


# --- defaults are the values Python gave the function at its def ---

D = load("""
    S = 2.0

    def make(k):
        def f(x, s=k):
            return x * s
        return f

    def make_keyword(k):
        def f(x, *, s=k * 2.0):
            return x * s
        return f

    def later(x, s=S):
        return x * s

    def literal(x, n=3, label="a", axis=(0,)):
        return x * n

    lambdas = [lambda x, i=i: x * i for i in range(3)]
""")


def test_defaults_that_read_an_enclosing_function_s_names():
    assert grad(D.make(3.0))(2.0) == 3.0
    assert grad(D.make(4.0))(2.0) == 4.0
    assert grad(D.make_keyword(3.0))(2.0) == 6.0
    assert [grad(f)(1.0) for f in D.lambdas] == [0.0, 1.0, 2.0]
    assert "def grad_f(x, s=...):" in grad(D.make(3.0)).source


def test_defaults_are_not_evaluated_again():
    D.S = 5.0
    try:
        assert grad(D.later)(1.0) == 2.0  # the def's value, as the function itself uses
    finally:
        D.S = 2.0
    assert "def grad_literal(x, n=3, label='a', axis=(0,)):" in grad(D.literal).source


# --- pickling and copying: as the function and its options ---

PICKLED = """
    import numpy as np
    from symdiff import grad, value_and_grad

    def f(x, y):
        return np.sum(np.sin(x) * y)

    @grad
    def decorated(x):
        return x ** 3

    g = value_and_grad(f, wrt=(0, 1))
"""


@pytest.fixture
def pickled_module(tmp_path, monkeypatch):
    name = f"symdiff_pickled_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PICKLED))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


def test_a_gradient_pickles_as_its_function_and_options(pickled_module):
    m = pickled_module
    x = np.array([0.5, 1.0])
    expected = m.g(x, 2.0)
    for g in [m.g, m.decorated]:
        g(x if g is m.g else 2.0, *([2.0] if g is m.g else []))  # built: pickles all the same
        again = pickle.loads(pickle.dumps(g))
        assert (again.fun, again.wrt, again.with_value, again.as_tuple) == (
            g.fun, g.wrt, g.with_value, g.as_tuple)
    value, grads = pickle.loads(pickle.dumps(m.g))(x, 2.0)
    np.testing.assert_allclose(value, expected[0])
    np.testing.assert_allclose(grads[0], expected[1][0])
    assert pickle.loads(pickle.dumps(m.decorated))(2.0) == 12.0


def test_a_gradient_copies_after_it_is_built():
    g = grad(M.f, wrt=(0, 1))
    g(1.0, 2.0)
    for other in [copy.copy(g), copy.deepcopy(g)]:
        assert other.fun is M.f and other.wrt == (0, 1) and other(1.0, 2.0) == (4.0, 1.0)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="the module is importable in the worker through fork")
def test_a_gradient_maps_over_worker_processes(pickled_module):
    m = pickled_module
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork")) as pool:
        assert list(pool.map(m.decorated, [1.0, 2.0])) == [3.0, 12.0]


# --- errors raised at the call name the user's line ---

def test_a_check_of_the_generated_code_names_the_line():
    assert text_of(lambda: grad(M.norm1)(np.eye(2))) == (
        "F:36:5: np.linalg.norm(x, ord=2) has no derivative where the largest singular "
        "value of x is repeated\n"
        "        return np.linalg.norm(y, ord=ORD)\n"
        "        ^")


def test_a_non_scalar_output_names_the_return_line():
    assert text_of(lambda: grad(M.matrix_out)(np.ones((1, 2)))) == (
        "F:42:5: matrix_out returned an array of shape (1, 1); a gradient needs a scalar "
        "output: reduce it first (np.sum, np.mean), or take jacobian(f) for the "
        "derivatives of every element\n"
        "        return x @ x.T\n"
        "        ^")


def test_an_error_in_a_helper_names_the_helper_s_line():
    assert text_of(lambda: grad(M.calls_helper)(np.eye(2))).startswith(
        "F:53:5: np.linalg.norm(x, ord=2) has no derivative")


@pytest.mark.parametrize(("fn", "arg", "error", "line"), [
    (M.reciprocal, 0.0, ZeroDivisionError, "F:45:5: raised by this line of reciprocal's own "
     "code, which its gradient runs as the function does\n        y = 1.0 / x\n        ^"),
    (M.checked, -1.0, AssertionError, "F:49:5: raised by this line of checked's own code, "
     "which its gradient runs as the function does\n        assert x > 0, \"positive\"\n"
     "        ^"),
])
def test_the_function_s_own_errors_keep_their_type_and_name_the_line(fn, arg, error, line):
    with pytest.raises(error):
        fn(arg)
    for make in (grad, value_and_grad):
        with pytest.raises(error) as e:
            make(fn)(arg)
        notes = [n.replace(inspect.getsourcefile(M.f), "F") for n in e.value.__notes__]
        assert notes == [line]


def test_an_error_of_the_backward_sweep_is_located_and_chained():
    e = error_of(lambda: grad(M.times)(1.0, M.Scale()))
    assert str(e).replace(inspect.getsourcefile(M.f), "F") == (
        "F:64:5: computing the gradient of this line failed: TypeError: float() argument must "
        "be a string or a real number, not 'Scale'\n"
        "        y = x * s\n"
        "        ^")
    assert isinstance(e.__cause__, TypeError)


def test_an_error_in_a_helper_of_another_module_names_that_file(tmp_path, monkeypatch):
    (tmp_path / "symdiff_helpers_elsewhere.py").write_text(textwrap.dedent("""
        import numpy as np

        def other(a):
            b = a * 1.0
            return np.linalg.norm(b, ord=ORD)

        ORD = 2
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        f = load("""
            from symdiff_helpers_elsewhere import other

            def f(x):
                return other(x * 2.0)
            """, "f")
        text = str(error_of(lambda: grad(f)(np.eye(2))))
    finally:
        sys.modules.pop("symdiff_helpers_elsewhere", None)
    assert text.startswith(f"{tmp_path / 'symdiff_helpers_elsewhere.py'}:6:5: "
                           "np.linalg.norm(x, ord=2) has no derivative")


def test_a_string_that_looks_like_a_line_comment_does_not_move_the_place():
    f = load("""
        def f(x, tag):
            assert tag != "  # line 99", "bad tag"
            return x * 2.0
        """, "f")
    with pytest.raises(AssertionError) as e:
        grad(f)(1.0, "  # line 99")
    assert e.value.__notes__[0].startswith(f"{inspect.getsourcefile(f)}:3:5: raised by")


def test_defaults_given_to_the_function_later_are_the_ones_used():
    f = load("""
        def power(x, n=2):
            return x ** n

        def kw_power(x, *, n=2):
            return x ** n
        """)
    assert grad(f.power)(3.0) == 6.0 and grad(f.kw_power)(3.0) == 6.0
    f.power.__defaults__ = (3,)
    f.kw_power.__kwdefaults__ = {"n": 3}
    assert grad(f.power)(3.0) == 27.0 and grad(f.kw_power)(3.0) == 27.0
    assert grad(f.kw_power)(3.0, n=1) == 1.0


def test_a_wrong_number_of_arguments_is_told_as_the_function_tells_it():
    with pytest.raises(TypeError) as expected:
        M.f(1.0)
    with pytest.raises(TypeError) as e:
        grad(M.f)(1.0)
    assert str(e.value) == str(expected.value)  # f() missing 1 required positional ...


# --- output contract --------------------------------------------------------------------

CONTRACT = load("""
import numpy as np

def square_of_sum(x, y):
    return np.sum((x + y) ** 2)

def linear(x, y):
    return np.sum(x * 3.0 + y)

def sums(x, y):
    return np.sum(x) + np.sum(y)

def returns_parameter(x):
    return x

def returns_other(x, y):
    return y
""")


@pytest.mark.parametrize("name", ["square_of_sum", "linear", "sums"])
@pytest.mark.parametrize("wrt", [("x", "x"), (0, "x"), ("x", "y"), ("y", "x")])
def test_gradients_never_alias(name, wrt):
    x, y = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    a, b = grad(getattr(CONTRACT, name), wrt=wrt)(x, y)
    assert not np.shares_memory(a, b)
    for g in (a, b):
        assert g.flags.writeable and g.flags.owndata and g.dtype == np.float64
        assert not np.shares_memory(g, x) and not np.shares_memory(g, y)


def test_returned_parameter():
    assert value_and_grad(CONTRACT.returns_parameter)(2.0) == (2.0, 1.0)
    value, g = value_and_grad(CONTRACT.returns_parameter)(np.array(2.0))
    assert value == 2.0 and isinstance(g, np.ndarray) and g.shape == () and g == 1.0
    dx, dy = grad(CONTRACT.returns_other, wrt=(0, 1))(np.array([1.0, 2.0]), 3.0)
    np.testing.assert_array_equal(dx, [0.0, 0.0])
    assert dy == 1.0 and type(dy) is float


X2 = np.array([1.0, 2.0])


# --- the scalar check -----------------------------------------------------------------

SC = load("""
import numpy as np

def maybe_array(x, w):
    return x * w

def reduced(x):
    return np.sum(x * x)

def mean_of_nothing(x):
    return np.mean(x)
""")


@pytest.mark.parametrize("w", [np.ones(2), [1.0, 1.0], np.array([[1.0]])])
def test_an_array_value_is_refused(w):
    for make in (grad, value_and_grad):
        with pytest.raises(SymdiffError, match="scalar"):
            make(SC.maybe_array)(X2, w)


@pytest.mark.parametrize("w", [2.0, np.float64(2.0), np.array(2.0), 2, np.int64(2), True])
def test_a_scalar_value_passes_the_check(w):
    assert both_one(SC.maybe_array, (1.5, w)) == pytest.approx(float(w))
    np.testing.assert_allclose(both_one(SC.maybe_array, (np.array(1.5), w)), float(w))


def test_a_certain_scalar_needs_no_check():
    assert "_check_scalar" not in grad(SC.reduced).source
    assert both_one(SC.reduced, (np.zeros(0),)).shape == (0,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the mean of nothing: nan, and a warning)
        assert both_one(SC.mean_of_nothing, (np.zeros((0, 2)),)).shape == (0, 2)


@pytest.mark.parametrize("name", ["parameter", "module_level"])
def test_a_name_type_shadows_the_builtin_the_generated_code_calls(name):
    m = load("""
import numpy as np
type = 2.0

def parameter(x, type):
    return np.sum(x * x * type)

def module_level(x):
    return x * x * type
""")
    f = getattr(m, name)
    args = (X2, 3.0) if name == "parameter" else (1.5,)
    expected = 2 * args[0] * (3.0 if name == "parameter" else 2.0)
    np.testing.assert_allclose(grad(f)(*args), expected, rtol=1e-12)


def test_names_float_are_parameters_like_any_other():
    m = load("""
import numpy as np

def parameter(x, float):
    return x * float * float

def local(x, w):
    float = w * 2.0
    return np.sum(x * float * float)
""")
    assert both_one(m.parameter, (2.0, 3.0)) == pytest.approx(9.0)
    np.testing.assert_allclose(both_one(m.local, (X2, 3.0)), [36.0, 36.0])
    with pytest.raises(SymdiffError, match="scalar"):
        grad(m.parameter)(X2, np.ones(2))


HELPERS = load("""
    import numpy as np

    D = np.array([1.0, 2.0])

    def by_array(x, c=D):
        return np.sum(x * c)

    D = np.array([5.0, 5.0])  # by_array keeps the array its def made

    def calls_by_array(x):
        return by_array(x) + np.sum(x)

    def scaled(x, c=2.0):
        return x * c

    def calls_scaled(x):
        return scaled(x) + x

    def summed(x, axis=None):
        return np.sum(x, axis=axis)

    def calls_summed(x):
        axis = None
        return summed(x * x) + np.sum(np.sum(x, axis=axis))
    """)


def test_a_helper_default_that_is_data_named_at_its_def_is_refused():
    # Reading D when the gradient runs would differentiate another function than the one
    # Python runs (its value is 5.0 at ones, not 12.0).
    text = str(error_of(lambda: grad(HELPERS.calls_by_array)(np.ones(2))))
    assert text.replace(HELPERS.__file__, "F").startswith(
        "F:6:19: by_array's default c=D is the value the def made, which symdiff cannot "
        "read when the gradient runs")


def test_a_helper_default_given_a_new_value_rebuilds_the_gradient():
    f = HELPERS.calls_scaled
    assert value_and_grad(f)(1.0) == (3.0, 3.0)
    HELPERS.scaled.__defaults__ = (7.0,)
    try:
        assert value_and_grad(f)(1.0) == (8.0, 8.0) == (f(1.0), 8.0)
    finally:
        HELPERS.scaled.__defaults__ = (2.0,)


def test_none_bound_to_a_name_or_a_helper_default_runs_as_written():
    x = np.array([1.0, -2.0])
    check_grad(HELPERS.calls_summed, (x,))
    np.testing.assert_allclose(grad(HELPERS.calls_summed)(x), 2 * x + 1)


def test_the_spectral_norm_at_a_repeated_singular_value_is_refused():
    f = load("""
        import numpy as np

        def spectral(A):
            return np.linalg.norm(A, ord=2)
        """, "spectral")
    text = str(error_of(lambda: grad(f)(np.eye(2))))
    assert "the largest singular value of x is repeated" in text
    check_grad(f, [np.diag([3.0, 1.0]) + 0.1])  # distinct singular values: fine
    assert grad(f)(np.ones(3)) == pytest.approx(np.ones(3) / np.sqrt(3))  # of a vector: fine


# --- calls with numbers: a dispatcher written for their types ---------------------------

NUMBERS = load("""
    import math

    import numpy as np

    def poly(x, y):
        return x * x * y + 3.0 * y

    def power(x, n=2):
        return x ** n

    def spread(x, *rest):
        return x * 3.0

    def shadows(type, float, error, general, failed, MISSING=1.0):
        return type * float * error * general * failed * MISSING

    def root(x):
        return math.sqrt(x) * 2.0

    def twice(u):
        return u * 2.0

    def calls_twice(x):
        return twice(x) * x

    SCALE = 2.0

    def scaled(x):
        return SCALE * x * x
    """)


class Real(float):
    pass


def general_path(f, args, wrt=(0, 1)):
    """What a gradient's first call gives (the general path: kinds' key, lookup)."""
    return grad(f, wrt=wrt)(*args)


@pytest.mark.parametrize("args", [
    (2.0, 3.0), (np.float64(2.0), np.float64(3.0)), (np.float32(2.0), np.float32(3.0)),
    (2.0, np.float64(3.0)), (2, 3), (True, 3.0), (Real(2.0), 3.0), (np.int64(2), 3.0),
    (np.array(2.0), 3.0)])
def test_numbers_of_every_type_after_others_give_what_the_general_path_gives(args):
    # One gradient, called with Python floats (from their second call on, its dispatcher
    # routes those), then with the arguments: the same values and types as a gradient's
    # first call gives.
    g = grad(NUMBERS.poly, wrt=(0, 1))
    for _ in range(3):
        assert g(1.0, 1.0) == (2.0, 4.0)
        got, expected = g(*args), general_path(NUMBERS.poly, args)
        assert got == expected and list(map(type, got)) == list(map(type, expected))
    assert g(2.0, 3.0) == (12.0, 7.0)  # (floats again, after the others)


def test_more_types_of_numbers_than_one_dispatcher_routes_find_theirs():
    g = grad(NUMBERS.poly, wrt=(0, 1))
    kinds = [(2.0, 3.0), (2, 3), (np.float64(2.0), 3.0), (np.float32(2.0), 3.0),
             (np.int32(2), 3.0), (True, 3.0), (2.0, np.float16(3.0))]
    for _ in range(3):
        for args in kinds:
            assert g(*args) == general_path(NUMBERS.poly, args)


def test_calls_after_the_dispatcher_are_told_and_bound_as_the_function_does():
    g = grad(NUMBERS.poly)
    assert g(1.0, 2.0) == g(1.0, 2.0) == 4.0
    assert type(g) is not Gradient and type(g).__call__.__qualname__ == "poly"
    assert g(y=2.0, x=1.0) == g(1.0, y=2.0) == 4.0
    for call in [lambda f: f(1.0), lambda f: f(1.0, 2.0, 3.0), lambda f: f(1.0, z=2.0),
                 lambda f: f(1.0, 2.0, x=1.0)]:
        with pytest.raises(TypeError) as expected:
            call(NUMBERS.poly)
        with pytest.raises(TypeError) as e:
            call(g)
        assert str(e.value) == str(expected.value)


def test_defaults_and_more_arguments_after_the_dispatcher():
    g = grad(NUMBERS.power)
    assert g(3.0, 2) == g(3.0, 2) == 6.0 and g(3.0) == 6.0 and g(3.0, n=3) == 27.0
    NUMBERS.power.__defaults__ = (3,)
    try:
        assert g(3.0) == 27.0 and g(3.0, 2) == 6.0
    finally:
        NUMBERS.power.__defaults__ = (2,)
    s = grad(NUMBERS.spread)
    assert s(1.0) == s(1.0) == s(1.0) == s(1.0, 5.0) == s(1.0, np.ones(2)) == 3.0


def test_parameters_named_as_the_dispatcher_s_names():
    g = grad(NUMBERS.shadows, wrt=(0, 1, 2, 3, 4, 5))
    args = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)
    expected = tuple(720.0 / a for a in args)
    assert g(*args) == g(*args) == g(*args) == expected
    assert g(*args[:5]) == g(*args[:5]) == tuple(120.0 / a for a in args[:5]) + (120.0,)


def test_a_helper_redefined_after_the_dispatcher_is_the_one_differentiated():
    g = grad(NUMBERS.calls_twice)
    assert g(3.0) == g(3.0) == g(3.0) == 12.0
    old = NUMBERS.twice
    NUMBERS.twice = lambda u: u * 5.0
    try:
        assert g(3.0) == g(3.0) == 30.0
        NUMBERS.twice.__code__ = (lambda u: u * 7.0).__code__  # replaced in place
        assert g(3.0) == 42.0
    finally:
        NUMBERS.twice = old


def test_module_data_rebound_after_the_dispatcher_is_read():
    g = grad(NUMBERS.scaled)
    assert g(3.0) == g(3.0) == g(3.0) == 12.0
    NUMBERS.SCALE = 5.0
    try:
        assert g(3.0) == 30.0
    finally:
        NUMBERS.SCALE = 2.0


def test_errors_after_the_dispatcher_are_handled_as_on_the_first_call():
    g = grad(NUMBERS.root)
    assert g(4.0) == g(4.0) == 0.5
    with np.errstate(divide="ignore"):
        assert np.isinf(g(0.0)) and np.isinf(g(0.0))  # run again on NumPy floats
    with pytest.raises(ValueError) as e:
        g(-1.0)
    assert "raised by this line of root's own code" in e.value.__notes__[0]


def test_a_gradient_called_once_makes_no_dispatcher():
    # (grad(f)(x) in a loop: writing one would cost more than the call)
    g = grad(NUMBERS.poly)
    assert g(1.0, 2.0) == 4.0 and type(g) is Gradient


def test_a_dispatched_gradient_copies_and_binds_as_any_other():
    # (pickling one: test_a_gradient_pickles_as_its_function_and_options)
    g = grad(M.f, wrt=(0, 1))
    assert g(1.0, 2.0) == g(1.0, 2.0) == g(1.0, 2.0) == (4.0, 1.0)
    for other in [copy.copy(g), copy.deepcopy(g)]:
        assert type(other) is not type(g) and other(1.0, 2.0) == (4.0, 1.0)
    assert isinstance(g, type(grad(M.f))) and repr(g) == "<symdiff grad of f wrt (0, 1)>"
    m = load("""
        from symdiff import grad

        class Model:
            def __init__(self, scale):
                self.scale = scale

            @grad
            def dloss(self, x):
                return self.scale * x ** 2

        class Wider(Model):
            pass
        """)
    models = [m.Model(3.0), m.Wider(5.0), m.Model(1.0)]
    for _ in range(3):
        assert [model.dloss(2.0) for model in models] == [12.0, 20.0, 4.0]
        assert grad(models[1].dloss.fun)(2.0) == 20.0
    aux = grad(lambda x: (x * x, "aux"), has_aux=True)
    assert aux(3.0) == aux(3.0) == aux(3.0) == (6.0, "aux")
    vg = value_and_grad(lambda x: x ** 3)
    assert vg(2.0) == vg(2.0) == vg(2.0) == (8.0, 12.0)
