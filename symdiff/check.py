"""A function and its gradient -> their agreement with central differences, at random points.

Used by ``symdiff FILE --check``. Every ``stop_gradient(...)`` argument is frozen at its value
at the point: the function is run once to record what each call of stop_gradient received,
and the differences replay those values, so that the numerical derivative treats them as
constants, as the gradient does (otherwise a straight-through estimator's gradient of 1 would
disagree with the true derivative 0 of rounding).

Points: each parameter that is differentiated gets values of magnitude uniform in
[0.5, 1.5] with random signs (away from the kinks and singularities at 0); where the
function is not finite there (a log or sqrt of a negative number), positive values in
[0.5, 1.5]; then in [0.1, 0.9] (arcsin, arctanh). A parameter that is not differentiated
takes its default, if it has one, and so does one whose default is an integer (a count,
``n=3``: its gradient is not compared; when no parameter is left to compare, the result
says "nothing to compare" and is not a failure).

Tolerance: a gradient ``g`` and the central difference ``n`` (step ``h = 1e-6 * max(1,
|x|)``) agree where ``|g - n| <= 1e-5 * max(1, |g|, |n|) + 10 * eps * |f| / h``: the
second term is the rounding error of the difference itself, ``eps * |f| / h``, with a margin,
which matters only where the function's value is large next to its slope (``1e7 + x*x``).
The error reported is ``|g - n| / (max(1, |g|, |n|) + 10 * eps * |f| / (h * 1e-5))``, which
is over 1e-5 exactly where they do not agree.
"""

from __future__ import annotations

import ast
import inspect
import math
import sys
from dataclasses import dataclass

import numpy as np

from . import runtime

TOLERANCE = 1e-5  # of the relative error |g - n| / max(1, |g|, |n|)
# Central differences of f with step h carry a rounding error of about eps * |f| / h; this
# many times that is allowed on top of TOLERANCE * max(1, |g|, |n|).
ROUNDING = 10.0
_DRAWS = ("signed", "positive", "small")
# The central differences call the function twice per element of a differentiated
# parameter, at each point: beyond this many elements the check would take hours. Other
# parameters are drawn whole: beyond this many elements (80 MB) they are refused too.
MAX_DIFFERENCED = 10_000
MAX_DRAWN = 10_000_000


@dataclass(frozen=True)
class CheckResult:
    """The largest relative error of a gradient, and where it was found.

    ``problem`` is set when the function could not be checked (then it failed); ``note``
    says why nothing was compared (every parameter in ``wrt`` has an integer default), which
    is not a failure.
    """

    name: str
    error: float
    where: str
    points: int
    problem: str = ""
    note: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem and self.error <= TOLERANCE

    @property
    def compared(self) -> bool:
        return bool(self.where)

    def summary(self) -> str:
        """One line: the function, its largest error, and ok or DISAGREES."""
        if self.problem:
            return f"{self.name}: not checked: {self.problem}"
        if not self.compared:
            return f"{self.name}: nothing to compare: {self.note}"
        verdict = "ok" if self.ok else "DISAGREES"
        return (f"{self.name}: largest relative error {self.error:.1e} ({self.where}) over "
                f"{self.points} random points: {verdict}")


# The value --check gives a parameter used only as an integer that has no default: an
# index valid in any axis of two elements or more, a loop run once.
INTEGER = 1


def check_gradient(fn, gradient, wrt, shapes=None, points=3, seed=0,
                   namespaces=(), integers=()) -> CheckResult:
    """Compare ``gradient`` with central differences of ``fn`` at ``points`` random points.

    ``gradient`` takes ``fn``'s arguments and returns a tuple of gradients, one per name in
    ``wrt``; ``shapes`` maps parameter names to array shapes (default: see
    ``parameter_shape``); ``namespaces`` are the globals of other modules whose functions
    ``fn`` calls, where stop_gradient is frozen too; ``integers`` are parameters used only
    as integers (indices, counts), which take their default, else ``INTEGER``.

    >>> def f(x, y):
    ...     return x * x * y
    >>> check_gradient(f, lambda x, y: (2 * x * y, x * x), ("x", "y")).ok
    True
    >>> check_gradient(f, lambda x, y: (x * y, x * x), ("x", "y")).ok
    False
    """
    name = getattr(fn, "__name__", "function")
    rng = np.random.default_rng(seed)
    frozen = _Frozen(fn, namespaces)
    signature = inspect.signature(fn)
    counts = [p for p in wrt if _integer(signature.parameters[p])]
    if len(counts) == len(wrt):  # --wrt n, with n=3: no gradient to compare
        containers = [_container(signature.parameters[p]) for p in counts]
        what = "a container default" if all(containers) else "an integer default" if not \
            any(containers) else "an integer or container default"
        note = (f"{', '.join(counts)} {'has' if len(counts) == 1 else 'have'} {what}"
                if counts else "no parameter to differentiate")
        return CheckResult(name, 0.0, "", 0, note=note)
    too_big = _too_big(signature, wrt, shapes or {})
    if too_big:
        return CheckResult(name, np.nan, "", 0, too_big)
    try:
        return _compare(fn, gradient, wrt, shapes, points, rng, frozen, signature, integers)
    except MemoryError:
        return CheckResult(name, np.nan, "", 0, "out of memory (MemoryError) with these "
                           "shapes; give smaller ones with --shape x=3,4")
    except Exception as e:  # noqa: BLE001 - a gradient of an odd type...: said, not a traceback
        return CheckResult(name, np.nan, "", 0, f"the check raised {type(e).__name__}: {e}")


def check_hessian(fn, wrt, shapes=None, points=3, seed=0, namespaces=(),
                  integers=()) -> CheckResult:
    """Compare ``symdiff.hessian(fn, wrt)`` with central differences of the gradient
    ``symdiff.grad(fn, wrt)``, at the random points ``check_gradient`` draws (same seed,
    same points), each stop_gradient argument frozen at the point: where fn calls
    stop_gradient there, the gradient program would compute its argument afresh, so the
    gradient differenced is instead central differences of fn itself (steps of 1e-4, the
    rounding tolerance widened to ``ROUNDING * eps * |f| / (h1 * h2)``).

    >>> def f(x, y):
    ...     return x * x * y
    >>> check_hessian(f, ("x", "y")).ok
    True
    """
    name = getattr(fn, "__name__", "function")
    rng = np.random.default_rng(seed)
    frozen = _Frozen(fn, namespaces)
    signature = inspect.signature(fn)
    active = tuple(p for p in wrt if not _integer(signature.parameters[p]))
    if not active:
        return CheckResult(name, 0.0, "", 0, note="no parameter without an integer or "
                           "container default to differentiate twice")
    too_big = _too_big(signature, wrt, shapes or {})
    if too_big:
        return CheckResult(name, np.nan, "", 0, too_big)
    if any(p.kind == p.KEYWORD_ONLY for p in signature.parameters.values()):
        return CheckResult(name, np.nan, "", 0, "a Hessian takes positional arguments, and "
                           f"{name} has keyword-only parameters")
    try:
        return _compare_hessian(fn, active, shapes, points, rng, frozen, signature, integers)
    except MemoryError:
        return CheckResult(name, np.nan, "", 0, "out of memory (MemoryError) with these "
                           "shapes; give smaller ones with --shape x=3,4")
    except _Diverged:
        return CheckResult(name, np.nan, "", 0, "stop_gradient was called a different "
                           "number of times near the point, so its arguments cannot be "
                           "frozen")
    except Exception as e:  # noqa: BLE001 - reported, with what was raised
        return CheckResult(name, np.nan, "", 0, f"the check raised {type(e).__name__}: {e}")


def _compare_hessian(fn, wrt, shapes, points, rng, frozen, signature,
                     integers=()) -> CheckResult:
    from . import api, higher

    name = getattr(fn, "__name__", "function")
    hessian = higher.hessian(fn, wrt=wrt)
    gradient = api.grad(fn, wrt=wrt)
    worst, where = 0.0, ""
    with np.errstate(all="ignore"):
        for k in range(points):
            found = _finite_point(fn, signature, wrt, shapes or {}, rng, frozen, integers)
            if isinstance(found, str):
                return CheckResult(name, np.nan, "", k, found)
            values, kinds = found
            try:
                blocks = hessian(*values.values())
            except Exception as e:  # noqa: BLE001 - reported, with what was raised
                return CheckResult(name, np.nan, "", k, f"the Hessian raised "
                                   f"{type(e).__name__}: {e}")
            if frozen.values:  # stop_gradient was called: differences of fn, frozen
                def grads(vals, kinds=kinds):
                    return [_central_differences(fn, vals, kinds, a, frozen, 1e-4)
                            for a in wrt]
                h = 1e-4
            else:
                def grads(vals, kinds=kinds):
                    args, kwargs = _call_arguments(vals, kinds)
                    return [(g, 0.0) for g in gradient(*args, **kwargs)]
                h = 1e-6
            for j, b in enumerate(wrt):
                columns = _gradient_differences(grads, values, b, h)
                for i, a in enumerate(wrt):
                    got = np.asarray(blocks[i][j], dtype=np.float64)
                    n, rounding = columns[i]
                    if got.shape != n.shape:
                        return CheckResult(name, np.nan, "", k, f"the Hessian's block in "
                                           f"{a} and {b} has shape {got.shape}, not "
                                           f"{n.shape}")
                    err = _relative_error(got, n, rounding)
                    if err > worst or not where:
                        d = f"d{a}^2" if a == b else f"d{a} d{b}"
                        worst, where = err, f"d^2{name}/{d} at point {k + 1}"
    return CheckResult(name, worst, where, points)


def _relative_error(got, n, rounding) -> float:
    """The largest error of ``got`` against the differences ``n``, relative: |got - n| <=
    TOLERANCE * max(1, |got|, |n|) + rounding reads as an error of at most TOLERANCE
    (nan, where one side is not finite, as inf)."""
    scale = np.maximum(1.0, np.maximum(np.abs(got), np.abs(n))) + rounding / TOLERANCE
    err = np.abs(got - n) / scale
    return float(np.max(np.where(np.isnan(err), np.inf, err), initial=0.0))


def _gradient_differences(grads, values, b, h):
    """Central differences in ``b`` of each gradient ``grads(values)`` gives, with the
    rounding error they may carry: ``[(block, rounding)]``, block shaped ``a.shape +
    b.shape``."""
    x = values[b]
    flat = np.array(x, dtype=np.float64).reshape(-1)
    out, rounding = None, None
    for e in range(flat.size):
        step = h * max(1.0, abs(flat[e]))
        sides = []
        for sign in (1.0, -1.0):
            moved = flat.copy()
            moved[e] += sign * step
            value = float(moved[0]) if np.ndim(x) == 0 else moved.reshape(np.shape(x))
            sides.append(grads({**values, b: value}))
        if out is None:
            out = [np.zeros(np.shape(g) + (flat.size,)) for g, _ in sides[0]]
            rounding = [np.zeros(np.shape(g) + (flat.size,)) for g, _ in sides[0]]
        for i, ((plus, r1), (minus, r2)) in enumerate(zip(*sides, strict=True)):
            plus, minus = np.asarray(plus, float), np.asarray(minus, float)
            out[i][..., e] = (plus - minus) / (2 * step)
            size = np.maximum(np.abs(plus), np.abs(minus))
            # The gradient's rounding, and the error of differences of f (r), over the step.
            error = ROUNDING * np.finfo(np.float64).eps * size + np.maximum(r1, r2)
            rounding[i][..., e] = np.where(np.isfinite(error), error / step, 0.0)
    return [(o.reshape(o.shape[:-1] + np.shape(x)), r.reshape(r.shape[:-1] + np.shape(x)))
            for o, r in zip(out, rounding, strict=True)]


def _too_big(signature, wrt, shapes) -> str:
    """Why a parameter's shape cannot be drawn (negative) or is too large to check (see
    MAX_DIFFERENCED), or ""."""
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty and (
                p.name not in wrt or _integer(p)):
            continue  # takes its default
        shape = parameter_shape(p, shapes)
        if any(n < 0 for n in shape):
            return (f"{p.name} would have the shape {shape}, which has a negative size "
                    f"(give one with --shape {p.name}=3,4)")
        size = math.prod(shape)
        limit = MAX_DIFFERENCED if p.name in wrt else MAX_DRAWN
        if size > limit:
            how = "differentiates element by element" if p.name in wrt else "draws values"
            return (f"{p.name} of shape {shape} has {size} elements; --check {how} and "
                    f"takes at most {limit} (give a smaller shape with --shape {p.name}=...)")
    return ""


def _compare(fn, gradient, wrt, shapes, points, rng, frozen, signature,
             integers=()) -> CheckResult:
    name = getattr(fn, "__name__", "function")
    worst, where = 0.0, ""
    with np.errstate(all="ignore"):
        for k in range(points):
            found = _finite_point(fn, signature, wrt, shapes or {}, rng, frozen, integers)
            if isinstance(found, str):
                return CheckResult(name, np.nan, "", k, found)
            values, kinds = found
            args, kwargs = _call_arguments(values, kinds)
            try:
                grads = gradient(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - reported, with what was raised
                return CheckResult(name, np.nan, "", k, f"the gradient raised "
                                   f"{type(e).__name__}: {e}")
            for p, g in zip(wrt, grads, strict=True):
                if _integer(signature.parameters[p]):
                    continue  # a count (range(n)): it keeps its default, nothing to compare
                try:
                    n, rounding = _central_differences(fn, values, kinds, p, frozen)
                except _Diverged:
                    return CheckResult(name, np.nan, "", k, "stop_gradient was called a "
                                       "different number of times near the point, so its "
                                       "arguments cannot be frozen")
                except Exception as e:  # noqa: BLE001 - reported, with what was raised
                    return CheckResult(name, np.nan, "", k, f"{name} raised "
                                       f"{type(e).__name__} near the point: {e}")
                g = np.asarray(g, dtype=np.float64)
                if g.shape != np.shape(n):
                    return CheckResult(name, np.nan, "", k, f"the gradient in {p} has shape "
                                       f"{g.shape}, the parameter {np.shape(n)}")
                err = _relative_error(g, n, rounding)
                if err > worst or not where:
                    worst, where = err, f"d{name}/d{p} at point {k + 1}"
    return CheckResult(name, worst, where, points)


def parameter_shape(param: inspect.Parameter, shapes) -> tuple[int, ...]:
    """The shape of the random values for ``param``: from ``shapes`` (``--shape``), else
    its annotation if that is a shape (``x: (3, 4)`` or ``x: "(3, 4)"``), else the shape
    of its default if that is an array, else a scalar.

    >>> def f(x: "(3, 4)", y=np.ones(2), z=1.0):
    ...     pass
    >>> [parameter_shape(p, {}) for p in inspect.signature(f).parameters.values()]
    [(3, 4), (2,), ()]
    """
    if param.name in shapes:
        return tuple(shapes[param.name])
    note = param.annotation
    for _ in range(2):  # with `from __future__ import annotations`, "(3, 4)" is quoted twice
        if isinstance(note, str):
            try:
                note = ast.literal_eval(note)
            except (ValueError, SyntaxError):
                note = None
    if isinstance(note, int) and not isinstance(note, bool):
        return (note,)
    if isinstance(note, (tuple, list)) and all(isinstance(n, int) for n in note):
        return tuple(note)
    if isinstance(param.default, np.ndarray):
        return param.default.shape
    return ()


def draw_point(fn, wrt, shapes=None, seed=0, namespaces=(), integers=()):
    """Arguments ``(args, kwargs)`` for ``fn``, drawn as ``check_gradient`` draws its first
    point (``symdiff audit`` audits there), or a str saying why there is none."""
    signature = inspect.signature(fn)
    found = _finite_point(fn, signature, wrt, shapes or {}, np.random.default_rng(seed),
                          _Frozen(fn, namespaces), integers)
    return found if isinstance(found, str) else _call_arguments(*found)


def _finite_point(fn, signature, wrt, shapes, rng, frozen, integers=()):
    """Values for every parameter where ``fn`` is finite (recording stop_gradient there),
    or what went wrong at every point tried."""
    failure = "it is not finite"
    for how in _DRAWS:
        values, kinds = {}, {}
        for p in signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            kinds[p.name] = p.kind
            if p.default is not p.empty and (p.name not in wrt or _integer(p)):
                values[p.name] = p.default
            elif p.name in integers and p.name not in wrt:  # an index, a count
                values[p.name] = INTEGER
            else:
                values[p.name] = _draw(rng, parameter_shape(p, shapes), how)
        args, kwargs = _call_arguments(values, kinds)
        try:
            value = frozen.call(fn, args, kwargs, replay=False)
            finite = bool(np.all(np.isfinite(value)))
        except Exception as e:  # noqa: BLE001 - math.log(-1.0) and the like: try others
            failure = f"it raised {type(e).__name__}: {e}"
            continue
        if finite:
            return values, kinds
    return (f"{failure} at every point tried (see symdiff --help for how points are drawn; "
            "give shapes with --shape x=3,4)")


def _integer(param) -> bool:
    """A parameter with an integer default is a count or an index, not a real number. One
    whose default is a container (a tuple, dict or list) keeps it too: random values are
    drawn as arrays, and its gradient has the container's structure."""
    return isinstance(param.default, (int, np.integer)) and param.default is not param.empty \
        or _container(param)


def _container(param) -> bool:
    return type(param.default) in (tuple, dict, list)


def _draw(rng, shape, how):
    if how == "signed":
        x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    elif how == "positive":
        x = rng.uniform(0.5, 1.5, shape)
    else:
        x = rng.uniform(0.1, 0.9, shape)
    return float(x) if shape == () else x


def _call_arguments(values, kinds):
    args = [v for n, v in values.items() if kinds[n] == inspect.Parameter.POSITIONAL_ONLY]
    kwargs = {n: v for n, v in values.items() if kinds[n] != inspect.Parameter.POSITIONAL_ONLY}
    return args, kwargs


def _central_differences(fn, values, kinds, p, frozen, h=1e-6):
    """The central differences of ``fn`` in ``p``, and the rounding error they may carry,
    ``ROUNDING * eps * |f| / step`` (0 where f is not finite: then they disagree anyway)."""
    x = values[p]
    flat = np.array(x, dtype=np.float64).reshape(-1)
    out = np.zeros_like(flat)
    rounding = np.zeros_like(flat)
    for i in range(flat.size):
        step = h * max(1.0, abs(flat[i]))
        sides = []
        for sign in (1.0, -1.0):
            moved = flat.copy()
            moved[i] += sign * step
            value = float(moved[0]) if np.ndim(x) == 0 else moved.reshape(np.shape(x))
            args, kwargs = _call_arguments({**values, p: value}, kinds)
            sides.append(frozen.call(fn, args, kwargs, replay=True))
        out[i] = (sides[0] - sides[1]) / (2 * step)
        size = float(np.max(np.abs(np.asarray(sides, dtype=np.float64))))
        rounding[i] = ROUNDING * np.finfo(np.float64).eps * size / step if np.isfinite(
            size) else 0.0
    if np.ndim(x):
        return out.reshape(np.shape(x)), rounding.reshape(np.shape(x))
    return float(out[0]), float(rounding[0])


class _Diverged(Exception):
    pass


class _Frozen:
    """Runs a function with stop_gradient replaced: recording its arguments, or replaying them.

    The function's module may hold stop_gradient under any name (``from symdiff import
    stop_gradient as sg``), so every global bound to it is replaced, and so are the
    ``symdiff.stop_gradient`` attribute (for ``symdiff.stop_gradient(...)``) and closure
    cells that hold it; so are the globals of the other modules given (a helper in another
    module is reached only through them).
    """

    def __init__(self, fn, namespaces=()):
        self.slots = []
        for names in [getattr(fn, "__globals__", {}), *namespaces]:
            self.slots += [(names, n) for n, v in list(names.items())
                           if v is runtime.stop_gradient]
        for module in (sys.modules.get("symdiff"), runtime):
            if module is not None:
                self.slots.append((vars(module), "stop_gradient"))
        # A function defined in another one may hold stop_gradient in a closure cell.
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                if cell.cell_contents is runtime.stop_gradient:
                    self.slots.append((cell, None))
            except ValueError:  # an empty cell
                pass
        self.values: list = []
        self.replaying = False
        self.count = 0

    def _stand_in(self, x):
        if not self.replaying:
            self.values.append(np.copy(x) if isinstance(x, np.ndarray) else x)
            return x
        if self.count >= len(self.values):
            raise _Diverged
        value = self.values[self.count]
        self.count += 1
        return np.copy(value) if isinstance(value, np.ndarray) else value

    def call(self, fn, args, kwargs, replay: bool):
        self.replaying, self.count = replay, 0
        if not replay:
            self.values = []
        saved = [(where, n, _get(where, n)) for where, n in self.slots]
        for where, n, _ in saved:
            _set(where, n, self._stand_in)
        try:
            value = fn(*args, **kwargs)
        finally:
            for where, n, original in saved:
                _set(where, n, original)
        if replay and self.count != len(self.values):
            raise _Diverged
        return value


def _get(where, name):
    return where[name] if isinstance(where, dict) else where.cell_contents


def _set(where, name, value):
    if isinstance(where, dict):
        where[name] = value
    else:
        where.cell_contents = value
