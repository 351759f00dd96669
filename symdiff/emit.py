"""Adjoint program -> Python source of the gradient function, with NumPy calls only."""

from __future__ import annotations

import ast
import copy
import dataclasses
import io
import math
import re
import tokenize

import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.precedence import PRECEDENCE

from . import __version__, containers
from . import kinds as K
from .program import _IDENT, Block, Line, Program, _flat
from .rules import Call, Ratio, _NumpyFunction


class Printer(NumPyPrinter):
    """SymPy's NumPy printer, with our module alias, exact floats and our own functions.

    ``on_floats``: the expression is of Python floats, and is printed with math's functions
    (``math.sin``: 50 ns where ``np.sin`` of a float takes 500); ``missed`` is then set
    where it needs a function that math has not (printed as NumPy's).
    """

    def __init__(self, np_alias="np"):
        super().__init__({"fully_qualified_modules": True})
        self.np_alias = np_alias
        self.on_floats = False
        self.missed = False
        self.python_floats: set[str] = set()  # the names that hold Python floats

    def _module_format(self, fqn, register=True):
        if fqn.startswith("numpy."):
            if self.on_floats:
                found = _MATH.get(fqn[len("numpy."):])
                if found:
                    return found
                self.missed = True
            return self.np_alias + fqn[len("numpy"):]
        if self.on_floats and not fqn.startswith("math."):
            self.missed = True  # (SciPy's, say: a NumPy float)
        return fqn

    def floats(self, expr) -> str | None:
        """``expr`` printed with math's functions; None where it needs NumPy's."""
        self.on_floats, self.missed = True, False
        try:
            text = self.doprint(expr)
        finally:
            self.on_floats = False
        return None if self.missed else text

    def _print_Float(self, expr):
        # repr round-trips a float64 exactly; SymPy's default keeps 15 digits.
        return repr(float(expr))

    def _print_Function(self, expr):
        if self.on_floats and isinstance(expr, Ratio):
            # (np.divide(a, np.where(b == 0, 1.0, b)) of Python floats)
            a = self.parenthesize(expr.args[0], PRECEDENCE["Mul"])
            b = self.parenthesize(expr.args[1], PRECEDENCE["Pow"])
            return f"({a}/{b} if {b} != 0 else {a}/1.0)"
        if isinstance(expr, Call):
            callee = expr.callee
            if callee.startswith("np."):
                callee = self._module_format("numpy" + callee[2:])
            elif self.on_floats:
                self.missed = True  # (a helper of ours: not known to give a float)
            return f"{callee}({', '.join(self._print(a) for a in expr.args)})"
        if isinstance(expr, _NumpyFunction):
            # Printed from its tree; its precedence is the tree's, so it is parenthesised
            # as an operand wherever the tree would be.
            return self._print(expr.numpy())
        return super()._print_Function(expr)

    def _as_ordered_terms(self, expr, order=None):
        # A name alone (y, -y) is added last: NumPy then adds it into the array the other
        # terms made (it reuses a temporary), where -y first would be a new array kept
        # alive while they are computed (0.5*np.tanh(0.5*z) + 0.5 - y).
        terms = super()._as_ordered_terms(expr, order=order)
        named = [_named(t) for t in terms]
        if any(named) and not all(named):
            terms = [t for t, n in zip(terms, named, strict=True) if not n] + \
                [t for t, n in zip(terms, named, strict=True) if n]
        return terms

    def _print_Relational(self, expr):
        # Only ever np.where's condition, an argument: no parentheses needed around it.
        return f"{self._print(expr.lhs)} {expr.rel_op} {self._print(expr.rhs)}"

    def _print_Pow(self, expr, rational=False):
        # 1/x rather than x**(-1.0): the same float64, easier to read.
        if expr.exp.is_Integer and expr.exp < 0:
            denominator = self.parenthesize(expr.base ** -expr.exp, PRECEDENCE["Mul"])
            return f"(1/{denominator})"  # parenthesized: it may be a power's base or exponent
        if self.on_floats and not expr.exp.is_Integer and not (
                expr.exp.is_Rational and abs(expr.exp) == sp.S.Half) and not (
                expr.exp.is_Float and float(expr.exp).is_integer()):
            self.missed = True  # (a negative Python float to such a power is complex)
        return super()._print_Pow(expr, rational=rational)

    def _print_Exp1(self, expr):
        return self._module_format("numpy.e")

    def _print_Pi(self, expr):
        return self._module_format("numpy.pi")


# NumPy's names (as SymPy's printer writes them) -> what computes the same on Python floats.
# np.sign is 0 at 0 and nan at nan, as runtime._sign, where math.copysign is not.
_MATH = {**{name: "math." + name for name in (
    "sin", "cos", "tan", "sinh", "cosh", "tanh", "exp", "expm1", "log", "log2", "log10",
    "log1p", "sqrt", "hypot", "pi", "e")},
    **{"arc" + name: "math.a" + name for name in (
        "sin", "cos", "tan", "sinh", "cosh", "tanh", "tan2")},
    "sign": "_sign"}


def _named(term) -> bool:
    """Whether a term of a sum is a name, or a name negated."""
    return term.is_Symbol or term.is_Mul and len(term.args) == 2 and \
        term.args[0] == -1 and term.args[1].is_Symbol


def emit(program: Program, floats=True) -> str:
    """The gradient's source: a ``def grad_<name>`` with a docstring and line comments.
    ``floats``: what holds Python floats is computed with math (``_python_floats``)."""
    ir = program.ir
    printer = Printer(ir.np_alias)
    floats, maybe_none = _python_floats(program, printer) if floats else (set(), set())
    printer.python_floats = floats
    name = "grad_" + ir.name
    # The docstring stays valid Python whatever the path holds (backslashes, quotes).
    where = f"{ir.parsed.source.filename}:{ir.parsed.node.lineno}".replace(
        "\\", "\\\\").replace('"', '\\"')
    if ir.parsed.namespace.globals.get("__name__") == "symdiff.generated":
        # A program symdiff wrote (a tangent program): where the user's function is.
        found = re.search(r"^\s*\"\"\"Tangent of (\w+) \((.*?)\) along", "\n".join(
            ir.parsed.source.lines[ir.parsed.node.lineno:ir.parsed.node.lineno + 2]), re.M)
        if found:
            where = f"the tangent program of {found.group(1)}, {found.group(2)}"
    wrt = ", ".join(ir.given_wrt or ir.wrt)
    what = "Value and gradient" if program.with_value else "Gradient"
    args = copy.deepcopy(ir.parsed.node.args)
    for a in ast.walk(args):
        if isinstance(a, ast.arg):
            a.annotation = None
    out = [
        f"def {name}({ast.unparse(args)}):",
        f'    """{what} of {ir.name} ({where}) with respect to {wrt}.',
        *_lifted_note(ir),
        "",
        f"    Generated by symdiff {__version__} from the source of {ir.name}; regenerate it",
        "    rather than edit it.",
        '    """',
    ]
    out += _lines(program.forward, printer, 1, forward=True)
    # (A Python float, the common case, without a call; x.__class__ where the function
    # has a name 'type' of its own.)
    kind = "type({})" if "type" not in ir.taken else "{}.__class__"
    if program.check:
        out.append(f"    if {kind.format(ir.result)} is not float: "
                   f"_check_scalar({ir.result}, {ir.name!r})")
    if program.value:
        out.append(f"    {program.value} = {ir.result}")
    if program.aux != ir.aux:  # (a loop's tape may restore ir.aux's name)
        out.append(f"    {program.aux} = {ir.aux}")
    out.append(f"    {program.seed} = 1.0")
    precision = "" if program.dtype == "float64" else f", {ir.np_alias}.{program.dtype}"
    for p in program.floats:  # derivatives in floats: not a list, not integers that wrap
        convert = f"{p} = _as_float({p}{precision})"
        out.append(f"    {convert}" if p in ir.kinds else
                   f"    if {kind.format(p)} is not float: {convert}")
    if program.lists:  # what array operations' rules read: a list as an array there
        names = ", ".join(program.lists)
        out.append(f"    {names}{',' if len(program.lists) == 1 else ''} = _arrays({names})")
    out += _lines(program.backward, printer, 1, forward=False)
    value = program.value or ir.result
    if any(getattr(leaf, "lazy", False) for k in ir.kinds.values() for leaf in K.leaves(k)):
        # Dask data: the value, aux and every gradient are computed here, together, in one
        # graph (computing each where it is fitted would read the data once for each).
        names = [*dict.fromkeys(adj for _, adj in program.grads if adj)]
        names = [program.aux, *names] if program.aux else names
        names = [value, *names] if program.with_value else names
        if names:
            out.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = "
                       f"_computed({', '.join(names)})")
    # A gradient that may be an array the caller can see (an argument, module data, another
    # gradient) is copied; one made here for itself alone is handed out as it is.
    grads = [f"_fit({adj or '0.0'}, {p}{', copy=True' if shared else ''})"
             for (p, adj), shared in zip(program.grads, program.shared, strict=True)]
    for i, (p, adj) in enumerate(program.grads):
        # A Python float's gradient, a Python float: as it is (a float is no one's array).
        if program.facts is not None and program.facts.kind(p) == K.FLOAT and (
                adj is None or adj in floats):
            grads[i] = "0.0" if adj is None else \
                f"(0.0 if {adj} is None else {adj})" if _none_at_end(
                    program.backward, adj, maybe_none) else adj
    if ir.trees:  # a container's gradient: the same container, of its leaves' gradients
        grads = containers.rebuild(ir, grads)
    result = grads[0] if len(grads) == 1 and not program.as_tuple else (
        "(" + ", ".join(grads) + ("," if len(grads) == 1 else "") + ")")
    if program.aux:
        value = f"({value}, {program.aux})"
        result = f"({result}, {program.aux})" if not program.with_value else result
    if program.with_value:
        result = f"{value}, {result}"
    out.append(f"    return {result}")
    return _number_temporaries("\n".join(out) + "\n", ir.user_names)


def _number_temporaries(source: str, user_names) -> str:
    """Renumber the temporaries _t0, _t1, ... in order of first appearance.

    Temporaries are allocated stage by stage (lowering, then the backward sweep), so their
    numbers would jump about; a permutation of the same names cannot collide with any other.
    """
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    temps = {}
    for tok in tokens:
        if tok.type == tokenize.NAME and _TEMP.fullmatch(tok.string) and (
                tok.string not in user_names):
            temps.setdefault(tok.string, None)
    pool = sorted(temps, key=lambda t: int(t[2:]))
    mapping = dict(zip(temps, pool, strict=True))
    if all(k == v for k, v in mapping.items()):
        return source
    # An adjoint d_t3 belongs to _t3: it follows its temporary's new number.
    adjoints = {"d" + k: "d" + v for k, v in mapping.items()}
    if not set(adjoints.values()) & set(user_names):
        mapping.update(adjoints)
    lines = source.splitlines(keepends=True)
    # Replace from the end so that earlier columns stay valid.
    for tok in reversed(tokens):
        if tok.type == tokenize.NAME and tok.string in mapping:
            row, col = tok.start
            text = lines[row - 1]
            lines[row - 1] = text[:col] + mapping[tok.string] + text[col + len(tok.string):]
    return "".join(lines)


_TEMP = re.compile(r"_t\d+")


def _lines(lines, printer, depth, forward) -> list[str]:
    """Source lines of a (nested) list of Lines and Blocks, ``depth`` levels indented."""
    pad = "    " * depth
    out, heading = [], None
    for line in lines:
        if isinstance(line, Block):
            comment = f"  # {line.comment}" if line.comment else ""
            out.append(pad + line.header + comment)
            out += _lines(line.body, printer, depth + 1, forward)
            if line.orelse:
                out.append(pad + "else:")
                out += _lines(line.orelse, printer, depth + 1, forward)
            heading = None
        elif line.value is None:  # a heading for the equations of one source line
            if line.where != heading:
                heading = line.where
                label, text = line.where
                text = text if len(text) <= 72 else text[:69] + "..."
                out.append(f"{pad}# grad of {label}: {text}")
        elif forward:
            label = line.where[0]
            notes = ": ".join(n for n in (label, line.comment) if n)
            out.append(pad + _statement(line, printer) + (f"  # {notes}" if notes else ""))
        else:
            comment = f"  # {line.comment}" if line.comment else ""
            out.append(pad + _statement(line, printer) + comment)
    return out


def _statement(line: Line, printer: Printer) -> str:
    value = line.value
    if isinstance(value, ast.stmt):
        return ast.unparse(value)
    if not line.target:
        return str(value)
    on_floats = line.target in printer.python_floats
    sign = ""
    if line.like and not on_floats and ", (" not in line.like and \
            isinstance(value, sp.Mul) and value.args[0].is_Number:
        # A number multiplies after the sum, on the smaller array: -_unbroadcast(dD, x),
        # not _unbroadcast(-dD, x), which negates all of dD first. (Not where a value
        # smaller than v is spread to v's shape, "x, (x, y)": there the number is better
        # multiplied before; elsewhere the other factors are all larger than x.)
        sign = "-" if value.args[0] == -1 else printer.doprint(value.args[0]) + "*"
        value = value / value.args[0]
    if isinstance(value, ast.AST):
        text = ast.unparse(value)
    elif isinstance(value, sp.Integer):  # a constant adjoint: a float, as adjoints are
        text = repr(float(value))
    elif isinstance(value, sp.Basic):
        text = _floats_text(value, printer) or printer.doprint(value)
    else:
        text = str(value)
    if line.like and not on_floats:  # (a Python float has its variable's shape: none)
        text = f"{sign}_unbroadcast({text}, {line.like})"
    if line.unflowed and on_floats:  # (None: nothing has flowed back to it yet)
        added = _statement(dataclasses.replace(line, unflowed=False, like=""), printer)
        text = f"{text} if {line.target} is None else {added.split(' = ', 1)[1]}"
    elif line.unflowed:
        text = f"_plus({line.target}, {text})"
    elif line.in_place and not on_floats:
        text = f"_add_to({line.target}, {text})"
    elif line.accumulate:
        if text.startswith("-") and _atomic(text[1:]):
            text = f"{line.target} - {text[1:]}"  # -a*b is -(a*b): dz - a*b, not dz + -a*b
        elif line.like or _atomic(text):
            text = f"{line.target} + {text}"
        else:
            text = f"{line.target} + ({text})"
    return f"{line.target} = {text}"


def _atomic(text: str) -> bool:
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return not isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp))\
        or isinstance(node, ast.BinOp) and not isinstance(node.op, (ast.Add, ast.Sub))


# math's functions that do not give a float (of floats): an int, a bool, a tuple.
_NOT_FLOAT_VALUED = {"floor", "ceil", "trunc", "factorial", "gcd", "lcm", "isqrt", "comb",
                     "perm", "isnan", "isinf", "isfinite", "isclose", "frexp", "modf",
                     "prod", "sumprod"}


def _floats_text(value, printer) -> str | None:
    """``value`` printed with math's functions, where every name it reads holds a Python
    float (and math has its functions); else None."""
    if all(s.name in printer.python_floats for s in value.free_symbols):
        return printer.floats(value)
    return None


def _python_floats(program: Program, printer: Printer) -> tuple[set[str], set[str]]:
    """The names the generated code certainly binds to Python floats (the kinds' Python
    floats, what math's functions and arithmetic make of them, the adjoints the backward
    sweep computes from them only), and of those, the adjoints that may hold None
    (nothing has flowed back to them on the path taken)."""
    facts = program.facts
    if facts is None or K.FLOAT not in facts.kinds.values():
        return set(), set()
    known = {n for n, k in facts.kinds.items() if k == K.FLOAT}
    taken = {n: o for n, o, _ in program.ir.globals}
    math_ok = taken.get("math", math) is math
    forward = [line for line in _flat(program.forward) if line.target]
    backward = [line for line in _flat(program.backward) if line.target]
    floats = known | {line.target for line in forward + backward} | {program.seed}
    none: set[str] = set()

    def python_float(node) -> bool:  # a forward expression's value
        match node:
            case ast.Constant(value=float()):
                return True
            case ast.Name(id=name):
                return name in floats
            case ast.BinOp(op=ast.Add() | ast.Sub() | ast.Mult() | ast.Div()):
                return python_float(node.left) and (python_float(node.right) or isinstance(
                    node.right, ast.Constant) and type(node.right.value) is int) or \
                    python_float(node.right) and isinstance(node.left, ast.Constant) and \
                    type(node.left.value) is int
            case ast.BinOp(op=ast.Pow(), right=ast.Constant(value=int())):
                return python_float(node.left)  # (or it raises: see floats.on_floats)
            case ast.UnaryOp(op=ast.USub() | ast.UAdd()):
                return python_float(node.operand)
            case ast.Attribute(value=ast.Name(id="math"), attr="pi" | "e" | "tau" | "inf"):
                return math_ok
            case ast.Call(func=ast.Attribute(value=ast.Name(id="math"), attr=attr),
                          keywords=[]) if math_ok and attr not in _NOT_FLOAT_VALUED:
                return all(map(python_float, node.args))
            case ast.Call(func=ast.Name(id="abs"), args=[arg], keywords=[]) if \
                    "abs" not in taken:
                return python_float(arg)
        return False

    # Every name assumed one, then each dropped that is assigned anything else, until none is.
    while True:
        printer.python_floats = floats
        wrong = set()
        for line in forward:
            if line.target in facts.kinds:
                fine = line.target in known
            else:
                fine = isinstance(line.value, ast.expr) and python_float(line.value)
            if not fine:
                wrong.add(line.target)
        for line in backward:
            value = line.value
            if value == "None":
                none.add(line.target)
                continue
            if isinstance(value, sp.Symbol) or isinstance(value, str) and \
                    _IDENT.fullmatch(value):  # a copy, of None too
                fine = str(value) in floats
                if str(value) in none:
                    none.add(line.target)
            elif isinstance(value, sp.Integer | sp.Float) or isinstance(value, sp.Basic) and \
                    _floats_text(value, printer) is not None:
                fine = True
            else:
                fine = False
            if not fine or line.like and not set(_IDENT.findall(line.like)) <= floats:
                wrong.add(line.target)
        if not wrong & floats:
            return floats, none & floats
        floats -= wrong


def _none_at_end(lines, name: str, none: set[str]) -> bool:
    """Whether the adjoint ``name`` may hold None after the backward sweep ``lines`` (of
    the names in ``none``, which may hold None somewhere)."""
    if name not in none:
        return False
    maybe = True  # (not assigned yet)
    for line in lines:
        if isinstance(line, Block):
            inner = [n for n in _flat([line]) if n.target == name]
            if inner:  # (a block may not run, or take the path that sets it)
                maybe = maybe or any(n.value == "None" or str(n.value) in none
                                     for n in inner)
        elif line.target == name:
            maybe = line.value == "None" or str(line.value) in none and not line.unflowed
    return maybe


def _lifted_note(ir) -> list[str]:
    """The docstring's line for a gradient that reads stop_gradient calls as identities."""
    if not ir.lifted:
        return []
    if ir.lifted == "all":
        return ["", "    Every stop_gradient is read as an identity here (stop_gradients=False)."]
    lines = sorted({s.line for s, _, _ in ir.sites if s.key in ir.lifted})
    at = ", ".join(map(str, lines))
    return ["", f"    The stop_gradient at line {at} is read as an identity here (audit)."]
