"""The stop_gradient audit (symdiff.audit) and grad(f, stop_gradients=False).

Every verdict is tested on a small function built to have it; every blocked gradient is
checked against central differences of the function with that one site written without its
stop_gradient (the other sites frozen at the point), minus those of the function as written.
"""

import json
import math

import numpy as np
import pytest
from gradcheck import frozen_reference, load, numeric_grad

from symdiff import SymdiffError, audit, grad, hessian, jacobian, jvp, value_and_grad
from symdiff.audit import BLOCKS, NESTED, NO_EFFECT, NOT_FINITE, NOTHING, SCHEMA, ZERO

RNG = np.random.default_rng(7)

# Each function twice: as written, and with the site under audit written as an identity
# (the other stop_gradient calls kept): the reference for what that site blocks.
SOURCE = """
import numpy as np
from symdiff import stop_gradient as sg
import symdiff


def shift(x, k):
    z = x - sg(np.max(x))
    return np.log(np.sum(np.exp(z))) - z[k]


def td(w, s, s2, r):
    target = r + 0.9 * sg(np.dot(w, s2))
    return (target - np.dot(w, s)) ** 2


def td_lifted(w, s, s2, r):
    target = r + 0.9 * np.dot(w, s2)
    return (target - np.dot(w, s)) ** 2


def no_effect(w, c):
    return np.sum(w * sg(c ** 2))


def zero(w):
    return sg(np.sum(w ** 2)) + 1.0


def nested(w, x):
    return np.sum(sg(w * symdiff.stop_gradient(x)) * w)


def looped(w):
    t = w * 0.0
    for i in range(3):
        t = t + sg(w * (i + 1.0)) * w
    return np.sum(np.sin(t))


def looped_lifted(w):
    t = w * 0.0
    for i in range(3):
        t = t + w * (i + 1.0) * w
    return np.sum(np.sin(t))


def half(v):
    return 0.5 * sg(np.tanh(v)) + 0.5 * np.tanh(v)


def helper_twice(w, x):
    h = np.tanh(x @ w)
    return np.sum(half(h) * h) + np.sum(half(w) ** 2)


def helper_twice_lifted(w, x):
    h = np.tanh(x @ w)
    return np.sum(np.tanh(h) * h) + np.sum(np.tanh(w) ** 2)


def branch(w, flag):
    if flag > 0:
        y = sg(w ** 2) * w
    else:
        y = w ** 3
    return np.sum(y)


def two(w, b, x):
    h = np.tanh(x @ w + b)
    score = np.sum(h * sg(h))
    return score + sg(np.sum(b ** 2)) * np.sum(w ** 2)


def two_first_lifted(w, b, x):
    h = np.tanh(x @ w + b)
    score = np.sum(h * h)
    return score + sg(np.sum(b ** 2)) * np.sum(w ** 2)


def two_second_lifted(w, b, x):
    h = np.tanh(x @ w + b)
    score = np.sum(h * sg(h))
    return score + np.sum(b ** 2) * np.sum(w ** 2)


def tree(params, x):
    h = np.tanh(x @ params["W"])
    return np.sum((h - sg(h * params["b"])) ** 2)


def plain(x):
    return np.sum(x ** 2)


def masked(w):
    return np.sum(w * sg(np.where(w < 0, w, 0.0)))
"""

M = load(SOURCE)
W = RNG.normal(size=3)
S, S2, R = RNG.normal(size=3), RNG.normal(size=3), 0.5
X = RNG.normal(size=(4, 3))


def lifted_reference(name, args, wrt):
    """The central differences of ``<name>_lifted`` (the site an identity), the other
    stop_gradient calls frozen at ``args``."""
    return frozen_reference(SOURCE, args, wrt, name=f"{name}_lifted")


def written_reference(name, args, wrt):
    return frozen_reference(SOURCE, args, wrt, name=name)


def only(report):
    assert len(report.entries) == 1, report
    return report.entries[0]


# --- grad(f, stop_gradients=False) ---

def test_stop_gradients_false_is_the_gradient_of_the_function_without_them():
    got = grad(M.td, stop_gradients=False)(W, S, S2, R)
    expected = numeric_grad(M.td_lifted, [W, S, S2, R], 0)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
    assert not np.allclose(got, grad(M.td)(W, S, S2, R))


@pytest.mark.parametrize("name, args", [
    ("looped", (W,)), ("helper_twice", (W, X[:, :3])), ("two", (W[:3], 0.3, X))])
def test_stop_gradients_false_through_loops_helpers_and_several_calls(name, args):
    fn = getattr(M, name)
    got = grad(fn, stop_gradients=False)(*args)
    # (no stop_gradient frozen: the function run as it is is the identity version)
    np.testing.assert_allclose(got, numeric_grad(fn, list(args), 0), rtol=1e-6, atol=1e-8)


def test_stop_gradients_false_source_says_so_and_calls_no_stop_gradient():
    g = grad(M.shift, stop_gradients=False)
    text = g.source
    assert "Every stop_gradient is read as an identity here (stop_gradients=False)." in text
    code = [line.split("#")[0] for line in text.split('"""')[2].splitlines()]
    assert not any("sg(" in line or "stop_gradient(" in line for line in code)
    assert "stop_gradients=False" in repr(g)
    assert "stop_gradients" not in repr(grad(M.shift))


def test_stop_gradients_false_with_value_and_nested_stop_gradient():
    value, g = value_and_grad(M.nested, wrt=(0, 1), stop_gradients=False)(W, S)
    assert value == pytest.approx(M.nested(W, S))
    np.testing.assert_allclose(g[0], 2 * W * S)
    np.testing.assert_allclose(g[1], W * W)


def test_the_gradient_as_written_and_without_stop_gradients_are_cached_apart(tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("SYMDIFF_CACHE_DIR", str(tmp_path))
    f = load(SOURCE, "zero")
    assert np.all(grad(f)(W) == 0)
    np.testing.assert_allclose(grad(f, stop_gradients=False)(W), 2 * W)
    f = load(SOURCE, "zero")  # another module: from the disk cache
    np.testing.assert_allclose(grad(f, stop_gradients=False)(W), 2 * W)
    assert np.all(grad(f)(W) == 0)


def test_stop_gradients_takes_a_bool():
    with pytest.raises(SymdiffError, match=r"stop_gradients='no': True \(stop_gradient is a "
                                           r"constant, the default\) or False"):
        grad(M.td, stop_gradients="no")


def test_second_derivatives_without_stop_gradients_are_refused():
    with pytest.raises(SymdiffError, match="second derivatives read stop_gradient as a "
                                           "constant only"):
        grad(grad(M.zero, stop_gradients=False))
    with pytest.raises(SymdiffError, match="second derivatives"):
        grad(grad(M.zero), stop_gradients=False)


# --- the audit's verdicts ---

def test_a_stabilising_shift_blocks_nothing():
    e = only(audit(M.shift, RNG.normal(size=5), 2))
    assert e.effect == NOTHING and not e.likely_bug
    assert e.verdict == ("blocks nothing here: the gradient is the same without it (a "
                         "stabilising shift, or its argument's derivative is zero here)")
    assert e.depends_on == {"x": ("x",)}
    assert e.blocked["x"].norm == 0 and e.blocked["x"].share == 0
    assert (e.site.line, e.site.col, e.site.text) == (8, 13, "np.max(x)")


def test_a_td_target_blocks_the_residual_gradient():
    report = audit(M.td, W, S, S2, R)
    e = only(report)
    assert e.effect == BLOCKS and not e.likely_bug
    g = written_reference("td", (W, S, S2, R), (0,))[0]
    g_lifted = lifted_reference("td", (W, S, S2, R), (0,))[0]
    norm = np.linalg.norm(g_lifted - g)
    assert e.blocked["w"].norm == pytest.approx(norm, rel=1e-6)
    share = norm / (norm + np.linalg.norm(g))
    assert e.blocked["w"].share == pytest.approx(share, rel=1e-6)
    assert e.verdict == f"blocks {100 * share:.0f}% of the gradient of w"
    assert report.gradient_norm["w"] == pytest.approx(np.linalg.norm(g), rel=1e-6)


def test_a_stop_gradient_of_data_has_no_effect():
    report = audit(M.no_effect, W, S)
    e = only(report)
    assert e.effect == NO_EFFECT and e.likely_bug and report.likely_bugs == (e,)
    assert e.verdict == "no effect: c ** 2 does not depend on w"
    assert e.depends_on == {} and e.blocked == {}


def test_a_stop_gradient_around_everything_makes_the_gradient_zero():
    e = only(audit(M.zero, W))
    assert e.effect == ZERO and e.likely_bug
    assert e.verdict.startswith("the gradient of w is zero: the output depends on it only "
                                "through stop_gradient (this one blocks 100% of")
    assert e.blocked["w"].norm == pytest.approx(2 * np.linalg.norm(W))
    assert e.blocked["w"].share == 1.0


def test_a_nested_stop_gradient_has_no_effect_of_its_own():
    report = audit(M.nested, W, S, wrt=(0, 1))
    outer, inner = report.entries
    assert outer.effect == BLOCKS and outer.depends_on == {"w": ("w",)}  # x only via the inner
    assert inner.effect == NESTED and inner.likely_bug
    assert inner.site.outer == (outer.site.line, outer.site.col)
    assert inner.verdict == (f"nested in the stop_gradient at line {outer.site.line}:"
                             f"{outer.site.col}: no effect of its own")
    assert outer.blocked["x"].norm == 0  # lifting the outer alone leaves x stopped


def test_a_site_in_a_loop_sums_its_iterations():
    e = only(audit(M.looped, W))
    assert e.effect == BLOCKS
    g = written_reference("looped", (W,), (0,))[0]
    g_lifted = lifted_reference("looped", (W,), (0,))[0]
    assert e.blocked["w"].norm == pytest.approx(np.linalg.norm(g_lifted - g), rel=1e-6)


def test_a_site_in_a_helper_called_twice_is_one_entry_at_the_helpers_line():
    report = audit(M.helper_twice, W, X)
    e = only(report)
    assert e.site.line == SOURCE.splitlines().index(
        "    return 0.5 * sg(np.tanh(v)) + 0.5 * np.tanh(v)") + 1
    g = written_reference("helper_twice", (W, X), (0,))[0]
    g_lifted = lifted_reference("helper_twice", (W, X), (0,))[0]
    assert e.blocked["w"].norm == pytest.approx(np.linalg.norm(g_lifted - g), rel=1e-5)


def test_a_site_in_a_branch_not_taken_blocks_nothing_here():
    assert only(audit(M.branch, W, -1.0)).effect == NOTHING
    taken = only(audit(M.branch, W, 1.0))
    assert taken.effect == BLOCKS
    assert taken.blocked["w"].norm == pytest.approx(np.linalg.norm(2 * W ** 2))


def test_several_sites_and_parameters_each_against_central_differences():
    args = (W, 0.3, X)
    report = audit(M.two, *args, wrt=(0, 1))
    first, second = report.entries
    written = written_reference("two", args, (0, 1))
    for entry, name in ((first, "two_first"), (second, "two_second")):
        lifted = frozen_reference(SOURCE, args, (0, 1), name=f"{name}_lifted")
        for p, g, g_l in zip(("w", "b"), written, lifted, strict=True):
            assert entry.blocked[p].norm == pytest.approx(np.linalg.norm(np.subtract(g_l, g)),
                                                          rel=1e-5, abs=1e-9), (entry, p)
    assert first.depends_on == {"w": ("h",), "b": ("h",)}
    assert second.depends_on == {"b": ("b",)} and second.blocked["w"].norm == 0
    assert second.verdict == f"blocks {_percent(second.blocked['b'].share)} of the gradient of b"


def _percent(share):
    return f"{100 * share:.0f}%"


def test_containers_in_wrt_are_audited_as_one_parameter():
    params = {"W": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}
    e = only(audit(M.tree, params, X))
    assert e.effect == BLOCKS and set(e.blocked) == {"params"}
    assert e.depends_on == {"params": ("params", "h")}
    lifted = grad(M.tree, stop_gradients=False)(params, X)
    written = grad(M.tree)(params, X)
    difference = np.sqrt(sum(np.sum((lifted[k] - written[k]) ** 2) for k in params))
    assert e.blocked["params"].norm == pytest.approx(difference)


def test_a_function_without_stop_gradient_says_so():
    report = audit(M.plain, W)
    assert report.entries == () and report.likely_bugs == ()
    assert "plain calls no stop_gradient" in str(report)
    assert report.as_dict()["sites"] == []


def test_arguments_of_the_wrong_kind_get_grads_errors():
    with pytest.raises(SymdiffError) as got:
        audit(M.td, W.astype(complex), S, S2, R)
    with pytest.raises(SymdiffError) as expected:
        grad(M.td)(W.astype(complex), S, S2, R)
    assert str(got.value) == str(expected.value)
    with pytest.raises(SymdiffError, match="audit takes the function itself"):
        audit(hessian(M.plain), W)


def test_a_gradient_is_audited_as_its_function():
    assert audit(grad(M.td), W, S, S2, R).entries[0].effect == BLOCKS


# --- what it prints and gives as data ---

def test_the_table_names_each_site_its_argument_and_verdict():
    text = str(audit(M.no_effect, W, S))
    lines = text.splitlines()
    assert lines[0].startswith("stop_gradient audit of no_effect (")
    assert lines[0].endswith(") with respect to w")
    assert lines[1] == f"gradient norm as written: w {np.linalg.norm(S ** 2):.3g}"
    assert lines[2].split() == ["site", "argument", "depends", "on", "blocked", "|g|",
                                "(share)", "verdict"]
    assert "c ** 2" in lines[3] and "! no effect: c ** 2 does not depend on w" in lines[3]
    assert lines[-1] == "1 site(s) marked ! are likely bugs"


def test_the_notebook_shows_an_escaped_html_table():
    shown = audit(M.nested, W, S)._repr_html_()
    assert shown.count("<tr>") == 3 and "<table>" in shown
    assert "w * symdiff.stop_gradient(x)" in shown and "<td>! nested" in shown
    shown = audit(M.masked, W)._repr_html_()
    assert "<td>np.where(w &lt; 0, w, 0.0)</td>" in shown


def test_json_keeps_its_schema():
    data = json.loads(audit(M.two, W, 0.3, X, wrt=(0, 1)).to_json())
    assert data["schema"] == SCHEMA == "symdiff.audit/1"
    assert set(data) == {"schema", "function", "file", "line", "wrt", "gradient_norm", "sites"}
    assert data["function"] == "two" and data["wrt"] == ["w", "b"]
    assert all(isinstance(v, float) for v in data["gradient_norm"].values())
    for site in data["sites"]:
        assert set(site) == {"file", "line", "col", "argument", "nested_in", "depends_on",
                             "effect", "blocked", "verdict", "likely_bug"}
        assert site["effect"] in (BLOCKS, NOTHING, NO_EFFECT, ZERO, NESTED, NOT_FINITE)
        for blocked in site["blocked"].values():
            assert set(blocked) == {"norm", "share"}
            assert 0 <= blocked["share"] <= 1
        assert isinstance(site["likely_bug"], bool)


def test_json_writes_nan_as_null():
    f = load("import numpy as np\nfrom symdiff import stop_gradient\n\n\n"
             "def loss(w):\n    return np.sum(np.sqrt(w) * stop_gradient(w))\n", "loss")
    with np.errstate(invalid="ignore"):
        report = audit(f, np.array([-1.0, 2.0]))
    data = json.loads(report.to_json())
    assert not math.isfinite(report.gradient_norm["w"]) and data["gradient_norm"]["w"] is None
    assert data["sites"][0]["blocked"]["w"]["norm"] is None


def test_a_bound_method_is_audited_with_self_read():
    module = load("""
import numpy as np
from symdiff import stop_gradient as sg


class Model:
    scale = 2.0

    def loss(self, w):
        return np.sum(self.scale * w * sg(w))
""")
    e = only(audit(module.Model().loss, W))
    assert e.effect == BLOCKS and e.blocked["w"].share == pytest.approx(0.5)
    assert e.blocked["w"].norm == pytest.approx(np.linalg.norm(2.0 * W))


def test_has_aux_is_audited_as_grad_takes_it():
    f = load("""
import numpy as np
from symdiff import stop_gradient as sg


def loss(w):
    p = np.tanh(w)
    return np.sum(p * sg(p)), {"mean": np.mean(sg(p))}
""", "loss")
    e = only(audit(f, W, has_aux=True))
    assert e.effect == BLOCKS and e.blocked["w"].share == pytest.approx(0.5)
    with pytest.raises(SymdiffError, match="returns"):
        audit(f, W)


def test_a_stop_gradient_reading_a_containers_leaf_depends_on_it():
    f = load("""
import numpy as np
from symdiff import stop_gradient as sg


def leaf(params, x):
    return np.sum(sg(params["b"]) * params["b"] * x)
""", "leaf")
    params = {"W": np.ones(2), "b": RNG.normal(size=2)}
    e = only(audit(f, params, S[:2]))
    assert e.effect == BLOCKS and e.depends_on == {"params": ("params",)}
    assert e.blocked["params"].share == pytest.approx(0.5)


def test_an_infinite_slope_hidden_by_a_stop_gradient_is_not_measured():
    f = load("""
import numpy as np
from symdiff import stop_gradient as sg


def kink(x):
    return np.sum(x) + sg(np.sqrt(x[0] - x[1]))


def logged(x):
    return np.sum(x * sg(np.log(x)))
""")
    with np.errstate(all="ignore"):
        e = only(audit(f.kink, np.array([1.0, 1.0])))
        assert e.effect == NOT_FINITE and not e.likely_bug
        assert e.verdict == "not measured here: the gradient of x without it is not finite (inf)"
        assert math.isinf(e.blocked["x"].norm)
        e = only(audit(f.logged, np.array([0.0, 2.0])))
    assert e.effect == NOT_FINITE and "is not finite" in e.verdict
    with np.errstate(all="ignore"):
        row = str(audit(f.kink, np.array([1.0, 1.0]))).splitlines()[3]
    assert "  x inf (?)  " in row


def test_a_gradient_without_stop_gradients_is_not_differentiated_again():
    lifted = grad(M.zero, stop_gradients=False)
    with pytest.raises(SymdiffError, match="second derivatives read stop_gradient as a "
                                           "constant only"):
        jvp(lifted, (W,), (W,))
    with pytest.raises(SymdiffError, match="second derivatives read stop_gradient"):
        jacobian(lifted)(W)
    module = load("""
import numpy as np
from symdiff import grad, stop_gradient as sg


def inner(x):
    return np.sum(sg(x) * x)


d = grad(inner, stop_gradients=False)


def outer(x):
    return np.sum(d(x) ** 2)
""")
    with pytest.raises(SymdiffError, match="d inside a function being differentiated"):
        grad(module.outer)(W)
