"""Containers being differentiated (JAX's pytrees) -> a name per leaf, resolved while lowering.

A parameter in ``wrt`` that is a dict, tuple or list holding numbers and arrays (nested)
has a structure its kind (``kinds.py``) tells when the gradient is built. Each leaf gets a
name of its own, read once at the start (``params_W = params["W"]``) and differentiated as
a parameter is; whatever reads the container is resolved while lowering, since its keys
and length are known: ``params["W"]`` is the leaf's name, ``W, b = params`` binds names to
items, and a loop over a container (or over ``range(len(ws))`` indexing one) is unrolled.
``rebuild`` returns the gradient with the parameter's structure, for ``emit``.

A list of numbers alone (no arrays, no dicts or tuples in it) is not such a container: it
is read as an array, as NumPy reads it, and its gradient is an array.

The calls check (``calls.py``) reads ``is_tree`` too, so SymPy is imported only by what
lowering calls.
"""

from __future__ import annotations

import ast
import copy
import re
from dataclasses import dataclass

from . import kinds as K
from .exits import ExitError, single_exit
from .parse import NOT_LITERAL, literal

_MISSING = object()


@dataclass(frozen=True, eq=False)
class Tree:
    """A container being differentiated: ``items[i]`` (a leaf's name, or a Tree) is at
    ``keys[i]``; ``path`` reads it from the function's parameter (``layers[0]``)."""

    type: type  # dict, tuple or list
    keys: tuple
    items: tuple
    path: ast.expr
    returned_by: str = ""  # the function whose values these are (np.linalg.eigh), if any

    @property
    def text(self) -> str:
        return ast.unparse(self.path)

    @property
    def holder(self) -> str:
        """The name lowering binds a variable holding this container to (never code)."""
        return f"<{self.text}>"

    def what(self) -> str:
        return {dict: "a dict", tuple: "a tuple", list: "a list"}[self.type]


@dataclass(frozen=True)
class Const:
    """A value known when building: a loop's counter, a dict's key."""

    value: object


def is_tree(kind) -> bool:
    """Whether a value of ``kind`` is a container to differentiate item by item: a dict, a
    tuple, or a list with something in it that NumPy would not read as an array of
    numbers."""
    if isinstance(kind, (K.Dict, K.Tuple)):
        return True
    return isinstance(kind, K.List) and not _numbers(kind)


def _numbers(kind) -> bool:
    """A number, or a list (of lists...) of numbers: what is read as an array."""
    if isinstance(kind, K.List):
        return all(map(_numbers, kind.items))
    return isinstance(kind, K.Number) or isinstance(kind, K.Array) and kind.scalar


def leaves(tree: Tree):
    """(leaf name, code reading it from the parameter), in order."""
    for key, item in zip(tree.keys, tree.items, strict=True):
        if isinstance(item, Tree):
            yield from leaves(item)
        else:
            yield item, _at(tree.path, key)


def _tree(kind, path: ast.expr, base: str, names, problem, named) -> Tree:
    keys = kind.keys if isinstance(kind, K.Dict) else tuple(range(len(kind.items)))
    items = []
    for i, (key, item) in enumerate(zip(keys, kind.items, strict=True)):
        if literal(repr(key)) != key or isinstance(key, float):
            raise problem(f"{ast.unparse(path)} has the key {key!r} ({type(key).__name__}); "
                          "a container being differentiated may have keys that are strings "
                          "or integers", "string or integer keys (or tuples of them)")
        part = key if isinstance(key, str) and re.fullmatch(r"\w+", key, re.ASCII) else \
            str(key) if isinstance(key, int) and key >= 0 else str(i)
        here = _at(path, key)
        if is_tree(item):
            items.append(_tree(item, here, f"{base}_{part}", names, problem, named))
        elif ast.unparse(here) in named:
            items.append(named[ast.unparse(here)])
        else:
            items.append(names.fresh(f"{base}_{part}"))
    kind_type = {K.Dict: dict, K.Tuple: tuple, K.List: list}[type(kind)]
    return Tree(kind_type, tuple(keys), tuple(items), path)


def _at(path, key) -> ast.expr:
    return ast.Subscript(copy.deepcopy(path), ast.Constant(key), ast.Load())


# --- lowering's hooks (``low`` is lower._Lowering) ---


def start(low, params, wrt, kinds) -> tuple[list, list, dict]:
    """Give each leaf of each container in ``wrt`` a name, read at the start; returns the
    parameters and ``wrt`` with each container replaced by its leaves, and the kind of each
    leaf (by its name: a leaf is a parameter to the later stages)."""
    from .ir import Eqn

    trees = {}
    found = {p: kinds[p] for p in dict.fromkeys(wrt) if kinds and p in kinds and
             is_tree(kinds[p])}
    named = _named(low, found, params)
    for p, kind in found.items():
        node = next(a for a in ast.walk(low.node.args) if isinstance(a, ast.arg) and a.arg == p)
        trees[p] = _tree(kind, ast.Name(p, ast.Load()), p, low.names,
                         lambda message, hint="", node=node: low.src.error(node, message, hint),
                         named)
    leaf_kinds = {}
    for p, tree in trees.items():
        leaf_kinds.update(_kinds(tree, kinds[p]))
        _register(low, tree)
        low.env[p] = tree.holder
        low.active.discard(p)
        for leaf, path in leaves(tree):
            low.bound.add(leaf)
            low.active.add(leaf)
            # Under the text of its path, so that x += 1 on a name sharing a leaf's array
            # is caught as it is for a parameter's (statements._refuse_shared).
            low.env[ast.unparse(path)] = leaf
            code = ast.Assign([ast.Name(leaf, ast.Store())], path, lineno=low.node.lineno)
            low.eqns.append(Eqn("", "assert", code, low.node.lineno, (p,), False))
    flat = [[leaf for leaf, _ in leaves(trees[p])] if p in trees else [p] for p in wrt]
    params = [[leaf for leaf, _ in leaves(trees[p])] if p in trees else [p] for p in params]
    return ([p for group in params for p in group], [w for group in flat for w in group],
            leaf_kinds)


def _named(low, found, params) -> dict:
    """path text -> the user's name for that leaf, where the function's body binds a name
    to it at its top level (``W, b = params["W"], params["b"]``): the leaf is read into that
    name, so that the generated code reads as the function does. (The name is the user's,
    so no generated name takes it; if the function binds it again, that binding gets
    another SSA name, as any would.)"""
    named: dict = {}

    def path(node):  # the canonical text of a leaf's path, or None
        keys = []
        while isinstance(node, ast.Subscript):
            keys.append(literal(node.slice))
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in found:
            return None
        kind, out = found[node.id], ast.Name(node.id, ast.Load())
        for key in reversed(keys):
            if isinstance(kind, K.Dict) and not isinstance(key, (list, dict, set)) and \
                    key in kind.keys and type(key) in (str, int):
                kind = kind.items[kind.keys.index(key)]
            elif isinstance(kind, (K.Tuple, K.List)) and is_tree(kind) and \
                    type(key) is int and -len(kind.items) <= key < len(kind.items):
                key %= len(kind.items)
                kind = kind.items[key]
            else:
                return None
            out = _at(out, key)
        return None if is_tree(kind) else ast.unparse(out)

    def name(target, value):
        if isinstance(target, ast.Name) and target.id not in params and \
                target.id not in named.values() and not target.id.startswith("_") and \
                target.id not in ("np", "SymdiffError", low.parsed.name):
            text = path(value)
            if text is not None and text not in named:
                named[text] = target.id
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(
                value, (ast.Tuple, ast.List)) and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                name(t, v)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, t in enumerate(target.elts):
                name(t, ast.Subscript(value, ast.Constant(i), ast.Load()))

    for stmt in low.node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            name(stmt.targets[0], stmt.value)
    for user in named.values():
        low.names.taken.add(user)
    return named


def _kinds(tree: Tree, kind):
    for item, k in zip(tree.items, kind.items, strict=True):
        if isinstance(item, Tree):
            yield from _kinds(item, k)
        else:
            yield item, k


def _register(low, tree: Tree):
    low.trees[tree.holder] = tree
    for item in tree.items:
        if isinstance(item, Tree):
            _register(low, item)
        else:
            low.leaves.add(item)


def whole(tree: Tree):
    """The Val of a variable holding ``tree``: no SymPy image, its code reads it."""
    from .expressions import Val

    return Val(None, copy.deepcopy(tree.path), value=tree)


def refuse_whole(low, node, tree: Tree):
    if tree.returned_by:
        low.fail(node, f"{ast.unparse(node)} holds the {len(tree.items)} values "
                 f"{tree.returned_by} returns, used here as a whole, which symdiff does not "
                 "differentiate", "unpack them (a, b = ...), or read one by its index")
    low.fail(node, f"{_said(node, tree)} is {tree.what()} being differentiated, used here "
             "as a whole, which symdiff does not differentiate",
             f"read its items ({_example(tree)}), unpack it, loop over it, or pass it to a "
             "function of your own")


def _said(node, tree) -> str:
    text = ast.unparse(node)
    return text if text == tree.text else f"{text} ({tree.text})"


def _example(tree: Tree) -> str:
    return ast.unparse(_at(tree.path, tree.keys[0])) if tree.keys else tree.text + "[0]"


def as_list(low, node):
    """``node`` (an argument taking a list of arrays, as np.stack's) as the list of its
    items where it is a tuple or list being differentiated; else ``node`` itself."""
    tree = resolve(low, node)
    if not isinstance(tree, Tree) or tree.type is dict:
        return node
    items = [ast.copy_location(ast.Subscript(node, ast.Constant(k), ast.Load()), node)
             for k in tree.keys]
    return ast.copy_location(ast.List(items, ast.Load()), node)


def resolve(low, node):
    """What ``node`` reads of a container being differentiated: a Tree, a leaf's name, or
    None where it reads none (``node`` is then lowered as usual)."""
    if isinstance(node, ast.Name):
        ssa = low.env.get(node.id)
        return low.trees.get(ssa) if ssa is not None else None
    if isinstance(node, ast.Subscript):
        tree = resolve(low, node.value)
        if not isinstance(tree, Tree):
            return None
        return _item(low, tree, node)
    return None


def part(low, tree: Tree, node):
    """What ``node`` (a subscript of a call returning ``tree``) reads of it."""
    return _item(low, tree, node)


def _item(low, tree: Tree, node):
    key = static(low, node.slice)
    if isinstance(key, slice) and tree.type is not dict:
        picked = range(len(tree.items))[key]
        return Tree(tree.type, tuple(range(len(picked))), tuple(tree.items[i] for i in picked),
                    ast.Subscript(copy.deepcopy(tree.path), copy.deepcopy(node.slice),
                                  ast.Load()))
    if key is _MISSING:
        low.fail(node.slice, f"{ast.unparse(node)}: the key of {tree.what()} being "
                 "differentiated must be known when the gradient is built",
                 "a constant (params[\"W\"], layers[0], layers[-1]), or the counter of a "
                 "loop over range(len(...)) of the container")
    if tree.type is dict:
        if isinstance(key, (list, dict, set, slice)) or key not in tree.keys:
            keys = ", ".join(map(repr, tree.keys))
            low.fail(node, f"{tree.text} has no key {key!r} (its keys: {keys})",
                     "one of its keys")
        return tree.items[tree.keys.index(key)]
    if type(key) is not int or not -len(tree.items) <= key < len(tree.items):
        low.fail(node, f"{tree.text} is {tree.what()} of {len(tree.items)} items: "
                 f"{ast.unparse(node)} is not one of them",
                 f"an index from {-len(tree.items)} to {len(tree.items) - 1}, or a slice")
    return tree.items[key]


def static(low, node):
    """The value of ``node`` if it is known when building (a literal, a loop's counter,
    len of a container, arithmetic of those), else _MISSING."""
    if isinstance(node, ast.Slice):
        parts = [static(low, p) if p is not None else None
                 for p in (node.lower, node.upper, node.step)]
        return _MISSING if _MISSING in parts else slice(*parts)
    value = literal(node)
    if value is not NOT_LITERAL:
        return value
    if isinstance(node, ast.Name):
        return low.known.get(low.env.get(node.id), _MISSING)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id == "len" and len(node.args) == 1 and not node.keywords and \
            node.func.id not in low.env and low._callee(node) is len:
        tree = resolve(low, node.args[0])
        return len(tree.items) if isinstance(tree, Tree) else _MISSING
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = static(low, node.operand)
        return -value if type(value) is int else _MISSING
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        a, b = static(low, node.left), static(low, node.right)
        if type(a) is int and type(b) is int and (b or type(node.op) is not ast.FloorDiv):
            return _ARITHMETIC[type(node.op)](a, b)
    return _MISSING


def remember(low, name, value):
    """``n = len(ws)``: where a container is differentiated, a name bound to a number
    known when building is known by it too (``range(n)``, ``ws[n - 1]``)."""
    if low.trees and name in low.env:
        known = static(low, value)
        if type(known) is int:
            low.known[low.env[name]] = known


_ARITHMETIC = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
               ast.Mult: lambda a, b: a * b, ast.FloorDiv: lambda a, b: a // b}


def item(low, node):
    """``node`` (a subscript) lowered, if it reads a container being differentiated."""
    found = resolve(low, node)
    if found is None:
        return None
    if isinstance(found, Tree):
        return whole(found)
    return _leaf(found)


def _leaf(name):
    from .expressions import Val
    from .ir import symbol

    return Val(symbol(name), ast.Name(name, ast.Load()))


def bind(low, name, val) -> bool:
    """``name = val`` where val is a container being differentiated or one of its leaves:
    the name is bound to it, with no copy. False for any other value."""
    if isinstance(val.value, Tree):
        low.env[name] = val.value.holder
        low.trees.setdefault(val.value.holder, val.value)
        # Its items may now be read again and again (f = np.linalg.qr(a); r = f[1]; f[1]):
        # an assignment must not rename one, which would leave the others reading a stale name.
        low.temps.difference_update(_leaf_names(val.value))
        return True
    if isinstance(val.code, ast.Name) and val.code.id in low.leaves and \
            not name.startswith("<"):
        low.env[name] = val.code.id
        return True
    return False


def _leaf_names(tree: Tree):
    for item in tree.items:
        if isinstance(item, Tree):
            yield from _leaf_names(item)
        elif isinstance(item, str):
            yield item


def unpack(low, target, value) -> bool:
    """``W, b = params``, ``(W1, b1), (W2, b2) = layers``: each name bound to its item."""
    found = resolve(low, value)
    if not isinstance(found, Tree):
        return False
    _bind_target(low, target, found, value)
    return True


def _bind_target(low, target, item, node):
    if isinstance(target, ast.Name):
        if isinstance(item, _Pair):
            low.fail(target, f"a loop over {ast.unparse(node)} binds one name to each pair, "
                     "which symdiff does not follow here", "names for its parts: for i, w "
                     "in enumerate(ws), for w, b in zip(ws, bs), for k, v in p.items()")
        if isinstance(item, Tree):
            low.env[target.id] = item.holder
            low.trees.setdefault(item.holder, item)
        elif isinstance(item, _Item):
            low._bind(target.id, low._expr(item.node), item.node)
        elif isinstance(item, Const):
            low._bind(target.id, low._expr(ast.copy_location(ast.Constant(item.value),
                                                             node)), node)
            low.known[low.env[target.id]] = item.value
        else:
            low.env[target.id] = item
        return
    if not isinstance(target, (ast.Tuple, ast.List)):
        low.fail(target, f"unpacking a container being differentiated into "
                 f"{ast.unparse(target)} is not supported", "names: W, b = params")
    starred = [t for t in target.elts if isinstance(t, ast.Starred)]
    if starred:
        low.fail(starred[0], "starred unpacking (a, *b = ...) is not supported",
                 "indexing: a, b = ws[0], ws[1:]")
    if not isinstance(item, Tree):
        what = "a number or an array" if isinstance(item, str) else repr(item.value)
        low.fail(target, f"unpacking {what} inside a container's unpacking is not "
                 "supported", "unpack it in a statement of its own: a, b = W")
    items = [Const(k) for k in item.keys] if item.type is dict else list(item.items)
    if len(items) != len(target.elts):
        low.fail(target, f"{item.text} is {item.what()} of {len(items)} items, unpacked "
                 f"here into {len(target.elts)}", f"{len(items)} names")
    for t, part in zip(target.elts, items, strict=True):
        _bind_target(low, t, part, node)


def refuse_merge(low, node, name, *ssas):
    """A variable that holds a container on one path and something else on another (after
    a branch, or from one iteration of a loop to the next) cannot be followed."""
    if len(set(ssas)) > 1 and any(s in low.trees for s in ssas):
        low.fail(node, f"{name} holds a container being differentiated on one path and "
                 "another value on another, which symdiff does not follow",
                 "bind the container before the branch or loop, and read its items inside")


def carried(low, stmt, names, phis, nexts) -> tuple[list, dict]:
    """A loop's carried variables that hold a container at the end of an iteration (the
    target of a loop over one, unrolled inside this loop): bound to it afresh in every
    iteration, so not carried (their phi stays as it was); after the loop, they hold it.
    Returns the next values and those variables; refuses any other merge of a container."""
    nexts, after = list(nexts), {}
    for i, (name, (phi, init), nxt) in enumerate(zip(names, phis, nexts, strict=True)):
        if nxt in low.trees and init is None:
            nexts[i], after[name] = phi, nxt
        else:
            refuse_merge(low, stmt, name, init or phi, nxt)
    return nexts, after


# --- loops over containers, unrolled ---


def unroll(low, stmt) -> bool:
    """A for loop over a container (``for W in ws``, ``enumerate(ws)``, ``zip(ws, bs)``,
    ``p.items()``), or over a ``range`` known when building whose body reads a container,
    lowered once per iteration, with its names bound to each item in turn."""
    if not isinstance(stmt, ast.For):
        return False
    steps = _steps(low, stmt.iter, stmt)
    if steps is None:
        return False
    from .loops import _breaks

    if stmt.orelse:
        low.fail(stmt, "for/else over a container is not supported",
                 "a flag set in the loop, tested after it")
    if _breaks(stmt.body):
        low.fail(stmt, "break in a loop over a container being differentiated (which "
                 "symdiff unrolls) is not supported", "an if around the rest of the body")
    low.counter += 1
    try:
        body, _ = single_exit(stmt.body, f"u{low.counter}", stmt)
    except ExitError as e:
        low.fail(e.node, e.message, e.hint)
    where, line = low.where, low.line
    for step in steps:
        low.where, low.line = where, line
        _bind_target(low, stmt.target, step, stmt.iter)
        before = len(low.problems)
        low._statements(body)
        if len(low.problems) > before:
            break  # (the next iteration would report the same)
    low.where, low.line = where, line
    return True


def _steps(low, it, stmt):
    """What the loop's target takes, iteration by iteration; None: not unrolled."""
    if isinstance(it, ast.Call) and not it.keywords or isinstance(it, ast.Call) and \
            _callee(low, it) is zip:
        fn = _callee(low, it)
        if fn is enumerate and len(it.args) == 1:
            tree = resolve(low, it.args[0])
            if isinstance(tree, Tree):
                return [_Pair((Const(i), x)) for i, x in enumerate(_values(tree))]
        elif fn is reversed and len(it.args) == 1:
            tree = resolve(low, it.args[0])
            if isinstance(tree, Tree):
                return _values(tree)[::-1]
        elif fn is zip and it.args:
            found = [resolve(low, a) for a in it.args]
            if any(isinstance(t, Tree) for t in found):
                return _zipped(low, it, found)
        elif fn is range and _reads_tree(low, stmt):
            bounds = [static(low, a) for a in it.args]
            if bounds and all(type(b) is int for b in bounds):
                return [Const(i) for i in range(*bounds)]
        elif isinstance(it.func, ast.Attribute) and not it.args and \
                it.func.attr in ("keys", "values", "items"):
            tree = resolve(low, it.func.value)
            if isinstance(tree, Tree) and tree.type is dict:
                keys = [Const(k) for k in tree.keys]
                return {"keys": keys, "values": list(tree.items),
                        "items": [_Pair(p) for p in zip(keys, tree.items, strict=True)]
                        }[it.func.attr]
        return None
    tree = resolve(low, it)
    if isinstance(tree, Tree):
        return _values(tree)
    return None


def _zipped(low, it, found) -> list:
    """zip(ws, bs), zip(ws, xs): containers being differentiated, and values that are not
    (data, read item by item as written: xs[0], xs[1]...)."""
    from .ir import Eqn

    lengths = {len(t.items) for t in found if isinstance(t, Tree)}
    strict = [k for k in it.keywords if k.arg == "strict"]
    strict = bool(strict) and literal(strict[0].value) is True
    if strict and len(lengths) > 1:
        low.fail(it, "zip(..., strict=True) of containers of different lengths",
                 "containers of one length")
    n = min(lengths)
    columns = []
    for a, t in zip(it.args, found, strict=True):
        if isinstance(t, Tree):
            columns.append(_values(t)[:n])
            continue
        # The loop runs n times if the other value is long enough, as zip would: the
        # generated code checks that it is, since a shorter one would end zip earlier.
        code = low._constant_code(a)
        what = "another length than" if strict else "fewer items than"
        message = (f"{ast.unparse(a)} has {what} the {n} of the container being differentiated "
                   "that it is zipped with, which symdiff unrolls the loop over; give it "
                   f"{n} items or more, or zip the container with a part of it: "
                   f"{ast.unparse(a)}[:{n}]")
        check = ast.Expr(ast.Call(ast.Name("_zipped_with", ast.Load()), [
            code, ast.Constant(n), ast.Constant(strict), ast.Constant(message)], []))
        for node in ast.walk(check):
            ast.copy_location(node, a)
        low.eqns.append(Eqn("", "assert", check, low.line, tuple(_names(code)), False, low.where))
        columns.append([_Item(ast.copy_location(ast.Subscript(copy.deepcopy(a), ast.Constant(k),
                                                                ast.Load()), a))
                        for k in range(n)])
    return [_Pair(items) for items in zip(*columns, strict=True)]


def _names(code):
    return dict.fromkeys(n.id for n in ast.walk(code) if isinstance(n, ast.Name))


@dataclass(frozen=True)
class _Item:
    """An item of a value that is not a container being differentiated: its code."""

    node: ast.expr


def _values(tree: Tree) -> list:
    """What iterating over ``tree`` gives: a dict's keys, a tuple's or list's items."""
    return [Const(k) for k in tree.keys] if tree.type is dict else list(tree.items)


class _Pair(Tree):
    """The tuple an iteration of enumerate, zip or items() gives, to unpack."""

    def __init__(self, parts):
        super().__init__(tuple, tuple(range(len(parts))), tuple(parts),
                         ast.Name("_", ast.Load()))

    @property
    def text(self) -> str:
        return "each item"


def _callee(low, call):
    return low._callee(call) if isinstance(call.func, ast.Name) else None


def _reads_tree(low, stmt) -> bool:
    """Whether the body of ``for i in range(...)`` indexes a container with ``i``
    (``ws[i]``), or passes both to a function (which may): then it is unrolled, so that
    ``i`` is known in each iteration. Other range loops stay loops."""
    if not isinstance(stmt.target, ast.Name):
        return False
    counter = stmt.target.id

    def mentions(node, test):
        return any(isinstance(n, ast.Name) and test(n.id) for n in ast.walk(node))

    def tree(name):
        return low.env.get(name) in low.trees

    for n in ast.walk(ast.Module(stmt.body, [])):
        if isinstance(n, ast.Subscript) and mentions(n.slice, counter.__eq__) and \
                mentions(n.value, tree):
            return True
        if isinstance(n, ast.Call) and any(mentions(a, counter.__eq__) for a in n.args) and \
                any(mentions(a, tree) for a in n.args):
            return True
    return False


def in_code(code, trees):
    """Code run as written, with each variable holding a container replaced by the code
    reading that container from the parameter (``len(layer)``: ``len(layers[0])``)."""

    class Paths(ast.NodeTransformer):
        def visit_Name(self, node):
            tree = trees.get(node.id)
            return copy.deepcopy(tree.path) if tree is not None else node

    return Paths().visit(code)


# --- the gradient returned ---


def rebuild(ir, grads: list[str]) -> list[str]:
    """The code of each gradient ``ir.given_wrt`` asks for, from the code of each of
    ``ir.wrt``'s (the leaves of a container, in order): a container's rebuilt."""
    codes = iter(grads)
    out = []
    for p in ir.given_wrt:
        tree = ir.trees.get(p)
        out.append(ast.unparse(_rebuilt(tree, codes)) if tree is not None else next(codes))
    return out


def _rebuilt(tree: Tree, codes) -> ast.expr:
    items = [_rebuilt(i, codes) if isinstance(i, Tree) else ast.parse(next(codes),
                                                                     mode="eval").body
             for i in tree.items]
    if tree.type is dict:
        return ast.Dict([ast.Constant(k) for k in tree.keys], items)
    return ast.Tuple(items, ast.Load()) if tree.type is tuple else ast.List(items, ast.Load())


def refuse_write(low, target):
    """``params["W"] = ...``, ``params["W"][0] = ...``: a change to a container being
    differentiated (or to one of its arrays), which the gradient would not see."""
    node = target
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
        if resolve(low, node) is not None:
            low.fail(target, f"{ast.unparse(target)} = ... changes {ast.unparse(node)} in "
                     "place, which symdiff does not follow: it is (part of) a container "
                     "being differentiated", "a new value under a name of its own "
                     "(W2 = W + ...)")
