"""Statements with early exits -> statements with one exit: return, break, continue removed.

``return v`` becomes an assignment to the pseudo-variable ``RETURN``; ``break`` sets a
loop's break flag; after an ``if`` whose branch exits, the statements that follow move into
the other branch. Lowering then sees only assignments, branches and loops, which it can
keep as control flow in the generated code.

>>> import ast
>>> body = ast.parse("if x > 0:\\n    return x\\ny = -x\\nreturn y").body
>>> print(ast.unparse(single_exit(body, None, None)))
if x > 0:
    <return> = x
else:
    y = -x
    <return> = y
"""

from __future__ import annotations

import ast

RETURN = "<return>"  # cannot be a user's name; lowering names its SSA versions _ret


class ExitError(Exception):
    """An exit symdiff cannot remove; ``node`` is where, ``message`` and ``hint`` say why."""

    def __init__(self, node, message, hint):
        super().__init__(message)
        self.node, self.message, self.hint = node, message, hint


def single_exit(body, break_flag, loop_depth_node) -> list:
    """``body`` without return/break/continue; ``break_flag`` names a loop's flag (or None)."""
    out, _ = _block(list(body), break_flag, loop_depth_node)
    return out


def _assign(name, value, like):
    node = ast.Assign([ast.Name(name, ast.Store())], value)
    return ast.copy_location(node, like)


def _block(stmts, flag, loop_node):
    """Returns (statements, exits): exits is True when every path ends in an exit."""
    out = []
    for i, stmt in enumerate(stmts):
        rest = stmts[i + 1:]
        if isinstance(stmt, ast.Return):
            if loop_node is not None:
                raise ExitError(stmt, "return inside a loop is not supported",
                                "assign the result to a name and break, then return it")
            value = stmt.value if stmt.value is not None else ast.Constant(None)
            out.append(_assign(RETURN, value, stmt))
            _unreachable(rest)
            return out, True
        if isinstance(stmt, (ast.Break, ast.Continue)):
            if isinstance(stmt, ast.Break):
                out.append(_assign(flag, ast.Constant(True), stmt))
            _unreachable(rest)
            return out, True
        if isinstance(stmt, ast.If):
            then, then_exits = _block(stmt.body, flag, loop_node)
            orelse, else_exits = _block(stmt.orelse, flag, loop_node)
            if then_exits and else_exits:
                _unreachable(rest)
            elif then_exits or else_exits:
                # What follows runs only on the path that did not exit: move it there.
                moved, rest_exits = _block(rest, flag, loop_node)
                if then_exits:
                    orelse += moved
                else:
                    then += moved
                new = ast.copy_location(ast.If(stmt.test, then or [_pass(stmt)],
                                               orelse), stmt)
                out.append(new)
                return out, rest_exits
            out.append(ast.copy_location(ast.If(stmt.test, then or [_pass(stmt)], orelse), stmt))
            if then_exits and else_exits:
                return out, True
            continue
        if isinstance(stmt, (ast.For, ast.While)):
            if stmt.orelse:
                kind = "for" if isinstance(stmt, ast.For) else "while"
                raise ExitError(stmt.orelse[0], f"{kind}/else is not supported",
                                "a flag set before break, tested after the loop")
            out.append(stmt)  # its body is made single-exit when the loop is lowered
            continue
        out.append(stmt)
    return out, False


def _pass(like):
    return ast.copy_location(ast.Pass(), like)


def _unreachable(rest):
    code = [s for s in rest if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if code:
        raise ExitError(code[0], "code after return, break or continue is never run",
                        "remove it, or move it before the exit")
