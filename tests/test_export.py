"""``symdiff --output``: the exported module compiles and matches grad, also in a process
without SymPy or symdiff."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gradcheck import load

from symdiff import grad
from symdiff.cli import main

X3 = np.array([0.5, -1.0, 2.0])


_X4 = np.array([1.0, 2.0, 3.0, 4.0])

# --- the exported module behaves as grad -------------------------------------------------

EXPORTED = '''
import numpy as np
from symdiff import stop_gradient as sg

K = np.array([1, 2, 3], dtype=np.uint8)

def loss(x, t):
    z = x - sg(np.max(x))
    return np.log(np.sum(np.exp(z))) - np.sum(t * z) + np.sum(x * K * K)

def guarded(x, c):
    return np.sum(x * x) + np.sum(x * 0.0 + 1.0 / c)

def take(x, i):
    return np.sum(x[i] ** 2)
'''


def _export(tmp_path, capsys):
    src = tmp_path / "exp5.py"
    src.write_text(EXPORTED)
    out = tmp_path / "exp5_grads.py"
    status = main([str(src), "--wrt", "x", "-o", str(out)])
    capsys.readouterr()
    assert status == 0
    namespace = {"__name__": "exp5_grads"}
    exec(compile(out.read_text(), str(out), "exec"), namespace)
    module = load(EXPORTED)
    return namespace, module


def test_the_exported_module_matches_grad(tmp_path, capsys):
    ns, m = _export(tmp_path, capsys)
    for t in [np.array([0.0, 1.0, 0.0]), [0.0, 1.0, 0.0], np.array([0, 1, 0]), 1.0]:
        np.testing.assert_allclose(ns["grad_loss"](X3, t), grad(m.loss)(X3, t), rtol=1e-12)
    np.testing.assert_allclose(ns["grad_guarded"](X3, 2.0), grad(m.guarded)(X3, 2.0))
    for c in [0.0, 0]:
        with pytest.raises(ZeroDivisionError):
            ns["grad_guarded"](X3, c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(ns["grad_guarded"](X3, np.float64(0.0)), 2 * X3)


# A bug at 158d6a1 (fixed by e576f9d): the export had the same 'i = _as_float(i)' line.
def test_the_exported_module_keeps_an_index_list(tmp_path, capsys):
    ns, _ = _export(tmp_path, capsys)
    np.testing.assert_allclose(ns["grad_take"](_X4, [0, 2]), [2.0, 0.0, 6.0, 0.0])
