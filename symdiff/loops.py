"""Loops -> Loop blocks of the IR: carried variables, an index, and a body lowered once.

The statement half of lowering (``lower._Lowering``) mixes this in. A loop's variables
that its body assigns are carried: a phi name holds each one at the start of an iteration
and after the loop; loops over arrays run over an index and read ``row = X[k]``, so the
gradient flows back into ``X``.
"""

from __future__ import annotations

import ast

import numpy as np

from . import containers
from . import kinds as K
from .exits import ExitError, break_flag, single_exit
from .expressions import describe
from .ir import Loop
from .parse import MISSING, scoped_walk


class Loops:
    """for and while loops; relies on ``lower._Lowering`` for everything else."""

    def _loop(self, stmt):
        if containers.unroll(self, stmt):
            return
        self.counter += 1
        flag = break_flag(str(self.counter)) if _breaks(stmt.body) else None
        try:
            body, _ = single_exit(stmt.body, str(self.counter), stmt)
        except ExitError as e:
            self.fail(e.node, e.message, e.hint)
        if flag is not None:
            body = [ast.copy_location(ast.Assign([ast.Name(flag, ast.Store())],
                                                 ast.Constant(False)), stmt)] + body
        where, line = self.where, self.line
        outside = set(self.env)
        header, target, prologue = (self._iteration(stmt) if isinstance(stmt, ast.For)
                                    else (None, None, []))
        # Every variable the body assigns, and the loop's own targets: after the loop (or
        # after an iteration) each holds its last value, or its value before the loop.
        targets = [t for t in _target_names(stmt) if t not in assigned(body, appends=True)]
        carried = assigned(body, appends=True) + sorted(targets)
        carried += [n for n in self._written(body) if n not in carried]  # (out[t] = ...)
        forced: set[str] = set()
        while True:  # again if a variable turns out active only through the loop body
            state = (len(self.eqns), set(self.names.taken), set(self.bound), set(self.active),
                     dict(self.env), len(self.problems), dict(self.data_globals),
                     dict(self.globals_used), self.counter, dict(self.globals_where))
            lists = set(self.lists)  # (names taken again on a second pass may be other values)
            phis = []
            for name in carried:
                init = self.env.get(name)
                phi = self._ssa(name)
                self.bound.add(phi)
                if init is not None:  # the same array as before the loop, at first
                    self.alias[phi] = self._root(init)
                if init in self.active or name in forced:
                    self.active.add(phi)
                if init is not None and self._is_list(init):
                    self.lists.add(phi)  # hs = [] before the loop, hs.append(h) in it
                phis.append((phi, init))
                self.env[name] = phi
            if isinstance(stmt, ast.While):
                self._refuse_list_truth(stmt.test)
                header = self._constant_code(stmt.test)
            if target is not None:
                self.bound.add(target[1])
                self.env[target[0]] = target[1]
            saved, memo = self.eqns, dict(self.memo)
            self.eqns = []
            self.depth += 1
            self.headers.append(header if isinstance(stmt, ast.For) else None)
            try:
                for bound, value in prologue:
                    self._assign(bound, value)
                self._statements(body)
            finally:
                self.depth -= 1
                self.headers.pop()
                self.memo = memo
            eqns, self.eqns = self.eqns, saved
            nexts = [self.env.get(n, phi) for n, (phi, _) in zip(carried, phis, strict=True)]
            nexts, trees = containers.carried(self, stmt, carried, phis, nexts)
            late = {n for n, (phi, _), nxt in zip(carried, phis, nexts, strict=True)
                    if nxt in self.active and phi not in self.active}
            # A variable may be, from the second iteration on and after the loop, the array
            # the body left in it: again if that is news (b = M in the body, b -= 1 after).
            grown = False
            for (phi, init), nxt in zip(phis, nexts, strict=True):
                may = {n for n in (init, nxt) if n is not None and n != phi}
                grown |= not may <= self.maybe.get(phi, set())
                self.maybe.setdefault(phi, set()).update(may)
            if not late and not grown:
                break
            forced |= late
            (n_eqns, taken, bound, active, env, n_problems, data, used,
             self.counter, self.globals_where) = state
            del self.eqns[n_eqns:]
            del self.problems[n_problems:]
            self.names.taken, self.bound, self.active, self.env = taken, bound, active, env
            self.data_globals, self.globals_used = data, used
            self.lists = lists
        # Names the body bound that the loop does not carry are the body's own (an inner
        # loop's break flag, an index): an iteration may never run, so after the loop they
        # hold what they held before it, as Python's do.
        before = state[4]
        for name in [n for n in self.env if n not in before and n not in carried]:
            del self.env[name]
        self.env.update({n: before[n] for n in before if n not in carried})
        for name, (phi, _) in zip(carried, phis, strict=True):
            self.env[name] = phi  # after the loop, a carried variable holds its last value
        self.env.update(trees)
        for name in set(self.env) - outside:
            if name.startswith("<iter"):  # the array looped over: the loop's own
                del self.env[name]
        flag_name = dict(zip(carried, [p for p, _ in phis], strict=True)).get(flag)
        self.where, self.line = where, line
        self.eqns.append(Loop(
            "for" if isinstance(stmt, ast.For) else "while", header,
            target[1] if target else None,
            tuple((phi, init, nxt) for (phi, init), nxt in zip(phis, nexts, strict=True)),
            tuple(eqns), flag_name, line, where, tuple(carried)))

    def _iteration(self, stmt):
        """A for loop's header code, its index variable, and the names it binds each step.

        ``range(...)`` loops run as written; loops over arrays (``for row in X``,
        ``enumerate``, ``zip``) run over an index, reading ``row = X[k]``, so the gradient
        flows back into ``X`` through indexing.
        """
        it, target = stmt.iter, stmt.target
        fn = self._callee(it) if isinstance(it, ast.Call) else None
        if fn is range:
            if not isinstance(target, ast.Name):
                self.fail(target, "a range loop binds one name", "for i in range(n):")
            return self._constant_code(it), (target.id, self._bound_ssa(target.id)), []
        args = it.args if fn in (enumerate, zip) else [it]
        written = [self._as_written(a) for a in args]
        if written and all(written):
            # Iterating a dict gives its keys, a set or an iterator has no positions: the loop
            # runs over the value as written, its items values without gradient.
            if isinstance(target, ast.Name):
                return self._constant_code(it), (target.id, self._bound_ssa(target.id)), []
            self.counter += 1
            key = f"<k{self.counter}>"
            return (self._constant_code(it), (key, self.names.fresh("_k", numbered=True)),
                    [(target, ast.copy_location(ast.Name(key, ast.Load()), target))])
        if fn is enumerate:
            if len(it.args) != 1 or it.keywords or not (
                    isinstance(target, ast.Tuple) and len(target.elts) == 2
                    and all(isinstance(t, ast.Name) for t in target.elts)):
                self.fail(it, "enumerate loops are supported in the form "
                          "for i, row in enumerate(X)", "for i, row in enumerate(X):")
            index, row = target.elts
            array = self._iterable(it.args[0])
            return (_range_len([self.env[array]]), (index.id, self._bound_ssa(index.id)),
                    [(row, _index_node(array, index.id, it))])
        self.counter += 1
        key = f"<k{self.counter}>"
        k = (key, self.names.fresh("_k", numbered=True))
        if fn is zip:
            strict = [kw for kw in it.keywords if kw.arg == "strict"]
            if len(strict) != len(it.keywords) or not (
                    isinstance(target, ast.Tuple) and len(target.elts) == len(it.args)
                    and all(isinstance(t, ast.Name) for t in target.elts)):
                self.fail(it, "zip loops are supported in the form for a, b in zip(A, B)",
                          "for a, b in zip(A, B):")
            by_position = [(t, a) for t, a, w in zip(target.elts, it.args, written,
                                                     strict=True) if not w]
            arrays = [self._iterable(a) for _, a in by_position]
            header = _range_len([self.env[a] for a in arrays])
            flag = self._constant_code(strict[0].value) if strict else None
            if strict:
                # zip(..., strict=True) refuses unequal lengths: so does the generated loop.
                header.args = [ast.Call(ast.Name("_zip_len", ast.Load()), [
                    ast.Name(self.env[a], ast.Load()) for a in arrays],
                    [ast.keyword("strict", flag)])]
            if not any(written):
                return (header, k, [(t, _index_node(a, key, it))
                                    for (t, _), a in zip(by_position, arrays, strict=True)])
            # zip(X, d): the arrays by position, beside the others as written.
            index = f"<i{self.counter}>"
            header = ast.Call(ast.Name("zip", ast.Load()), [header] + [
                self._constant_code(a) for a, w in zip(it.args, written, strict=True) if w],
                [ast.keyword("strict", flag)] if strict else [])
            names = [ast.Name(index, ast.Store())] + [
                t for t, w in zip(target.elts, written, strict=True) if w]
            unpacked = ast.Tuple(names, ast.Store())
            for node in ast.walk(unpacked):
                ast.copy_location(node, target)
            return header, k, [(unpacked, ast.copy_location(ast.Name(key, ast.Load()), target))
                               ] + [(t, _index_node(a, index, it))
                                    for (t, _), a in zip(by_position, arrays, strict=True)]
        # for W, b in pairs: each item unpacked as an assignment unpacks it.
        array = self._iterable(it)
        return _range_len([self.env[array]]), k, [(target, _index_node(array, key, it))]

    def _as_written(self, node) -> bool:
        """Whether a for loop runs over ``node`` as written rather than by position: a value
        without gradient that may be something else than an array, a list or a tuple (a
        dict, a set, an iterator: see ``_kind_of``)."""
        if any(isinstance(n, ast.Name) and self.env.get(n.id) in self.active
               for n in ast.walk(node)):
            return False
        kind = self._kind_of(node)
        return kind is not None and not isinstance(kind, (K.Array, K.List, K.Tuple, K.Number))

    def _kind_of(self, node):
        """The kind of a parameter that ``node`` names (through other names bound to
        it), if the gradient is specialised on it; else None."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("keys", "values", "items") and not node.args and \
                isinstance(self._kind_of(node.func.value), K.Dict):
            return K.Other(f"a dict's {node.func.attr}()")
        if isinstance(node, ast.Call) and self._callee(node) in _RUN_AS_WRITTEN and any(
                k is not None and not isinstance(k, (K.Array, K.List, K.Tuple, K.Number))
                for k in map(self._kind_of, node.args)):
            return K.Other("object")  # sorted(d), list(d): d's keys
        if isinstance(node, ast.Attribute):
            # self.table: an attribute of an object (as self is), read when the gradient runs.
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            return K.Other("object") if isinstance(self._kind_of(root), K.Other) else None
        if not isinstance(node, ast.Name):
            return None
        if node.id not in self.env:
            # A module's or a closure's value, read when the gradient runs: an array is
            # looped over by position, anything else as written.
            found = self.parsed.namespace.lookup(node.id)
            return None if found is MISSING or isinstance(found, np.ndarray) or callable(
                found) else K.Other("object")
        found = set()
        for origin in self._origins(self.env[node.id]):
            kind = self.kinds.get(origin)
            if kind is None and origin not in self.active:
                # Made in the function (p["a"], self.d, a helper's result): any object.
                kind = K.Other("object")
            found.add(kind)
        others = [k for k in found if k is not None and not isinstance(
            k, (K.Array, K.List, K.Tuple, K.Number))]
        return others[0] if others else found.pop() if len(found) == 1 else None

    def _origins(self, ssa) -> set[str]:
        """The values ``ssa`` may hold: ``_roots`` without the merges of branches and loops
        (each stands for the values merged into it)."""
        return self._roots(ssa) - self.maybe.keys()

    def _iterable(self, node) -> str:
        """The name of an array a loop runs over (evaluated once, before the loop)."""
        kind = self._kind_of(node)
        if isinstance(kind, K.Number) or isinstance(kind, K.Array) and (
                kind.scalar or kind.ndim == 0):
            self.fail(node, f"{describe(node)} is a number ({kind}) here, which a for loop "
                      "cannot run over", "for i in range(n), for row in X, for x in xs")
        val = self._expr(node)
        if val.expr is None:
            self.fail(node, f"cannot loop over {describe(node)}",
                      "for i in range(n), for row in X, enumerate(X), zip(A, B)")
        name = self._operand(val, node)
        self.counter += 1
        key = f"<iter{self.counter}>"
        self.env[key] = name
        return key

    def _callee(self, call):
        if isinstance(call.func, ast.Name) and call.func.id not in self.env:
            return self.parsed.namespace.lookup(call.func.id)
        return None


# Builtins that make a sequence of what they iterate: over a dict, its keys.
_RUN_AS_WRITTEN = (sorted, list, tuple, set, frozenset, reversed, iter)


def _target_names(stmt) -> set[str]:
    """The names a for loop binds that hold their last value after it (a comprehension's,
    ``<c1.x>``, are its own)."""
    if isinstance(stmt, ast.For):
        return {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)
                and not n.id.startswith("<c")}
    return set()


def _breaks(body) -> bool:
    """Whether ``body`` has a break of its own loop (not of a loop nested in it)."""
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Break):
            return True
        if not isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
    return False


def _range_len(arrays) -> ast.expr:
    lens = [ast.Call(ast.Name("len", ast.Load()), [ast.Name(a, ast.Load())], []) for a in arrays]
    n = lens[0] if len(lens) == 1 else ast.Call(ast.Name("min", ast.Load()), lens, [])
    return ast.Call(ast.Name("range", ast.Load()), [n], [])


def _index_node(array_key, index_key, like) -> ast.expr:
    node = ast.Subscript(ast.Name(array_key, ast.Load()), ast.Name(index_key, ast.Load()),
                         ast.Load())
    for n in ast.walk(node):
        ast.copy_location(n, like)
    return node


def assigned(body, appends=False) -> list[str]:
    """Names a statement list assigns, in order of first assignment (nested defs aside).
    ``appends``: a list appended to (``hs.append(h)``) counts as assigned (a new list is
    bound to it); a comprehension's own names do not."""
    found = {}
    for stmt in body:
        nodes = list(scoped_walk([stmt]))
        own = {id(n) for c in nodes if appends and isinstance(c, _COMPREHENSIONS)
               for g in c.generators for n in ast.walk(g.target)}
        for n in sorted(nodes, key=lambda n: (getattr(n, "lineno", 0),
                                              getattr(n, "col_offset", 0))):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in own:
                found.setdefault(n.id, None)
            elif appends and isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                    and n.func.attr in ("append", "extend") and isinstance(n.func.value,
                                                                           ast.Name):
                found.setdefault(n.func.value.id, None)
    return list(found)


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
