"""tools/peers.py: how the peers' harness classifies one case (no peer suite needed)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from gradcheck import load

pytest.importorskip("autograd")
_spec = importlib.util.spec_from_file_location(
    "peers", Path(__file__).resolve().parent.parent / "tools" / "peers.py")
peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peers)

_SOURCE = """
import numpy as np


def smooth(x):
    return np.sum(np.sin(x) * x)


def kinked(x):
    return np.abs(x)


def unsupported(x):
    return np.sum(np.convolve(x, x + 1.0))
"""


def _case(name, args):
    module = load(_SOURCE)
    return peers.Case("synthetic", "m.py", name, 1, getattr(module, name), args, {}, 0)


def test_a_right_gradient_is_right_and_a_refusal_keeps_its_first_line():
    assert peers.run_case(_case("smooth", (np.array([0.3, -1.2]),)), 20)["status"] == "right"
    refused = peers.run_case(_case("unsupported", (np.ones(3),)), 20)
    assert refused["status"] == "refused"
    assert "np.convolve" in refused["detail"] and "\n" not in refused["detail"]


def test_an_answer_that_disagrees_with_central_differences_is_wrong():
    import autograd

    case = _case("smooth", (np.array([0.3, -1.2]),))
    kinks, info = [], {"autograd": True}
    verdict = peers.check_point(case, case.args, {}, (0,), (np.zeros(2),), autograd, kinks, info)
    assert verdict.startswith("arg 0: symdiff [0., 0.] vs numeric")


def test_agreeing_with_autograd_where_differences_cannot_tell_is_a_kink_not_wrong():
    import autograd
    import autograd.numpy as anp

    case = _case("kinked", (0.0,))
    case.fun_ag = lambda x: anp.abs(x)
    kinks, info = [], {"autograd": True}
    # autograd's abs'(0) is 0, as symdiff's; central differences at 0 give 0 as well, so make
    # the point one where they cannot: a step of 1e-6 straddles the kink at 1e-7.
    verdict = peers.check_point(case, (1e-7,), {}, (0,), (1.0,), autograd, kinks, info)
    assert verdict is None and kinks and info["autograd"]
