"""An argument that is a container being differentiated -> its leaves in order, and back.

The transformations (``higher``) pass a container's leaves to a tangent program one by one,
as ``containers`` names them when lowering: in the order of the container's kind (a dict's
keys as it has them, a tuple's or list's items), nested containers item by item, and a list
of numbers alone as one leaf (NumPy reads it as an array). Here the API flattens the values
the user passes in that order and rebuilds results with the parameter's structure (JAX's
``tree_flatten`` / ``tree_unflatten``, for the containers ``grad`` takes).
"""

from __future__ import annotations

import numpy as np


def is_container(value) -> bool:
    """Whether ``value`` is differentiated leaf by leaf (a dict, a tuple, a list of arrays):
    ``containers.is_tree`` of its kind, told from its types alone (it runs at every call)."""
    t = type(value)
    return t is dict or t is tuple or t is list and not _numbers(value)


def _numbers(value) -> bool:
    """A number, or a list (of lists...) of numbers: what NumPy reads as an array."""
    if type(value) is list:
        return all(map(_numbers, value))
    return isinstance(value, (int, float)) or isinstance(value, np.generic) and \
        value.dtype.kind in "biufc"


def flatten(value, path: str = "", like=None) -> list[tuple[str, object]]:
    """``(path, leaf)`` of each leaf of ``value``, in order; a value that is not a
    container is its own leaf, at ``path``. ``like``: a value whose structure ``value``
    has (checked: ``mismatch``), which says where the leaves are (a tangent's primal: a
    tangent [[1.0, 0.0]] of [np.ones(2)] is a list holding one leaf)."""
    like = value if like is None else like
    if not is_container(like):
        return [(path, value)]
    keys = like.keys() if type(like) is dict else range(len(like))
    return [leaf for key in keys for leaf in flatten(value[key], f"{path}[{key!r}]", like[key])]


def unflatten(like, leaves):
    """``like``'s structure with its leaves taken in order from the iterator ``leaves``."""
    if not is_container(like):
        return next(leaves)
    if type(like) is dict:
        return {key: unflatten(item, leaves) for key, item in like.items()}
    return type(like)(unflatten(item, leaves) for item in like)


def mismatch(primal, tangent, path: str) -> str | None:
    """How ``tangent`` differs from its primal's structure (the first difference found,
    located by its path), or None where it has that structure and each leaf's shape."""
    if is_container(primal):
        if type(tangent) is not type(primal):
            return f"{path} is {_what(tangent)} in the tangent, {_what(primal)} in the primal"
        if type(primal) is dict:
            if list(tangent) != list(primal):
                return (f"{path} has the keys {list(tangent)} in the tangent, "
                        f"{list(primal)} in the primal")
            pairs = [(primal[k], tangent[k], f"{path}[{k!r}]") for k in primal]
        else:
            if len(tangent) != len(primal):
                return (f"{path} has {_items(len(tangent))} in the tangent, "
                        f"{len(primal)} in the primal")
            pairs = [(p, t, f"{path}[{i}]") for i, (p, t) in enumerate(
                zip(primal, tangent, strict=True))]
        return next((m for m in (mismatch(*pair) for pair in pairs) if m is not None), None)
    if is_container(tangent):
        return f"{path} is {_what(tangent)} in the tangent, {_what(primal)} in the primal"
    try:
        shape = np.shape(tangent)
    except ValueError:  # (a ragged list)
        return f"{path} is not an array of numbers"
    if shape != np.shape(primal):
        return f"{path} has shape {shape} in the tangent, {np.shape(primal)} in the primal"
    return None


def _what(value) -> str:
    if type(value) in (dict, tuple, list):
        return {dict: "a dict", tuple: "a tuple", list: "a list"}[type(value)]
    return f"an array of shape {np.shape(value)}" if np.ndim(value) else "a number"


def _items(n: int) -> str:
    return "1 item" if n == 1 else f"{n} items"
