"""A function's definition -> the parameters it uses only as integers (indices, counts).

The command line differentiates a file's functions in every parameter by default; a
parameter that only indexes (``x[i]``), bounds a loop (``range(steps)``) or gives a shape
(``np.zeros(n)``) is a count, not a real number, and differentiating in it fails or gives a
meaningless zero. It is read from the syntax, conservatively: a parameter is an integer
only when every one of its uses is in such a position (through ``+ - * // %`` and tuples),
it is never rebound, and nothing says it is a float (an annotation, a float default).
A use anywhere else (a comparison, a call of a helper, arithmetic with a float) keeps it:
a float parameter wrongly left out would be a silently missing gradient.
"""

from __future__ import annotations

import ast

from .parse import default_nodes

# The arguments that are counts or shapes, by position, of range(n) and of the
# constructors np.zeros(n)... as any module alias spells them (np., xp., jnp.); and the
# keywords that always are (axis=k, of any call).
_COUNT_ARGS = {"range": (0, 1, 2), "zeros": (0,), "ones": (0,), "empty": (0,),
               "full": (0,), "identity": (0,), "eye": (0, 1, 2)}
_COUNT_KEYWORDS = frozenset({"axis", "axes"})
_INTEGER_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_FLOAT_NOTES = frozenset({"float", "np.float64", "numpy.float64", "np.ndarray",
                          "numpy.ndarray", "complex"})


def integer_only(node: ast.FunctionDef) -> tuple[str, ...]:
    """The parameters of ``node`` it uses only as integers, in order.

    >>> tree = ast.parse("def f(x, i, n, c):\\n"
    ...                  "    s = 0.0\\n"
    ...                  "    for _ in range(n):\\n"
    ...                  "        s = s + x[i + 1] * c\\n"
    ...                  "    return s\\n")
    >>> integer_only(tree.body[0])
    ('i', 'n')
    """
    a = node.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    defaults = default_nodes(a)
    parents = {}
    for parent in ast.walk(node):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    uses: dict[str, list[ast.Name]] = {p.arg: [] for p in params}
    rebound, nested = set(), set()
    for statement in node.body:
        for n in ast.walk(statement):
            if isinstance(n, ast.Name) and n.id in uses:
                if isinstance(n.ctx, ast.Load):
                    uses[n.id].append(n)
                else:
                    rebound.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                ast.ClassDef, ast.Global, ast.Nonlocal)):
                nested.update(_names(n))  # (another scope: what it does is not followed)
    out = []
    for p in params:
        if p.arg in rebound or p.arg in nested or not uses[p.arg]:
            continue
        if _says_float(p.annotation, defaults.get(p.arg)):
            continue
        if all(_integer_position(use, parents) for use in uses[p.arg]):
            out.append(p.arg)
    return tuple(out)


def _names(node) -> set[str]:
    found = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        found.update(node.names)
    return found


def _says_float(annotation, default) -> bool:
    """Whether the annotation or the default says the parameter is not an integer."""
    if annotation is not None:
        text = ast.unparse(annotation).strip("'\"")
        if text not in ("int", "np.int64", "numpy.int64", "np.intp", "numpy.intp"):
            return True  # float, a shape (3, 4), a class: not a count
    if default is not None:
        try:
            value = ast.literal_eval(default)
        except (ValueError, SyntaxError, TypeError):
            return True  # np.ones(3), a name: not known to be an integer
        return not (isinstance(value, int) and not isinstance(value, bool))
    return False


def _integer_position(use: ast.Name, parents) -> bool:
    """Whether ``use`` feeds an index, a slice bound, a range or a shape, through integer
    arithmetic and tuples only."""
    child, parent = use, parents.get(use)
    while isinstance(parent, (ast.BinOp, ast.UnaryOp, ast.Tuple, ast.List)):
        if isinstance(parent, ast.BinOp) and not isinstance(parent.op, _INTEGER_OPS):
            return False
        if isinstance(parent, ast.UnaryOp) and not isinstance(parent.op, (ast.USub,
                                                                          ast.UAdd)):
            return False
        child, parent = parent, parents.get(parent)
    if isinstance(parent, ast.Subscript):
        return child is parent.slice
    if isinstance(parent, ast.Slice):
        return True
    if isinstance(parent, ast.keyword):
        return parent.arg in _COUNT_KEYWORDS
    if isinstance(parent, ast.Call) and child in parent.args:
        func = parent.func
        name = func.id if isinstance(func, ast.Name) and func.id == "range" else \
            func.attr if isinstance(func, ast.Attribute) else None
        return parent.args.index(child) in _COUNT_ARGS.get(name, ())
    return False
