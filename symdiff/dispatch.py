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

    def load(n):
        return ast.Name(n, ast.Load())

    type_ = named(builtins.type, "type")
    error = fresh("error")
    values = [load(p) for p in params]
    body = []
    for i, route in enumerate(routes):
        tests = [ast.Compare(ast.Call(load(type_), [load(p)], []), [ast.Is()],
                             [load(named(t, t.__name__))])
                 for p, t in zip(params, route.types, strict=True)]
        tests += [ast.UnaryOp(ast.Not(), load(n)) for n in (rest, kw) if n is not None]
        if route.ready is not None:
            tests.append(ast.Call(load(named(route.ready, "ready")), [], []))
        run = named(route.call, getattr(route.call, "__name__", "call"))
        call = ast.Return(ast.Call(load(run), values, []))
        handler = ast.ExceptHandler(load(named(Exception, "Exception")), error, [ast.Return(
            ast.Call(load(named(failed, "failed")), [load(error), ast.Constant(i), *values],
                     []))])
        body.append(ast.If(ast.BoolOp(ast.And(), tests) if len(tests) > 1 else tests[0],
                           [ast.Try([call], [handler], [], [])], []))
    everything = [*values, *[ast.Starred(load(rest), ast.Load())] * (rest is not None)]
    body.append(ast.Return(ast.Call(load(named(general, "general")), everything,
                                    [ast.keyword(None, load(kw))] * (kw is not None))))
    doc = (f"Run the gradient of {fun.__qualname__} built for these types of arguments;"
           " find or build the one any other call needs.")
    n_defaults = len(fun.__defaults__ or ())
    missing = named(MISSING, "MISSING")
    arguments = ast.arguments(
        posonlyargs=[ast.arg(p) for p in params[:code.co_posonlyargcount]],
        args=[ast.arg(p) for p in params[code.co_posonlyargcount:]],
        vararg=ast.arg(rest) if rest else None, kwonlyargs=[], kw_defaults=[],
        kwarg=ast.arg(kw) if kw else None, defaults=[load(missing)] * n_defaults)
    tree = ast.Module([ast.FunctionDef(name, arguments, [ast.Expr(ast.Constant(doc)), *body],
                                       [], None)], [])
    source = ast.unparse(ast.fix_missing_locations(tree)) + "\n"
    # Registered with linecache, so that a traceback through it shows its lines.
    filename = f"<symdiff dispatch {hashlib.sha256(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "symdiff.dispatch", "__builtins__": builtins, **objects}
    exec(builtins.compile(source, filename, "exec"), namespace)
    fn = namespace[name]
    # A call that does not fit the parameters is told as the function tells it.
    fn.__qualname__ = fun.__name__
    return fn


def _identifier(name, otherwise: str) -> str:
    # (a lambda's name, <lambda>, is no name to def or read)
    return name if name.isidentifier() and not keyword.iskeyword(name) else otherwise
