"""Measure symdiff on the gradient cases of its peers' test suites (autograd, Tangent).

Run: PYTHONPATH=. python tools/peers.py --autograd AUTOGRAD/tests --tangent TANGENT/tests
     [--report /tmp/peers_report.md] [--timeout 20] [--jobs 2] [--only test_numpy]

The suites are read where they are, never copied. autograd's test modules are imported as they
are, with ``autograd.test_util.check_grads``/``combo_check`` replaced by recorders, so each
``check_grads(fun, argnum)(*args)`` becomes one case. A case's function is then rebound to plain
NumPy (its globals and closure cells map every autograd.numpy/autograd.scipy object to the NumPy
or SciPy object it wraps), because symdiff resolves names to the objects they refer to. Tangent's
``functions.py`` is imported with a stand-in ``tangent`` module; every function it defines (except
the TensorFlow ones) is a case, differentiated at the inputs its tests use.

Each case runs in a worker process under a per-case alarm and is classified:
  right    agrees with central differences (float64) and with autograd where autograd can compute it
  refused  symdiff raised SymdiffError (the first line of its message is kept)
  crashed  any other exception from symdiff (a bug: an internal error reached the user)
  wrong    an answer that disagrees (the worst bug)
  timeout  building or running took longer than --timeout seconds
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import functools
import importlib
import importlib.util
import inspect
import itertools
import json
import operator
import os
import pkgutil
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import types
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

STATUSES = ("right", "refused", "crashed", "wrong", "timeout")
LOCATION = re.compile(r"^.*?:\d+:\d+: ")


class Timeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` in symdiff hides it."""


def _alarm(signum, frame):
    raise Timeout()


@contextlib.contextmanager
def time_limit(seconds):
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ---------------------------------------------------------------- NumPy <-> autograd

def _namespace_pairs():
    """(autograd module, NumPy/SciPy module) pairs whose same-named attributes correspond."""
    pairs = []
    for ag_root, np_root in (("autograd.numpy", "numpy"), ("autograd.scipy", "scipy")):
        root = importlib.import_module(ag_root)
        names = [ag_root] + [m.name for m in pkgutil.walk_packages(root.__path__, ag_root + ".")
                             if not m.name.rsplit(".", 1)[-1].startswith("_")]
        for name in names:
            try:
                ag_mod = importlib.import_module(name)
            except ImportError:
                continue
            target = np_root + name[len(ag_root):]
            np_mod = _resolve_dotted(target)
            if np_mod is not None:
                pairs.append((ag_mod, np_mod, target))
    return pairs


def _resolve_dotted(dotted):
    """``scipy.stats.norm`` is an object, not a module: walk attributes after the module part."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        return obj
    return None


class Maps:
    """Object correspondences both ways, and how to spell a NumPy/SciPy object in source.
    autograd's own transformations called inside a test's function are symdiff's."""

    def __init__(self):
        self.to_np, self.to_ag, self.spelling = {}, {}, {}
        import autograd

        import symdiff
        for name in ("grad", "jacobian", "hessian"):
            self.to_np[id(getattr(autograd, name))] = getattr(symdiff, name)
        for ag_mod, np_mod, dotted in _namespace_pairs():
            self._pair(ag_mod, np_mod, dotted)
            for name in dir(ag_mod):
                if name.startswith("_") or not hasattr(np_mod, name):
                    continue
                ag_obj, np_obj = getattr(ag_mod, name), getattr(np_mod, name)
                plain = (types.ModuleType, int, float, str, type)
                if isinstance(ag_obj, plain) or ag_obj is np_obj:
                    continue
                self._pair(ag_obj, np_obj, f"{dotted}.{name}")

    def _pair(self, ag_obj, np_obj, dotted):
        self.to_np.setdefault(id(ag_obj), np_obj)
        self.to_ag.setdefault(id(np_obj), ag_obj)
        spelled = "np" + dotted[len("numpy"):] if dotted.startswith("numpy") else dotted
        # the shortest spelling wins: np.sum rather than np.core.fromnumeric.sum
        if id(np_obj) not in self.spelling or len(spelled) < len(self.spelling[id(np_obj)]):
            self.spelling[id(np_obj)] = spelled


def _autograd_transformation(obj):
    """``(symdiff's transformation, function, argnum)`` for a function autograd's ``grad``,
    ``jacobian`` or ``hessian`` made (``grad(f, 1)``), else None."""
    if not isinstance(obj, types.FunctionType) or obj.__code__.co_name != "nary_f":
        return None
    cells = dict(zip(obj.__code__.co_freevars, (c.cell_contents for c in obj.__closure__ or ()),
                     strict=True))
    unary = cells.get("unary_operator")
    if not getattr(unary, "__module__", "").startswith("autograd") or \
            cells.get("nary_op_args") or cells.get("nary_op_kwargs"):
        return None
    import symdiff
    transform = {"grad": symdiff.grad, "jacobian": symdiff.jacobian,
                 "hessian": symdiff.hessian}.get(unary.__name__)
    if transform is None:
        return None
    return transform, cells["fun"], cells["argnum"]


class Rebinder:
    """A copy of a peer's function whose globals and closure cells are translated.

    Functions defined in the peer's files (``owned``) are rebuilt recursively, sharing one
    translated globals dict per module, so helpers they call are translated too.
    """

    def __init__(self, table, owned):
        self.table, self.owned, self.memo = table, owned, {}

    def __call__(self, obj):
        key = id(obj)
        if key in self.memo:
            return self.memo[key]
        if key in self.table:
            return self.table[key]
        made = _autograd_transformation(obj)
        if made is not None:  # grad(f, 1) made by autograd: symdiff's of the translated f
            transform, fun, argnum = made
            self.memo[key] = transform(self(fun), tuple(argnum) if isinstance(
                argnum, list) else argnum)
            return self.memo[key]
        if getattr(obj, "_is_autograd_primitive", False) and id(obj.fun) not in self.table \
                and isinstance(obj.fun, types.FunctionType) and self.owned(obj.fun):
            return self(obj.fun)  # a primitive the test itself defined: its raw function
        if isinstance(obj, types.FunctionType) and self.owned(obj):
            cells = None
            if obj.__closure__:
                cells = tuple(self._cell(c) for c in obj.__closure__)
            new = types.FunctionType(obj.__code__, self.globals_for(obj.__globals__), obj.__name__,
                                     None, cells)
            self.memo[key] = new
            new.__defaults__ = tuple(map(self, obj.__defaults__)) if obj.__defaults__ else None
            new.__kwdefaults__ = ({k: self(v) for k, v in obj.__kwdefaults__.items()}
                                  if obj.__kwdefaults__ else None)
            new.__qualname__, new.__module__ = obj.__qualname__, obj.__module__
            new.__dict__.update({k: self(v) for k, v in obj.__dict__.items()})
            return new
        if isinstance(obj, functools.partial):
            return functools.partial(self(obj.func), *map(self, obj.args),
                                     **{k: self(v) for k, v in obj.keywords.items()})
        return obj

    def _cell(self, cell):
        try:
            return types.CellType(self(cell.cell_contents))
        except ValueError:  # an empty cell
            return types.CellType()

    def globals_for(self, names):
        key = id(names)
        if key not in self.memo:
            new = {}
            self.memo[key] = new
            for k, v in list(names.items()):
                new[k] = self(v)
        return self.memo[key]


# ---------------------------------------------------------------- one case

class Case:
    def __init__(self, suite, file, test, line, fun, args, kwargs, wrt, fun_ag=None, points=None):
        self.suite, self.file, self.test, self.line = suite, file, test, line
        self.fun, self.args, self.kwargs, self.wrt = fun, args, kwargs, wrt
        self.fun_ag = fun_ag
        self.points = points or [(args, kwargs)]  # more input points, same kinds (Tangent)


def describe(value):
    if isinstance(value, np.ndarray):
        return f"array{value.shape} {value.dtype}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(describe(v) for v in value)
        return f"{type(value).__name__}({inner})"
    if isinstance(value, dict):
        return "dict(" + ", ".join(f"{k}={describe(v)}" for k, v in value.items()) + ")"
    if isinstance(value, (float, int, complex, np.generic)):
        return f"{type(value).__name__} {value!r}" if np.ndim(value) == 0 else repr(value)
    return type(value).__name__


def source_of(fun, limit=12):
    try:
        text = textwrap.dedent(inspect.getsource(fun))
    except (OSError, TypeError):
        return f"<no source: {fun!r}>"
    lines = text.splitlines()
    return "\n".join(lines[:limit] + (["..."] if len(lines) > limit else []))


def _flat(x):
    if isinstance(x, dict):
        return np.concatenate([_flat(x[k]) for k in sorted(x)] or [np.zeros(0)])
    if isinstance(x, (list, tuple)):
        return np.concatenate([_flat(v) for v in x] or [np.zeros(0)])
    return np.asarray(x).astype(np.complex128 if np.iscomplexobj(x) else np.float64).ravel()


def _unflat(like, vec):
    """``vec`` shaped as ``like``; returns (value, rest of vec)."""
    if isinstance(like, dict):
        out = {}
        for k in sorted(like):
            out[k], vec = _unflat(like[k], vec)
        return out, vec
    if isinstance(like, (list, tuple)):
        items = []
        for v in like:
            item, vec = _unflat(v, vec)
            items.append(item)
        return type(like)(items), vec
    size = int(np.size(like))
    if isinstance(like, np.ndarray):
        return vec[:size].reshape(np.shape(like)).copy(), vec[size:]
    return float(vec[0]), vec[1:]


def _scalar(value):
    value = np.asarray(value)
    if value.size != 1:
        raise ValueError(f"output of shape {value.shape} is not a scalar")
    return float(np.real(value.reshape(())))


def numeric_grad(f, args, kwargs, index, rng, limit=200):
    """Central differences of scalar f at args w.r.t. args[index]: (flat gradient, checked mask)."""
    x = args[index]
    vec = _flat(x).astype(np.float64)
    grad = np.full(vec.size, np.nan)
    chosen = np.arange(vec.size)
    if vec.size > limit:
        chosen = np.sort(rng.choice(vec.size, limit, replace=False))
    for i in chosen:
        step = 1e-6 * max(1.0, abs(vec[i]))
        values = []
        for sign in (1, -1):
            moved = vec.copy()
            moved[i] += sign * step
            new = list(args)
            new[index] = _unflat(x, moved)[0]
            values.append(_scalar(f(*copy.deepcopy(new), **kwargs)))
        grad[i] = (values[0] - values[1]) / (2 * step)
    mask = np.zeros(vec.size, bool)
    mask[chosen] = True
    return grad, mask


def close(a, b, rtol, atol):
    finite = b[np.isfinite(b)]
    scale = max(1.0, float(np.max(np.abs(finite)))) if finite.size else 1.0
    return bool(np.allclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True))


def shape_problem(result, arg):
    if isinstance(arg, np.ndarray):
        if np.shape(result) != arg.shape:
            return f"gradient shape {np.shape(result)} != parameter shape {arg.shape}"
    elif isinstance(arg, (float, int, np.generic)) and np.ndim(result) != 0:
        return f"gradient of a scalar parameter has shape {np.shape(result)}"
    return None


def run_case(case, timeout):
    """Classify one case: a dict with status and detail."""
    import autograd

    from symdiff import SymdiffError, grad

    argnums = case.wrt if isinstance(case.wrt, tuple) else (case.wrt,)
    started = time.time()
    kinks, info = [], {"autograd": True}
    try:
        with time_limit(timeout):
            gradient = grad(case.fun, wrt=case.wrt)
            for args, kwargs in case.points:
                result = gradient(*copy.deepcopy(args), **kwargs)
                results = result if isinstance(case.wrt, tuple) else (result,)
                found = []
                verdict = check_point(case, args, kwargs, argnums, results, autograd, found, info)
                if verdict:
                    return dict(status="wrong", detail=verdict, seconds=time.time() - started)
                kinks += [f"{k} at ({', '.join(map(describe, args))})" for k in found]
    except SymdiffError as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        return dict(status="refused", detail=first, seconds=time.time() - started)
    except Timeout:
        return dict(status="timeout", detail=f"over {timeout} s", seconds=time.time() - started)
    except Exception as error:
        where = ""
        for frame in reversed(traceback.extract_tb(error.__traceback__)):
            if "symdiff" in frame.filename:
                where = f" (at {Path(frame.filename).name}:{frame.lineno} in {frame.name})"
                break
        message = str(error).splitlines()[0] if str(error) else ""
        return dict(status="crashed", detail=f"{type(error).__name__}: {message}{where}"
                    + _itself_raises(case), seconds=time.time() - started)
    return dict(status="right", detail="; ".join(kinks), kink=bool(kinks),
                autograd=info["autograd"], seconds=time.time() - started)


def _itself_raises(case):
    """Say so when the function fails under plain NumPy too: then the crash may not be symdiff's."""
    args, kwargs = case.points[0]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            case.fun(*copy.deepcopy(args), **kwargs)
    except Exception as error:
        return f" [the function itself raises {type(error).__name__} under plain NumPy]"
    return ""


def check_point(case, args, kwargs, argnums, results, autograd, kinks, info):
    """None if symdiff's results agree; else what disagrees. Agreements with autograd alone at
    a point where central differences disagree with both are appended to ``kinks``;
    ``info["autograd"]`` becomes False when autograd could not compute a reference."""
    rng = np.random.default_rng(0)
    complex_input = any(np.iscomplexobj(_flat(args[i])) for i in argnums)
    reference = None
    if case.fun_ag is not None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = autograd.grad(case.fun_ag, case.wrt)(*copy.deepcopy(args), **kwargs)
            reference = ref if isinstance(case.wrt, tuple) else (ref,)
        except Timeout:
            raise
        except Exception:
            reference = None
    info["autograd"] = info["autograd"] and reference is not None
    problems = []
    for index, result in zip(argnums, results, strict=True):
        bad_shape = shape_problem(result, args[index])
        if bad_shape:
            problems.append(f"arg {index}: {bad_shape}")
            continue
        mine = _flat(result)
        if complex_input:
            if reference is None:
                problems.append(f"arg {index}: answered for a complex input (contract: refuse)")
            elif not close(mine, _flat(reference[argnums.index(index)]), 1e-5, 1e-7):
                problems.append(f"arg {index}: complex input, differs from autograd")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            num, mask = numeric_grad(case.fun, args, kwargs, index, rng)
        agrees_num = mine.size == num.size and close(mine[mask], num[mask], 1e-4, 1e-5)
        agrees_ag = None
        if reference is not None:
            theirs = _flat(reference[argnums.index(index)])
            agrees_ag = theirs.size == mine.size and close(mine, theirs, 1e-5, 1e-7)
            ag_vs_num = theirs.size == num.size and close(theirs[mask], num[mask], 1e-4, 1e-5)
        if agrees_num and agrees_ag is False and ag_vs_num:
            problems.append(f"arg {index}: differs from autograd {_show(theirs)} "
                            f"(symdiff {_show(mine)})")
        elif not agrees_num and not (agrees_ag and not ag_vs_num):
            problems.append(f"arg {index}: symdiff {_show(mine)} vs numeric {_show(num)}"
                            + ("" if agrees_ag is None else f", autograd agrees: {agrees_ag}"))
        elif not agrees_num:
            # symdiff and autograd agree exactly and both differ from central differences: the
            # point is a kink, a jump or the edge of the domain, where differences mean nothing
            kinks.append(f"arg {index}: symdiff and autograd {_show(mine)}, central differences "
                         f"{_show(num)}")
    where = ", ".join(f"{describe(a)}" for a in args)
    return "; ".join(problems) + f" at ({where})" if problems else None


def _show(vec, n=4):
    vec = np.asarray(vec).ravel()
    text = np.array2string(vec[:n], precision=5, separator=", ")
    return text[:-1] + ", ...]" if vec.size > n else text


# ---------------------------------------------------------------- autograd: collecting cases

def _owned_by(root):
    root = str(Path(root).resolve())
    return lambda fn: str(Path(fn.__code__.co_filename).resolve()).startswith(root)


def _caller_line(root):
    """``file:line`` of the innermost call from the peer's files (a test or its helpers)."""
    frame = sys._getframe(1)
    while frame is not None:
        if str(Path(frame.f_code.co_filename).resolve()).startswith(root):
            return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def collect_autograd(tests_dir, module_name):
    """Import one test module with recording check_grads/combo_check; run its tests."""
    import autograd.test_util as test_util

    root = str(Path(tests_dir).resolve())
    recorded = []
    current = {"test": ""}

    def check_grads(fun, argnum=0, *unused, **unused_kw):
        line = _caller_line(root)

        def record(*args, **kwargs):
            recorded.append((current["test"], line or _caller_line(root), fun,
                             copy.deepcopy(args), copy.deepcopy(kwargs), argnum))
        return record

    def combo_check(fun, *check_args, **check_kwargs):
        def run(*arg_lists, **kwarg_lists):
            keys = list(kwarg_lists)
            for combo in itertools.product(*arg_lists):
                for values in itertools.product(*(kwarg_lists[k] for k in keys)):
                    chosen = dict(zip(keys, values, strict=True))
                    check_grads(fun, *check_args, **check_kwargs)(*combo, **chosen)
        return run

    test_util.check_grads, test_util.combo_check = check_grads, combo_check
    sys.path.insert(0, root)
    sys.dont_write_bytecode = True
    errors = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.random.seed(42)
        module = importlib.import_module(module_name)
        for name, test in list(vars(module).items()):
            if not (name.startswith("test") and callable(test)):
                continue
            for params in _parametrizations(test):
                current["test"] = name
                np.random.seed(42)  # the suite's autouse fixture
                try:
                    with time_limit(60):
                        test(**params)
                except KeyboardInterrupt:
                    raise
                except BaseException as error:  # pytest.fail and pytest.raises' misses too
                    errors.append(f"{name}: {type(error).__name__}: {str(error)[:100]}")
    return recorded, errors


def _parametrizations(test):
    marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
    options = [{}]
    for mark in marks:
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) \
            else list(mark.args[0])
        new = []
        for values in mark.args[1]:
            values = values if len(names) > 1 else (values,)
            for old in options:
                new.append({**old, **dict(zip(names, values, strict=True))})
        options = new
    wanted = [p for p in inspect.signature(test).parameters]
    return [o for o in options if set(o) >= set(wanted)] if wanted else options


def autograd_cases(tests_dir, module_name, workdir):
    import autograd.numpy as anp

    maps = Maps()
    owned = _owned_by(tests_dir)
    to_np = Rebinder(maps.to_np, owned)
    recorded, errors = collect_autograd(tests_dir, module_name)
    cases = []
    for n, (test, line, fun, args, kwargs, argnum) in enumerate(recorded):
        wrt = tuple(argnum) if isinstance(argnum, (list, tuple)) else argnum
        fun_np = to_np(fun)
        args_np = tuple(to_np(a) for a in args)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fun_np(*copy.deepcopy(args_np), **kwargs)
        except Exception:
            out = None
        plain = isinstance(fun_np, types.FunctionType) and owned(fun_np)
        # (a tuple or list of arrays of one shape, as np.gradient returns: stacked first)
        arrays = isinstance(out, (tuple, list)) and len(out) > 0 and all(
            isinstance(o, np.ndarray) and o.shape == out[0].shape for o in out)
        needs_sum = isinstance(out, np.ndarray) and out.size != 1 or (
            isinstance(out, np.ndarray) and out.ndim > 0) or arrays
        if plain and not needs_sum:
            cases.append(Case("autograd", module_name, test, line, fun_np, args_np, kwargs, wrt,
                              fun_ag=fun))
            continue
        wrapper, wrapper_ag = make_wrapper(maps, anp, fun, fun_np, args_np, kwargs, out,
                                           f"case_{test}_{n}", workdir, needs_sum)
        cases.append(Case("autograd", module_name, test, line, wrapper, args_np, {}, wrt,
                          fun_ag=wrapper_ag))
    return cases, errors


def make_wrapper(maps, anp, fun, fun_np, args, kwargs, out, name, workdir, needs_sum):
    """A module-level function calling ``fun`` as the test did, summed against a random cotangent
    when its output is an array, or arrays of one shape stacked (autograd's check_vjp takes the
    same inner product)."""
    params = [f"a{i}" for i in range(len(args))]
    extra, call_kw = {}, []
    for key, value in kwargs.items():
        if _literal(value):
            call_kw.append(f"{key}={value!r}")
        else:
            extra[key] = value
            call_kw.append(f"{key}=_kw_{key}")
    spelled = maps.spelling.get(id(fun_np))
    callee = spelled or "_fn"
    call = f"{callee}({', '.join(params + call_kw)})"
    infix = next((sign for op, sign in INFIX.items() if op is fun_np), None)
    if infix and len(params) == 2 and not call_kw:
        call = f"({params[0]} {infix} {params[1]})"  # operator.add(a, b) is what a + b means
    if needs_sum and isinstance(out, (tuple, list)):
        call = f"np.stack({call})"
    body = f"np.sum({call} * _w)" if needs_sum else call
    imports = ["import numpy as np"]
    if callee.startswith("scipy."):
        imports.append("import " + ".".join(callee.split(".")[:2]))
    source = "\n".join(imports) + f"\n\n\ndef {name}({', '.join(params)}):\n    return {body}\n"
    path = Path(workdir) / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rng = np.random.default_rng(1)
    w = rng.standard_normal(np.shape(out)) if needs_sum else None
    module._fn, module._w = fun_np, w
    for key, value in extra.items():
        setattr(module, f"_kw_{key}", value)
    ag_globals = {"np": anp, "_fn": fun, "_w": w, **{f"_kw_{k}": v for k, v in extra.items()}}
    if callee.startswith("scipy."):
        import autograd.scipy
        ag_globals["scipy"] = autograd.scipy
    exec(compile(source.split("\n\n\n", 1)[1], str(path), "exec"), ag_globals)
    return getattr(module, name), ag_globals[name]


INFIX = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
         operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@"}


def _literal(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, tuple):
        return all(_literal(v) for v in value)
    return False


# ---------------------------------------------------------------- Tangent: cases

TANGENT_SPECIAL = {
    # name: (args builder, wrt), as tangent's own tests call them
    "logistic_regression": (lambda r: (r.random(3), np.eye(5)[1], r.standard_normal((3, 5)),
                                       r.standard_normal(5)), (2, 3)),
    "rnn": (lambda r: (r.standard_normal((3, 2)), r.standard_normal((2, 3))), (0, 1)),
    "bilinear": (lambda r: tuple(r.standard_normal(s) for s in
                                 [(1, 3), (1, 3), (3, 3), (3, 3), (1, 3)]), 0),
    "dict_saxpy": (lambda r: (dict(a=0.5, b=-1.5, c=2.0),), 0),
    "unpacking_args_saxpy": (lambda r: ((0.5, -1.5, 2.0),), 0),
    "nested_dict": (lambda r: (dict(i=dict(j=3.0, k=4.0)),), 0),
}
SCALARS = [-2., -1.5, -1., -0.5, -0.1, 0.1, 0.5, 1., 1.5, 2.]


def _tangent_points(fun, rng):
    names = list(inspect.signature(fun).parameters)
    points = []
    for k in range(4):
        args = []
        for j, name in enumerate(names):
            if name in "abc":
                args.append(SCALARS[(3 * k + 4 * j + 6) % len(SCALARS)])
            elif name == "n":
                args.append(1 + k % 3)
            elif name == "x":
                args.append(rng.standard_normal((3, 5, 10, 5)[k]))
            elif name == "sqm":
                args.append(rng.standard_normal((5, 5) if k % 2 else (1, 1)))
            elif name in ("abc_packed_in_tuple",):
                args.append((0.5, -1.5, 2.0))
            elif name == "i":
                args.append(1)
            else:
                return None
        points.append((tuple(args), {}))
    return points


class _StandIn(types.ModuleType):
    """Enough of ``tangent`` for functions.py to import; its helpers are ordinary Python."""

    def __init__(self):
        super().__init__("tangent")

        @contextlib.contextmanager
        def insert_grad_of(var):
            yield var

        def push(stack, value, op_id):
            stack.append(value)

        def pop(stack, op_id):
            return stack.pop()

        self.insert_grad_of, self.push, self.pop, self.Stack = insert_grad_of, push, pop, list
        self.trace = self.tangent = lambda f: f


def tangent_cases(tests_dir, only=None):
    import autograd.numpy as anp

    sys.modules.setdefault("tangent", _StandIn())
    sys.path.insert(0, str(Path(tests_dir).resolve()))
    sys.dont_write_bytecode = True
    module = importlib.import_module("functions")
    owned = _owned_by(tests_dir)
    to_ag = Rebinder({id(np): anp}, owned)
    rng = np.random.default_rng(0)
    cases, skipped = [], []
    for name, fun in vars(module).items():
        if not (isinstance(fun, types.FunctionType) and owned(fun)):
            continue
        if only and not any(o in name for o in only):
            continue
        if "tf." in inspect.getsource(fun):
            skipped.append(f"{name}: TensorFlow")
            continue
        if name in TANGENT_SPECIAL:
            build, wrt = TANGENT_SPECIAL[name]
            points = [(build(rng), {})]
        else:
            wrt = 0
            points = _tangent_points(fun, rng)
            if points is None:
                known = list(inspect.signature(fun).parameters)
                skipped.append(f"{name}: no inputs known for {known}")
                continue
        line = fun.__code__.co_firstlineno
        args, kwargs = points[0]
        cases.append(Case("tangent", "functions.py", name, f"functions.py:{line}", fun, args,
                          kwargs, wrt, fun_ag=to_ag(fun), points=points))
    return cases, skipped


# ---------------------------------------------------------------- worker and driver

def worker(suite, tests_dir, module_name, timeout, workdir):
    """Print one JSON line per case (and one for collection problems)."""
    warnings.simplefilter("ignore")
    if suite == "autograd":
        cases, problems = autograd_cases(tests_dir, module_name, workdir)
    else:
        only = module_name.split(",") if module_name else None
        cases, problems = tangent_cases(tests_dir, only=only)
    print(json.dumps({"kind": "collected", "suite": suite, "file": module_name,
                      "cases": len(cases), "problems": problems}), flush=True)
    for case in cases:
        verdict = run_case(case, timeout)
        print(json.dumps({
            "kind": "case", "suite": case.suite, "file": case.file, "test": case.test,
            "line": case.line, "wrt": case.wrt, "function": getattr(case.fun, "__name__", "?"),
            "source": source_of(case.fun) + _inner_source(case.fun),
            "args": [describe(a) for a in case.args],
            "kwargs": {k: describe(v) for k, v in case.kwargs.items()}, **verdict,
        }, default=str), flush=True)


def _inner_source(fun):
    inner = fun.__globals__.get("_fn") if fun.__name__.startswith("case_") else None
    if isinstance(inner, types.FunctionType):
        return "\n# where _fn is:\n" + source_of(inner)
    return ""


def run_worker(command, timeout):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout or ""
        out = out.decode() if isinstance(out, bytes) else out
        err, code = "worker timed out", -1
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if code != 0:
        rows.append({"kind": "worker-error", "command": command[-4:], "code": code,
                     "stderr": err[-1500:]})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--autograd", help="autograd's tests directory")
    parser.add_argument("--tangent", help="tangent's tests directory (holding functions.py)")
    parser.add_argument("--report", default="/tmp/peers_report.md")
    parser.add_argument("--timeout", type=int, default=20, help="seconds per case")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", help="autograd test modules / tangent function names")
    parser.add_argument("--worker", nargs=4, metavar=("SUITE", "DIR", "MODULE", "WORKDIR"),
                        help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        suite, tests_dir, module_name, workdir = options.worker
        worker(suite, tests_dir, module_name, options.timeout, workdir)
        return 0
    if not (options.autograd or options.tangent):
        parser.error("give --autograd and/or --tangent")
    os.environ.setdefault("SYMDIFF_CACHE_DIR", "off")  # measure builds, not yesterday's cache
    workdir = tempfile.mkdtemp(prefix="symdiff-peers-")
    jobs = []
    me = [sys.executable, str(Path(__file__).resolve()), "--timeout", str(options.timeout),
          "--worker"]
    if options.autograd:
        for path in sorted(Path(options.autograd).glob("test_*.py")):
            if options.only and not any(o in path.stem for o in options.only):
                continue
            jobs.append(me + ["autograd", options.autograd, path.stem, workdir])
    if options.tangent:
        jobs.append(me + ["tangent", options.tangent, ",".join(options.only or []), workdir])
    started = time.time()
    with ThreadPoolExecutor(options.jobs) as pool:
        rows = [row for found in pool.map(lambda c: run_worker(c, 1800), jobs) for row in found]
    shutil.rmtree(workdir, ignore_errors=True)
    text = report(rows, time.time() - started)
    Path(options.report).write_text(text)
    Path(options.report).with_suffix(".json").write_text(json.dumps(rows, indent=1, default=str))
    print(text.split("\n## Wrong")[0])
    print(f"report: {options.report} (and {Path(options.report).with_suffix('.json')})")
    return 0


def report(rows, seconds):
    cases = [r for r in rows if r["kind"] == "case"]
    lines = [f"# symdiff on its peers' test suites ({len(cases)} cases, {seconds:.0f} s)", "",
             "| suite | file | cases | " + " | ".join(STATUSES) + " |",
             "| --- | --- | ---: | " + " | ".join("---:" for _ in STATUSES) + " |"]

    def row(suite, file, group):
        counts = collections.Counter(r["status"] for r in group)
        return (f"| {suite} | {file} | {len(group)} | "
                + " | ".join(str(counts.get(s, 0)) for s in STATUSES) + " |")

    for suite in ("autograd", "tangent"):
        mine = [r for r in cases if r["suite"] == suite]
        if not mine:
            continue
        for file in sorted({r["file"] for r in mine}):
            lines.append(row(suite, file, [r for r in mine if r["file"] == file]))
        lines.append(row(f"**{suite}**", "**all**", mine))
    lines.append(row("**both**", "**all**", cases))
    complex_wrong = sum(r["status"] == "wrong" and "complex input" in r["detail"] for r in cases)
    kinks = [r for r in cases if r.get("kink")]
    alone = sum(r["status"] == "right" and not r.get("autograd") for r in cases)
    lines += ["", f"Of the wrong answers, {complex_wrong} answer for a complex input (the contract "
              "says refuse). Counted right although central differences disagree, because "
              f"symdiff and autograd agree (a kink, jump or domain edge): {len(kinks)}. Right "
              "answers checked against central differences only (autograd could not run the "
              f"case): {alone}."]
    for status in ("wrong", "crashed", "timeout"):
        chosen = [r for r in cases if r["status"] == status]
        lines += ["", f"## {status.capitalize()} ({len(chosen)})", ""]
        for r in chosen:
            lines += [f"### {r['file']}.{r['test']} at {r['line']} (wrt={r['wrt']})", "",
                      f"- args: {', '.join(r['args'])}"
                      + (f"; kwargs {r['kwargs']}" if r["kwargs"] else ""),
                      f"- {r['detail']}", "", "```python", r["source"], "```", ""]
    lines += ["", f"## Right at a kink ({len(kinks)})", ""]
    lines += [f"- {r['file']}.{r['test']} at {r['line']}: {r['detail']}" for r in kinks]
    refusals = collections.Counter(LOCATION.sub("", r["detail"]) for r in cases
                                   if r["status"] == "refused")
    lines += ["", f"## Refusal reasons ({sum(refusals.values())} refusals)", "",
              "| count | first line (location removed) |", "| ---: | --- |"]
    lines += [f"| {n} | {message.replace('|', '/')} |" for message, n in refusals.most_common()]
    lines += ["", "## Collection notes", ""]
    for r in rows:
        if r["kind"] == "collected":
            for problem in r["problems"]:
                lines.append(f"- {r['suite']} {r['file']}: {problem}")
        elif r["kind"] == "worker-error":
            lines.append(f"- worker {r['command']} exited {r['code']}: {r['stderr'][-300:]}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
