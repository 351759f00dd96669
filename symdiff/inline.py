"""Calls of the user's own functions -> their bodies lowered in place, names kept apart.

The lowering of a function (``lower._Lowering``) mixes this in. A helper is parsed once,
its arguments bound to its parameters (defaults as the def evaluated them), and where it
was found is remembered, so that rebinding it rebuilds the gradient.
"""

from __future__ import annotations

import ast
import types

import numpy as np

from .errors import SymdiffError
from .exits import RETURN, ExitError, single_exit
from .expressions import Val
from .ir import symbol
from .loops import assigned
from .parse import NOT_LITERAL, FunctionSource, literal


class Inline:
    """Calls of user functions; relies on ``lower._Lowering`` for everything else."""

    def _guard(self, func, obj):
        """Remember where a called helper was found: if it is rebound, rebuild."""
        if isinstance(func, ast.Name) and func.id not in self.local_functions:
            container = self.parsed.namespace.container(func.id)
            self.guards[(id(container), func.id)] = (container, func.id, obj)
        elif isinstance(func, ast.Attribute):
            base = self._expr(func.value).value
            if isinstance(base, types.ModuleType):
                self.guards[(id(base), func.attr)] = (vars(base), func.attr, obj)
                return
            # Ops.sq(x), cfg.act(x): found by its path from a module-level name, which
            # the guard follows again (the class or object may be rebound, or its attribute).
            path = []
            while isinstance(func, ast.Attribute):
                path.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name) and func.id not in self.local_functions and \
                    func.id not in self.env and self.enclosing.get(func.id) is None:
                container = self.parsed.namespace.container(func.id)
                dotted = ".".join([func.id, *reversed(path)])
                self.guards[(id(container), dotted)] = (container, dotted, obj)

    def _def_time_defaults(self, fn, positional) -> dict:
        """A helper's defaults as the def evaluated them (not as its names are now)."""
        if isinstance(fn, FunctionSource):
            return self.def_defaults.get(id(fn.node), {})
        values = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()):],
                          fn.__defaults__ or (), strict=True))
        values.update(fn.__kwdefaults__ or {})
        out = {}
        for p, v in values.items():
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
                v = float(v) if isinstance(v, np.floating) else v
                out[p] = self._expr(ast.Constant(int(v) if isinstance(v, np.integer) else v))
        return out  # others (arrays...): read from the def's own expression

    def _refuse_data_defaults(self, fn, callee, positional, defaults, known):
        """A helper's default that is data (an array, a list...) written as an expression
        (c=D): Python keeps the object the def made, but reading D when the gradient runs
        would see whatever D is then. Refused, rather than differentiate another value."""
        if isinstance(fn, FunctionSource):  # the command line: defaults read statically
            return
        values = dict(zip(positional[len(positional) - len(fn.__defaults__ or ()):],
                          fn.__defaults__ or (), strict=True))
        values.update(fn.__kwdefaults__ or {})
        for p, node in defaults.items():
            if p in known or not isinstance(values.get(p), (np.ndarray, list, dict, set, tuple)):
                continue
            if literal(node) is NOT_LITERAL:
                self.fail(node, f"{callee.name}'s default {p}={ast.unparse(node)} is the value "
                          "the def made, which symdiff cannot read when the gradient runs",
                          f"pass {p} to {callee.name} explicitly")

    def _inline(self, node, fn) -> Val:
        """A call of a user function: its body lowered in place, names kept apart."""
        from .parse import parse

        if any(f is fn for f in self.stack):
            self.fail(node, f"{ast.unparse(node.func)} calls itself (recursion is not "
                      "supported)", "a loop")
        if id(fn) not in self.parsed_callees:
            self.parsed_callees[id(fn)] = (fn, parse(fn))
        callee = self.parsed_callees[id(fn)][1]
        a = callee.node.args
        if a.vararg or a.kwarg:
            self.fail(node, f"{callee.name} takes *args or **kwargs, which are not supported",
                      "name each parameter")
        positional = [p.arg for p in (*a.posonlyargs, *a.args)]
        keyword_only = [p.arg for p in a.kwonlyargs]
        if len(node.args) > len(positional):
            self.fail(node, f"{callee.name} takes {len(positional)} positional arguments",
                      f"{callee.name}({', '.join(positional + keyword_only)})")
        given = dict(zip(positional, node.args, strict=False))
        for k in node.keywords:
            if k.arg not in positional + keyword_only or k.arg in given:
                self.fail(k.value, f"{callee.name} has no parameter {k.arg!r} (or it is "
                          "given twice)", f"{callee.name}({', '.join(positional + keyword_only)})")
            given[k.arg] = k.value
        defaults = dict(zip(positional[len(positional) - len(a.defaults):], a.defaults,
                            strict=True))
        defaults.update({p.arg: d for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                         if d is not None})
        args, problems = {}, []
        for p in positional + keyword_only:
            if p in given:
                args[p] = self._lowered(given[p], problems)
            elif p not in defaults:
                self.fail(node, f"{callee.name} needs the argument {p!r}",
                          f"{callee.name}({', '.join(positional + keyword_only)})")
        if problems:
            raise SymdiffError(problems=tuple(problems))
        nested = isinstance(fn, FunctionSource) and fn.name in self.local_functions and \
            self.local_functions[fn.name] is fn
        def_time = self._def_time_defaults(fn, positional)
        self._refuse_data_defaults(fn, callee, positional, defaults, set(args) | set(def_time))
        saved = (self.parsed, self.src, self.env, self.locals, self.local_functions,
                 self.enclosing, self.label, self.where, self.line)
        self.stack.append(fn)
        self.caller_envs.append(self.env)
        self.enclosing = {**self.enclosing, **self.env} if nested else {}
        self.parsed, self.src, self.env = callee, callee.source, {}
        self.locals, self.local_functions = assigned(callee.node.body), {}
        self.ids |= _identifiers(callee.node)
        self.names.taken |= _identifiers(callee.node)
        self.label = f" of {callee.name}"
        try:
            for p in positional + keyword_only:
                val = args[p] if p in args else def_time.get(p) or self._expr(defaults[p])
                self._bind(p, val, given.get(p, node))
            body, returns = single_exit(_without_docstring(callee.node.body))
            n_problems = len(self.problems)
            self._statements(body)
            if len(self.problems) > n_problems:
                found = tuple(self.problems[n_problems:])
                del self.problems[n_problems:]  # raised once more, by the caller's statement
                raise SymdiffError(problems=found) from None
            result = self.env.get(RETURN)
            if result is None or not returns:
                self.fail(callee.node, f"{callee.name} does not return a value on every path",
                          "end every path with return")
        except ExitError as e:
            raise self.src.error(e.node, e.message, e.hint) from None
        finally:
            self.stack.pop()
            self.caller_envs.pop()
            (self.parsed, self.src, self.env, self.locals, self.local_functions,
             self.enclosing, self.label, self.where, self.line) = saved
        return Val(symbol(result), ast.Name(result, ast.Load()))


def _without_docstring(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _identifiers(node) -> set[str]:
    ids = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return ids | {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
