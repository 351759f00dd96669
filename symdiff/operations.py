"""Calls, methods, indexing and concatenations -> SymPy images and array equations.

The lowering of a function (``lower._Lowering``) mixes this in, for ``expressions``. An
elementwise function gets its SymPy image; an array operation (np.sum, @, x[i], x.T, ...)
an equation of its own. Arguments are matched to the rule table's parameters (``rules``);
what the backward rule would refuse is refused here, where it is known already.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import types

import numpy as np
import sympy as sp

from . import calls, containers, rules, runtime
from .errors import SymdiffError
from .expressions import CALL_DEPTH, COVERAGE, Val, names_in
from .ir import Eqn, symbol
from .parse import MISSING, NOT_LITERAL, FunctionSource, literal
from .references import _user_function
from .runtime import stop_gradient


class Operations:
    """Calls and array operations; relies on ``lower._Lowering`` for everything else."""

    def _call(self, node) -> Val:
        for a in node.args:
            if isinstance(a, ast.Starred):
                self.fail(a, "starred arguments (*args) are not supported",
                          "pass each argument by position")
        for k in node.keywords:
            if k.arg is None:
                self.fail(k.value, "keyword unpacking (**kwargs) is not supported",
                          "pass each argument by name")
        if isinstance(node.func, ast.Attribute) and self._is_local_value(node.func.value):
            return self._method(node)
        if isinstance(node.func, ast.Call):  # grad(f)(x): a gradient made where it is called
            made = self._transformation(node.func)
            if made is not None:
                return self._gradient_call(node, made)
        fn = self._expr(node.func)
        if fn.expr is not None or fn.value is MISSING:
            self.fail(node.func, f"{ast.unparse(node.func)} is not a function",
                      "call NumPy or math functions")
        obj = fn.value
        from .api import Gradient

        if isinstance(obj, Gradient):  # df(x), df = grad(f) at module level (or @grad)
            return self._gradient_call(node, obj)
        found = self._list_call(node, obj)  # np.stack(hs), sum(g(x) for x in xs)
        if found is not None:
            return found
        if obj is stop_gradient:
            return self._stop_gradient(node)
        row = rules.lookup(obj)
        name = ast.unparse(node.func)
        if row is None and rules.no_gradient(obj) or row is not None and \
                row.names[0] in rules.CONSTRUCTORS and not self._carries_gradient(node, row):
            val = self._constant(node)
            if obj in _ARRAY_MAKERS:
                self.arrays.add(val.code.id)
            return val
        if (obj is min or obj is max) and len(node.args) > 2:
            # max(a, b, c) is max([a, b, c]): ties share equally, as np.max's do
            items = ast.copy_location(ast.List(list(node.args), ast.Load()), node.args[0])
            node = ast.copy_location(ast.Call(node.func, [items], node.keywords), node)
        if (obj is sum or obj is min or obj is max) and len(node.args) == 1 or \
                obj is sum and node.args:
            return self._builtin_reduction(node, obj)
        if row is None:
            if isinstance(obj, FunctionSource) or _user_function(obj):
                self._guard(node.func, obj)
                return self._inline(node, obj)
            if isinstance(obj, types.FunctionType) and obj.__module__.startswith("symdiff"):
                self.fail(node, f"{name} inside a function being differentiated is not "
                          "supported", "grad(f)(x) (a gradient called there is "
                          "differentiated again), or wrap the call in stop_gradient")
            self.fail(node, f"{name} is not supported",
                      "the NumPy and math functions: " + COVERAGE)
        positional = list(node.args)
        if row.names[0] == "scipy.linalg.cho_solve" and positional:
            positional = [*self._pair(positional[0]), *positional[1:]]
        if getattr(row, "sequence", "") == "operands" and len(positional) > 1:
            # np.einsum(spec, a, b): the operands are the rest of the arguments; in the
            # sublist form, einsum(a, [0, 1], b, [1, 2]), all of them (and spec None).
            first = positional[0]
            items = positional[1:]
            if self._einsum_sublists(positional):
                first, items = ast.copy_location(ast.Constant(None), first), positional
            positional = [first, ast.copy_location(ast.List(items, ast.Load()), items[0])]
        args = self._arguments(positional, node.keywords, row.params, row.optional, name, node,
                               getattr(row, "positional", 99))
        if isinstance(row, rules.Elementwise):
            problems: list = []
            vals = {p: self._lowered(a, problems) for p, a in args.items()}
            if problems:
                raise SymdiffError(problems=tuple(problems))
            for p, v in vals.items():
                if v.expr is None and v.value is not None:
                    self._need_number(v, args[p])
                vals[p] = self._shallow(v, args[p])
            for p in row.refused:
                v = vals.get(p)
                if v is not None and v.expr is not None and any(
                        s.name in self.active for s in v.expr.free_symbols):
                    self.fail(args[p], f"{name} is not differentiated in {p}: its derivative "
                              f"in {p} has no closed form",
                              f"{p} as a constant: a number, or a value that does not "
                              "depend on the differentiated inputs")
            self._refuse_static(row, vals, args, name)
            values = {p: v.expr if v.expr is not None else v.value for p, v in vals.items()}
            if list(values) == list(row.params[:len(values)]):
                expr = row.sympy(*values.values())
            else:  # an optional parameter given by name, one before it left out
                expr = row.sympy(**values)
            code = ast.Call(copy.copy(node.func), [v.code for v in vals.values()][
                :len(node.args)], [ast.keyword(k.arg, vals[k.arg].code) for k in node.keywords])
            if not expr.free_symbols and not expr.is_Number:
                # math.sqrt(2.0 * math.pi): computed as written and read by name, where
                # SymPy would fold it into the derivatives (0.707.../np.sqrt(np.pi)).
                return self._constant(node)
            calls = [c for v in vals.values() for c in v.calls]
            # An argument of one operation (3.0 * x in np.sin(3.0 * x)) too: np.cos(3.0 * x)
            # in the derivative reads it rather than multiplying again.
            calls += [(v.expr, v.code) for v in vals.values() if v.expr is not None and
                      not v.expr.is_Atom and not any(e is v.code for _, e in v.calls)]
            if not expr.is_Atom:
                calls.append((expr, code))
            return Val(expr, code, calls,
                       depth=max((v.depth for v in vals.values()), default=0) + CALL_DEPTH)
        return self._array_op(node, row, args)

    def _transformation(self, node):
        """The gradient ``grad(f, wrt=...)`` written in the code stands for (a Gradient),
        or None where ``node`` calls anything else."""
        from .api import grad

        if isinstance(node.func, ast.Name) and node.func.id in self.env or \
                _reference(node.func, self.parsed.namespace) is not grad:
            return None
        self._expr(node.func)  # (recorded: the generated code calls it as written)
        if not 1 <= len(node.args) <= 2 or any(k.arg != "wrt" for k in node.keywords) or \
                len(node.args) == 2 and node.keywords:
            self.fail(node, "a gradient called inside a function being differentiated is "
                      "supported as grad(f) or grad(f, wrt=...)",
                      "grad(f, wrt=...)(x) of a function f of the module")
        fn = self._expr(node.args[0]).value
        given = node.args[1] if len(node.args) == 2 else node.keywords[0].value \
            if node.keywords else ast.Constant(0)
        wrt = literal(given)
        if isinstance(fn, FunctionSource):  # (the command line reads FILE, not runs it)
            self.fail(node, "a gradient called inside a function is differentiated by the "
                      "Python API (grad(g)), where the module has run; the command line reads "
                      "FILE without running it", "grad(g) in Python, or --check")
        if wrt is NOT_LITERAL or not isinstance(fn, types.FunctionType):
            self.fail(node, "a gradient called inside a function being differentiated must "
                      "name its function and wrt as written values",
                      "grad(f, wrt=1)(x, y) with f a function of the module")
        return grad(fn, wrt=wrt)

    def _gradient_call(self, node, gradient) -> Val:
        """``df(x)`` of a gradient ``df = grad(f)``: an array operation of its own. Its
        value is the gradient's; the vector-Jacobian product of a gradient is a
        Hessian-vector product, which ``runtime._gradient_vjp`` makes by reverse over
        forward mode (and its tangent, ``_gradient_jvp``, the same way)."""
        from .api import Gradient

        callee = ast.unparse(node.func)
        fun = gradient.fun if isinstance(gradient, Gradient) else None
        if fun is None or gradient.with_value or gradient.has_aux or gradient.as_tuple or \
                gradient.lifted or gradient._self is not None or \
                not isinstance(fun, types.FunctionType):
            self.fail(node, f"{callee} inside a function being differentiated: only the "
                      "gradient of a plain function with respect to one parameter "
                      "(grad(f) or grad(f, wrt=...)) is differentiated again",
                      "grad(f, wrt=...) of a module-level function, without has_aux")
        code = fun.__code__
        if code.co_flags & (0x04 | 0x08) or code.co_kwonlyargcount:
            self.fail(node, f"{callee}: a gradient of a function with *args, **kwargs or "
                      "keyword-only parameters is not differentiated again",
                      "plain positional parameters")
        params = code.co_varnames[:code.co_argcount]
        defaults = dict(zip(params[len(params) - len(fun.__defaults__ or ()):],
                            map(repr, fun.__defaults__ or ()), strict=True))
        every = "(" + ", ".join("{" + p + "}" for p in params) + ",)"
        escaped = callee.replace("{", "{{").replace("}", "}}")
        row = rules.ArrayOp(
            (callee,), params,
            {p: f"_gradient_vjp({escaped}, {every}, {{g}}, {i})" for i, p in enumerate(params)},
            defaults, note="a gradient: its vector-Jacobian product is a Hessian-vector "
            "product", jvp={p: f"_gradient_jvp({escaped}, {every}, {{t}}, {i})"
                            for i, p in enumerate(params)})
        args = self._arguments(list(node.args), node.keywords, params, len(defaults), callee,
                               node)
        return self._array_op(node, row, args)

    def _returns_several(self, node) -> bool:
        """Whether ``node`` calls a function that returns several values (np.linalg.eigh),
        found without lowering it."""
        if not isinstance(node, ast.Call) or isinstance(node.func, ast.Attribute) and \
                self._is_local_value(node.func.value):
            return False
        if isinstance(node.func, ast.Name) and node.func.id in self.env:
            return False
        row = rules.lookup(_reference(node.func, self.parsed.namespace))
        if row is None or not row.outputs:
            return False
        if row.alone:  # logsumexp(x)[0], svd(a, compute_uv=False)[0]: an array's entries
            given = {**dict(zip(row.params, node.args, strict=False)),
                     **{k.arg: k.value for k in node.keywords}}
            param, code, _ = row.alone
            return (ast.unparse(given[param]) if param in given else row.defaults[param]) != code
        return True

    def _refuse_static(self, row, vals, args, name):
        """A static parameter (polygamma's order, gammainc's a) has no derivative in the
        rule: refused where it depends on the differentiated inputs."""
        for p in row.static:
            expr = vals[p].expr if p in vals else None
            if expr is not None and any(s.name in self.active for s in expr.free_symbols):
                others = [q for q in row.params if q not in row.static]
                self.fail(args[p], f"{name} is differentiated in {' and '.join(others)} "
                          f"only, and its {p} depends on the differentiated inputs",
                          f"compute {p} without them, or write stop_gradient({p}) to "
                          "leave its gradient out")

    def _carries_gradient(self, node, row) -> bool:
        """Whether an argument of ``row`` that has a gradient (not a shape or a count, whose
        rule is empty) depends on the differentiated inputs."""
        given = [*zip(row.params, node.args, strict=False),
                 *((k.arg, k.value) for k in node.keywords)]
        return any(row.vjp.get(p, "?") and self._reads_active(a) for p, a in given)

    def _reads_active(self, node) -> bool:
        """Whether ``node`` reads a value that depends on the differentiated inputs: a
        name, or an item of a container being differentiated (params[0])."""
        if isinstance(node, (ast.List, ast.Tuple)):  # (items may share nodes: as_list's)
            return any(self._reads_active(e) for e in node.elts)
        return any(n in self.active for n in names_in(self._constant_code(node))) or any(
            containers.resolve(self, n) is not None for n in ast.walk(node))

    def _einsum_sublists(self, positional) -> bool:
        """Whether np.einsum is called in its sublist form, einsum(a, [0, 1], b, [1, 2]):
        its first argument is an operand (it depends on the differentiated inputs), or a
        later one is a list of indices, not subscripts in a string."""
        first = positional[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return False
        return any(n in self.active for n in names_in(self._constant_code(first))) or \
            any(isinstance(a, (ast.List, ast.Tuple)) for a in positional[1:])

    def _is_local_value(self, node) -> bool:
        """Whether ``node`` is a value computed in the function (so .sum() is a method)."""
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in self.env or root.id in self.locals \
                or root.id in self.enclosing:
            return True
        return isinstance(self.parsed.namespace.lookup(root.id), np.ndarray)

    def _method(self, node) -> Val:
        meth = node.func.attr
        row = rules.METHODS.get(meth)
        receiver = node.func.value
        if row is None and isinstance(receiver, ast.Name) and \
                receiver.id == calls.method_self(self.parsed.fn):
            # Which function self.h names depends on the class of self at each call (a
            # subclass may override it), which the gradient, built once, cannot follow.
            name = ast.unparse(node.func)
            self.fail(node.func, f"{name}(...) calls a method of {receiver.id}, which "
                      "symdiff does not follow (a subclass may override it)",
                      f"a module-level function taking {receiver.id}, def {meth}(obj, ...), "
                      f"called as {meth}({receiver.id}, ...): symdiff differentiates through it")
        if meth == "get" and isinstance(containers.resolve(self, receiver), containers.Tree):
            return self._dict_get(node, containers.resolve(self, receiver))
        if row is None and not hasattr(np.ndarray, meth):
            self.fail(node.func, f"{ast.unparse(node.func)}() is not supported: symdiff "
                      f"differentiates numbers and arrays, and .{meth}() is not a method of "
                      "NumPy arrays", "compute it outside the function and pass the value in")
        if row is None:
            self.fail(node.func, f"the array method .{meth}() is not supported",
                      ", ".join(f".{m}()" for m in sorted(rules.METHODS)) + "; " + COVERAGE)
        params = row.params[1:]
        positional = list(node.args)
        if meth in ("reshape", "transpose") and len(positional) > 1:
            # x.reshape(3, 4) means x.reshape((3, 4)).
            positional = [ast.copy_location(ast.Tuple(positional, ast.Load()), positional[0])]
        optional = len([p for p in params if p in row.defaults])
        args = self._arguments(positional, node.keywords, params, optional,
                               "." + meth, node, row.positional - 1)
        return self._array_op(node, row, {row.params[0]: node.func.value, **args},
                              receiver=node.func.value)

    def _arguments(self, positional, keywords, params, optional, name, node,
                   limit=99) -> dict:
        if len(positional) > min(len(params), limit):
            if len(positional) <= len(params):
                self.fail(node, f"{name} takes {', '.join(params[:limit])} by position here",
                          f"pass {', '.join(params[limit:])} by name")
            self.fail(node, f"{name} takes at most {len(params)} arguments here",
                      f"{name}({', '.join(params)})")
        args = dict(zip(params, positional, strict=False))
        for k in keywords:
            if k.arg not in params or k.arg in args:
                self.fail(k.value, f"{name}(..., {k.arg}=...) is not supported",
                          f"{name}({', '.join(params)}); " + COVERAGE)
            args[k.arg] = k.value
        required = params[: len(params) - optional]
        missing = [p for p in required if p not in args]
        if missing:
            self.fail(node, f"{name} needs the argument {missing[0]!r}",
                      f"{name}({', '.join(params)})")
        return {p: args[p] for p in params if p in args}

    def _array_op(self, node, row, args, receiver=None) -> Val:
        """An equation for an array operation; its operands become names first."""
        if row.alone:  # np.linalg.svd(a, compute_uv=False): one value, not several
            param, code, vjp = row.alone
            given = args.get(param)
            if given is not None and literal(given) is NOT_LITERAL:
                self.fail(given, f"{row.names[0]}'s {param} must be written in the code "
                          f"(True or False): what the call returns depends on it",
                          f"{param}={code}")
            if (ast.unparse(given) if given is not None else row.defaults[param]) == code:
                row = dataclasses.replace(row, vjp=vjp, outputs=(), alone=(),
                                          jvp=row.alone_jvp, output_jvps=())
        operands, statics, codes = [], [], {}
        problems: list = []
        for p, a in args.items():
            try:
                self._argument(row, p, a, operands, statics, codes)
            except SymdiffError as e:  # read the others too: report every problem
                problems.extend(e.problems or (self.src.problem(a, str(e)),))
        if problems:
            raise SymdiffError(problems=tuple(problems))
        self._refuse_early(node, row, operands, dict(statics))
        if row.outputs:
            return self._several(node, row, operands, statics, codes, receiver)
        # The same operation of the same values twice (x[:-1] in two places) is one value:
        # computed once, and its adjoints summed before they are scattered back.
        key = (row.names[0], tuple(operands), tuple(statics))
        if key in self.memo and row.names[0] not in _FRESH and not any(
                isinstance(n, ast.Call) for p, _ in statics for n in ast.walk(codes[p])):
            name = self.memo[key]
            self.temps.discard(name)  # handed out twice: renaming it would lose one of them
            return Val(symbol(name), ast.Name(name, ast.Load()))
        code = self._forward_code(node, row, codes, receiver)
        out = self.names.fresh("_t", numbered=True)
        self.memo[key] = out
        inputs = tuple(dict.fromkeys(n for _, n, _ in operands))
        active = any(i in self.active for i in inputs)
        if active:
            self.active.add(out)
        self.bound.add(out)
        self.temps.add(out)
        if row.names[0] in _VIEWS:  # x[1:], x.T, reshape: the same data under a new name
            self.alias[out] = self._root(operands[0][1])
        elif row.names[0] == "np.array" and "copy" in args and operands and \
                ast.unparse(args["copy"]) != "True":  # (copy=None or False: maybe the same)
            self.alias[out] = self._root(operands[0][1])
        if row.names[0] in ("np.stack", "np.concatenate", "np.outer", "np.array",
                            "np.asarray", "np.copy"):
            self.arrays.add(out)
        if row.names[0] == "np.reshape":
            shape = _literal(dict(statics).get("shape"))
            if isinstance(shape, tuple):
                self.ndims[out] = len(shape)
        self.eqns.append(Eqn(out, "array", code, self.line, inputs, active, self.where, op=row,
                             operands=tuple(operands), statics=tuple(statics)))
        return Val(symbol(out), ast.Name(out, ast.Load()))

    def _several(self, node, row, operands, statics, codes, receiver) -> Val:
        """A function returning several values (np.linalg.eigh, np.split): it runs once, as
        a value without gradient, and each output is an equation of its own that reads its
        part, with its own rule (whose templates read the whole result, ``factors``). The
        call's value is the tuple (or list) of the outputs, to unpack or index."""
        count = self._outputs(node, row, dict(statics))
        code = self._forward_code(node, row, codes, receiver)
        whole = self.names.fresh("_t", numbered=True)
        self.bound.add(whole)
        self.temps.add(whole)
        inputs = tuple(dict.fromkeys(n for _, n, _ in operands))
        active = any(i in self.active for i in inputs)
        self.eqns.append(Eqn(whole, "const", code, self.line, inputs, False, self.where))
        parts = []
        for k in range(count):
            out = self.names.fresh("_t", numbered=True)
            self.bound.add(out)
            self.temps.add(out)
            part = row.part(k)
            read = ast.Subscript(ast.Name(whole, ast.Load()), ast.Constant(k), ast.Load())
            if active and any(part.vjp.get(p) for p, _, _ in operands):
                self.active.add(out)
                self.eqns.append(Eqn(out, "array", read, self.line, (whole, *inputs), True,
                                     self.where, op=part, operands=tuple(operands),
                                     statics=(*statics, ("factors", whole), ("part", str(k)))))
            else:  # (a sign, a rank: no gradient)
                self.eqns.append(Eqn(out, "const", read, self.line, (whole,), False,
                                     self.where))
            parts.append(out)
        kind = list if row.outputs[0][0] == "*" else tuple
        tree = containers.Tree(kind, tuple(range(count)), tuple(parts),
                               ast.Name(whole, ast.Load()), row.names[0])
        return Val(None, ast.Name(whole, ast.Load()), value=tree)

    def _outputs(self, node, row, statics) -> int:
        """How many values ``row``'s call returns: its outputs, or np.split's sections."""
        name = row.names[0]
        if name in _MODES:
            param, allowed = _MODES[name]
            if _literal(statics.get(param, row.defaults.get(param))) not in allowed:
                self.fail(node, f"{name} with {param}={statics[param]} is not supported",
                          f"{param}={allowed[0]!r} (written in the code)")
        if row.outputs[0][0] != "*":
            return len(row.outputs)
        sections = _literal(statics.get("indices_or_sections"))
        if type(sections) is int and sections > 0:
            return sections
        if isinstance(sections, (list, tuple)) and all(type(i) is int for i in sections):
            return len(sections) + 1
        self.fail(node, f"{name}'s sections must be written in the code: how many parts it "
                  "returns depends on them", f"{name}(x, 3) or {name}(x, [2, 5])")

    def _argument(self, row, p, a, operands, statics, codes):
        """Parameter ``p`` of an array operation, given as ``a``: an operand (a name), a
        list of operands, or a static argument (code run as written)."""
        if p == row.entries and isinstance(containers.as_list(self, a), (ast.List, ast.Tuple)):
            a = containers.as_list(self, a)
            codes[p] = self._entries(a, (), p, operands)
            statics.append((p, ast.unparse(codes[p])))  # (constant entries tell values apart)
        elif p == row.sequence:
            if self._returns_several(a):  # np.concatenate(np.split(x, 3)): its parts
                a = self._parts(a)
            a = containers.as_list(self, a)  # np.stack(ws): its items, [ws[0], ws[1]]
            if not isinstance(a, (ast.List, ast.Tuple)) and row.vjp[p].startswith(_JOINS):
                # np.vstack(A) of an array: the rows of A are the arrays joined
                n = self._operand(self._expr(a), a)
                operands.append((p, n, None))
                codes[p] = ast.Name(n, ast.Load())
                return
            if not isinstance(a, (ast.List, ast.Tuple)):
                self.fail(a, f"pass {p} as a list of arrays, [a, b, ...]",
                          "the functions that join arrays: " + COVERAGE)
            problems: list = []
            # (np.einsum's sublists, [0, 1], are indices: run as written)
            vals = [self._constant(e) if p == "operands" and isinstance(e, (ast.List, ast.Tuple))
                    else self._lowered(e, problems) for e in a.elts]
            if problems:
                raise SymdiffError(problems=tuple(problems))
            names = [self._operand(v, e) for v, e in zip(vals, a.elts, strict=True)]
            operands += [(p, n, i) for i, n in enumerate(names)]
            codes[p] = ast.List([ast.Name(n, ast.Load()) for n in names], ast.Load())
        elif row.vjp.get(p):
            # (np.pad's constant_values=(1.0, 2.0), pairs of numbers: run as written)
            v = self._constant(a) if p == "constant_values" and isinstance(
                a, (ast.List, ast.Tuple)) and not any(
                n in self.active for n in names_in(self._constant_code(a))) else self._expr(a)
            n = self._operand(v, a)
            if isinstance(v.value, np.ndarray):  # a module-level array: its ndim is known
                self.ndims[n] = v.value.ndim
            operands.append((p, n, None))
            codes[p] = ast.Name(n, ast.Load())
        else:
            code = self._constant_code(a)
            if isinstance(code, ast.Name) and code.id in self.active and \
                    p not in row.vjp:  # (an empty rule: it has no gradient)
                self.fail(a, f"{p} must not depend on the differentiated inputs",
                          f"a constant {p}, such as a number or x.shape")
            if p not in row.vjp and p not in _MASKS and self._varies_smoothly(a):
                # (np.var(x, ddof=x[0] * 0.5): read as a constant, its gradient would be lost)
                self.fail(a, f"{row.names[0]} is not differentiated in {p}, which varies "
                          "with the inputs", f"a constant {p}, or stop_gradient({p}) to drop its "
                          "gradient")
            text = ast.unparse(ast.Subscript(ast.Name("_", ast.Load()), code, ast.Load()))
            statics.append((p, text[2:-1] if p == "index" else ast.unparse(code)))
            codes[p] = code

    def _dict_get(self, node, tree) -> Val:
        """``d.get(key, default)`` of a dict being differentiated: its item where its keys
        (known when building) hold the key, else the default (None if left out)."""
        if tree.type is not dict or not 1 <= len(node.args) <= 2 or node.keywords:
            self.fail(node, f"{ast.unparse(node.func)}(key, default) of a dict being "
                      "differentiated is supported", "d.get(\"W\", 0.0), or d[\"W\"]")
        key = containers.static(self, node.args[0])
        if key in tree.keys:
            item = ast.copy_location(ast.Subscript(node.func.value, node.args[0], ast.Load()),
                                     node)
            return self._expr(item)
        default = node.args[1] if len(node.args) == 2 else ast.copy_location(
            ast.Constant(None), node)
        return self._expr(default)

    def _varies_smoothly(self, node) -> bool:
        """Whether the value of ``node`` may change smoothly with the differentiated inputs:
        it reads one of them other than through a comparison, a shape, stop_gradient or a
        function whose value has no gradient (int, len, np.argmax...)."""
        match node:
            case ast.Compare() | ast.BoolOp() | ast.UnaryOp(op=ast.Not()):
                return False
            case ast.Attribute(attr=attr) if attr in rules.NO_GRADIENT_ATTRIBUTES:
                return False
            case ast.Name(id=name):
                return self.env.get(name) in self.active
            case ast.Call(func=func) if not (isinstance(func, ast.Name) and func.id in self.env):
                obj = _reference(func, self.parsed.namespace)
                if obj is stop_gradient or rules.no_gradient(obj):
                    return False
        return any(self._varies_smoothly(c) for c in ast.iter_child_nodes(node))

    def _pair(self, node) -> list:
        """cho_solve's (c, lower), as its two arguments: the items of a tuple written out,
        of a call returning them (cho_factor's), or of a name holding them."""
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            return node.elts
        if self._returns_several(node):
            node = self._parts(node)
            if len(node.elts) == 2:
                return node.elts
        return [ast.copy_location(ast.Subscript(node, ast.Constant(k), ast.Load()), node)
                for k in (0, 1)]

    def _parts(self, node):
        """A call returning several values, lowered; a list of its parts (subscripts of
        the call's name, which reads them)."""
        tree = self._expr(node).value
        holder = tree.holder
        self.trees.setdefault(holder, tree)
        self.counter += 1
        key = f"<parts{self.counter}>"
        self.env[key] = holder
        return ast.copy_location(ast.List([ast.copy_location(ast.Subscript(
            ast.Name(key, ast.Load()), ast.Constant(k), ast.Load()), node)
            for k in tree.keys], ast.Load()), node)

    def _refuse_early(self, node, row, operands, statics):
        """What the backward sweep's rule would refuse when called, refused now, where it
        is known already: a literal assume_a of SciPy's solve and inv. The rule itself is
        asked, so that this follows what it supports."""
        name = row.names[0]
        if name in ("scipy.linalg.solve", "scipy.linalg.inv") and "assume_a" in statics:
            structure = _literal(statics["assume_a"])
            if structure is not _UNKNOWN and _refuses(runtime._structure, structure, name):
                self.fail(node, f"{name} with assume_a={structure!r} is not supported",
                          f"{name} with assume_a None, 'gen', 'sym', 'pos', 'her', 'upper "
                          "triangular', 'lower triangular', 'diagonal' or 'tridiagonal'")

    def _forward_code(self, node, row, codes, receiver):
        """The user's own call (or operator, or method), with its operands renamed."""
        if isinstance(node, ast.BinOp):
            return ast.BinOp(codes["a"], node.op, codes["b"])
        if isinstance(node, (ast.List, ast.Tuple)):  # [a, b] read as an array, as NumPy reads it
            # (an array, not a list, so that 2*v in a derivative doubles it, never repeats it)
            return ast.Call(ast.Name("_as_read", ast.Load()), [codes[row.entries]], [])
        if isinstance(node, ast.Subscript) and row.sequence:  # np.r_[a, b]
            items = ast.Tuple(codes[row.sequence].elts, ast.Load())
            return ast.Subscript(self._constant_code(node.value), items, ast.Load())
        if isinstance(node, ast.Subscript):
            return ast.Subscript(codes["a"], codes["index"], ast.Load())
        if isinstance(node, ast.Attribute):  # x.T
            return ast.Attribute(codes[row.params[0]], node.attr, ast.Load())
        if receiver is not None:
            func = ast.Attribute(codes[row.params[0]], node.func.attr, ast.Load())
            rest = row.params[1:]
        else:
            func, rest = copy.copy(node.func), row.params
        count = len(node.args)
        if receiver is not None and node.func.attr in ("reshape", "transpose") and count > 1:
            count = 1  # x.reshape(3, 4) was read as x.reshape((3, 4))
        keywords_given = {k.arg for k in node.keywords}
        params = [p for p in rest if p in codes and p not in keywords_given]
        args = [codes[p] for p in params[:count]]
        if row.sequence == "operands":
            sublists = isinstance(codes["subscripts"], ast.Constant) and \
                codes["subscripts"].value is None
            args = args[:0 if sublists else 1] + codes["operands"].elts
        if row.names[0] == "scipy.linalg.cho_solve":  # (c, lower) is one argument
            args = [ast.Tuple([codes["c"], codes["lower"]], ast.Load()), codes["b"]]
        keywords = [ast.keyword(k.arg, codes[k.arg]) for k in node.keywords]
        return ast.Call(func, args, keywords)

    def _entries(self, node, path, p, operands):
        """The nested list or tuple ``node`` of np.array(...) with each entry lowered: one
        that depends on the differentiated inputs becomes an operand at its index in the
        result (``path``), any other stays code, run as written."""
        problems: list = []
        elts = []
        for k, e in enumerate(node.elts):
            here = (*path, k)
            if isinstance(e, ast.Starred):
                self.fail(e, "starred items (*a) in a list read as an array are not "
                          "supported", "np.concatenate([a, b])")
            nested = containers.as_list(self, e)
            if isinstance(nested, (ast.List, ast.Tuple)):
                elts.append(self._entries(nested, here, p, operands))
                continue
            v = self._lowered(e, problems)
            if v is None:
                continue
            try:
                self._need_number(v, e)
            except SymdiffError as error:
                problems.extend(error.problems)
                continue
            if {s.name for s in v.expr.free_symbols} & self.active:
                n = self._operand(v, e)
                operands.append((p, n, here[0] if len(here) == 1 else here))
                elts.append(ast.Name(n, ast.Load()))
            else:
                elts.append(v.code)
        if problems:
            raise SymdiffError(problems=tuple(problems))
        return type(node)(elts, ast.Load())

    def _sequence(self, node) -> Val:
        """A list or tuple literal where a value is read (np.sum([a, b]), x * [1.0, 2.0]):
        run as written, as NumPy reads it; an array of its entries to the differentiator."""
        if not self._reads_active(node):
            return self._constant(node)
        val = self._array_op(node, rules.SEQUENCE, {"items": node})
        self._hold(val)
        return val

    def _hold(self, val):
        """A list's value holds its items' arrays (a write into one changes what it holds)."""
        last = self.eqns[-1] if self.eqns else None
        if isinstance(val.code, ast.Name) and isinstance(last, Eqn) and last.out == val.code.id:
            self.holds[last.out] = set(last.inputs)

    def _builtin_reduction(self, node, fn) -> Val:
        """The builtins sum(iterable, start), min(iterable) and max(iterable). A sum of the
        items of a list or tuple written out is their sum, broadcast as + does; anything
        else (an array, a list value) is reduced along its first axis, as Python does."""
        name = ast.unparse(node.func)
        row = rules.BUILTIN_REDUCTIONS[fn]
        args = self._arguments(list(node.args), node.keywords, row.params, row.optional,
                               name, node)
        items = containers.as_list(self, args["iterable"])
        if fn is sum and isinstance(items, (ast.List, ast.Tuple)) and not any(
                isinstance(e, ast.Starred) for e in items.elts):
            problems: list = []
            parts = [("start", args["start"])] if "start" in args else []
            parts += [(None, e) for e in items.elts]
            vals = [self._lowered(e, problems) for _, e in parts]
            if problems:
                raise SymdiffError(problems=tuple(problems))
            for v, (_, e) in zip(vals, parts, strict=True):
                self._need_number(v, e)
            vals = [self._shallow(v, e) for v, (_, e) in zip(vals, parts, strict=True)]
            expr = sum((v.expr for v in vals), sp.Integer(0))
            codes = [v.code for v in vals]
            start = [codes.pop(0)] if "start" in args else []
            listed = type(items)(codes, ast.Load())
            keywords = [ast.keyword("start", start[0])] if start and not len(node.args) > 1 \
                else []
            code = ast.Call(copy.copy(node.func), [listed, *(start if not keywords else [])],
                            keywords)
            if not expr.free_symbols and not expr.is_Number:
                return self._constant(node)
            calls = [c for v in vals for c in v.calls]
            if not expr.is_Atom:
                calls.append((expr, code))
            return Val(expr, code, calls,
                       depth=max((v.depth for v in vals), default=0) + 1)
        return self._array_op(node, row, {**args, "iterable": items})

    def _subscript(self, node) -> Val:
        if self._returns_several(node.value):  # np.linalg.slogdet(a)[1]
            tree = self._expr(node.value).value
            found = containers.part(self, tree, node)
            if isinstance(found, containers.Tree):
                return containers.whole(found)
            return Val(symbol(found), ast.Name(found, ast.Load()))
        found = containers.item(self, node)
        if found is not None:
            return found
        row = rules.concatenator(_reference(node.value, self.parsed.namespace))
        if row is not None and not self._is_local_value(node.value):
            return self._concatenation(node, row)
        if not self._is_local_value(node.value) or self._inactive(node.value):
            return self._constant(node)
        if self._is_list_node(node.value):  # hs[-1] of a list the function built
            return self._list_index(node)
        return self._array_op(node, rules.INDEX, {"a": node.value, "index": node.slice})

    def _concatenation(self, node, row) -> Val:
        """np.r_[a, b, ...], np.c_[...]: a concatenation of its items, where one of them
        depends on the differentiated inputs (else a constant, run as written)."""
        code = self._constant_code(node)
        if not any(n in self.active for n in names_in(code)):
            return self._constant(node)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        # A range among them, np.r_[x, 1:4], is the 1-D array np.r_[1:4] reads it as (a
        # constant, when its bounds are)
        items = [ast.copy_location(ast.Subscript(node.value, e, ast.Load()), e)
                 if isinstance(e, ast.Slice) and not any(
                     n in self.active for n in names_in(self._constant_code(e))) else e
                 for e in items]
        for e in items:
            if isinstance(e, ast.Slice) or isinstance(e, ast.Constant) and isinstance(
                    e.value, str):
                what = "a slice (a range)" if isinstance(e, ast.Slice) else \
                    "a string directive"
                self.fail(e, f"{ast.unparse(node.value)}[...] with {what} among values that "
                          "depend on the differentiated inputs is not supported",
                          "np.concatenate of arrays (np.arange for a range)")
        return self._array_op(node, row, {"items": ast.List(items, ast.Load())})


# Parameters without gradient whose value may be a mask of the inputs (np.where(x > 0, ...)):
# piecewise constant, their derivative is 0 wherever it exists.
_MASKS = ("index", "condition", "condlist")
# Joins whose adjoint of one array also takes an array whose rows are the arrays joined.
_JOINS = ("_part(", "_joined_part(")


def _reference(node, namespace):
    """The module-level object a dotted name (np.r_) refers to, or None; nothing recorded."""
    if isinstance(node, ast.Name):
        obj = namespace.lookup(node.id)
        return None if obj is MISSING else obj
    if isinstance(node, ast.Attribute):
        return getattr(_reference(node.value, namespace), node.attr, None)
    return None


# Operations whose result may share its first operand's data (NumPy views): x[1:], x.T,
# reshape, np.flip always, np.einsum where the subscripts only permute or keep axes
# ('ij->ji'), np.asarray of an array (the array itself): writing into the result writes
# there.
_VIEWS = {"x[...]", "np.reshape", "np.ravel", "np.squeeze", "np.expand_dims", "np.transpose",
          "np.broadcast_to", "np.flip", "np.einsum", "np.diagonal", "np.diag", "np.moveaxis",
          "np.swapaxes", "np.rollaxis", "np.atleast_1d", "np.atleast_2d", "np.atleast_3d",
          "np.flipud", "np.fliplr", "np.rot90", "np.asarray"}


# Operations that make a new array (or list) each time, which the function may write into
# (y = x.copy(); y[0] = v): two calls are two values, never one.
_FRESH = {"[...]", "np.array", "np.asarray", "np.copy", "np.ndarray.astype"}

_UNKNOWN = NOT_LITERAL
# The parameter that decides what a function returning several values returns, and the
# values it is differentiated for (np.linalg.qr(a, 'r') returns r alone).
_MODES = {"np.linalg.qr": ("mode", ("reduced", "complete"))}
# What always returns a new ndarray (0-d at least): a name bound to one is an array.
_ARRAY_MAKERS = (np.zeros, np.ones, np.full, np.zeros_like, np.ones_like, np.full_like,
                 np.empty, np.empty_like,
                 np.eye, np.identity, np.arange, np.linspace)


def _literal(text):
    """The value of a static argument's code if it is a literal, else _UNKNOWN."""
    return literal(text) if text is not None else _UNKNOWN


def _refuses(rule, *args) -> bool:
    """Whether a backward rule raises SymdiffError for these (stand-in) arguments."""
    try:
        rule(*args)
    except SymdiffError:
        return True
    except Exception:  # noqa: BLE001 - anything else: not a refusal we can report early
        return False
    return False
