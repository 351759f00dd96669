"""The float the derivatives compute in, and the values they read converted to it.

``differentiate``'s differentiator mixes this in: ``_floats`` makes the values the backward
sweep computes with floats where the function's own arithmetic would not have wrapped or
repeated, ``_fold_numbers`` folds adjoints that are one number into the lines that read them.

``on_floats`` is the float path for scalar code: where the kinds say a NumPy function's
operands are Python numbers, the forward sweep calls ``math``'s function instead (``math.sin``
takes 50 ns where ``np.sin`` of a float takes 500), so that the values stay Python floats and
the backward sweep computes with them in ``math`` too (``emit``). ``math`` raises where NumPy
gives nan or inf with a warning (``math.log(0.0)``): then the call runs again on NumPy floats
(``api.Gradient._failed``).
"""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import math

import numpy as np
import sympy as sp

from . import kinds as K
from .ir import IR, Eqn, If, Loop, symbol
from .program import Block, Line, _flat, _loads, _rename
from .rules import call


class Floats:
    """The float conversions of the backward sweep; relies on ``differentiate._Differentiator``
    for its state (``ir``, ``facts``, ``temp_kinds``, ``names``, ``dtype``, ``adj``)."""

    def _floats(self, backward) -> tuple[list, tuple[str, ...]]:
        """The values the derivatives compute with, as floats: the function's x * K * K
        runs in float64, the derivative's K**2 in K's uint8 would wrap around, and 2*l on a
        list parameter would repeat it. A parameter read by derivatives alone is converted
        where it is (``floats``: ``p = _as_float(p)``, behind ``if type(p) is not float:``
        where its kind is not known); one read as an index too, module data (which may be
        rebound after the build), and values of a kind known not to be floats (a row of an
        integer array, a list made from a list) get a float copy (``K_float =
        _as_float(K)``) that the derivatives read instead. Values known to be floats of the
        precision the derivatives compute in are read as they are.
        """
        in_math = {s.name for line in _flat(backward) if isinstance(line.value, sp.Basic)
                   for s in line.value.free_symbols}
        elsewhere = set(_loads([line if isinstance(line, Block) else dataclasses.replace(
            line, like="") for line in _flat(backward) if not isinstance(line.value, sp.Basic)]))
        params = set(self.ir.params)
        data = {name for name, _ in self.ir.data_globals} | {
            name for name, obj, _ in self.ir.globals if isinstance(obj, (np.ndarray, np.generic))}

        def known(n):
            return self.facts.kind(n) if n in self.facts.kinds else self.temp_kinds.get(n)

        # (a value computed from the differentiated inputs is of their float)
        made_here = _bound(self.ir.eqns) - self.active | self.constant_parts

        def fine(n) -> bool:  # read by the derivatives as it is
            k = known(n)
            if isinstance(k, K.Number):
                return True  # Python's numbers do not wrap, nor repeat
            if k is None:  # the sweep's own values are floats; the function's may be
                return n not in params and n not in data and n not in made_here  # anything
            return isinstance(k, K.Array) and k.floating and \
                np.dtype(k.dtype).itemsize >= np.dtype(self.dtype).itemsize
        # (a float32 parameter's copy has another name: its gradient is a float32 too)
        floats = tuple(p for p in self.ir.params if p in in_math and p not in elsewhere
                       and not fine(p) and not (isinstance(known(p), K.Array)
                                                and known(p).floating))
        # A list read by an array operation's rule (_matmul_grad(g, X, w, 1)) is an array
        # there, of its own dtype (an index list stays integers).
        self.lists = tuple(p for p in self.ir.params if p in elsewhere and (
            known(p) is None or isinstance(known(p), (K.List, K.Tuple))))
        copied = sorted(n for n in in_math - set(floats) if not fine(n))
        # A value the function made (in a loop, maybe) is converted where it is read.
        made = {symbol(n): call("_as_float" if self.dtype == "float64" else "_as_float32")(
            symbol(n)) for n in copied if n not in params and n not in data}
        copied = [n for n in copied if symbol(n) not in made]
        if made:
            backward = _rename(backward, made)
        if not copied:
            return backward, floats
        renamed = {symbol(n): symbol(self.names.fresh(n + "_float")) for n in copied}
        precision = "" if self.dtype == "float64" else f", {self.ir.np_alias}.{self.dtype}"
        out = [Line(renamed[symbol(n)].name, f"_as_float({n}{precision})",
                    comment=f"the derivatives compute in {self.dtype}") for n in copied]
        return out + _rename(backward, renamed), floats

    def _fold_numbers(self, lines) -> list:
        """``d_t3 = -1.0`` then ``dz = d_t3*t``: ``dz = -t`` (an adjoint that is one number,
        set once, read by the derivatives as that number; a line that still reads it keeps
        it, and prune drops it where none does). As a float (-1.0*t), unless all it
        multiplies is known to be floats: -t of integers may wrap, of booleans raise."""
        targets = [line.target for line in _flat(lines) if line.target]
        exact = {symbol(line.target): line.value for line in lines
                 if isinstance(line, Line) and isinstance(line.value, sp.Number)
                 and not line.accumulate and not line.like
                 and targets.count(line.target) == 1}
        if not exact:
            return lines
        floats = {k: sp.Float(v) for k, v in exact.items()}

        def float_like(name):
            k = self.facts.kind(name) if name in self.facts.kinds else \
                self.temp_kinds.get(name)
            return isinstance(k, K.Number) and k.type == "float" or isinstance(
                k, K.Array) and k.floating and np.dtype(k.dtype).itemsize >= np.dtype(
                    self.dtype).itemsize or name in self.adj.values()

        out = []
        for line in lines:
            folded = _rename([line], exact)
            # (not where a product becomes a bare name: the adjoint would be another's
            # array, which the sweep took for one of its own)
            if isinstance(line, Line) and isinstance(line.value, sp.Basic) and \
                    folded[0].value.is_Atom and not line.value.is_Atom:
                folded = [line]
            elif isinstance(line, Block) or isinstance(line.value, sp.Basic) and not all(
                    s in exact or float_like(s.name) for s in line.value.free_symbols):
                folded = _rename([line], floats)
            out.extend(folded)
        return out


def _bound(items) -> set[str]:
    """Every name the function's statements bind, in its branches and loops too."""
    names = set()
    for item in items:
        if isinstance(item, Eqn):
            names.add(item.out)
        elif isinstance(item, If):
            names |= _bound(item.then) | _bound(item.orelse) | {m for m, _, _ in item.phis}
        else:
            names |= _bound(item.body) | {p for p, _, _ in item.carried}
            if item.target:
                names.add(item.target)
    return names


def _float_dtype(ir: IR) -> str:
    """The float the derivatives compute in: float32 where every differentiated parameter
    is a float32 (or float16) array or NumPy scalar, as JAX; else float64."""
    found = [ir.kinds.get(p) for p in ir.wrt]
    if found and all(isinstance(k, K.Array) and k.dtype in ("float32", "float16")
                     for k in found):
        return "float32"
    return "float64"


# NumPy's elementwise functions that math computes the same on Python floats (up to the
# last bit; where math raises instead of giving nan or inf, the call runs on NumPy floats).
# np.sign is not among them (math.copysign differs at 0 and nan), nor np.floor (an int).
_MATH = {np.sin: "sin", np.cos: "cos", np.tan: "tan", np.arcsin: "asin", np.arccos: "acos",
         np.arctan: "atan", np.sinh: "sinh", np.cosh: "cosh", np.tanh: "tanh",
         np.arcsinh: "asinh", np.arccosh: "acosh", np.arctanh: "atanh", np.exp: "exp",
         np.expm1: "expm1", np.log: "log", np.log2: "log2", np.log10: "log10",
         np.log1p: "log1p", np.sqrt: "sqrt", np.arctan2: "atan2", np.hypot: "hypot",
         np.deg2rad: "radians", np.rad2deg: "degrees", np.radians: "radians",
         np.degrees: "degrees", np.abs: "abs"}
FROM_NUMPY = "_symdiff_from_numpy"  # set on a call node made here: math's, for NumPy's


def on_floats(ir: IR) -> IR:
    """``ir`` with each call of a NumPy function in ``_MATH`` whose operands are Python
    numbers (by the kinds) made a call of math's (``abs`` for np.abs), in the forward sweep.

    >>> # np.sin(x * y) of Python floats x, y: math.sin(x * y)
    """
    from .shapes import _function, facts

    if not any(isinstance(k, K.Number) for k in ir.kinds.values()) or _fractional_powers(
            ir.eqns):
        return ir
    functions = {name: obj for name, obj, _ in ir.globals}
    usable = {name for name, own in (("math", math), ("abs", builtins.abs))
              if name not in ir.user_names or functions.get(name) is own}
    wanted = {}  # id(call node) -> the math function's name
    constants = {}  # id(np.pi, np.e) -> math's (the same Python float, read from math)
    for node in _calls(ir.eqns):
        if isinstance(node, ast.Attribute):
            if "math" in usable and isinstance(node.value, ast.Name) and \
                    node.value.id == ir.np_alias and node.attr in ("pi", "e"):
                constants[id(node)] = node.attr
            continue
        name = _MATH.get(_function(node.func, functions, ir.np_alias))
        if name is not None and not node.keywords and (
                "abs" if name == "abs" else "math") in usable and not any(
                isinstance(a, ast.Starred) for a in node.args):
            wanted[id(node)] = name
    # Made where every operand is a Python float or int, as the kinds say once they are
    # made: until none is left that is not (one left out may make others' operands
    # NumPy's). Not a bool: np.cosh(True) is a float16.
    before = facts(ir).kinds
    if any(_weakened(k) for k in before.values()) or any(
            not isinstance(_data(source, name), (float, int)) for name, source in
            ir.data_globals):
        # (module data has no kind in the build's key, so it must not matter: only
        # Python numbers, which meet math's floats as NumPy's float64 would)
        return ir
    while wanted or constants:
        made, nodes = _rewritten(ir, wanted, constants)
        known = facts(made)
        wrong = {key for key, node in nodes.items() if not all(
            known.kind_of(a) in _PYTHON_FLOATS for a in node.args)}
        if not wrong:
            # (a value the function uses as NumPy's, np.exp(x).item(): no float path; nor
            # where a value would be computed in another precision: math.sin(x) * np.cosh(b)
            # of a bool b is a float16, np.sin(x) * np.cosh(b) a float64)
            return made if all(_same_value(k, known.kinds.get(name))
                               for name, k in before.items()) else ir
        wanted = {key: name for key, name in wanted.items() if key not in wrong}
    return ir


_PYTHON_FLOATS = (K.FLOAT, K.Number("int"))


def _data(source, name):
    """Module data as the function reads it now (None from an empty cell)."""
    from .build import _getter  # (build imports this module)

    try:
        return _getter(source, name)()
    except ValueError:
        return None


def _same_value(kind, made) -> bool:
    """Whether a value of ``kind`` computed with math instead of NumPy, of kind ``made``,
    is the same number: the same kind, or a Python float (bool) for NumPy's float64
    (bool) scalar."""
    return made == kind or isinstance(kind, K.Array) and (kind.scalar or kind.ndim == 0) \
        and (made, kind.dtype) in ((K.FLOAT, "float64"), (K.Number("bool"), "bool"))


def _weakened(kind) -> bool:
    """Whether a value of this kind would compute in another precision with a Python
    float than with NumPy's float64: np.exp(t) * w is a float64 for a float32 w, but
    math.exp(t) * w a float32 (NumPy promotes Python floats weakly). Then, anywhere in
    the function, NumPy's functions stay, so its values are the ones the function computes."""
    if isinstance(kind, (K.Tuple, K.List)):
        return any(_weakened(k) for k in kind.items)
    if isinstance(kind, K.Dict):
        return any(_weakened(k) for k in kind.items)
    if not isinstance(kind, K.Array):
        return False
    try:
        dtype = np.dtype(kind.dtype)
    except TypeError:
        return True
    return np.result_type(dtype, np.float64) != np.result_type(dtype, 1.0)


def _fractional_powers(items) -> bool:
    """Whether a ``**`` of the function may raise a value that NumPy made to a power that
    is not a whole number: of a negative Python float, that is a complex number (NumPy's
    float64 gives nan), so such a function keeps NumPy's floats."""
    for node in _nodes(items):
        if not isinstance(node, ast.BinOp) or not isinstance(node.op, ast.Pow):
            continue
        exponent = node.right.operand if isinstance(node.right, ast.UnaryOp) and isinstance(
            node.right.op, (ast.USub, ast.UAdd)) else node.right
        if not (isinstance(exponent, ast.Constant) and type(exponent.value) in (int, float)
                and float(exponent.value).is_integer()):
            return True
    return False


def _nodes(items):
    for item in items:
        if isinstance(item, Eqn):
            yield from ast.walk(item.code)
        elif isinstance(item, If):
            yield from _nodes(item.then)
            yield from _nodes(item.orelse)
        elif isinstance(item, Loop):
            yield from ast.walk(item.header)
            yield from _nodes(item.body)


def _calls(items):
    """Every call (and attribute) node of the elementwise equations of ``items`` (in
    branches and loops too)."""
    for item in items:
        if isinstance(item, Eqn):
            if item.kind == "elementwise":
                yield from (n for n in ast.walk(item.code)
                            if isinstance(n, (ast.Call, ast.Attribute)))
        elif isinstance(item, If):
            yield from _calls(item.then)
            yield from _calls(item.orelse)
        elif isinstance(item, Loop):
            yield from _calls(item.body)


def _rewritten(ir: IR, wanted: dict, constants: dict):
    """``ir`` with the calls ``wanted`` names made math's, and the ``constants`` read from
    math; and id(original call) -> its new node."""
    nodes = {}

    def items(seq):
        return tuple(item(i) for i in seq)

    def item(i):
        if isinstance(i, If):
            return dataclasses.replace(i, then=items(i.then), orelse=items(i.orelse))
        if isinstance(i, Loop):
            return dataclasses.replace(i, body=items(i.body))
        if not any(id(n) in wanted or id(n) in constants for n in ast.walk(i.code)):
            return i
        code = copy.deepcopy(i.code)
        twins = dict(zip(map(id, ast.walk(i.code)), ast.walk(code), strict=True))
        for key, name in wanted.items():
            node = twins.get(key)
            if node is not None:
                node.func = ast.Name("abs", ast.Load()) if name == "abs" else \
                    ast.Attribute(ast.Name("math", ast.Load()), name, ast.Load())
                setattr(node, FROM_NUMPY, True)
                nodes[key] = node
        for key in constants:
            if key in twins:
                twins[key].value = ast.Name("math", ast.Load())
        calls = tuple((e, twins.get(id(n), n)) for e, n in i.calls)
        return dataclasses.replace(i, code=code, calls=calls)

    return dataclasses.replace(ir, eqns=items(ir.eqns)), nodes
