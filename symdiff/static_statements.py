"""A module-level statement -> the names it binds and the names it may change in place.

In place: ``W[0] = v``, ``L.append(v)``, ``np.copyto(W, v)``; and whether an ``if`` is a
``__main__`` guard."""

from __future__ import annotations

import ast

import numpy as np


def bound_names(stmt) -> list[str]:
    """The names a module-level statement binds (not the locals of functions in it)."""
    names = []
    todo = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names += [a.asname or a.name.partition(".")[0] for a in node.names]
        todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return list(dict.fromkeys(names))


# Methods that change their object, wherever they are called (a method called as a statement,
# its value unused, is taken to change it, whatever its name).
_MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "remove", "pop", "clear", "update", "setdefault",
    "popitem", "sort", "reverse", "add", "discard", "fill", "resize", "put", "itemset",
    "setflags", "partition", "byteswap", "__setitem__", "__delitem__", "__iadd__"})
# NumPy functions that write into their first argument.
IN_PLACE_IDS = {id(f) for f in (np.copyto, np.put, np.place, np.putmask, np.fill_diagonal,
                                np.random.shuffle, np.put_along_axis)}


def changed_in_place(stmt) -> list[tuple[str, ast.AST, str]]:
    """(root name, where, kind) for each module-level name ``stmt`` may change in place:
    ``W[0] = v``, ``W.attr = v``, ``del W[0]``, ``W += v``, ``L.append(v)``, ``W.fill(0)``
    as a statement, ``np.copyto(W, v)`` and ``out=W``. Not in the bodies of functions."""
    out = []
    current = [stmt]  # the innermost statement, to show where

    def visit(node, statement=False):
        if isinstance(node, ast.stmt):
            current.append(node)
            try:
                visit_in(node, statement)
            finally:
                current.pop()
        else:
            visit_in(node, statement)

    def visit_in(node, statement):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for d in [*getattr(node, "decorator_list", []), *a.defaults,
                      *(d for d in a.kw_defaults if d is not None)]:
                visit(d)
            return
        if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(
                node.ctx, ast.Load):
            root = root_name(node.value)
            if root:
                out.append((root, current[-1], "store"))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.append((node.target.id, node, "augmented"))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and (
                    statement or node.func.attr in _MUTATING_METHODS):
                root = root_name(node.func.value)
                if root:
                    out.append((root, node, "method"))
            if node.args and isinstance(node.args[0], ast.Name):
                out.append((node.args[0].id, node, "argument"))
            for k in node.keywords:
                if k.arg == "out":
                    for target in (k.value.elts if isinstance(k.value, ast.Tuple)
                                   else [k.value]):
                        root = root_name(target)
                        if root:
                            out.append((root, node, "out"))
        for child in ast.iter_child_nodes(node):
            visit(child, isinstance(node, ast.Expr))

    visit(stmt)
    return out


def root_name(node) -> str | None:
    """``W`` for ``W``, ``W[0]``, ``W.T[1:]``; None for what no name holds (``f()[0]``)."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def main_guard(test) -> bool | None:
    """True for ``__name__ == "__main__"``, False for ``!=``, None for any other test."""
    match test:
        case ast.Compare(left=left, ops=[ast.Eq() | ast.NotEq() as op], comparators=[right]):
            sides = {ast.dump(left), ast.dump(right)}
            if sides == {ast.dump(ast.Name("__name__", ast.Load())),
                         ast.dump(ast.Constant("__main__"))}:
                return isinstance(op, ast.Eq)
    return None
