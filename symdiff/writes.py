"""Writes by index (``out[i] = v``, ``out[:, k] += v``) -> a new version of the array.

The lowering of a function (``lower._Lowering``) mixes this in. A write into an array the
function made for itself (np.zeros, np.empty, np.full, x.copy(), arithmetic...) becomes an
array equation ``out_1 = _written(out, index, v)`` (rules.WRITE): the generated code keeps
every version, so the backward sweep reads the values a write replaced, and each version
has an adjoint of its own. ``out[index] op= v`` is ``out[index] = out[index] op v``, as
NumPy runs it (a repeated integer index is read once and written once: no accumulation).

What the gradient could not follow is refused: a write into a parameter, into module
data, into an array the function may not have made, and a read, after the write, of
another name that shares the written array (``a = out`` or a view ``b = out[1:3]``): NumPy
changes it too, where each version here is an array of its own.
"""

from __future__ import annotations

import ast
import copy

from . import containers, rules
from .expressions import OPS, names_in
from .ir import Eqn, makes_new
from .parse import scoped_walk


class Writes:
    """``name[index] = value``; relies on ``lower._Lowering`` for everything else. Placed
    before the other mixins: it follows what lowering binds and reads (``_emit_elementwise``,
    ``_array_op``, ``_local``)."""

    # --- what is an array of the function's own ---

    def _emit_elementwise(self, out, val):
        super()._emit_elementwise(out, val)
        if makes_new(val.code, self.np_alias):
            self.owned.add(out)

    def _array_op(self, node, row, args, receiver=None):
        val = super()._array_op(node, row, args, receiver)
        # (np.array(x, copy=False or None) may be x itself: not an array of its own)
        copies = row.names[0] != "np.array" or "copy" not in args or \
            ast.unparse(args["copy"]) == "True"
        if row.names[0] in _NEW and copies and isinstance(val.code, ast.Name):
            self.arrays.add(val.code.id)  # (renamed with its equation: lower._define)
        return val

    def _local(self, node, name):
        ssa = super()._local(node, name)
        if ssa is not None and self.stale:
            problem = self._stale(ssa)
            what = "the array this loop runs over" if name.startswith("<iter") else name
            if problem is not None and problem[2] is not None and \
                    problem[3] is self.eqns and self.stale.get(ssa) is problem:
                # An index read (prev = out[t - 1]) read again after a write into out, in
                # the same block: a number or a copy is fine; a view, refused when it runs.
                message = self.src.problem(node, f"{what} {problem[0]}", problem[1])
                old, index = problem[2]
                check = ast.Expr(ast.Call(ast.Name("_missed_write", ast.Load()), [
                    ast.Name(ssa, ast.Load()), ast.Name(old, ast.Load()), copy.deepcopy(index),
                    ast.Constant(message.message), ast.Constant(message.hint)], []))
                self.eqns.append(Eqn("", "assert", check, self.line,
                                     (ssa, old, *names_in(index)), False, self.where))
                del self.stale[ssa]  # (checked after the write, wherever it ran)
            elif problem is not None:
                self.fail(node, f"{what} {problem[0]}", problem[1])
        return ssa

    # --- the write ---

    def _write(self, stmt, target, value, op=None):
        """``target = value`` (``op``: ``target op= value``), target a subscript."""
        containers.refuse_write(self, target)
        text = ast.unparse(target)
        base = target.value
        if isinstance(base, ast.Subscript):
            self.fail(target, f"writing into {text}, an index of an index, is not supported",
                      f"one index: {ast.unparse(base.value)}[..., ...] = ...")
        if isinstance(base, ast.Attribute):
            self.fail(target, f"{text} = ... writes into an attribute's array, which "
                      "symdiff does not follow: a gradient changes nothing outside itself",
                      "a local copy: w = np.copy(...), then w[...] = ...")
        if not isinstance(base, ast.Name):
            self.fail(target, f"writing into {text} is not supported",
                      "a write into a local array: out[...] = ...")
        name = base.id
        if name not in self.env:
            self._local(base, name)  # (used before it is assigned: said so)
            self.fail(target, f"{text} = ... writes into the module-level {name}, which "
                      "symdiff does not follow: calling a gradient changes nothing",
                      f"a copy of your own: {name.lower()}_copy = {name}.copy(), then write "
                      "into it")
        old = self.env[name]
        self._refuse_foreign(target, name, old)
        if op is not None:
            if not isinstance(op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
                self.fail(stmt, f"augmented assignment {OPS.get(type(op), '?')}= is "
                          "not supported", "+= -= *= /= **=")
            read = ast.copy_location(ast.Subscript(ast.Name(name, ast.Load()), target.slice,
                                                   ast.Load()), target)
            value = ast.copy_location(ast.BinOp(read, op, value), stmt)
        operands, statics, codes = [], [], {}
        self._argument(rules.WRITE, "v", value, operands, statics, codes)
        self._argument(rules.WRITE, "index", target.slice, operands, statics, codes)
        operands.insert(0, ("a", old, None))
        new = self._bound_ssa(name)
        np_name = ast.Name(self.np_alias, ast.Load())
        index = ast.Subscript(ast.Attribute(np_name, "index_exp", ast.Load()), codes["index"],
                              ast.Load())
        code = ast.Call(ast.Name("_written", ast.Load()),
                        [ast.Name(old, ast.Load()), index, codes["v"]], [])
        inputs = tuple(dict.fromkeys(n for _, n, _ in operands))
        active = any(i in self.active for i in inputs)
        if active:
            self.active.add(new)
        self.arrays.add(new)
        if old in self.ndims:
            self.ndims[new] = self.ndims[old]
        if active:
            self._refuse_constant_reads(target, name, old, old not in self.active)
        self._mark_stale(stmt, name, old, text, index)
        self.eqns.append(Eqn(new, "array", code, self.line, inputs, active, self.where,
                             op=rules.WRITE, operands=tuple(operands), statics=tuple(statics)))
        self.env[name] = new

    def _written(self, body) -> list[str]:
        """The variables a statement list writes into by index (out[t] = ...), which a loop
        carries as it carries the ones it assigns: each write makes a new version."""
        found = {}
        for n in scoped_walk(body):
            if isinstance(n, (ast.Assign, ast.AugAssign)):
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and \
                            t.value.id in self.env:
                        found.setdefault(t.value.id, None)
        return list(found)

    def _sharing(self, ssa) -> set[str]:
        """The arrays ``ssa`` may be, be a view of, or hold (a list's items): its origins
        (``loops._origins``), and theirs of what each holds."""
        found, todo = set(), [ssa]
        while todo:
            for origin in self._origins(todo.pop()):
                if origin not in found:
                    found.add(origin)
                    todo.extend(self.holds.get(origin, ()))
        return found

    def _refuse_foreign(self, target, name, old):
        """Refuse a write into an array the function may not have made for itself."""
        text = ast.unparse(target)
        params = {a.arg for a in ast.walk(self.top.node.args) if isinstance(a, ast.arg)}
        for origin in sorted(self._sharing(old)):
            if origin in params or origin in self.leaves:
                what = f"the parameter {name}" if origin == name else \
                    f"{name}, which may be the parameter {origin} (or a view of it)"
                self.fail(target, f"{text} = ... writes into {what}: calling a "
                          "gradient must not change its arguments, so symdiff does not "
                          "follow this", f"write into a copy: {name} = {name}.copy() first")
            if origin in self.data_globals:
                self.fail(target, f"{text} = ... writes into {name}, which may be the "
                          f"module-level {origin} (or a view of it): calling a gradient "
                          "changes nothing, so symdiff does not follow this",
                          f"write into a copy: {name} = {name}.copy() first")
            if origin not in self.arrays and origin not in self.owned:
                self.fail(target, f"{text} = ... writes into {name}, which may not be an "
                          "array the function made for itself, so the write may change "
                          "another one, which symdiff does not follow",
                          f"make it with np.zeros, np.ones, np.empty, np.full or a copy "
                          f"({name} = np.copy(...)) before writing into it")

    def _refuse_constant_reads(self, target, name, old, constant):
        """A write that gives a gradient to an array that had none (np.zeros(n)): a value
        read from it before, without gradient (a row, a view, a tuple or list holding it),
        may share its memory, and NumPy's write changes it too, which the version here
        does not. Refused (said at the end: a loop that finds the array differentiated
        lowers its body again, reading it with gradient)."""
        origins = self._sharing(old)
        # (a loop over the array, this one or one before: its items are views of it)
        loops = [h for h in self.headers if h is not None] + [
            e.header for e in _flat(self.eqns, loops=True) if not isinstance(e, Eqn)
            and e.kind == "for"]
        read = [(e.line, e.code) for e in _flat(self.eqns) if constant and (
            e.kind in ("const", "stop_gradient") or e.op is not None and e.op.names[0] in (
                "[...]", "_appended")) and e.out and not _new_value(e.code)
            and not origins.isdisjoint(e.inputs)]
        read += [(self.line, h) for h in loops if not origins.isdisjoint(_iterated(h))]
        if read:
            line, code = read[0]
            self.problems.append(self.src.problem(
                target, f"{name} was read on line {line} while it held no gradient, and this "
                "write gives it one: what was read may share its memory, which symdiff does "
                f"not follow", f"copy what you read ({ast.unparse(code)} -> np.copy(...)), "
                "or write into a copy"))

    def _mark_stale(self, stmt, name, old, text, index):
        """Every other name that may share the written array: NumPy changes it too, which
        the versions here do not; a read of one of them later is refused (``_local``)."""
        written = self._sharing(old)
        scopes = [*self.env.items(), *(p for env in self.caller_envs for p in env.items())]
        for other, ssa in scopes:
            if other == name or other.startswith("<"):
                continue
            if not written.isdisjoint(self._sharing(ssa)):
                # Read by index in this block (so again in each iteration, before the
                # write): maybe a number or a copy, which a check tells where it is read.
                read = any(isinstance(e, Eqn) and e.out == ssa and (
                    e.op is rules.INDEX or e.kind == "const" and isinstance(e.code, ast.Subscript))
                           for e in self.eqns)
                self.stale[ssa] = (
                    f"shares its array with {name}, which line {stmt.lineno} changed in place "
                    f"({text} = ...), so it changed too, which symdiff does not follow",
                    f"copy it before the write ({other} = np.copy(...)), or read {name} "
                    "itself after it", (old, index) if read else None, self.eqns)

    def _stale(self, ssa):
        """The problem of reading ``ssa``, if it may be a name an earlier write changed."""
        seen, todo = set(), [ssa]
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            if n in self.stale:
                return self.stale[n]
            todo.extend(self.maybe.get(n, ()))
        return None


# Array operations whose value is a new ndarray of its own (never a view of an operand).
_NEW = {"np.copy", "np.array", "np.full", "np.full_like", "np.stack", "np.concatenate", "np.outer",
        "np.hstack", "np.vstack", "np.tile", "np.where"}


def _flat(eqns, loops=False):
    """The equations of a block, with those of the branches and loops inside it (and, with
    ``loops``, the loops themselves)."""
    for e in eqns:
        if isinstance(e, Eqn):
            yield e
        else:
            if loops and hasattr(e, "header"):
                yield e
            for part in ("then", "orelse", "body"):
                yield from _flat(getattr(e, part, ()), loops)


def _new_value(code) -> bool:
    """Whether ``code`` certainly gives a number, a mask or an array of its own, never a
    view of an array (arithmetic, a comparison, a shape, len)."""
    match code:
        case ast.BinOp() | ast.Compare() | ast.BoolOp() | ast.UnaryOp() | ast.Constant():
            return True
        case ast.Attribute(attr="shape" | "ndim" | "size" | "dtype"):
            return True
        case ast.Call(func=ast.Name(id="len" | "int" | "float" | "bool" | "range")):
            return True
    return False


def _iterated(header) -> set[str]:
    """The names whose items a for loop's header runs over (``for r in M``, ``enumerate(M)``):
    not those it reads only for a count (``range(len(h))``, ``h.shape[0]``)."""
    if isinstance(header, ast.Call) and isinstance(header.func, ast.Name) and \
            header.func.id in ("range", "len", "_range_len"):
        return set()
    if isinstance(header, ast.Attribute) and header.attr in ("shape", "size", "ndim"):
        return set()
    if isinstance(header, ast.Name):
        return {header.id}
    return set().union(*(_iterated(c) for c in ast.iter_child_nodes(header)))
