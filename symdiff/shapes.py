"""IR -> facts about every value the function binds, inferred once: what its shape is made
of (the broadcast of which values' shapes) and its kind (a Python number, a NumPy value of
which dtype, a list...), from the parameters' kinds. differentiate, prune and emit read them.

NumPy gives an elementwise result the broadcast shape of its operands. So a value's shape
is known, relative to others, as the broadcast of a set of *sources*: the parameters, and
values whose shape nothing here explains (an array operation's result, a branch's merge).
Two values with the same sources have the same shape, and a value with none is a scalar.
The backward sweep uses this to skip summing an adjoint down to a shape it already has,
and the forward sweep to know where the function's value is certainly a scalar.

A claim made here must never be wrong: anything this module cannot read (a call it does
not know to broadcast, an attribute, a keyword) makes the value its own source.

Kinds (``kinds.Kind``) are known where the gradient is specialised on its parameters'
kinds: each value's kind is NumPy's own answer, the statement run once on small values of
its operands' kinds (ones, of one entry per axis) while building. A name whose kind is not
known (a parameter left generic, module data, which may be rebound after the build, what is
made from them) may be anything: the generated code then keeps its run-time guards.

``numpy_guard`` reads the same expressions for what prune needs before it skips one: which
operands must hold NumPy floats for it to raise only on shapes that do not fit.
"""

from __future__ import annotations

import ast
import builtins
import copy
import math
import types
import warnings
from collections import ChainMap
from dataclasses import dataclass

import numpy as np

from . import kinds as K
from . import rules
from .ir import IR, Eqn, If, Loop

Sources = frozenset[str]

# Elementwise NumPy functions that broadcast their positional operands (ufuncs, and these).
_BROADCASTING = (np.clip,)
_FIRST_ONLY = (np.round, np.around, np.fix)  # the first operand's shape; the rest constants
# Functions that return a Python float for a number (and raise for a larger array).
_FLOAT_VALUED = (float, *(getattr(math, name[5:]) for row in rules.ELEMENTWISE
                          for name in row.names if name.startswith("math.")))
_SCALAR_ATTRIBUTES = {"pi", "e", "inf", "nan"}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.FloorDiv, ast.Mod)
_FULL_REDUCTIONS = {"np.sum", "np.mean", "np.prod", "np.max", "np.min", "np.var", "np.std",
                    "np.linalg.norm", "scipy.special.logsumexp"}


@dataclass(frozen=True)
class Facts:
    """What is certain of the values a function binds (see the module's docstring)."""

    sources: dict[str, Sources]  # name -> the sources whose broadcast is its shape
    kinds: dict[str, K.Kind]  # name -> its kind; a name left out may be anything
    arrays: frozenset[str]  # the names array operations bind (see array_results)
    samples: dict  # name -> a small value of its kind (for kind_of)
    functions: dict  # free name -> the function or module it refers to (when known safe)

    def shape(self, name) -> Sources:
        return sources(self.sources, name)

    def kind(self, name):
        return self.kinds.get(name)

    def numpy(self, name) -> bool:
        """Certainly a NumPy float: an array or a NumPy scalar of a floating dtype."""
        k = self.kinds.get(name)
        return isinstance(k, K.Array) and k.floating

    def ndarray(self, name) -> bool:
        """Certainly a NumPy array of floats (not a NumPy scalar: a list times np.float64
        raises where times an array it broadcasts)."""
        k = self.kinds.get(name)
        return isinstance(k, K.Array) and k.floating and not k.scalar

    def scalar(self, name) -> bool:
        """Certainly a number: a Python number or a NumPy scalar (not a 0-d array)."""
        k = self.kinds.get(name)
        return isinstance(k, K.Number) or isinstance(k, K.Array) and k.scalar

    def float_like(self, name, dtype="float64") -> bool:
        """Certainly a float of ``dtype``'s precision or more (a Python float is float64):
        the derivatives may compute with it as it is."""
        k = self.kinds.get(name)
        if isinstance(k, K.Number):
            return k.type == "float" or k.type == "int"  # Python's ints do not wrap
        return isinstance(k, K.Array) and k.floating and \
            np.dtype(k.dtype).itemsize >= np.dtype(dtype).itemsize

    def kind_of(self, node, names=None):
        """The kind of the value of expression ``node`` (code of the function's names),
        or None where not known."""
        return _evaluate(node, ChainMap(names or {}, self.samples), self.functions)


def facts(ir: IR) -> Facts:
    """The Facts of ``ir``'s values, from its parameters' kinds (``ir.kinds``)."""
    functions = {name: obj for name, obj, _ in ir.globals}
    found: dict[str, Sources] = {}
    known: dict[str, K.Kind] = {}
    samples: dict = {}
    for p in ir.params:
        k = ir.kinds.get(p)
        sample = _sample(k)
        if sample is not _NONE:
            known[p], samples[p] = k, sample
            if _is_scalar(k):
                found[p] = frozenset()
    safe = {**{name: obj for name, obj in _BUILTINS.items() if name not in functions},
            **{name: obj for name, obj in functions.items() if _safe(obj)}}
    walk = _Walk(found, known, samples, functions, safe, ir.np_alias)
    walk.items(ir.eqns)
    return Facts(found, known, frozenset(_array_results(ir.eqns)), samples, safe)


def shape_sources(ir: IR) -> dict[str, Sources]:
    """For each name the function binds, the sources whose broadcast is its shape.

    Example: for ``y = x * w + 1; s = np.sum(y); r = s * x`` the result maps y to
    {x, w}, s to {} (a scalar) and r to {x}. A name missing from the map is its own source.
    """
    return facts(ir).sources


def sources(found: dict[str, Sources], name: str) -> Sources:
    return found.get(name, frozenset((name,)))


def array_results(ir: IR) -> set[str]:
    """The names array operations (and stop_gradient, and values without gradient) bind.

    A value whose sources include one of these is most likely an array, not a Python
    number: used where a wrong guess costs only speed (the in-place helpers check at run
    time; a Python number takes the plain operators).
    """
    return _array_results(ir.eqns)


def _array_results(items) -> set[str]:
    """The names array operations (and stop_gradient, and values without gradient) bind."""
    names = set()
    for item in items:
        if isinstance(item, Eqn):
            if item.kind in ("array", "const", "stop_gradient"):
                names.add(item.out)
        elif isinstance(item, If):
            names |= _array_results(item.then) | _array_results(item.orelse)
        else:
            names |= _array_results(item.body)
    return names


class _Walk:
    """The statements in order, each value's shape sources and kind from its operands'."""

    def __init__(self, found, known, samples, functions, safe, np_alias):
        self.found, self.known, self.samples = found, known, samples
        self.functions, self.safe, self.np_alias = functions, safe, np_alias

    def items(self, items):
        for item in items:
            if isinstance(item, Eqn):
                if item.out:
                    self.eqn(item)
            elif isinstance(item, If):
                self.items(item.then)
                self.items(item.orelse)
                for merged, then, orelse in item.phis:
                    self.merge(merged, then, orelse)
            elif isinstance(item, Loop):
                self.loop(item)

    def loop(self, loop: Loop):
        # A carried variable keeps its kind if each iteration leaves it of the kind it
        # found; else it may be anything (and each iteration is read again so).
        for phi, init, _ in loop.carried:
            self.merge(phi, init)
        for _ in range(2):
            if loop.target:
                kind = _evaluate(ast.Call(
                    ast.Name(" next", ast.Load()), [ast.Call(ast.Name(" iter", ast.Load()),
                                                             [loop.header], [])], []),
                    self.samples, {**self.safe, " next": next, " iter": iter}
                ) if loop.kind == "for" else None  # (names no code can have)
                if isinstance(kind, K.Array) and any(
                        isinstance(n, ast.Name) and isinstance(self.known.get(n.id), K.Array)
                        and self.known[n.id].ndim is None for n in ast.walk(loop.header)):
                    kind = K.Array(kind.dtype, None)  # a row of an array of any ndim: any
                self.bind(loop.target, kind)
            self.items(loop.body)
            changed = False
            for phi, init, nxt in loop.carried:
                before = (self.known.get(phi), self.found.get(phi))
                self.merge(phi, init, nxt)
                changed |= (self.known.get(phi), self.found.get(phi)) != before
            if not changed:
                return

    def merge(self, name, *names):
        """A name that holds one of several names' values (a branch's, an iteration's;
        None: not bound): their kind where they agree, a scalar's shape where each is
        a number."""
        found = [self.known.get(n) if n else None for n in names]
        self.bind(name, found[0] if all(k == found[0] for k in found) else None)
        # (in a loop, the sources each iteration leaves are the ones it found, or the
        # variable is its own source; the loop's walk tries both: see loop)
        shapes = {sources(self.found, n) if n else None for n in names}
        if all(n and (_is_scalar(self.known.get(n)) or self.found.get(n) == frozenset())
               for n in names):
            self.found[name] = frozenset()
        elif len(shapes) == 1 and None not in shapes and name not in min(shapes):
            self.found[name] = min(shapes)  # one shape, whichever value it holds
        else:
            self.found.pop(name, None)

    def bind(self, name, kind):
        sample = _sample(kind)
        if sample is _NONE:
            self.known.pop(name, None)
            self.samples.pop(name, None)
        else:
            self.known[name], self.samples[name] = kind, sample

    def eqn(self, eqn: Eqn):
        shape = _eqn(eqn, self.found, self.functions, self.np_alias, self.known)
        kind = None
        if eqn.kind != "assert":
            kind = _evaluate(eqn.code, self.samples, self.safe)
            if isinstance(kind, K.Array) and kind.ndim is not None and any(
                    isinstance(self.known.get(n), K.Array) and self.known[n].ndim is None
                    for n in eqn.inputs) and not (shape == frozenset() and kind.scalar):
                kind = K.Array(kind.dtype, None)  # of an operand of any ndim: any too
        self.bind(eqn.out, kind)
        if _is_scalar(self.known.get(eqn.out)):
            shape = frozenset()
        self.found[eqn.out] = shape


_NONE = object()  # no sample: the kind is not known


def _sample(kind):
    """A small value of ``kind`` (ones, one entry per axis), or _NONE."""
    match kind:
        case K.Number(type=t):
            return {"float": 0.5, "int": 0, "bool": True}[t]
        case K.Array(dtype=dtype, ndim=ndim, scalar=scalar):
            if np.dtype(dtype).kind not in "fiub":
                return _NONE
            if scalar:
                return np.dtype(dtype).type(1)
            if ndim is None:
                return np.ones(1, dtype=dtype).view(_AnyAxes)
            return np.ones((1,) * ndim, dtype=dtype)
        case K.List(items=items) | K.Tuple(items=items):
            made = [_sample(k) for k in items]
            if any(m is _NONE for m in made):
                return _NONE
            return made if isinstance(kind, K.List) else tuple(made)
        case K.Dict(keys=keys, items=items):
            made = [_sample(k) for k in items]
            if any(m is _NONE for m in made):
                return _NONE
            return dict(zip(keys, made, strict=True))
    return _NONE


class _AnyAxes(np.ndarray):
    """The sample of an array of any ndim (tried as 1-d, then 4-d)."""


def _is_scalar(kind) -> bool:
    """Of shape (): a number, a NumPy scalar or a 0-d array."""
    return isinstance(kind, K.Number) or isinstance(kind, K.Array) and kind.ndim == 0


def _safe(obj) -> bool:
    """Whether calling ``obj`` on small values while building is harmless: NumPy's, math's
    and the builtins' functions (never the user's, which may print or change things)."""
    if isinstance(obj, types.ModuleType):
        return obj is np or obj is math or obj.__name__.startswith(("numpy.", "scipy."))
    if isinstance(obj, np.ufunc):
        return True
    module = getattr(obj, "__module__", None) or ""
    return callable(obj) and (module == "builtins" and obj not in _UNSAFE_BUILTINS
                              or module.split(".")[0] in ("numpy", "math", "scipy")
                              and not module.startswith("numpy.random"))


# What loop headers and shapes call, where the function has no name of its own for them
# (and math, which floats.on_floats calls for NumPy's functions on Python floats).
_BUILTINS = {f.__name__: f for f in (range, len, int, float, bool, abs, min, max, round,
                                     enumerate, zip, next, iter, tuple, list)} | {"math": math}
# A list of values written out (runtime._as_read gives the array NumPy reads it as) keeps
# its kind here, so that arithmetic repeating or joining it is still seen as a list's.
_BUILTINS["_as_read"] = lambda items: items


class _LenientMath:
    """The math module, whose functions give nan where math raises (for kinds alone)."""

    def __getattr__(self, name):
        found = getattr(math, name)
        if not callable(found):
            return found

        def lenient(*args):
            try:
                return found(*args)
            except (ValueError, OverflowError):
                return math.nan
        return lenient
_UNSAFE_BUILTINS = (print, input, open, exec, eval, compile, breakpoint, __import__,
                    setattr, delattr, globals, locals, vars, exit, quit, help)


# What changes state or touches files, reached as an attribute (np.random.normal, x.tofile):
# never called while building.
_STATEFUL = {"random", "seterr", "seterrcall", "setbufsize", "set_printoptions", "save",
             "savez", "savetxt", "load", "loadtxt", "genfromtxt", "fromfile", "tofile",
             "memmap", "dump", "testing", "lib"}


def _evaluate(node, samples, functions):
    """The kind of ``node``'s value on the samples, as NumPy computes it; None where that
    is not known (a name without a sample, a call of anything but NumPy's, an error)."""
    read = {}  # (only the samples it reads are copied: all of them, every time, was n**2)
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id in samples:
            read[n.id] = samples[n.id]
        elif isinstance(n, ast.Name) and n.id not in functions:
            return None
        if isinstance(n, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            return None
        if isinstance(n, ast.Call) and not isinstance(n.func, (ast.Name, ast.Attribute)):
            return None
        if isinstance(n, ast.Constant) and type(n.value) is int and abs(n.value) > 4096:
            return None  # (maybe a size: np.zeros(10**9) is not made while building)
        if isinstance(n, ast.Attribute) and n.attr in _STATEFUL:
            return None
    tree = ast.fix_missing_locations(ast.Expression(copy.deepcopy(node)))
    try:
        code = compile(tree, "<kinds>", "eval")
    except Exception:
        return None
    # An array of any ndim is a 1-d sample; where the code needs more axes (an axis=1),
    # a 4-d one.
    # Last, math's functions give nan where the sample is out of their domain (math.log(x
    # - y) at x = y): the value is a float all the same.
    wide = {k: np.ones((1,) * 4, v.dtype).view(_AnyAxes) if isinstance(v, _AnyAxes) else v
            for k, v in read.items()}
    lenient = {k: _LenientMath() if v is math else v for k, v in functions.items()}
    for attempt, names in ((read, functions), (wide, functions), (read, lenient)):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                value = eval(code, {"__builtins__": {}, **names},  # noqa: S307
                             {k: copy.copy(v) for k, v in attempt.items()})
        except Exception:
            continue
        kind = K.kind(value)
        return kind if _sample(kind) is not _NONE else None
    return None


def _eqn(eqn: Eqn, found, functions, np_alias, known=None) -> Sources:
    own = frozenset((eqn.out,))
    if eqn.kind == "array":
        statics = dict(eqn.statics)
        if eqn.op.names[0] in _FULL_REDUCTIONS and statics.get("axis", "None") == "None" \
                and statics.get("keepdims", "False") == "False":
            return frozenset()
        return own
    # stop_gradient(v) is v when run; a constant's arithmetic (-K, K * K) is NumPy's too
    # (what _expr cannot read, a mask or a shape, is its own source).
    if eqn.kind not in ("elementwise", "stop_gradient", "const"):
        return own
    try:
        return _expr(eqn.code, found, functions, np_alias, known or {})
    except _Unknown:
        return own


class _Unknown(Exception):
    """Raised inside the walk of an expression whose shape this module cannot explain."""


def _expr(node, found, functions, np_alias, known) -> Sources:
    def listed(n) -> bool:  # certainly a list or tuple (l + l, 2 * l: not elementwise)
        return isinstance(n, ast.Name) and isinstance(known.get(n.id), (K.List, K.Tuple))

    def walk(n) -> Sources:
        match n:
            case ast.Constant(value=bool() | int() | float() | None):
                return frozenset()
            case ast.Name(id=name):
                return sources(found, name)
            case ast.Attribute(value=ast.Name(id=root), attr=attr) if (
                    root == np_alias or functions.get(root) is math) and (
                    attr in _SCALAR_ATTRIBUTES):
                return frozenset()
            case ast.BinOp(op=op) if isinstance(op, _ARITHMETIC) and not (
                    listed(n.left) and not _numpy_operand(n.right, known)
                    or listed(n.right) and not _numpy_operand(n.left, known)):
                return walk(n.left) | walk(n.right)
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                return walk(n.operand)
            case ast.Call(keywords=[], args=[_]) if _full_reduction(
                    _function(n.func, functions, np_alias)):
                return frozenset()  # np.max(x) (in stop_gradient): a scalar
            case ast.Call(keywords=[]):
                fn = _function(n.func, functions, np_alias)
                if any(fn is f for f in _FLOAT_VALUED):
                    return frozenset()  # a Python float, whatever the operand
                if _broadcasts(fn):
                    return frozenset().union(*map(walk, n.args))
                if any(fn is f for f in _FIRST_ONLY) and n.args and all(
                        isinstance(a, ast.Constant) for a in n.args[1:]):
                    return walk(n.args[0])
        raise _Unknown

    return walk(node)


def _numpy_operand(node, known) -> bool:
    """Certainly a NumPy array (not a scalar): a list operand broadcasts against it."""
    k = known.get(node.id) if isinstance(node, ast.Name) else None
    return isinstance(k, K.Array) and not k.scalar


def _full_reduction(fn) -> bool:
    return any(fn is f for f in (np.sum, np.mean, np.prod, np.max, np.min, np.amax, np.amin,
                                 np.var, np.std))


def _broadcasts(fn) -> bool:
    """An elementwise NumPy function of one result that broadcasts its operands (not a
    generalized ufunc such as np.matmul, nor np.modf's two results)."""
    if isinstance(fn, np.ufunc):  # (with a float64 loop: np.left_shift has none)
        return fn.signature is None and fn.nout == 1 and "d" * fn.nin + "->d" in fn.types
    return any(fn is f for f in _BROADCASTING)


def numpy_guard(eqn: Eqn, certain: set[str], ir: IR, facts: Facts | None = None
                ) -> tuple[tuple[str, ...], bool] | None:
    """The names that must hold NumPy floats (not Python numbers or lists) for each
    operation of the elementwise ``eqn`` to be NumPy's, which raises only where shapes do
    not fit; None where it may raise whatever they hold (math.log(-1.0), float(an array),
    an integer array to a negative power, a NumPy scalar times a list). ``certain``: names
    known to hold NumPy floats; ``facts``: the kinds known of others. An operation with a
    NumPy array operand is NumPy's: ``x * s`` needs nothing of s when x is certain. Returns
    the guard, and whether the value is certainly NumPy's without it.

    Python numbers raise where NumPy does not (1.0 / 0.0), and lists where NumPy
    broadcasts them (2.0 * [1.0]), so a statement run for its value alone may be skipped
    only behind this guard.
    """
    functions = {name: obj for name, obj, _ in ir.globals}
    known = facts.kinds if facts is not None else {}
    guard: dict[str, None] = {}

    def operation(operands) -> str:
        found = [walk(o) for o in operands]  # (walk all: each may raise on its own)
        if "array" in found:
            return "array"
        names = [n.id for node in operands for n in ast.walk(node)
                 if isinstance(n, ast.Name) and n.id not in certain]
        unknown = [n for n in names if n not in known]
        # A known operand that is not a NumPy float: a number takes NumPy's arithmetic
        # from a NumPy operand; anything else (a list, integers, booleans) may raise.
        if any(not isinstance(known[n], K.Number) for n in names if n in known):
            raise _Unknown
        if not unknown and not any(found):
            raise _Unknown  # numbers alone: Python's arithmetic
        guard.update(dict.fromkeys(unknown))
        return "guarded"

    def walk(n) -> str | None:  # "array", "scalar": certainly NumPy's (once guarded)
        match n:
            case ast.Constant(value=bool() | int() | float() | None):
                return None
            case ast.Name(id=name):
                if name in certain:
                    k = known.get(name)
                    return "scalar" if isinstance(k, K.Array) and k.scalar else \
                        "array" if k is not None else "guarded"
                return None
            case ast.Attribute(value=ast.Name(id=root), attr=attr) if (
                    root == ir.np_alias and attr in _SCALAR_ATTRIBUTES):
                return None
            case ast.BinOp(op=op) if isinstance(op, _ARITHMETIC) and not (
                    isinstance(op, ast.Pow) and not _safe_power(n.right)):
                return operation([n.left, n.right])
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                return operation([n.operand])
            case ast.Call(keywords=[]) if _broadcasts(
                    fn := _function(n.func, functions, ir.np_alias)) and not (
                    fn is np.power and (len(n.args) < 2 or not _safe_power(n.args[1]))):
                return operation(n.args)
        raise _Unknown

    try:
        numpy = walk(eqn.code)
    except _Unknown:
        return None
    return tuple(guard), bool(numpy) and not guard


def _safe_power(exponent) -> bool:
    """An exponent an integer array can take: a float, or an integer that is not negative."""
    return isinstance(exponent, ast.Constant) and (
        isinstance(exponent.value, float) or exponent.value >= 0)


def _function(node, functions, np_alias):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module = np if node.value.id == np_alias else functions.get(node.value.id)
        return getattr(module, node.attr, None) if module is np or module is math else None
    if isinstance(node, ast.Name):
        return functions.get(node.id, getattr(builtins, node.id, None))
    return None
