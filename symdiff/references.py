"""Names and attributes -> values: locals, module-level names, closures, attributes.

The lowering of a function (``lower._Lowering``) mixes this in, for ``expressions``. Each
name is recorded so that the generated code reads it again: a module-level number or array
is read when the gradient runs (it may be rebound); a function found by name is guarded (if
it is rebound, the gradient is built again).
"""

from __future__ import annotations

import ast
import copy
import numbers
import sys
import sysconfig
import types

import numpy as np

from . import containers, rules, runtime
from .expressions import COVERAGE, Val
from .ir import symbol
from .parse import MISSING, FunctionSource


class References:
    """Names and attributes; relies on ``lower._Lowering`` for everything else."""

    def _name(self, node, name) -> Val:
        ssa = self._local(node, name)
        if ssa in self.trees:
            return containers.whole(self.trees[ssa])
        if ssa is not None:
            return Val(symbol(ssa), ast.Name(ssa, ast.Load()))
        if name in self.local_functions:
            return Val(None, ast.Name(name, ast.Load()), value=self.local_functions[name])
        obj = self._use_global(node, name)
        return self._global(obj, ast.Name(name, ast.Load()), data_name=name)

    def _local(self, node, name) -> str | None:
        """The SSA name a local variable has here, None for a global; fails if unbound."""
        if name in self.env:
            return self.env[name]
        if name in self.locals:
            self.fail(node, f"{name!r} is used before it is assigned",
                      "assign it on every path before its use")
        if name in self.starred and self.parsed is self.top:
            self.fail(node, f"the parameter {self.starred[name]}{name} is not supported",
                      "name each parameter: def f(x, a, b)")
        return self.enclosing.get(name)

    def _use_global(self, node, name):
        """What a module-level or closure name refers to; recorded for the generated code."""
        obj = self.parsed.namespace.lookup(name)
        if obj is MISSING:
            self.fail(node, f"name {name!r} is not defined",
                      "parameters, local names, and module-level names")
        if name in self.globals_used and self.globals_used[name] is not obj:
            self.fail(node, f"{name!r} means one thing in {self.first_user.get(name, '?')} "
                      f"and another in {self.parsed.name}", "give one of them another name")
        if name in self.bound:
            self.fail(node, f"{name!r} is a module-level name here and a local variable of "
                      "a function that calls this one", "give one of them another name")
        if name == "SymdiffError" or name.startswith("_") and callable(
                getattr(runtime, name, None)):
            self.fail(node, f"{name} is a name symdiff's generated code uses for itself",
                      "rename the module-level name")
        where = self.parsed.namespace.container(name)
        self.first_user.setdefault(name, self.parsed.name)
        self.globals_used[name] = obj
        self.globals_where[name] = where
        self.names.taken.add(name)
        if isinstance(where, dict) and name not in where or isinstance(obj, (
                types.ModuleType, type, FunctionSource)):
            return obj  # a builtin, a module or a class: not rebound in practice
        if callable(obj):
            # act = np.tanh: the derivative is tanh's; if act is rebound, build again.
            self.guards[(id(where), name)] = (where, name, obj)
        else:
            self.data_globals[name] = where  # read afresh at every call, as f would
        return obj

    def _global(self, obj, code, data_name=None) -> Val:
        if isinstance(obj, numbers.Real) and not isinstance(obj, bool) and \
                isinstance(obj, (int, float, np.floating, np.integer)):
            if data_name is not None and obj not in (np.pi, np.e):
                # A module-level number may be rebound: read its value at call time.
                self.data_globals[data_name] = self.parsed.namespace.container(data_name)
                return Val(symbol(data_name), code, value=obj)
            return Val(rules.constant(obj), code, value=obj)
        if isinstance(obj, np.ndarray) and data_name is not None:
            self.data_globals[data_name] = self.parsed.namespace.container(data_name)
            return Val(symbol(data_name), code, value=obj)
        return Val(None, code, value=obj)

    def _attribute(self, node) -> Val:
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id not in self.env:
            base = self._expr(node.value)
            if base.expr is None and base.value is not MISSING and not isinstance(
                    base.value, (np.ndarray, numbers.Number)):
                obj = getattr(base.value, node.attr, MISSING)
                if obj is MISSING:
                    self.fail(node, f"{ast.unparse(node)} does not exist",
                              "check the spelling")
                if isinstance(base.value, types.ModuleType) and not _library(base.value):
                    return self._module_attribute(obj, node, base.value)
                if not isinstance(base.value, types.ModuleType) and isinstance(
                        obj, (numbers.Real, np.ndarray)) and not isinstance(obj, bool):
                    # CFG.lr, Model.k: an object's attribute may be set again; read when
                    # the gradient runs, by the derivatives too (as self.k is).
                    return Val(symbol(ast.unparse(node)), copy.copy(node), value=obj)
                return self._global(obj, copy.copy(node))
        if isinstance(containers.resolve(self, node.value), containers.Tree):
            # (r.logabsdet of r = np.linalg.slogdet(A): read as a constant, its gradient
            # would be lost)
            self.fail(node, f"{ast.unparse(node)}: attributes of values being differentiated "
                      "in a tuple, list or dict are not supported",
                      f"unpack them (a, b = ...) or index them ({ast.unparse(node.value)}[1])")
        if node.attr in rules.NO_GRADIENT_ATTRIBUTES:
            return self._constant(node)
        if node.attr != "T" and self._inactive(node.value):
            # self.W, self.cfg.lr, cfg.scale: an attribute of a value that is not
            # differentiated is read when the gradient runs, as a value without gradient.
            return self._constant(node)
        if node.attr == "T":
            return self._array_op(node, rules.METHODS["transpose"], {"a": node.value},
                                  receiver=node.value)
        self.fail(node, f"attribute .{node.attr} is not supported",
                  ".T .shape .ndim .size, and the methods: " + COVERAGE)

    def _module_attribute(self, obj, node, module) -> Val:
        """cfg.SCALE, cfg.act of the user's own module: read when the gradient runs."""
        dotted = ast.unparse(node)
        if callable(obj) and not isinstance(obj, type):
            # cfg.act = np.tanh: if cfg.act is rebound, build again.
            self.guards[(id(module), node.attr)] = (vars(module), node.attr, obj)
        elif isinstance(obj, (numbers.Real, np.ndarray)) and not isinstance(obj, bool) \
                and obj is not np.pi and obj is not np.e:
            # Its name in the derivatives too, so a rebound value is used there as well.
            return Val(symbol(dotted), copy.copy(node), value=obj)
        return self._global(obj, copy.copy(node))


def _library(module) -> bool:
    """A module of NumPy, SciPy, the standard library... (not rebound at run time)."""
    name = getattr(module, "__name__", "")
    return name.split(".")[0] in _LIBRARIES or name in sys.stdlib_module_names or \
        (getattr(module, "__file__", None) or "").startswith(_INSTALLED)


_LIBRARIES = ("symdiff", "numpy", "scipy", "sympy", "jax", "torch", "autograd")
_INSTALLED = tuple({sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib",
                                                       "platlib")})


def _user_function(obj) -> bool:
    """A Python function of the user's, to differentiate through (not a library's)."""
    if not isinstance(obj, types.FunctionType):
        return False
    if (getattr(obj, "__module__", "") or "").split(".")[0] in _LIBRARIES:
        return False
    return not obj.__code__.co_filename.startswith(_INSTALLED)
