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


VIEWS = load("""
import numpy as np

def flipped(A):
    b = np.flip(A)
    b *= 2.0
    return np.sum(A * A) + np.sum(b)

def flipped_rows(A):
    b = np.flip(A, axis=0)
    b -= 1.0
    return np.sum(A * A) + np.sum(b)

def permuted(A):
    b = np.einsum('ij->ji', A)
    b *= 2.0
    return np.sum(A * A) + np.sum(b)

def product(A):
    b = np.einsum('ij,jk->ik', A, A)
    b *= 2.0
    return np.sum(A * A) + np.sum(b)
""")


@pytest.mark.parametrize("name", ["flipped", "flipped_rows", "permuted"])
def test_writing_into_a_view_that_np_flip_or_np_einsum_returns_is_refused(name):
    # NumPy writes through the view into A, which the function then reads: refused, never
    # the gradient of a function that did not change A.
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(SymdiffError, match="b is an array shared with A"):
        grad(getattr(VIEWS, name))(A)


def test_writing_into_a_new_array_from_np_einsum_is_differentiated():
    A = np.array([[1.0, 2.0], [3.0, 4.0]])
    # d/dA [sum(A*A) + 2 sum(A @ A)] = 2A + 2 (1 A^T + A^T 1), with 1 the matrix of ones
    ones = np.ones((2, 2))
    np.testing.assert_allclose(grad(VIEWS.product)(A), 2 * A + 2 * (ones @ A.T + A.T @ ones))


def test_a_write_refused_when_the_gradient_runs_is_located_once_with_its_hint():
    error = None
    try:
        grad(SHARED.after_loop)(np.ones(2))
    except SymdiffError as e:
        error = str(e)
    path = SHARED.__file__
    assert error == (
        f"{path}:8:5: b is an array shared with M, so NumPy's augmented assignment changes "
        "M too, which symdiff does not follow\n"
        "        b -= 1.0\n"
        "        ^\n"
        "  supported instead: b = b - ..., which makes a new array")
