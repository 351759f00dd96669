"""The public entry points: ``grad`` and ``value_and_grad`` -> compiled, cached gradients."""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
import sys
import types
import weakref
from dataclasses import dataclass, field

import numpy as np

from . import calls, kinds, runtime
from .errors import SymdiffError
from .parse import NOT_LITERAL, literal

_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


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


@dataclass
class _Spec:
    """One specialisation of a gradient: what a call with arguments of one key runs."""

    kinds: tuple  # (parameter, kinds.Kind), in the order of the parameters
    built: _Built
    call: object  # built.fn, or a function that widens narrow arguments first


class Gradient:
    """The gradient of a function, callable with that function's own arguments.

    ``source`` is the generated Python source, ``fun`` the original function. The gradient
    is specialised on the kinds of its arguments (``symdiff.kinds``): built on first use
    for each kind, and cached in memory per function, options and kinds (and on disk).
    It pickles (and copies) as its function and options, and is built again where it is
    unpickled.

    >>> from symdiff import grad
    >>> def f(x):
    ...     return 3.0 * x ** 2
    >>> g = grad(f)
    >>> g(2.0), g.fun is f
    (12.0, True)
    """

    __slots__ = ("fun", "wrt", "with_value", "as_tuple", "has_aux", "_fast", "_specs",
                 "_signature", "_names", "_arity", "_self", "__weakref__")

    def __init__(self, fun, wrt, with_value=False, as_tuple=False, has_aux=False):
        _refuse(fun)
        self.fun = fun
        self.wrt = wrt
        self.with_value = with_value
        self.as_tuple = as_tuple
        self.has_aux = has_aux
        # Calls whose arguments' types say their kinds (Python and NumPy numbers), with
        # nothing left out: the types -> the function to call, without a check.
        self._fast: dict = {}
        self._specs: dict = {}  # the kinds' key of a call -> _Spec
        self._signature = None  # where the arguments are, once read
        self._names: tuple[str, ...] = ()  # the parameters with a kind: positional, keyword
        self._arity = -1  # how many positional arguments a call with nothing left out has
        self._self = calls.method_self(fun)  # a method's self parameter, else None

    def __call__(self, *args, **kwargs):
        # A scalar gradient costs a few hundred nanoseconds: this path stays short.
        if not kwargs:
            n = len(args)
            fn = self._fast.get(type(args[0]) if n == 1 else
                                (type(args[0]), type(args[1])) if n == 2 else
                                tuple(map(type, args)))
            if fn is not None:
                try:
                    return fn(*args)
                except Exception as e:
                    return self._failed(e, self._spec(args, kwargs), args, kwargs)
        spec = self._spec(args, kwargs)
        built = spec.built
        if built.guards and any(get() is not fn or _remade(fn, made)
                                for get, fn, made in built.guards):
            spec = self._specialise(args, kwargs, stale=built)  # a helper was redefined
            built = spec.built
        for name, get in built.refresh:
            built.globals[name] = get()
        try:
            return spec.call(*args, **kwargs) if kwargs else spec.call(*args)
        except Exception as e:
            return self._failed(e, spec, args, kwargs)

    def _failed(self, error, spec, args, kwargs):
        built = spec.built
        if type(error) is runtime._Raising and not self.with_value:
            # np.errstate(...="raise"): what grad skips may raise: run it all
            value, grads = Gradient(self.fun, self.wrt, True, self.as_tuple,
                                    self.has_aux)(*args, **kwargs)
            return (grads, value[1]) if self.has_aux else grads
        # Python floats raise where NumPy gives inf or nan (d sqrt(x)/dx at 0): if the
        # derivatives raised (not the function's own code), run again on NumPy floats.
        if isinstance(error, (ZeroDivisionError, OverflowError)) and _in_backward(error, built):
            args = [*map(_numpy_scalar, args)]
            kwargs = {k: _numpy_scalar(v) for k, v in kwargs.items()}
            spec = self._spec(args, kwargs)
            try:
                return spec.call(*args, **kwargs)
            except Exception as e:
                error, built = e, spec.built
        raise calls.failure(error, self.fun, built)

    def _spec(self, args, kwargs) -> _Spec:
        """The specialisation a call with these arguments runs (built if new)."""
        if self._signature is None:
            self._read_signature()
        if kwargs or len(args) != self._arity:
            values = self._bind(args, kwargs)
        else:
            values = args
        spec = self._specs.get(tuple(map(kinds.key, values)))
        if spec is None:
            return self._specialise(args, kwargs)
        if values is not args:
            _defaults(spec.built.fn, self.fun)  # as the function has them now
        return spec

    def _read_signature(self):
        code = getattr(self.fun, "__code__", None)
        if code is None:  # not a Python function: parse says so, and what instead
            from .parse import parse

            parse(self.fun)
            raise SymdiffError(f"cannot differentiate {self.fun!r}: not a Python function")
        self._signature = calls.signature(self.fun, self.wrt)
        self._names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        # Keyword-only defaults are read on every call (the fast path reads none).
        self._arity = -1 if getattr(self.fun, "__kwdefaults__", None) else \
            self._signature.arity

    def _bind(self, args, kwargs) -> tuple:
        """The value of each parameter with a kind, in order: as passed, else its default
        as the function has it now, else a marker (Python raises at the call)."""
        positional = self._signature.positional
        values = []
        for i, name in enumerate(self._names):
            if i < len(positional) and i < len(args):
                values.append(args[i])
            elif name in kwargs:
                values.append(kwargs[name])
            else:
                values.append(calls.default_of(self.fun, positional, name))
        return tuple(values)

    def _specialise(self, args, kwargs, stale=None) -> _Spec:
        """Check a call's arguments, and build (or find) the gradient for their kinds."""
        if self._signature is None:
            self._read_signature()
        self._signature.check(self.fun, args, kwargs)
        key = tuple(map(kinds.key, self._bind(args, kwargs)))
        widened = self._signature.widened(args, kwargs)
        # Booleans and small integers are differentiated from float64 copies: built for
        # the kinds of those.
        values = self._bind(*widened) if widened is not None else self._bind(args, kwargs)
        found = tuple((name, kinds.kind(v)) for name, v in zip(self._names, values,
                                                                 strict=True)
                      if v is not calls.MISSING)
        built = self._build(found, stale)
        _defaults(built.fn, self.fun)
        call = built.fn if widened is None else self._widening(built.fn)
        spec = self._specs[key] = _Spec(found, built, call)
        # (a method's self is read, never differentiated: any object, told by its type)
        if not (kwargs or built.refresh or built.guards) and len(args) == self._arity and \
                all(type(a) in kinds.BY_TYPE for a in args[self._self is not None:]):
            self._fast[type(args[0]) if len(args) == 1 else tuple(map(type, args))] = call
        return spec

    def _widening(self, fn):
        signature = self._signature

        def widening(*args, **kwargs):
            widened = signature.widened(args, kwargs)
            try:
                result = fn(*widened[0], **widened[1])
            except Exception:  # an integer that only works as one, as in range(n)
                return fn(*args, **kwargs)
            # The value is the function's own, on the arguments as given: run just it.
            return (self.fun(*args, **kwargs), result[1]) if self.with_value else result
        return widening

    def __get__(self, instance, owner=None):
        # @grad on a method gives a method, as the def would have: m.dloss(x) passes m as
        # self; C.dloss is the gradient itself, called as C.dloss(m, x). A gradient of a
        # plain function kept in a class stays what it was, a function of its arguments.
        if instance is None or self._self is None:
            return self
        return BoundGradient(self, instance)

    def __reduce__(self):
        # Pickled as its function (by reference, as functions pickle) and options; the
        # gradient is built again where it is unpickled. Under @grad the module's name
        # holds the gradient, not the function: then the gradient is found by that name.
        options = (self.wrt, self.with_value, self.as_tuple, self.has_aux)
        module = getattr(self.fun, "__module__", None)
        qualname = getattr(self.fun, "__qualname__", "")
        found = _lookup(module, qualname)
        if isinstance(found, Gradient) and found.fun is self.fun:
            return _by_name, (module, qualname, *options)
        return Gradient, (self.fun, *options)

    def __copy__(self):
        return Gradient(self.fun, self.wrt, self.with_value, self.as_tuple, self.has_aux)

    def __deepcopy__(self, memo):
        return self.__copy__()  # a function is copied as itself, as copy.deepcopy does

    @property
    def source(self) -> str:
        """The generated gradient function's Python source, for float64 arrays (and Python
        numbers where a parameter's default or annotation says so): see ``source_for``."""
        return self._shown().source

    def source_for(self, *args, **kwargs) -> str:
        """The generated source that a call with these arguments runs.

        >>> import numpy as np
        >>> from symdiff import grad
        >>> def f(x):
        ...     return np.sum(x ** 2)
        >>> "float32" in grad(f).source_for(np.ones(2, dtype=np.float32))
        True
        """
        return self._spec(args, kwargs).built.source

    def _shown(self) -> _Built:
        if self._signature is None:
            self._read_signature()
        shown = kinds.assumed(self.fun, self._names)
        if self._self is not None:  # a method's self: an object, read
            shown = ((self._self, kinds.Other("object")), *shown[1:])
        return self._build(shown)

    @property
    def __wrapped__(self):
        # inspect.getsource(gradient) unwraps to the generated function, whose lines are
        # registered with linecache.
        return self._shown().fn

    @property
    def __name__(self):
        return "grad_" + getattr(self.fun, "__name__", "function")

    def __repr__(self):
        what = "value_and_grad" if self.with_value else "grad"
        wrt = calls.shifted_back(self.wrt) if self._self is not None else self.wrt
        return f"<symdiff {what} of {getattr(self.fun, '__qualname__', self.fun)} wrt {wrt}>"

    def _build(self, found, stale=None) -> _Built:
        options = (self.wrt, self.with_value, self.as_tuple, self.has_aux, found)
        # The code object too: replacing f.__code__ (as autoreload does) is a new f.
        key = (*options, getattr(self.fun, "__code__", None))
        try:
            per_fn = _MEMORY.setdefault(self.fun, {})
        except TypeError:  # not weak-referenceable: no memory cache
            per_fn = {}
        built = per_fn.get(key)
        if built is None or built is stale:
            built = per_fn[key] = _build(self.fun, *options)
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


class BoundGradient:
    """The gradient of a method bound to an object: ``grad(model.loss)``, or ``m.dloss``
    where ``dloss`` is ``@grad`` in a class body. Called with the method's arguments after
    self; the object is passed as self, and what the method reads from it (``self.W``) is
    read at each call, as values without gradient. The built gradient is the one of the
    function, shared by every object it is bound to.

    >>> from symdiff import grad
    >>> class Model:
    ...     def __init__(self, scale):
    ...         self.scale = scale
    ...     def loss(self, x):
    ...         return self.scale * x ** 2
    >>> grad(Model(3.0).loss)(2.0)
    12.0
    """

    __slots__ = ("gradient", "obj")

    def __init__(self, gradient: Gradient, obj):
        self.gradient = gradient  # of the function, with self its first parameter
        self.obj = obj

    def __call__(self, *args, **kwargs):
        return self.gradient(self.obj, *args, **kwargs)

    @property
    def fun(self):
        """The method, bound to the object: what was differentiated."""
        return types.MethodType(self.gradient.fun, self.obj)

    @property
    def wrt(self):
        return calls.shifted_back(self.gradient.wrt)

    def source_for(self, *args, **kwargs) -> str:
        """The generated source a call with these arguments (after self) runs."""
        return self.gradient.source_for(self.obj, *args, **kwargs)

    def __getattr__(self, name):
        # source, math(), latex(), __wrapped__...: the function's gradient's.
        if name.startswith("__") and name not in ("__wrapped__", "__name__"):
            raise AttributeError(name)
        return getattr(self.gradient, name)

    def __reduce__(self):
        # The object is pickled with it (a bound method pickles its object too).
        return BoundGradient, (self.gradient, self.obj)

    def __copy__(self):
        return BoundGradient(copy.copy(self.gradient), self.obj)

    def __deepcopy__(self, memo):
        return BoundGradient(copy.copy(self.gradient), copy.deepcopy(self.obj, memo))

    def __repr__(self):
        what = "value_and_grad" if self.gradient.with_value else "grad"
        return (f"<symdiff {what} of {getattr(self.gradient.fun, '__qualname__', '?')} "
                f"bound to {self.obj!r} wrt {self.wrt}>")

    def _repr_latex_(self):
        return self.gradient._repr_latex_()

    def _repr_markdown_(self):
        return self.gradient._repr_markdown_()


def build_source(parsed, wrt, with_value=False, as_tuple=False, kinds=None, has_aux=False):
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
        ir = lower(parsed, wrt, kinds, has_aux)
        return ir, emit(prune(differentiate(ir, with_value, as_tuple)))
    except SymdiffError:
        raise
    except Exception as e:  # a bug of ours: still say where, and not as a SymPy traceback
        where = f"{parsed.source.filename}:{parsed.node.lineno}:{parsed.node.col_offset + 1}"
        err = SymdiffError(f"{where}: symdiff failed to differentiate {parsed.name} "
                           f"({type(e).__name__}: {e}); this is a bug in symdiff, please "
                           "report it with the function's source")
        raise err from None


def _build(fun, wrt, with_value, as_tuple, has_aux, found) -> _Built:
    from . import cache

    # (the kinds as text: a cache key is made of the options' repr)
    options = (wrt, with_value, as_tuple, has_aux, [(n, str(k)) for n, k in found])
    entry = cache.load(fun, options)
    built = _from_entry(fun, entry) if entry is not None else None
    if built is not None:
        return built

    from .compile import compile_source
    from .parse import parse

    parsed = _without_default_code(parse(fun))
    ir, source = build_source(parsed, wrt, with_value, as_tuple, dict(found), has_aux)
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
        root, *path = name.split(".")  # a helper found as Ops.sq: Ops, then sq
        where = cache.resolve(fun, place, root)
        if isinstance(where, dict):
            found = where[root] if root in where else vars(builtins).get(root, _MISSING)
        else:
            try:
                found = where.cell_contents
            except (AttributeError, ValueError):
                return None, _MISSING
        if path and found is not _MISSING:
            found = _follow(found, path)
        return where, _MISSING if found is None and path else found

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
    return tuple((_getter(where, name), fn, _made(fn)) for where, name, fn in guards)


def _getter(where, name):
    """What reads a helper's name again: in a dict or a closure cell; a dotted name
    (Ops.sq) by its first name, then its attributes."""
    root, *path = name.split(".")
    if isinstance(where, dict):
        if path:
            return lambda: _follow(where.get(root), path)
        return lambda: where.get(root)
    if path:
        return lambda: _follow(where.cell_contents, path)
    return lambda: where.cell_contents


def _follow(obj, path):
    """``obj.a.b`` for the path ``["a", "b"]``; None where an attribute is missing."""
    for attr in path:
        obj = getattr(obj, attr, None)
    return obj


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
    order)."""
    if isinstance(fun, (Gradient, BoundGradient)):
        inner = getattr(fun.fun, "__func__", fun.fun)
        name = getattr(inner, "__qualname__", "a function")
        raise calls.at_def(inner, None, f"the gradient of a gradient of {name}: "
                           "higher-order derivatives are not supported yet",
                           "first derivatives: grad(f) of a plain function (write a "
                           "derivative out as a function of its own to differentiate it "
                           "again)")


def _lookup(module, qualname):
    """The object named ``qualname`` in the imported module ``module``, or None (the
    gradient itself for a classmethod's, which its class's attribute gives bound)."""
    obj = sys.modules.get(module) if module else None
    for part in qualname.split(".") if obj is not None else ():
        obj = getattr(obj, part, None)
    return obj.gradient if isinstance(obj, BoundGradient) else obj


def _by_name(module, qualname, wrt, with_value, as_tuple, has_aux=False):
    """Unpickle a gradient whose function's name holds a gradient (``@grad def f``)."""
    import importlib

    importlib.import_module(module)
    found = _lookup(module, qualname)
    if found is None:
        import pickle

        raise pickle.UnpicklingError(f"cannot find {module}.{qualname} to rebuild its gradient")
    return Gradient(found.fun if isinstance(found, Gradient) else found, wrt, with_value,
                    as_tuple, has_aux)


def _normalize_wrt(wrt):
    if isinstance(wrt, (tuple, list)):
        if not wrt:
            raise SymdiffError("wrt=() names no parameter; name at least one")
        return tuple(wrt), True
    return (wrt,), False


def grad(fun=None, wrt=0, has_aux=False):
    """The gradient of a scalar function ``fun`` with respect to ``wrt``.

    ``wrt`` is a parameter name or position (one gradient), or a tuple of them (a tuple of
    gradients, in that order). Each gradient has the shape of its parameter. Used bare
    (``@grad``), called (``grad(f, wrt="y")``) or as a factory (``@grad(wrt=1)``).
    ``has_aux=True``: ``fun`` returns ``(value, aux)``, and the gradient ``(gradient,
    aux)``, aux as the function computed it (JAX's contract).

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
        return lambda f: _gradient(f, wrt, False, as_tuple, has_aux)
    return _gradient(fun, wrt, False, as_tuple, has_aux)


def value_and_grad(fun=None, wrt=0, has_aux=False):
    """Like ``grad``, but the result is ``(fun(*args), gradient)``, from one forward sweep;
    with ``has_aux=True``, ``((value, aux), gradient)``.

    >>> from symdiff import value_and_grad
    >>> def f(x):
    ...     return x ** 2
    >>> value_and_grad(f)(3.0)
    (9.0, 6.0)
    """
    wrt, as_tuple = _normalize_wrt(wrt)
    if fun is None:
        return lambda f: _gradient(f, wrt, True, as_tuple, has_aux)
    return _gradient(fun, wrt, True, as_tuple, has_aux)


def _gradient(fun, wrt, with_value, as_tuple, has_aux=False):
    """A Gradient of ``fun``; of a bound method, one bound to its object (see
    ``calls.unbind``: ``wrt`` counts from after self)."""
    if isinstance(fun, (staticmethod, classmethod)):  # @grad over @staticmethod
        return type(fun)(_gradient(fun.__func__, wrt, with_value, as_tuple, has_aux))
    _refuse(fun)
    fun, wrt, obj = calls.unbind(fun, wrt)
    gradient = Gradient(fun, wrt, with_value, as_tuple, has_aux)
    return gradient if obj is calls.UNBOUND else BoundGradient(gradient, obj)
