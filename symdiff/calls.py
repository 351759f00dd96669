"""What a gradient accepts: where a method's self is, the arguments of a call checked,
and an error from the generated code tied to the user's source line it comes from.
Nothing here imports SymPy."""

from __future__ import annotations

import ast
import inspect
import linecache
import re
import types
import weakref
from dataclasses import dataclass

import numpy as np

from . import containers, kinds
from .errors import Problem, SymdiffError
from .parse import parse, scoped_walk

# Argument types that need no closer look; an ndarray needs a look at its dtype.
PLAIN = frozenset({float, int, bool, np.float64, np.float32, np.float16, np.int64, np.int32,
                   np.int16, np.int8, np.uint8, np.bool_})
REAL = "fiub"  # the dtype kinds that are differentiated (as float64)


@dataclass(frozen=True)
class Signature:
    """Where a function's parameters are found in a call of its gradient.

    ``arity`` is the number of positional parameters: a call that passes exactly that many,
    all positionally, reads no default. ``wrt`` holds (name, position or None for a
    keyword-only parameter) per differentiated parameter.
    """

    arity: int
    positional: tuple[str, ...]
    wrt: tuple[tuple[str, int | None], ...]
    varargs: str = "args"

    def check(self, fun, args, kwargs):
        """Raise a located SymdiffError for an argument that cannot be differentiated (or
        is complex, where no parameter may be)."""
        for name, position in self.wrt:
            if position is not None and position < len(args):
                value = args[position]
            elif name in kwargs:
                value = kwargs[name]
            else:
                value = default_of(fun, self.positional, name)
                if value is MISSING:
                    continue  # Python says so at the call
            kind = unsupported(value)
            if kind is not None:
                raise _refusal(fun, name, kind)
            if _container(value):
                found = _leaf_problem(value, name)
                if found is not None:
                    raise _refusal(fun, name, found[1], found[0])
        extra = [("*" + self.varargs, v) for v in args[len(self.positional):]]
        for name, value in [*zip(self.positional, args, strict=False), *extra,
                            *kwargs.items()]:
            if _is_complex(value) or isinstance(value, np.ma.MaskedArray):
                raise _refusal(fun, name, unsupported(value))
            unsized = _unsized(value, name)
            if unsized is not None:
                raise at_def(fun, name.lstrip("*"), f"{unsized[0]} is a Dask array of unknown "
                             f"chunk sizes (shape {unsized[1]}); the gradient needs its shape",
                             f"its sizes computed first: {unsized[0]}.compute_chunk_sizes(), "
                             "or lengths=True in to_dask_array()")

    def widened(self, args, kwargs):
        """``(args, kwargs)`` with each differentiated argument that NumPy computes with in
        less than float64 (np.tan of a boolean or 8-bit integer array is float16, of a
        16-bit one float32) as float64; None where there is none. Integers are
        differentiated as the floats they equal: the derivatives must not reuse values
        the function computed in float16 from them."""
        args, kwargs, found = list(args), dict(kwargs), False
        for name, position in self.wrt:
            if position is not None and position < len(args):
                if _narrow(args[position]):
                    args[position], found = _float64(args[position]), True
            elif name in kwargs and _narrow(kwargs[name]):
                kwargs[name], found = _float64(kwargs[name]), True
        return (args, kwargs) if found else None


def _unsized(value, path):
    """(the path to a Dask array with lengths that are not known, its shape), or None: the
    argument itself, or a leaf of a container argument."""
    if type(value) in (tuple, list, dict):
        items = value.items() if type(value) is dict else enumerate(value)
        for key, item in items:
            found = _unsized(item, f"{path}[{key!r}]")
            if found is not None:
                return found
    elif hasattr(value, "__dask_graph__") and not kinds._sized(value):
        return path, tuple(value.shape)
    return None


def _narrow(value) -> bool:
    if _container(value):
        return any(map(_narrow, value.values() if type(value) is dict else value))
    if type(value) is bool:
        return True  # np.tan(True) is float16 too
    if type(value) is list:
        value = np.asarray(value)
    dtype = getattr(value, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind in "biu" and dtype.itemsize <= 2


def _float64(value):
    if _container(value):  # the same container, its narrow leaves widened
        if type(value) is dict:
            return {k: _float64(v) if _narrow(v) else v for k, v in value.items()}
        return type(value)(_float64(v) if _narrow(v) else v for v in value)
    if isinstance(value, (np.ndarray, list)):
        return np.asarray(value, dtype=np.float64)
    return np.float64(value)  # a scalar stays a scalar, with NumPy's inf rather than errors


MISSING = object()
_RAGGED = "a list of lists of different lengths"
_DASK = "a Dask array"


def default_of(fun, positional, name):
    """The default Python gave parameter ``name`` at ``fun``'s def, or MISSING."""
    defaults = fun.__defaults__ or ()
    if name in positional[len(positional) - len(defaults):]:
        return defaults[positional.index(name) - (len(positional) - len(defaults))]
    return (fun.__kwdefaults__ or {}).get(name, MISSING)


def signature(fun, wrt) -> Signature:
    """The Signature of ``fun`` differentiated with respect to ``wrt`` (already checked by
    the build: names and positions that are out of range are left out)."""
    code = fun.__code__
    positional = code.co_varnames[: code.co_argcount]
    keyword_only = code.co_varnames[code.co_argcount: code.co_argcount + code.co_kwonlyargcount]
    slots = []
    for w in wrt:
        if isinstance(w, int) and not isinstance(w, bool):
            if -len(positional) <= w < len(positional):
                slots.append((positional[w], w % len(positional)))
        elif w in positional:
            slots.append((w, positional.index(w)))
        elif w in keyword_only:
            slots.append((w, None))
    varargs = code.co_varnames[len(positional) + len(keyword_only)] \
        if code.co_flags & inspect.CO_VARARGS else "args"
    return Signature(len(positional), tuple(positional), tuple(slots), varargs)


def unsupported(value) -> str | None:
    """What ``value`` is, said for an error, if it cannot be differentiated; else None.

    Numbers, real NumPy scalars and arrays, and lists of numbers (nested lists of the same
    lengths: they are read as arrays) can; so can containers (``_container``), whose leaves
    ``_leaf_problem`` checks.
    """
    if isinstance(value, (bool, int, float)) or _container(value):
        return None
    if isinstance(value, np.ma.MaskedArray):  # its mask would be ignored, not followed
        return "a masked array (np.ma)"
    if isinstance(value, (np.ndarray, np.generic)):
        kind = value.dtype.kind
        if kind in REAL:
            return None
        what = "complex numbers" if kind == "c" else f"dtype {value.dtype}"
        return f"an array of {what}" if isinstance(value, np.ndarray) else \
            f"a NumPy scalar of {what}"
    if isinstance(value, list):
        return _list_kind(value)
    if hasattr(value, "__dask_graph__"):
        return _DASK
    dtype = getattr(value, "dtype", None)
    if isinstance(dtype, np.dtype) and hasattr(value, "shape"):  # another array library's
        return None if dtype.kind in REAL else f"an array of dtype {dtype}"
    if value is None:
        return "None"
    if isinstance(value, complex):
        return "a complex number"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} {name}"


def _container(value) -> bool:
    """A dict, tuple or list differentiated item by item (containers.is_tree): not a list
    of numbers, which is read as an array."""
    t = type(value)
    return t is dict or t is tuple or t is list and containers.is_tree(kinds.kind(value))


def _leaf_problem(value, path: str) -> tuple[str, str] | None:
    """(the path to a leaf of a container that cannot be differentiated, what it is)."""
    items = value.items() if type(value) is dict else enumerate(value)
    for key, item in items:
        here = f"{path}[{key!r}]"
        if _container(item):
            found = _leaf_problem(item, here)
        else:
            kind = unsupported(item)
            found = (here, kind) if kind is not None else None
        if found is not None:
            return found
    return None


def _list_kind(value: list) -> str | None:
    for item in value:
        if isinstance(item, list):
            kind = _list_kind(item)
            if kind is not None:
                return kind
        elif unsupported(item) is not None:
            return f"a list holding {unsupported(item)}"
    try:
        np.asarray(value, dtype=np.float64)
    except ValueError:
        return _RAGGED
    return None


def _is_complex(value) -> bool:
    dtype = getattr(value, "dtype", None)
    return isinstance(value, complex) or isinstance(dtype, np.dtype) and dtype.kind == "c"


def _refusal(fun, name, kind, path=None) -> SymdiffError:
    """The error for parameter ``name`` given a value of ``kind``; ``path``: a leaf of a
    container, ``params['W'][1]``, is that."""
    said = f"{name} received {kind}" if path is None else f"{path} is {kind}"
    if "complex" in kind:
        message = f"{said}; complex numbers are not supported"
        hint = "real arguments: pass the real and imaginary parts as two parameters"
    elif kind == _DASK:
        # (computing its gradient as NumPy would hold all of it in memory, unasked)
        message = f"{said}; a differentiated parameter must be held in memory"
        hint = ("Dask arrays as data (parameters not differentiated), with the parameters "
                f"NumPy arrays: {path or name}.compute() if it fits in memory")
    elif kind == _RAGGED:
        message = f"{said}, which NumPy cannot read as an array"
        hint = "lists of one length, an array, or a tuple of lists (each its own item)"
    elif path is not None:
        message = f"{said}, which cannot be differentiated"
        hint = ("floats, ints and NumPy arrays of real numbers, in dicts, tuples and lists "
                "(pass other values as parameters that are not differentiated)")
    else:
        message = f"{said}, which cannot be differentiated"
        hint = ("a float, an int, a NumPy array (or a list) of real numbers, or a dict, "
                "tuple or list of those")
    return at_def(fun, name.lstrip("*"), message, hint)


# --- methods: where self is ---

UNBOUND = object()  # unbind's object for a function that is not a bound method


def unbind(fun, wrt):
    """``(function, wrt, obj)`` for ``grad(fun, wrt)``: a bound method's function and the
    object bound to its self (or cls, for a classmethod); for a function defined in a class
    body (``@grad`` on a method, ``C.loss``), the function itself and UNBOUND. Either way
    ``wrt`` counts from the parameter after self, as jax.grad does with a bound method:
    it is returned counted from the function's first parameter. An object with a
    ``__call__`` method is that method, bound to it. Other functions pass as they are.
    Naming self in ``wrt`` is refused: self is read, not differentiated.
    """
    if isinstance(fun, types.FunctionType):
        if method_self(fun) is None:
            return fun, wrt, UNBOUND
        function, obj = fun, UNBOUND
    else:
        call = inspect.getattr_static(type(fun), "__call__", None)
        if isinstance(call, types.FunctionType) and not isinstance(fun, type):
            fun = types.MethodType(call, fun)  # an object called as a function: its __call__
        if not isinstance(fun, types.MethodType) or not hasattr(fun.__func__, "__code__"):
            return fun, wrt, UNBOUND
        function, obj = fun.__func__, fun.__self__
    code = function.__code__
    if not code.co_argcount:
        raise at_def(function, None, f"{function.__qualname__} is a method without a self "
                     "parameter", "def name(self, x, ...), or a @staticmethod")
    this = code.co_varnames[0]
    count = code.co_argcount - 1  # positional parameters after self
    shifted = []
    for w in wrt:
        if w == this:
            raise at_def(function, 0, f"cannot differentiate {function.__qualname__} with "
                         f"respect to {this}: the object a method is called on is read, "
                         "not differentiated", "a parameter after " + this + " (wrt=0 is "
                         "the first), with what it reads from " + this + " as a parameter")
        if isinstance(w, int) and not isinstance(w, bool):
            keyword_only = code.co_varnames[code.co_argcount:][:code.co_kwonlyargcount]
            if not count and not keyword_only and obj is UNBOUND:
                raise at_def(function, 0, f"{function.__qualname__} is defined in a class "
                             f"body, so its only parameter, {this}, is taken for self",
                             "@staticmethod on a function of a class body that takes no self")
            if not -count <= w < count:
                raise at_def(function, None, f"wrt={w} is out of range: "
                             f"{function.__qualname__} has {count} positional parameter"
                             f"{'' if count == 1 else 's'} after {this}",
                             f"wrt=0 for the first parameter after {this}" if count else
                             f"a keyword-only parameter by name: wrt={keyword_only[0]!r}"
                             if keyword_only else "a method with a parameter after " + this)
            w = w + 1 if w >= 0 else w
        shifted.append(w)
    return function, tuple(shifted), obj


def shifted_back(wrt) -> tuple:
    """``wrt`` as the user of a method gave it, counted from after self."""
    return tuple(w - 1 if isinstance(w, int) and not isinstance(w, bool) and w > 0 else w
                 for w in wrt)


def method_self(fun) -> str | None:
    """The name of ``fun``'s first parameter (self, cls) if ``fun`` was defined in a class
    body and not marked @staticmethod (so a call through an instance passes self); else
    None."""
    if not _in_class_body(fun):
        return None
    code = fun.__code__
    return code.co_varnames[0] if code.co_argcount else ""


def _in_class_body(fun) -> bool:
    """Whether ``fun`` was defined in a class body and not marked @staticmethod."""
    qualname = getattr(fun, "__qualname__", "")
    # "C.f" and "make.<locals>.C.f" are in a class body; "make.<locals>.f" and
    # "<listcomp>.<lambda>" (a comprehension's scope) are not.
    if type(qualname) is not str or "." not in qualname or \
            qualname.split(".")[-2].startswith("<"):
        return False
    code = getattr(fun, "__code__", None)
    if not isinstance(code, types.CodeType):
        return False
    static = _STATIC.get(code)
    if static is None:  # read once per code object: grad(C.f) may run in a loop
        try:
            node = parse(fun).node
        except SymdiffError:
            return code.co_argcount > 0
        static = _STATIC[code] = any(
            isinstance(d, ast.Name) and d.id == "staticmethod" or
            isinstance(d, ast.Attribute) and d.attr == "staticmethod"
            for d in node.decorator_list)
    return not static


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> a @staticmethod?


def at_def(fn, parameter, message, hint) -> SymdiffError:
    """A SymdiffError at the def of ``fn``, or at its ``parameter`` (a position among the
    positional ones, or a name); without its source, at its first line."""
    try:
        parsed = parse(fn)
    except SymdiffError:
        code = getattr(fn, "__code__", None)
        if code is None:
            return SymdiffError(f"{message}; supported instead: {hint}")
        return SymdiffError(problems=(Problem(code.co_filename, code.co_firstlineno, 1,
                                              message, hint=hint),))
    a = parsed.node.args
    params = [*a.posonlyargs, *a.args] if isinstance(parameter, int) else [
        p for p in ast.walk(a) if isinstance(p, ast.arg) and p.arg == parameter]
    index = parameter if isinstance(parameter, int) else 0
    node = params[index] if parameter is not None and index < len(params) else parsed.node
    return parsed.source.error(node, message, hint)


# --- errors raised inside the generated code ---

# The heading of a source line's adjoint statements, and the comment ending a forward line.
_HEADING = re.compile(r"\s*# grad of line (\d+)(?: of (\w+))?:")
_COMMENT = re.compile(r"  # line (\d+)(?: of (\w+))?(?=:|$)")


def failure(error: Exception, fun, built) -> Exception:
    """The exception to raise for ``error``, raised inside ``built``'s generated function.

    An unlocated SymdiffError (a check the generated code makes) or an error of the
    backward sweep becomes a SymdiffError at the user's line it comes from; an error of
    the forward sweep, which runs the function's own code, keeps its type (the function
    itself raises it) and gains a note saying which line of the function raised it.
    """
    if isinstance(error, SymdiffError) and error.problems or isinstance(
            error, (MemoryError, RecursionError)):
        return error
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code is not built.fn.__code__:
        tb = tb.tb_next
    if tb is None:  # raised before the generated code ran (a wrong number of arguments)
        generated, name = f"{built.fn.__name__}()", f"{getattr(fun, '__name__', '')}()"
        if isinstance(error, TypeError) and str(error).startswith(generated):
            return TypeError(name + str(error)[len(generated):])  # as the function says it
        return error
    lines = built.source.splitlines()
    place = _place(fun, built, lines, tb.tb_lineno)
    if isinstance(error, SymdiffError):
        located = SymdiffError(problems=(place(str(error), getattr(error, "hint", "")),))
        located.__suppress_context__ = True  # the same message, now with its place
        return located
    if tb.tb_lineno < built.backward:
        name = getattr(fun, "__name__", "the function")
        error.add_note(place(f"raised by this line of {name}'s own code, which its gradient "
                             "runs as the function does").format())
        return error
    located = SymdiffError(problems=(place(
        f"computing the gradient of this line failed: {type(error).__name__}: {error}"),))
    located.__cause__ = error
    return located


def _place(fun, built, lines, lineno):
    """A maker of Problems at the user's line that generated line ``lineno`` comes from."""
    code = fun.__code__
    filename, line = code.co_filename, None
    text = lines[lineno - 1] if 0 < lineno <= len(lines) else ""
    if "_check_scalar(" in text:  # the output's check: the function's return
        line = _return_line(fun)
    else:
        # Forward lines carry "# line N"; backward lines sit under "# grad of line N".
        for i in range(lineno - 1, -1, -1):
            # (The last comment: a string in the user's code could hold one too.)
            match = _HEADING.match(lines[i]) or ([None, *_COMMENT.finditer(lines[i])][-1])
            if match:
                line, helper = int(match.group(1)), match.group(2)
                filename = _helper_file(helper, built) or filename
                break
            if i + 1 == built.backward:  # between the seed and the first heading
                break
    if line is None:
        line = code.co_firstlineno
    source_line = linecache.getline(filename, line).rstrip("\n")
    col = len(source_line) - len(source_line.lstrip()) + 1
    return lambda message, hint="": Problem(filename, line, col, message, source_line, hint)


def _helper_file(name, built) -> str | None:
    """The file of the inlined helper ``name`` (a nested def is in its caller's file)."""
    if name is None:
        return None
    for _, helper, (code, _, _) in built.guards:
        if code is not None and getattr(helper, "__name__", None) == name:
            return code.co_filename
    return None


def _return_line(fun) -> int | None:
    try:
        node = parse(fun).node
    except SymdiffError:
        return None
    returns = [n for n in scoped_walk(ast.iter_child_nodes(node)) if isinstance(n, ast.Return)]
    return returns[0].lineno if len(returns) == 1 else node.lineno
