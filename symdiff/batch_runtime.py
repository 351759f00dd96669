"""The run-time helpers of batched programs (``batch``): the runtime's helpers with a
leading axis of columns on the gradients they take.

A batched program calls these by name, as a gradient calls ``runtime``'s; each takes the
same arguments as its counterpart there, the batched ones with k columns in front.
"""

from __future__ import annotations

import numpy as np

from . import runtime
from .runtime import _Shape, _Unbound


class Unbatchable(Exception):
    """The program has a construct the batching rules do not cover (the message: which)."""


class _Unprobed(Exception):
    """The batched program reached a block the probe had not reached."""


def _batch_lift(value, k):
    """An unbatched value as a batched one: the same column k times (a read-only view)."""
    if value is None or type(value) is _Unbound or type(value) is _Shape:
        return value  # (a _Shape stands for a shape, every column's)
    return np.broadcast_to(value, (k, *np.shape(value)))


def _batch_logical(value):
    """A batched value's stand-in where only its shape (and dtype) is read: its first
    column (a view), else its column's shape."""
    if type(value) is _Shape:
        return value
    if type(value) is not np.ndarray:
        raise TypeError(f"a batched {type(value).__name__}")  # (the column loop runs)
    return value[0] if value.shape[0] else _Shape(value.shape[1:])


def _batch_pad(value, rank):
    """A batched value with axes of 1 after the batch axis, to ``rank`` logical axes."""
    extra = rank - (np.ndim(value) - 1)
    return value.reshape((value.shape[0],) + (1,) * extra + value.shape[1:]) if extra > 0 \
        else value


def _batch_axis(axis, rank):
    """A reduction's ``axis`` for the batched operand of ``rank`` logical axes."""
    if axis is None:
        return tuple(range(1, rank + 1))
    if isinstance(axis, tuple):
        return tuple(a + 1 if a >= 0 else a for a in axis)
    return axis + 1 if axis >= 0 else axis


def _batch_index(index):
    """``index`` (a tuple, as np.index_exp gives) behind the batch axis's full slice;
    refused where NumPy would move advanced indices to the front."""
    index = index if isinstance(index, tuple) else (index,)
    _contiguous(index)
    return (slice(None), *index)


def _contiguous(index):
    # Integer and array indices among array ones are placed where the first of them is,
    # if they are adjacent: behind the batch slice they stay there; else NumPy moves them
    # to the front, ahead of the batch axis.
    advanced = [i for i, p in enumerate(index) if isinstance(p, (list, np.ndarray))]
    if advanced:
        spots = [i for i, p in enumerate(index) if isinstance(p, (list, np.ndarray, int,
                                                                   np.integer))]
        if spots[-1] - spots[0] + 1 != len(spots):
            raise Unbatchable("advanced indices that are not adjacent")


def _batch_unbroadcast(g, x, like=None, batched=None):
    """``_unbroadcast`` of a batched adjoint ``g`` (x and like: logical shapes; where
    ``batched`` flags like's entries, those are batched values, read for their columns'
    shape)."""
    k = g.shape[0]
    gs = g.shape[1:]
    if like is not None:
        # (operands all of g's shape, the common case, broadcast to it: without NumPy's
        # shape machinery, as _unbroadcast)
        for v, b in zip(like or (None,), batched or (False,) * max(len(like), 1),
                        strict=True):
            if (v.shape[1:] if b and type(v) is np.ndarray else
                    None if b else getattr(v, "shape", None)) != gs:
                if batched is not None:
                    like = [_batch_logical(v) if b else v
                            for v, b in zip(like, batched, strict=True)]
                full = np.broadcast_shapes(*map(np.shape, like))
                if gs != full:
                    g = np.broadcast_to(_batch_pad(g, len(full)), (k, *full))
                    gs = g.shape[1:]
                break
    xs = x.shape if type(x) is _Shape or type(x) is np.ndarray else np.shape(x)
    if gs == xs:
        return g
    if len(gs) < len(xs):
        return np.broadcast_to(_batch_pad(g, len(xs)), (k, *xs))
    lead = len(gs) - len(xs)
    if lead:
        g = np.add.reduce(g, axis=tuple(range(1, lead + 1)))
    ones = tuple(i + 1 for i, n in enumerate(xs) if n == 1 and g.shape[i + 1] != 1)
    if ones:
        g = np.add.reduce(g, axis=ones, keepdims=True)
    return g if g.shape[1:] == xs else np.broadcast_to(g, (k, *xs))


def _batch_unreduce(g, x, axis=None, keepdims=False):
    """``_unreduce`` of a batched adjoint ``g`` (x: its logical shape)."""
    shape = np.shape(x)
    if not keepdims and shape:
        axes = runtime._axes(axis, len(shape))
        g = np.reshape(g, (g.shape[0], *(1 if i in axes else n for i, n in enumerate(shape))))
    return np.broadcast_to(g, (g.shape[0], *shape))


def _batch_scatter(g, x, index):
    """``_scatter`` of a batched ``g``: each column placed at ``index`` in zeros."""
    dtype = np.float64 if type(x) is np.ndarray and x.dtype == g.dtype == np.float64 else \
        np.result_type(getattr(x, "dtype", np.float64), g, np.float64)
    shape = (g.shape[0], *np.shape(x))
    if len(index) == 1 and type(index[0]) is slice and len(shape) > 1:
        start, stop, step = index[0].indices(shape[1])
        if step == 1:  # (x[1:], x[:-1]: zeros only beside the run, as _scatter's)
            out = np.empty(shape, dtype=dtype)
            if start:
                out[:, :start] = 0.0
            out[:, start:stop] = g if g.ndim == len(shape) else _batch_pad(g, len(shape) - 1)
            if stop < shape[1]:
                out[:, max(start, stop):] = 0.0
            return out
    index = _batch_index(index)
    out = np.zeros(shape, dtype=dtype)
    # (g spread over its slot as NumPy spreads it: its axes behind the batch axis)
    g = _batch_pad(g, np.broadcast_to(np.empty(()), shape[1:])[index[1:]].ndim)
    if runtime._integer_index(index[1:]):
        np.add.at(out, index, g)
    else:
        out[index] = g
    return out


def _batch_scatter_add(acc, g, x, index):
    """``_scatter_add`` of a batched ``g`` (acc batched or not): added into acc itself
    where it is a batched array the gradient made for this adjoint alone (as the
    column's helper does)."""
    if runtime._own(acc) and acc.shape == (g.shape[0], *np.shape(x)) and (
            acc.dtype == g.dtype == np.float64 or
            acc.dtype == np.result_type(acc, g, np.float64)):
        if type(index) is tuple and len(index) == 1 and type(index[0]) is slice and acc.ndim > 1 \
                and g.ndim == acc.ndim:
            acc[:, index[0]] += g  # (x[1:] of a vector or a row of slices: the commonest)
            return acc
        if type(index) is tuple and len(index) < acc.ndim and all(
                type(i) is slice for i in index):
            # (slices alone, x[1:]: g's axes are x's, behind the batch axis; no index
            # array to check or to add at)
            acc[(slice(None), *index)] += _batch_pad(g, acc.ndim - 1)
            return acc
        index = _batch_index(index)
        g = _batch_pad(g, np.broadcast_to(np.empty(()), acc.shape[1:])[index[1:]].ndim)
        if runtime._integer_index(index[1:]):
            np.add.at(acc, index, g)
        else:
            acc[index] += g
        return acc
    return acc + _batch_scatter(g, x, index)


def _batch_fit(g, x, k):
    """``_fit`` of each column: k columns of x's shape (float64 or x's smaller float)."""
    if g is None:
        g = 0.0
    dtype = getattr(x, "dtype", None)
    dtype = dtype if dtype is not None and dtype.kind == "f" and dtype.itemsize < 8 \
        else np.float64
    if type(g) is np.ndarray and g.dtype == dtype and g.shape == (k, *np.shape(x)):
        return g  # (the caller copies the columns into its blocks)
    return np.asarray(np.broadcast_to(g, (k, *np.shape(x))), dtype=dtype)


def _batch_matmul_grad(g, a, b, which):
    """``_matmul_grad`` of a batched adjoint ``g``; a and b unbatched, vectors or
    matrices (else the column loop runs)."""
    na, nb = np.ndim(a), np.ndim(b)
    if not (0 < na <= 2 and 0 < nb <= 2):  # (stacks of matrices: column by column)
        return _batch_map(runtime._matmul_grad, (True, False, False, False), g, a, b, which)
    if na == 1 and nb == 1:
        return g[:, None] * (b if which == 0 else a)
    if which == 0:
        if nb == 1:
            return g[:, :, None] * b
        return g @ np.transpose(b)  # (b @ g for a vector a, g @ b.T for a matrix)
    if na == 1:
        return a[:, None] * g[:, None, :]
    return g @ a if nb == 1 else np.transpose(a) @ g


def _batch_written(a, index, v, v_batched):
    """``_written`` where a or v is batched (``a`` lifted already where it was not)."""
    out = np.array(a)
    index = _batch_index(index)
    out[index] = _batch_pad(v, out[index].ndim - 1) if v_batched else v
    return out


def _batch_unwritten(g, a, index):
    """``_unwritten`` of a batched adjoint ``g`` (a: a logical shape)."""
    dtype = g.dtype if g.dtype.kind == "f" else np.float64
    out = np.array(np.broadcast_to(g, (g.shape[0], *np.shape(a))), dtype=dtype)
    out[_batch_index(index)] = 0.0
    return out


def _batch_reshape(value, *shape):
    """``np.reshape(value, shape)`` of each column (shape as np.reshape or the method takes
    it: an int, a tuple, or ints one by one)."""
    if len(shape) == 1:
        shape = shape[0]
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return value.reshape((value.shape[0], *shape))


def _batch_broadcast_to(value, shape, rank):
    """``np.broadcast_to`` of each column (``rank``: the value's logical rank)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    return np.broadcast_to(_batch_pad(value, len(shape)), (value.shape[0], *shape))


def _batch_map(fn, batched, *args):
    """``fn`` column by column (its batched arguments: ``batched``), the results stacked:
    for the rarer helpers, which have no rule of their own."""
    k = next(a for a, b in zip(args, batched, strict=True) if b).shape[0]
    return np.stack([fn(*(a[i] if b else a for a, b in zip(args, batched, strict=True)))
                     for i in range(k)])


HELPERS = {f.__name__: f for f in (
    _batch_lift, _batch_logical, _batch_pad, _batch_axis, _batch_index, _batch_unbroadcast,
    _batch_unreduce, _batch_scatter, _batch_scatter_add, _batch_fit, _batch_matmul_grad,
    _batch_written, _batch_unwritten, _batch_reshape, _batch_broadcast_to, _batch_map)}
HELPERS |= {"_Unprobed": _Unprobed, "_Shape": _Shape}
