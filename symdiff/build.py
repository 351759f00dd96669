"""A function and its arguments' kinds -> a compiled gradient, from the disk cache or built.

``api.Gradient`` builds each specialisation here: through the whole pipeline
(``build_source``, which alone imports SymPy), unless the disk cache has it. A gradient
found in the disk cache is compiled from its entry's source once the names it reads are
found again and the helpers it calls are the ones it was built from; a helper redefined
since is a reason to build again, checked on every call (``_made``, ``_remade``).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re
from dataclasses import dataclass, field

from .errors import SymdiffError
from .parse import NOT_LITERAL, literal


@dataclass(frozen=True)
class _Built:
    fn: object  # the compiled gradient function
    source: str
    globals: dict
    refresh: tuple  # (name, getter): module-level data read afresh at every call
    guards: tuple = ()  # (getter, helper, _made(helper)): the functions it calls, as built
    backward: int = field(init=False)  # the line of the seed, where the backward sweep starts

    def __post_init__(self):
        seed = re.search(r"^    d\w* = 1\.0$", self.source, re.MULTILINE)
        line = self.source.count("\n", 0, seed.start()) + 1 if seed else 10**9
        object.__setattr__(self, "backward", line)

    def ready(self) -> bool:
        """Whether the build still fits (no helper it calls or inlined was redefined since);
        if so, the module data it reads is read afresh, as a call of the function would."""
        if any(get() is not fn or _remade(fn, made) for get, fn, made in self.guards):
            return False
        for name, get in self.refresh:
            self.globals[name] = get()
        return True


def build_source(parsed, wrt, with_value=False, as_tuple=False, kinds=None, has_aux=False,
                 floats=True, lifted=frozenset()):
    """Run the pipeline on a parsed function: returns ``(ir, source)`` of its gradient,
    specialised on ``kinds`` (parameter name -> kinds.Kind; None or a name left out: any).
    ``floats``: on Python floats, math's functions for NumPy's (``floats.on_floats``).
    ``lifted``: the stop_gradient calls read as identities (``lower``).

    Used by ``grad`` and by the CLI (which parses files without running them). Any failure
    that is not a located SymdiffError is reported as one, never as a raw traceback.
    """
    # SymPy is imported here, on first build, never by a cache hit.
    from .differentiate import differentiate
    from .emit import emit
    from .floats import on_floats
    from .lower import lower
    from .prune import prune

    try:
        ir = lower(parsed, wrt, kinds, has_aux, lifted)
        ir = on_floats(ir) if floats else ir
        return ir, emit(prune(differentiate(ir, with_value, as_tuple)), floats)
    except SymdiffError:
        raise
    except Exception as e:  # a bug of ours: still say where, and not as a SymPy traceback
        where = f"{parsed.source.filename}:{parsed.node.lineno}:{parsed.node.col_offset + 1}"
        err = SymdiffError(f"{where}: symdiff failed to differentiate {parsed.name} "
                           f"({type(e).__name__}: {e}); this is a bug in symdiff, please "
                           "report it with the function's source")
        raise err from None


def _build(fun, wrt, with_value, as_tuple, has_aux, found, floats=True,
           lifted=frozenset()) -> _Built:
    from . import cache

    # (the kinds as text: a cache key is made of the options' repr)
    options = (wrt, with_value, as_tuple, has_aux, [(n, str(k)) for n, k in found])
    if not floats:
        options += ("without the float path",)
    if lifted:
        options += ("stop_gradient read as identity", sorted(lifted) if lifted != "all" else "all")
    entry = cache.load(fun, options)
    built = _from_entry(fun, entry) if entry is not None else None
    if built is not None:
        return built

    from .compile import compile_source
    from .parse import parse

    parsed = _without_default_code(parse(fun))
    ir, source = build_source(parsed, wrt, with_value, as_tuple, dict(found), has_aux, floats,
                              lifted)
    names = {n: obj for n, obj, _ in ir.globals}
    fn, globs = compile_source(source, "grad_" + ir.name, names, ir.np_alias)
    _defaults(fn, fun)
    helpers = [(cache.where(c, fun), n, cache.identity(h)) for c, n, h in ir.guards]
    if all(h is not None for _, _, h in helpers):
        cache.store(fun, options, {
            "name": "grad_" + ir.name, "np_alias": ir.np_alias, "source": source,
            "names": [(n, cache.where(c, fun)) for n, _, c in ir.globals],
            "data": [(n, cache.where(c, fun)) for n, c in ir.data_globals],
            "helpers": helpers})
    return _Built(fn, source, globs, _refreshers(ir.data_globals), _guards(ir.guards))


def _from_entry(fun, entry) -> _Built | None:
    """A gradient from a disk-cache entry, without SymPy; None if the entry does not fit."""
    import builtins

    from . import cache
    from .compile import compile_source

    def find(name, place):
        root, *path = name.split(".")  # a helper found as Ops.sq: Ops, then sq
        where = cache.resolve(fun, place, root)
        if isinstance(where, dict):
            found = where[root] if root in where else vars(builtins).get(root, _MISSING)
        else:
            try:
                found = where.cell_contents
            except (AttributeError, ValueError):
                return None, _MISSING
        if path and found is not _MISSING:
            found = _follow(found, path)
        return where, _MISSING if found is None and path else found

    names = {}
    for name, place in entry["names"]:
        _, names[name] = find(name, place)
        if names[name] is _MISSING:
            return None
    guards = []
    for place, name, digest in entry["helpers"]:
        where, helper = find(name, place)
        if helper is _MISSING or cache.identity(helper) != digest:
            return None  # a function it calls is another one now: build again
        guards.append((where, name, helper))
    data = []
    for name, place in entry["data"]:
        where, _ = find(name, place)
        if where is None:
            return None
        data.append((name, where))
    try:
        fn, globs = compile_source(entry["source"], entry["name"], names, entry["np_alias"])
    except KeyboardInterrupt:
        raise
    except BaseException:  # a corrupt entry is rebuilt, never trusted (one that exits too)
        return None
    _defaults(fn, fun)
    return _Built(fn, entry["source"], globs, _refreshers(data), _guards(guards))


def _defaults(fn, fun):
    fn.__defaults__ = getattr(fun, "__defaults__", None)
    fn.__kwdefaults__ = getattr(fun, "__kwdefaults__", None)


def _without_default_code(parsed):
    """``parsed`` with each default that is not a literal replaced by ``...``.

    The generated def must not evaluate a default's code again: it may read names of an
    enclosing function, gone by now (``def make(k): def f(x, s=k)``, ``lambda x, i=i:``),
    or give another value now. ``_defaults`` gives the gradient the values Python computed
    at the def.
    """
    a = parsed.node.args
    if all(map(_literal, [*a.defaults, *a.kw_defaults])):
        return parsed
    args = copy.copy(a)
    args.defaults = [_placeholder(d) for d in a.defaults]
    args.kw_defaults = [_placeholder(d) for d in a.kw_defaults]
    node = copy.copy(parsed.node)
    node.args = args
    return dataclasses.replace(parsed, node=node)


def _literal(node) -> bool:
    # (None: a keyword-only parameter without a default.)
    return node is None or literal(node) is not NOT_LITERAL


def _placeholder(node):
    return node if _literal(node) else ast.copy_location(ast.Constant(...), node)


_MISSING = object()


def _refreshers(data_globals) -> tuple:
    out = []
    for name, where in data_globals:
        if isinstance(where, dict):
            out.append((name, (lambda g, n: lambda: g[n])(where, name)))
        else:  # a closure cell
            out.append((name, (lambda c: lambda: c.cell_contents)(where)))
    return tuple(out)


def _guards(guards) -> tuple:
    return tuple((_getter(where, name), fn, _made(fn)) for where, name, fn in guards)


def _getter(where, name):
    """What reads a helper's name again: in a dict or a closure cell; a dotted name
    (Ops.sq) by its first name, then its attributes."""
    root, *path = name.split(".")
    if isinstance(where, dict):
        if path:
            return lambda: _follow(where.get(root), path)
        return lambda: where.get(root)
    if path:
        return lambda: _follow(where.cell_contents, path)
    return lambda: where.cell_contents


def _follow(obj, path):
    """``obj.a.b`` for the path ``["a", "b"]``; None where an attribute is missing."""
    for attr in path:
        obj = getattr(obj, attr, None)
    return obj


def _made(fn) -> tuple:
    """What of a helper its gradient was built from, beyond the function itself: its code
    (replaced in place, as autoreload does) and its defaults (numbers are written into the
    gradient)."""
    return (getattr(fn, "__code__", None), getattr(fn, "__defaults__", None),
            getattr(fn, "__kwdefaults__", None))


def _remade(fn, made) -> bool:
    # On every call of a gradient that calls helpers: attribute reads, no tuple built.
    code, defaults, kwdefaults = made
    return (getattr(fn, "__code__", None) is not code
            or getattr(fn, "__defaults__", None) is not defaults
            or getattr(fn, "__kwdefaults__", None) is not kwdefaults)
