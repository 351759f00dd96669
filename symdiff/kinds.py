"""Argument kinds: what a gradient is specialised on, as JAX specialises a trace per abstract
signature.

A kind says of a value what the generated code depends on, and nothing of what it does
not (sizes, contents):

- ``Number(float | int | bool)``: a Python number;
- ``Array(dtype, ndim, scalar, lazy)``: a NumPy array of that dtype and number of axes, or a
  NumPy scalar (``scalar=True``, ndim 0); ``ndim=None``: any number of axes (the float64
  specialisation that ``.source`` and the CLI show before a call has said more);
  ``lazy=True``: a Dask array (told by its ``__dask_graph__``, read from its metadata
  without computing it), which the gradient computes once, at its return;
- ``Tuple(items)``, ``List(items)``, ``Dict(keys, items)``: containers, item by item, nested
  (JAX's pytrees);
- ``Other(what)``: None, a string, or any other object (such as ``self``: one kind for
  all), read but never differentiated.

At a call, ``key`` describes the arguments cheaply (a type, or a small tuple); the gradient
keeps one compiled function per key, and ``kind`` turns a key's value into the Kind the
build reads. Nothing here imports SymPy.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Number:
    type: str  # "float", "int" or "bool"

    def __str__(self):
        return self.type


@dataclass(frozen=True)
class Array:
    dtype: str  # NumPy's dtype name: "float64", "float32", "uint8", "bool"...
    ndim: int | None  # None: any
    scalar: bool = False  # a NumPy scalar (np.float64(1.0)), not a 0-d array
    lazy: bool = False  # a Dask array: computed by the gradient at its return

    def __str__(self):
        if self.scalar:
            return f"np.{self.dtype}"
        axes = "" if self.ndim is None else f", {self.ndim}-d"
        return f"{self.dtype} {'dask ' if self.lazy else ''}array{axes}"

    @property
    def floating(self) -> bool:
        return np.dtype(self.dtype).kind == "f"


@dataclass(frozen=True)
class Tuple:
    items: tuple

    def __str__(self):
        return "(" + ", ".join(map(str, self.items)) + ("," if len(self.items) == 1 else "") + ")"


@dataclass(frozen=True)
class List:
    items: tuple

    def __str__(self):
        return "[" + ", ".join(map(str, self.items)) + "]"


@dataclass(frozen=True)
class Dict:
    keys: tuple
    items: tuple

    def __str__(self):
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(self.keys, self.items,
                                                             strict=True)) + "}"


@dataclass(frozen=True)
class Other:
    what: str  # "None", "str", the class's name...

    def __str__(self):
        return self.what


Kind = Number | Array | Tuple | List | Dict | Other

FLOAT = Number("float")
FLOAT64 = Array("float64", None)  # the specialisation shown before a call

# Types whose kind is the type alone: the key of such an argument is its type.
_NUMBERS = {float: FLOAT, int: Number("int"), bool: Number("bool")}
_SCALARS = {t: Array(np.dtype(t).name, 0, True) for t in (
    np.float64, np.float32, np.float16, np.longdouble, np.int64, np.int32, np.int16, np.int8,
    np.uint64, np.uint32, np.uint16, np.uint8, np.bool_, np.complex128, np.complex64)}
BY_TYPE = {**_NUMBERS, **_SCALARS}


def key(value):
    """A hashable description of ``value``'s kind, cheap to compute at every call: its type
    where that says all (numbers, NumPy scalars), else a tuple."""
    t = type(value)
    if t is np.ndarray:
        return (value.dtype, value.ndim)
    if t in BY_TYPE:
        return t
    if t is tuple or t is list:
        return (t, *map(key, value))
    if t is dict:
        return (dict, tuple(value), *map(key, value.values()))
    if t is str or value is None:
        return t
    if isinstance(value, np.ndarray):  # a subclass (np.memmap, a masked array)
        return (t, value.dtype, value.ndim)
    if hasattr(value, "__dask_graph__"):  # (whether its sizes are known: see calls.check)
        return (t, value.dtype, value.ndim, _sized(value))
    # Any other type is a key of its own (np.longlong, a subclass of float, a class of the
    # user's), so that its first call checks it; objects of every class still share one
    # build (their kinds are equal).
    return (object, t)


def kind(value) -> Kind:
    """The Kind of ``value`` (see the module's docstring)."""
    t = type(value)
    if t in BY_TYPE:
        return BY_TYPE[t]
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":  # strings, objects, dates: read, not numbers
            return Other(f"{value.dtype.name} array")
        return Array(value.dtype.name, value.ndim)
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        return Array(value.dtype.name, 0, True)
    if lazy(value):  # its dtype and ndim are metadata: reading them computes nothing
        return Array(value.dtype.name, value.ndim, lazy=True)
    if t is tuple:
        return Tuple(tuple(map(kind, value)))
    if t is list:
        return List(tuple(map(kind, value)))
    if t is dict:
        return Dict(tuple(value), tuple(map(kind, value.values())))
    if isinstance(value, bool):
        return Number("bool")
    if isinstance(value, float):
        return FLOAT
    if isinstance(value, int):
        return Number("int")
    # Read, never differentiated: the generated code does not depend on an object's class
    # (self.W is read when it runs), so every object is one kind.
    return Other("None" if value is None else "str" if isinstance(value, (str, np.str_))
                 else "object")


def lazy(value) -> bool:
    """Whether ``value`` is a Dask array of numbers (duck typed: symdiff never imports Dask
    unless one is passed)."""
    return hasattr(value, "__dask_graph__") and isinstance(getattr(value, "dtype", None),
                                                           np.dtype) and \
        value.dtype.kind in "biuf" and isinstance(getattr(value, "ndim", None), int)


def _sized(value) -> bool:
    """Whether every length of a Dask array's shape is known (not nan: the size of a
    boolean-mask selection is known only once computed)."""
    return all(n == n for n in getattr(value, "shape", ()))


def leaves(k: Kind):
    """The kinds at the leaves of a (nested) container kind, in order; a leaf is itself."""
    if isinstance(k, (Tuple, List, Dict)):
        for item in k.items:
            yield from leaves(item)
    else:
        yield k


def differentiable(k: Kind) -> bool:
    """Whether a value of this kind can be differentiated: real numbers and real arrays,
    and containers of them."""
    if isinstance(k, (Tuple, List, Dict)):
        return all(map(differentiable, k.items))
    if isinstance(k, Number):
        return True
    if isinstance(k, Array):
        return np.dtype(k.dtype).kind in "fiub"
    return False


def text(kinds: dict) -> str:
    """The kinds of a build, one ``name: kind`` per parameter, for cache keys and headers."""
    return ", ".join(f"{name}: {k}" for name, k in kinds.items())


def assumed(fun, names) -> tuple:
    """The kinds ``.source`` shows a gradient for, before a call says more: each parameter's
    default's kind, else its annotation's (float, int, bool), else a float64 array."""
    positional = names[:fun.__code__.co_argcount]
    defaults = dict(zip(positional[len(positional) - len(fun.__defaults__ or ()):],
                        fun.__defaults__ or (), strict=True))
    defaults.update(fun.__kwdefaults__ or {})
    annotations = getattr(fun, "__annotations__", None) or {}
    out = {}
    for name in names:
        if name in defaults:
            out[name] = kind(defaults[name])
        elif (found := annotated(annotations.get(name))) is not None:
            out[name] = found
    return tuple(out.items())


def annotated(annotation) -> Kind | None:
    """The kind an annotation names (a type, or its text under ``from __future__ import
    annotations``): a Python number for float, int and bool, a float64 array for none or an
    array type; None (any kind: the build keeps its run-time guards) for anything else, such
    as dict or a class of the user's."""
    if annotation is None:
        return FLOAT64
    shape = annotation
    if isinstance(shape, str) and shape.strip()[:1] in "(0123456789":
        try:  # a shape written as text: x: "(3, 4)"
            shape = ast.literal_eval(shape)
        except (ValueError, SyntaxError):
            pass
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if isinstance(shape, tuple) and all(type(n) is int for n in shape):  # x: (3, 4)
        return Array("float64", len(shape)) if shape else FLOAT
    text = annotation.strip() if isinstance(annotation, str) else \
        getattr(annotation, "__name__", None) or str(annotation)
    outer = text.split("[")[0].split(".")[-1]  # dict[str, np.ndarray] is a dict
    found = {"float": FLOAT, "int": Number("int"), "bool": Number("bool")}.get(outer)
    if found is not None:
        return found
    return FLOAT64 if outer in ("ndarray", "NDArray", "ArrayLike") else None
