"""What generated gradients call at run time: NumPy-only helpers, and ``stop_gradient``.

Nothing here imports SymPy: a compiled (or exported) gradient needs only this module's
helpers, whose source is copied into exported files.
"""

import numpy as np

from .errors import SymdiffError


def stop_gradient(x):
    """Return ``x`` unchanged; to the differentiator, a constant.

    Like ``jax.lax.stop_gradient`` and ``tf.stop_gradient``: the value flows forward, no
    gradient flows back through it.

    >>> import numpy as np
    >>> from symdiff import grad, stop_gradient
    >>> def f(x):
    ...     return x * stop_gradient(x)
    >>> grad(f)(3.0)
    3.0
    """
    return x


_SCALARS = (float, int, np.float64)


def _unbroadcast(g, x, like=None):
    """Sum the adjoint ``g`` down to the shape of ``x``, undoing NumPy broadcasting.

    ``like``, if given, are the operands of the value ``g`` is the adjoint of: ``g`` is
    first spread to their broadcast shape (where a factor of ones was left out of ``g``).
    """
    if type(g) in _SCALARS and type(x) in _SCALARS and like is None:
        return g  # the common scalar case, without NumPy's shape machinery
    if type(g) is np.ndarray and type(x) is np.ndarray and like is None and \
            g.shape == x.shape:
        return g  # arrays of one shape (in a loop's every step): without np.shape
    # (operands all of g's shape, the common case, broadcast to it: without NumPy's
    # shape machinery, which costs microseconds per call)
    if like is not None:
        gs = g.shape if type(g) is np.ndarray else None
        for v in like or (None,):  # (no operands: NumPy's answer, as for any others)
            if gs is None or getattr(v, "shape", None) != gs:
                full = np.broadcast_shapes(*map(np.shape, like))
                if np.shape(g) != full:
                    g = np.broadcast_to(g, full)
                break
    gs = g.shape if type(g) is np.ndarray else np.shape(g)
    xs = x.shape if type(x) is np.ndarray else np.shape(x)
    if gs == xs:
        return g
    lead = len(gs) - len(xs)
    # The axes of g to sum over: those x lacks, and those where x has 1 and g more; the
    # others, kept; and x's shape before spreading: 1 where g is summed or has no axis.
    axes = list(range(lead))
    kept = []
    shape = []
    for i, n in enumerate(xs):
        j = i + lead
        if j < 0:
            shape.append(1)
        elif n == 1 and gs[j] != 1:
            axes.append(j)
            shape.append(1)
        else:
            kept.append(j)
            shape.append(gs[j])
    shape = tuple(shape)
    if not axes:
        # g is smaller than x (x was broadcast against nothing larger): spread it out.
        return np.broadcast_to(g, xs)
    if not shape:
        g = np.add.reduce(g, axis=None)  # a NumPy scalar, as np.sum gives
    elif type(g) is np.ndarray and g.dtype in _SUMMED_FAST:
        g = _sum_axes(g, tuple(axes), kept, shape)
    else:  # (np.sum's dtypes: an integer adjoint is summed in the platform's integer)
        g = np.reshape(np.sum(g, axis=tuple(axes)), shape)
    return g if shape == xs else np.broadcast_to(g, xs)


_SUMMED_FAST = (np.dtype(np.float64), np.dtype(np.float32))


def _sum_axes(g, axes, kept, shape):
    """The float array ``g`` summed over ``axes`` into a new array of ``shape`` (its
    ``kept`` axes, with ones), by the cheapest NumPy call that is exact up to rounding."""
    out = np.empty(shape, dtype=g.dtype)
    into = out.reshape([g.shape[i] for i in kept])  # (a view of out: out is contiguous)
    inner = 1
    for n in g.shape[axes[-1] + 1:]:
        inner *= n
    if inner == 1 or inner >= 400 or g.ndim > 26:
        # Along the last axis np.add.reduce sums pairwise (einsum would not); over leading
        # axes with long rows left it adds whole rows, as fast as anything.
        np.add.reduce(g, axis=axes, out=into)
    else:
        # Leaving short rows (X[:, None, :] of 3 coordinates), add.reduce's inner loop is
        # a few entries long; einsum's is not (4x faster on (200, 200, 3) -> (200, 3)).
        np.einsum(g, list(range(g.ndim)), kept, out=into)
    return out


def _zeros(x):
    """A zero gradient shaped like ``x`` (0.0 for a number): the adjoint of a constructor's
    argument whose entries carry no gradient (an integer dtype). (Generated code starts an
    adjoint nothing has flowed back to as None; see ``_plus``.)"""
    if type(x) in _SCALARS or type(x) is _Unbound:
        return 0.0
    return np.zeros(np.shape(x))


def _plus(acc, g):
    """``acc + g``, where ``acc`` may be None: nothing has flowed back to it yet on the
    path the function took. Then ``g`` itself, as an array of its own where it is an
    array (it may be another adjoint's, and this one may be added to in place later)."""
    if acc is None:
        return np.array(g) if isinstance(g, np.ndarray) else g
    return acc + g


def _zip_len(*arrays, strict=False):
    """How many steps ``zip(*arrays, strict=strict)`` takes; unequal lengths fail if strict."""
    lengths = [len(a) for a in arrays]
    if strict and len(set(lengths)) > 1:
        raise ValueError(f"zip() arguments have different lengths {lengths}")
    return min(lengths)


def _zipped_with(value, n, strict, message):
    """Refuse a value zipped with a container of ``n`` items (a loop unrolled n times)
    that would end the loop earlier (or, if strict, has another length)."""
    if len(value) < n or strict and len(value) != n:
        raise SymdiffError(message)


def _fit(g, x, copy=False):
    """The gradient ``g`` as the caller expects it: x's shape and float precision, an array
    of its own.

    ``copy``: ``g`` may be an array the caller can see (an argument, module data, another
    gradient), so it is copied even where its shape and type already fit.
    """
    if g is None:  # nothing flowed back to x on the path the function took
        g = 0.0
    if type(x) is float:  # the common scalar case, without NumPy's shape machinery
        if type(g) is float:
            return g
        if type(g) in _SCALARS:
            return float(g)
    # float32 and float16 give gradients of their own precision (as JAX); anything else
    # (integers, booleans, lists) float64.
    dtype = getattr(x, "dtype", None)
    dtype = dtype if dtype is not None and dtype.kind == "f" and dtype.itemsize < 8 \
        else np.float64
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__array_function__"):  # (NumPy's scalars have none)
            # A parameter of another array library (CuPy): a gradient of its own type, made
            # by its library (np.array would bring it into NumPy's memory, or refuse to).
            return np.array(np.broadcast_to(g, np.shape(x)), dtype=dtype, like=x)
        if np.ndim(x) == 0:
            value = np.asarray(g, dtype=dtype).reshape(())
            return float(value) if dtype is np.float64 else value[()]
    if (not copy and type(g) is np.ndarray and g.dtype == dtype
            and g.shape == np.shape(x) and g.flags.writeable
            and (g.flags.owndata or _sole_view(g))):
        return g  # computed here, for this gradient alone: no copy needed
    return np.array(np.broadcast_to(g, np.shape(x)), dtype=dtype)


# (sys.getrefcount, by an assignment that exported gradients copy with the helpers)
_getrefcount = __import__("sys").getrefcount


def _base_refs(g):
    return _getrefcount(g.base)


# What _base_refs counts for a view that alone holds the array it views (the same call
# counted by the same interpreter, whatever its version counts for a call's arguments).
_SOLE_REFS = _base_refs(np.empty(2).reshape(1, 2))


def _sole_view(g):
    """Whether the view ``g`` is all of an array that nothing else holds, in order (as
    np.reshape of a product computed in the gradient): then nothing else can see its
    entries, and it is the caller's as much as a new array would be."""
    base = g.base
    if not (type(base) is np.ndarray and base.flags.owndata and g.flags.c_contiguous and
            g.nbytes == base.nbytes):
        return False
    del base  # (counted as _SOLE_REFS was: held by the view alone)
    return _base_refs(g) <= _SOLE_REFS


def _not_in_place(value, message, hint, *others):
    """Refuse an augmented assignment that NumPy would do in place on an array that one of
    ``others`` (the names that may hold the same array) shares. The error is placed at the
    user's line by the caller of the gradient, which reads ``hint`` off it."""
    if isinstance(value, np.ndarray) and any(
            isinstance(o, np.ndarray) and np.may_share_memory(value, o) for o in others):
        error = SymdiffError(message)
        error.hint = hint
        raise error


def _check_scalar(value, name):
    """Refuse a non-scalar output: a gradient needs a scalar function."""
    if type(value) is float or type(value) in _SCALARS or np.ndim(value) == 0:
        return
    raise SymdiffError(
        f"{name} returned an array of shape {np.shape(value)}; a gradient needs a scalar "
        "output: reduce it first (np.sum, np.mean), or take jacobian(f) for the "
        "derivatives of every element"
    )


def _computed(*values):
    """``values`` with each Dask collection among them computed, all in one
    ``dask.compute`` (one graph: the chunks their parts share are read once). A gradient
    built for Dask data calls it at its return, on its value and gradients."""
    if not any(map(_lazy, values)):
        return values
    import dask  # (only where a Dask array was passed: symdiff does not need Dask)

    return dask.compute(*values)  # (what is not Dask's, in tuples, lists, dicts too, as it is)


def _lazy(value):
    """Whether ``value`` is, or holds in a tuple, list or dict, a Dask collection."""
    if type(value) in (tuple, list):
        return any(map(_lazy, value))
    if type(value) is dict:
        return any(map(_lazy, value.values()))
    return hasattr(value, "__dask_graph__")


HELPERS = (_unbroadcast, _fit, _check_scalar)


# --- vector-Jacobian helpers of array operations (see rules.ARRAY_OPS) ---


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axis))


def _unreduce(g, x, axis=None, keepdims=False):
    """Spread the adjoint of a reduction of ``x`` over ``axis`` back to x's shape."""
    shape = np.shape(x)
    if not keepdims and shape:
        axes = _axes(axis, len(shape))
        g = np.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return np.broadcast_to(g, shape)


class _Shape:
    """Stands in for a forward value of which the gradient needs only the shape.

    np.shape, np.ndim and np.size read it as they would the value; anything else fails
    loudly (it has no values to give), rather than compute with something made up.
    """

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = tuple(shape)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        size = 1
        for n in self.shape:
            size *= n
        return size

    def __repr__(self):
        return f"<shape {self.shape} of a value the gradient does not compute>"


def _as_float(value, dtype=np.float64):
    """A value as the derivatives compute with it: a list, a tuple, or an integer, boolean
    or smaller float array as an array of ``dtype`` (float64, or float32 where the gradient
    is computed in float32) (2 * [1.0] would repeat the list; a uint8 array's K**2 would
    wrap around, a float16 one's overflow); anything else as it is."""
    size = np.dtype(dtype).itemsize
    if isinstance(value, (list, tuple)) or isinstance(value, np.ndarray) and (
            value.dtype.kind in "biu" or value.dtype.kind == "f" and value.itemsize < size):
        return np.asarray(value, dtype=dtype)
    if not isinstance(value, (np.ndarray, np.generic)) and hasattr(
            value, "__array_function__") and (
            value.dtype.kind in "biu" or value.dtype.kind == "f" and value.dtype.itemsize < size):
        return value.astype(dtype)  # (a Dask array stays one: np.asarray would compute it)
    if isinstance(value, np.generic) and (
            value.dtype.kind in "biu" or value.dtype.kind == "f" and value.itemsize < size):
        return np.dtype(dtype).type(value)  # a NumPy scalar stays a scalar
    return value


def _as_float32(value):
    """``_as_float(value, np.float32)``: for a gradient computed in float32."""
    return _as_float(value, np.float32)


def _arrays(*values):
    """``values``, with each list among them as an array (of its own dtype: an index list
    stays integers), for the array operations' rules, which read ``.ndim`` and slice."""
    return tuple(np.asarray(v) if type(v) is list else v for v in values)


def _numpy(*values):
    """Whether each of ``values`` is a NumPy float (an array or a scalar) or a stand-in for
    one: then arithmetic on them raises only where their shapes do not fit (integers may
    overflow or refuse negative powers, booleans refuse - and -)."""
    return all(type(v) is _Shape or isinstance(v, (np.ndarray, np.floating)) and
               v.dtype.kind == "f" for v in values)


def _shape_of(*values):
    """The shape NumPy broadcasting gives an elementwise result of ``values``: stands in
    for a statement the gradient skips (see ``_skipping``)."""
    _skipping()
    # (values of one array's shape, the common case: without np.broadcast_shapes)
    for v in values:
        if type(v) is np.ndarray:
            shape = v.shape
            for w in values:
                if getattr(w, "shape", None) != shape:
                    break
            else:
                return _Shape(shape)
            break
    return _Shape(np.broadcast_shapes(*map(np.shape, values)))


def _shape_only(x):
    """``x``'s shape, for a value of which only the shape is needed from here on."""
    return _Shape(x.shape if type(x) is np.ndarray else np.shape(x))


class _Raising(FloatingPointError):
    """NumPy's floating-point errors raise here (np.errstate(over="raise")...), where a
    statement whose value the gradient does not need, and skips, could raise: grad()
    then runs value_and_grad's code, which skips nothing."""


# NumPy's error state (np.errstate) as one object per state: its verdict is kept
# (np.geterr takes a microsecond). (A private name of NumPy's: without it, geterr always.)
_ERRSTATE = getattr(getattr(getattr(np, "_core", None), "_ufunc_config", None),
                    "_extobj_contextvar", None)
_ERRSTATE_SEEN = [None, True]  # (the state, whether nothing raises in it)


def _skipping():
    """Raise ``_Raising`` where NumPy's floating-point errors raise."""
    state = _ERRSTATE.get() if _ERRSTATE is not None else None
    if state is None or state is not _ERRSTATE_SEEN[0]:
        _ERRSTATE_SEEN[:] = [state, "raise" not in np.geterr().values()]
    if not _ERRSTATE_SEEN[1]:
        raise _Raising("a statement this gradient skips could raise under np.errstate; "
                       "value_and_grad runs every statement")


def _reduced_shape(reduction, x, axis=None, keepdims=False):
    """The shape of ``reduction(x, axis, keepdims=keepdims)`` (np.sum, np.mean...), and
    the same errors for an axis it refuses: stands in for a statement the gradient skips."""
    _skipping()
    shape = np.shape(x)
    if type(keepdims) not in (bool, np.bool_, int):
        raise TypeError(f"keepdims={keepdims!r} is not a bool")
    if not shape:  # NumPy's rules for a 0-d operand differ by reduction: ask it
        return _Shape(np.shape(reduction(np.zeros(()), axis, keepdims=keepdims)))
    axes = () if axis is None else axis if isinstance(axis, tuple) else (axis,)
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"'{type(a).__name__}' object cannot be interpreted as an "
                            "integer")
        if not -len(shape) <= a < len(shape):
            raise _AxisError(a, len(shape))
    if len({a % len(shape) for a in axes}) < len(axes):
        raise ValueError("duplicate value in 'axis'")
    axes = _axes(axis, len(shape))
    return _Shape(1 if i in axes else n for i, n in enumerate(shape)
                  if keepdims or i not in axes)


_AxisError = getattr(np, "exceptions", np).AxisError  # np.exceptions since NumPy 1.25


class _Unbound:
    """What a local name holds where the function had not assigned it on the path it took:
    any use of it raises UnboundLocalError, as reading the name in the function would."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def _unbound(self, *args, **kwargs):
        raise UnboundLocalError(f"cannot access local variable {self.name!r} where it is "
                                "not associated with a value")

    __getattr__ = __array__ = __array_ufunc__ = __array_function__ = _unbound
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _unbound
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _unbound
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __pos__ = __abs__ = _unbound
    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _unbound
    __bool__ = __float__ = __int__ = __index__ = __len__ = __iter__ = __getitem__ = _unbound
    __round__ = __floor__ = __ceil__ = __trunc__ = _unbound
    __hash__ = object.__hash__


def _unbound(name):
    """The stand-in for the local variable ``name`` on a path that does not assign it."""
    return _Unbound(name)


def _asarray(x, dtype=None):
    """``np.asarray(x, dtype)``, but an array of another library that takes part in NumPy's
    dispatch (``__array_function__``: a Dask array) stays one, converted with ``astype``:
    np.asarray would compute a Dask array, whole, in memory."""
    if not isinstance(x, np.ndarray) and hasattr(x, "__array_function__") and \
            isinstance(getattr(x, "dtype", None), np.dtype):
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)
    return np.asarray(x, dtype=dtype)


def _size(*values):
    """How many elements the broadcast of ``values`` has, at least 1 (np.mean's count,
    from its operands; the gradient of an empty mean is empty whatever it is)."""
    try:
        return max(_Shape(np.broadcast_shapes(*map(np.shape, values))).size, 1)
    except TypeError:
        _refuse_unsized(*values)
        raise


def _count(x, out):
    """How many elements of ``x`` each element of the reduction ``out`` summarises."""
    n = _entries(x)
    if n != n:  # (nan: a Dask array's unknown length)
        _refuse_unsized(x)
    return n / max(_entries(out), 1)


def _refuse_unsized(*values):
    """Refuse a Dask array of unknown lengths (boolean-mask indexing makes one), where the
    derivative counts its entries (a mean's): they are not known before it is computed."""
    for v in values:
        if any(n != n for n in np.shape(v)):
            error = SymdiffError(f"the number of entries of a Dask array of unknown chunk "
                                 f"sizes (shape {np.shape(v)}) is needed by the gradient "
                                 "here, and is not known before it is computed")
            error.hint = "the array's sizes computed where it is made: x.compute_chunk_sizes()"
            raise error


def _entries(x):
    """``np.size(x)``, read from ``x.size`` where it has one: metadata on a Dask array,
    which np.size would compute, whole, to count its entries."""
    return x.size if hasattr(x, "size") else np.size(x)


def _extreme_share(g, x, out, axis=None, keepdims=False):
    """np.max/np.min: the gradient split equally among the tied extreme entries."""
    hit = x == _unreduce(out, x, axis, keepdims)
    ties = np.sum(hit, axis=axis, keepdims=True)
    return _unreduce(g, x, axis, keepdims) * hit / ties


def _prod_others(x, axis=None):
    """For each entry, the product of the others along ``axis`` (exact when x has zeros)."""
    x = _asarray(x, dtype=np.result_type(x, np.float64))
    if x.size == 0:
        return np.zeros_like(x)
    axes = _axes(axis, x.ndim)
    rest = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, rest + list(axes))
    flat = np.reshape(moved, moved.shape[: len(rest)] + (-1,))
    ones = np.ones(flat.shape[:-1] + (1,), dtype=flat.dtype)
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.flip(np.cumprod(np.flip(np.concatenate([flat[..., 1:], ones], axis=-1), -1),
                            axis=-1), -1)
    # (the axes as a tuple of ints: Dask's transpose takes no array of them)
    back = tuple(np.argsort(rest + list(axes)).tolist())
    return np.transpose(np.reshape(left * right, moved.shape), back)


def _matmul_grad(g, a, b, which):
    """The adjoint of operand ``which`` (0: a, 1: b) of ``a @ b``, for 1-D to batched N-D."""
    na, nb = np.ndim(a), np.ndim(b)
    if na == 1 and nb == 1:
        return g * (b if which == 0 else a)
    if na <= 2 and nb <= 2 and na and nb:
        # Vectors and matrices: a new array of the operand's shape, in one product (a k=1
        # product reshaped would hand _fit a view, which it copies).
        if which == 0:
            return np.multiply.outer(g, b) if nb == 1 else \
                b @ g if na == 1 else g @ np.transpose(b)
        return np.multiply.outer(a, g) if na == 1 else \
            g @ a if nb == 1 else np.transpose(a) @ g
    a2 = a[None, :] if np.ndim(a) == 1 else a
    b2 = b[:, None] if np.ndim(b) == 1 else b
    if np.ndim(a) == 1:
        g = np.expand_dims(g, -2)
    if np.ndim(b) == 1:
        g = np.expand_dims(g, -1)
    if which == 0:
        d = g @ np.swapaxes(b2, -1, -2)
        return np.reshape(_unbroadcast(d, a2), np.shape(a))
    d = np.swapaxes(a2, -1, -2) @ g
    return np.reshape(_unbroadcast(d, b2), np.shape(b))


def _dot_grad(g, a, b, which):
    """The adjoint of operand ``which`` of ``np.dot(a, b)``: scalars, 1-D and 2-D as
    matmul; of more axes, a tensordot of a's last axis with b's second-to-last (its only
    one if b is 1-D), as NumPy defines np.dot."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return _unbroadcast(g * (b if which == 0 else a), a if which == 0 else b)
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        axes = ([np.ndim(a) - 1], [max(np.ndim(b) - 2, 0)])
        return _tensordot_grad(g, a, b, axes, which)
    return _matmul_grad(g, a, b, which)


def _inner_grad(g, a, b, which):
    """The adjoint of operand ``which`` of ``np.inner(a, b)`` (sums over the last axes)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return _unbroadcast(g * (b if which == 0 else a), a if which == 0 else b)
    na, nb = np.ndim(a), np.ndim(b)
    if which == 0:
        return np.tensordot(g, b, axes=(list(range(na - 1, na + nb - 2)), list(range(nb - 1))))
    return np.tensordot(g, a, axes=(list(range(na - 1)), list(range(na - 1))))


def _outer_grad(g, a, b, which):
    """The adjoint of operand ``which`` of ``np.outer(a, b)``."""
    d = g @ np.ravel(b) if which == 0 else np.ravel(a) @ g
    shape = np.shape(a if which == 0 else b)
    return d if np.shape(d) == shape else np.reshape(d, shape)  # (not a view: _fit copies)


def _einsum_grad(spec, g, operands, which):
    """The adjoint of operand ``which`` of ``np.einsum(spec, *operands)``; spec None: the
    sublist form, np.einsum(a, [0, 1], b, [1, 2], [0, 2]), whose arguments ``operands``
    are all. Indices only this operand has were summed: the adjoint is spread over them;
    an index repeated within it (a diagonal, 'ii->i') gets the adjoint on that diagonal."""
    if not isinstance(spec, str):  # (a constant first operand read as the spec: the same)
        arguments = operands if spec is None else [spec, *operands]
        which += spec is not None
        spec = _sublist_spec(arguments)
        operands, which = arguments[0:len(arguments) // 2 * 2:2], which // 2
    terms, out = _einsum_labels(spec, operands)
    mine, x = terms[which], operands[which]
    others = terms[:which] + terms[which + 1:]
    there = set(out).union(*others)
    unique = "".join(dict.fromkeys(mine))
    kept = "".join(c for c in unique if c in there)
    d = np.einsum(",".join([out, *others]) + "->" + kept, g,
                  *[v for i, v in enumerate(operands) if i != which])
    sizes = {c: n for c, n in zip(mine, np.shape(x), strict=True)}
    # An axis of 1 that the others broadcast (an ellipsis of ones) sums their adjoints.
    ones = tuple(j for j, c in enumerate(kept) if sizes[c] == 1 and np.shape(d)[j] != 1)
    if ones:
        d = np.sum(d, axis=ones, keepdims=True)
    d = np.reshape(d, [sizes[c] if c in there else 1 for c in unique])
    if unique == mine:
        return np.broadcast_to(d, np.shape(x))
    full = np.zeros(np.shape(x), np.result_type(d, 0.0))
    np.einsum(mine + "->" + unique, full)[...] = d  # (a view of full's diagonal)
    return full


def _einsum_labels(spec, operands):
    """np.einsum's subscripts spelled out: one letter per axis of each operand (an
    ellipsis as letters the spec does not use, aligned on the right as NumPy broadcasts),
    and the output's; without '->', NumPy's: the ellipsis, then the letters used once,
    in alphabetical order."""
    text = spec.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    spare = [c for c in _LETTERS if c not in text]
    widths = [np.ndim(x) - len(t.replace("...", "")) if "..." in t else 0
              for t, x in zip(terms, operands, strict=True)]
    width = max(widths, default=0)
    dots = "".join(spare[:width])
    terms = [t.replace("...", dots[width - n:]) for t, n in zip(terms, widths, strict=True)]
    if not arrow:
        named = inputs.replace("...", "").replace(",", "")
        output = "..." + "".join(sorted(c for c in set(named) if named.count(c) == 1))
    return terms, output.replace("...", dots)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_spec(arguments):
    """The subscripts of np.einsum's sublist form (operand, sublist, ..., [output]) as a
    string: index k is the k-th letter, Ellipsis is '...'."""
    def spelled(sublist):
        return "".join("..." if k is Ellipsis else _LETTERS[k] for k in sublist)
    count = len(arguments) // 2
    spec = ",".join(spelled(arguments[2 * i + 1]) for i in range(count))
    return spec + ("->" + spelled(arguments[-1]) if len(arguments) % 2 else "")


def _transpose_grad(g, axes=None):
    """The adjoint of ``np.transpose(x, axes)``: the inverse permutation."""
    if axes is None:
        return np.transpose(g)
    return np.transpose(g, np.argsort([a % np.ndim(g) for a in axes]))


def _trace_grad(g, a, offset=0, axis1=0, axis2=1):
    """The adjoint of ``np.trace(a, offset, axis1, axis2)``: g on that diagonal."""
    length = np.shape(np.diagonal(a, offset, axis1, axis2))[-1]
    return _diagonal_grad(np.expand_dims(g, -1) * np.ones(length), a, offset, axis1, axis2)


def _norm_grad(g, x, out, ord=None, axis=None, keepdims=False):
    """The adjoint of ``np.linalg.norm(x, ord, axis, keepdims)``, of every order NumPy
    takes: of vectors (along ``axis``, or of a 1-D x) and of matrices (over a pair of
    axes, or of a 2-D x with an order given). Entries where the norm has a kink get the
    subgradient our max rule gives (0 at 0 for orders above 1; ties share equally)."""
    x = _asarray(x)
    if x.dtype.kind not in "fc":
        x = x.astype(np.float64)
    if axis is None:
        axes = tuple(range(x.ndim)) if ord is None or x.ndim != 2 else (0, 1)
    else:
        axes = tuple(a % x.ndim for a in ((axis,) if np.ndim(axis) == 0 else axis))
    # g and out with the reduced axes kept (as ones), to broadcast against x
    kept = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    g, out = np.reshape(g, kept), np.reshape(out, kept)
    if ord is None or ord == "fro" or ord == 2 and len(axes) == 1:
        with np.errstate(invalid="ignore", divide="ignore"):
            share = g / out * x
        return np.where(x == 0, 0.0, share)  # at 0, the subgradient 0 (as JAX)
    if len(axes) == 1:
        return _vector_norm_grad(g, x, out, ord, axes[0])
    return _matrix_norm_grad(g, x, out, ord, axes)


def _vector_norm_grad(g, x, out, p, axis):
    """The adjoint of the vector norm of order ``p`` (0, 1, inf, -inf or any number):
    sign(x) |x|^(p-1) / out^(p-1)."""
    sign = np.sign(x)
    if p == 0:  # the count of entries that are not 0: piecewise constant
        return np.zeros_like(x)
    if p == 1:
        return g * sign
    if p in (np.inf, -np.inf):  # max or min of |x|: ties share, as np.max's rule
        hit = np.abs(x) == out
        return g * sign * hit / np.sum(hit, axis=axis, keepdims=True)
    if p < 1 and np.any(x == 0):
        raise SymdiffError(f"np.linalg.norm(x, ord={p!r}) has no derivative where an entry of "
                           "x is 0 (an order below 1 has an infinite slope there)")
    with np.errstate(invalid="ignore", divide="ignore"):
        share = g * sign * (np.abs(x) / out) ** (p - 1)
    return np.where(x == 0, 0.0, share)


def _matrix_norm_grad(g, x, out, ord, axes):
    """The adjoint of the matrix norm of order ``ord`` over ``axes`` (rows, columns): 1 and
    -1 the largest or smallest column sum of |x|, inf and -inf the row sums (ties share);
    2, -2 the largest or smallest singular value (u v^T of its singular vectors), 'nuc'
    their sum (U V^T), refused where that singular value is repeated or 0."""
    rows, columns = axes
    if ord in (1, -1, np.inf, -np.inf):
        summed, over = (rows, columns) if ord in (1, -1) else (columns, rows)
        sums = np.sum(np.abs(x), axis=summed, keepdims=True)
        hit = sums == out
        return g * hit / np.sum(hit, axis=over, keepdims=True) * np.sign(x)
    u, s, vt = np.linalg.svd(np.moveaxis(x, axes, (-2, -1)), full_matrices=False)
    tol = max(x.shape[rows], x.shape[columns]) * np.finfo(s.dtype).eps * s[..., :1]
    if ord == "nuc":
        if np.any(s[..., -1:] <= tol):
            raise SymdiffError("np.linalg.norm(x, ord='nuc') has no derivative where x does "
                               "not have full rank (a singular value is 0)")
        d = u @ vt
    else:
        k = 0 if ord == 2 else s.shape[-1] - 1
        gap = np.diff(s, axis=-1)[..., :1] if ord == 2 else np.diff(s, axis=-1)[..., -1:]
        if np.any(np.abs(gap) <= tol) or ord == -2 and np.any(s[..., -1:] <= tol):
            which = "largest" if ord == 2 else "smallest"
            raise SymdiffError(f"np.linalg.norm(x, ord={ord!r}) has no derivative where the "
                               f"{which} singular value of x is repeated"
                               + (" or 0" if ord == -2 else ""))
        d = u[..., :, k:k + 1] @ vt[..., k:k + 1, :]
    return g * np.moveaxis(d, (-2, -1), axes)


def _scatter(g, x, index):
    """The adjoint of ``x[index]``: ``g`` placed at ``index`` in zeros; repeats accumulate."""
    if type(x) in (list, tuple):  # l[0] of a list of values, np.gradient's arrays: stacked
        x = np.asarray(x)
    # (float64 arrays, the common case, without np.result_type's microsecond)
    dtype = np.float64 if type(x) is np.ndarray and type(g) is np.ndarray and \
        x.dtype == g.dtype == np.float64 else np.result_type(x, g, np.float64)
    if not isinstance(g, _NUMERIC) and hasattr(g, "__array_function__"):
        return _scatter_into(g, x, index, dtype)
    if type(g) is np.ndarray and g.dtype == dtype and _whole(index) and \
            [n for n in g.shape if n != 1] == [n for n in np.shape(x) if n != 1]:
        # x[:, None, :] is all of x, in order, with axes of 1 inserted: its adjoint is g
        # with those axes taken out (a view; _fit and the in-place helpers copy it as needed)
        return g.reshape(np.shape(x))
    if len(index) == 1 and type(index[0]) is slice and np.ndim(x):
        shape = np.shape(x)
        start, stop, step = index[0].indices(shape[0])
        if step == 1:
            # x[1:], x[:-1]: a run of rows; only the others need zeros (np.zeros would
            # write every entry, and then the run again)
            out = np.empty(shape, dtype=dtype)
            if start:
                out[:start] = 0.0
            out[start:stop] = g
            if stop < shape[0]:
                out[max(start, stop):] = 0.0
            return out
    out = np.zeros_like(x, dtype=dtype)
    if _integer_index(index):
        np.add.at(out, index, g)
    else:
        out[index] = g
    return out


_NUMERIC = (np.ndarray, np.generic, float, int)  # what np.result_type reads as it is


def _scatter_into(g, x, index, dtype):
    """``_scatter`` of an adjoint ``g`` of another array library (Dask): zeros of g's own
    type (np.zeros_like dispatches on g), so that writing g into them keeps it lazy where
    NumPy's zeros would compute it."""
    g = g.astype(dtype) if g.dtype != dtype else g
    if _whole(index):  # x[:, None]: all of x, in order: g with the new axes taken out
        return np.reshape(g, np.shape(x))
    out = np.zeros_like(g, shape=np.shape(x))
    if _integer_index(index):
        try:
            np.add.at(out, index, g)  # (repeated indices add up)
            return out
        except TypeError:  # a library without ufunc.at (Dask): writing g is right where
            arrays = [i for i in index if not isinstance(i, (slice, int, type(None)))]
            if len(arrays) != 1 or np.unique(arrays[0]).size != np.size(arrays[0]):
                raise SymdiffError(  # no index repeats
                    "the gradient of indexing with repeated integer indices is not "
                    f"supported for {type(g).__module__.split('.')[0]} arrays (it adds "
                    "into the repeated entries, which needs np.add.at)") from None
    out[index] = g
    return out


def _own(acc):
    """Whether ``acc`` is an ndarray with writeable data of its own (not a view): one that
    the gradient may write into, where the caller knows nothing else reads it."""
    return type(acc) is np.ndarray and acc.flags.writeable and acc.flags.owndata


def _holds(acc, g):
    """Whether ``acc op= g`` keeps ``acc``'s shape and dtype, in an array of its own."""
    if type(g) is float:  # (a number: NumPy's shape and type machinery takes microseconds)
        return _own(acc) and acc.dtype.kind in "fc"
    return _own(acc) and isinstance(g, _NUMERIC) and (
        np.shape(g) == acc.shape or np.ndim(g) == 0) and np.result_type(acc, g) == acc.dtype


def _add_to(acc, g):
    """``acc + g``, added into ``acc`` itself where it is an array that the gradient made
    for this adjoint alone (the caller knows) and that can hold the sum. ``acc`` None:
    nothing has flowed back to it yet (see ``_plus``)."""
    if type(acc) is np.ndarray and isinstance(g, _NUMERIC):
        flags = acc.flags  # (_own, inlined: this runs on every step of a loop)
        if flags.writeable and flags.owndata:
            try:  # NumPy refuses, before it writes, a sum of another shape or dtype
                return np.add(acc, g, out=acc, casting="safe")
            except (TypeError, ValueError):
                pass
    elif acc is None:
        return _plus(acc, g)
    return acc + g


def _times(g, f):
    """``g * f``, computed in ``g``'s own array where the caller knows g is not read again
    and g is an array of its own that can hold the product."""
    if _holds(g, f):
        g *= f
        return g
    return g * f


def _scatter_add(acc, g, x, index):
    """``acc + _scatter(g, x, index)``, added in place where ``acc`` is an array that the
    gradient made for this adjoint alone (the caller knows) and that can hold the sum."""
    if _own(acc) and acc.shape == np.shape(x) and (
            acc.dtype == np.float64 and (type(g) is float or type(g) is np.ndarray and
                                         g.dtype == np.float64)
            or acc.dtype == np.result_type(acc, g, np.float64)):
        if _integer_index(index):
            np.add.at(acc, index, g)  # repeated indices add up
        else:
            acc[index] += g
        return acc
    return acc + _scatter(g, x, index)


def _whole(index):
    """Whether the basic index ``index`` takes every entry, in order: only full slices,
    ``None`` (a new axis of 1) and ``...``."""
    for i in index:  # (a loop: all() of a generator costs more than the test)
        if not (i is None or i is Ellipsis or type(i) is slice and i == slice(None)):
            return False
    return True


def _integer_index(index):
    for i in index:
        if isinstance(i, (list, tuple, np.ndarray)) and np.asarray(i).dtype != bool:
            return True
    return False


def _part(g, arrays, i, axis, how):
    """The adjoint of ``arrays[i]`` in np.concatenate/stack/hstack/vstack(arrays); ``i``
    None: of ``arrays`` itself, an array whose rows are the arrays joined."""
    if i is None:
        return _rows_grad(arrays, lambda k, rows: _part(g, rows, k, axis, how))
    if how == "stack":
        return np.take(g, i, axis=axis)
    if how == "concatenate" and axis is None:  # np.concatenate(..., axis=None) flattens
        sizes = [np.size(a) for a in arrays]
        start = sum(sizes[:i])
        return np.reshape(np.ravel(g)[start:start + sizes[i]], np.shape(arrays[i]))
    if how == "vstack":
        sizes = [np.shape(np.atleast_2d(a))[0] for a in arrays]
        axis = 0
    elif how == "hstack":
        axis = 0 if np.ndim(np.atleast_1d(arrays[0])) == 1 else 1
        sizes = [np.shape(np.atleast_1d(a))[axis] for a in arrays]
    else:
        sizes = [np.shape(a)[axis] for a in arrays]
    start = sum(sizes[:i])
    part = np.take(g, np.arange(start, start + sizes[i]), axis=axis)
    return np.reshape(part, np.shape(arrays[i]))


def _untile(g, x, reps):
    """The adjoint of ``np.tile(x, reps)``: the sum over the tiles."""
    reps = (reps,) if np.ndim(reps) == 0 else tuple(reps)
    n = max(len(reps), np.ndim(x))
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - np.ndim(x)) + np.shape(x)
    split = [d for r, s in zip(reps, shape, strict=True) for d in (r, s)]
    g = np.sum(np.reshape(g, split), axis=tuple(range(0, 2 * n, 2)))
    return np.reshape(g, np.shape(x))


# --- helpers of the rules added for the edges (issue 10) ---


def _centered(a, axis=None):
    """``a`` minus its mean along ``axis``, then minus the mean of that: the rounding error
    of the first mean removed (entries equal by construction give exact zeros, where one
    subtraction leaves a spread of an ulp that std would divide by)."""
    c = a - np.mean(a, axis, keepdims=True)
    return c - np.mean(c, axis, keepdims=True)


def _var_grad(g, a, out, axis=None, ddof=0, keepdims=False):
    """The adjoint of ``np.var(a, axis, ddof=ddof, keepdims=keepdims)``."""
    return _unreduce(g, a, axis, keepdims) * 2 * _centered(a, axis) / (_count(a, out) - ddof)


def _std_grad(g, a, out, axis=None, ddof=0, keepdims=False):
    """The adjoint of ``np.std(a, ...)``: (a - mean) / ((n - ddof) * std), and 0 where the
    entries are equal (std is 0 there, smooth along equal entries: the subgradient 0, as
    for the norm at 0)."""
    c = _centered(a, axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = _unreduce(g / out, a, axis, keepdims) * c / (_count(a, out) - ddof)
    return np.where(c == 0, 0.0, share)


def _rc_part(g, items, i, how):
    """The adjoint of ``items[i]`` in ``np.r_[items]`` (how 'r') or ``np.c_[items]`` ('c'):
    its slice of ``g`` along the axis they were joined on, in its own shape."""
    axis = 0 if how == "r" else -1
    sizes = [_rc_shape(np.shape(v), how)[axis] for v in items]
    start = sum(sizes[:i])
    part = np.take(g, np.arange(start, start + sizes[i]), axis=axis)
    return np.reshape(part, np.shape(items[i]))


def _rc_shape(shape, how):
    """The shape NumPy gives an item of np.r_ (at least 1-D) or np.c_ (at least 2-D, a
    1-D item as a column) before joining."""
    if how == "r":
        return shape or (1,)
    return {0: (1, 1), 1: shape + (1,)}.get(len(shape), shape)


def _float_kind(dtype=None, like=None):
    """Whether a constructor's entries are floats: its dtype's, else ``like``'s (np.full_like),
    else yes. Integer entries truncate the numbers they are made from: no gradient."""
    if dtype is not None:
        return np.dtype(dtype).kind in "fc"
    return like is None or np.asarray(like).dtype.kind in "fc"


def _fill_grad(g, fill, dtype=None, like=None):
    """The adjoint of ``fill_value`` in np.full / np.full_like: g summed down to its shape."""
    if not _float_kind(dtype, like):
        return _zeros(fill)
    return _unbroadcast(g, fill)


def _arange_grad(g, out, stop, dtype, which):
    """The adjoint of ``start`` (which 0) or ``step`` (2) of np.arange: entry k is
    start + k*step. Called with one argument, np.arange's only argument is the stop."""
    if stop is None or not _float_kind(dtype):
        return 0.0
    if which == 0:
        return np.sum(g)
    return np.sum(g * np.arange(np.size(out)))


def _linspace_grad(g, start, stop, num, endpoint, dtype, axis, which):
    """The adjoint of ``start`` (which 0) or ``stop`` (1) of np.linspace: entry k is
    start*(1 - t_k) + stop*t_k, t_k = k/(num - 1) (k/num without the endpoint)."""
    x = stop if which else start
    if not _float_kind(dtype):
        return _zeros(x)
    t = np.linspace(0.0, 1.0, num, endpoint=endpoint)
    share = np.tensordot(t if which else 1.0 - t, np.moveaxis(np.asarray(g), axis, 0),
                         axes=(0, 0))
    return _unbroadcast(share, x)


def _sign(x):
    """``np.sign`` of a Python float, as a Python float (0.0 at 0 and -0, nan at nan)."""
    return 1.0 if x > 0 else -1.0 if x < 0 else x + 0.0


def _diagonal_grad(g, a, offset=0, axis1=0, axis2=1):
    """The adjoint of ``np.diagonal(a, offset, axis1, axis2)``: zeros of a's shape with g on
    that diagonal (np.diagonal puts it last, after a's other axes in order)."""
    out = np.zeros(np.shape(a), np.result_type(g, 0.0))
    moved = np.moveaxis(out, (axis1, axis2), (-2, -1))  # a view: writes land in out
    k = np.arange(np.shape(g)[-1])
    moved[..., k + max(-offset, 0), k + max(offset, 0)] = g
    return out


def _diag_grad(g, v, k=0):
    """The adjoint of ``np.diag(v, k)``: a vector's is g's k-th diagonal, a matrix's is
    its k-th diagonal g in a matrix of zeros."""
    if np.ndim(v) == 1:
        return np.diagonal(g, k).copy()
    return _diagonal_grad(g, v, k)


def _cross_grad(g, a, b, which, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """The adjoint of ``np.cross(a, b, axisa, axisb, axisc, axis)`` for a (which 0: b x g)
    or b (1: g x a). Vectors of 2 are those of 3 with a zero z component (as NumPy reads
    them); two of them make the number that z component is."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a3, b3 = (_as_vectors_of_3(v, k) for v, k in ((a, axisa), (b, axisb)))
    if np.shape(a)[axisa] == 2 and np.shape(b)[axisb] == 2:
        g3 = np.stack([np.zeros_like(g), np.zeros_like(g), g], axis=-1)
    else:
        g3 = np.moveaxis(g, axisc, -1)
    x, k = (a, axisa) if which == 0 else (b, axisb)
    d = np.cross(b3, g3) if which == 0 else np.cross(g3, a3)
    last = np.moveaxis(np.asarray(x), k, -1)
    d = _unbroadcast(d[..., :last.shape[-1]], last)  # (a vector of 2 drops its z)
    return np.moveaxis(d, -1, k)


def _as_vectors_of_3(v, axis):
    """``v`` with its vectors (along ``axis``) last, of 3 components: a zero z added to
    vectors of 2 (np.cross, run first, refuses other lengths)."""
    v = np.moveaxis(np.asarray(v), axis, -1)
    if v.shape[-1] == 2:
        return np.concatenate([v, np.zeros_like(v[..., :1])], axis=-1)
    return v


def _kron_grad(g, a, b, which):
    """The adjoint of ``np.kron(a, b)`` for a (which 0) or b (1): out[i*q + j] is
    a[i]*b[j] on each axis, so g reshaped to (a0, b0, a1, b1, ...) is contracted with the
    other operand."""
    ndim = max(np.ndim(a), np.ndim(b))
    sa = (1,) * (ndim - np.ndim(a)) + np.shape(a)
    sb = (1,) * (ndim - np.ndim(b)) + np.shape(b)
    pairs = np.reshape(g, [n for both in zip(sa, sb, strict=True) for n in both])
    if which == 0:
        other = np.reshape(b, [n for m in sb for n in (1, m)])
        return np.reshape(np.sum(pairs * other, axis=tuple(range(1, 2 * ndim, 2))),
                          np.shape(a))
    other = np.reshape(a, [n for m in sa for n in (m, 1)])
    return np.reshape(np.sum(pairs * other, axis=tuple(range(0, 2 * ndim, 2))), np.shape(b))


def _tensordot_grad(g, a, b, axes, which):
    """The adjoint of ``np.tensordot(a, b, axes)`` for a (which 0) or b (1): g contracted
    with the other operand over its free axes, then put back in the operand's axis order."""
    na, nb = np.ndim(a), np.ndim(b)
    if isinstance(axes, int):
        summed_a, summed_b = list(range(na - axes, na)), list(range(axes))
    else:
        summed_a, summed_b = ([x] if isinstance(x, int) else list(x) for x in axes)
    summed_a = [x % na for x in summed_a]
    summed_b = [x % nb for x in summed_b]
    free_a = [x for x in range(na) if x not in summed_a]
    free_b = [x for x in range(nb) if x not in summed_b]
    ga = list(range(len(free_a)))  # g's axes: a's free ones, then b's
    gb = list(range(len(free_a), len(free_a) + len(free_b)))
    if which == 0:
        # a's free axes, then the summed ones in the order of b's axes they pair with
        t = np.tensordot(g, b, axes=(gb, free_b))
        order = [summed_a[summed_b.index(x)] for x in sorted(summed_b)]
        return np.transpose(t, np.argsort(free_a + order))
    t = np.tensordot(a, g, axes=(free_a, ga))  # b's summed axes (in a's order), its free ones
    order = [summed_b[summed_a.index(x)] for x in sorted(summed_a)]
    return np.transpose(t, np.argsort(order + free_b))


def _sinc_slope(x):
    """The derivative of np.sinc: (cos(pi x) - sinc(x)) / x, and its limit 0 at x = 0."""
    x = np.asarray(x, dtype=np.result_type(x, np.float64))
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 0.0, (np.cos(np.pi * safe) - np.sinc(safe)) / safe)[()]


def _cumsum_grad(g, a, axis):
    """The adjoint of np.cumsum: entry k gets the sum of g from k on (a reversed cumulative
    sum); with axis None, over the flattened entries, shaped back as ``a``."""
    if axis is None:
        flat = np.ravel(g)
        return np.reshape(np.flip(np.cumsum(np.flip(flat))), np.shape(a))
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


def _diff_grad(g, a, n, axis):
    """The adjoint of np.diff taken ``n`` times: each difference's adjoint is minus the
    difference of g padded with one zero at each end of ``axis``."""
    if np.shape(g)[axis] == 0 and np.shape(a)[axis] <= n:
        return np.zeros(np.shape(a))  # nothing is left of a along axis: no gradient
    for _ in range(n):
        g = -np.diff(g, axis=axis, prepend=0.0, append=0.0)
    return g


def _nanmean_grad(g, a, axis=None, keepdims=False):
    """The adjoint of np.nanmean: g over the count of entries that are not NaN, to those."""
    kept = ~np.isnan(a)
    count = np.maximum(np.sum(kept, axis=axis, keepdims=True), 1).astype(np.float64)
    return np.where(kept, _unreduce(g, a, axis, keepdims) / count, 0.0)


def _cumprod_grad(g, a, axis=None):
    """The adjoint of np.cumprod, exact where entries are zero (no division): entry i gets
    (product of the entries before it) * s_i, where s_i = g_i + a_{i+1} * s_{i+1}."""
    shape = np.shape(a)
    if axis is None:
        a, g, axis = np.ravel(a), np.ravel(g), 0
    a = np.moveaxis(np.asarray(a, dtype=np.result_type(a, np.float64)), axis, 0)
    g = np.moveaxis(np.asarray(g), axis, 0)
    if a.shape[0] == 0:
        return np.zeros(shape)
    before = np.cumprod(np.concatenate([np.ones_like(a[:1]), a[:-1]]), axis=0)
    s = np.empty(np.broadcast_shapes(a.shape, g.shape))
    s[-1] = g[-1]
    for i in range(a.shape[0] - 2, -1, -1):
        s[i] = g[i] + a[i + 1] * s[i + 1]
    return np.reshape(np.moveaxis(before * s, 0, axis), shape)


# --- helpers of the shape rules (issue 13) ---


def _unrollaxis(g, x, axis, start=0):
    """The adjoint of ``np.rollaxis(x, axis, start)``, a moveaxis of ``axis`` to the
    position NumPy works out from ``start`` (one less where the axis was before it)."""
    n = np.ndim(x)
    axis = axis % n
    start = start + n if start < 0 else start
    destination = start - 1 if axis < start else start
    return np.moveaxis(g, destination, axis)


def _unrepeat(g, x, repeats, axis=None):
    """The adjoint of ``np.repeat(x, repeats, axis)``: each entry gets the sum of the
    adjoints of its copies (of the flattened x where axis is None)."""
    shape = np.shape(x)
    if axis is None:
        x = np.ravel(x)
        axis = 0
    axis = axis % max(np.ndim(x), 1)
    counts = np.broadcast_to(repeats, (np.shape(x)[axis] if np.ndim(x) else 1,))
    g = np.asarray(g)
    if g.shape[axis] == 0:
        return np.zeros(shape, g.dtype)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    # a zero after the last copy, so that trailing empty groups start inside g
    pad = [(0, 0)] * g.ndim
    pad[axis] = (0, 1)
    sums = np.add.reduceat(np.pad(g, pad), starts, axis=axis)
    # reduceat gives entry g[start] for an empty group: those copies do not exist
    empty = np.reshape(counts == 0, (-1,) + (1,) * (g.ndim - axis - 1))
    return np.reshape(np.where(empty, 0.0, sums).astype(g.dtype, copy=False), shape)


# --- helpers of the linear algebra rules, one result each (issue 13): np.linalg inv, solve,
# det, pinv, cholesky, matrix_power, multi_dot; scipy.linalg solve_triangular, solve, inv,
# det, cholesky. Each adjoint is the standard one (Giles, "Collected matrix derivative
# results"), on stacks of matrices (the last two axes) as NumPy computes them. ---


def _mT(a):
    """Each matrix of a stack transposed (its last two axes swapped)."""
    return np.swapaxes(a, -1, -2)


def _eye_like(a):
    """The identity of a's matrices' size, in a's float dtype."""
    return np.eye(np.shape(a)[-1], dtype=np.result_type(a, 1.0))


def _inv_grad(g, out):
    """The adjoint of ``inv(a)``, whose value is ``out``: -inv(a).T @ g @ inv(a).T."""
    t = _mT(out)
    return -(t @ g @ t)


# NumPy 1 took b of np.linalg.solve(a, b) as a stack of vectors where it has one axis less
# than a; NumPy 2 (and SciPy) only where it has one axis.
_SOLVE_STACKS_VECTORS = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def _solve_grad(g, a, b, out, which, transposed=False, scipy=False):
    """The adjoint of operand ``which`` (0: a, 1: b) of ``x = solve(a, b)`` (of a.T x = b
    where ``transposed``): b's is solve(a.T, g), a's -(b's) @ x.T. b is a vector where it
    has one axis (NumPy 2's rule and SciPy's), a stack of matrices otherwise; each adjoint
    is summed over the stack axes its operand was broadcast along."""
    vector = np.ndim(b) == 1 or not scipy and _SOLVE_STACKS_VECTORS and \
        np.ndim(b) == np.ndim(a) - 1
    op = _mT(a) if transposed else a
    gb = np.linalg.solve(_mT(op), g[..., None] if vector else g)
    if which == 1:
        return _unbroadcast(gb[..., 0] if vector else gb, b)
    ga = -(gb @ _mT(out[..., None] if vector else out))
    return _unbroadcast(_mT(ga) if transposed else ga, a)


def _det_grad(g, a, out):
    """The adjoint of ``det(a)``: g times the cofactor matrix, det(a) * inv(a).T. A solve
    computes it where a is well conditioned; elsewhere (det is a polynomial, as smooth at a
    singular matrix as anywhere) the SVD a = u s vh gives it exactly: det(u) det(vh) u
    diag(the product of the other singular values) vh."""
    a = np.asarray(a)
    eye = _eye_like(a)
    if a.shape[-1] == 0:
        return np.zeros(a.shape, eye.dtype)
    eps = np.finfo(eye.dtype).eps
    try:
        with np.errstate(all="ignore"):
            inv_t = np.linalg.solve(_mT(a), np.broadcast_to(eye, a.shape))
            size = np.linalg.norm(a, axis=(-2, -1)) * np.linalg.norm(inv_t, axis=(-2, -1))
        # (the cofactors' relative error grows as the condition number times eps)
        solved = size * eps <= 0.01 * np.sqrt(eps)
        cofactors = np.asarray(out)[..., None, None] * inv_t
    except np.linalg.LinAlgError:  # a singular matrix in the stack
        solved = np.zeros(a.shape[:-2], bool)
        cofactors = np.full(a.shape, np.nan, eye.dtype)
    exact = ~solved & np.all(np.isfinite(a), axis=(-2, -1))  # (NaN stays NaN)
    if np.any(exact):
        cofactors = np.array(cofactors)
        cofactors[exact] = _cofactors(a[exact])
    return np.asarray(g)[..., None, None] * cofactors


def _cofactors(a):
    """The cofactor matrices of a stack, det(a) inv(a).T, from the SVD a = u s vh:
    det(u) det(vh) u diag(the product of the other singular values) vh, exact also where
    a is singular."""
    u, s, vh = np.linalg.svd(a)
    ones = np.ones(s.shape[:-1] + (1,), s.dtype)
    before = np.cumprod(np.concatenate([ones, s[..., :-1]], -1), -1)
    after = np.flip(np.cumprod(np.concatenate([ones, np.flip(s, -1)[..., :-1]], -1), -1), -1)
    sign = np.linalg.det(u) * np.linalg.det(vh)
    return sign[..., None, None] * ((u * (before * after)[..., None, :]) @ vh)


def _pinv_grad(g, a, out):
    """The adjoint of ``np.linalg.pinv(a)``, X, where a's rank does not change around it
    (full rank, tall or wide): -X.T g X.T + (I - a X) g.T X X.T + X.T X g.T (I - X a)."""
    x, xt, gt = out, _mT(out), _mT(g)
    grad = -(xt @ g @ xt)
    grad = grad + (gt - a @ (x @ gt)) @ (x @ xt)
    return grad + (xt @ x) @ (gt - (gt @ x) @ a)


def _cholesky_grad(g, out, upper=False):
    """The adjoint of ``np.linalg.cholesky(a)`` (out = L, or L.T where ``upper``), made
    symmetric as JAX's and autograd's (Murray 2016): with Phi the lower triangle of L.T g,
    its diagonal halved, S = L^-T Phi L^-1, and the adjoint is (S + S.T) / 2: right for
    every symmetric change of a (the function reads one triangle of it)."""
    low, g = (_mT(out), _mT(g)) if upper else (out, g)
    phi = np.tril(_mT(low) @ g) / (1.0 + _eye_like(low))
    lt = _mT(low)
    s = np.linalg.solve(lt, _mT(np.linalg.solve(lt, _mT(phi))))
    return (s + _mT(s)) / 2


def _scipy_cholesky_grad(g, out, lower=False):
    """The adjoint of ``scipy.linalg.cholesky(a, lower)``: upper by default, as SciPy's."""
    return _cholesky_grad(g, out, not lower)


def _matrix_power_grad(g, a, n):
    """The adjoint of ``np.linalg.matrix_power(a, n)``: the sum over k < n of
    (a.T)**k g (a.T)**(n-1-k); for n < 0, that of inv(a)**-n, then inv's."""
    if n < 0:
        b = np.linalg.inv(a)
        return _inv_grad(_matrix_power_grad(g, b, -n), b)
    t = _mT(np.asarray(a))
    if n == 0:
        return np.zeros(t.shape, np.result_type(t, g, 1.0))
    powers = [np.broadcast_to(_eye_like(t), t.shape)]
    for _ in range(n - 1):
        powers.append(powers[-1] @ t)
    return sum(powers[k] @ g @ powers[n - 1 - k] for k in range(n))


def _multi_dot_grad(g, arrays, i):
    """The adjoint of the ``i``-th of ``np.linalg.multi_dot(arrays)``: the product of the
    others before it, transposed, g, and that of those after it, transposed (a first vector
    is a row, a last one a column)."""
    mats = [np.asarray(m) for m in arrays]
    if mats[0].ndim == 1:
        mats[0] = mats[0][None, :]
    if mats[-1].ndim == 1:
        mats[-1] = mats[-1][:, None]
    d = np.reshape(g, (mats[0].shape[0], mats[-1].shape[1]))
    if i + 1 < len(mats):
        d = d @ _mT(np.linalg.multi_dot(mats[i + 1:]) if len(mats) - i > 2 else mats[-1])
    if i > 0:
        d = _mT(np.linalg.multi_dot(mats[:i]) if i > 1 else mats[0]) @ d
    return np.reshape(d, np.shape(arrays[i]))


# The part of a each of scipy.linalg.solve's assume_a reads (a name of _STRUCTURED's).
_STRUCTURES = {None: "general", "gen": "general", "general": "general",
               "sym": "symmetric", "symmetric": "symmetric", "her": "symmetric",
               "hermitian": "symmetric", "pos": "symmetric", "positive definite": "symmetric",
               "upper triangular": "upper", "lower triangular": "lower",
               "diagonal": "diagonal", "tridiagonal": "tridiagonal"}


def _structure(assume_a, name):
    """The part of a that ``assume_a`` reads, or a SymdiffError naming those supported."""
    found = _STRUCTURES.get(assume_a) if isinstance(assume_a, (str, type(None))) else None
    if found is None:
        raise SymdiffError(f"symdiff differentiates {name} with assume_a one of "
                           f"{', '.join(repr(k) for k in _STRUCTURES)}, not {assume_a!r}")
    return found


def _band(a, structure, lower):
    """The mask of the entries of a's matrices that ``structure`` reads (all: None)."""
    if structure == "general":
        return None
    n = np.shape(a)[-1]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    return {"symmetric": i >= j if lower else i <= j, "upper": i <= j, "lower": i >= j,
            "diagonal": i == j, "tridiagonal": abs(i - j) <= 1}[structure]


def _read(a, structure, lower):
    """The matrix SciPy solves with: the part of a ``structure`` reads (a symmetric one
    made whole from its triangle)."""
    mask = _band(a, structure, lower)
    if mask is None:
        return a
    part = np.where(mask, a, 0.0)
    if structure == "symmetric":
        return part + _mT(np.where(np.eye(np.shape(a)[-1], dtype=bool), 0.0, part))
    return part


def _keep_read(ga, a, structure, lower):
    """The adjoint ``ga`` of the matrix SciPy solved with, as that of a: on the entries it
    reads; symmetric for a symmetric one (as cholesky's)."""
    if structure == "symmetric":
        return _unbroadcast((ga + _mT(ga)) / 2, a)
    mask = _band(a, structure, lower)
    return _unbroadcast(ga if mask is None else np.where(mask, ga, 0.0), a)


def _scipy_solve_grad(g, a, b, out, lower, assume_a, transposed, which):
    """The adjoint of operand ``which`` of ``scipy.linalg.solve(a, b, lower, ..., assume_a,
    transposed)``: that of the general solve with the part of a SciPy reads."""
    structure = _structure(assume_a, "scipy.linalg.solve")
    m = _read(a, structure, lower)
    if which == 1:
        return _solve_grad(g, m, b, out, 1, transposed, scipy=True)
    return _keep_read(_solve_grad(g, m, b, out, 0, transposed, scipy=True), a, structure,
                      lower)


def _scipy_inv_grad(g, a, out, assume_a=None, lower=False):
    """The adjoint of ``scipy.linalg.inv(a, ..., assume_a=, lower=)``: inv's, on the part of
    a SciPy reads."""
    structure = _structure(assume_a, "scipy.linalg.inv")
    return _keep_read(_inv_grad(g, out), a, structure, lower)


def _solve_triangular_grad(g, a, b, out, trans, lower, unit_diagonal, which):
    """The adjoint of operand ``which`` of ``scipy.linalg.solve_triangular(a, b, trans,
    lower, unit_diagonal)``, which reads a's lower (or upper) triangle, T (with ones on its
    diagonal where ``unit_diagonal``), and solves T x = b, or T.T x = b for trans 1 or 'T':
    the general solve's adjoint, kept to the entries read."""
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise SymdiffError(f"scipy.linalg.solve_triangular: trans={trans!r} is not one of "
                           "0, 1, 2, 'N', 'T', 'C'")
    eye = np.eye(np.shape(a)[-1], dtype=bool)
    mask = np.tril(np.ones(eye.shape, bool)) if lower else np.triu(np.ones(eye.shape, bool))
    if unit_diagonal:
        mask = mask & ~eye
    t = np.where(mask, a, 0.0)
    if unit_diagonal:
        t = t + eye
    transposed = trans not in (0, "N")
    ga = _solve_grad(g, t, b, out, which, transposed, scipy=True)
    return ga if which == 1 else _unbroadcast(np.where(mask, ga, 0.0), a)

# --- helpers of the scipy.stats rules (issue 13): SciPy is imported when first called, by
# gradients of functions that call SciPy themselves ---


def _special():
    import scipy.special

    return scipy.special


def _stats_stdtr(df, z):
    """Student's t cdf with ``df`` degrees of freedom."""
    return _special().stdtr(df, z)


def _stats_log_stdtr(df, z):
    """log of Student's t cdf."""
    with np.errstate(divide="ignore"):
        return np.log(_special().stdtr(df, z))


def _stats_gammainc(a, z):
    """The regularized lower incomplete gamma function P(a, z)."""
    return _special().gammainc(a, z)


def _stats_log_gammainc(a, z):
    """log P(a, z)."""
    with np.errstate(divide="ignore"):
        return np.log(_special().gammainc(a, z))


def _stats_gammaincc(a, z):
    """The regularized upper incomplete gamma function Q(a, z) = 1 - P(a, z)."""
    return _special().gammaincc(a, z)


def _stats_log_gammaincc(a, z):
    """log Q(a, z)."""
    with np.errstate(divide="ignore"):
        return np.log(_special().gammaincc(a, z))


def _stats_betainc(a, b, z):
    """The regularized incomplete beta function I_z(a, b)."""
    return _special().betainc(a, b, z)


def _stats_log_betainc(a, b, z):
    """log I_z(a, b)."""
    with np.errstate(divide="ignore"):
        return np.log(_special().betainc(a, b, z))


def _poisson_grad(g, out, k, mu, loc, method):
    """The adjoint of mu of scipy.stats.poisson.<method>(k, mu, loc): for the pmf, through
    d log pmf / d mu = k / mu - 1 (0 where k is not a count: the pmf is 0 there); for the
    cdf, -pmf(floor(k), mu) (the sf's is its negation), over the value for the logs."""
    sp = _special()
    counts = np.asarray(k, dtype=np.float64) - loc
    mu = np.asarray(mu, dtype=np.result_type(mu, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        if method in ("logpmf", "pmf"):
            valid = (counts == np.floor(counts)) & (counts >= 0)
            slope = np.where(valid, counts / mu - 1, 0.0)
            if method == "pmf":
                slope = slope * out
        else:
            m = np.floor(counts)
            logpmf = np.where(m >= 0, sp.xlogy(m, mu) - mu - sp.gammaln(m + 1), -np.inf)
            slope = np.exp(logpmf - out) if method in ("logcdf", "logsf") else np.exp(logpmf)
            slope = -slope if method in ("cdf", "logcdf") else slope
    return _unbroadcast(np.asarray(g * slope, dtype=mu.dtype)[()], mu)


def _mvn_parts(x, mean, cov):
    """SciPy's reading of multivariate_normal's arguments: the dimension, x as rows of
    points, the mean as a vector and cov as a matrix."""
    if mean is None:
        dim = 1 if np.ndim(cov) < 2 else np.shape(cov)[0]
        m = np.zeros(dim)
    else:
        dim = np.size(mean)
        m = np.reshape(mean, (dim,))
    c = np.asarray(cov, dtype=np.float64)
    c = c * np.eye(dim) if c.ndim == 0 else np.diag(c) if c.ndim == 1 else c
    return dim, np.reshape(x, (-1, dim)), m, c


def _mvn_grad(g, out, x, mean, cov, which, method):
    """The adjoint of x (which 0), mean (1) or cov (2) of multivariate_normal.logpdf (or
    pdf): with a = cov^-1 (x - mean) by a Cholesky solve, -a for x, a for the mean, and
    (a a^T - cov^-1) / 2 for cov (symmetric); each weighted by its point's adjoint."""
    import scipy.linalg

    dim, points, m, c = _mvn_parts(x, mean, cov)
    weights = np.reshape(np.asarray(g, dtype=np.float64) * (out if method == "pdf" else 1.0),
                         (-1,))
    weights = np.broadcast_to(weights, (points.shape[0],))
    factor = scipy.linalg.cho_factor(c, lower=True)
    a = scipy.linalg.cho_solve(factor, (points - m).T).T
    if which == 0:
        return np.reshape(-a * weights[:, None], np.shape(x))
    if which == 1:
        return np.reshape(np.sum(a * weights[:, None], axis=0), np.shape(mean))
    inverse = scipy.linalg.cho_solve(factor, np.eye(dim))
    d = 0.5 * ((a * weights[:, None]).T @ a - np.sum(weights) * inverse)
    return d if np.ndim(cov) == 2 else np.diag(d) if np.ndim(cov) == 1 else np.trace(d)


def _dirichlet_grad(g, out, x, alpha, which, method):
    """The adjoint of x (which 0) or alpha (1) of scipy.stats.dirichlet.logpdf (or pdf),
    whose points are x's columns (the last entry left out is 1 minus the others' sum):
    (alpha - 1) / x for x, log x - psi(alpha) + psi(sum of alpha) for alpha."""
    sp = _special()
    alpha = np.asarray(alpha, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    full = x if x.shape[0] == alpha.shape[0] else np.concatenate(
        [x, 1 - np.sum(x, axis=0, keepdims=True)])
    shape = (-1,) + (1,) * (full.ndim - 1)
    weights = np.asarray(g, dtype=np.float64) * (out if method == "pdf" else 1.0)
    weights = np.broadcast_to(weights, full.shape[1:])
    if which == 0:
        d = np.reshape(alpha - 1, shape) / full * weights
        return d if full is x else d[:-1] - d[-1:]
    d = np.log(full) - np.reshape(sp.digamma(alpha) - sp.digamma(np.sum(alpha)), shape)
    return np.sum(np.reshape(d * weights, (alpha.shape[0], -1)), axis=1)


def _convolve_grad(g, in1, in2, mode, which, how):
    """The adjoint of in1 (which 0) or in2 (1) of scipy.signal.convolve (or correlate,
    a convolution with in2 reversed): g is placed in the full output (each mode's output
    is its centred part), then correlated with the other operand ('valid': the operand's
    own shape)."""
    import scipy.signal

    in1, in2 = np.asarray(in1), np.asarray(in2)
    if how == "correlate":
        in2 = np.flip(in2)
    full = tuple(a + b - 1 for a, b in zip(in1.shape, in2.shape, strict=True))
    g = np.asarray(g, dtype=np.result_type(g, in1, in2, np.float64))
    spread = np.zeros(full, dtype=g.dtype)
    spread[tuple(slice((n - k) // 2, (n - k) // 2 + k) for n, k in zip(
        full, g.shape, strict=True))] = g
    if which == 0:
        return scipy.signal.correlate(spread, in2, mode="valid")
    d = scipy.signal.correlate(spread, in1, mode="valid")
    return np.flip(d) if how == "correlate" else d

# --- helpers of the NumPy rules of issue 13: gradient, take, pad, sort, average, ... ---


def _gradient_grad(g, f, out, spacing=1.0, axis=None, edge_order=1):
    """The adjoint of ``np.gradient(f, spacing, axis=axis, edge_order=edge_order)``: on each
    axis the transpose of its difference stencil (central inside; one-sided of first or
    second order at the ends), over a uniform spacing. Of several axes, np.gradient gives
    one array per axis: ``g`` holds their adjoints in that order."""
    if np.ndim(spacing) != 0:
        raise SymdiffError("np.gradient is differentiated with a uniform spacing (a number), "
                           "not with coordinates (an array)")
    ndim = np.ndim(f)
    axes = tuple(range(ndim)) if axis is None else \
        tuple(a % ndim for a in ((axis,) if np.ndim(axis) == 0 else axis))
    parts = [g] if not isinstance(out, (list, tuple)) else list(g)
    total = np.zeros(np.shape(f), np.result_type(*parts, 0.0))
    for part, a in zip(parts, axes, strict=True):
        total += np.moveaxis(_stencil_transposed(np.moveaxis(np.asarray(part), a, 0),
                                                 spacing, edge_order), 0, a)
    return total


def _stencil_transposed(g, h, edge_order):
    """The transpose of np.gradient's stencil along the first axis, applied to ``g``."""
    d = np.zeros(g.shape, np.result_type(g, 0.0))
    inner = g[1:-1] / (2.0 * h)
    d[2:] += inner
    d[:-2] -= inner
    if edge_order == 1:
        d[1] += g[0] / h
        d[0] -= g[0] / h
        d[-1] += g[-1] / h
        d[-2] -= g[-1] / h
    else:  # (-3 f0 + 4 f1 - f2) / 2h, and its mirror (3 fn - 4 fn-1 + fn-2) / 2h
        for k, c in enumerate((-3.0, 4.0, -1.0)):
            d[k] += c * g[0] / (2.0 * h)
            d[-1 - k] -= c * g[-1] / (2.0 * h)
    return d


def _take_grad(g, a, indices, axis=None, mode="raise"):
    """The adjoint of ``np.take(a, indices, axis, mode=mode)``: g added at the entries
    taken (repeats accumulate); 'wrap' and 'clip' indices as NumPy maps them."""
    n = _entries(a) if axis is None else np.shape(a)[axis]
    indices = np.asarray(indices).astype(np.intp, copy=False)  # ([] is a float array)
    if mode == "wrap":
        indices = indices % n
    elif mode == "clip":
        indices = np.clip(indices, 0, n - 1)
    if axis is None:
        return np.reshape(_scatter(g, np.ravel(a), (indices,)), np.shape(a))
    axis = axis % np.ndim(a)
    return _scatter(g, a, (slice(None),) * axis + (indices,))


def _take_along_axis_grad(g, arr, indices, axis=-1):
    """The adjoint of ``np.take_along_axis(arr, indices, axis)``: g added at the entries
    taken (repeats accumulate); axis None reads arr flattened."""
    if axis is None:
        return np.reshape(_scatter(g, np.ravel(arr), (np.asarray(indices),)), np.shape(arr))
    return _scatter(g, arr, _along_axis(np.shape(arr), indices, axis))


def _along_axis(shape, indices, axis):
    """The index tuple that np.take_along_axis reads ``indices`` as: along ``axis``, the
    indices; along the others, every position (broadcast against the indices)."""
    ndim = len(shape)
    axis = axis % ndim
    index = []
    for d in range(ndim):
        if d == axis:
            index.append(np.asarray(indices))
        else:
            index.append(np.reshape(np.arange(shape[d]), [-1 if k == d else 1
                                                          for k in range(ndim)]))
    return tuple(index)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def _pad_grad(g, array, pad_width, mode="constant"):
    """The adjoint of ``np.pad(array, pad_width, mode)``: every entry of the padded array
    is a copy of one entry of ``array`` (or a constant), so each entry's adjoint is the sum
    of g over its copies. Which entry each is, np.pad itself says: of the entries' numbers."""
    if mode not in _PAD_MODES:
        raise SymdiffError(f"np.pad with mode={mode!r} is not supported; the modes "
                           "differentiated are " + ", ".join(map(repr, _PAD_MODES)))
    foreign = not isinstance(g, _NUMERIC) and hasattr(g, "__array_function__")
    if foreign and mode == "constant":
        # Of another library's adjoint (Dask): the padding cut off, a slice of g itself
        # (np.bincount below would mix NumPy's numbers with its weights).
        widths = np.broadcast_to(pad_width, (np.ndim(array), 2))
        return g[tuple(slice(int(b), int(b) + n) for (b, _), n in zip(widths, np.shape(array),
                                                                       strict=True))]
    size = _entries(array)
    numbers = np.reshape(np.arange(size), np.shape(array))
    if mode == "constant":
        where = np.pad(numbers, pad_width, constant_values=-1)
    else:
        where = np.pad(numbers, pad_width, mode=mode)
    where, g = np.ravel(where), np.ravel(g)
    copy = where >= 0
    try:
        sums = np.bincount(where[copy], weights=g[copy], minlength=size)
    except (AttributeError, TypeError, ValueError):
        if not foreign:
            raise
        raise SymdiffError(f"the gradient of np.pad with mode={mode!r} is not supported for "
                           f"{type(g).__module__.split('.')[0]} arrays; mode='constant' "
                           "is") from None
    return np.reshape(sums.astype(np.result_type(g, 0.0), copy=False), np.shape(array))


def _sort_grad(g, a, axis=-1):
    """The adjoint of ``np.sort(a, axis)``: g sent back through the permutation that sorts
    a (NumPy's stable sort's: tied entries keep their order); axis None: a flattened."""
    if axis is None:
        order = np.argsort(np.ravel(a), kind="stable")
        d = np.zeros(np.size(a), np.result_type(g, 0.0))
        d[order] = g
        return np.reshape(d, np.shape(a))
    order = np.argsort(a, axis=axis, kind="stable")
    d = np.zeros(np.shape(a), np.result_type(g, 0.0))
    np.put_along_axis(d, order, g, axis=axis)
    return d


def _partition_grad(g, a, out, kth, axis=-1):
    """The adjoint of ``np.partition(a, kth, axis)``: g sent back through the permutation
    np.argpartition gives (the same selection as np.partition's), checked against out."""
    flat = axis is None
    if flat:
        a, axis = np.ravel(a), 0
    order = np.argpartition(a, kth, axis=axis)
    if not np.array_equal(np.take_along_axis(np.asarray(a), order, axis), out):
        raise SymdiffError("np.partition put its entries in an order np.argpartition does "
                           "not reproduce; use np.sort")
    d = np.zeros(np.shape(a), np.result_type(g, 0.0))
    np.put_along_axis(d, order, g, axis=axis)
    return d


def _average_grad(g, a, out, axis, weights, keepdims, which):
    """The adjoint of ``np.average(a, axis, weights, keepdims=keepdims)`` for a (which 0)
    or the weights (1): out = sum(w a) / sum(w); weights of one axis are laid along
    ``axis``."""
    a = _asarray(a)
    if weights is None:
        w = np.ones(a.shape)
    elif np.shape(weights) == a.shape:
        w = _asarray(weights)
    else:
        w = np.reshape(weights, [-1 if d == axis % a.ndim else 1 for d in range(a.ndim)])
    w = np.broadcast_to(w, a.shape)
    total = np.sum(w, axis=axis, keepdims=True)
    gk = _unreduce(g, a, axis, keepdims)
    if which == 0:
        return gk * w / total
    d = gk * (a - _unreduce(out, a, axis, keepdims)) / total
    if np.shape(weights) == a.shape:
        return d
    return np.reshape(np.sum(d, axis=tuple(k for k in range(a.ndim) if k != axis % a.ndim)),
                      np.shape(weights))


def _joined_part(g, arrays, i, how):
    """The adjoint of ``arrays[i]`` in np.column_stack(arrays) (how 'column': 1-D items as
    columns, joined on axis 1) or np.dstack(arrays) ('depth': at least 3-D, on axis 2);
    ``i`` None: of ``arrays`` itself, an array whose rows are the arrays joined."""
    if i is None:
        return _rows_grad(arrays, lambda k, rows: _joined_part(g, rows, k, how))

    def joined(v):
        if how == "column":
            return np.reshape(v, (-1, 1)) if np.ndim(v) < 2 else v
        return np.atleast_3d(v)
    axis = 1 if how == "column" else 2
    sizes = [np.shape(joined(np.asarray(v)))[axis] for v in arrays]
    start = sum(sizes[:i])
    part = np.take(g, np.arange(start, start + sizes[i]), axis=axis)
    return np.reshape(part, np.shape(arrays[i]))


def _append_grad(g, arr, values, axis, which):
    """The adjoint of ``arr`` (which 0) or ``values`` (1) in np.append(arr, values, axis):
    its part of g; with axis None both were flattened."""
    x = arr if which == 0 else values
    if axis is None:
        n = np.size(arr)
        part = np.ravel(g)[:n] if which == 0 else np.ravel(g)[n:]
        return np.reshape(part, np.shape(x))
    n = np.shape(arr)[axis]
    m = np.shape(g)[axis]
    taken = np.arange(n) if which == 0 else np.arange(n, m)
    return np.reshape(np.take(g, taken, axis=axis), np.shape(x))


def _select_grad(g, condlist, choices, i, default=None):
    """The adjoint of ``choices[i]`` in np.select(condlist, choices, default) (i None: of
    the default): g where it was chosen (its condition the first that holds), else 0."""
    taken = np.zeros(np.shape(g), bool)
    for k, condition in enumerate(condlist):
        if k == i:
            return _unbroadcast(np.where(condition & ~taken, g, 0.0), choices[i])
        taken = taken | condition
    return _unbroadcast(np.where(taken, 0.0, g), default)


def _pad_constant_grad(g, array, pad_width, constant_values):
    """The adjoint of np.pad's ``constant_values`` (a number, or per axis and side as NumPy
    reads them): the sum of g over the entries each value fills (later axes fill the
    corners)."""
    ndim = np.ndim(array)
    zeros = np.zeros(np.shape(array))
    d = np.zeros((ndim, 2))
    for axis in range(ndim):
        for side in range(2):
            one = np.zeros((ndim, 2))
            one[axis, side] = 1.0
            d[axis, side] = np.sum(g * np.pad(zeros, pad_width, constant_values=one))
    return _unbroadcast(d, constant_values)


def _replaced_grad(g, x, which, value):
    """The adjoint of np.nan_to_num's ``nan``, ``posinf`` or ``neginf`` (``which``): the
    sum of g over the entries of x it replaced."""
    x = np.asarray(x)
    test = {"nan": np.isnan, "posinf": np.isposinf, "neginf": np.isneginf}[which]
    return _unbroadcast(np.where(test(x), g, 0.0), value)


def _gradient_spacing_grad(g, out, spacing):
    """The adjoint of np.gradient's spacing h: every difference is divided by h, so the
    slope of each entry in h is -entry / h."""
    parts = (g, out) if not isinstance(out, (list, tuple)) else (list(g), list(out))
    return -np.sum(np.multiply(*parts)) / spacing

# --- Functions returning several values: np.linalg.slogdet, eigh, svd, qr, lstsq, np.split ---
#
# The decomposition runs once in the forward sweep (``factors``, its whole result); each
# output used has an adjoint of its own, and the operand's adjoint is their sum (the joint
# vector-Jacobian product is linear in the outputs' adjoints).


def _mT(a):
    """The last two axes swapped: the transpose of each matrix of a stack."""
    return np.swapaxes(a, -1, -2)


def _slogdet_grad(g, a):
    """The adjoint of log|det a|: g * inv(a).T, as the solve of a.T X = g I."""
    a = np.asarray(a)
    g = np.asarray(g)[..., None, None]
    eye = np.eye(a.shape[-1], dtype=np.result_type(a.dtype, g.dtype, np.float32))
    return np.linalg.solve(_mT(a), g * eye)


def _distinct(values, what, noun, hint):
    """Refuse where two of ``values`` (sorted along the last axis) are equal to within
    sqrt(eps) of the largest: the vectors that go with them are not unique there, and
    their adjoint divides by the gap."""
    values = np.asarray(values)
    if values.shape[-1] < 2:
        return
    eps = np.finfo(values.dtype if values.dtype.kind == "f" else np.float64).eps
    scale = np.max(np.abs(values), axis=-1, keepdims=True)
    gaps = np.abs(np.diff(values, axis=-1))
    if np.any(gaps <= np.sqrt(eps) * scale):
        error = SymdiffError(f"{what} have no gradient here: two {noun} are equal "
                             f"(closer than {np.sqrt(eps):.1e} times the largest), so the "
                             "vectors that go with them are not unique")
        error.hint = hint
        raise error


def _symmetric_part(m, uplo):
    """The adjoint of a symmetric matrix read from one triangle (np.linalg.eigh reads the
    lower one, UPLO='L', or the upper one): the diagonal of ``m``, and m + m.T on the
    triangle read, 0 on the other (which the function never reads)."""
    both = m + _mT(m)
    n = m.shape[-1]
    read = np.tril(np.ones((n, n), bool), -1) if uplo in ("L", "l") else \
        np.triu(np.ones((n, n), bool), 1)
    return np.where(read, both, 0.0) + m * np.eye(n, dtype=bool)


def _eigh_grad(g, factors, uplo, part):
    """The adjoint of a, from output ``part`` of ``np.linalg.eigh(a)`` (0: the eigenvalues
    w, 1: the eigenvectors v): v (diag(g) + F * (v.T g)) v.T, F[i, j] = 1 / (w[j] - w[i])
    off the diagonal, read back into the triangle eigh reads."""
    w, v = factors
    g = np.asarray(g)
    if part == 0:
        inner = g[..., None, :] * v
    else:
        _distinct(w, "np.linalg.eigh's eigenvectors", "eigenvalues", "a function of the "
                  "eigenvalues alone (np.linalg.eigvalsh), or a point whose eigenvalues are "
                  "distinct")
        gap = w[..., None, :] - w[..., :, None]
        n = w.shape[-1]
        f = np.where(np.eye(n, dtype=bool), 0.0, 1.0 / np.where(np.eye(n, dtype=bool), 1.0,
                                                              gap))
        inner = v @ (f * (_mT(v) @ g))
    return _symmetric_part(inner @ _mT(v), uplo)


def _eigvalsh_grad(g, a, uplo):
    """The adjoint of ``np.linalg.eigvalsh(a)``: v diag(g) v.T, read back into the
    triangle it reads."""
    return _eigh_grad(g, np.linalg.eigh(a, uplo), uplo, 0)


def _svd_grad(g, factors, part):
    """The adjoint of a from output ``part`` of ``np.linalg.svd(a)`` (0: u, 1: s, 2: vh),
    as in Townsend's "Differentiating the singular value decomposition": with
    F[i, j] = 1 / (s[j]**2 - s[i]**2) off the diagonal,
    u ((F * (u.T gu - gu.T u)) s + diag(gs) + s (F * (v.T gv - gv.T v))) v.T
    + (I - u u.T) gu / s v.T + u / s gv.T (I - v v.T)."""
    u, s, vh = factors
    m, n = u.shape[-2], vh.shape[-1]
    k = s.shape[-1]
    g = np.asarray(g)
    if part == 0 and u.shape[-1] != k or part == 2 and vh.shape[-2] != k:
        which = "u" if part == 0 else "vh"
        error = SymdiffError(f"np.linalg.svd with full_matrices=True of a matrix that is not "
                             f"square: the columns of {which} past the first min(m, n) "
                             "have no gradient")
        error.hint = "np.linalg.svd(a, full_matrices=False)"
        raise error
    u, vh = u[..., :, :k], vh[..., :k, :]
    v = _mT(vh)
    if part == 1:
        return (u * g[..., None, :]) @ vh
    _distinct(s[..., ::-1], "np.linalg.svd's singular vectors", "singular values",
              "the singular values "
              "alone (np.linalg.svd(a, compute_uv=False)), or a point whose singular values "
              "are distinct and not zero")
    if m != n and np.any(s <= np.sqrt(np.finfo(s.dtype).eps) * np.max(s, -1, keepdims=True)):
        # (the columns of u or v past the first k are then not unique either)
        error = SymdiffError("np.linalg.svd's singular vectors of a matrix that is not "
                             "square have no gradient here: a singular value is 0")
        error.hint = "a point whose singular values are distinct and not zero"
        raise error
    s2 = s**2
    eye = np.eye(k, dtype=bool)
    f = np.where(eye, 0.0, 1.0 / np.where(eye, 1.0, s2[..., None, :] - s2[..., :, None]))
    if part == 0:
        j = _mT(u) @ g
        inner = (f * (j - _mT(j))) * s[..., None, :]
        rest = (g - u @ j) / s[..., None, :] @ vh if m > k else 0.0
    else:
        gv = _mT(g)
        j = vh @ gv
        inner = s[..., :, None] * (f * (j - _mT(j)))
        rest = (u / s[..., None, :]) @ _mT(gv - v @ j) if n > k else 0.0
    return u @ inner @ vh + rest


def _svdvals_grad(g, a):
    """The adjoint of ``np.linalg.svd(a, compute_uv=False)``: u diag(g) vh."""
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    return (u * np.asarray(g)[..., None, :]) @ vh


def _qr_grad(g, factors, part):
    """The adjoint of a (m >= n) from output ``part`` of ``np.linalg.qr(a)`` (0: q, 1: r):
    with M = r gr.T - gq.T q, (gq + q copyltu(M)) r^-T, copyltu(M) the lower triangle of M
    mirrored onto the upper (Seeger et al., "Auto-differentiating linear algebra")."""
    q, r = factors
    m, n = q.shape[-2], r.shape[-1]
    if q.shape[-1] != n or m < n:
        error = SymdiffError(f"np.linalg.qr is differentiated for a matrix with at least as "
                             f"many rows as columns, in the reduced mode (here q is "
                             f"{q.shape[-2]}x{q.shape[-1]} and r {r.shape[-2]}x{n})")
        error.hint = "np.linalg.qr(a) of a tall or square a"
        raise error
    g = np.asarray(g)
    gq, m_ = (g, -(_mT(g) @ q)) if part == 0 else (0.0, r @ _mT(g))
    low = np.tril(m_)
    mirrored = low + _mT(np.tril(m_, -1))
    b = gq + q @ mirrored
    return _mT(np.linalg.solve(r, _mT(b)))


def _lstsq_grad(g, a, b, factors, which):
    """The adjoint of a (which 0) or b (1) from x of ``np.linalg.lstsq(a, b)``, a of full
    column rank: with z = (a.T a)^-1 gx (two triangular solves with a's r), b gets a z
    and a gets (b - a x) z.T - (a z) x.T."""
    x, rank = factors[0], factors[2]
    a = np.asarray(a, dtype=np.result_type(a, np.float32))
    m, n = a.shape
    if rank < n:
        error = SymdiffError(f"np.linalg.lstsq's solution is differentiated where a has "
                             f"full column rank (here rank {rank} of {n} columns)")
        error.hint = "a with independent columns (and at least as many rows)"
        raise error
    g = np.asarray(g)
    r = np.linalg.qr(a, mode="r")
    gm = g.reshape(n, -1)
    z = np.linalg.solve(r, np.linalg.solve(_mT(r), gm))
    db = a @ z
    if which == 1:
        return db.reshape(np.shape(b))
    residual = np.asarray(b).reshape(m, -1) - a @ x.reshape(n, -1)
    return residual @ _mT(z) - db @ _mT(x.reshape(n, -1))


def _no_gradient(g, name, output, hint):
    """The adjoint of an output that symdiff does not differentiate: refused."""
    error = SymdiffError(f"{name}'s {output} is not differentiated")
    error.hint = hint
    raise error


def _split_grad(g, ary, factors, part, axis):
    """The adjoint of ``ary`` from part ``part`` of np.split(ary, ..., axis) (and
    array_split, hsplit 'h', vsplit 'v', dsplit 'd'): g in its place, zeros elsewhere."""
    ndim = np.ndim(ary)
    axis = {"h": 1 if ndim > 1 else 0, "v": 0, "d": 2}.get(axis, axis)
    g = np.asarray(g)
    dtype = np.result_type(g.dtype, np.float32) if g.dtype.kind != "f" else g.dtype
    pieces = [g.astype(dtype, copy=False) if j == part else np.zeros(np.shape(p), dtype)
              for j, p in enumerate(factors)]
    return np.concatenate(pieces, axis)


def _cho_factor_grad(g, factors):
    """The adjoint of a from the c of ``scipy.linalg.cho_factor(a, lower)``: with L the
    factor (a = L L.T), L^-T tril'(L.T gL) L^-1 (tril' halves the diagonal; Murray,
    "Differentiation of the Cholesky decomposition"), read back into the triangle read."""
    c, lower = factors
    g = np.asarray(g)
    tri = np.tril if lower else np.triu
    if np.any(g != tri(g)):
        error = SymdiffError("scipy.linalg.cho_factor's c has no gradient outside the "
                             f"{'lower' if lower else 'upper'} triangle, which holds the "
                             "factor: its other entries are not defined")
        error.hint = "the factor's triangle (np.tril(c) for lower=True, else np.triu(c))"
        raise error
    factor, gf = (tri(c), tri(g)) if lower else (tri(c).T, tri(g).T)
    p = factor.T @ gf
    p = np.tril(p) - 0.5 * np.diag(np.diagonal(p))
    m = np.linalg.solve(factor.T, _mT(np.linalg.solve(factor.T, p)))  # (L^-T p L^-1).T
    return _symmetric_part(_mT(m), "L" if lower else "U")


def _cho_solve_grad(g, c, lower, b, x, which):
    """The adjoint of c (which 0: its factor's triangle) or b (1) from
    ``x = scipy.linalg.cho_solve((c, lower), b)``: b gets gb = (L L.T)^-1 g;
    the factor L (a = L L.T) gets -(gb x.T + x gb.T) L, in its triangle."""
    factor = np.tril(c) if lower else np.triu(c).T
    gb = np.linalg.solve(factor.T, np.linalg.solve(factor, g))
    if which == 1:
        return gb
    n = np.shape(c)[-1]
    ga = -(np.reshape(gb, (n, -1)) @ np.reshape(x, (n, -1)).T)
    gl = np.tril((ga + ga.T) @ factor)
    return gl if lower else gl.T

# --- lists the function builds: append, and what reads a whole list (issue 13) ---


def _appended(items, item):
    """``items`` with ``item`` appended, as a new list: the function's ``l.append(item)``
    (each step of a loop keeps its own list, for the backward sweep)."""
    return [*items, item]


def _list_stacked(parts):
    """The adjoints of a list's items as one array (a list's adjoint): stacked where the
    items have one shape; else an array of objects, one adjoint an entry (it adds
    entrywise too)."""
    try:
        return np.stack(parts)
    except ValueError:
        out = np.empty(len(parts), dtype=object)
        for i, part in enumerate(parts):
            out[i] = part
        return out


def _list_rest(g):
    """The adjoint of the list before an append: ``g`` but its last item's, in the form
    ``_list_stacked`` gives (stacked again if the items left have one shape)."""
    return g[:-1] if g.dtype != object else _list_stacked(list(g[:-1]))


def _list_sum_grad(g, items):
    """The adjoint of ``sum(items)`` (a list): ``g`` summed down to each item's shape."""
    if not len(items):
        return np.zeros((0,))
    return _list_stacked([_unbroadcast(g, x) for x in items])


def _list_stack_grad(g, items, axis=0):
    """The adjoint of ``np.stack(items, axis)`` (a list): the stacked axis first."""
    return np.moveaxis(g, axis, 0)


def _list_concatenate_grad(g, items, axis=0):
    """The adjoint of ``np.concatenate(items, axis)`` (a list): ``g`` cut back into the
    items, stacked."""
    if axis is None:  # the items flattened
        g, sizes, axis = np.ravel(g), [np.size(x) for x in items], 0
    else:
        sizes = [np.shape(x)[axis] for x in items]
    parts = np.split(g, np.cumsum(sizes)[:-1], axis=axis)
    return _list_stacked([np.reshape(p, np.shape(x)) for p, x in zip(parts, items, strict=True)])


def _list_array_grad(g, items):
    """The adjoint of ``np.array(items)`` (a list): ``g`` itself, in the list's shape."""
    return np.reshape(g, np.shape(items))


def _list_index_grad(g, items, index):
    """The adjoint of ``items[index]`` (a list): ``g`` placed at ``index`` in zeros of the
    list's shape."""
    try:
        shape = np.shape(items)
    except ValueError:  # items of several shapes: ``index`` picks one of them
        parts = [np.zeros(np.shape(x)) for x in items]
        if type(index[0]) is slice:
            for i, part in zip(range(len(items))[index[0]], g, strict=True):
                parts[i] = parts[i] + part
        else:
            parts[index[0]] = parts[index[0]] + g
        return _list_stacked(parts)
    return _scatter(g, np.zeros(shape), index)

# --- helpers of the scipy.special rules (issue 13); SciPy is imported where one is called ---


def _rgamma_slope(x):
    """d/dx 1/gamma(x) = -digamma(x)/gamma(x); at x = -n (n = 0, 1, 2, ...), where that
    is 0*inf, its limit (-1)**n * n!."""
    from scipy import special

    x = np.asarray(x, dtype=np.result_type(x, 1.0))
    pole = (x <= 0) & (x == np.floor(x))
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = -special.rgamma(x) * special.digamma(x)
        limit = np.where(np.floor(-x) % 2 == 0, 1.0, -1.0) * special.gamma(1 - x)
    return np.where(pole, limit, slope)[()]


def _multigammaln_slope(a, d):
    """d/da multigammaln(a, d) = sum over j < d of digamma(a - j/2)."""
    from scipy import special

    return sum(special.digamma(a - j / 2) for j in range(int(d)))


def _logsumexp_grad(g, a, b, out, axis, keepdims, which, factors=None):
    """The adjoint of ``a`` (which 0) or of the weights ``b`` (which 1) of
    scipy.special.logsumexp(a, axis, b, keepdims): g*b*exp(a - out) and g*exp(a - out),
    over the shape a and b broadcast to (the one the reduction runs over), summed back to
    the operand's. With return_sign=True (``factors`` the values and their signs), out is
    log|sum(b*exp(a))|, whose slope carries the sign."""
    if factors is not None:
        g = g * factors[1]
    shape = np.shape(a) if b is None else np.broadcast_shapes(np.shape(a), np.shape(b))
    full = np.broadcast_to(a, shape)
    share = _unreduce(g, full, axis, keepdims) * np.exp(a - _unreduce(out, full, axis,
                                                                      keepdims))
    if which == 0:
        return _unbroadcast(share if b is None else share * b, a)
    return _unbroadcast(share, b)


def _softmax_grad(g, out, axis=None):
    """The adjoint of ``x`` in ``out = scipy.special.softmax(x, axis)``: out*(g - sum(g*out))."""
    return out * (g - np.sum(g * out, axis=axis, keepdims=True))


def _log_softmax_grad(g, out, axis=None):
    """The adjoint of ``x`` in ``out = scipy.special.log_softmax(x, axis)``:
    g - exp(out)*sum(g)."""
    return g - np.exp(out) * np.sum(g, axis=axis, keepdims=True)

# --- in-place writes into arrays the function made (statements ``out[index] = v``) ---


def _written(a, index, v):
    """``a`` after ``a[index] = v``, as a new array: ``a`` itself is left as it was, so
    that the backward sweep may still read it (and an earlier version of it)."""
    out = np.array(a)
    out[index] = v
    return out


def _unwritten(g, a, index):
    """The adjoint of ``a`` in ``a[index] = v``: ``g`` with the slots the write replaced
    zeroed (their old values were lost), in an array of its own."""
    dtype = g.dtype if isinstance(g, np.ndarray) and g.dtype.kind == "f" else np.float64
    out = np.array(np.broadcast_to(g, np.shape(a)), dtype=dtype)
    out[index] = 0.0
    return out


def _written_grad(g, a, index, v):
    """The adjoint of ``v`` in ``a[index] = v``: ``g`` at the slots, where a repeated
    integer index gives it to the last write alone (the one NumPy keeps), summed down to
    ``v``'s shape where NumPy broadcast ``v`` into the slots. Nothing flows through a write
    of fractions into an array of integers, which truncates them."""
    if np.asarray(a).dtype.kind in "iub" and np.asarray(v).dtype.kind in "fc":
        return np.zeros(np.shape(v))
    g = np.broadcast_to(g, np.shape(a))
    slot = np.array(g[index])
    if _integer_index(index):
        ids = np.arange(slot.size).reshape(slot.shape)
        last = np.full(np.shape(a), -1, dtype=np.intp)
        last[index] = ids
        slot[last[index] != ids] = 0.0
    lead = np.ndim(v) - slot.ndim
    if lead > 0:  # v of shape (1, n) written into a slot of shape (n,)
        slot = slot.reshape((1,) * lead + slot.shape)
    return _unbroadcast(slot, v)


def _missed_write(value, old, index, message, hint):
    """Refuse a value read by index before ``old[index] = ...`` and used after it, where it
    is a view of ``old`` that the write reached: NumPy changed it too, where the generated
    code keeps each version of the array apart. The error is placed by the gradient's
    caller, which reads ``hint`` off it."""
    if not isinstance(value, np.ndarray) or not isinstance(old, np.ndarray) or \
            not np.may_share_memory(value, old):
        return
    marks = np.zeros_like(old)
    marks[index] = 1
    start = value.__array_interface__["data"][0] - old.__array_interface__["data"][0]
    try:
        if marks.strides != old.strides or value.dtype != old.dtype:
            raise ValueError("another layout")
        seen = np.ndarray(value.shape, value.dtype, buffer=marks, offset=start,
                          strides=value.strides)
        reached = bool(np.any(seen))
    except (ValueError, TypeError):
        reached = True  # (not a plain view of old: assume the write reached it)
    if reached:
        error = SymdiffError(message)
        error.hint = hint
        raise error

# --- helpers of building arrays from values (issue 13) ---


def _entry_grad(g, i, dtype=None):
    """The adjoint of the entry at index ``i`` of np.array(...) / a list read as an array
    (``i`` None: of the whole value, as np.asarray(x) or x.astype(dtype) reads it): g's part
    there; zero for an integer or boolean dtype, which truncates the entries."""
    part = g if i is None else np.asarray(g)[i]
    if not _float_kind(dtype):
        return _zeros(part)
    return part


def _sum_rows_grad(g, x):
    """The adjoint of ``x`` in the builtin ``sum(x, start)``: start + x[0] + x[1] + ...,
    so each row gets g summed down to its shape (g may be larger: start broadcast it)."""
    shape = np.shape(x)
    if not shape[0]:
        return np.zeros(shape)
    return np.zeros(shape) + _unbroadcast(g, np.zeros(shape[1:]))


def _append_part(g, arr, values, axis, which):
    """The adjoint of ``arr`` (which 0) or ``values`` (1) in ``np.append(arr, values,
    axis)``: its part of g (of g flattened where axis is None), in its own shape."""
    if axis is None:
        n = np.size(arr)
        flat = np.ravel(g)
        return np.reshape(flat[n:] if which else flat[:n], np.shape(values if which else arr))
    n = np.shape(arr)[axis]
    index = np.arange(n, np.shape(g)[axis]) if which else np.arange(n)
    return np.reshape(np.take(g, index, axis=axis), np.shape(values if which else arr))


def _as_read(items):
    """A list or tuple of numbers and arrays written out where NumPy reads an array (``v =
    [x[0], 2.0 * x[1]]``): the array NumPy reads it as, or the list itself where its items
    have several shapes (which only indexing and loops can read)."""
    try:
        return np.asarray(items)
    except ValueError:
        return items


def _rows_grad(a, part):
    """The adjoint of an array ``a`` given whole where a join takes a list of arrays
    (np.vstack(A)): each row's part (``part(k, rows)``), stacked back into a's shape."""
    rows = list(a)
    if not rows:
        return np.zeros(np.shape(a))
    return np.reshape(np.stack([part(k, rows) for k in range(len(rows))]), np.shape(a))


# --- gradients called inside a function being differentiated (operations._gradient_call) ---


def _gradient_vjp(gradient, args, g, k):
    """The vector-Jacobian product, in argument ``k``, of the gradient ``grad(f, wrt=w)``
    called on ``args``: d<grad_w f(args), g>/d args[k], which is the Hessian's block (k, w)
    times g. It is the gradient in args[k] of f's tangent program along w, with g as the
    tangent (reverse over forward mode; second partials read as symmetric)."""
    from . import higher

    w = higher._names(gradient.fun, gradient.wrt)
    tf = higher.tangent_function(gradient.fun, w, returns="tangent")
    return higher._gradient_of(tf, (k,))(*args, g)[0]


def _gradient_jvp(gradient, args, t, k):
    """The tangent of ``grad(f, wrt=w)(args)`` along ``t`` in argument ``k``: the gradient
    in w of f's tangent program along args[k]."""
    from . import higher

    w = higher._names(gradient.fun, gradient.wrt)
    name = gradient.fun.__code__.co_varnames[k]
    tf = higher.tangent_function(gradient.fun, (name,), returns="tangent")
    return higher._gradient_of(tf, (gradient.fun.__code__.co_varnames.index(w[0]),))(
        *args, t)[0]
