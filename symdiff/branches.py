"""if/else and conditional expressions -> If blocks of the IR, their variables merged.

The lowering of a function (``lower._Lowering``) mixes this in. Each branch is lowered into
a list of its own; a variable the branches leave different is merged (a phi), and one
bound on one path only is a stand-in on the other, whose every use raises UnboundLocalError.
"""

from __future__ import annotations

import ast

from . import containers
from .expressions import Val
from .ir import Eqn, If, symbol


class Branches:
    """if statements and expressions; relies on ``lower._Lowering`` for everything else."""

    def _block(self, stmts):
        """Lower ``stmts`` into a list of their own; returns (equations, env after)."""
        saved, memo = self.eqns, dict(self.memo)
        self.eqns = []
        self.depth += 1
        try:
            self._statements(stmts)
        finally:
            self.depth -= 1
            self.memo = memo  # what a branch computed is not there after it
        out, self.eqns = self.eqns, saved
        return out, dict(self.env)

    def _if(self, stmt):
        self._refuse_list_truth(stmt.test)
        cond = self._constant(stmt.test).code.id  # the branch taken, kept for the backward
        where, line = self.where, self.line
        before = dict(self.env)
        then, env_then = self._block(stmt.body)
        self.env = dict(before)
        orelse, env_else = self._block(stmt.orelse)
        self.where, self.line = where, line
        phis, env = [], dict(before)
        for name in dict.fromkeys([*env_then, *env_else]):
            t, e = env_then.get(name), env_else.get(name)
            if t == e:
                env[name] = t
                continue
            containers.refuse_merge(self, stmt, name, t, e)
            if t is None or e is None:
                # Bound on one path only: on the other (where Python would leave it
                # unbound), a stand-in whose every use raises UnboundLocalError, so that
                # every name the generated code copies exists.
                none = self._ssa(name)
                self.bound.add(none)
                unbound = ast.Call(ast.Name("_unbound", ast.Load()), [ast.Constant(name)], [])
                (then if t is None else orelse).append(Eqn(
                    none, "const", unbound, line, (), False, where))
                t, e = (none, e) if t is None else (t, none)
            merged = self._ssa(name)
            self.bound.add(merged)
            phis.append((merged, t, e))
            self.maybe[merged] = {t, e}
            env[name] = merged
            if t in self.active or e in self.active:
                self.active.add(merged)
        self.env = env
        self.eqns.append(If(cond, tuple(then), tuple(orelse), tuple(phis), line, where))

    def _ifexp(self, node) -> Val:
        self.counter += 1
        key = f"<ifexp{self.counter}>"
        stmt = ast.copy_location(ast.If(node.test, [
            ast.copy_location(ast.Assign([ast.Name(key, ast.Store())], node.body), node.body)], [
            ast.copy_location(ast.Assign([ast.Name(key, ast.Store())], node.orelse),
                              node.orelse)]), node)
        where, line = self.where, self.line
        self._if(stmt)
        self.where, self.line = where, line
        name = self.env[key]
        return Val(symbol(name), ast.Name(name, ast.Load()))
