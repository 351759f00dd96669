"""In-place writes and aliasing: NumPy's augmented assignment on an array that another name
shares changes both, which symdiff refuses rather than differentiate wrongly. And the backward
sweep's own in-place lines (_add_to, _times, _scatter_add, an adjoint handed on unchanged),
which must never mutate what something else still reads."""


import numpy as np
import pytest
from gradcheck import agrees, check_grad, load, numeric_grad

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


V3 = np.array([0.5, -1.2, 2.0])


# --- in-place constructs ----------------------------------------------------------------

INPLACE = load("""
import numpy as np

def setitem(x):
    x[0] = 1.0
    return np.sum(x)

def augmented_setitem(x):
    x[0] += 1.0
    return np.sum(x)

def out_keyword(x):
    y = np.add(x, 1.0, out=x)
    return np.sum(y)

def out_positional(x):
    y = np.multiply(x, 2.0, x)
    return np.sum(y)

def view(x):
    y = x.view()
    return np.sum(y)

def augmented_alias_of_parameter(x):
    a = x
    x += 1.0
    return np.sum(a * x)

def augmented_alias_of_local(x):
    y = x * 1.0
    z = y
    y += x
    return np.sum(z * y)

def augmented_slice_view(x):
    y = x[1:]
    y *= 2.0
    return np.sum(x * x)

def augmented_reshape_view(x):
    y = x.reshape(3, 1)
    y -= 1.0
    return np.sum(x * x)
""")


@pytest.mark.parametrize("name", ["setitem", "augmented_setitem", "out_keyword",
                                  "out_positional", "view"])
def test_in_place_writes_are_refused(name):
    with pytest.raises(SymdiffError):
        grad(getattr(INPLACE, name))(V3.copy())


@pytest.mark.parametrize("name", ["augmented_alias_of_parameter", "augmented_alias_of_local",
                                  "augmented_slice_view", "augmented_reshape_view"])
def test_augmented_assignment_through_an_alias(name):
    f = getattr(INPLACE, name)
    try:
        g = grad(f)(V3.copy())
    except SymdiffError:
        return
    check_grad(lambda x: f(x.copy()), (V3,), grads=(g,))


U3 = np.array([0.5, -1.0, 2.0])


# --- bugs: in-place augmented assignment on shared arrays -----------------------------------

SHARED_IN_LOOPS = load("""
import numpy as np

def alias_updated_in_for(x):
    s = x * 1.0
    t = s
    for i in range(2):
        s += x
    return np.sum(t * s)

def alias_updated_in_while(x):
    s = x * 1.0
    t = s
    k = 0
    while k < 2:
        s *= 1.5
        k = k + 1
    return np.sum(t * s)

def parameter_updated_in_loop(x):
    s = x
    for i in range(2):
        s += 1.0
    return np.sum(s * x)

def bump(u):
    u += 1.0
    return np.sum(u)

def helper_updates_its_argument(x):
    y = x * 2.0
    a = bump(y)
    return a * np.sum(y)

def alias_updated_in_branch(x):
    s = x * 1.0
    t = s
    if np.sum(x) > 0:
        s += x
    return np.sum(t * s)
""")


def test_augmented_assignment_on_alias_in_branch_is_refused():
    with pytest.raises(SymdiffError, match="shared with t"):
        grad(SHARED_IN_LOOPS.alias_updated_in_branch)(U3.copy())


@pytest.mark.parametrize("name", ["alias_updated_in_for", "alias_updated_in_while",
                                  "parameter_updated_in_loop", "helper_updates_its_argument"])
def test_augmented_assignment_on_shared_array_in_loop_or_helper(name):
    f = getattr(SHARED_IN_LOOPS, name)
    try:
        g = grad(f)(U3.copy())
    except SymdiffError:
        return
    np.testing.assert_allclose(g, numeric_grad(lambda x: f(x.copy()), [U3], 0), rtol=1e-6)
