"""Lists the function builds -> list values: comprehensions, ``[]`` and append, what reads them.

The lowering of a function (``lower._Lowering``) mixes this in. A comprehension is lowered
as the loop it is: ``[f(w) for w in ws if c]`` as ``l = []; for w in ws: if c:
l.append(f(w))``, its names its own; so it is unrolled where a loop over the same values
would be (a container being differentiated), and kept as a loop otherwise, with its
conditions kept as branches that run on the values. A list the function builds is a
Python list when the gradient runs, so that np.stack, sum and ``l[-1]`` read it as the
function does; each append makes a new list (``_appended``), so that a loop's tape keeps
each iteration's. Its adjoint is an array of the list's shape (its items stacked), which
each append splits back into the list's before it and the item's.
"""

from __future__ import annotations

import ast
import builtins
import copy

import numpy as np

from . import kinds as K
from .errors import SymdiffError
from .ir import Eqn
from .rules import SEQUENCE, ArrayOp

# One value appended: the list's adjoint is the items' stacked, the last row the item's.
APPEND = ArrayOp(("_appended",), ("items", "item"), {"items": "_list_rest({g})",
                                                         "item": "{g}[-1]"}, linear="joint")
# What reads a whole list, by the function that reads it: its parameters as NumPy's. Each
# is linear in the list's items (forward mode runs it on their tangents).
_READERS = {
    builtins.sum: ArrayOp(("sum",), ("items", "start"),
                          {"items": "_list_sum_grad({g}, {items})",
                           "start": "_unbroadcast({g}, {start})"}, {"start": "0"},
                          linear="joint"),
    np.stack: ArrayOp(("np.stack",), ("arrays", "axis"),
                      {"arrays": "_list_stack_grad({g}, {arrays}, {axis})"}, {"axis": "0"},
                      linear="joint"),
    np.concatenate: ArrayOp(("np.concatenate",), ("arrays", "axis"),
                            {"arrays": "_list_concatenate_grad({g}, {arrays}, {axis})"},
                            {"axis": "0"}, linear="joint"),
    np.array: ArrayOp(("np.array",), ("object", "dtype"),
                      {"object": "_list_array_grad({g}, {object})"}, {"dtype": "None"},
                      linear="joint"),
    builtins.list: ArrayOp(("list",), ("iterable",), {"iterable": "{g}"}, linear="joint"),
    np.asarray: ArrayOp(("np.asarray",), ("a", "dtype"),
                        {"a": "_list_array_grad({g}, {a})"}, {"dtype": "None"},
                        linear="joint"),
}
# An item of a list (or a slice of it), its adjoint in the list's shape.
INDEX = ArrayOp(("x[...]",), ("a", "index"),
                {"a": "_list_index_grad({g}, {a}, {np}.index_exp[{index}])"}, linear="joint")
# Readers of a list whose argument may be a helper's call returning one.
_CALLED = (np.stack, np.concatenate, builtins.sum)


class Lists:
    """Comprehensions and lists built by append; relies on ``lower._Lowering`` for the
    rest (``_statements``, ``_array_op``, ``_bind``, ``env``, ``lists``)."""

    # --- comprehensions ---

    def _comprehension(self, node):
        """``[elt for ... if ...]`` or ``(elt for ...)``: the list the loop builds."""
        if isinstance(node, (ast.SetComp, ast.DictComp)):
            what = "set" if isinstance(node, ast.SetComp) else "dict"
            self.fail(node, f"{what} comprehensions are not supported",
                      "a list comprehension, [f(x) for x in xs]")
        self.counter += 1
        label = str(self.counter)
        result = f"<list{label}>"
        names: dict[str, str] = {}
        for gen in node.generators:
            if gen.is_async:
                self.fail(gen, "async comprehensions are not supported",
                          "a list comprehension, [f(x) for x in xs]")
            for n in ast.walk(gen.target):
                if isinstance(n, ast.Name):
                    names.setdefault(n.id, f"<c{label}.{n.id}>")
        # Python evaluates the first iterable outside the comprehension, the rest inside.
        inner = _Renamer(names)
        body: list = [_at(ast.Expr(ast.Call(
            ast.Attribute(ast.Name(result, ast.Load()), "append", ast.Load()),
            [inner.visit(copy.deepcopy(node.elt))], [])), node.elt)]
        for k, gen in reversed(list(enumerate(node.generators))):
            if gen.ifs:
                test = gen.ifs[0] if len(gen.ifs) == 1 else _at(
                    ast.BoolOp(ast.And(), gen.ifs), gen.ifs[0])
                body = [_at(ast.If(inner.visit(copy.deepcopy(test)), body, []), test)]
            it = copy.deepcopy(gen.iter)
            body = [_at(ast.For(inner.visit(copy.deepcopy(gen.target)),
                                inner.visit(it) if k else it, body, []), gen.iter)]
        start = _at(ast.Assign([ast.Name(result, ast.Store())], ast.List([], ast.Load())), node)
        where, line, before = self.where, self.line, dict(self.env)
        problems = len(self.problems)
        try:
            self._statements([start, *body])
        finally:
            self.where, self.line = where, line
        if len(self.problems) > problems:  # (reported by the statement this is in)
            found = tuple(self.problems[problems:])
            del self.problems[problems:]
            raise SymdiffError(problems=found)
        val = self._name(node, result)
        for key in [k for k in self.env if k not in before]:
            del self.env[key]  # the comprehension's own names
        return val

    # --- building a list ---

    def _empty_list(self, node):
        """``[]``: a new list, to append to."""
        val = self._constant(node)
        self.lists.add(val.code.id)
        return val

    def _starts_a_list(self, name, value) -> bool:
        """``hs = [h0]`` where the function appends to hs later: bound as ``[]`` with h0
        appended, a list the function builds (any other list written out is read as an
        array, as NumPy reads it). False where it is not so."""
        if not (isinstance(value, ast.List) and value.elts and name in _grown(self.parsed.node)
                and not any(isinstance(e, ast.Starred) for e in value.elts)):
            return False
        empty = ast.copy_location(ast.List([], ast.Load()), value)
        self._bind(name, self._empty_list(empty), value)
        self._bind_list(name, ast.copy_location(ast.Name(name, ast.Load()), value),
                        value.elts, value)
        return True

    def _appended(self, node, items: list, where):
        """``items`` (nodes) appended, one by one, to the list ``node`` names."""
        val = None
        for item in items:
            call = _at(ast.Call(ast.Name("_appended", ast.Load()), [node, item], []), where)
            val = self._array_op(call, APPEND, {"items": node, "item": item})
            self._hold(val)
            self.lists.add(val.code.id)
            # The new list, under a name of the statement's own (the caller drops it).
            key = f"<appended{id(call)}>"
            self.env[key] = val.code.id
            node = _at(ast.Name(key, ast.Load()), where)
        return val

    def _list_statement(self, stmt, call) -> bool:
        """``l.append(v)`` and ``l.extend([a, b])`` on a list the function built: ``l`` is
        bound to a new list. False for any other call."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("append", "extend") and
                isinstance(func.value, ast.Name) and self._is_list_node(func.value)):
            return False
        name = func.value.id
        if func.attr == "append":
            if len(call.args) != 1 or call.keywords:
                self.fail(call, "append takes exactly one argument", f"{name}.append(v)")
            items = call.args
        else:
            if len(call.args) != 1 or call.keywords or not isinstance(
                    call.args[0], (ast.List, ast.Tuple)):
                self.fail(call, f"{name}.extend(...) is supported with a list written out",
                          f"{name}.extend([a, b]), or {name}.append(v) for each value")
            items = call.args[0].elts
        self._refuse_shared_list(stmt, name)
        self._bind_list(name, func.value, items, stmt)
        return True

    def _list_augmented(self, stmt) -> bool:
        """``l += [a, b]`` on a list the function built: ``l`` is bound to a new list.
        False where ``l`` is not such a list."""
        target = stmt.target
        load = ast.copy_location(ast.Name(target.id, ast.Load()), target)
        if not self._is_list_node(load):
            return False
        if not isinstance(stmt.op, ast.Add) or not isinstance(stmt.value, ast.List):
            self.fail(stmt, f"this changes the list {target.id} in place, which symdiff "
                      "follows only for items written out", f"{target.id} += [v], "
                      f"{target.id}.append(v)")
        self._refuse_shared_list(stmt, target.id)
        self._bind_list(target.id, load, stmt.value.elts, stmt)
        return True

    def _bind_list(self, name, node, items, where):
        if not items:
            return
        keys = set(self.env)
        val = self._appended(node, list(items), where)
        for key in set(self.env) - keys:
            del self.env[key]
        self.env[name] = val.code.id

    def _list_binop(self, node):
        """``l + [a, b]`` of a list the function built: the list with them appended; any
        other arithmetic on such a list is refused (it would repeat or join it)."""
        left, right = node.left, node.right
        if isinstance(node.op, ast.Add) and self._is_list_node(left) and \
                isinstance(right, (ast.List, ast.Tuple)) and isinstance(right, ast.List):
            if not right.elts:
                return self._expr(left)
            keys = set(self.env)
            val = self._appended(left, list(right.elts), node)
            for key in set(self.env) - keys:
                del self.env[key]
            return val
        return None

    def _refuse_list_operand(self, node):
        """Arithmetic on a list the function built repeats or joins it (2 * l, l + l),
        where its SymPy image would read arithmetic on its items."""
        for side in (node.left, node.right):
            if self._is_list_node(side):
                self.fail(node, f"arithmetic on the list {ast.unparse(side)} repeats or "
                          "joins it, which symdiff does not differentiate",
                          f"{ast.unparse(side)} + [v] or .append(v) to add an item; "
                          f"np.array({ast.unparse(side)}) for arithmetic on its items")

    def _written_list(self, val) -> bool:
        """Whether ``val`` is a list or tuple of values written out (``[x[0], 2.0 * x[1]]``,
        or a name bound to one): an array in the generated code (runtime._as_read)."""
        if val is None or not isinstance(val.code, ast.Name):
            return False
        return self._written_list_name(val.code.id)

    def _written_list_name(self, name) -> bool:
        for eqn in reversed(self.eqns):
            if isinstance(eqn, Eqn) and eqn.out == name:
                return eqn.op is SEQUENCE
        return False

    def _certainly_array(self, val) -> bool:
        """Whether ``val`` is certainly an ndarray: an array's name, or arithmetic on one."""
        names = [s.name for s in val.expr.free_symbols] if val.expr is not None else (
            [val.code.id] if isinstance(val.code, ast.Name) else [])
        return any(n in self.arrays or self.ndims.get(n) or (
            isinstance(self.kinds.get(n), K.Array) and not self.kinds[n].scalar) for n in names)

    def _items_partner(self, val) -> bool:
        """Whether arithmetic of ``val`` with a list is NumPy's, on the list's items: val is
        a differentiated value (a float or an array of them: a NumPy value, or a Python
        float, with which Python refuses list arithmetic), an array, or a float. An int
        (``2 * l``, ``l * n``) or another list would repeat or join it."""
        if self._written_list(val):
            return False
        if val.expr is not None and any(s.name in self.active for s in val.expr.free_symbols):
            return True
        return isinstance(val.value, (float, np.ndarray, np.floating)) and not isinstance(
            val.value, bool) or self._certainly_array(val)

    def _refuse_written_list_arithmetic(self, node, left, right):
        """``[a, b] + [c]``, ``2 * [a, b]``: Python joins or repeats the list, where
        NumPy's reading of it (an array) would add or multiply its items; only arithmetic
        with an array, which NumPy does on the items, is differentiated."""
        for val, other in ((left, right), (right, left)):
            if self._written_list(val) and not self._items_partner(other):
                self.fail(node, "this repeats or joins a list that depends on the "
                          "differentiated inputs (list arithmetic), which symdiff does not "
                          "differentiate", "np.tile(l, n) to repeat it, np.concatenate([a, "
                          "b]) to join them, np.array(l) for arithmetic on its items")

    def _refuse_list_truth(self, node):
        """``if v:``, ``v == w`` of a list of values written out: Python tests the list
        (its length, its items in order), where the array NumPy reads would test each item."""
        parts = [node]
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
        elif isinstance(node, ast.BoolOp):
            parts = node.values
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            parts = [node.operand]
        for part in parts:
            if isinstance(part, ast.Name) and part.id in self.env and \
                    self._written_list_name(self.env[part.id]):
                self.fail(part, f"{part.id} is a list of values read as an array: its truth "
                          "value and comparisons are refused",
                          f"len({part.id}), or a test of its items ({part.id}[0] > 0)")

    def _refuse_shared_list(self, stmt, name):
        """l.append(v) changes l in place: where another name holds the same list, it would
        change too, which the new list the gradient makes does not follow."""
        roots = self._roots(self.env[name])
        others = sorted(n for n, ssa in self.env.items() if n != name and not n.startswith("<")
                        and self._is_list(ssa) and not roots.isdisjoint(self._roots(ssa)))
        if others:
            self.fail(stmt, f"{name} is a list shared with {others[0]}, which this changes "
                      "too, and symdiff does not follow that",
                      f"{others[0]} = list({name}) for a copy, or a list of its own")

    # --- reading a list ---

    def _is_list(self, ssa) -> bool:
        """Whether the SSA name ``ssa`` may hold a list the function built (through the
        merges of branches and loops)."""
        todo, seen = [ssa], set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in self.lists:
                return True
            todo.extend(self.maybe.get(n, ()))
        return False

    def _is_list_node(self, node) -> bool:
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return True
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            return self._is_list_node(node.value)  # hs[1:]
        return isinstance(node, ast.Name) and node.id in self.env and \
            self._is_list(self.env[node.id])

    def _called(self, node):
        """np.stack(helper(x)): the helper's value, which may be a list it built, is read
        first; then the call is lowered with it in place of the helper's call."""
        arg = node.args[0]
        key = f"<arg{id(arg)}>"
        self.env[key] = self._operand(self._expr(arg), arg)
        node = copy.copy(node)
        node.args = [ast.copy_location(ast.Name(key, ast.Load()), arg), *node.args[1:]]
        try:
            return self._call(node)
        finally:
            del self.env[key]

    def _list_index(self, node):
        val = self._array_op(node, INDEX, {"a": node.value, "index": node.slice})
        if isinstance(node.slice, ast.Slice):  # hs[1:]: a list too
            self.lists.add(val.code.id)
        return val

    def _list_call(self, node, obj):
        """A call with a list the function built (or a comprehension) as its first
        argument, where the function reads it as a whole: np.stack(hs), sum(...). None
        for any other call."""
        for n in ast.walk(ast.Tuple(node.args, ast.Load())):
            if isinstance(n, (ast.SetComp, ast.DictComp)):
                self._comprehension(n)  # (refused: said there, not at the call)
        if node.args and isinstance(node.args[0], ast.Call) and obj in _CALLED and \
                not any(isinstance(a, ast.Starred) for a in node.args) and \
                not self._returns_several(node.args[0]):  # (np.split's parts: their own)
            return self._called(node)
        if not node.args or not self._is_list_node(node.args[0]):
            return None
        row = _READERS.get(obj) if _hashable(obj) else None
        if row is None:
            if obj in (builtins.max, builtins.min):
                name = ast.unparse(node.func)
                self.fail(node, f"{name} of a list is not supported",
                          f"np.{obj.__name__}(np.array(l)) of numbers, np.{obj.__name__}imum "
                          "of two arrays")
            return None  # (NumPy reads it as an array: np.sum(l), np.mean(l))
        args = self._arguments(list(node.args), node.keywords, row.params, row.optional,
                               ast.unparse(node.func), node)
        val = self._array_op(node, row, args)
        if obj is builtins.list:  # a copy: a list of its own
            self.lists.add(val.code.id)
        return val


def own_names(code) -> set[int]:
    """The ids of the Name nodes in ``code`` that a comprehension in it binds (``a`` in
    ``any(a > 0 for a in x)``): its own, not the function's."""
    found = set()
    for node in ast.walk(code):
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            bound = {n.id for g in node.generators for n in ast.walk(g.target)
                     if isinstance(n, ast.Name)}
            parts = [g.target for g in node.generators] + [
                t for g in node.generators for t in g.ifs] + [
                g.iter for g in node.generators[1:]] + [
                getattr(node, f) for f in ("elt", "key", "value") if hasattr(node, f)]
            found |= {id(n) for p in parts for n in ast.walk(p)
                      if isinstance(n, ast.Name) and n.id in bound}
    return found


def _hashable(obj) -> bool:
    try:
        hash(obj)
    except TypeError:
        return False
    return True


class _Renamer(ast.NodeTransformer):
    """A comprehension's names to its own, except where an inner one binds them again."""

    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            node.id = self.names[node.id]
        return node

    def _scope(self, node):
        bound = {n.id for g in node.generators for n in ast.walk(g.target)
                 if isinstance(n, ast.Name)}
        first = node.generators[0]
        first.iter = self.visit(first.iter)  # (evaluated outside the inner comprehension)
        inner = _Renamer({k: v for k, v in self.names.items() if k not in bound})
        for i, g in enumerate(node.generators):
            if i:
                g.iter = inner.visit(g.iter)
            g.ifs = [inner.visit(t) for t in g.ifs]
        for field in ("elt", "key", "value"):
            if hasattr(node, field):
                setattr(node, field, inner.visit(getattr(node, field)))
        return node

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _scope


def _at(node, like):
    for n in ast.walk(node):
        if not hasattr(n, "lineno") or getattr(n, "lineno", None) is None:
            ast.copy_location(n, like)
    return node


def _grown(node) -> set[str]:
    """The names a function appends to (``hs.append(h)``, ``hs.extend(...)``, ``hs +=
    [h]``)."""
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                n.func.attr in ("append", "extend") and isinstance(n.func.value, ast.Name):
            names.add(n.func.value.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and \
                isinstance(n.target, ast.Name) and isinstance(n.value, ast.List):
            names.add(n.target.id)
    return names
