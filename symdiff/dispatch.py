"""A gradient's specialisations for numbers -> the function its calls run first.

Where every argument's type says its kind (Python floats, ints and bools, NumPy scalars:
``kinds.BY_TYPE``), finding the specialisation from the kinds' key costs more than a
scalar gradient itself (400 ns against 200 ns). ``dispatcher`` writes a function with the
differentiated function's parameters that compares the arguments' types with the ones
each specialisation was built for, and calls it; every other call goes on to the general
path, as if there were none. ``api.Gradient`` makes it the gradient's ``__call__``.
Nothing here imports SymPy.
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import keyword
import linecache
from dataclasses import dataclass

from .calls import MISSING

MOST = 4  # routes in one dispatcher: more kinds of numbers find theirs by the general path


@dataclass(frozen=True)
class Route:
    """Arguments of these types (one per positional parameter) run ``call``; ``ready``
    (if not None) first says whether the build still fits, as the general path asks."""

    types: tuple
    call: object
    ready: object = None


def dispatcher(fun, routes, general, failed):
    """A function of ``fun``'s parameters that runs ``routes[i].call`` for arguments of
    ``routes[i].types`` (``failed(error, i, *args)`` if that raises), and otherwise
    ``general(*args, **kwargs)``, with ``MISSING`` for each parameter left out (so that
    its default is read where defaults are). None for a function with keyword-only
    parameters (a call of it by types alone never reads all of them).

    >>> def f(x, y):
    ...     return x * y
    >>> def grad_f(x, y):
    ...     return y
    >>> call = dispatcher(f, [Route((float, float), grad_f)], lambda *a: "general",
    ...                   lambda e, i, *a: "failed")
    >>> call(2.0, 3.0), call(2, 3.0), call(2.0, y=3.0)
    (3.0, 'general', 3.0)
    """
    code = fun.__code__
    if code.co_kwonlyargcount:
        return None
    params = code.co_varnames[:code.co_argcount]
    extra = code.co_varnames[code.co_argcount:code.co_argcount + 2]
    rest = extra[0] if code.co_flags & 0x04 else None  # CO_VARARGS
    kw = extra[rest is not None] if code.co_flags & 0x08 else None  # CO_VARKEYWORDS
    name = _identifier(fun.__name__, "call")
    taken = {*params, rest, kw, name}
    objects: dict = {}  # global name -> object, in the generated module

    def fresh(base):
        base = _identifier(base, "value")
        k, found = 0, base
        while found in taken:
            k += 1
            found = f"{base}_{k}"
        taken.add(found)
        return found

    def named(obj, base):
        for found, value in objects.items():
            if value is obj:
                return found
        found = fresh(base)
        objects[found] = obj
        return found

    # The names it reads, chosen here (none the same as a parameter's); the source is
    # written once for each layout of names.
    layout = _Layout(
        name, fun.__qualname__, params, code.co_posonlyargcount, rest, kw,
        len(fun.__defaults__ or ()), named(builtins.type, "type"), fresh("error"),
        named(MISSING, "MISSING"), named(Exception, "Exception"),
        named(general, "general"), named(failed, "failed"),
        tuple((tuple(named(t, t.__name__) for t in route.types),
               None if route.ready is None else named(route.ready, "ready"),
               named(route.call, getattr(route.call, "__name__", "call")))
              for route in routes))
    namespace = {"__name__": "symdiff.dispatch", "__builtins__": builtins, **objects}
    exec(_compiled(layout), namespace)
    fn = namespace[name]
    # A call that does not fit the parameters is told as the function tells it.
    fn.__qualname__ = fun.__name__
    return fn


@dataclass(frozen=True)
class _Layout:
    """The names of a dispatcher: its own, its parameters', and those it reads."""

    name: str
    of: str  # the differentiated function's qualified name, for the docstring
    params: tuple[str, ...]
    positional_only: int
    rest: str | None
    kw: str | None
    defaults: int
    type: str
    error: str
    missing: str
    exception: str
    general: str
    failed: str
    routes: tuple  # (the type's name for each parameter, ready or None, the call's name)


@functools.lru_cache(maxsize=256)
def _compiled(layout: _Layout):
    """The code that defines the dispatcher of ``layout``, its source kept in linecache
    (a traceback through it shows its lines)."""
    def load(n):
        return ast.Name(n, ast.Load())

    values = [load(p) for p in layout.params]
    body = []
    for i, (types, ready, run) in enumerate(layout.routes):
        tests = [ast.Compare(ast.Call(load(layout.type), [load(p)], []), [ast.Is()], [load(t)])
                 for p, t in zip(layout.params, types, strict=True)]
        tests += [ast.UnaryOp(ast.Not(), load(n)) for n in (layout.rest, layout.kw)
                  if n is not None]
        if ready is not None:
            tests.append(ast.Call(load(ready), [], []))
        call = ast.Return(ast.Call(load(run), values, []))
        handler = ast.ExceptHandler(load(layout.exception), layout.error, [ast.Return(
            ast.Call(load(layout.failed), [load(layout.error), ast.Constant(i), *values],
                     []))])
        body.append(ast.If(ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0],
                           [ast.Try([call], [handler], [], [])], []))
    everything = [*values, *[ast.Starred(load(layout.rest), ast.Load())] *
                  (layout.rest is not None)]
    body.append(ast.Return(ast.Call(load(layout.general), everything,
                                    [ast.keyword(None, load(layout.kw))] *
                                    (layout.kw is not None))))
    doc = (f"Run the gradient of {layout.of} built for these types of arguments; find or "
           "build the one any other call needs.")
    split = layout.positional_only
    arguments = ast.arguments(
        posonlyargs=[ast.arg(p) for p in layout.params[:split]],
        args=[ast.arg(p) for p in layout.params[split:]],
        vararg=ast.arg(layout.rest) if layout.rest else None, kwonlyargs=[], kw_defaults=[],
        kwarg=ast.arg(layout.kw) if layout.kw else None,
        defaults=[load(layout.missing)] * layout.defaults)
    tree = ast.Module([ast.FunctionDef(layout.name, arguments,
                                       [ast.Expr(ast.Constant(doc)), *body], [], None)], [])
    source = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    filename = f"<symdiff dispatch {hashlib.sha256(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return builtins.compile(source, filename, "exec")


def _identifier(name, otherwise: str) -> str:
    # (a lambda's name, <lambda>, is no name to def or read)
    return name if name.isidentifier() and not keyword.iskeyword(name) else otherwise
