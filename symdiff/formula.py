"""A lowered function (IR) -> its partial derivatives as closed formulas, where it has them.

For display only (``symdiff FILE --format math``, ``Gradient.math()``; second derivatives:
``--order 2``, ``hessian(f).math()``): the straight-line, elementwise equations are
substituted forward into one expression of the parameters, which is small by then or given
up on, and differentiated with ``sympy.diff``. The gradient program itself never does this
(see DESIGN.md: inlining blows up); a function with array operations or control flow is
"shown as a program" instead.
"""

from __future__ import annotations

import ast
import copy
import math
from dataclasses import dataclass

import numpy as np
import sympy as sp
from sympy.printing.pretty.pretty import PrettyPrinter
from sympy.printing.pretty.pretty_symbology import pretty_use_unicode
from sympy.printing.pretty.stringpict import prettyForm

from . import rules
from .errors import SymdiffError
from .ir import IR, Eqn, symbol
from .parse import MISSING
from .runtime import stop_gradient as _stop_gradient_fn

MAX_OPS = 200  # a formula larger than this is no easier to read than the program


class StopGradient(sp.Function):
    """``stop_gradient(e)`` in a formula: prints as such, and its derivative is zero."""

    nargs = 1

    def fdiff(self, argindex=1):
        return sp.S.Zero

    def _latex(self, printer):
        return r"\operatorname{stop\_gradient}\left(" + printer._print(self.args[0]) + \
            r"\right)"


StopGradient.__name__ = "stop_gradient"  # the name the str and pretty printers show


class Opaque(sp.Symbol):
    """A value with no formula (a mask, a shape): shown as the code that computes it."""

    def _pretty(self, printer):
        return prettyForm(self.name)

    def _latex(self, printer):
        return r"\texttt{" + _escape(self.name) + "}"


class _Formulas:
    """What a function's formulas of either order share: whether they are closed, the note
    said where they are not, and the function's own line."""

    @property
    def closed(self) -> bool:
        return not self.reason

    def note(self) -> str:
        """What is said of a function that has no closed formula."""
        return f"not a closed formula ({self.reason}); shown as a program"

    def _value_row(self) -> tuple[str, sp.Expr]:
        return f"{self.name}({', '.join(self.params)}) = ", self.value

    def _latex_value(self) -> tuple[str, str]:
        """The function's name in LaTeX, and its line ``f(x, y) = ...``."""
        f = _latex_name(self.name)
        args = ", ".join(sp.latex(symbol(p)) for p in self.params)
        return f, f"{f}({args}) = {sp.latex(_display(self.value, self.params))}"


@dataclass(frozen=True)
class Formula(_Formulas):
    """A function's value and partial derivatives as SymPy expressions of its parameters.

    ``reason`` says why there is no closed formula ("" when there is one); then ``value``
    is None and ``partials`` is empty.
    """

    name: str
    params: tuple[str, ...]
    value: sp.Expr | None
    partials: tuple[tuple[str, sp.Expr], ...]
    reason: str = ""

    def pretty(self, unicode: bool = True) -> str:
        """The formulas in SymPy's 2-D pretty print, one ``lhs = rhs`` per block.

        >>> import sympy as sp
        >>> x = sp.Symbol("x", real=True)
        >>> print(Formula("f", ("x",), 3*x, (("x", sp.S(3)),)).pretty(unicode=False))
        f(x) = 3*x
        df/dx = 3
        """
        if not self.closed:
            return f"{self.name}: {self.note()}"
        d = "∂" if unicode else "d"
        rows = [self._value_row()]
        rows += [(f"{d}{self.name}/{d}{p} = ", e) for p, e in self.partials]
        return _pretty_rows(rows, self.params, unicode)

    def latex(self) -> str:
        """One LaTeX equation per line: the function, then each partial derivative.

        >>> import sympy as sp
        >>> x = sp.Symbol("x", real=True)
        >>> print(Formula("f", ("x",), sp.sin(x), (("x", sp.cos(x)),)).latex())
        f(x) = \\sin{\\left(x \\right)}
        \\frac{\\partial f}{\\partial x} = \\cos{\\left(x \\right)}
        """
        if not self.closed:
            return f"% {self.name}: {self.note()}"
        f, head = self._latex_value()
        lines = [head]
        for p, e in self.partials:
            lines.append(rf"\frac{{\partial {f}}}{{\partial {sp.latex(symbol(p))}}} = "
                         + sp.latex(_display(e, self.params)))
        return "\n".join(lines)



def formula(ir: IR, max_ops: int = MAX_OPS) -> Formula:
    """The closed formulas of ``ir``'s value and of its derivative in each ``ir.wrt``.

    >>> import numpy as np
    >>> from symdiff.lower import lower
    >>> from symdiff.parse import parse
    >>> def f(x, y):
    ...     return np.sin(x) * y
    >>> formula(lower(parse(f), ("x", "y"))).partials
    (('x', y*cos(x)), ('y', sin(x)))
    """
    try:
        return _formula(ir, max_ops)
    except Exception as e:  # noqa: BLE001 - only a display: never a SymPy traceback
        return Formula(ir.name, tuple(ir.params), None, (),
                       f"SymPy could not form it: {type(e).__name__}")


@dataclass(frozen=True)
class HessianFormula(_Formulas):
    """A function's value and second partial derivatives as SymPy expressions.

    ``entries`` holds ``((a, b), d2f/da db)``; a mixed partial is held (and printed)
    once, as ``(a, b)`` in the order of the rows then columns, since d2f/da db and
    d2f/db da are the same expression. ``reason`` as in ``Formula``.
    """

    name: str
    params: tuple[str, ...]
    value: sp.Expr | None
    entries: tuple[tuple[tuple[str, str], sp.Expr], ...]
    reason: str = ""

    def pretty(self, unicode: bool = True) -> str:
        """The function, then each second partial derivative, in SymPy's pretty print.

        >>> import sympy as sp
        >>> x, y = sp.symbols("x y", real=True)
        >>> h = HessianFormula("f", ("x", "y"), y*sp.sin(x), ((("x", "x"), -y*sp.sin(x)),
        ...                    (("x", "y"), sp.cos(x)), (("y", "y"), sp.S.Zero)))
        >>> print(h.pretty(unicode=False))
        f(x, y) = y*sin(x)
        d^2f/dx^2 = -y*sin(x)
        d^2f/dx dy = cos(x)
        d^2f/dy^2 = 0
        """
        if not self.closed:
            return f"{self.name}: {self.note()}"
        f = self.name
        rows = [self._value_row()]
        for (a, b), e in self.entries:
            if unicode:
                label = f"∂²{f}/∂{a}²" if a == b else f"∂²{f}/∂{a}∂{b}"
            else:
                label = f"d^2{f}/d{a}^2" if a == b else f"d^2{f}/d{a} d{b}"
            rows.append((label + " = ", e))
        return _pretty_rows(rows, self.params, unicode)

    def latex(self) -> str:
        """One LaTeX equation per line: the function, then each second partial derivative.

        >>> import sympy as sp
        >>> x = sp.Symbol("x", real=True)
        >>> print(HessianFormula("f", ("x",), sp.sin(x), ((("x", "x"), -sp.sin(x)),)).latex())
        f(x) = \\sin{\\left(x \\right)}
        \\frac{\\partial^{2} f}{\\partial x^{2}} = - \\sin{\\left(x \\right)}
        """
        if not self.closed:
            return f"% {self.name}: {self.note()}"
        f, head = self._latex_value()
        lines = [head]
        for (a, b), e in self.entries:
            da, db = sp.latex(symbol(a)), sp.latex(symbol(b))
            below = rf"\partial {da}^{{2}}" if a == b else rf"\partial {da} \partial {db}"
            lines.append(rf"\frac{{\partial^{{2}} {f}}}{{{below}}} = "
                         + sp.latex(_display(e, self.params)))
        return "\n".join(lines)


def hessian(ir: IR, columns: tuple[str, ...] | None = None,
            max_ops: int = MAX_OPS) -> HessianFormula:
    """The closed formulas of ``ir``'s second derivatives: d2f/da db for each a in
    ``ir.wrt`` and b in ``columns`` (default ``ir.wrt``: the Hessian). ``stop_gradient``
    is a constant at every order, as in the programs.

    >>> from symdiff.lower import lower
    >>> from symdiff.parse import parse
    >>> def f(x, y):
    ...     return x ** 3 * y
    >>> hessian(lower(parse(f), ("x", "y"))).entries
    ((('x', 'x'), 6*x*y), (('x', 'y'), 3*x**2), (('y', 'y'), 0))
    """
    params = tuple(ir.params)
    try:
        value = _value(ir, max_ops)
        if isinstance(value, str):
            return HessianFormula(ir.name, params, None, (), value)
        entries, shown = [], set()
        for a in ir.wrt:
            for b in (ir.wrt if columns is None else columns):
                if (b, a) in shown:
                    continue
                shown.add((a, b))
                d = sp.diff(_differentiable(sp.diff(value, symbol(a))), symbol(b))
                if d.has(sp.Derivative, sp.Subs):
                    return HessianFormula(ir.name, params, None, (), (
                        f"SymPy leaves the second derivative in {a} and {b} unevaluated"))
                if sp.count_ops(d) > max_ops:
                    return HessianFormula(ir.name, params, None, (), (
                        f"the second derivative in {a} and {b} has more than {max_ops} "
                        "operations"))
                entries.append(((a, b), _simplify(d)))
    except Exception as e:  # noqa: BLE001 - only a display: never a SymPy traceback
        return HessianFormula(ir.name, params, None, (),
                              f"SymPy could not form it: {type(e).__name__}")
    return HessianFormula(ir.name, params, value, tuple(entries))


def _differentiable(expr):
    """A first derivative with the table's derivative-only forms, which SymPy cannot
    differentiate (a / b that is 0 where b is, y*x**(y - 1) that is 0 where y is), as the
    quotient and power they are wherever the second derivative exists; and SymPy's sign
    (abs's derivative) as the table's, whose derivative is 0 as in the programs, not a
    Dirac delta."""
    return expr.replace(rules.Ratio, lambda a, b: a / b).replace(
        rules.PowerSlope, lambda x, y: y * rules._power(x, y - 1)).replace(sp.sign, rules.Sign)


def hessian_formula(fun, wrt=0, columns=None) -> HessianFormula:
    """The Hessian of the Python function ``fun`` in ``wrt`` (a parameter name or
    position, or a tuple of them) as closed formulas; ``columns``: other parameters for
    the columns (the Jacobian of ``grad(fun, wrt)`` in them), by default ``wrt``.

    >>> import numpy as np
    >>> from symdiff import stop_gradient
    >>> def f(x, y):
    ...     return np.sin(x) * y + x * stop_gradient(x)
    >>> print(hessian_formula(f, ("x", "y")).pretty(unicode=False))
    f(x, y) = x*stop_gradient(x) + y*sin(x)
    d^2f/dx^2 = -y*sin(x)
    d^2f/dx dy = cos(x)
    d^2f/dy^2 = 0
    """
    from .lower import lower
    from .parse import parse

    rows = tuple(wrt) if isinstance(wrt, (tuple, list)) else (wrt,)
    parsed = parse(fun)
    ir = lower(parsed, rows)
    if columns is not None:
        columns = tuple(columns) if isinstance(columns, (tuple, list)) else (columns,)
        columns = lower(parsed, columns).wrt
    return hessian(ir, columns)


def of_jacobian(jacobian) -> HessianFormula:
    """The closed formulas of ``jacobian`` (a ``higher.Jacobian``) when it is a Hessian
    (the Jacobian of a gradient: ``hessian(f)``), for its ``math()`` and ``latex()``."""
    from .api import Gradient

    gradient = jacobian.fun
    if not isinstance(gradient, Gradient):
        name = getattr(gradient, "__qualname__", repr(gradient))
        raise SymdiffError(f"math() and latex() are for hessians (hessian(f), the Jacobian "
                           f"of grad(f)); jacobian({name}) is the Jacobian of a function: "
                           f"grad({name}).math() prints first derivatives")
    return hessian_formula(gradient.fun, gradient.wrt, jacobian.wrt)


def hessian_program(jacobian) -> str:
    """The source of the program a Hessian is computed with: the gradient, in the
    gradient's parameters, of the tangent program along ``jacobian.wrt`` (a
    Hessian-vector product: column j of the Hessian at the j-th basis tangent)."""
    from .higher import _gradient_of, _names, _positional, tangent_function

    gradient = jacobian.fun
    fun = gradient.fun
    params = _positional(fun)
    tf = tangent_function(fun, _names(fun, jacobian.wrt), returns="tangent")
    return _gradient_of(tf, tuple(params.index(a) for a in _names(fun, gradient.wrt))
                        ).gradient.source


def _pretty_rows(rows, params, unicode) -> str:
    """``(label, expr)`` rows as ``label expr`` in SymPy's 2-D pretty print: one-line
    ones one to a line, 2-D ones set apart by blank lines."""
    printer = PrettyPrinter({"use_unicode": unicode, "wrap_line": False})
    blocks = []
    # The printer's forms consult a global flag for their symbols (the product dot).
    previous = pretty_use_unicode(unicode)
    try:
        for label, expr in rows:
            form = prettyForm(*prettyForm(label).right(printer._print(
                _display(expr, params))))
            blocks.append("\n".join(line.rstrip() for line in form.render(
                wrap_line=False).splitlines()))
    finally:
        pretty_use_unicode(previous)
    return ("\n\n" if any("\n" in b for b in blocks) else "\n").join(blocks)


def _formula(ir: IR, max_ops: int) -> Formula:
    params = tuple(ir.params)

    def give_up(reason):
        return Formula(ir.name, params, None, (), reason)

    value = _value(ir, max_ops)
    if isinstance(value, str):
        return give_up(value)
    partials = []
    for p in ir.wrt:
        d = sp.diff(value, symbol(p))
        if sp.count_ops(d) > max_ops:
            return give_up(f"the derivative in {p} has more than {max_ops} operations")
        partials.append((p, _simplify(d)))
    return Formula(ir.name, params, value, tuple(partials))


def _value(ir: IR, max_ops: int) -> sp.Expr | str:
    """``ir``'s value as one expression of its parameters, or why it has none."""
    # (A parameter is itself, whatever a global of the same name holds.)
    env: dict[sp.Symbol, sp.Expr] = {symbol(p): symbol(p) for p in ir.params}
    namespace = ir.parsed.namespace
    for eqn in ir.eqns:
        if not isinstance(eqn, Eqn):
            line = getattr(eqn, "line", "?")
            return f"it has control flow at line {line}"
        if eqn.kind == "assert":
            continue
        if eqn.kind == "elementwise":
            value = eqn.expr.xreplace(env)
        elif eqn.kind == "stop_gradient":
            value = StopGradient(_to_sympy(eqn.code, env, namespace))
        elif eqn.kind == "const":
            value = _to_sympy(eqn.code, env, namespace)
        elif eqn.kind == "array":
            what = eqn.op.names[0] if eqn.op is not None else "an array operation"
            return f"{what} at line {eqn.line} is an array operation"
        else:
            return f"line {eqn.line} is not elementwise"
        if sp.count_ops(value) > max_ops:
            return f"it has more than {max_ops} operations"
        env[symbol(eqn.out)] = value
    return _exact(symbol(ir.result).xreplace(env))


def _exact(expr):
    """Floats that are simple fractions (0.5, 2.0) as exact numbers, so that 1.0*x reads x."""
    swap = {}
    for f in expr.atoms(sp.Float):
        q = sp.Rational(float(f)).limit_denominator(1000)
        if float(q) == float(f):
            swap[f] = q
    return expr.xreplace(swap)


def _simplify(expr):
    """Lightly: pull out common factors; ``sympy.simplify`` only where it is quick."""
    best = sp.factor_terms(expr)
    if sp.count_ops(best) <= 50:
        simpler = sp.simplify(best)
        if sp.count_ops(simpler) < sp.count_ops(best):
            best = simpler
    return best


def _to_sympy(code, env, namespace):
    """The SymPy image of forward code that lowering kept only as code (stop_gradient
    contents, constants); an ``Opaque`` symbol when it is not elementwise."""
    try:
        return _convert(code, env, namespace)
    except _NotElementwise:
        text = ast.unparse(_Substituted(env).visit(copy.deepcopy(code)))
        simple = isinstance(code, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
        return Opaque(text if simple else f"({text})")


class _Substituted(ast.NodeTransformer):
    """Code with each name that has a formula (a value computed before: ``x_1``, an
    internal name) written as that formula, so that it reads in the parameters only."""

    # Where a formula needs no parentheses: it is a whole operand of these.
    _LOOSE = (ast.Compare, ast.BoolOp, ast.Call, ast.keyword, ast.Tuple, ast.List,
              ast.IfExp)

    def __init__(self, env):
        self.env = env
        self.parents = [None]

    def visit(self, node):
        if isinstance(node, ast.Name):
            return self.name(node)
        self.parents.append(node)
        try:
            return super().visit(node)
        finally:
            self.parents.pop()

    def name(self, node):
        value = self.env.get(symbol(node.id))
        if value is None:
            return node
        text = sp.sstr(_display(_exact(value)))
        parent = self.parents[-1]
        if not (value.is_Atom or isinstance(value, sp.Function) or isinstance(
                parent, self._LOOSE) or isinstance(parent, ast.Subscript) and (
                node is not parent.value)):
            text = f"({text})"
        return ast.copy_location(ast.Name(text, node.ctx), node)


class _NotElementwise(Exception):
    pass


def _convert(node, env, namespace):
    match node:
        case ast.Constant(value=bool() | int() | float() as v):
            return sp.Integer(int(v)) if isinstance(v, (bool, int)) else sp.Float(v)
        case ast.Name(id=name):
            if symbol(name) in env:
                return env[symbol(name)]
            obj = namespace.lookup(name)
            if isinstance(obj, (int, float)) and obj in (math.pi, math.e):
                return rules.constant(obj)  # as lowering sees them: pi and e by name
            if obj is MISSING or isinstance(obj, (int, float, np.ndarray)) and not isinstance(
                    obj, bool):
                return symbol(name)  # a parameter, or module-level data
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return -_convert(operand, env, namespace)
        case ast.UnaryOp(op=ast.UAdd(), operand=operand):
            return _convert(operand, env, namespace)
        case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINOPS:
            return _BINOPS[type(op)](_convert(left, env, namespace),
                                     _convert(right, env, namespace))
        case ast.Call(func=func, args=args, keywords=[]):
            obj = _reference(func, namespace)
            values = [_convert(a, env, namespace) for a in args]
            if obj is _stop_gradient_fn and len(values) == 1:
                return StopGradient(values[0])
            row = rules.lookup(obj)
            if isinstance(row, rules.Elementwise):
                try:
                    return row.sympy(*values)
                except TypeError:  # a call with arguments the row does not take
                    pass
    raise _NotElementwise


_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.Div: lambda a, b: a / b,
           ast.Pow: rules._power}


def _reference(node, namespace):
    if isinstance(node, ast.Name):
        return namespace.lookup(node.id)
    if isinstance(node, ast.Attribute):
        base = _reference(node.value, namespace)
        return MISSING if base is MISSING else getattr(base, node.attr, MISSING)
    return MISSING


# The table's functions, shown as the mathematical functions they are.
_SHOWN_AS = (
    (rules.Power, lambda a, b: sp.Pow(a, b)),
    (rules.LogOrZero, sp.log),
    (rules.PowerSlope, lambda a, b: b * a ** (b - 1)),
    (rules.Ratio, lambda a, b: a / b),
    (rules.Maximum, sp.Max),
    (rules.Minimum, sp.Min),
    (rules.FMax, sp.Max),  # as np.maximum, but a NaN operand is ignored
    (rules.FMin, sp.Min),
    (rules.Step, lambda a: sp.Heaviside(a, sp.S.Half)),
    (rules.NanStep, lambda a, b: sp.Heaviside(a - b, sp.S.Half)),
    (rules.Sigmoid, lambda a: 1 / (1 + sp.exp(-a))),
    (rules.Hypot, lambda a, b: sp.sqrt(a**2 + b**2)),
    (rules.LogAddExp, lambda a, b: sp.log(sp.exp(a) + sp.exp(b))),
    (rules.LogAddExp2, lambda a, b: sp.log(2**a + 2**b) / sp.log(2)),
    (rules.Floor, sp.floor),
    (rules.Ceil, sp.ceiling),
    (rules.Sign, sp.sign),
    (rules.Cbrt, sp.Function("cbrt")),
    (rules.Round, sp.Function("round")),
    (rules.Rint, sp.Function("rint")),
    (rules.Trunc, sp.Function("trunc")),
)


def _display(expr, params=()):
    """``expr`` as it is shown: the table's functions as the mathematical functions they
    are (any not in ``_SHOWN_AS`` by its lower-case name, never a class name of symdiff's),
    and, where a parameter is named pi or e, the constants as NumPy writes them (np.pi,
    np.e, exp(x)), so that they are not read as the parameter."""
    for cls, shown in _SHOWN_AS:
        expr = expr.replace(cls, shown)
    expr = expr.replace(lambda e: isinstance(e, rules._NumpyFunction), lambda e: sp.Function(
        getattr(e, "special", "") or type(e).__name__.lower())(*e.args))  # (SciPy's: log_ndtr)
    if "pi" in params:
        expr = expr.xreplace({sp.pi: Opaque("np.pi")})
    if "e" in params:
        expr = expr.xreplace({sp.E: Opaque("np.e")}).replace(sp.exp, sp.Function("exp"))
    return expr


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "^": r"\^{}", "~": r"\~{}",
                  **{c: "\\" + c for c in "{}_#&%$"}}


def _escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def _latex_name(name: str) -> str:
    return name if len(name) == 1 else r"\operatorname{" + _escape(name) + "}"
