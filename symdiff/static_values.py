"""Constant values -> whether an operation on them may run while reading, and what they share.

An operation too large or not safe raises ``NotConstant``; ``mutable``, ``shares`` and
``same`` tell what a change in place reaches and whether a default kept its value."""

from __future__ import annotations

import ast
import math

import numpy as np

from . import rules

# A constant larger than this (elements of an array, digits of an integer) is not built.
_MAX_SIZE = 10**7


class NotConstant(Exception):
    """An expression whose value is only known by running code; the message says why."""


DATA = (int, float, complex, np.number, np.bool_, np.ndarray, bool)

BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a**b,
}

# NumPy constructors that build an array from literal arguments and do nothing else.
_CONSTRUCTORS = ("array", "asarray", "zeros", "ones", "full", "eye", "identity",
                 "arange", "linspace", "float64", "float32", "int64", "int32")
_SAFE_IDS = {id(getattr(np, n)) for n in _CONSTRUCTORS} | {id(float), id(int), id(complex)}


def is_dtype(obj) -> bool:
    return isinstance(obj, type) and (issubclass(obj, np.generic) or obj in (int, float,
                                                                              complex, bool))


def safe_call(fn) -> bool:
    """NumPy constructors, float/int, and the pure elementwise functions in the rules."""
    return id(fn) in _SAFE_IDS or isinstance(rules.lookup(fn), rules.Elementwise)


def number(v, node):
    if isinstance(v, bool) or not isinstance(v, DATA):
        raise NotConstant(f"{describe(node)} is arithmetic on something that is not a number")
    return v


def guard(op, a, b):
    """Refuse arithmetic whose result would be huge (10**10**9, a broadcast outer product)."""
    if isinstance(op, ast.Pow) and isinstance(a, int) and isinstance(b, int) and (
            a.bit_length() * abs(b) > 100_000):
        raise NotConstant("an integer power too large to evaluate here")
    try:
        shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    except ValueError as e:
        raise NotConstant(str(e)) from None
    if math.prod(shape) > _MAX_SIZE:
        raise NotConstant("an array too large to build here")


def guard_call(fn, pos, kw):
    shapes = [np.shape(a) for a in pos if isinstance(a, np.ndarray)]
    size = max([math.prod(s) for s in shapes], default=1)
    if fn in (np.zeros, np.ones, np.full):
        shape = kw.get("shape", pos[0] if pos else ())
        shape = (shape,) if isinstance(shape, int) else shape
        if isinstance(shape, (tuple, list)) and all(isinstance(n, int) for n in shape):
            size = math.prod(shape)
    elif fn in (np.eye, np.identity):
        n = [a for a in pos[:2] if isinstance(a, int)]
        size = math.prod(n) if len(n) == 2 else (n[0] ** 2 if n else 0)
    elif fn is np.arange:
        nums = [a for a in pos if isinstance(a, (int, float))]
        start, stop, step = (0, nums[0], 1) if len(nums) == 1 else (
            *nums[:2], nums[2] if len(nums) > 2 else 1)
        size = math.ceil((stop - start) / step) if step else 0
    elif fn is np.linspace:
        size = int(kw.get("num", pos[2] if len(pos) > 2 else 50))
    if size > _MAX_SIZE:
        raise NotConstant("an array too large to build here")


def describe(node) -> str:
    text = ast.unparse(node)
    return repr(text if len(text) < 40 else text[:37] + "...")


def mutable(value) -> bool:
    return isinstance(value, (np.ndarray, list, dict, set, bytearray))


def immutable(value) -> bool:
    return value is None or isinstance(value, (*DATA, str, bytes, tuple, frozenset, type)) \
        and not isinstance(value, np.ndarray)


def members(value, depth=0):
    """``value`` and what it holds (the items of tuples, lists, dicts), recursively."""
    yield value
    if depth < 20 and isinstance(value, (tuple, list, set, frozenset)):
        for v in value:
            yield from members(v, depth + 1)
    elif depth < 20 and isinstance(value, dict):
        for v in (*value.keys(), *value.values()):
            yield from members(v, depth + 1)


def shares(value, affected) -> bool:
    """Whether ``value`` holds one of the ``affected`` objects, or an array sharing memory
    with one of them."""
    if not affected:
        return False
    for m in members(value):
        for a in affected:
            if m is a or isinstance(m, np.ndarray) and isinstance(a, np.ndarray) and (
                    np.may_share_memory(m, a)):
                return True
    return False


def same(a, b) -> bool:
    """Whether two constants are the same value (of the same type)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.all(
            (a == b) | (a != a) & (b != b)))
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:  # noqa: BLE001 - values that do not compare are not the same
        return False
