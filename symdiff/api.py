"""The public entry points: ``grad`` and ``value_and_grad`` -> compiled, cached gradients."""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
import sys
import weakref
from dataclasses import dataclass, field

import numpy as np

from . import calls
from .errors import SymdiffError
from .parse import NOT_LITERAL, literal

_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PLAIN = calls.PLAIN
# Booleans and 8- and 16-bit integers, which NumPy computes with in float16 or float32,
# are differentiated from float64 copies (calls.Signature.widened); other dtypes, by their
# characters: floats, 32- and 64-bit integers, pass as they are.
_NARROW = frozenset({bool, np.bool_, np.int8, np.uint8, np.int16, np.uint16})
_WIDE = "efdgiIlLqQ"
_FAST = _PLAIN - _NARROW  # numbers that pass as they are, wherever they stand


@dataclass(frozen=True)
class _Built:
    fn: object  # the compiled gradient function
    source: str
    globals: dict
    refresh: tuple  # (name, getter): module-level data read afresh at every call
    guards: tuple = ()  # (getter, helper, _made(helper)): the functions it calls, as built
    backward: int = field(init=False)  # the line of the seed, where the backward sweep starts

    def __post_init__(self):
        seed = re.search(r"^    d\w* = 1\.0$", self.source, re.MULTILINE)
        line = self.source.count("\n", 0, seed.start()) + 1 if seed else 10**9
        object.__setattr__(self, "backward", line)


class Gradient:
    """The gradient of a function, callable with that function's own arguments.

    ``source`` is the generated Python source, ``fun`` the original function. The gradient
    is built on first use (call, ``source``) and cached in memory per function and options.
    It pickles (and copies) as its function and options, and is built again where it is
    unpickled.

    >>> from symdiff import grad
    >>> def f(x):
    ...     return 3.0 * x ** 2
    >>> g = grad(f)
    >>> g(2.0), g.fun is f
    (12.0, True)
    """

    __slots__ = ("fun", "wrt", "with_value", "as_tuple", "_built", "_ready", "_signature",
                 "_arity", "_wrt_at", "__weakref__")

    def __init__(self, fun, wrt, with_value=False, as_tuple=False):
        _refuse(fun)
        self.fun = fun
        self.wrt = wrt
        self.with_value = with_value
        self.as_tuple = as_tuple
        self._built = None
        self._ready = None  # the built function, when a call has nothing to check first
        self._signature = None  # where the arguments are, once built
        self._arity = -1  # how many positional arguments a call with nothing left out has
        self._wrt_at: tuple[int, ...] = ()  # where the differentiated ones are among them

    def __call__(self, *args, **kwargs):
        # A scalar gradient costs a few hundred nanoseconds: this path stays short.
        fn = self._ready
        if fn is None:
            fn = self._prepare().fn
        n = len(args)
        if kwargs or n != self._arity:
            _defaults(fn, self.fun)  # as the function has them now (f.__defaults__ = ...)
            fn = self._check(fn, args, kwargs)
        # Numbers in the two most common arities are told by their types alone: a loop
        # costs more here than the arithmetic of a two-float gradient.
        elif n == 2 and type(args[0]) in _FAST and type(args[1]) in _FAST or \
                n == 1 and type(args[0]) in _FAST:
            pass
        else:
            for a in args:
                if type(a) not in _PLAIN and (type(a) is not np.ndarray
                                              or a.dtype.char not in _WIDE):
                    fn = self._check(fn, args, kwargs)
                    break
            else:
                for i in self._wrt_at:
                    if type(args[i]) in _NARROW:
                        fn = self._check(fn, args, kwargs)
                        break
        try:
            return fn(*args, **kwargs) if kwargs else fn(*args)
        except Exception as e:
            error = e
        built = self._built
        # Python floats raise where NumPy gives inf or nan (d sqrt(x)/dx at 0): if the
        # derivatives raised (not the function's own code), run again on NumPy floats.
        if isinstance(error, (ZeroDivisionError, OverflowError)) and _in_backward(error, built):
            try:
                return built.fn(*map(_numpy_scalar, args),
                                **{k: _numpy_scalar(v) for k, v in kwargs.items()})
            except Exception as e:
                error = e
        raise calls.failure(error, self.fun, built)

    def _check(self, fn, args, kwargs):
        """Check the arguments of a call; returns what to call with them: ``fn``, or where a
        boolean or small integer is differentiated, a function that differentiates float64
        copies of such arguments (and returns the value the function computes)."""
        self._signature.check(self.fun, args, kwargs)
        widened = self._signature.widened(args, kwargs)
        if widened is None:
            return fn

        def widening(*args, **kwargs):
            try:
                result = fn(*widened[0], **widened[1])
            except Exception:  # an integer that only works as one, as in range(n)
                return fn(*args, **kwargs)
            # The value is the function's own, on the arguments as given: run just it.
            return (self.fun(*args, **kwargs), result[1]) if self.with_value else result
        return widening

    def __reduce__(self):
        # Pickled as its function (by reference, as functions pickle) and options; the
        # gradient is built again where it is unpickled. Under @grad the module's name
        # holds the gradient, not the function: then the gradient is found by that name.
        options = (self.wrt, self.with_value, self.as_tuple)
        module = getattr(self.fun, "__module__", None)
        qualname = getattr(self.fun, "__qualname__", "")
        found = _lookup(module, qualname)
        if isinstance(found, Gradient) and found.fun is self.fun:
            return _by_name, (module, qualname, *options)
        return Gradient, (self.fun, *options)

    def __copy__(self):
        return Gradient(self.fun, self.wrt, self.with_value, self.as_tuple)

    def __deepcopy__(self, memo):
        return self.__copy__()  # a function is copied as itself, as copy.deepcopy does

    def _prepare(self) -> _Built:
        """Build if needed, rebuild if a called function was rebound, read module data."""
        built = self._built or self._build()
        if built.guards and any(get() is not fn or _remade(fn, made)
                                for get, fn, made in built.guards):
            built = self._build(stale=built)  # a helper it calls was redefined
        for name, get in built.refresh:
            built.globals[name] = get()
        return built

    @property
    def source(self) -> str:
        """The generated gradient function's Python source."""
        return (self._built or self._build()).source

    @property
    def __wrapped__(self):
        # inspect.getsource(gradient) unwraps to the generated function, whose lines are
        # registered with linecache.
        return (self._built or self._build()).fn

    @property
    def __name__(self):
        return "grad_" + getattr(self.fun, "__name__", "function")

    def __repr__(self):
        what = "value_and_grad" if self.with_value else "grad"
        return f"<symdiff {what} of {getattr(self.fun, '__qualname__', self.fun)} wrt {self.wrt}>"

    def _build(self, stale=None) -> _Built:
        # The code object too: replacing f.__code__ (as autoreload does) is a new f.
        key = (self.wrt, self.with_value, self.as_tuple, getattr(self.fun, "__code__", None))
        try:
            per_fn = _MEMORY.setdefault(self.fun, {})
        except TypeError:  # not weak-referenceable: no memory cache
            per_fn = {}
        built = per_fn.get(key)
        if built is None or built is stale:
            built = per_fn[key] = _build(self.fun, self.wrt, self.with_value, self.as_tuple)
        if self._signature is None:
            self._signature = calls.signature(self.fun, self.wrt)
            # Keyword-only defaults are read on every call (the fast path reads none).
            self._arity = -1 if getattr(self.fun, "__kwdefaults__", None) else \
                self._signature.arity
            self._wrt_at = tuple(i for _, i in self._signature.wrt if i is not None)
        self._built = built
        self._ready = None if built.refresh or built.guards else built.fn
        return built

    # --- inspection: closed formulas (symdiff.formula) and notebook display ---

    def _formula(self):
        from .formula import formula
        from .lower import lower
        from .parse import parse

        return formula(lower(parse(self.fun), self.wrt))

    def math(self, unicode: bool = True) -> str:
        """The function and its partial derivatives as closed formulas, pretty-printed by
        SymPy; for a function with array operations or control flow (or a large formula),
        a line saying it is not a closed formula and is shown as a program (``source``).

        >>> from symdiff import grad
        >>> def f(x, y):
        ...     return x * y + 2.0 * x
        >>> print(grad(f, wrt=("x", "y")).math(unicode=False))
        f(x, y) = x*y + 2*x
        df/dx = y + 2
        df/dy = x
        """
        return self._formula().pretty(unicode)

    def latex(self) -> str:
        """The same formulas as ``math()``, in LaTeX, one equation per line (or a LaTeX
        comment saying the function is shown as a program).

        >>> from symdiff import grad
        >>> def f(x):
        ...     return 3.0 * x
        >>> print(grad(f).latex())
        f(x) = 3 x
        \\frac{\\partial f}{\\partial x} = 3
        """
        return self._formula().latex()

    def _repr_latex_(self):
        # Jupyter shows this where it prefers LaTeX; None (no closed formula) falls back to
        # the Markdown, which has the program.
        f = self._formula()
        return self._aligned(f.latex()) if f.closed else None

    def _repr_markdown_(self):
        f = self._formula()
        head = self._aligned(f.latex()) if f.closed else f"*{f.name}: {f.note()}:*"
        return f"{head}\n\n```python\n{self.source}```\n"

    @staticmethod
    def _aligned(latex: str) -> str:
        """Equations, one per line, as one display block aligned at their equals signs."""
        rows = [line.replace(" = ", " &= ", 1) for line in latex.splitlines()]
        return "$$\\begin{aligned}" + " \\\\ ".join(rows) + "\\end{aligned}$$"


def build_source(parsed, wrt, with_value=False, as_tuple=False, kinds=None):
    """Run the pipeline on a parsed function: returns ``(ir, source)`` of its gradient,
    specialised on ``kinds`` (parameter name -> kinds.Kind; None or a name left out: any).

    Used by ``grad`` and by the CLI (which parses files without running them). Any failure
    that is not a located SymdiffError is reported as one, never as a raw traceback.
    """
    # SymPy is imported here, on first build, never by a cache hit.
    from .differentiate import differentiate
    from .emit import emit
    from .lower import lower
    from .prune import prune

    try:
        ir = lower(parsed, wrt, kinds)
        return ir, emit(prune(differentiate(ir, with_value, as_tuple)))
    except SymdiffError:
        raise
    except Exception as e:  # a bug of ours: still say where, and not as a SymPy traceback
        where = f"{parsed.source.filename}:{parsed.node.lineno}:{parsed.node.col_offset + 1}"
        err = SymdiffError(f"{where}: symdiff failed to differentiate {parsed.name} "
                           f"({type(e).__name__}: {e}); this is a bug in symdiff, please "
                           "report it with the function's source")
        raise err from None


def _build(fun, wrt, with_value, as_tuple) -> _Built:
    from . import cache

    options = (wrt, with_value, as_tuple)
    entry = cache.load(fun, options)
    built = _from_entry(fun, entry) if entry is not None else None
    if built is not None:
        return built

    from .compile import compile_source
    from .parse import parse

    parsed = _without_default_code(parse(fun))
    ir, source = build_source(parsed, wrt, with_value, as_tuple)
    names = {n: obj for n, obj, _ in ir.globals}
    fn, globs = compile_source(source, "grad_" + ir.name, names, ir.np_alias)
    _defaults(fn, fun)
    helpers = [(cache.where(c, fun), n, cache.identity(h)) for c, n, h in ir.guards]
    if all(h is not None for _, _, h in helpers):
        cache.store(fun, options, {
            "name": "grad_" + ir.name, "np_alias": ir.np_alias, "source": source,
            "names": [(n, cache.where(c, fun)) for n, _, c in ir.globals],
            "data": [(n, cache.where(c, fun)) for n, c in ir.data_globals],
            "helpers": helpers})
    return _Built(fn, source, globs, _refreshers(ir.data_globals), _guards(ir.guards))


def _from_entry(fun, entry) -> _Built | None:
    """A gradient from a disk-cache entry, without SymPy; None if the entry does not fit."""
    import builtins

    from . import cache
    from .compile import compile_source

    def find(name, place):
        where = cache.resolve(fun, place, name)
        if isinstance(where, dict):
            if name in where:
                return where, where[name]
            return where, vars(builtins).get(name, _MISSING)
        try:
            return where, where.cell_contents
        except (AttributeError, ValueError):
            return None, _MISSING

    names = {}
    for name, place in entry["names"]:
        _, names[name] = find(name, place)
        if names[name] is _MISSING:
            return None
    guards = []
    for place, name, digest in entry["helpers"]:
        where, helper = find(name, place)
        if helper is _MISSING or cache.identity(helper) != digest:
            return None  # a function it calls is another one now: build again
        guards.append((where, name, helper))
    data = []
    for name, place in entry["data"]:
        where, _ = find(name, place)
        if where is None:
            return None
        data.append((name, where))
    try:
        fn, globs = compile_source(entry["source"], entry["name"], names, entry["np_alias"])
    except KeyboardInterrupt:
        raise
    except BaseException:  # a corrupt entry is rebuilt, never trusted (one that exits too)
        return None
    _defaults(fn, fun)
    return _Built(fn, entry["source"], globs, _refreshers(data), _guards(guards))


def _defaults(fn, fun):
    fn.__defaults__ = getattr(fun, "__defaults__", None)
    fn.__kwdefaults__ = getattr(fun, "__kwdefaults__", None)


def _without_default_code(parsed):
    """``parsed`` with each default that is not a literal replaced by ``...``.

    The generated def must not evaluate a default's code again: it may read names of an
    enclosing function, gone by now (``def make(k): def f(x, s=k)``, ``lambda x, i=i:``),
    or give another value now. ``_defaults`` gives the gradient the values Python computed
    at the def.
    """
    a = parsed.node.args
    if all(map(_literal, [*a.defaults, *a.kw_defaults])):
        return parsed
    args = copy.copy(a)
    args.defaults = [_placeholder(d) for d in a.defaults]
    args.kw_defaults = [_placeholder(d) for d in a.kw_defaults]
    node = copy.copy(parsed.node)
    node.args = args
    return dataclasses.replace(parsed, node=node)


def _literal(node) -> bool:
    # (None: a keyword-only parameter without a default.)
    return node is None or literal(node) is not NOT_LITERAL


def _placeholder(node):
    return node if _literal(node) else ast.copy_location(ast.Constant(...), node)


_MISSING = object()


def _numpy_scalar(value):
    if type(value) is int and -2**63 <= value < 2**63:  # (an int stays an int: range(n))
        return np.int64(value)
    return np.float64(value) if type(value) is float else value


def _in_backward(error, built) -> bool:
    """Whether ``error`` rose in the backward sweep of the generated function."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code is not built.fn.__code__:
        tb = tb.tb_next
    if tb is None:
        return False
    return tb.tb_lineno > built.backward


def _refreshers(data_globals) -> tuple:
    out = []
    for name, where in data_globals:
        if isinstance(where, dict):
            out.append((name, (lambda g, n: lambda: g[n])(where, name)))
        else:  # a closure cell
            out.append((name, (lambda c: lambda: c.cell_contents)(where)))
    return tuple(out)


def _guards(guards) -> tuple:
    out = []
    for where, name, fn in guards:
        if isinstance(where, dict):
            out.append(((lambda g, n: lambda: g.get(n))(where, name), fn, _made(fn)))
        else:  # a closure cell
            out.append(((lambda c: lambda: c.cell_contents)(where), fn, _made(fn)))
    return tuple(out)


def _made(fn) -> tuple:
    """What of a helper its gradient was built from, beyond the function itself: its code
    (replaced in place, as autoreload does) and its defaults (numbers are written into the
    gradient)."""
    return (getattr(fn, "__code__", None), getattr(fn, "__defaults__", None),
            getattr(fn, "__kwdefaults__", None))


def _remade(fn, made) -> bool:
    # On every call of a gradient that calls helpers: attribute reads, no tuple built.
    code, defaults, kwdefaults = made
    return (getattr(fn, "__code__", None) is not code
            or getattr(fn, "__defaults__", None) is not defaults
            or getattr(fn, "__kwdefaults__", None) is not kwdefaults)


def _refuse(fun):
    """Refuse at ``grad(fun)`` what symdiff does not differentiate yet: a gradient (higher
    order), a method (see ``calls.refuse_method``)."""
    if isinstance(fun, Gradient):
        name = getattr(fun.fun, "__qualname__", "a function")
        raise calls.at_def(fun.fun, None, f"the gradient of a gradient of {name}: "
                           "higher-order derivatives are not supported yet",
                           "first derivatives: grad(f) of a plain function (write a "
                           "derivative out as a function of its own to differentiate it "
                           "again)")
    calls.refuse_method(fun)


def _lookup(module, qualname):
    """The object named ``qualname`` in the imported module ``module``, or None."""
    obj = sys.modules.get(module) if module else None
    for part in qualname.split(".") if obj is not None else ():
        obj = getattr(obj, part, None)
    return obj


def _by_name(module, qualname, wrt, with_value, as_tuple):
    """Unpickle a gradient whose function's name holds a gradient (``@grad def f``)."""
    import importlib

    importlib.import_module(module)
    found = _lookup(module, qualname)
    if found is None:
        import pickle

        raise pickle.UnpicklingError(f"cannot find {module}.{qualname} to rebuild its gradient")
    return Gradient(found.fun if isinstance(found, Gradient) else found, wrt, with_value,
                    as_tuple)


def _normalize_wrt(wrt):
    if isinstance(wrt, (tuple, list)):
        if not wrt:
            raise SymdiffError("wrt=() names no parameter; name at least one")
        return tuple(wrt), True
    return (wrt,), False


def grad(fun=None, wrt=0):
    """The gradient of a scalar function ``fun`` with respect to ``wrt``.

    ``wrt`` is a parameter name or position (one gradient), or a tuple of them (a tuple of
    gradients, in that order). Each gradient has the shape of its parameter. Used bare
    (``@grad``), called (``grad(f, wrt="y")``) or as a factory (``@grad(wrt=1)``).

    >>> import numpy as np
    >>> from symdiff import grad
    >>> @grad
    ... def f(x, y):
    ...     return np.sum(np.sin(x) * y)
    >>> float(f(0.0, 2.0))
    2.0
    """
    wrt, as_tuple = _normalize_wrt(wrt)
    if fun is None:
        return lambda f: Gradient(f, wrt, False, as_tuple)
    return Gradient(fun, wrt, False, as_tuple)


def value_and_grad(fun=None, wrt=0):
    """Like ``grad``, but the result is ``(fun(*args), gradient)``, from one forward sweep.

    >>> from symdiff import value_and_grad
    >>> def f(x):
    ...     return x ** 2
    >>> value_and_grad(f)(3.0)
    (9.0, 6.0)
    """
    wrt, as_tuple = _normalize_wrt(wrt)
    if fun is None:
        return lambda f: Gradient(f, wrt, True, as_tuple)
    return Gradient(fun, wrt, True, as_tuple)

