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
    if like is not None:
        full = np.broadcast_shapes(*map(np.shape, like))
        if np.shape(g) != full:
            g = np.broadcast_to(g, full)
    gs = np.shape(g)
    xs = np.shape(x)
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
    if np.ndim(x) == 0 and not isinstance(x, np.ndarray):
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
        "output: reduce it first (np.sum, np.mean) or differentiate each element"
    )


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
    return _Shape(np.broadcast_shapes(*map(np.shape, values)))


def _shape_only(x):
    """``x``'s shape, for a value of which only the shape is needed from here on."""
    return _Shape(np.shape(x))


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


def _size(*values):
    """How many elements the broadcast of ``values`` has, at least 1 (np.mean's count,
    from its operands; the gradient of an empty mean is empty whatever it is)."""
    return max(_Shape(np.broadcast_shapes(*map(np.shape, values))).size, 1)


def _count(x, out):
    """How many elements of ``x`` each element of the reduction ``out`` summarises."""
    return np.size(x) / max(np.size(out), 1)


def _extreme_share(g, x, out, axis=None, keepdims=False):
    """np.max/np.min: the gradient split equally among the tied extreme entries."""
    hit = x == _unreduce(out, x, axis, keepdims)
    ties = np.sum(hit, axis=axis, keepdims=True)
    return _unreduce(g, x, axis, keepdims) * hit / ties


def _prod_others(x, axis=None):
    """For each entry, the product of the others along ``axis`` (exact when x has zeros)."""
    x = np.asarray(x, dtype=np.result_type(x, np.float64))
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
    return np.transpose(np.reshape(left * right, moved.shape), np.argsort(rest + list(axes)))


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
    """The adjoint of operand ``which`` of ``np.dot(a, b)`` (scalars, 1-D and 2-D)."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return _unbroadcast(g * (b if which == 0 else a), a if which == 0 else b)
    if np.ndim(a) > 2 or np.ndim(b) > 2:
        raise SymdiffError("symdiff differentiates np.dot of scalars, 1-D and 2-D arrays; "
                         "use np.matmul or np.einsum for stacks of matrices")
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


def _einsum_problem(spec, count):
    """What in an einsum spec symdiff cannot differentiate ("" if nothing)."""
    text = spec.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    operands = inputs.split(",")
    if not arrow:
        return "implicit output (no '->')"
    if "." in text:
        return "an ellipsis"
    if len(operands) != count:
        return f"{len(operands)} subscripts for {count} operands"
    if any(len(set(o)) != len(o) for o in [*operands, output]):
        return "a repeated index within one operand (a diagonal)"
    if set(output) - set("".join(operands)):
        return "an output index no operand has"
    return ""


def _einsum_grad(spec, g, operands, which):
    """The adjoint of operand ``which`` of ``np.einsum(spec, *operands)``."""
    problem = _einsum_problem(spec, len(operands))
    if problem:
        raise SymdiffError(f"np.einsum({spec!r}, ...): {problem} is not supported; write "
                           "explicit subscripts, one letter per axis, such as 'ij,jk->ik'")
    inputs, out = spec.replace(" ", "").split("->")
    inputs = inputs.split(",")
    mine = inputs[which]
    others = [s for i, s in enumerate(inputs) if i != which]
    there = set(out).union(*others)
    kept = "".join(c for c in mine if c in there)
    d = np.einsum(",".join([out] + others) + "->" + kept, g,
                  *[x for i, x in enumerate(operands) if i != which])
    # Indices only this operand has were summed away: spread the adjoint over them.
    shape = [n if c in there else 1 for c, n in zip(mine, np.shape(operands[which]),
                                                     strict=True)]
    return np.broadcast_to(np.reshape(d, shape), np.shape(operands[which]))


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
    """The adjoint of ``np.linalg.norm(x, ord, axis)`` for the 2-norm and Frobenius norm."""
    matrix = np.ndim(x) == 2 and axis is None or isinstance(axis, tuple) and len(axis) == 2
    if not (ord is None or ord == "fro" and matrix or ord == 2 and not matrix):
        of = "a matrix (the spectral norm)" if matrix and ord == 2 else \
            f"{'a matrix' if matrix else 'a vector'}"
        raise SymdiffError(f"symdiff differentiates np.linalg.norm for ord=None, 2 (vectors) "
                           f"and 'fro' (matrices), not ord={ord!r} of {of}")
    with np.errstate(invalid="ignore", divide="ignore"):
        share = _unreduce(g / out, x, axis, keepdims) * x
    return np.where(np.asarray(x) == 0, 0.0, share)  # at 0, the subgradient 0 (as JAX)


def _scatter(g, x, index):
    """The adjoint of ``x[index]``: ``g`` placed at ``index`` in zeros; repeats accumulate."""
    if type(x) in (list, tuple):  # l[0] of a list of values: its adjoint is an array
        x = np.asarray(x)
    dtype = np.result_type(x, g, np.float64)
    if type(g) is np.ndarray and g.dtype == dtype and _whole(index) and \
            [n for n in g.shape if n != 1] == [n for n in np.shape(x) if n != 1]:
        # x[:, None, :] is all of x, in order, with axes of 1 inserted: its adjoint is g
        # with those axes taken out (a view; _fit and the in-place helpers copy it as needed)
        return g.reshape(np.shape(x))
    if len(index) == 1 and type(index[0]) is slice and np.ndim(x):
        start, stop, step = index[0].indices(np.shape(x)[0])
        if step == 1:
            # x[1:], x[:-1]: a run of rows; only the others need zeros (np.zeros would
            # write every entry, and then the run again)
            out = np.empty(np.shape(x), dtype=dtype)
            out[:start] = 0.0
            out[start:stop] = g
            out[max(start, stop):] = 0.0
            return out
    out = np.zeros_like(x, dtype=dtype)
    if _integer_index(index):
        np.add.at(out, index, g)
    else:
        out[index] = g
    return out


_NUMERIC = (np.ndarray, np.generic, float, int)  # what np.result_type reads as it is


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
    if _own(acc) and acc.shape == np.shape(x) and \
            acc.dtype == np.result_type(acc, g, np.float64):
        if _integer_index(index):
            np.add.at(acc, index, g)  # repeated indices add up
        else:
            acc[index] += g
        return acc
    return acc + _scatter(g, x, index)


def _whole(index):
    """Whether the basic index ``index`` takes every entry, in order: only full slices,
    ``None`` (a new axis of 1) and ``...``."""
    return all(i is None or i is Ellipsis or type(i) is slice and i == slice(None)
               for i in index)


def _integer_index(index):
    return any(isinstance(i, (list, tuple, np.ndarray)) and np.asarray(i).dtype != bool
               for i in index)


def _part(g, arrays, i, axis, how):
    """The adjoint of ``arrays[i]`` in np.concatenate/stack/hstack/vstack(arrays)."""
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


def _cross_grad(g, a, b, which):
    """The adjoint of ``np.cross(a, b)`` for a (which 0: b x g) or b (1: g x a), of
    vectors of 3 along the last axis (vectors of 2 make a number: refused)."""
    if np.shape(a)[-1:] != (3,) or np.shape(b)[-1:] != (3,):
        raise SymdiffError("np.cross is differentiated only for vectors of 3 along the "
                           f"last axis, not of shapes {np.shape(a)} and {np.shape(b)}")
    if which == 0:
        return _unbroadcast(np.cross(b, g), a)
    return _unbroadcast(np.cross(g, a), b)


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
