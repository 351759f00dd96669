"""A generated program linear in some parameters -> the same program on a batch of them.

JAX's ``vmap`` with ``in_axes=0`` on the tangents and ``None`` on the primals, done on our
own source: the parameters named (a tangent program's ``x_dot``, the ``_u`` of a
contracted function) get a leading axis of size k, one column per basis vector, and so
does every value computed from them; everything else is computed once, as before. One
call of the batched program gives all k columns of a Hessian or a Jacobian, where the
column loop (``higher``) calls the program k times.

To write ``a_dot * c`` or ``A @ t_dot`` right the batched program needs each value's rank
(logical: without the batch axis). They are read off a probe: the program, its
expressions flattened so that each operand has a name (``_flat``), run once unbatched
with each assignment noted. A name seen with two ranks, a construct the rules below do
not know, a test or loop bound that depends on the tangents: the program is not batched
(``Unbatchable``), and the column loop runs, as always right. A block of the program the
probe did not reach raises ``_Unprobed`` where it runs (the caller probes that call too,
and builds again).
"""

from __future__ import annotations

import ast
import builtins
import math
import weakref

import numpy as np

from . import runtime, sparsity
from .batch_runtime import HELPERS, Unbatchable, _batch_axis, _batch_lift, _batch_pad, _Unprobed
from .runtime import _Shape, _Unbound

# --- what the rules know of the functions a program calls ---

_R = runtime
# Read for their shape alone (all their arguments, or those positions): a batched value
# there is given as its column's shape (_batch_logical), and the result is not batched.
_SHAPE_READERS = {np.shape: None, np.ndim: None, np.size: None, _R._shape_of: None,
                  _R._shape_only: None, _R._size: None, _R._count: None,
                  _R._check_scalar: None, _R._numpy: None, type: None,
                  _R._reduced_shape: (1,), _R._unbroadcast: (1, 2),
                  _R._unreduce: (1,), _R._scatter: (1,), _R._scatter_add: (2,),
                  _R._unwritten: (1,), _R._fit: (1,), _R._part: (1,),
                  _R._joined_part: (1,)}
_SHAPE_ATTRIBUTES = {"shape", "ndim", "size", "dtype"}
# Elementwise beyond the ufuncs: every positional operand padded to the result's rank.
_ELEMENTWISE = {np.where, np.clip, abs, _R._add_to, _R._plus, _R._times, _R._as_float,
                _R._as_float32}
_REDUCTIONS = {np.sum, np.mean, np.max, np.min, np.amax, np.amin, np.prod, np.nansum,
               np.nanmean, np.nanmax, np.nanmin, np.std, np.var, np.all, np.any}
_SAME_SHAPE = {np.zeros_like, np.ones_like, np.copy, np.array, np.asarray,
               np.ascontiguousarray}
_SAME_SHAPE_KEYWORDS = {"dtype", "copy", "order"}
# The batched counterparts of runtime helpers whose first argument is the batched one.
_COUNTERPARTS = {_R._unbroadcast: "_batch_unbroadcast", _R._unreduce: "_batch_unreduce",
                 _R._scatter: "_batch_scatter", _R._matmul_grad: "_batch_matmul_grad",
                 _R._unwritten: "_batch_unwritten"}


def _resolve(node, names):
    """The object a call's function names (``np.sum``, ``_unbroadcast``, ``abs``), or None."""
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        return getattr(builtins, node.id, None)
    if isinstance(node, ast.Attribute):
        base = _resolve(node.value, names)
        return getattr(base, node.attr, None) if base is not None else None
    return None


def _hashable(obj):
    try:
        hash(obj)
    except TypeError:
        return False
    return True


def _name(id_, store=False):
    return ast.Name(id_, ast.Store() if store else ast.Load())


def _call(fn, *args, keywords=()):
    return ast.Call(_name(fn) if isinstance(fn, str) else fn, list(args), list(keywords))


def _const(value):
    return ast.Constant(value)


def _static(node, names):
    """Whether an unbatched operand can stay written where it is (a name, a constant, a
    module's attribute such as np.pi): nothing to compute, no rank to read."""
    if isinstance(node, ast.Attribute):
        while isinstance(node, ast.Attribute):
            node = node.value
        return isinstance(node, ast.Name) and type(names.get(node.id)) is type(np)
    return isinstance(node, (ast.Name, ast.Constant))


class _Program:
    """One program's batching: its flattened source, the probe's notes, the rules."""

    def __init__(self, source, names, tangents):
        tree = ast.parse(source)
        fn = tree.body[0]
        if not isinstance(fn, ast.FunctionDef) or fn.args.vararg or fn.args.kwarg or \
                fn.args.kwonlyargs:
            raise Unbatchable("not a plain function")
        self.fn = fn
        self.names = names
        self.params = [a.arg for a in fn.args.args]
        self.tangents = tuple(tangents)
        self.batched = set(tangents)
        self._spread()
        self.temps = 0
        # (names of its own that the program does not use: the batch size, temporaries)
        used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        self.k = "_k"
        while self.k in used:
            self.k += "_"
        self.prefix = "_b"
        while any(u.startswith(self.prefix) for u in used):
            self.prefix += "_"
        self.blocks = 0
        fn.body = self._flat_block(fn.body)
        self.records: dict = {}
        self.reached: set = set()
        self.returns = None

    # -- which names are batched: those computed from the tangents (to a fixed point) --

    def _uses(self, node) -> bool:
        """Whether ``node``'s value depends on a batched name (not only on its shape)."""
        if isinstance(node, ast.Name):
            return node.id in self.batched
        if isinstance(node, ast.Attribute) and node.attr in _SHAPE_ATTRIBUTES:
            return False
        if _is_none_test(node):
            return False
        if isinstance(node, ast.Call):
            fn = _resolve(node.func, self.names)
            if fn is len:
                return False
            positions = _SHAPE_READERS.get(fn, ()) if _hashable(fn) else ()
            if positions is None:
                return False
            args = [a for i, a in enumerate(node.args) if i not in positions]
            return any(map(self._uses, [node.func, *args, *(k.value for k in node.keywords)]))
        return any(map(self._uses, ast.iter_child_nodes(node)))

    def _spread(self):
        while True:
            before = len(self.batched)
            for node in ast.walk(self.fn):
                if isinstance(node, ast.Assign) and self._uses(node.value):
                    for target in node.targets:
                        self.batched.update(n.id for n in ast.walk(target)
                                            if isinstance(n, ast.Name))
                elif isinstance(node, ast.For) and self._uses(node.iter):
                    raise Unbatchable("a loop over a value computed from the tangents")
                elif isinstance(node, ast.AugAssign) and (
                        self._uses(node.value) or self._uses(node.target)):
                    raise Unbatchable("an augmented assignment of a batched value")
            if len(self.batched) == before:
                return

    # -- flattening: each operand of a batched operation gets a name the probe notes --

    def _temp(self, value, out, batched=False):
        name = f"{self.prefix}{self.temps}"
        self.temps += 1
        if batched:
            self.batched.add(name)
        out.append(ast.Assign([_name(name, True)], value, lineno=0))
        return _name(name)

    def _operand(self, node, out):
        """``node`` as a name (or a constant), its computation appended to ``out``."""
        if isinstance(node, (ast.Name, ast.Constant)):
            return node
        if not self._uses(node):
            return node if _static(node, self.names) else self._temp(node, out)
        return self._temp(self._flat(node, out), out, batched=True)

    def _flat(self, node, out):
        """A batched expression as one operation on names (its operands flattened)."""
        if isinstance(node, (ast.Name, ast.Constant)):
            return node
        if isinstance(node, ast.BinOp):
            return ast.BinOp(self._operand(node.left, out), node.op,
                             self._operand(node.right, out))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return ast.UnaryOp(node.op, self._operand(node.operand, out))
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return ast.Compare(self._operand(node.left, out), node.ops,
                               [self._operand(node.comparators[0], out)])
        if isinstance(node, ast.Call):
            if any(isinstance(a, ast.Starred) for a in node.args) or \
                    any(k.arg is None for k in node.keywords):
                raise Unbatchable("a call with *args or **kwargs")
            func = node.func
            if isinstance(func, ast.Attribute) and self._uses(func.value):
                func = ast.Attribute(self._operand(func.value, out), func.attr, ast.Load())
            elif self._uses(func):
                raise Unbatchable("a function computed from the tangents")
            return ast.Call(func, [self._item(a, out) for a in node.args],
                            [ast.keyword(k.arg, self._item(k.value, out) if self._uses(
                                k.value) else k.value) for k in node.keywords])
        if isinstance(node, ast.Subscript):
            if self._uses(node.slice):
                raise Unbatchable("an index computed from the tangents")
            return ast.Subscript(self._operand(node.value, out), node.slice, ast.Load())
        if isinstance(node, ast.Attribute):
            return ast.Attribute(self._operand(node.value, out), node.attr, ast.Load())
        if isinstance(node, (ast.Tuple, ast.List)):
            return self._item(node, out)
        if isinstance(node, ast.IfExp) and not self._uses(node.test):
            # (both sides computed: what the side not taken computes is not read)
            return ast.IfExp(node.test, self._operand(node.body, out),
                             self._operand(node.orelse, out))
        raise Unbatchable(f"{type(node).__name__} of a batched value")

    def _item(self, node, out):
        # (a tuple or list stays written: its items are operands, each with its rank)
        if isinstance(node, (ast.Tuple, ast.List)):
            return type(node)([self._operand(e, out) for e in node.elts], ast.Load())
        return self._operand(node, out)

    def _flat_block(self, body):
        out = []
        for stmt in body:
            if isinstance(stmt, ast.Assign) and self._uses(stmt.value):
                if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                    raise Unbatchable("a batched value unpacked")
                stmt.value = self._flat(stmt.value, out)
            elif isinstance(stmt, ast.Return) and stmt.value is not None and \
                    self._uses(stmt.value):
                value = stmt.value
                stmt.value = self._item(value, out) if isinstance(value, ast.Tuple) else \
                    self._operand(value, out)
            elif isinstance(stmt, (ast.If, ast.While, ast.For)):
                stmt.body = self._flat_block(stmt.body)
                stmt.orelse = self._flat_block(stmt.orelse) if stmt.orelse else []
            out.append(stmt)
        return out

    # -- the probe: the flattened program run once unbatched, each value's rank noted --

    def probe_source(self) -> str:
        fn = ast.FunctionDef(self.fn.name + "_probe", self.fn.args,
                             self._noted_block(self.fn.body, top=True), [], None,
                             type_params=[])
        return ast.unparse(ast.fix_missing_locations(ast.Module([fn], [])))

    def _note(self, name):
        return ast.Expr(_call("_probe_note", _const(name), _name(name)))

    def _noted_block(self, body, top=False):
        block = self.blocks
        self.blocks += 1
        out = [ast.Expr(_call("_probe_reach", _const(block)))]
        if top:
            local = {n.id for n in ast.walk(self.fn) if isinstance(n, ast.Name) and
                     isinstance(n.ctx, ast.Store)} | set(self.params)
            read = sorted({n.id for n in ast.walk(self.fn) if isinstance(n, ast.Name)
                           and n.id not in local and n.id in self.names})
            out += [self._note(p) for p in [*self.params, *read]]
        for stmt in body:
            stmt = _copy(stmt)
            if isinstance(stmt, (ast.If, ast.While, ast.For)):
                stmt.body = self._noted_block(stmt.body)
                stmt.orelse = self._noted_block(stmt.orelse) if stmt.orelse else []
                if isinstance(stmt, ast.For):
                    stmt.body[1:1] = [self._note(n.id) for n in ast.walk(stmt.target)
                                      if isinstance(n, ast.Name)]
            out.append(stmt)
            if isinstance(stmt, ast.Assign):
                out += [self._note(n.id) for t in stmt.targets for n in ast.walk(t)
                        if isinstance(n, ast.Name)]
        return out

    def note(self, name, value):
        if value is None or type(value) is _Unbound:
            return
        self.records.setdefault(name, set()).add(_rank(value))

    def reach(self, block):
        self.reached.add(block)

    # -- the batched program --

    def rank(self, node) -> int:
        if isinstance(node, ast.Constant):
            return np.ndim(node.value)
        if not isinstance(node, ast.Name):
            raise Unbatchable("an operand without a rank")
        ranks = self.records.get(node.id, set())
        if len(ranks) != 1 or "other" in ranks:
            why = "no rank" if not ranks else "several ranks" if len(ranks) > 1 else \
                "not an array"
            raise Unbatchable(f"{node.id} has {why}")
        return next(iter(ranks))

    def is_batched(self, node) -> bool:
        return isinstance(node, ast.Name) and node.id in self.batched

    def batched_source(self) -> str:
        self.blocks = 0
        self.returns = None
        self.dead = self._dead()
        body = self._batched_block(self.fn.body)
        first = self.tangents[0]
        k = ast.Assign([_name(self.k, True)], ast.Subscript(
            ast.Attribute(_name(first), "shape", ast.Load()), _const(0), ast.Load()), lineno=0)
        doc = [self.fn.body[0]] if isinstance(self.fn.body[0], ast.Expr) and isinstance(
            self.fn.body[0].value, ast.Constant) else []
        fn = ast.FunctionDef(self.fn.name + "_batched", self.fn.args,
                             doc + [k] + body[len(doc):], [], None, type_params=[])
        return ast.unparse(ast.fix_missing_locations(ast.Module([fn], []))) + "\n"

    def _dead(self) -> set:
        """The batched assignments whose value nothing reads (the column's program
        computes them, for nothing): k columns of them are not worth computing; and the
        operands flattened out of them (temporaries, batched or not), then read by none."""
        dead = set()
        while True:
            read = self._read(dead)
            more = {id(stmt) for stmt in ast.walk(self.fn) if isinstance(stmt, ast.Assign)
                    and id(stmt) not in dead and isinstance(stmt.targets[0], ast.Name)
                    and (stmt.targets[0].id in self.batched or
                         stmt.targets[0].id.startswith(self.prefix))
                    and stmt.targets[0].id not in read}
            if not more:
                self.dead_names = {stmt.targets[0].id for stmt in ast.walk(self.fn)
                                   if id(stmt) in dead}
                return dead
            dead |= more

    def _read(self, dead) -> set:
        read = set()

        def walk(node):
            if isinstance(node, ast.Assign) and id(node) in dead:
                return
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                read.add(node.id)
            for child in ast.iter_child_nodes(node):
                walk(child)
        walk(self.fn)
        return read

    def _skipped(self, body):
        """Count the blocks of ``body`` as the probe numbered them, without rules."""
        self.blocks += 1
        for stmt in body:
            if isinstance(stmt, (ast.If, ast.While, ast.For)):
                self._skipped(stmt.body)
                if stmt.orelse:
                    self._skipped(stmt.orelse)

    def _batched_block(self, body):
        block = self.blocks
        if block not in self.reached:
            self._skipped(body)
            return [ast.Raise(_call("_Unprobed"), None)]
        self.blocks += 1
        # (the blocks are numbered as the probe numbered them)
        out = [self._batched(stmt) for stmt in body if id(stmt) not in self.dead]
        for stmt in out:
            if isinstance(stmt, ast.Delete):
                stmt.targets = [t for t in stmt.targets if not (
                    isinstance(t, ast.Name) and t.id in self.dead_names)]
        out = [stmt for stmt in out if not isinstance(stmt, ast.Delete) or stmt.targets]
        return out or [ast.Pass()]

    def _batched(self, stmt):
        if isinstance(stmt, (ast.If, ast.While)):
            if self._uses(stmt.test):
                raise Unbatchable("a test of a value computed from the tangents")
            test = self._shaped(stmt.test)
            body = self._batched_block(stmt.body)
            orelse = self._batched_block(stmt.orelse) if stmt.orelse else []
            return type(stmt)(test, body, orelse)
        if isinstance(stmt, ast.For):
            if any(n.id in self.batched for n in ast.walk(stmt.target)
                   if isinstance(n, ast.Name)):
                raise Unbatchable("a loop variable that is batched elsewhere")
            body = self._batched_block(stmt.body)
            orelse = self._batched_block(stmt.orelse) if stmt.orelse else []
            return ast.For(stmt.target, self._shaped(stmt.iter), body, orelse, lineno=0)
        if isinstance(stmt, ast.Assign):
            target = stmt.targets[0]
            if self._uses(stmt.value):
                return ast.Assign(stmt.targets, self._rule(stmt.value, self.rank(target)),
                                  lineno=0)
            value = self._shaped(stmt.value)
            if any(n.id in self.batched for t in stmt.targets for n in ast.walk(t)
                   if isinstance(n, ast.Name)):
                if len(stmt.targets) != 1 or not isinstance(target, ast.Name):
                    raise Unbatchable("a batched value unpacked")
                value = _call("_batch_lift", value, _name(self.k))
            return ast.Assign(stmt.targets, value, lineno=0)
        if isinstance(stmt, ast.Return):
            return self._return(stmt)
        if isinstance(stmt, (ast.Expr, ast.Assert, ast.Raise)):
            if any(self._uses(n) for n in ast.iter_child_nodes(stmt)):
                raise Unbatchable(f"a batched value in {type(stmt).__name__}")
            return self._shaped(stmt)
        if isinstance(stmt, (ast.Delete, ast.Pass, ast.Break, ast.Continue)):
            return stmt
        raise Unbatchable(f"a {type(stmt).__name__} statement")

    def _return(self, stmt):
        value = stmt.value
        items = value.elts if isinstance(value, ast.Tuple) else [value]
        flags = (isinstance(value, ast.Tuple), tuple(
            item is not None and self._uses(item) for item in items))
        if self.returns is not None and self.returns != flags:
            raise Unbatchable("returns batched on one path, not on another")
        self.returns = flags
        if value is None:
            return stmt
        items = [item if self.is_batched(item) else self._shaped(item) for item in items]
        return ast.Return(ast.Tuple(items, ast.Load()) if flags[0] else items[0])

    def _shaped(self, node, logical=False):
        """An unbatched expression with each batched name read for its shape given as its
        column's shape (``logical``: the expression is itself read for its shape)."""
        shaped = _Shaped(self)
        node = _copy(node)
        return shaped.visit(shaped._logical(node) if logical else node)

    # -- the rules, one operation each (operands: names and constants) --

    def _pad(self, node, rank):
        """A batched operand with new axes after the batch axis, up to ``rank``."""
        if not self.is_batched(node):
            return node
        extra = rank - self.rank(node)
        if extra <= 0:
            return node
        index = ast.Tuple([ast.Slice()] + [_const(None)] * extra, ast.Load())
        return ast.Subscript(node, index, ast.Load())

    def _rule(self, node, rank):
        if isinstance(node, ast.Name):
            return node
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.MatMult):
                return self._matmul(node.left, node.right)
            return ast.BinOp(self._pad(node.left, rank), node.op, self._pad(node.right, rank))
        if isinstance(node, ast.UnaryOp):
            return ast.UnaryOp(node.op, self._pad(node.operand, rank))
        if isinstance(node, ast.Compare):
            return ast.Compare(self._pad(node.left, rank), node.ops,
                               [self._pad(node.comparators[0], rank)])
        if isinstance(node, ast.Subscript):
            return self._index(node)
        if isinstance(node, ast.Attribute):
            if node.attr == "T":
                return self._transposed(node.value)
            raise Unbatchable(f".{node.attr} of a batched value")
        if isinstance(node, ast.Call):
            return self._called(node, rank)
        if isinstance(node, ast.IfExp):
            return ast.IfExp(self._shaped(node.test), self._pad(node.body, rank),
                             self._pad(node.orelse, rank))
        raise Unbatchable(f"{type(node).__name__} of a batched value")

    def _matmul(self, a, b):
        ra, rb = self.rank(a), self.rank(b)
        ab, bb = self.is_batched(a), self.is_batched(b)
        if ab and bb:
            raise Unbatchable("a product of two batched values")
        if ra == 0 or rb == 0:
            raise Unbatchable("matmul of a scalar")
        if ab and (ra <= 2 and rb <= 2):
            return ast.BinOp(a, ast.MatMult(), b)
        if bb and ra == 1 and rb == 1:
            return ast.BinOp(b, ast.MatMult(), a)
        if bb and ra == 2 and rb == 1:  # A @ t for each column t: t @ A.T
            return ast.BinOp(b, ast.MatMult(), ast.Attribute(a, "T", ast.Load()))
        if bb and ra == 1 and rb == 2:
            return ast.BinOp(a, ast.MatMult(), b)
        if ra >= 2 and rb >= 2:
            top = max(ra, rb)
            return ast.BinOp(self._pad(a, top), ast.MatMult(), self._pad(b, top))
        raise Unbatchable(f"matmul of ranks {ra} and {rb}")

    def _transposed(self, node, axes=None):
        r = self.rank(node)
        axes = list(range(r))[::-1] if axes is None else [a % r for a in axes]
        if axes == list(range(r)):
            return node
        order = ast.Tuple([_const(0)] + [_const(a + 1) for a in axes], ast.Load())
        return _call(ast.Attribute(node, "transpose", ast.Load()), order)

    def _index(self, node):
        index = node.slice
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        plain = all(isinstance(i, ast.Slice) or isinstance(i, ast.Constant) and (
            i.value is None or i.value is Ellipsis or type(i.value) is int) for i in items)
        if plain and not isinstance(index, ast.Name):
            return ast.Subscript(node.value, ast.Tuple([ast.Slice()] + items, ast.Load()),
                                 ast.Load())
        if isinstance(index, ast.Tuple):
            index = ast.Tuple([_slice_call(i) for i in items], ast.Load())
        elif isinstance(index, ast.Slice):
            index = _slice_call(index)
        return ast.Subscript(node.value, _call("_batch_index", self._shaped(index)),
                             ast.Load())

    def _axis(self, node, rank, default):
        """A reduction's (or join's) axis for the batched operand: non-negative axes one
        further, None all but the batch axis."""
        if node is None:
            node = _const(default)
        if isinstance(node, ast.Constant) and (node.value is None or type(node.value) is int):
            return _const(_batch_axis(node.value, rank))
        if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) and
                                               type(e.value) is int for e in node.elts):
            return _const(_batch_axis(tuple(e.value for e in node.elts), rank))
        return _call("_batch_axis", self._shaped(node), _const(rank))

    def _called(self, node, rank):
        func = node.func
        args = node.args
        keywords = {k.arg: k.value for k in node.keywords}
        if isinstance(func, ast.Attribute) and self.is_batched(func.value):
            return self._method(func.value, func.attr, args, keywords, rank)
        fn = _resolve(func, self.names)
        if fn is None or not _hashable(fn):
            raise Unbatchable(f"a call of {ast.unparse(func)}")
        batched = [self.is_batched(a) for a in args]
        if isinstance(fn, np.ufunc) or fn in _ELEMENTWISE:
            if set(keywords) - {"dtype"}:
                raise Unbatchable(f"{ast.unparse(func)} with {sorted(keywords)}")
            return ast.Call(func, [self._pad(a, rank) for a in args], node.keywords)
        if getattr(fn, "__name__", None) == "outer" and isinstance(
                getattr(fn, "__self__", None), np.ufunc) or fn is np.outer:
            return self._outer(func if fn is not np.outer else None, args, keywords)
        if fn in _REDUCTIONS:
            if any(batched[1:]) or not batched[:1] or set(keywords) - {
                    "axis", "keepdims", "dtype", "ddof"}:
                raise Unbatchable(f"{ast.unparse(func)} of these arguments")
            axis = args[1] if len(args) > 1 else keywords.pop("axis", None)
            kept = [ast.keyword(k, v) for k, v in keywords.items()]
            return ast.Call(func, [args[0], self._axis(axis, self.rank(args[0]), None),
                                   *args[2:]], kept)
        if fn in _SAME_SHAPE:
            if any(batched[1:]) or not batched[:1] or set(keywords) - _SAME_SHAPE_KEYWORDS:
                raise Unbatchable(f"{ast.unparse(func)} of these arguments")
            return node
        if fn is np.transpose or fn is np.swapaxes or fn is np.moveaxis or \
                fn is np.expand_dims or fn is np.squeeze or fn is np.reshape or \
                fn is np.broadcast_to:
            return self._shaping(fn, args, keywords, rank)
        if fn is np.dot or fn is np.matmul:
            if keywords or len(args) != 2:
                raise Unbatchable(f"{ast.unparse(func)} with these arguments")
            if self.rank(args[0]) == 0 or self.rank(args[1]) == 0:
                return ast.BinOp(self._pad(args[0], rank), ast.Mult(), self._pad(args[1], rank))
            if fn is np.dot and max(self.rank(args[0]), self.rank(args[1])) > 2:
                raise Unbatchable("np.dot of more than 2 axes")
            return self._matmul(args[0], args[1])
        if fn is np.stack or fn is np.concatenate:
            return self._joined(func, fn, args, keywords, rank)
        return self._helper(func, fn, node, batched, rank)

    def _matmul_grad(self, func, args, batched):
        """``_matmul_grad(g, a, b, which)``: the operand ``which`` is read for its shape;
        g batched and the other operand not: one product; else column by column."""
        which = args[3]
        if len(args) != 4 or not isinstance(which, ast.Constant) or which.value not in (0, 1):
            raise Unbatchable("_matmul_grad of these arguments")
        shape_only = 1 + which.value
        args = [self._shaped(a, logical=True) if i == shape_only else a
                for i, a in enumerate(args)]
        flags = [b and i != shape_only for i, b in enumerate(batched)]
        if flags == [True, False, False, False]:
            return _call("_batch_matmul_grad", *args)
        return _call("_batch_map", func, ast.Tuple(list(map(_const, flags)), ast.Load()), *args)

    def _method(self, value, attr, args, keywords, rank):
        if attr in ("copy", "astype") and not any(map(self._uses, args)) and \
                set(keywords) <= {"dtype", "copy", "order"}:
            return _call(ast.Attribute(value, attr, ast.Load()), *args,
                         keywords=[ast.keyword(k, v) for k, v in keywords.items()])
        if attr == "reshape" and not keywords and not any(map(self._uses, args)):
            return _call("_batch_reshape", value, *map(self._shaped, args))
        if attr == "transpose" and not keywords and not args:
            return self._transposed(value)
        raise Unbatchable(f"the method .{attr} of a batched value")

    def _outer(self, func, args, keywords):
        if keywords or len(args) != 2:
            raise Unbatchable("outer with these arguments")
        a, b = args
        ra, rb = self.rank(a), self.rank(b)
        if func is None and (ra != 1 or rb != 1):
            raise Unbatchable("np.outer of other than vectors")
        ufunc = func if func is not None else ast.Attribute(
            self._np(), "multiply", ast.Load())
        if isinstance(func, ast.Attribute):
            ufunc = func.value
        left = ast.Subscript(a, ast.Tuple([_const(Ellipsis)] + [_const(None)] * rb,
                                          ast.Load()), ast.Load()) if rb else a
        right = ast.Subscript(b, ast.Tuple([ast.Slice()] + [_const(None)] * ra, ast.Load()),
                              ast.Load()) if self.is_batched(b) and ra else b
        return _call(ufunc, left, right)

    def _np(self):
        alias = next((n for n, v in self.names.items() if v is np), None)
        if alias is None:
            raise Unbatchable("NumPy not imported by name")
        return _name(alias)

    def _shaping(self, fn, args, keywords, rank):
        if not args or not self.is_batched(args[0]) or any(map(self.is_batched, args[1:])):
            raise Unbatchable(f"{fn.__name__} of these arguments")
        value, rest = args[0], list(args[1:])
        r = self.rank(value)
        if fn is np.transpose:
            axes = rest[0] if rest else keywords.pop("axes", None)
            if keywords:
                raise Unbatchable("np.transpose with these arguments")
            if axes is None or isinstance(axes, ast.Constant) and axes.value is None:
                return self._transposed(value)
            if isinstance(axes, (ast.Tuple, ast.List)) and all(
                    isinstance(e, ast.Constant) and type(e.value) is int for e in axes.elts):
                return self._transposed(value, [e.value for e in axes.elts])
            raise Unbatchable("np.transpose of axes not written")
        if fn is np.reshape:
            shape = rest[0] if rest else keywords.pop("newshape", keywords.pop("shape", None))
            if keywords or shape is None:
                raise Unbatchable("np.reshape with these arguments")
            return _call("_batch_reshape", value, self._shaped(shape))
        if fn is np.broadcast_to:
            shape = rest[0] if rest else keywords.pop("shape", None)
            if keywords or shape is None:
                raise Unbatchable("np.broadcast_to with these arguments")
            return _call("_batch_broadcast_to", value, self._shaped(shape), _const(r))
        if keywords:
            raise Unbatchable(f"{fn.__name__} with keywords")
        if fn is np.squeeze and not rest:
            raise Unbatchable("np.squeeze without an axis")
        # swapaxes, moveaxis (axes of the operand), expand_dims (of the result), squeeze
        of = rank if fn is np.expand_dims else r
        axes = [self._axis(a, of, None) for a in rest]
        return _call(ast.Attribute(self._np(), fn.__name__, ast.Load()), value, *axes)

    def _joined(self, func, fn, args, keywords, rank):
        if len(args) > 1:
            keywords.setdefault("axis", args[1])
        if not args or not isinstance(args[0], (ast.List, ast.Tuple)) or \
                set(keywords) - {"axis"}:
            raise Unbatchable(f"{fn.__name__} with these arguments")
        items = [e if self.is_batched(e) else _call("_batch_lift", e, _name(self.k))
                 for e in args[0].elts]
        axis = keywords.get("axis")
        if isinstance(axis, ast.Constant) and axis.value is None:
            raise Unbatchable(f"{fn.__name__} with axis=None")
        axis = self._axis(axis, rank, 0)
        return _call(func, ast.List(items, ast.Load()), keywords=[ast.keyword("axis", axis)])

    def _helper(self, func, fn, node, batched, rank):
        args = node.args
        name = getattr(fn, "__name__", "")
        if getattr(runtime, name, None) is not fn or not name.startswith("_"):
            raise Unbatchable(f"a call of {ast.unparse(func)} on a batched value")
        if node.keywords and not (fn is _R._fit and [k.arg for k in node.keywords] == [
                "copy"]):
            raise Unbatchable(f"{name} with keywords")
        positions = _SHAPE_READERS.get(fn, ())
        shaped = [self._shaped(a, logical=True) if i in positions else a
                  for i, a in enumerate(args)]
        if fn is _R._matmul_grad:
            return self._matmul_grad(func, args, batched)
        if fn in _COUNTERPARTS:
            if any(b for i, b in enumerate(batched) if i and i not in positions) or \
                    not batched[0]:
                raise Unbatchable(f"{name} of these arguments")
            if fn is _R._unbroadcast and len(args) == 3 and isinstance(args[2], ast.Tuple):
                # (the operands whose shapes g is broadcast to: the batched ones given as
                # they are, with a flag, not through _batch_logical's view of a column)
                like = args[2].elts
                flags = [self.is_batched(e) for e in like]
                return _call("_batch_unbroadcast", shaped[0], shaped[1], ast.Tuple(
                    [e if f else self._shaped(e) for e, f in zip(like, flags, strict=True)],
                    ast.Load()), ast.Tuple([_const(f) for f in flags], ast.Load()))
            return _call(_COUNTERPARTS[fn], *shaped)
        if fn is _R._fit:  # (a new array, or a view the caller copies: copy= is moot)
            return _call("_batch_fit", *shaped[:2], _name(self.k))
        if fn is _R._scatter_add:
            if not batched[1]:
                return _call(func, *shaped)  # (acc alone batched: acc + _scatter(...))
            return _call("_batch_scatter_add", *shaped)
        if fn is _R._written:
            a, index, v = args
            if not batched[0]:
                a = _call("_batch_lift", a, _name(self.k))
            return _call("_batch_written", a, self._shaped(index), v, _const(batched[2]))
        if name.endswith(("_grad", "_share", "_part")):
            flags = ast.Tuple([_const(b and i not in positions) for i, b in enumerate(
                batched)], ast.Load())
            return _call("_batch_map", func, flags, *shaped)
        raise Unbatchable(f"{name} of a batched value")


def _rank(value):
    """A value's number of axes as the probe notes it ("other": not an array or number)."""
    if isinstance(value, (np.ndarray, np.generic, _Shape, float, int, complex)):
        return np.ndim(value)
    return "other"


def _slice_call(node):
    if not isinstance(node, ast.Slice):
        return node
    parts = [node.lower, node.upper, node.step]
    return _call("slice", *[p if p is not None else _const(None) for p in parts])


def _copy(node):
    """A copy of an AST node and all below it (as copy.deepcopy, five times as fast: an
    AST is a tree, so no memo is needed)."""
    if isinstance(node, ast.AST):
        new = type(node).__new__(type(node))
        for name in node._fields:
            setattr(new, name, _copy(getattr(node, name, None)))
        for name in node._attributes:
            if hasattr(node, name):
                setattr(new, name, getattr(node, name))
        return new
    if isinstance(node, list):
        return [_copy(item) for item in node]
    return node


def _is_none_test(node):
    # (``dx is not None``: whether an adjoint has had anything flow back, every column alike)
    return isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
        node.ops[0], (ast.Is, ast.IsNot)) and isinstance(node.left, ast.Name) and isinstance(
        node.comparators[0], ast.Constant) and node.comparators[0].value is None


class _Shaped(ast.NodeTransformer):
    """Batched names read for their shape, given as their column's shape."""

    def __init__(self, program):
        self.program = program

    def visit_Attribute(self, node):
        if node.attr in _SHAPE_ATTRIBUTES - {"dtype"} and self.program.is_batched(node.value):
            node.value = _call("_batch_logical", node.value)
            return node
        return self.generic_visit(node)

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id == "_batch_logical":
            return node
        fn = _resolve(node.func, self.program.names)
        if fn is len and len(node.args) == 1 and self.program.is_batched(node.args[0]):
            return ast.Subscript(ast.Attribute(_call("_batch_logical", node.args[0]), "shape",
                                               ast.Load()), _const(0), ast.Load())
        positions = _SHAPE_READERS.get(fn, ()) if _hashable(fn) else ()
        args = []
        for i, a in enumerate(node.args):
            if positions is None or i in positions:
                a = self._logical(a)
            args.append(self.visit(a))
        node.args = args
        node.keywords = [self.visit(k) for k in node.keywords]
        return node

    def _logical(self, node):
        if self.program.is_batched(node):
            return _call("_batch_logical", node)
        if isinstance(node, (ast.Tuple, ast.List)):
            return type(node)([self._logical(e) for e in node.elts], ast.Load())
        return node

    def visit_Compare(self, node):
        return node if _is_none_test(node) else self.generic_visit(node)

    def visit_Name(self, node):
        if self.program.is_batched(node):
            raise Unbatchable(f"{node.id} read where the rules do not batch it")
        return node


# --- a program's batched version, built once per compiled program and tangents ---


class Batched:
    """The batched version of one compiled program (``built``, a ``build._Built``) in
    the parameters ``tangents``: ``run`` gives all its columns, or None where the column
    loop must run (``reason`` says why, where it never batches)."""

    def __init__(self, built, tangents):
        self.built = built
        self.tangents = tuple(tangents)
        self.reason = None
        self.error = None  # why the last call did not batch, where it raised
        self.fn = None
        self.source = None
        self.builds = 0
        self.compressions = {}  # (shape, expect) -> sparsity.Compression
        try:
            self.program = _Program(built.source, built.globals, tangents)
            self.alias = next((n for n, v in built.globals.items() if v is np), "np")
            self.probe = self._compile(self.program.probe_source(), "_probe", {
                "_probe_note": self.program.note, "_probe_reach": self.program.reach})
        except Unbatchable as e:
            self.reason = str(e)

    def _compile(self, source, suffix, extra):
        from .compile import compile_source

        names = {**self.built.globals, **HELPERS, **extra}
        fn, _ = compile_source(source, self.program.fn.name + suffix, names, self.alias)
        return fn

    def _build(self, column):
        """Probe the program on one column's arguments; write and compile the batched
        program from all the probes so far."""
        self.builds += 1
        from . import kinds

        if any(isinstance(kinds.kind(a), kinds.Other) and kinds.kind(a).what == "object"
               for a in column):
            # (its attributes' ranks are not the call's kinds: they may change unseen)
            self.reason = "an object argument"
            return
        self.probe(*column)
        try:
            source = self.program.batched_source()
            self.fn = self._compile(source, "_batched", {})
            self.source = source
        except Unbatchable as e:
            self.reason = str(e)
            self.fn = None

    def run(self, column, batch):
        """The program's outputs, each with a leading axis of the columns, for the
        arguments ``batch`` (the tangents batched); ``column()``: one column's arguments,
        for a probe (made only where one runs). None: run the column loop instead."""
        if self.reason is not None:
            return None
        try:
            if self.fn is None:
                self._build(column())
                if self.fn is None:
                    return None
            for name, _ in self.built.refresh:  # (read afresh by built.ready())
                value = self.built.globals[name]
                if _rank(value) not in self.program.records.get(name, {_rank(value)}):
                    return None  # (module data of another rank than the probe's)
                self.fn.__globals__[name] = value
            try:
                out = self.fn(*batch)
            except _Unprobed:
                if self.builds >= 4:
                    return None
                self._build(column())
                if self.fn is None:
                    return None
                out = self.fn(*batch)
        except Exception as e:  # (the column loop runs, and raises the function's own errors)
            self.error = f"{type(e).__name__}: {e}"
            return None
        as_tuple, flags = self.program.returns
        out = out if as_tuple else (out,)
        if all(flags):  # (the common case: every output computed from the tangents)
            return out
        k = np.shape(batch[self.program.params.index(self.tangents[0])])[0]
        return tuple(o if f else _batch_lift(o, k) for o, f in zip(out, flags, strict=True))


_BATCHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Fewer columns than this run the column loop: a batched program costs a build (a probe,
# a rewrite, a compile: 0.1 s to 0.3 s), which one column does not repay. (The tests batch
# single columns too, to check the rules on every case of their corpora.)
MIN_COLUMNS = 2
_MEMORY = 2 ** 22  # (floats per column batch, times the largest argument's size)
# Sparse Jacobians and Hessians from compressed columns, after a first full call
# (``sparsity``); off, every call runs every column.
SPARSE = True


def batched(built, tangents) -> Batched:
    """The ``Batched`` version of a compiled program in ``tangents``, kept per program."""
    per = _BATCHED.setdefault(built.fn, {})
    found = per.get(tuple(tangents))
    if found is None:
        found = per[tuple(tangents)] = Batched(built, tangents)
    return found


def columns(built, args, slot, shape, expect, into=None):
    """The outputs of the program ``built`` (linear in its parameter at ``slot``) at each
    basis vector of ``shape`` there, the other arguments as given: for each ``(i,
    out_shape)`` of ``expect``, output i with a leading axis of ``size(shape)`` columns (in
    C order), spread to ``out_shape``; None where the program does not batch (the caller
    runs its column loop). ``into``: for each of expect, a new array of zeros shaped
    ``out_shape + shape`` (a Jacobian's block, the columns' axes last), C-contiguous: the
    columns are written there, and it is returned.

    >>> import numpy as np
    >>> from symdiff.higher import tangent_function
    >>> def f(x):
    ...     return np.sin(x) * 2.0
    >>> tf = tangent_function(f, ("x",))
    >>> columns(tf.built, (np.zeros(2), None), 1, (2,), [(1, (2,))])
    [array([[2., 0.],
           [0., 2.]])]
    """
    size = math.prod(shape)
    if size < MIN_COLUMNS:  # (one column: one call of the program, with nothing to build)
        return None
    found = batched(built, (_params(built)[slot],))
    if found.reason is not None:
        return None

    def column():
        first = np.zeros(shape)
        first.flat[:1] = 1.0
        return (*args[:slot], first, *args[slot + 1:])

    key = (shape, *expect)
    known = found.compressions.get(key)
    if SPARSE and known is not None and known.seeds is not None:
        m = len(known.seeds)
        out = _fitted(_run(found, column, args, slot, shape, m, known.tangents), expect, m)
        if out is None:
            return None
        entries = known.rebuilt([o.reshape((m, -1)) for o in out])
        if entries is not None:
            blocks = into if into is not None else [
                np.zeros((*s, *shape), dtype=o.dtype) for o, (_, s) in zip(out, expect,
                                                                            strict=True)]
            for i, block in enumerate(blocks):
                known.write(i, entries[i], block)
            if into is not None:
                return into
            # (views with the columns' axis first)
            return [b.reshape((-1, size)).T.reshape((size, *s))
                    for b, (_, s) in zip(blocks, expect, strict=True)]
        # (an entry outside the pattern: this call runs every column, and the pattern grows)

    def identity(start, stop):
        if stop - start == size:
            return np.eye(size).reshape((size, *shape))
        basis = np.zeros((stop - start, size))
        basis[np.arange(stop - start), np.arange(start, stop)] = 1.0
        return basis.reshape((stop - start, *shape))

    out = _fitted(_run(found, column, args, slot, shape, size, identity), expect, size)
    if out is not None and SPARSE:
        if known is None:
            known = found.compressions[key] = sparsity.Compression(shape)
        known.learn([o.reshape((size, -1)) for o in out])
    if out is None or into is None:
        return out
    for block, o in zip(into, out, strict=True):
        view = block.reshape((*o.shape[1:], size))
        view[...] = o.transpose((*range(1, o.ndim), 0))  # (np.moveaxis: slower)
    return into


def _run(found, column, args, slot, shape, m, rows):
    """The batched program's outputs along m tangents, ``rows(start, stop)`` giving them
    (``(stop - start, *shape)``) in chunks, so that a batch takes memory of the order of
    _MEMORY floats per entry of the largest argument, not a full identity of a large
    parameter; None where the program does not batch. ``column``: as ``Batched.run``."""
    scale = max([a.size for a in args if type(a) is np.ndarray] + [math.prod(shape), 1])
    step = max(1, _MEMORY // scale)
    if m <= step:
        return found.run(column, (*args[:slot], rows(0, m), *args[slot + 1:]))
    parts = []
    for start in range(0, m, step):
        stop = min(m, start + step)
        out = found.run(column, (*args[:slot], rows(start, stop), *args[slot + 1:]))
        if out is None:
            return None
        parts.append(out)
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))


def _fitted(out, expect, m):
    """For each ``(i, out_shape)`` of ``expect``, output i of ``out`` (m columns) spread
    to ``(m, *out_shape)``; None where one does not fit (the caller runs its loop)."""
    if out is None:
        return None
    fitted = []
    for i, out_shape in expect:
        o = out[i]
        if type(o) is not np.ndarray or o.shape[:1] != (m,) or o.ndim - 1 > len(out_shape):
            return None
        if o.shape[1:] == out_shape:
            fitted.append(o)
            continue
        try:
            fitted.append(np.broadcast_to(_batch_pad(o, len(out_shape)), (m, *out_shape)))
        except ValueError:
            return None
    return fitted


def _params(built):
    code = built.fn.__code__
    return code.co_varnames[:code.co_argcount]
