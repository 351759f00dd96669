"""The public entry points: ``grad`` and ``value_and_grad`` -> compiled, cached gradients.

A ``Gradient`` finds, for the kinds of a call's arguments, the specialisation to run, built
by ``build`` and kept in the memory cache here; a gradient of a method bound to an object
is a ``bound.BoundGradient``.
"""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass

import numpy as np

from . import calls, dispatch, kinds, runtime
from .bound import BoundGradient
from .build import _build, _Built, _defaults
from .build import build_source as build_source  # (public here: the CLI reads it here)
from .errors import SymdiffError

_MEMORY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class _Spec:
    """One specialisation of a gradient: what a call with arguments of one key runs."""

    kinds: tuple  # (parameter, kinds.Kind), in the order of the parameters
    built: _Built
    call: object  # built.fn, or a function that widens narrow arguments first
    raw: tuple | None = None  # where call widens: the kinds of the arguments as given
    floats: bool = True  # built with the float path (math on Python floats)

    def ready(self) -> bool:
        return self.built.ready()


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

    __slots__ = ("fun", "wrt", "with_value", "as_tuple", "has_aux", "lifted", "_fast", "_seen",
                 "_specs", "_signature", "_names", "_arity", "_self", "_scalar", "__weakref__")

    def __init__(self, fun, wrt, with_value=False, as_tuple=False, has_aux=False,
                 scalar=None, lifted=frozenset()):
        self.fun = fun
        self.wrt = wrt
        self.with_value = with_value
        self.as_tuple = as_tuple
        self.has_aux = has_aux
        # The stop_gradient calls read as identities (their Site.key), or "all":
        # grad(f, stop_gradients=False), and audit's gradient without one of them.
        self.lifted = lifted
        # Calls whose arguments' types say their kinds (Python and NumPy numbers), with
        # nothing left out: the types -> the _Spec the dispatcher runs (_dispatch); _seen:
        # the types of such calls made once (a gradient called once needs no dispatcher).
        self._fast: dict = {}
        self._seen: set = set()
        self._specs: dict = {}  # the kinds' key of a call -> _Spec
        self._signature = None  # where the arguments are, once read
        self._names: tuple[str, ...] = ()  # the parameters with a kind: positional, keyword
        self._arity = -1  # how many positional arguments a call with nothing left out has
        self._self = calls.method_self(fun)  # a method's self parameter, else None
        # (position, message): a parameter that must be a scalar (grad of grad(f) in it)
        self._scalar = scalar

    def __call__(self, *args, **kwargs):
        # Once calls with numbers of the same types came here twice, the gradient's own
        # class calls a dispatcher written for those types instead (_route, _dispatch),
        # which comes here for any other call.
        spec = self._spec(args, kwargs)
        if not spec.ready():
            spec = self._specialise(args, kwargs, stale=spec.built)  # a helper was redefined
            spec.ready()
        if not kwargs and len(args) == self._arity:
            self._route(args, spec)
        try:
            return spec.call(*args, **kwargs) if kwargs else spec.call(*args)
        except Exception as e:
            return self._failed(e, spec, args, kwargs)

    def _failed(self, error, spec, args, kwargs):
        built = spec.built
        if type(error) is runtime._Raising and not self.with_value:
            # np.errstate(...="raise"): what grad skips may raise: run it all
            value, grads = Gradient(self.fun, self.wrt, True, self.as_tuple, self.has_aux,
                                    lifted=self.lifted)(*args, **kwargs)
            return (grads, value[1]) if self.has_aux else grads
        # On Python floats, math raises where NumPy gives nan or inf (math.log(0.0)), and
        # a value it keeps a Python float may be divided by zero where NumPy's would not
        # raise: the build without the float path runs then, which gives just what the
        # function's own code gives (its own errors too).
        if spec.floats and not isinstance(error, SymdiffError) and any(
                _numbers(k) for _, k in spec.kinds):
            plain = self._build(spec.kinds, floats=False)
            if plain.source != built.source:
                call = plain.fn if spec.raw is None else self._widening(
                    plain.fn, spec.raw, floats=False)
                spec = _Spec(spec.kinds, plain, call, spec.raw, floats=False)
                try:
                    return spec.call(*args, **kwargs)
                except Exception as e:
                    e.__suppress_context__ = True  # (math's error is not the user's)
                    return self._failed(e, spec, args, kwargs)
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
        if self._scalar is not None:
            position, message = self._scalar
            value = self._bind(args, kwargs)[position]
            if isinstance(kinds.kind(value), (kinds.Dict, kinds.Tuple, kinds.List)):
                raise SymdiffError(message.format(what=f"is a {type(value).__name__}"))
            if np.ndim(value) != 0:
                raise SymdiffError(message.format(what=f"has shape {np.shape(value)}"))
        key = tuple(map(kinds.key, self._bind(args, kwargs)))
        widened = self._signature.widened(args, kwargs)
        # Booleans and small integers are differentiated from float64 copies: built for
        # the kinds of those.
        raw = self._kinds(self._bind(args, kwargs))
        found = self._kinds(self._bind(*widened)) if widened is not None else raw
        built = self._build(found, stale)
        _defaults(built.fn, self.fun)
        call = built.fn if widened is None else self._widening(built.fn, raw)
        spec = self._specs[key] = _Spec(found, built, call, None if widened is None else raw)
        return spec

    def _route(self, args, spec):
        """Route calls with the types of ``args`` (numbers, all passed) to ``spec`` from
        their second call on, or at once where they were routed to another one."""
        types = tuple(map(type, args))
        # (a method's self is read, never differentiated: any object, told by its type)
        if not all(t in kinds.BY_TYPE for t in types[self._self is not None:]):
            return
        if types in self._fast or types in self._seen and len(self._fast) < dispatch.MOST:
            self._fast[types] = spec
            self._dispatch()
        self._seen.add(types)

    def _dispatch(self):
        """Make calls whose arguments have the types of a ``_fast`` entry run its
        specialisation straight away: the gradient's ``__call__`` becomes a function
        written for those types (``dispatch``), in a class of this gradient's own."""
        specs = list(self._fast.values())
        routes = [dispatch.Route(types, spec.call, spec.ready if spec.built.guards or
                                 spec.built.refresh else None)
                  for types, spec in self._fast.items()]

        def failed(error, i, *args):
            return self._failed(error, specs[i], args, {})

        fn = dispatch.dispatcher(self.fun, routes, self._general, failed)
        if fn is None:
            return
        if type(self) is Gradient:
            self.__class__ = type("Gradient", (Gradient,), {
                "__slots__": (), "__module__": __name__, "__doc__": Gradient.__doc__})
        type(self).__call__ = staticmethod(fn)

    def _general(self, *values, **kwargs):
        """A call the dispatcher does not route, as it was made: ``values`` are the
        positional parameters' (``MISSING`` where left out), then any more arguments."""
        cut = next((i for i, v in enumerate(values) if v is calls.MISSING), len(values))
        for name, value in zip(self._signature.positional[cut:], values[cut:], strict=True):
            if value is not calls.MISSING:  # (passed by name: Python fills in order)
                kwargs[name] = value
        return Gradient.__call__(self, *values[:cut], **kwargs)

    def _kinds(self, values) -> tuple:
        return tuple((name, kinds.kind(v)) for name, v in zip(self._names, values, strict=True)
                     if v is not calls.MISSING)

    def _widening(self, fn, raw, floats=True):
        """``fn`` (built for float64 copies of narrow arguments) called on such copies; the
        build for the arguments' own kinds ``raw`` where the copies raise."""
        signature = self._signature

        def widening(*args, **kwargs):
            widened = signature.widened(args, kwargs)
            try:
                result = fn(*widened[0], **widened[1])
            except Exception:  # an integer that only works as one, as in range(n)
                built = self._build(raw, floats=floats)
                _defaults(built.fn, self.fun)
                return built.fn(*args, **kwargs)
            if not (self.with_value or self.has_aux):
                return result
            # The value and aux are the function's own, on the arguments as given.
            own = self.fun(*args, **kwargs)
            return (own, result[1]) if self.with_value else (result[0], own[1])
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
            return _by_name, (module, qualname, *options, self.lifted)
        return Gradient, (self.fun, *options, None, self.lifted)

    def __copy__(self):
        return Gradient(self.fun, self.wrt, self.with_value, self.as_tuple, self.has_aux,
                        lifted=self.lifted)

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

    def function_for(self, *args, **kwargs):
        """The function a call with these arguments runs: the generated gradient built for
        their kinds, to step through with ``pdb.runcall(g.function_for(*args), *args)``."""
        return self._spec(args, kwargs).call

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
        lifted = ", stop_gradients=False" if self.lifted == "all" else \
            f", stop_gradient lifted at {len(self.lifted)} call(s)" if self.lifted else ""
        return (f"<symdiff {what} of {getattr(self.fun, '__qualname__', self.fun)} wrt "
                f"{wrt}{lifted}>")

    def _build(self, found, stale=None, floats=True) -> _Built:
        options = (self.wrt, self.with_value, self.as_tuple, self.has_aux, found)
        # The code object too: replacing f.__code__ (as autoreload does) is a new f.
        key = (*options, getattr(self.fun, "__code__", None), floats, self.lifted)
        try:
            per_fn = _MEMORY.setdefault(self.fun, {})
        except TypeError:  # not weak-referenceable: no memory cache
            per_fn = {}
        built = per_fn.get(key)
        if built is None or built is stale:
            built = per_fn[key] = _build(self.fun, *options, floats, self.lifted)
        return built

    # --- inspection: closed formulas (symdiff.formula) and notebook display ---

    def _formula(self):
        from .formula import formula
        from .lower import lower
        from .parse import parse

        return formula(lower(parse(self.fun), self.wrt, lifted=self.lifted))

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


def _numbers(kind) -> bool:
    """Whether ``kind`` is, or holds, a Python number (what the float path computes on)."""
    if isinstance(kind, kinds.Number):
        return True
    return any(map(_numbers, getattr(kind, "items", ())))


def _numpy_scalar(value):
    """A Python number as NumPy's; in a tuple, list or dict too (a container's leaves)."""
    if type(value) is int and -2**63 <= value < 2**63:  # (an int stays an int: range(n))
        return np.int64(value)
    if type(value) in (tuple, list):
        return type(value)(map(_numpy_scalar, value))
    if type(value) is dict:
        return {k: _numpy_scalar(v) for k, v in value.items()}
    return np.float64(value) if type(value) is float else value


def _in_backward(error, built) -> bool:
    """Whether ``error`` rose in the backward sweep of the generated function."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code is not built.fn.__code__:
        tb = tb.tb_next
    if tb is None:
        return False
    return tb.tb_lineno > built.backward


def _refuse(fun):
    """Refuse at ``grad(fun)`` what symdiff does not differentiate yet: the gradient of a
    method's gradient (a plain function's composes: ``higher.second``)."""
    if isinstance(fun, BoundGradient):
        inner = getattr(fun.fun, "__func__", fun.fun)
        name = getattr(inner, "__qualname__", "a function")
        raise calls.at_def(inner, None, f"the gradient of a gradient of the method {name}: "
                           "higher-order derivatives are not supported yet for methods",
                           "grad(grad(f)) of a plain function: write the method's body as a "
                           "module-level function of its arrays")


def _lookup(module, qualname):
    """The object named ``qualname`` in the imported module ``module``, or None (the
    gradient itself for a classmethod's, which its class's attribute gives bound)."""
    obj = sys.modules.get(module) if module else None
    for part in qualname.split(".") if obj is not None else ():
        obj = getattr(obj, part, None)
    return obj.gradient if isinstance(obj, BoundGradient) else obj


def _by_name(module, qualname, wrt, with_value, as_tuple, has_aux=False, lifted=frozenset()):
    """Unpickle a gradient whose function's name holds a gradient (``@grad def f``)."""
    import importlib

    importlib.import_module(module)
    found = _lookup(module, qualname)
    if found is None:
        import pickle

        raise pickle.UnpicklingError(f"cannot find {module}.{qualname} to rebuild its gradient")
    return Gradient(found.fun if isinstance(found, Gradient) else found, wrt, with_value,
                    as_tuple, has_aux, lifted=lifted)


def _normalize_wrt(wrt):
    if isinstance(wrt, (tuple, list)):
        if not wrt:
            raise SymdiffError("wrt=() names no parameter; name at least one")
        return tuple(wrt), True
    return (wrt,), False


def grad(fun=None, wrt=0, has_aux=False, stop_gradients=True):
    """The gradient of a scalar function ``fun`` with respect to ``wrt``.

    ``wrt`` is a parameter name or position (one gradient), or a tuple of them (a tuple of
    gradients, in that order). Each gradient has the shape of its parameter. Used bare
    (``@grad``), called (``grad(f, wrt="y")``) or as a factory (``@grad(wrt=1)``).
    ``has_aux=True``: ``fun`` returns ``(value, aux)``, and the gradient ``(gradient,
    aux)``, aux as the function computed it (JAX's contract).
    ``stop_gradients=False``: the gradient as if every ``stop_gradient`` were an identity
    (what the stop_gradients remove, with ``audit``, which reports each one's share).

    >>> import numpy as np
    >>> from symdiff import grad
    >>> @grad
    ... def f(x, y):
    ...     return np.sum(np.sin(x) * y)
    >>> float(f(0.0, 2.0))
    2.0
    """
    wrt, as_tuple = _normalize_wrt(wrt)
    lifted = _lifted(stop_gradients)
    if fun is None:
        return lambda f: _gradient(f, wrt, False, as_tuple, has_aux, lifted)
    return _gradient(fun, wrt, False, as_tuple, has_aux, lifted)


def _lifted(stop_gradients):
    if not isinstance(stop_gradients, bool):
        raise SymdiffError(f"stop_gradients={stop_gradients!r}: True (stop_gradient is a "
                           "constant, the default) or False (it is an identity)")
    return frozenset() if stop_gradients else "all"


def value_and_grad(fun=None, wrt=0, has_aux=False, stop_gradients=True):
    """Like ``grad``, but the result is ``(fun(*args), gradient)``, from one forward sweep;
    with ``has_aux=True``, ``((value, aux), gradient)``.

    >>> from symdiff import value_and_grad
    >>> def f(x):
    ...     return x ** 2
    >>> value_and_grad(f)(3.0)
    (9.0, 6.0)
    """
    wrt, as_tuple = _normalize_wrt(wrt)
    lifted = _lifted(stop_gradients)
    if fun is None:
        return lambda f: _gradient(f, wrt, True, as_tuple, has_aux, lifted)
    return _gradient(fun, wrt, True, as_tuple, has_aux, lifted)


def _gradient(fun, wrt, with_value, as_tuple, has_aux=False, lifted=frozenset()):
    """A Gradient of ``fun``; of a bound method, one bound to its object (see
    ``calls.unbind``: ``wrt`` counts from after self)."""
    if isinstance(fun, (staticmethod, classmethod)):  # @grad over @staticmethod
        return type(fun)(_gradient(fun.__func__, wrt, with_value, as_tuple, has_aux, lifted))
    from .higher import _not_of_jacobian

    _not_of_jacobian(fun, "grad")
    if isinstance(fun, Gradient):
        from .higher import second

        if lifted or fun.lifted:
            raise SymdiffError(f"grad of {fun!r} with stop_gradients=False: second derivatives "
                               "read stop_gradient as a constant only; differentiate a copy "
                               "of the function without its stop_gradient calls")
        return second(fun, wrt, with_value, as_tuple, has_aux)
    _refuse(fun)
    fun, wrt, obj = calls.unbind(fun, wrt)
    gradient = Gradient(fun, wrt, with_value, as_tuple, has_aux, lifted=lifted)
    return gradient if obj is calls.UNBOUND else BoundGradient(gradient, obj)
