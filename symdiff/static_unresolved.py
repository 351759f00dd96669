"""A function read statically -> a located problem wherever it reads what was not resolved.

That is an unresolved name, or a parameter left to a default whose value at the ``def`` the
reading cannot give."""

from __future__ import annotations

import ast

from .errors import Problem
from .parse import FunctionSource
from .static_records import Module, StaticModule, Unresolved
from .static_statements import root_name

_HINT = ("numbers, literals, arithmetic on them, and NumPy constructors of literals "
         "(np.array([...]), np.zeros((3, 4))); or use grad() in Python")


def unresolved_problems(fs: FunctionSource, module: Module) -> list[Problem]:
    """A located problem where ``fs`` reads (in its body or defaults) an unresolved name,
    and where it (or a function it calls, of the file or of a local module) calls a function
    leaving a parameter to a default whose value at the ``def`` is not what symdiff would
    read. The functions it calls are followed transitively, in every file read.

    >>> import tempfile, os
    >>> from symdiff.static import read_module
    >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    ...     _ = f.write("W = open('w').read()\\ndef f(x):\\n    return W * x\\n")
    >>> m = read_module(f.name)
    >>> [p.col for p in unresolved_problems(m.functions["f"], m)]
    [12]
    >>> os.remove(f.name)
    """
    problems = []
    seen, todo = set(), [fs]
    while todo:
        f = todo.pop(0)
        home = module.modules.get(f.source.filename, module if f.source is module.source
                                  else None)
        if id(f.node) in seen or home is None or f.source is not home.source:
            continue
        seen.add(id(f.node))
        reads, calls, attributes = _module_reads(f.node)
        for node in reads:
            if node.id in home.unresolved:
                message, hint = unresolved_message(node.id, home.unresolved[node.id])
                problems.append(home.source.problem(node, message, hint))
        for node in attributes:  # helpers.W, of a local module whose W is not known
            owner = _static_base(node.value, f.namespace)
            record = module.modules.get(getattr(owner, "__file__", None))
            if record is not None and node.attr in record.unresolved:
                u = record.unresolved[node.attr]
                problems.append(home.source.problem(
                    node, u.message or f"{ast.unparse(node)} is not known: {owner.__name__} "
                    f"sets it at module level (line {u.line}) by code symdiff does not run "
                    f"when it reads a file: {u.reason}", u.hint or _HINT))
        # Defaults the callee leaves out must be the values Python evaluated at the def,
        # which symdiff (reading the expression) cannot give.
        for call in calls:
            callee = _callee(call.func, f.namespace)
            if not isinstance(callee, FunctionSource):
                continue
            callee_home = module.modules.get(callee.source.filename)
            if callee_home is not None and callee.source is callee_home.source:
                problems += _stale_default_problems(call, callee, callee_home, home)
            todo.append(callee)
    return problems


def _static_base(node, namespace):
    """The StaticModule ``node`` (``helpers``, ``pkg.sub``) names, or None."""
    if isinstance(node, ast.Name):
        obj = namespace.lookup(node.id)
    elif isinstance(node, ast.Attribute):
        base = _static_base(node.value, namespace)
        obj = vars(base).get(node.attr) if base is not None else None
    else:
        return None
    return obj if isinstance(obj, StaticModule) else None


def _callee(func, namespace):
    if isinstance(func, ast.Name):
        return namespace.lookup(func.id)
    base = _static_base(func.value, namespace)
    return vars(base).get(func.attr) if base is not None else None


def _stale_default_problems(call, callee, module, caller) -> list[Problem]:
    """``module`` defines ``callee``; ``caller`` holds the call."""
    stale = module.defaults.get(callee.name, {})
    if not stale or any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords):
        return []
    a = callee.node.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    given = set(positional[:len(call.args)]) | {k.arg for k in call.keywords}
    problems = []
    for p, d in stale.items():
        if p in given:
            continue
        what = d.reason or (f"was {_short(d.value)} when {callee.name} was defined (line "
                            f"{d.line}), and a name it reads is set again later")
        problems.append(caller.source.problem(
            call, f"this call of {callee.name} leaves {p} to its default "
            f"{ast.unparse(d.node)}, which {what}: symdiff would read its value at the end "
            "of the file, not the one Python gives it",
            f"pass {p} explicitly, or do not set {ast.unparse(d.node)} again after the def"))
    return problems


def unresolved_message(name: str, u: Unresolved) -> tuple[str, str]:
    """What to say where an unresolved name is read: the message and the hint."""
    if u.message:
        return u.message, u.hint or _HINT
    return (f"{name!r} is set at module level (line {u.line}) by code symdiff does not run "
            f"when it reads a file: {u.reason}", u.hint or _HINT)


def _module_reads(fn) -> tuple[list[ast.Name], list[ast.Call], list[ast.Attribute]]:
    """The names a function reads from the module (in its body and defaults, not those
    its own or a nested function's parameters and locals shadow), its calls of them (and
    of their attributes, ``helpers.h(x)``), and the attributes it reads of them.

    Walked with a stack, not recursion: an expression nested thousands deep is read too.
    """
    reads, calls, attributes = [], [], []
    a = fn.args
    # Defaults are evaluated in the module's scope; the body in the function's.
    todo = [(d, frozenset()) for d in [*a.defaults, *(d for d in a.kw_defaults
                                                      if d is not None)]]
    local = _scope_locals(fn)
    todo += [(node, local) for node in ([fn.body] if isinstance(fn, ast.Lambda) else fn.body)]
    todo.reverse()
    while todo:
        node, local = todo.pop()
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in local:
                reads.append(node)
            continue
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            inner = local | _scope_locals(node)
            children = [(d, local) for d in [*getattr(node, "decorator_list", []), *a.defaults,
                                             *(d for d in a.kw_defaults if d is not None)]]
            children += [(b, inner) for b in ([node.body] if isinstance(node, ast.Lambda)
                                              else node.body)]
            todo += reversed(children)
            continue
        if isinstance(node, ast.Call) and root_name(node.func) not in local | {None}:
            calls.append(node)
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and (
                root_name(node) not in local | {None}):
            attributes.append(node)
        todo += [(c, local) for c in reversed(children)]
    return reads, calls, attributes


def _scope_locals(fn) -> frozenset[str]:
    """The names local to a function: its parameters, and what its body binds (not the
    bodies of functions and classes in it), less what it declares global or nonlocal."""
    a = fn.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg)
             if p is not None}
    free = set()
    todo = [fn.body] if isinstance(fn, ast.Lambda) else list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        elif isinstance(node, ast.Lambda):
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {n.asname or n.name.partition(".")[0] for n in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            free |= set(node.names)
        todo.extend(ast.iter_child_nodes(node))
    return frozenset(names - free)


def _short(value) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else "an int"
    return text if len(text) < 40 else type(value).__name__
