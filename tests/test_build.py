"""Building on long code: long sums, deep nests and long chains of helpers are cut into
equations of bounded size, so that building stays near-linear in the code's length."""

import copy
import time

import numpy as np
import pytest
import sympy as sp
from gradcheck import check_grad, load

from symdiff import SymdiffError, grad, ir
from symdiff.ir import Eqn, If, Loop
from symdiff.lower import lower
from symdiff.parse import parse


def equations(items):
    for item in items:
        if isinstance(item, Eqn):
            yield item
        elif isinstance(item, If):
            yield from equations(item.then)
            yield from equations(item.orelse)
        elif isinstance(item, Loop):
            yield from equations(item.body)


def depth(expr) -> int:
    return 1 + max((depth(a) for a in expr.args), default=0)


def elementwise(f):
    """The SymPy images of ``f``'s elementwise equations, lowered for its first parameter."""
    ir = lower(parse(f), (0,))
    return [e.expr for e in equations(ir.eqns) if e.kind == "elementwise"]


def function(body, helpers=""):
    return load(f"import numpy as np\n{helpers}\ndef f(x):\n    return {body}\n", "f")


X = np.array([0.3, -0.2, 0.5])


def test_a_sum_of_900_terms_is_cut_into_equations_of_bounded_size():
    f = function("np.sum(" + " + ".join(f"np.sin(x * {k}.0)" for k in range(1, 901)) + ")")
    exprs = elementwise(f)
    assert len(exprs) > 900 // 20  # cut, and into more than a few pieces
    assert max(sp.count_ops(e) for e in exprs) <= 40


def test_a_sum_of_400_terms_builds_and_is_right():
    # Python runs it; symdiff used to fail with RecursionError.
    f = function(" + ".join(f"{k % 7 + 1}.0 * x[{k % 3}] * x[{(k + 1) % 3}]"
                            for k in range(400)))
    start = time.perf_counter()
    check_grad(f, (X,))
    assert time.perf_counter() - start < 120  # a sanity guard, not a benchmark


def test_nested_tanh_around_a_log_sum_exp_is_cut_into_shallow_equations():
    body = "np.log(np.sum(np.exp(x)))"
    for _ in range(40):
        body = f"np.tanh({body} * 1.1 + 0.1)"
    f = function(body)
    assert max(depth(e) for e in elementwise(f)) <= 12  # (uncut: 120)
    check_grad(f, (X,))


def test_a_chain_of_150_helpers_each_calling_the_next_builds_and_is_right():
    # Lowering recursed ten frames a helper, past Python's limit; each helper's file was
    # parsed again for each helper (quadratic).
    helpers = "".join(f"def h{i}(v):\n    return np.sin(h{i + 1}(v)) * 0.9 + 0.1\n"
                      for i in range(150)) + "def h150(v):\n    return v * 1.0\n"
    f = function("np.sum(h0(x))", helpers)
    start = time.perf_counter()
    check_grad(f, (X,))
    assert time.perf_counter() - start < 120  # a sanity guard, not a benchmark


def test_150_nested_helper_calls_build_and_are_right():
    body = "x"
    for _ in range(150):
        body = f"h({body})"
    f = function(f"np.sum({body})", "def h(v):\n    return np.sin(v) * 0.9 + 0.1\n")
    check_grad(f, (X,))


def test_a_product_chain_thousands_long_is_differentiated():
    f = function("np.sum(x" + " * 1.0001" * 2000 + ")")
    np.testing.assert_allclose(grad(f)(X), np.full(3, 1.0001 ** 2000), rtol=1e-10)
    exprs = elementwise(f)
    assert max(sp.count_ops(e) for e in exprs) <= 20


def test_a_unary_minus_thousands_deep_is_differentiated():
    f = function("np.sum(" + "-" * 2001 + "x)")
    np.testing.assert_array_equal(grad(f)(X), -np.ones(3))


def test_a_condition_too_deep_to_cut_is_a_located_error():
    f = function("np.sum(np.where(x" + " * 1.0001" * 400 + " > 0, x, 0.0))")
    with pytest.raises(SymdiffError) as e:
        grad(f).source  # noqa: B018 - building is what raises
    (problem,) = e.value.problems
    assert (problem.line, problem.col) == (4, 5)
    assert problem.message == ("this statement nests 406 levels deep where symdiff cannot cut "
                               "it into parts (a condition, an argument of stop_gradient, an "
                               "index...)")
    assert problem.hint == "split it into several assignments"


def test_fresh_names_cost_a_probe_each_not_a_search_from_zero(monkeypatch):
    # Names.fresh searched _t0, _t1, ... from 0 for every temporary: n**2 / 2 probes.
    probes = []
    contains = ir._Taken.__contains__
    monkeypatch.setattr(ir._Taken, "__contains__", lambda s, n: probes.append(n) or
                        contains(s, n))
    names = ir.Names({"x", "_t5", "_t7"})
    made = [names.fresh("_t", numbered=True) for _ in range(2000)]
    assert made[:7] == ["_t0", "_t1", "_t2", "_t3", "_t4", "_t6", "_t8"]
    assert len(probes) < 3 * 2000  # (from zero: 2,000,000)


def test_a_fresh_name_given_back_is_the_next_one_made_again():
    # The names stay the ones a search from zero finds (golden sources do not change).
    names = ir.Names({"x"})
    for _ in range(4):
        names.fresh("_t", numbered=True)
    names.taken.discard("_t1")
    assert names.fresh("_t", numbered=True) == "_t1"
    assert names.fresh("_t", numbered=True) == "_t4"
    assert names.fresh("x") == "x_1"
    before = set(names.taken)
    names.fresh("x"), names.fresh("_t", numbered=True)
    names.taken = before  # as a loop lowered again puts back what was taken
    assert (names.fresh("x"), names.fresh("_t", numbered=True)) == ("x_2", "_t5")


def test_kinds_read_while_building_copy_only_the_samples_they_read(monkeypatch):
    # Each statement's kind was found with a copy of every variable's sample: n**2 copies.
    copies = []
    monkeypatch.setattr(copy, "copy", lambda v, copy=copy.copy: copies.append(1) or copy(v))

    def copies_to_build(n):
        line = "    e = np.tanh(e * x + y) * z + np.mean(e * x)\n"
        f = load("import numpy as np\n\ndef f(x, y, z):\n    e = x\n" + line * n +
                 "    return e\n", "f")
        copies.clear()
        grad(f, wrt=("x", "y", "z")).source  # noqa: B018 - building is what copies
        return len(copies)

    assert copies_to_build(20) < 2.5 * copies_to_build(10)  # (quadratic: 4x)
