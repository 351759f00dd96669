"""In-place writes and aliasing: NumPy's augmented assignment on an array that another name
shares changes both, which symdiff refuses rather than differentiate wrongly."""

import numpy as np
import pytest
from gradcheck import agrees, load

from symdiff import SymdiffError, grad

SHARED = load("""
import numpy as np

def after_loop(M):
    b = M * 1.0
    for i in range(2):
        b = M
    b -= 1.0
    return np.sum(M * b)

def after_branch(M, c):
    b = M * 1.0
    if c > 0:
        b = M
    b -= 1.0
    return np.sum(M * b)

def in_next_iteration(M):
    b = M * 1.0
    for i in range(2):
        b -= 1.0
        b = M
    return np.sum(M * b)

def fresh_after_loop(M):
    b = M
    for i in range(2):
        b = b * 0.5
    b -= M
    return np.sum(M * b)

def fresh_after_branch(M, c):
    b = M
    if c > 0:
        b = M * 2.0
    else:
        b = M * 3.0
    b -= 1.0
    return np.sum(M * b)
""")
M = np.array([0.5, -1.5, 1.0])


@pytest.mark.parametrize("name, args", [("after_loop", (M,)), ("after_branch", (M, 1.0)),
                                        ("in_next_iteration", (M,))])
def test_a_name_that_may_share_a_parameter_after_a_loop_or_branch_is_refused(name, args):
    # NumPy changes M in place there; the gradient would miss it.
    with pytest.raises(SymdiffError, match="b is an array shared with M"):
        grad(getattr(SHARED, name))(*[np.copy(a) for a in args])


def test_a_name_made_afresh_on_every_path_is_not_shared():
    agrees(SHARED.fresh_after_branch, (M, 1.0))
    agrees(SHARED.fresh_after_branch, (M, -1.0))


def test_a_name_that_shares_a_parameter_on_another_path_only_is_differentiated():
    # b is M only where the branch runs, or before the loop's first iteration.
    agrees(SHARED.after_branch, (M, -1.0))
    agrees(SHARED.fresh_after_loop, (M,))
