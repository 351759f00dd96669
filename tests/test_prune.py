"""What grad skips and frees: statements the gradient does not need, shape stand-ins and values
let go after their last use still raise where the function raises and are never read again."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import load

from symdiff import grad, value_and_grad

# --- statements whose value the gradient does not need still raise where they would ------

UNUSED = load("""
import numpy as np

def unused_sum_of_mismatched_shapes(x, w):
    check = x + w
    return np.sum(x ** 2)

def unused_column(x):
    n = x.shape[1]
    return np.sum(x ** 2)

def unused_axis(x):
    s = np.sum(x * 2.0, axis=1)
    return np.sum(x ** 2)

def unused_max_of_empty(x, e):
    m = np.max(e)
    return np.sum(x ** 2)

def shape_only_mismatch(z, t):
    return np.mean(np.log(np.sum(np.exp(z), axis=1)) - np.sum(t * z, axis=1))
""")


@pytest.mark.parametrize("name, args, error", [
    ("unused_sum_of_mismatched_shapes", (np.ones(3), np.ones(4)), ValueError),
    ("unused_column", (np.ones(3),), IndexError),
    ("unused_axis", (np.ones(3),), ValueError),
    ("unused_max_of_empty", (np.ones(3), np.ones(0)), ValueError),
    ("shape_only_mismatch", (np.ones((2, 3)), np.ones((2, 4))), ValueError),
])
def test_unused_statement_that_raises(name, args, error):
    f = getattr(UNUSED, name)
    with pytest.raises(error):
        f(*args)
    with pytest.raises(error):
        value_and_grad(f)(*args)
    with pytest.raises(error):
        grad(f)(*args)
