"""A Python function -> its ast node, its source file, and a resolver for its free names."""

from __future__ import annotations

import ast
import builtins
import functools
import linecache
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import Problem, SymdiffError

MISSING = object()
NOT_LITERAL = object()


def scoped_walk(nodes):
    """Nodes of ``nodes``, not descending into nested functions, lambdas or classes."""
    todo = list(nodes)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                 ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def default_nodes(args: ast.arguments) -> dict[str, ast.expr]:
    """The code of each parameter's default in a ``def``'s arguments, by parameter name."""
    positional = [*args.posonlyargs, *args.args]
    found = dict(zip([p.arg for p in positional[len(positional) - len(args.defaults):]],
                     args.defaults, strict=True))
    found.update({p.arg: d for p, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                  if d is not None})
    return found


def literal(code):
    """The value of ``code`` (an ast node or source text) if it is a literal (1.0, None,
    'fro', (0, 1)), else NOT_LITERAL; never raises, however deep the code."""
    try:
        return ast.literal_eval(code)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return NOT_LITERAL


@dataclass(frozen=True)
class Source:
    """The file a function came from: its name and lines, for locating problems."""

    filename: str
    lines: tuple[str, ...]

    def problem(self, node: ast.AST, message: str, hint: str = "") -> Problem:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        # ast columns count UTF-8 bytes; people count characters.
        col = len(text.encode()[: getattr(node, "col_offset", 0)].decode(errors="replace"))
        return Problem(self.filename, line, col + 1, message, text.rstrip("\n"), hint)

    def error(self, node: ast.AST, message: str, hint: str = "") -> SymdiffError:
        return SymdiffError(problems=(self.problem(node, message, hint),))

    def line_text(self, line: int) -> str:
        return self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""


@dataclass(frozen=True)
class Namespace:
    """What the free names of a function refer to: its closure, its module, the builtins."""

    globals: Mapping[str, object]
    closure: Mapping[str, object] = field(default_factory=dict)
    cells: Mapping[str, object] = field(default_factory=dict)

    def container(self, name: str):
        """Where ``name``'s current value is read at call time: its closure cell or globals."""
        return self.cells.get(name, self.globals)

    def lookup(self, name: str):
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        b = self.globals.get("__builtins__", builtins)
        b = b if isinstance(b, Mapping) else vars(b)
        return b.get(name, MISSING)


@dataclass(frozen=True)
class Parsed:
    """A function ready to lower: its definition node, where it lives, what its names mean."""

    name: str
    node: ast.FunctionDef
    source: Source
    namespace: Namespace
    fn: object = None


@dataclass(frozen=True)
class FunctionSource:
    """A function known only from its source (the CLI reads files without running them).

    Stands where a function object would in a namespace; ``parse`` accepts it as is.
    """

    name: str
    node: ast.FunctionDef
    source: Source
    namespace: Namespace = field(compare=False, default=None)


def parse(fn) -> Parsed:
    """Find ``fn``'s definition in its source file and what its free names refer to.

    >>> import numpy as np
    >>> def f(x):
    ...     return np.sin(x)
    >>> parse(f).node.name
    'f'
    """
    if isinstance(fn, FunctionSource):
        return Parsed(fn.name, fn.node, fn.source, fn.namespace, None)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise SymdiffError(f"symdiff differentiates Python functions; got {type(fn).__name__}")
    filename = code.co_filename
    linecache.checkcache(filename)  # a file edited since it was read: read it again
    lines = tuple(linecache.getlines(filename, getattr(fn, "__globals__", None)))
    if not lines:
        raise SymdiffError(
            f"{filename}:{code.co_firstlineno}:1: cannot read the source of {fn.__name__}: "
            "symdiff needs a function defined in a file (or a notebook cell), not by exec()"
        )
    source = Source(filename, lines)
    node = _find_definition(fn, source)
    closure, cells = {}, {}
    if fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__, strict=True):
            cells[name] = cell
            try:
                closure[name] = cell.cell_contents
            except ValueError:  # a cell not yet filled: referenced before assignment
                pass
    return Parsed(node.name, node, source, Namespace(fn.__globals__, closure, cells), fn)


@functools.lru_cache(maxsize=8)
def _definitions(source: Source):
    """``source`` parsed once, and its defs by (name, first line, decorators included):
    a function calling a hundred helpers of one file reads the file once, not a hundred
    times. None for a file Python cannot parse as a whole."""
    try:
        tree = ast.parse("".join(source.lines), source.filename)
    except (SyntaxError, RecursionError, MemoryError):
        return None, {}
    defs = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            defs.setdefault((node.name, first), node)
    return tree, defs


def _find_definition(fn, source: Source) -> ast.FunctionDef:
    code = fn.__code__
    tree, defs = _definitions(source)
    node = defs.get((code.co_name, code.co_firstlineno))
    if node is not None:
        return node
    if code.co_name == "<lambda>" and tree is not None:
        return _lambda_definition(code, tree, source)
    raise SymdiffError(
        f"{source.filename}:{code.co_firstlineno}:1: cannot find the definition of "
        f"{code.co_name} in its source file (was the file changed after it was imported?)"
    )


def _lambda_definition(code, tree, source: Source) -> ast.FunctionDef:
    """The lambda that compiled to ``code``, as a def: told apart by its columns."""
    lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
               and n.lineno <= code.co_firstlineno <= n.end_lineno]
    spots = [(line, col) for line, _, col, end in code.co_positions()
             if line is not None and col is not None and (col, end) != (0, 0)]
    if len(lambdas) > 1 and spots:
        lambdas = [n for n in lambdas if all(
            (n.body.lineno, n.body.col_offset) <= spot <= (n.body.end_lineno,
                                                            n.body.end_col_offset)
            for spot in spots)]
        # Nested lambdas both contain the inner one's positions: keep the innermost.
        lambdas = [n for n in lambdas if not any(m is not n and m in list(ast.walk(n))
                                                 for m in lambdas)]
    if len(lambdas) != 1:
        raise SymdiffError(
            f"{source.filename}:{code.co_firstlineno}:1: cannot tell which lambda on this "
            "line to differentiate; define the function with def")
    lam = lambdas[0]
    ret = ast.copy_location(ast.Return(lam.body), lam.body)
    node = ast.FunctionDef("lambda", lam.args, [ret], [], None, None)
    return ast.copy_location(node, lam)
