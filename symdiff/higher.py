"""Transformations that compose: ``jvp``, ``jacobian``, ``hessian``, and ``grad`` of a gradient.

Everything here is built from two programs symdiff writes as source: the gradient
(reverse mode, ``differentiate``) and the tangent program (forward mode, ``forward``). A
tangent program is plain NumPy that symdiff reads again, so a second derivative is the
gradient of a tangent program (reverse over forward):

- ``grad(grad(f))`` with f of a scalar x: ``df_dx`` (the tangent program along x, its
  tangent fixed to 1) is a function of its own, and its gradient is f's second derivative;
- ``jvp(grad(f), primals, tangents)``: the gradient of ``<grad f, t>`` (the tangent program
  with the tangents as parameters) in x is ``H t``; in the tangents, ``grad f`` itself;
- ``hessian(f)``: ``H e_j`` column by column, ``jacobian(f)``: tangents or gradients of
  ``<f, u>`` along each basis vector, whichever are fewer.

The mixed partials are read as symmetric (``d/dx <grad_y f, v> = d/dy <grad_x f, v>`` for
twice differentiable f), as JAX's forward-over-reverse Hessian reads them.

A differentiated argument that is a container (a dict, tuple or list of arrays, as ``grad``
takes) makes a tangent program built for its kind, which takes a tangent per leaf
(``params_W_dot``); the API passes a tangent's leaves in order (``pytrees``) and gives
results the parameters' structure, nested as JAX nests them.
"""

from __future__ import annotations

import inspect
import re
import weakref

import numpy as np

from . import batch, kinds, pytrees, runtime
from .api import Gradient
from .errors import SymdiffError

_TANGENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class TangentFunction:
    """A generated tangent program: ``fn`` (compiled) and its ``source``; ``params`` are
    the function's own parameters, then the tangents it takes (``tangents``: whose)."""

    def __init__(self, built, params, tangents, unreadable=(), scalar=False):
        self.unreadable = unreadable  # why it cannot be differentiated again (Problems)
        # Whether the function's value is a scalar whatever its arguments' values (a full
        # reduction): a Hessian then need not call the function to check that it is.
        self.scalar = scalar
        self.built = built
        self.fn = built.fn
        self.source = built.source
        self.params = params
        self.tangents = tangents

    def ready(self) -> bool:
        return self.built.ready()

    def __call__(self, *args):
        self.ready()
        return self.fn(*args)


def tangent_function(fun, wrt: tuple[str, ...], seeds: dict[str, str] | None = None,
                     returns: str = "both", name: str = "", trees: tuple = ()
                     ) -> TangentFunction:
    """The tangent program of ``fun`` along the parameters ``wrt`` (names), compiled and
    kept per function and options, in memory and on disk (as gradients are: ``build``).
    ``seeds`` fixes some tangents (``{"x": "1.0"}``). ``trees``: ``(parameter, kind)`` of
    each container in ``wrt`` (``_trees``), whose leaves then take a tangent each, in order
    (``params_W_dot``); the program is built for those kinds, and kept per kinds."""
    seeds = tuple(sorted((seeds or {}).items()))
    key = (wrt, seeds, returns, name, trees, getattr(fun, "__code__", None))
    try:
        per_fn = _TANGENTS.setdefault(fun, {})
    except TypeError:
        per_fn = {}
    found = per_fn.get(key)
    if found is not None and found.ready():
        return found
    found = per_fn[key] = _tangent_built(fun, wrt, dict(seeds), returns, name, trees)
    return found


def _tangent_built(fun, wrt, seeds, returns, name, trees=()) -> TangentFunction:
    from . import cache
    from .build import _Built, _from_entry, _guards, _refreshers, _without_default_code

    options = ("tangent program", wrt, sorted(seeds.items()), returns, name)
    if trees:  # (the kinds as text, as a gradient's: a cache key is made of the options' repr)
        options += ([(n, str(k)) for n, k in trees],)
    entry = cache.load(fun, options)
    built = _from_entry(fun, entry) if entry is not None else None
    # (an entry written before "scalar" was kept is written again, with it)
    if built is not None and isinstance(entry.get("params"), list) and "scalar" in entry:
        built.fn.__defaults__ = None if entry["tangents"] else built.fn.__defaults__
        return TangentFunction(built, tuple(entry["params"]), tuple(entry["tangents"]),
                               scalar=entry.get("scalar") is True)

    from .compile import compile_source
    from .forward import tangent_program
    from .lower import lower
    from .parse import parse
    from .shapes import facts, sources

    parsed = _without_default_code(parse(fun))
    try:
        ir = lower(parsed, wrt, dict(trees) or None)
        program = tangent_program(ir, seeds, returns, name)
    except SymdiffError:
        raise
    except Exception as e:  # a bug of ours: still say where
        where = f"{parsed.source.filename}:{parsed.node.lineno}:{parsed.node.col_offset + 1}"
        raise SymdiffError(f"{where}: symdiff failed to write the tangent program of "
                           f"{parsed.name} ({type(e).__name__}: {e}); this is a bug in "
                           "symdiff, please report it with the function's source") from None
    # (what grad reads to leave out its run-time check of the value: no shape it depends on)
    scalar = sources(facts(ir).sources, ir.result) == frozenset()
    names = {n: obj for n, obj, _ in ir.globals} | program.globals
    fn, globs = compile_source(program.source, program.name, names, ir.np_alias)
    # (Tangent parameters come after the function's: its defaults are filled by the caller.)
    fn.__defaults__ = None if program.tangents else getattr(fun, "__defaults__", None)
    helpers = [(cache.where(c, fun), n, cache.identity(h)) for c, n, h in ir.guards]
    # (compile finds stop_gradient by that name; a program that cannot be read again is
    # built anew, so that it says why where it is differentiated)
    if all(h is not None for _, _, h in helpers) and not program.unreadable and all(
            n in names and n == "stop_gradient" or any(n == g for g, _, _ in ir.globals)
            for n in program.globals):
        cache.store(fun, options, {
            "name": program.name, "np_alias": ir.np_alias, "source": program.source,
            "names": [(n, cache.where(c, fun)) for n, _, c in ir.globals],
            "data": [(n, cache.where(c, fun)) for n, c in ir.data_globals],
            "helpers": helpers, "params": list(program.params),
            "tangents": list(program.tangents), "scalar": scalar})
    built = _Built(fn, program.source, globs, _refreshers(ir.data_globals), _guards(ir.guards))
    return TangentFunction(built, program.params, program.tangents, program.unreadable, scalar)


def _positional(fun) -> tuple[str, ...]:
    code = getattr(fun, "__code__", None)
    if code is None:
        raise SymdiffError(f"cannot differentiate {fun!r}: not a Python function")
    return code.co_varnames[:code.co_argcount]


def _names(fun, wrt) -> tuple[str, ...]:
    """``wrt`` (names or positions) as the names of ``fun``'s parameters."""
    params = _positional(fun)
    out = []
    for w in wrt:
        if isinstance(w, int) and not isinstance(w, bool):
            if not -len(params) <= w < len(params):
                raise SymdiffError(f"wrt={w} is out of range: {fun.__qualname__} has "
                                   f"{len(params)} positional parameters {params}")
            out.append(params[w])
        elif w in params:
            out.append(w)
        else:
            raise SymdiffError(f"wrt={w!r} names no positional parameter of "
                               f"{fun.__qualname__} {params}")
    return tuple(out)


def _float_leaves(fun, name, value, what):
    """Refuse an argument ``what`` (jacobian, hessian) would differentiate that is not a
    float, or a container with a leaf that is not (named by its path: ``p['n']``)."""
    for path, leaf in pytrees.flatten(value, name):
        if not _floating_leaf(leaf):
            raise SymdiffError(f"{what} of {fun.__qualname__} with respect to {path}: {path} "
                               f"is {kinds.kind(leaf)}, not a float")


def _trees(fun, names, args) -> tuple:
    """``(parameter, kind)`` of each of ``names`` whose argument is a container: its
    tangent program takes a tangent per leaf (``tangent_function``)."""
    params = _positional(fun)
    return tuple((n, kinds.kind(args[params.index(n)])) for n in names
                 if pytrees.is_container(args[params.index(n)]))


def _flat(values) -> list:
    """The leaves of each value in turn: the tangents a tangent program takes."""
    return [leaf for v in values for _, leaf in pytrees.flatten(v)]


class _Flat:
    """A call's arguments with each container among ``names`` replaced by its leaves, each
    a parameter of its own named by its path (``p['W']``): what the column loops of
    jacobian and hessian run on, as on arrays; ``rebuilt`` gives results the structure."""

    def __init__(self, params, args, names):
        self.given = dict(zip(params, args, strict=False))
        self.flattened = set(names)  # (a container not among them is one argument)
        self.params, self.args, self.leaves = [], [], {}
        for p, a in self.given.items():
            found = pytrees.flatten(a, p) if p in names else [(p, a)]
            self.leaves[p] = [path for path, _ in found]
            self.params += self.leaves[p]
            self.args += [leaf for _, leaf in found]

    @property
    def plain(self) -> bool:
        """No container was flattened: the leaves are the arguments as given."""
        return all(self.leaves[p] == [p] for p in self.flattened if p in self.leaves)

    def names(self, wrt) -> tuple:
        return tuple(leaf for w in wrt for leaf in self.leaves[w])

    def rebuilt(self, name, items):
        """``items`` (one per leaf of ``name``) in the structure of ``name``'s argument."""
        if name not in self.flattened:
            (item,) = items
            return item
        return _structured(self.given[name], items)

    def calling(self, fn, flat_out=False):
        """``fn`` (of the arguments as given, then more) as a function of the leaves; with
        ``flat_out``, its results (one per parameter differentiated) as leaves too."""
        def call(*args):
            leaves, given = iter(args), []
            for p in self.leaves:
                given.append(self.rebuilt(p, [next(leaves) for _ in self.leaves[p]]))
            out = fn(*given, *leaves)
            return _flat(out) if flat_out else out
        return call


def _floating(value) -> bool:
    if type(value) is np.ndarray:  # (the common case, without making its Kind)
        return value.dtype.kind == "f"
    k = kinds.kind(value)
    if isinstance(k, kinds.Number):
        return k.type == "float"
    return isinstance(k, kinds.Array) and np.dtype(k.dtype).kind == "f"


def _floating_leaf(leaf) -> bool:
    """A leaf of a container: a list there is a list of numbers, read as an array."""
    return _floating(np.asarray(leaf) if type(leaf) is list else leaf)


# --- jvp ---


def jvp(fun, primals, tangents):
    """Forward mode, JAX's signature: ``(fun(*primals), directional derivative)``.

    ``primals`` and ``tangents`` are tuples (or lists) of the same length, one tangent per
    argument, each of its primal's shape (a container's: of its structure, leaf by leaf).
    Float arguments are differentiated; an integer or boolean argument (or leaf) is held
    constant, and its tangent must be zero. The tangent is
    computed by a tangent sweep (``symdiff.forward``), written as source, never by finite
    differences. ``fun`` may be a gradient (``grad(f)``): then the tangent is a
    Hessian-vector product, as JAX's ``jvp(grad(f), ...)``, by reverse over forward mode.

    >>> import numpy as np
    >>> from symdiff import jvp
    >>> def f(x):
    ...     return np.sin(x) * 2.0
    >>> jvp(f, (0.0,), (1.0,))
    (0.0, 2.0)
    """
    primals, tangents = _pair(primals, tangents, fun)
    _not_of_jacobian(fun, "jvp")
    primals, tangents = _defaulted(getattr(fun, "fun", fun), primals, tangents)
    # An argument whose tangent is zero is held constant: jvp(f, (w, X), (v, 0 * X))
    # differentiates in w alone (a plan of its own). (A container's: leaf by leaf, since
    # an integer leaf must have a zero tangent.)
    zero = tuple(tuple(_zero(leaf) for _, leaf in pytrees.flatten(t, like=p))
                 if pytrees.is_container(p) else _zero(t)
                 for p, t in zip(primals, tangents, strict=True))
    key = (tuple(map(kinds.key, primals)), zero)
    try:
        plans = _PLANS.setdefault(fun, {})
    except TypeError:
        plans = {}
    plan = plans.get(key)
    if plan is None:
        plan = plans[key] = _plan(fun, primals, zero)
    run, used = plan
    return run(primals, [tangents[i] for i in used])


# fun -> the kinds of a call's primals -> what a jvp with those runs (_plan)
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plan(fun, primals, zero):
    """``(run, used)`` for a jvp of ``fun`` on primals of these kinds and tangents zero
    where ``zero`` says: ``run(primals, the used tangents)`` gives its result."""
    if isinstance(fun, Gradient):
        return _plan_of_gradient(fun, primals, zero)
    if not inspect.isfunction(fun):
        raise SymdiffError(f"jvp of {fun!r}: not a Python function (a function, or a "
                           "gradient grad(f), is supported)")
    params = _positional(fun)
    if len(primals) > len(params):
        raise SymdiffError(f"jvp: {len(primals)} primals for {fun.__qualname__}, which takes "
                           f"{len(params)} positional parameters {params}")
    wrt = _differentiated(fun, params, primals, zero)
    used = [params.index(w) for w in wrt]
    if not wrt:
        def constant(primals, _):
            value = fun(*primals)
            return value, _zero_like(value)
        return constant, used
    trees = _trees(fun, wrt, primals)
    tangent_function(fun, wrt, trees=trees)  # (built now: its errors are the plan's)

    def run(primals, t):
        t = _tangent_leaves([primals[i] for i in used], t)
        # (found again at each call: a helper redefined since makes a new program)
        value, dot = tangent_function(fun, wrt, trees=trees)(*primals, *t)
        return value, runtime._fit(dot, value, copy=any(dot is u for u in t))
    return run, used


def _tangent_leaves(primals, tangents) -> list:
    """The tangents as a tangent program takes them: a container's leaf by leaf, in its
    primal's order (a leaf that is a list of numbers as an array, as NumPy reads it)."""
    return [np.asarray(leaf, dtype=float) if type(leaf) is list else leaf
            for p, t in zip(primals, tangents, strict=True)
            for _, leaf in pytrees.flatten(t, like=p)]


def _zero(t) -> bool:
    """Whether a tangent is zero everywhere (a container's: in every leaf)."""
    if type(t) is float:
        return t == 0.0
    if isinstance(t, dict):
        return all(map(_zero, t.values()))
    if isinstance(t, (tuple, list)):
        return all(map(_zero, t))
    return not np.any(t)


def _pair(primals, tangents, fun):
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise SymdiffError("jvp(f, primals, tangents): primals and tangents must be tuples "
                           "(or lists) of the arguments, as JAX's: jvp(f, (x,), (v,))")
    if len(primals) != len(tangents):
        raise SymdiffError(f"jvp: {len(primals)} primals but {len(tangents)} tangents: "
                           "give one tangent per argument")
    code = getattr(getattr(fun, "fun", fun), "__code__", None)
    names = code.co_varnames[:code.co_argcount] if code is not None else ()
    for i, (p, t) in enumerate(zip(primals, tangents, strict=True)):
        if pytrees.is_container(p) or pytrees.is_container(t):
            name = names[i] if i < len(names) else f"argument {i}"
            found = pytrees.mismatch(p, t, name)
            if found is not None:
                raise SymdiffError(f"jvp of {getattr(fun, '__qualname__', fun)}: the tangent "
                                   f"of {name} does not have its primal's structure: {found}; "
                                   "give a tangent of the same containers, keys and shapes")
            continue
        if np.shape(p) != np.shape(t):
            raise SymdiffError(f"jvp: the tangent of argument {i} has shape {np.shape(t)}, "
                               f"its primal {np.shape(p)}: they must be the same")
    return tuple(primals), tuple(tangents)


def _differentiated(fun, params, primals, zero) -> tuple[str, ...]:
    """The parameters a jvp differentiates: the float ones whose tangent is not zero; an
    integer or boolean one must come with a zero tangent (it is held constant)."""
    wrt = []
    for name, p, z in zip(params, primals, zero, strict=False):
        if isinstance(z, tuple):  # a container: z per leaf
            for (path, leaf), leaf_zero in zip(pytrees.flatten(p, name), z, strict=True):
                if not _floating_leaf(leaf) and not leaf_zero:
                    raise SymdiffError(
                        f"jvp of {fun.__qualname__}: {path} is {kinds.kind(leaf)}, held "
                        "constant, but its tangent is not zero; pass it as a float to "
                        "differentiate it")
            if not all(z):
                wrt.append(name)
            continue
        if _floating(p):
            if not z:
                wrt.append(name)
        elif not z:
            raise SymdiffError(f"jvp of {fun.__qualname__}: {name} is {kinds.kind(p)}, held "
                               "constant, but its tangent is not zero; pass it as a float "
                               f"({name}=float(...)) to differentiate it")
    return tuple(wrt)


def _defaulted(fun, primals, tangents):
    """The primals with the defaults of the parameters left out, their tangents zero: a
    tangent program takes every parameter before its tangents."""
    defaults = getattr(fun, "__defaults__", None) or ()
    missing = len(_positional(fun)) - len(primals)
    if missing <= 0 or missing > len(defaults):
        return primals, tangents
    rest = tuple(defaults[len(defaults) - missing:])
    return primals + rest, tangents + tuple(_zero_like(d) for d in rest)


def _zero_like(value):
    return runtime._fit(0.0, value)


def _plan_of_gradient(gradient, primals, zero):
    """The plan of ``jvp(grad(f, wrt=W), primals, tangents)``: ``(grad f, d/de grad
    f(primals + e t))``.

    With T the tangent program of f (``<grad f, t>``, the tangents as parameters), the
    gradient of T in W is the tangent asked for, and in W's tangents, grad f itself: one
    reverse sweep over T gives both.
    """
    _plain(gradient, "jvp")
    fun = gradient.fun
    params = _positional(fun)
    wrt = _names(fun, gradient.wrt)
    for w in wrt:
        for path, leaf in pytrees.flatten(primals[params.index(w)], w):
            if not _floating_leaf(leaf):
                raise SymdiffError(f"jvp of grad({fun.__qualname__}): {path} is not a float "
                                   "argument; it cannot be differentiated")
    # (grad f itself comes from the tangents of W: they are taken even where zero)
    active = tuple(p for p in params[:len(primals)] if p in wrt or p in _differentiated(
        fun, params, primals, zero))
    trees = _trees(fun, active, primals)
    tf = tangent_function(fun, active, returns="tangent", trees=trees)
    n = len(tf.params) - len(tf.tangents)
    # A container's leaves take a tangent each: where each parameter's first one is.
    counts = [len(pytrees.flatten(primals[params.index(a)])) for a in active]
    starts = dict(zip(active, np.cumsum([0, *counts[:-1]]).tolist(), strict=True))
    sizes = dict(zip(active, counts, strict=True))
    slots = tuple([params.index(w) for w in wrt] +
                  [n + starts[w] + i for w in wrt for i in range(sizes[w])])
    k = len(wrt)
    used = [params.index(a) for a in active]

    def run(primals, t):
        t = _tangent_leaves([primals[i] for i in used], t)
        inner = _gradient_of(tangent_function(fun, active, returns="tangent", trees=trees),
                             slots)
        out = inner(*primals, *t)
        leaves = iter(out[k:])  # (grad f, leaf by leaf: in W's structure again)
        grads = [_structured(primals[params.index(w)], [next(leaves) for _ in range(sizes[w])])
                 for w in wrt]
        if gradient.as_tuple:
            return tuple(grads), tuple(out[:k])
        return grads[0], out[0]
    return run, used


def _structured(like, items):
    """``items`` (one per leaf of ``like``) in ``like``'s structure."""
    if not pytrees.is_container(like):
        (item,) = items
        return item
    return pytrees.unflatten(like, iter(items))


def _plain(gradient, what):
    if gradient.with_value or gradient.has_aux:
        raise SymdiffError(f"{what} of value_and_grad or of a gradient with has_aux is not "
                           f"supported; take {what} of grad(f) (without has_aux)")
    if gradient.lifted:  # (its tangent program would read stop_gradient as a constant)
        raise SymdiffError(f"{what} of {gradient!r}: second derivatives read stop_gradient "
                           "as a constant only; differentiate a copy of the function without "
                           "its stop_gradient calls")


_GRADIENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _gradient_of(tf: TangentFunction, slots: tuple[int, ...]):
    """The gradient (a ``Gradient``) of a tangent program with respect to ``slots``."""
    if tf.unreadable:
        raise SymdiffError(problems=tf.unreadable)
    per = _GRADIENTS.setdefault(tf.fn, {})
    g = per.get(slots)
    if g is None:
        g = per[slots] = _Refreshing(Gradient(tf.fn, slots, as_tuple=True), tf)
    return g


class _Refreshing:
    """A gradient of a tangent program, which reads the module data afresh first."""

    def __init__(self, gradient, tf):
        self.gradient = gradient
        self.tf = tf

    def __call__(self, *args):
        self.tf.ready()
        return self.gradient(*args)


# --- grad of a gradient ---


def second(gradient, wrt, with_value, as_tuple, has_aux):
    """``grad(grad(f, wrt=w), wrt=...)``: the gradient of ``df_dw``, the tangent program of
    f along the scalar parameter w with its tangent fixed to 1 (a function of f's own
    parameters, which returns df/dw)."""

    _plain(gradient, "grad")
    if has_aux:
        raise SymdiffError("grad(grad(f), has_aux=True) is not supported: take has_aux "
                           "off the outer grad")
    if gradient.as_tuple:
        raise SymdiffError(f"grad of grad({gradient.fun.__qualname__}, wrt={gradient.wrt}): "
                           "a gradient with respect to a tuple returns a tuple, not a "
                           "scalar; use hessian(f, wrt=...) for every second derivative")
    fun = gradient.fun
    (w,) = _names(fun, gradient.wrt)
    name = re.sub(r"\W", "_", f"d{fun.__name__}_d{w}")  # (d<lambda>_dz is no name)
    tf = tangent_function(fun, (w,), {w: "1.0"}, "tangent", name=name)
    if tf.unreadable:
        raise SymdiffError(problems=tf.unreadable)
    # (A scalar w alone: along an array's ones, the tangent would be a sum of partials.)
    message = (f"grad of grad({fun.__qualname__}) with respect to {w}: grad({fun.__qualname__}) "
               f"must give a scalar, but {w} {{what}}; use hessian({fun.__qualname__}) for "
               "the second derivatives of an array parameter")
    second = _Second(tf.fn, wrt, with_value, as_tuple, False,
                     scalar=(_positional(fun).index(w), message))
    second._remake = lambda: tangent_function(fun, (w,), {w: "1.0"}, "tangent", name=name).fn
    return second


class _Second(Gradient):
    """``grad(grad(f))``: the gradient of f's tangent program ``df_dw``, which is made again
    where a helper f calls is redefined, and reads f's module data afresh at each call
    (the tangent program's own copy of it is refreshed first)."""

    __slots__ = ("_remake",)

    def __call__(self, *args, **kwargs):
        fresh = self._remake()
        if fresh is not self.fun:  # (a helper was redefined: a new tangent program)
            self.fun, self._specs, self._fast, self._seen = fresh, {}, {}, set()
        return Gradient.__call__(self, *args, **kwargs)

    def _route(self, args, spec):
        pass  # (no dispatcher of its own: each call checks the tangent program first)


# --- jacobian and hessian ---


class Jacobian:
    """``jacobian(f, wrt)(*args)``: the derivatives of every entry of f's value, shaped
    ``value.shape + param.shape`` (JAX's layout); for a tuple ``wrt``, a tuple of such.

    Columns come from tangents (one tangent sweep per entry of the parameters) or rows
    from gradients (one reverse sweep per entry of the value), whichever are fewer. The
    Jacobian of a gradient ``grad(f)`` is a Hessian (see ``hessian``).
    """

    def __init__(self, fun, wrt, as_tuple):
        self.fun = fun
        self.wrt = wrt
        self.as_tuple = as_tuple
        # A Hessian's: the kinds of a call's arguments -> what calls with them share
        # (_HessianPlan), made by a call that ran the general path and batched all along.
        self._plans: dict = {}

    def __getstate__(self):
        # (its plans hold compiled programs: a copy, or an unpickled one, makes its own)
        return {k: v for k, v in self.__dict__.items() if k != "_plans"}

    def __setstate__(self, state):
        self.__dict__.update(state, _plans={})

    def __repr__(self):
        return f"<symdiff jacobian of {getattr(self.fun, '__qualname__', self.fun)} " \
               f"wrt {self.wrt}>"

    @property
    def source(self) -> str:
        """The generated source this Jacobian runs (for float64 arrays): of a Hessian, the
        gradient of f's tangent program along ``wrt`` (called once per entry of the
        parameters, with that basis vector as the tangent); of any other function, its
        tangent program (rows by gradients, where fewer, differentiate ``<f, u>``)."""
        if not isinstance(self.fun, Gradient):
            return tangent_function(self.fun, _names(self.fun, self.wrt)).source
        fun = self.fun.fun
        params = _positional(fun)
        outer = tuple(params.index(a) for a in _names(fun, self.fun.wrt))
        along = tuple(dict.fromkeys(_names(fun, self.wrt)))
        tf = tangent_function(fun, along, returns="tangent")
        return _gradient_of(tf, outer).gradient.source

    def __call__(self, *args, **kwargs):
        inner = self.fun.fun if isinstance(self.fun, Gradient) else self.fun
        if kwargs or len(args) < len(_positional(inner)):
            # (by name, or left to their defaults: as a call of the function binds them)
            bound = inspect.signature(inner).bind(*args, **kwargs)
            bound.apply_defaults()
            args = tuple(bound.arguments[p] for p in _positional(inner))
        if isinstance(self.fun, Gradient):
            key = tuple(map(kinds.key, args))
            plan = self._plans.get(key)
            if plan is not None:
                found = plan.run(inner, args)
                if found is not None:
                    return found
                del self._plans[key]  # (the general path says why, and plans again)
            value = inner(*args)
            if np.ndim(value) != 0:
                raise SymdiffError(f"hessian of {inner.__qualname__}: it returned an array of "
                                   f"shape {np.shape(value)}; a Hessian needs a scalar output "
                                   "(reduce it first; jacobian(f) gives the first "
                                   "derivatives of every element)")
            made = []
            blocks = _hessian_blocks(self.fun, self.wrt, self.as_tuple, args, made)
            if made:
                self._plans[key] = made[0]
            return blocks
        fun = self.fun
        params = _positional(fun)
        wrt = _names(fun, self.wrt)
        for w in wrt:
            _float_leaves(fun, w, args[params.index(w)], "jacobian")
        value = fun(*args)
        sizes = [np.size(leaf) for w in wrt for _, leaf in pytrees.flatten(
            args[params.index(w)])]
        if sum(sizes) <= max(np.size(value), 1):
            blocks = self._forward(fun, params, wrt, args, value)
        else:
            blocks = self._reverse(fun, params, wrt, args, value)
        return tuple(blocks) if self.as_tuple else blocks[0]

    def _forward(self, fun, params, wrt, args, value):
        along = tuple(dict.fromkeys(wrt))  # (wrt=(0, 0) takes one tangent of x)
        tf = tangent_function(fun, along, trees=_trees(fun, along, args))
        args, _ = _defaulted(fun, args, args)
        # A container's leaves are parameters of their own here; its blocks are rebuilt.
        flat = _Flat(params, args, along)
        program, plain = tf, flat.plain
        given, tf = wrt, flat.calling(tf)
        params, args, wrt, along = flat.params, flat.args, flat.names(wrt), flat.names(along)
        blocks = []
        for w in wrt:
            x = args[params.index(w)]
            block = np.zeros(np.shape(value) + np.shape(x), _precision(args, params, wrt))
            zeros = [np.zeros(np.shape(args[params.index(v)])) for v in along]
            slot = len(args) + along.index(w)
            # (All columns from one call of the program batched over them, where it takes
            # these arguments as they are: not a container's leaves.)
            if plain and program.ready() and batch.columns(
                    program.built, (*args, *zeros), slot, np.shape(x), [(1, np.shape(value))],
                    into=[block]):
                blocks.append(block)
                continue
            for j in np.ndindex(*np.shape(x)):
                t = list(zeros)
                e = np.zeros(np.shape(x))
                e[j] = 1.0
                t[along.index(w)] = e
                _, dot = tf(*args, *t)
                block[(...,) + j] = dot
            blocks.append(block)
        return _regrouped(flat, given, blocks)

    def _reverse(self, fun, params, wrt, args, value):
        g = _contracted(fun, len(params))
        grad = _gradient_in(g, tuple(params.index(w) for w in wrt))
        flat = _Flat(params, args, wrt)
        gradient, plain = grad, flat.plain
        given, grad = wrt, flat.calling(grad, flat_out=True)
        params, args, wrt = flat.params, flat.args, flat.names(wrt)
        blocks = [np.zeros(np.shape(value) + np.shape(args[params.index(w)]),
                           _precision(args, params, wrt)) for w in wrt]
        u = np.zeros(np.shape(value))
        built = plain and _specialised(gradient, (*args, u))
        found = built and batch.columns(built, (*args, u), len(args), np.shape(value), [
            (i, np.shape(args[params.index(w)])) for i, w in enumerate(wrt)])
        if found:
            for block, rows in zip(blocks, found, strict=True):
                block[...] = np.reshape(rows, block.shape)
            return _regrouped(flat, given, blocks)
        for i in np.ndindex(*np.shape(value)):
            u = np.zeros(np.shape(value))
            u[i] = 1.0
            for block, row in zip(blocks, grad(*args, u), strict=True):
                block[i] = row
        return _regrouped(flat, given, blocks)

    # --- a Hessian's closed formulas (symdiff.formula) and notebook display ---

    def math(self, unicode: bool = True) -> str:
        """A Hessian's second partial derivatives as closed formulas, pretty-printed by
        SymPy, each mixed one once (d2f/dx dy, which is d2f/dy dx); for a function with
        array operations or control flow (or a large formula), a line saying it is not a
        closed formula. Only for a Hessian (the Jacobian of a gradient).

        >>> import numpy as np
        >>> from symdiff import hessian
        >>> def f(x, y):
        ...     return np.sin(x) * y
        >>> print(hessian(f, wrt=("x", "y")).math(unicode=False))
        f(x, y) = y*sin(x)
        d^2f/dx^2 = -y*sin(x)
        d^2f/dx dy = cos(x)
        d^2f/dy^2 = 0
        """
        from .formula import of_jacobian

        return of_jacobian(self).pretty(unicode)

    def latex(self) -> str:
        """The same formulas as ``math()``, in LaTeX, one equation per line (or a LaTeX
        comment saying the Hessian is not a closed formula).

        >>> from symdiff import hessian
        >>> def f(x):
        ...     return 3.0 * x ** 3
        >>> print(hessian(f).latex())
        f(x) = 3 x^{3}
        \\frac{\\partial^{2} f}{\\partial x^{2}} = 18 x
        """
        from .formula import of_jacobian

        return of_jacobian(self).latex()

    def _repr_latex_(self):
        # As Gradient's: None (not a Hessian, or no closed formula) falls back to the
        # Markdown, or to the repr.
        from .api import Gradient
        from .formula import of_jacobian

        if not isinstance(self.fun, Gradient):
            return None
        f = of_jacobian(self)
        return Gradient._aligned(f.latex()) if f.closed else None

    def _repr_markdown_(self):
        from .api import Gradient
        from .formula import hessian_program, of_jacobian

        if not isinstance(self.fun, Gradient):
            return None
        f = of_jacobian(self)
        head = Gradient._aligned(f.latex()) if f.closed else f"*{f.name}: {f.note()}:*"
        try:
            program = f"```python\n{hessian_program(self)}```"
        except SymdiffError as e:  # (no tangent program for it)
            program = f"```text\n{e}\n```"
        return f"{head}\n\n{program}\n"


def _regrouped(flat, wrt, blocks) -> list:
    """One block per leaf of ``wrt``'s parameters, in order -> one per parameter, in its
    structure (JAX's: a container's Jacobian is the container of its leaves')."""
    blocks = iter(blocks)
    return [flat.rebuilt(w, [next(blocks) for _ in flat.leaves[w]]) for w in wrt]


_CONTRACTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _contracted(fun, n):
    """``def <f>_along(params..., _u): return np.sum(f(params...) * _u)``: a scalar
    function whose gradient is a vector-Jacobian product of f (its rows, one ``_u`` a
    basis vector at a time); f is called as a helper, and symdiff inlines it."""
    found = _CONTRACTED.get(fun)
    if found is not None:
        return found
    from .compile import compile_source

    params = _positional(fun)[:n]
    u = "_u"
    while u in params:
        u += "_"
    name = f"{fun.__name__}_along"
    args = ", ".join(params)
    source = (f"def {name}({args}, {u}):\n"
              f'    """<{fun.__name__}(...), {u}>: its gradient is a row of the Jacobian."""\n'
              f"    return _np.sum({fun.__name__}({args}) * {u})\n")
    fn, _ = compile_source(source, name, {fun.__name__: fun}, "_np")
    _CONTRACTED[fun] = fn
    return fn


# a contracted function (_contracted) -> the positions differentiated -> its Gradient
_CONTRACTED_GRADIENTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _gradient_in(g, positions):
    """The gradient of the contracted function ``g`` in ``positions``, kept (with its
    builds per kinds, as any gradient keeps them) from one Jacobian call to the next."""
    per = _CONTRACTED_GRADIENTS.setdefault(g, {})
    found = per.get(positions)
    if found is None:
        found = per[positions] = Gradient(g, positions, as_tuple=True)
    return found


def _hessian_blocks(gradient, wrt, as_tuple, args, made=None):
    """The Jacobian of ``grad(f, wrt=W)`` with respect to ``wrt``: block (a, b) holds
    d(df/da)/db, shaped ``a.shape + b.shape``, a column at a time: the gradient in a of
    the tangent program of f along b, at each basis vector of b. ``made`` (a list): where
    every block came from batched columns, the ``_HessianPlan`` of calls of these kinds
    is appended to it."""
    _plain(gradient, "jacobian")
    fun = gradient.fun
    args, _ = _defaulted(fun, tuple(args), tuple(args))
    params = _positional(fun)
    outer = _names(fun, gradient.wrt)
    inner = _names(fun, wrt)
    for w in (*outer, *inner):
        _float_leaves(fun, w, args[params.index(w)], "hessian")
    # One tangent program along every parameter of wrt (one build, not one per
    # parameter); a column's tangent is a basis vector in one of them, zero in the rest.
    along = tuple(dict.fromkeys(inner))
    tf = tangent_function(fun, along, returns="tangent", trees=_trees(fun, along, args))
    g = _gradient_of(tf, tuple(params.index(a) for a in outer))
    # A container's leaves are parameters of their own here; the blocks are nested after.
    flat = _Flat(params, args, (*outer, *inner))
    program, plain = g, flat.plain
    given, g = (outer, inner), flat.calling(g, flat_out=True)
    params, args, n = flat.params, flat.args, len(flat.args)
    outer, inner, along = flat.names(outer), flat.names(inner), flat.names(along)
    zeros = [np.zeros(np.shape(args[params.index(b)])) for b in along]
    blocks = {}
    batched = plain
    for k, b in enumerate(along):
        xb = args[params.index(b)]
        for a in outer:
            blocks[a, b] = np.zeros(np.shape(args[params.index(a)]) + np.shape(xb),
                                    _precision(args, params, (*outer, *inner)))
        full = (*args[:n], *zeros)
        built = plain and tf.ready() and _specialised(program.gradient, full)
        if built and batch.columns(built, full, n + k, np.shape(xb), [
                (i, np.shape(args[params.index(a)])) for i, a in enumerate(outer)],
                into=[blocks[a, b] for a in outer]):
            continue
        batched = False
        for j in np.ndindex(*np.shape(xb)):
            e = np.zeros(np.shape(xb))
            e[j] = 1.0
            column = g(*args[:n], *zeros[:k], e, *zeros[k + 1:])
            for a, c in zip(outer, column, strict=True):
                blocks[a, b][(...,) + j] = c
    if batched and made is not None and along:
        made.append(_HessianPlan(fun, tf, program.gradient._spec(full, {}), [
            params.index(a) for a in outer], [params.index(b) for b in inner], [
            params.index(b) for b in along], _precision(args, params, (*outer, *inner)),
            as_tuple, gradient.as_tuple))
    return _nested(flat, *given, blocks, as_tuple, gradient.as_tuple)


class _HessianPlan:
    """What a Hessian's calls on arguments of one set of kinds share, which the kinds fix:
    the tangent program, the build of its gradient the columns run, the positions of the
    parameters (outer: the gradient's, inner: the Hessian's, along: the inner ones once),
    the blocks' dtype. Made by a call that checked the arguments (floats, no container)
    and batched every column; ``run`` does only what depends on the values."""

    def __init__(self, fun, tf, spec, outer, inner, along, precision, as_tuple, outer_tuple):
        self.code = fun.__code__
        self.tf = tf
        self.spec = spec
        self.outer, self.inner, self.along = outer, inner, along
        self.precision = precision
        self.as_tuple, self.outer_tuple = as_tuple, outer_tuple

    def run(self, fun, args):
        """The Hessian's blocks, nested; None where the general path must run: a helper
        redefined, a value that may not be a scalar, columns that do not batch."""
        if fun.__code__ is not self.code or not (self.tf.ready() and self.spec.ready()):
            return None
        # (The value's shape: a scalar whatever the values where the tangent program's
        # analysis proved it; else the function runs, as the general path's check does.)
        if not self.tf.scalar and np.ndim(fun(*args)) != 0:
            return None
        n = len(args)
        full = (*args, *[np.zeros(np.shape(args[b])) for b in self.along])
        blocks = {}
        for k, b in enumerate(self.along):
            shape = np.shape(args[b])
            into = [np.zeros(np.shape(args[a]) + shape, self.precision) for a in self.outer]
            if not batch.columns(self.spec.built, full, n + k, shape, [
                    (i, np.shape(args[a])) for i, a in enumerate(self.outer)], into=into):
                return None
            for a, block in zip(self.outer, into, strict=True):
                blocks[a, b] = block
        rows = [tuple(blocks[a, b] for b in self.inner) if self.as_tuple else
                blocks[a, self.inner[0]] for a in self.outer]
        return tuple(rows) if self.outer_tuple else rows[0]


def _nested(flat, outer, inner, blocks, as_tuple, outer_tuple):
    """``blocks[a, b]`` (a and b leaves) in JAX's layout: the outer parameters' structure
    (a tuple of them for a tuple wrt), and at each of its leaves a, the inner parameters'
    (a tuple where ``as_tuple``), whose leaves b hold the blocks."""
    def at(a):
        per = [flat.rebuilt(b, [blocks[a, leaf] for leaf in flat.leaves[b]]) for b in inner]
        return tuple(per) if as_tuple else per[0]
    rows = [flat.rebuilt(w, [at(a) for a in flat.leaves[w]]) for w in outer]
    return tuple(rows) if outer_tuple else rows[0]


def _specialised(gradient, args):
    """The build a call of ``gradient`` on ``args`` runs, where it runs one as it is
    (not one that widens the arguments first); else None."""
    spec = gradient._spec(args, {})
    return spec.built if spec.raw is None and spec.ready() else None


def _precision(args, params, names):
    """float32 where every differentiated argument is float32 (or float16), as gradients
    are; else float64."""
    dtypes = [getattr(args[params.index(n)], "dtype", None) for n in names]
    if all(d is not None and d.kind == "f" and d.itemsize < 8 for d in dtypes):
        return np.float32
    return np.float64


def _not_of_jacobian(fun, what):
    if isinstance(fun, Jacobian):
        raise SymdiffError(f"{what} of {fun!r} is not supported: jacobian and hessian give "
                           "arrays of derivatives, not functions symdiff differentiates "
                           "again; grad(grad(f)) and jvp(grad(f), ...) compose")


def jacobian(fun=None, wrt=0):
    """The Jacobian of ``fun`` with respect to ``wrt`` (a name or position, or a tuple of
    them): ``jacobian(f)(*args)`` has shape ``f(*args).shape + param.shape``, as JAX's
    ``jacobian``; a tuple ``wrt`` gives a tuple, one per parameter.

    >>> import numpy as np
    >>> from symdiff import jacobian
    >>> def f(x):
    ...     return x ** 2
    >>> jacobian(f)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    """
    from .api import _normalize_wrt

    wrt, as_tuple = _normalize_wrt(wrt)
    if fun is None:
        return lambda f: Jacobian(f, wrt, as_tuple)
    _not_of_jacobian(fun, "jacobian")
    return Jacobian(fun, wrt, as_tuple)


def hessian(fun=None, wrt=0):
    """The Hessian of a scalar function: ``hessian(f)(*args)`` has shape ``param.shape +
    param.shape``; for a tuple ``wrt``, nested tuples ``H[i][j]`` of shape
    ``wrt[i].shape + wrt[j].shape`` (JAX's layout). It is the Jacobian of the gradient,
    made a column at a time by reverse over forward mode (Hessian-vector products).

    >>> import numpy as np
    >>> from symdiff import hessian
    >>> def f(x):
    ...     return x[0] ** 2 * x[1]
    >>> hessian(f)(np.array([1.0, 3.0]))
    array([[6., 2.],
           [2., 0.]])
    """
    from .api import _normalize_wrt, grad

    wrt, as_tuple = _normalize_wrt(wrt)
    if fun is None:
        return lambda f: hessian(f, wrt if as_tuple else wrt[0])
    _not_of_jacobian(fun, "hessian")
    return Jacobian(grad(fun, wrt if as_tuple else wrt[0]), wrt, as_tuple)
