"""IR -> tangent program: forward mode (JAX's jvp), as Python source symdiff reads again.

For each step ``v = e(a, b)`` of the function the tangent program computes ``v`` as the
function does, then its tangent ``v_dot = de/da * a_dot + de/db * b_dot`` (SymPy's local
derivatives, as the backward sweep's), where ``a_dot`` is the directional derivative of
``a`` along the tangents of the differentiated parameters. An array operation's tangent
follows its row in the rules table: a linear operation (a sum, a slice) runs on the
operands' tangents, a multilinear one (matmul) is summed over its operands, any other has
templates of its own (``ArrayOp.jvp``). Branches and loops stay as they are and carry the
tangents along: forward mode needs no tape.

The program is plain NumPy written with the calls the rules table knows, so it can be
differentiated again in reverse mode: that is how second derivatives are made (reverse
over forward: ``api.hessian``, ``grad`` of a gradient, ``jvp`` of a gradient).
"""

from __future__ import annotations

import ast
import dataclasses
import re

import numpy as np
import sympy as sp

from . import __version__, rules, runtime
from .algebra import cse, decimals, reuse_value, whole_floats
from .control import _mark_active, _reaching, _replace
from .emit import Printer
from .errors import SymdiffError
from .ir import IR, Eqn, If, Loop, Names, symbol, template_fields
from .runtime import stop_gradient
from .shapes import facts, sources


@dataclasses.dataclass(frozen=True)
class Tangent:
    """A tangent program's source and what it was made of."""

    name: str  # the generated function's name
    source: str
    params: tuple[str, ...]  # the function's own parameters, then the tangents taken
    tangents: tuple[str, ...]  # the differentiated parameters whose tangent is a parameter
    ir: IR
    globals: dict = dataclasses.field(default_factory=dict)  # its own free names' objects
    # Why symdiff cannot differentiate the program again (located Problems), if it cannot.
    unreadable: tuple = ()


def tangent_program(ir: IR, seeds: dict[str, str] | None = None, returns: str = "both",
                    name: str = "") -> Tangent:
    """The tangent program of ``ir`` along its ``wrt`` parameters.

    Each parameter in ``wrt`` gets a tangent parameter ``<name>_dot`` after the function's
    own, unless ``seeds`` gives its tangent as code (``"1.0"``: the derivative in that
    parameter alone). ``returns``: ``"both"`` gives ``(value, tangent)``, ``"tangent"`` the
    tangent alone (a function to differentiate again).
    """
    return _Forward(ir, seeds or {}, again=returns == "tangent").run(returns, name)


class _Forward:
    def __init__(self, ir: IR, seeds: dict[str, str], again: bool = False):
        self.ir = ir
        self.again = again  # a program to differentiate again: NumPy's calls alone
        self.seeds = seeds
        self.names = Names(set(ir.taken) | set(ir.params))
        self.facts = facts(ir)
        self.shapes = dict(self.facts.sources)
        self.printer = Printer(ir.np_alias)
        self.np = ir.np_alias
        self.active = set(ir.wrt)
        _mark_active(ir.eqns, self.active)
        # No tangent for what only feeds a test, a count or a shape (the result's alone).
        self.reach = _reaching(ir.eqns, {ir.result})
        self.float_arrays = _float_arrays(ir.eqns, self.np)
        self.active &= self.reach
        self.dot: dict[str, str] = {}
        self.before: list[str] = []  # lines a tangent reads, computed just before it
        self.globals: dict[str, object] = {}  # names the program reads besides the function's
        self.calls: dict[str, ast.expr] = {}  # each value's code (a call of several values)
        self.unreadable: dict = {}  # runtime helpers the tangents call -> where (a Problem)
        self.unbound: set[str] = set()  # stand-ins of a variable a path leaves unbound
        self.empty: set[str] = set()  # empty lists (appended to), whose tangent is []
        self.numbers: set[str] = set()  # numbers written out (s = 0.0), whose tangent is 0.0

    def tangent(self, name: str) -> str:
        if name not in self.dot:
            self.dot[name] = self.names.fresh(name.lstrip("_") + "_dot"
                                              if not name.startswith("_") else name + "_dot")
        return self.dot[name]

    def zeros(self, name: str) -> str:
        if name in self.empty:
            return "[]"
        if name in self.numbers:
            return "0.0"
        return f"{self.np}.zeros_like({name}, dtype=float)"

    def _stop_gradient(self) -> str:
        if not self.globals:
            # (the function's own name for it, if it has one)
            own = [n for n, obj, _ in self.ir.globals if obj is stop_gradient]
            self.globals[own[0] if own else self.names.fresh("stop_gradient")] = stop_gradient
        return next(iter(self.globals))

    def _dot_or_zero(self, name: str | None) -> str:
        """The tangent of ``name``: its own, zero for a constant, None where it is unbound."""
        if name is None or name in self.unbound:
            return "None"
        return self.dot[name] if name in self.active else self.zeros(name)

    # --- the program ---

    def run(self, returns: str, name: str) -> Tangent:
        ir = self.ir
        if ir.aux:
            raise self._refuse(ir.parsed.node, "forward mode of a function with has_aux",
                               "differentiate the value alone")
        taken = [p for p in ir.wrt if p not in self.seeds]
        params = [self.tangent(p) for p in taken]
        body: list[str] = []
        for p in ir.wrt:
            if p in self.seeds:
                body.append(f"{self.tangent(p)} = {self.seeds[p]}  # line "
                            f"{ir.parsed.node.lineno}: the derivative in {p}")
        body += self._items(ir.eqns)
        result = ir.result
        if result in self.active:
            out_dot = self.dot[result]
        else:
            out_dot = f"{self.np}.zeros({self.np}.shape({result}))"
        name = name or "jvp_" + ir.name
        # (Without defaults where tangents follow: the caller fills them.)
        args = ast.unparse(_without_annotations(ir.parsed.node.args, bool(params)))
        # The tangents come after every parameter of the function (after *args and
        # keyword-only ones too: by name then), as JAX's jvp lays them out.
        signature = args + (", " if args and params else "") + ", ".join(params)
        if ir.parsed.node.args.vararg or ir.parsed.node.args.kwonlyargs or \
                ir.parsed.node.args.kwarg:
            raise self._refuse(ir.parsed.node, "forward mode of a function with *args, "
                               "**kwargs or keyword-only parameters",
                               "plain positional parameters")
        where = f"{ir.parsed.source.filename}:{ir.parsed.node.lineno}".replace(
            "\\", "\\\\").replace('"', '\\"')
        wrt = ", ".join(ir.given_wrt or ir.wrt)
        head = [f"def {name}({signature}):",
                f'    """Tangent of {ir.name} ({where}) along {wrt}: forward mode.',
                "",
                f"    Generated by symdiff {__version__} from the source of {ir.name}; "
                "regenerate it", "    rather than edit it.", '    """']
        ret = out_dot if returns == "tangent" else f"{result}, {out_dot}"
        lines = head + ["    " + line for line in body] + [f"    return {ret}"]
        # (A container's leaves are read in the body: the function's own parameters first.)
        own = tuple(a.arg for a in (*ir.parsed.node.args.posonlyargs, *ir.parsed.node.args.args))
        return Tangent(name, "\n".join(lines) + "\n", (*own, *params), tuple(taken), ir,
                       self.globals, tuple(self.unreadable.values()))

    def _items(self, items) -> list[str]:
        out: list[str] = []
        for item in items:
            if isinstance(item, Eqn):
                out += self._eqn(item)
            elif isinstance(item, If):
                out += self._if(item)
            else:
                out += self._loop(item)
        return out

    def _eqn(self, eqn: Eqn) -> list[str]:
        comment = f"  # {eqn.where[0]}" if eqn.where[0] else ""
        if eqn.kind == "assert":
            return [self._check(eqn) + comment]
        if _unbound_name(eqn.code):
            # A variable bound on the other path only: None here, plain Python that
            # symdiff reads again (its own runtime stand-in is not).
            self.unbound.add(eqn.out)
            return [f"{eqn.out} = None  # {_unbound_name(eqn.code)} is not bound here"]
        hoisted: dict[int, str] = {}
        value = None
        if eqn.kind == "elementwise" and eqn.out in self.active and \
                any(a in self.active for a in eqn.inputs):
            value = self._elementwise(eqn, hoisted)
        code = _replace(eqn.code, hoisted)
        if eqn.kind == "stop_gradient":
            # Written out, so that a derivative of this program does not flow through it
            # either (the second derivative through a stop_gradient is zero, as in JAX).
            code = ast.Call(ast.Name(self._stop_gradient(), ast.Load()), [code], [])
        if eqn.kind == "const" and isinstance(code, ast.List) and not code.elts:
            self.empty.add(eqn.out)  # (its tangent is the empty list too)
        if isinstance(code, ast.Constant) and type(code.value) in (int, float):
            self.numbers.add(eqn.out)  # (its tangent is 0.0)
        # A call the tangent reads again (np.cos(x) of np.sin(x)) is computed once, named.
        lines = [f"{hoisted[id(node)]} = {ast.unparse(_replace(node, hoisted, id(node)))}"
                 f"{comment}" for _, node in eqn.calls if id(node) in hoisted]
        lines += self._assign(eqn.out, code, comment)
        self.calls[eqn.out] = code
        if eqn.out not in self.active or eqn.kind not in ("elementwise", "array"):
            return lines
        if not any(a in self.active for a in eqn.inputs):
            self.active.discard(eqn.out)
            return lines
        if eqn.kind == "array":
            value = self._array(eqn)
        if value is None:  # nothing flows: zero
            value = self.zeros(eqn.out)
        tangent = ast.parse(value, mode="eval").body
        if _is_write(eqn) and eqn.operands[0][1] not in self.float_arrays and \
                isinstance(tangent, ast.Call):
            # Written into an array of integers, a fraction is truncated: no tangent then
            # (unless the array is certainly of floats, np.zeros(n)).
            dtype = ast.parse(f"{eqn.code.args[0].id}.dtype.kind in 'fc'", mode="eval").body
            tangent.args[2] = ast.IfExp(dtype, tangent.args[2], ast.Constant(0.0))
        before, self.before = self.before, []
        return lines + [line + comment for line in before] + \
            self._assign(self.tangent(eqn.out), tangent, comment)

    def _check(self, eqn: Eqn) -> str:
        """A run-time check in a form symdiff reads again: an augmented assignment's (the
        arrays it must not share) as an assert; a read before a write's as it is (lowering
        knows that one: it tests the slots written, which plain code cannot)."""
        call = eqn.code.value if isinstance(eqn.code, ast.Expr) else None
        name = call.func.id if isinstance(call, ast.Call) and \
            isinstance(call.func, ast.Name) else ""
        if name == "_not_in_place":
            value, message, hint, *others = call.args
        elif name == "_missed_write":  # (its message located: no caller locates it here)
            where = f"{self.ir.parsed.source.filename}:{eqn.line}: "
            located = _replace(eqn.code, {})
            located.value.args[3] = ast.Constant(where + call.args[3].value)
            return ast.unparse(located)
        elif name:
            raise self._refuse_at(eqn, "forward mode of a function that symdiff checks at run "
                                  f"time ({name})", "grad (reverse mode) differentiates it")
        else:
            return ast.unparse(eqn.code)
        shared = " or ".join(f"{self.np}.may_share_memory({ast.unparse(value)}, "
                             f"{ast.unparse(o)})" for o in others)
        text = f"{self.ir.parsed.source.filename}:{eqn.line}: {message.value} " \
               f"(supported instead: {hint.value})"
        return f"assert not ({shared}), {text!r}"

    def _assign(self, target: str, code: ast.expr, comment: str) -> list[str]:
        """``target = code`` in plain Python that symdiff reads again: lowering's own helpers
        (a write into a new version of an array, an append to a new list, a list read as an
        array) are written as the user would write them."""
        name = code.func.id if isinstance(code, ast.Call) and \
            isinstance(code.func, ast.Name) else ""
        if name == "_written":  # _written(a, np.index_exp[i], v): a copy written at i
            a, index, v = code.args
            write = ast.Assign([ast.Subscript(ast.Name(target, ast.Load()), index.slice,
                                              ast.Store())], v, lineno=0)
            return [f"{target} = {self.np}.copy({ast.unparse(a)})" + comment,
                    ast.unparse(write) + comment]
        if name == "_appended":  # _appended(items, item): a new list, item appended
            items, item = code.args
            # (a list written out is new already: [] as it is; list([]) symdiff refuses)
            copy = ast.unparse(items) if isinstance(items, ast.List) else \
                f"list({ast.unparse(items)})"
            return [f"{target} = {copy}" + comment,
                    f"{target}.append({ast.unparse(item)})" + comment]
        if name == "_as_read":  # _as_read([a, b]): the list as the user wrote it
            code = code.args[0]
        return [f"{target} = {ast.unparse(code)}" + comment]

    def _elementwise(self, eqn: Eqn, hoisted: dict[int, str]) -> str | None:
        """The tangent of an elementwise step; ``hoisted`` gets the calls of its code the
        tangent reads again (id of the node -> the name it is computed into)."""
        partials = []
        for a in eqn.inputs:
            if a not in self.active:
                continue
            partial = sp.diff(eqn.expr, symbol(a))
            if partial == 0:
                continue
            if partial.has(sp.Derivative, sp.Subs):
                raise self._refuse_at(eqn, "forward mode: this has no closed derivative "
                                      "here", "a function of the rules table")
            if not eqn.expr.is_Atom:
                partial = reuse_value(partial, eqn.expr, symbol(eqn.out))
            partials.append((a, partial))
        for expr, node in reversed(eqn.calls):
            if expr == eqn.expr or isinstance(node, (ast.Name, ast.Constant)) or \
                    not any(p.has(expr) for _, p in partials):
                continue
            name = self.names.fresh("_t", numbered=True)
            replaced = [(a, reuse_value(p, expr, symbol(name))) for a, p in partials]
            if replaced == partials:  # (inside a longer product: not reusable)
                self.names.taken.discard(name)
                continue
            hoisted[id(node)] = name
            self.shapes[name] = frozenset().union(
                *(sources(self.shapes, s.name) for s in expr.free_symbols))
            partials = replaced
        terms = []
        covered: set = set()
        for a, partial in partials:
            terms.append(sp.factor_terms(partial) * symbol(self.tangent(a)))
            covered |= sources(self.shapes, a)
            covered |= {s for f in partial.free_symbols for s in sources(self.shapes, f.name)}
        if not terms:
            return None
        # Parts the terms share (np.cos(u) in each of two terms) are computed once.
        temps = iter(lambda: symbol(self.names.fresh("_t", numbered=True)), None)
        shared, (total,) = cse([decimals(whole_floats(sp.Add(*terms)))], temps)
        for t, part in shared:
            self.before.append(f"{t.name} = {self.printer.doprint(part)}")
        text = self.printer.doprint(total)
        for helper in dict.fromkeys(re.findall(r"(?<![\w.])(_[a-z]\w*)\(", text)):
            if helper in self.unreadable or not callable(getattr(runtime, helper, None)):
                continue
            # (the tangent is right; its derivative symdiff cannot read: refused then)
            self.unreadable[helper] = self._refuse_at(
                eqn, "second derivatives through this line are not supported: its derivative "
                f"calls a helper of symdiff's ({helper}), which symdiff does not differentiate "
                "again",
                "first derivatives of it (grad, jvp)").problems[0]
        # A tangent smaller than its value (v = a + B with a alone differentiated) is
        # spread to the value's shape: the operations after it read its entries.
        if not sources(self.shapes, eqn.out) <= covered:
            text = f"{text} + {self.zeros(eqn.out)}"
        return text

    def _array(self, eqn: Eqn) -> str | None:
        op = eqn.op
        differentiable = {p for p, t in op.vjp.items() if t}
        why = rules.no_tangent(op, dict(eqn.statics))
        if why:
            raise self._refuse_at(eqn, f"forward mode: {why}",
                                  "grad (reverse mode) differentiates it", op.names)
        if "dtype" in op.params and not self._float_result(eqn, op):
            return None  # an integer or boolean result: no tangent, as no gradient
        if op.entries:
            entries = dict(eqn.statics).get(op.entries)
            if entries is not None:  # np.array([a, 1.0]): the entries' tangents, [a_dot, 0.0]
                return ast.unparse(self._entries(eqn.code, entries))
        linear = op.linear
        if linear == "joint":
            renamed = {}
            for param, name, _ in eqn.operands:
                if param in differentiable:
                    renamed[name] = self.dot[name] if name in self.active else self.zeros(name)
            statics = dict(eqn.statics)
            code = eqn.code
            if "factors" in statics:  # a, b = np.split(x, 2): a's is np.split(x_dot, 2)[0]
                code = ast.Subscript(self.calls[statics["factors"]],
                                     ast.parse(statics["part"], mode="eval").body, ast.Load())
            if not any(_occurrences(code, n, eqn.statics) for n in renamed if n in self.active):
                # (the call does not read its operands where they can be replaced)
                raise self._refuse_at(eqn, f"forward mode through {op.names[0]} written so "
                                      "is not supported", "grad (reverse mode) "
                                      "differentiates it", op.names)
            return ast.unparse(_renamed(code, renamed, eqn.statics))
        if linear == "multi":
            # One term per operand, its tangent in its own place: v @ v is v_dot @ v +
            # v @ v_dot (the k-th occurrence of a name given twice is its k-th operand).
            parts = []
            given = [name for _, name, _ in eqn.operands]
            for k, (param, name, _) in enumerate(eqn.operands):
                if param not in differentiable or name not in self.active:
                    continue
                if _occurrences(eqn.code, name, eqn.statics) != given.count(name):
                    raise self._refuse_at(eqn, f"forward mode through {op.names[0]} with "
                                          f"{name} read besides as its operands",
                                          "a name of its own for each operand", op.names)
                parts.append(ast.unparse(_renamed(eqn.code, {name: self.dot[name]},
                                                  eqn.statics, given[:k].count(name))))
            return " + ".join(f"({p})" if len(parts) > 1 else p for p in parts) or None
        fields = template_fields(eqn)
        parts = []
        for param, name, position in eqn.operands:
            if name not in self.active or param not in differentiable:
                continue
            template = op.jvp.get(param)
            if not template:
                raise self._refuse_at(eqn, f"forward mode through {op.names[0]} (in "
                                      f"{param}) is not supported yet",
                                      "grad (reverse mode) differentiates it", op.names)
            if self.again and _HELPER.search(template):
                raise self._refuse_at(eqn, f"a derivative of higher order through "
                                      f"{op.names[0]} is not supported: its tangent is "
                                      "computed by symdiff's runtime, which is not "
                                      "differentiated again", "one order less through it",
                                      op.names)
            parts.append(template.format(t=self.dot[name], out=eqn.out, np=self.np,
                                         i=position, **fields))
        return " + ".join(f"({p})" for p in parts) or None

    def _entries(self, code, entries: str):
        """``code`` with the nested list ``entries`` in it made of the entries' tangents."""
        if isinstance(code, ast.Call) and isinstance(code.func, ast.Name) and \
                code.func.id == "_as_read":
            code = code.args[0]
        target = ast.dump(ast.parse(entries, mode="eval").body)
        forward = self

        class Entries(ast.NodeTransformer):
            def visit(self, n):
                if isinstance(n, ast.expr) and ast.dump(n) == target:
                    return self.leaves(n)
                return super().visit(n)

            def leaves(self, n):
                if isinstance(n, (ast.List, ast.Tuple)):
                    return type(n)([self.leaves(e) for e in n.elts], ast.Load())
                if isinstance(n, ast.Name) and n.id in forward.active:
                    text = forward.dot[n.id]
                elif isinstance(n, ast.Constant):
                    text = "0.0"
                else:
                    text = forward.zeros(ast.unparse(n))
                return ast.parse(text, mode="eval").body

        return Entries().visit(_replace(code, {}))

    def _float_result(self, eqn: Eqn, op) -> bool:
        """Whether the dtype asked for is a float one (or none); False for an integer or
        boolean one, whose result has tangent 0 (the call on the tangents would truncate
        them); refused where the code does not tell."""
        dtype = dict(eqn.statics).get("dtype", "None")
        kind = _dtype_kind(dtype.replace(self.np + ".", "np."))
        if kind not in ("f", "i"):
            raise self._refuse_at(eqn, f"forward mode of {op.names[0]} with dtype={dtype}, "
                                  "which may not be a float type", "a float or integer type "
                                  "written in the code (dtype=float, np.float32, int), or no "
                                  "dtype", op.names)
        return kind == "f"

    def _if(self, item: If) -> list[str]:
        branches = [self._items(item.then), self._items(item.orelse)]
        merged = [(m, t, e) for m, t, e in item.phis
                  if (t in self.active or e in self.active) and m in self.reach]
        at = _at(item.where)
        for lines, pick in zip(branches, (1, 2), strict=True):
            for phi in item.phis:
                lines.append(f"{phi[0]} = {phi[pick]}{at}")
            for phi in merged:
                src = phi[pick]
                lines.append(f"{self.tangent(phi[0])} = {self._dot_or_zero(src)}{at}")
        for m, _, _ in merged:
            self.active.add(m)
        for m, t, e in item.phis:
            if (m, t, e) not in merged:
                self.active.discard(m)
        out = [f"if {item.cond}:{at}"] + ["    " + line for line in branches[0] or ["pass"]]
        if branches[1]:
            out += ["else:"] + ["    " + line for line in branches[1]]
        return out

    def _loop(self, item: Loop) -> list[str]:
        out = []
        at = _at(item.where)
        carried = [(phi, init, nxt) for phi, init, nxt in item.carried if phi in self.active]
        for phi, init, _ in item.carried:
            # (None: the variable is not bound before the loop.)
            out.append(f"{phi} = {init or 'None'}{at}")
        for phi, _, _ in carried:
            self.tangent(phi)
        body = self._items(item.body)
        for phi, init, _ in carried:
            out.append(f"{self.dot[phi]} = {self._dot_or_zero(init)}{at}")
        for phi, _, nxt in item.carried:
            body.append(f"{phi} = {nxt}{at}")
        for phi, _, nxt in carried:
            body.append(f"{self.dot[phi]} = {self._dot_or_zero(nxt)}{at}")
        if item.break_flag:
            body += [f"if {item.break_flag}:", "    break"]
        header = (f"for {item.target} in {ast.unparse(item.header)}:" if item.kind == "for"
                  else f"while {ast.unparse(item.header)}:")
        counted = item.header.args[0] if item.kind == "for" and isinstance(
            item.header, ast.Call) and item.header.args else None
        if isinstance(counted, ast.Call) and isinstance(counted.func, ast.Name) and \
                counted.func.id == "_zip_len":  # zip(A, B, strict=True), as an assert
            lens = [f"len({ast.unparse(a)})" for a in counted.args]
            strict = ast.unparse(counted.keywords[0].value) if counted.keywords else "False"
            check = " == ".join(lens)
            if strict != "True":
                check = f"not {strict} or {check}"
            out.append(f"assert {check}, 'zip() arguments have different lengths'")
            header = f"for {item.target} in range(min({', '.join(lens)})):"
        return out + [header + at] + ["    " + line for line in body or ["pass"]]

    def _refuse(self, node, message, hint, line=None) -> SymdiffError:
        if getattr(node, "lineno", None) is None:
            # (code lowering made: at the first expression of its line in the source)
            node = next((n for n in ast.walk(self.ir.parsed.node) if isinstance(n, ast.expr)
                         and getattr(n, "lineno", None) == line), self.ir.parsed.node)
        return SymdiffError(problems=(self.ir.parsed.source.problem(node, message, hint),))

    def _refuse_at(self, eqn: Eqn, message, hint, names=()) -> SymdiffError:
        """Refuse ``eqn`` at the user's line: at the call of one of ``names`` there, or the
        statement; a helper's line (inlined, maybe from another file) is named instead."""
        if eqn.where[0] != f"line {eqn.line}":
            return self._refuse(self.ir.parsed.node, f"{message} ({eqn.where[0]}: "
                                f"{eqn.where[1]})", hint)
        on_line = [n for n in ast.walk(self.ir.parsed.node)
                   if isinstance(n, (ast.expr, ast.stmt)) and getattr(n, "lineno", 0) == eqn.line]
        calls = [n for n in on_line if isinstance(n, ast.Call) and
                 ast.unparse(n.func).split(".")[-1] in {m.split(".")[-1] for m in names}]
        statements = [n for n in on_line if isinstance(n, ast.stmt)]
        node = (calls or statements or [ast.Pass(lineno=eqn.line, col_offset=0)])[0]
        return self._refuse(node, message, hint)


_HELPER = re.compile(r"(?<![\w.])_[a-z]\w*\(")


def _at(where) -> str:
    """The comment naming the user's line of a block (read back by statements._line_label)."""
    return f"  # {where[0]}" if where and where[0] else ""


def _occurrences(node, name: str, statics=()) -> int:
    """How many times ``node`` reads ``name`` outside the code of ``statics``."""
    seen: list = []
    _renamed(node, {name: name}, statics, seen=seen)
    return len(seen)


def _renamed(node, renamed: dict[str, str], statics=(), occurrence: int | None = None,
             seen: list | None = None):
    """A copy of ``node`` with each name of ``renamed`` replaced by its code (only its
    ``occurrence``-th reading, if given), except inside the code of the parameters without
    gradient (``statics``: np.where's condition reads the values, not their tangents)."""
    tree = _replace(node, {})
    seen = [] if seen is None else seen
    kept = set()
    for _, code in statics:
        try:
            kept.add(ast.dump(ast.parse(code, mode="eval").body))
        except SyntaxError:
            pass

    class Rename(ast.NodeTransformer):
        def visit(self, n):
            if kept and isinstance(n, ast.expr) and ast.dump(n) in kept:
                return n
            return super().visit(n)

        def visit_Name(self, n):
            if n.id in renamed:
                seen.append(n.id)
                if occurrence is None or seen.count(n.id) - 1 == occurrence:
                    return ast.copy_location(ast.parse(renamed[n.id], mode="eval").body, n)
            return n

    return Rename().visit(tree)


def _dtype_kind(code: str) -> str:
    """"f" for a float dtype written in the code (or None), "i" for an integer or boolean
    one, "" where the code does not tell (x.dtype, a complex type)."""
    if code in _FLOAT_DTYPES:
        return "f"
    try:
        value = ast.literal_eval(code)
    except (ValueError, SyntaxError):
        value = {"int": int, "bool": bool}.get(code) or (
            getattr(np, code[3:], None) if code.startswith("np.") else None)
    try:
        kind = np.dtype(value).kind if value is not None else ""
    except TypeError:
        return ""
    return "f" if kind == "f" else "i" if kind and kind in "iub" else ""


_FLOAT_DTYPES = {"None", "float", "np.float64", "np.float32", "np.float16", "np.double",
                 "np.single", "'float64'", "'float32'", "'float'", "'f8'", "'f4'"}


def _is_write(eqn: Eqn) -> bool:
    return eqn.kind == "array" and eqn.op.names[0] == "x[...] = v" and \
        isinstance(eqn.code, ast.Call) and isinstance(eqn.code.args[0], ast.Name)


def _float_arrays(items, np_alias) -> set[str]:
    """The names certainly bound to arrays of floats: np.zeros(n) & co. without a dtype
    (or a float one), the copies and writes of one, and a branch's or loop's merge of
    such (a loop's as long as each iteration leaves one)."""
    makers = {f"{np_alias}.{m}" for m in ("zeros", "ones", "empty", "full")}

    def made(code) -> bool:
        if not (isinstance(code, ast.Call) and ast.unparse(code.func) in makers):
            return False
        full = ast.unparse(code.func).endswith("full")
        dtype = [k.value for k in code.keywords if k.arg == "dtype"]
        dtype += code.args[2 if full else 1:][:1]
        if full and not dtype:  # np.full(n, 2) is of integers: its fill value's type
            fill = [k.value for k in code.keywords if k.arg == "fill_value"] + code.args[1:2]
            return bool(fill) and isinstance(fill[0], ast.Constant) and \
                isinstance(fill[0].value, float)
        return all(ast.unparse(d).replace(np_alias + ".", "np.") in _FLOAT_DTYPES
                   for d in dtype)

    def walk(items, known, assumed):
        for item in items:
            if isinstance(item, Eqn):
                if item.kind == "const" and made(item.code) or \
                        _is_write(item) and item.code.args[0].id in known or \
                        item.kind == "elementwise" and isinstance(item.code, ast.Name) \
                        and item.code.id in known:
                    known.add(item.out)
            elif isinstance(item, If):
                walk(item.then, known, assumed)
                walk(item.orelse, known, assumed)
                known.update(m for m, t, e in item.phis if t in known and e in known)
            else:
                known.update(p for p, i, _ in item.carried if p in assumed and i in known)
                walk(item.body, known, assumed)

    loops = [i for i in _blocks(items) if isinstance(i, Loop)]
    # (loops' variables are taken to hold floats until an iteration says not)
    assumed = {p for loop in loops for p, _, _ in loop.carried}
    while True:
        known: set[str] = set()
        walk(items, known, assumed)
        kept = {p for loop in loops for p, i, n in loop.carried
                if p in assumed and i in known and n in known}
        if kept == assumed:
            return known
        assumed = kept


def _blocks(items):
    for item in items:
        yield item
        if isinstance(item, If):
            yield from _blocks(item.then)
            yield from _blocks(item.orelse)
        elif isinstance(item, Loop):
            yield from _blocks(item.body)


def _unbound_name(code) -> str:
    """The variable's name if ``code`` is lowering's stand-in ``_unbound('name')``."""
    if isinstance(code, ast.Call) and isinstance(code.func, ast.Name) and \
            code.func.id == "_unbound" and isinstance(code.args[0], ast.Constant):
        return code.args[0].value
    return ""


def _without_annotations(args, defaults_too=False):
    import copy

    args = copy.deepcopy(args)
    if defaults_too:
        args.defaults = []
    for a in ast.walk(args):
        if isinstance(a, ast.arg):
            a.annotation = None
    return args
