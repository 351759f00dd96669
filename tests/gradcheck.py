"""Shared test helpers: central-difference gradient checks, functions built from source, and
files written for and run through the command line."""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
import tempfile
import textwrap
import uuid
import warnings
from pathlib import Path

import numpy as np

from symdiff import grad, value_and_grad
from symdiff.cli import main

_counter = itertools.count()
_DIR = Path(tempfile.mkdtemp(prefix="symdiff-tests-"))


def load(source: str, name: str | None = None):
    """Write ``source`` to a fresh module file, import it, and return it (or its ``name``).

    symdiff reads a function's source from its file, so test functions must live in one.
    """
    path = _DIR / f"m{next(_counter)}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name) if name else module


def numeric_grad(f, args, index, h=1e-6):
    """Central differences of scalar ``f(*args)`` with respect to ``args[index]``, float64."""
    args = [np.array(a, dtype=np.float64) if isinstance(a, np.ndarray) else a for a in args]
    x = np.asarray(args[index], dtype=np.float64)
    g = np.zeros(x.shape)  # C order, so that g.reshape(-1) is a view whatever x's layout
    flat = x.reshape(-1)
    for i in range(flat.size):
        step = h * max(1.0, abs(flat[i]))
        plus, minus = flat.copy(), flat.copy()
        plus[i] += step
        minus[i] -= step
        fp = f(*_with(args, index, plus.reshape(x.shape), x))
        fm = f(*_with(args, index, minus.reshape(x.shape), x))
        g.reshape(-1)[i] = (fp - fm) / (2 * step)
    return g if x.ndim else float(g)


def _with(args, index, value, like):
    out = list(args)
    out[index] = value if np.ndim(like) or isinstance(args[index], np.ndarray) else float(value)
    return out


def check_grad(f, args, wrt=(0,), grads=None, rtol=1e-5, atol=1e-6, seed=0):
    """Assert symdiff's gradient of ``f`` matches central differences at ``args``.

    Checks every element, and a random direction (a directional derivative, as
    autograd's ``check_grads`` does). ``grads`` may be passed in if already computed.
    Returns the gradients.
    """
    if grads is None:
        grads = grad(f, wrt=tuple(wrt))(*args)
    rng = np.random.default_rng(seed)
    for i, g in zip(wrt, grads, strict=True):
        expected = numeric_grad(f, args, i)
        assert np.shape(g) == np.shape(args[i]), (np.shape(g), np.shape(args[i]))
        np.testing.assert_allclose(g, expected, rtol=rtol, atol=atol,
                                   err_msg=f"gradient w.r.t. argument {i}")
        v = rng.standard_normal(np.shape(args[i]))
        x = np.asarray(args[i], dtype=np.float64)
        h = 1e-6 * max(1.0, float(np.max(np.abs(x), initial=0.0)))
        plus = _with(args, i, x + h * v, args[i])
        minus = _with(args, i, x - h * v, args[i])
        directional = (f(*plus) - f(*minus)) / (2 * h)
        np.testing.assert_allclose(np.sum(np.asarray(g) * v), directional, rtol=rtol * 10,
                                   atol=atol * 10, err_msg="random direction")
    return grads


def contract_grads(f, args, wrt=(0,)):
    """The gradients of ``f`` at ``args`` (a tuple), checking the output contract.

    Gradients have their parameter's shape, are float64 (a float for a scalar that is not
    an ndarray; float32 for a float32 one), share no memory with the inputs or with each
    other, and the inputs are left unchanged; value_and_grad gives the same gradients.
    """
    copies = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args]
    grads = grad(f, wrt=tuple(wrt))(*args)
    for a, c in zip(args, copies, strict=True):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, c, err_msg="the gradient changed an input")
    _, again = value_and_grad(f, wrt=tuple(wrt))(*args)
    for g, h in zip(grads, again, strict=True):
        np.testing.assert_array_equal(g, h)
    for k, (i, g) in enumerate(zip(wrt, grads, strict=True)):
        assert np.shape(g) == np.shape(args[i])
        single = getattr(args[i], "dtype", None) == np.float32
        if isinstance(args[i], np.ndarray):
            assert isinstance(g, np.ndarray) and g.dtype == (np.float32 if single else
                                                             np.float64)
            assert g.flags.writeable
            for a in args:
                assert not (isinstance(a, np.ndarray) and np.shares_memory(g, a))
            for other in grads[k + 1:]:
                assert not (isinstance(other, np.ndarray) and np.shares_memory(g, other))
        else:
            assert isinstance(g, np.float32 if single else float)
    return grads


def agrees(f, args, wrt=(0,)):
    """The gradients of ``f`` check out against central differences (and the contract)."""
    check_grad(f, args, wrt=wrt, grads=contract_grads(f, args, wrt))


def equals(f, args, expected, wrt=(0,)):
    """The gradients of ``f`` equal ``expected`` (computed by hand)."""
    for g, e in zip(contract_grads(f, args, wrt), expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)


def fresh_module(source: str, name: str):
    """Import ``source`` as module ``name`` (registered in sys.modules) from its file."""
    path = _DIR / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def random_data():
    """The module of data random programs read (``adv4rand.A``, ``adv4rand.B``), made once
    for whichever test file needs it first."""
    return sys.modules.get("adv4rand") or fresh_module(
        "import numpy as np\nA = np.linspace(0.5, 1.5, 4)\n"
        "B = np.linspace(-1.0, 1.0, 3).reshape(3, 1)\n", "adv4rand")


class Frozen:
    """A stand-in for stop_gradient: records each value once, then replays it.

    Central differences of a function that calls it see every stopped value frozen at the
    point, as long as the perturbed calls take the same path (same calls, same order).
    Set ``replay`` (and ``k = 0``) after the first call.
    """

    def __init__(self):
        self.values, self.replay, self.k = [], False, 0

    def __call__(self, v):
        if not self.replay:
            self.values.append(np.copy(v) if isinstance(v, np.ndarray) else v)
            return v
        self.k += 1
        return self.values[self.k - 1]


# --- gradients compared with the function's own errors and values ---


def outcome(call):
    """The value of ``call()``, or the exception it raised."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call()
        except Exception as e:  # noqa: BLE001 - what is raised is what is compared
            return e


def both(f, args, wrt=(0,)):
    """grad's and value_and_grad's gradients of ``f`` at ``args``, checked to agree."""
    g = grad(f, wrt=wrt)(*args)
    value, h = value_and_grad(f, wrt=wrt)(*args)
    assert value == f(*args) or np.allclose(value, f(*args), rtol=1e-12)
    for a, b in zip(g, h, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    return g


def both_one(f, args, wrt=0):
    """grad's gradient of ``f`` at ``args``, checked to equal value_and_grad's, whose value
    must be the function's."""
    g = grad(f, wrt=wrt)(*args)
    value, h = value_and_grad(f, wrt=wrt)(*args)
    np.testing.assert_allclose(value, f(*args), rtol=1e-12)
    np.testing.assert_allclose(g, h, rtol=1e-12, atol=1e-15)
    return g


def ro(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def frozen_reference(source, args, wrt, name="f", h=1e-6):
    """Central differences of ``name`` in ``source`` (which imports stop_gradient as sg)
    with every stop_gradient value frozen at ``args``."""
    module = load(source.replace("from symdiff import stop_gradient as sg", ""))
    frozen = Frozen()
    module.sg = frozen
    f = getattr(module, name)
    f(*args)
    frozen.replay = True

    def replayed(*a):
        frozen.k = 0
        return f(*a)

    return [numeric_grad(replayed, list(args), i, h=h) for i in wrt]


def batched_and_looped(monkeypatch, make):
    """``make()`` (a hessian or jacobian call) with its columns batched (symdiff.batch, a
    scalar's one column too), then by the column loop, and whether each batched call did
    batch: ``(batched, looped, seen)``."""
    from symdiff import batch
    from symdiff import higher as _higher

    monkeypatch.setattr(batch, "MIN_COLUMNS", 1)
    seen = []
    columns = batch.columns

    def recorded(*args, **kwargs):
        found = columns(*args, **kwargs)
        seen.append(found is not None)
        return found

    monkeypatch.setattr(_higher.batch, "columns", recorded)
    batched = make()
    monkeypatch.setattr(_higher.batch, "columns", lambda *a, **k: None)
    looped = make()
    monkeypatch.setattr(_higher.batch, "columns", columns)
    return batched, looped, seen


# --- the command line: files written, run, imported and exported ---


def write(directory, text, name="m.py"):
    path = Path(directory) / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def run(capsys, *argv):
    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def live(path):
    """Import ``path`` under a fresh module name, as --check does."""
    name = f"cli_live_file_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def exported(path):
    """Exec an exported module's text in a fresh namespace (symdiff not needed by it)."""
    namespace = {"__name__": f"cli_exported_{next(_counter)}"}
    exec(compile(Path(path).read_text(), str(path), "exec"), namespace)
    return namespace


def unique(prefix):
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# In a clean interpreter where importing SymPy or symdiff fails: import each exported
# module and evaluate the named gradients at the given points.
_CLEAN = """
import importlib.util, json, sys
sys.modules["sympy"] = None
sys.modules["symdiff"] = None
import numpy as np
jobs = json.loads(sys.argv[1])
out = {}
for k, (path, name, args, kwargs) in enumerate(jobs):
    spec = importlib.util.spec_from_file_location(f"exported_{k}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = [np.array(a) if isinstance(a, list) else a for a in args]
    kwargs = {n: np.array(a) if isinstance(a, list) else a for n, a in kwargs.items()}
    gradient = getattr(module, "grad_" + name)
    out[str(k)] = [np.asarray(g).tolist() for g in gradient(*args, **kwargs)]
print(json.dumps(out))
"""


def run_clean(jobs):
    done = subprocess.run([sys.executable, "-c", _CLEAN, json.dumps(jobs)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def draw(shape, rng):
    return rng.uniform(0.5, 1.5, shape).tolist() if shape else float(rng.uniform(0.5, 1.5))


def random_body(rnd, names, ops, split, limits, trips) -> list[str]:
    """The statements of a random program (random.Random ``rnd``): one to four values
    ``v0, v1, ...``, each one of ``ops`` (``{a} op {b}`` templates) of earlier ``names``,
    which it extends. Below ``split[0]`` a value is a plain statement, below ``split[1]`` an
    if/else on ``np.sum(name) > limit``, else a loop of ``randint(*trips)`` iterations."""
    def op(pool):
        return rnd.choice(ops).format(a=rnd.choice(pool), b=rnd.choice(pool))

    body = []
    for k in range(rnd.randint(1, 5)):
        v = f"v{k}"
        r = rnd.random()
        if r < split[0]:
            body.append(f"    {v} = {op(names)}")
        elif r < split[1]:
            body += [f"    if np.sum({rnd.choice(names)}) > {rnd.choice(limits)}:",
                     f"        {v} = {op(names)}", "    else:", f"        {v} = {op(names)}"]
        else:
            body += [f"    {v} = {rnd.choice(names)}",
                     f"    for i in range({rnd.randint(*trips)}):",
                     f"        {v} = {op(names + [v])} * 0.5 + {v} * 0.5"]
        names.append(v)
    return body
