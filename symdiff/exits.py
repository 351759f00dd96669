"""Statements with early exits -> statements with one exit: return, break, continue removed.

``return v`` becomes an assignment to the pseudo-variable ``RETURN``; ``break`` sets a
loop's break flag. After an ``if`` whose branch always exits, the statements that follow
move into the other branch; after one that exits on some paths only, they run under
``if not <done>:``, a flag each exit sets. Lowering then sees only assignments, branches
and loops, which it can keep as control flow in the generated code.

>>> import ast
>>> body = ast.parse("if x > 0:\\n    return x\\ny = -x\\nreturn y").body
>>> print(ast.unparse(single_exit(body)[0]))
if x > 0:
    <return> = x
else:
    y = -x
    <return> = y
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

RETURN = "<return>"  # cannot be a user's name; lowering names its SSA versions _ret
AUX = "<aux>"  # under has_aux, the second part of what the function returns (_aux)
NEVER, SOME, ALWAYS = "never", "some", "always"  # which paths through a block exit


class ExitError(Exception):
    """An exit symdiff cannot remove; ``node`` is where, ``message`` and ``hint`` say why."""

    def __init__(self, node, message, hint):
        super().__init__(message)
        self.node, self.message, self.hint = node, message, hint


@dataclass
class _Context:
    done: str  # the flag every exit sets, tested where only some paths exited
    break_flag: str | None  # a loop's flag that ends it
    loop: ast.AST | None  # the loop whose body this is (None: the function's body)
    used: bool = False  # whether some statement is guarded by ``done``


def single_exit(body, loop_key: str | None = None, loop=None) -> tuple[list, bool]:
    """``body`` without return/break/continue, and whether every path through it exits.

    For a function's body, the second is whether every path returns. For a loop's body,
    ``loop_key`` names its flags (``<break{key}>``, ``<done{key}>``) and ``loop`` is the
    loop (a return inside it is refused).
    """
    ctx = _Context(f"<done{loop_key or ''}>", f"<break{loop_key}>" if loop_key else None,
                   loop)
    out, exits = _block(list(body), ctx)
    if not ctx.used:
        out = _without(out, ctx.done)
    elif body:
        out = [_assign(ctx.done, ast.Constant(False), body[0])] + out
    return out, exits == ALWAYS


def break_flag(loop_key: str) -> str:
    return f"<break{loop_key}>"


def _assign(name, value, like):
    node = ast.Assign([ast.Name(name, ast.Store())], value)
    return ast.copy_location(node, like)


def _block(stmts, ctx: _Context):
    """Returns (statements, which paths exit: NEVER, SOME or ALWAYS)."""
    out = []
    for i, stmt in enumerate(stmts):
        rest = stmts[i + 1:]
        if isinstance(stmt, (ast.Return, ast.Break, ast.Continue)):
            out += _exit(stmt, ctx)
            _unreachable(rest)
            return out, ALWAYS
        if isinstance(stmt, ast.If):
            then, then_exits = _block(stmt.body, ctx)
            orelse, else_exits = _block(stmt.orelse, ctx)
            if then_exits == ALWAYS and else_exits == ALWAYS:
                out.append(_if(stmt, then, orelse))
                _unreachable(rest)
                return out, ALWAYS
            if then_exits == ALWAYS or else_exits == ALWAYS:
                # What follows runs only on the other path: move it there.
                other = stmt.orelse if then_exits == ALWAYS else stmt.body
                moved, moved_exits = _block(list(other) + rest, ctx)
                if then_exits == ALWAYS:
                    out.append(_if(stmt, then, moved))
                else:
                    out.append(_if(stmt, moved, orelse))
                return out, ALWAYS if moved_exits == ALWAYS else SOME
            out.append(_if(stmt, then, orelse))
            if then_exits == SOME or else_exits == SOME:
                if not rest:
                    return out, SOME
                # Some paths exited: what follows runs on the others only.
                ctx.used = True
                guarded, rest_exits = _block(rest, ctx)
                test = ast.copy_location(ast.UnaryOp(ast.Not(), ast.Name(ctx.done, ast.Load())),
                                         rest[0])
                out.append(ast.copy_location(ast.If(test, guarded, []), rest[0]))
                return out, ALWAYS if rest_exits == ALWAYS else SOME
            continue
        if isinstance(stmt, (ast.For, ast.While)) and stmt.orelse:
            kind = "for" if isinstance(stmt, ast.For) else "while"
            raise ExitError(stmt.orelse[0], f"{kind}/else is not supported",
                            "a flag set before break, tested after the loop")
        out.append(stmt)  # a loop's own body is made single-exit when the loop is lowered
    return out, NEVER


def _exit(stmt, ctx: _Context) -> list:
    if isinstance(stmt, ast.Return):
        if ctx.loop is not None:
            raise ExitError(stmt, "return inside a loop is not supported",
                            "assign the result to a name and break, then return it")
        value = stmt.value if stmt.value is not None else ast.Constant(None)
        out = [_assign(RETURN, value, stmt)]
    elif isinstance(stmt, ast.Break):
        out = [_assign(ctx.break_flag, ast.Constant(True), stmt)]
    else:
        out = []
    return out + [_assign(ctx.done, ast.Constant(True), stmt)]


def _if(like, then, orelse):
    return ast.copy_location(ast.If(like.test, then or [_pass(like)], orelse), like)


def _without(stmts, flag) -> list:
    """``stmts`` without the assignments to ``flag`` (no statement tested it)."""
    out = []
    for stmt in stmts:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) and \
                stmt.targets[0].id == flag:
            continue
        if isinstance(stmt, ast.If):
            stmt = ast.copy_location(ast.If(stmt.test, _without(stmt.body, flag) or [
                _pass(stmt)], _without(stmt.orelse, flag)), stmt)
        out.append(stmt)
    return out


def _pass(like):
    return ast.copy_location(ast.Pass(), like)


def _unreachable(rest):
    code = [s for s in rest if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if code:
        raise ExitError(code[0], "code after return, break or continue is never run",
                        "remove it, or move it before the exit")
