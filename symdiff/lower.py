"""A parsed function -> IR: statements, branches, loops and calls, over SSA names.

Every user statement becomes one or more equations (``statements``, ``expressions``); ``if``
and loops become ``If`` and ``Loop`` blocks whose variables are merged (``phis``,
``branches``) or carried from one iteration to the next (``loops``); calls of the user's own
functions are lowered in place (``inline``). This module holds the lowering of the function
itself (its parameters, ``wrt``, the result) and the SSA names the others bind.
"""

from __future__ import annotations

import ast
import dataclasses
import sys

import numpy as np

from . import containers, runtime
from .branches import Branches
from .errors import Problem, SymdiffError
from .exits import AUX, RETURN, ExitError, single_exit
from .expressions import Expressions, Val
from .inline import Inline, _identifiers, _without_docstring
from .ir import IR, Eqn, Names
from .lists import Lists
from .loops import Loops, assigned
from .operations import Operations
from .parse import MISSING, FunctionSource, Parsed
from .references import References
from .statements import Statements
from .writes import Writes

# Names the generated code uses for itself: NumPy, SciPy (in derivatives of its functions),
# and every helper in runtime.py.
RESERVED = ("np", "scipy", "SymdiffError", *(n for n, v in vars(runtime).items()
                                             if n.startswith("_") and callable(v)))


def lower(parsed: Parsed, wrt, kinds=None, has_aux=False, lifted=frozenset()) -> IR:
    """Lower ``parsed`` for differentiation with respect to ``wrt`` (names or positions),
    specialised on ``kinds`` (parameter -> kinds.Kind; a parameter left out may be anything).
    ``has_aux``: the function returns ``(value, aux)``; aux is run, not differentiated.
    ``lifted``: the stop_gradient calls read as identities, by ``Site.key``, or ``"all"``.
    """
    # Lowering recurses through the code as it nests (an expression in a call, a helper
    # inlined in a helper: ten frames a helper), and Python runs code deeper than its
    # default limit of 1000 frames allows that. The frames are Python's own, which since
    # 3.11 do not grow the C stack; SymPy, which does, sees only short expressions (DEPTH).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _RECURSION_LIMIT))
    try:
        ir = _Lowering(parsed, has_aux, lifted).run(wrt, kinds)
        # (with the kind of each leaf of a container: containers.start)
        return dataclasses.replace(ir, kinds={**(kinds or {}), **ir.kinds})
    finally:
        sys.setrecursionlimit(limit)


class _Lowering(Writes, Statements, Branches, Inline, Expressions, Operations, References, Loops,
                Lists):
    def __init__(self, parsed: Parsed, has_aux=False, lifted=frozenset()):
        self.has_aux = has_aux
        self.lifted = lifted  # stop_gradient calls read as identities (their Site.key), or "all"
        self.sites: list = []  # (Site, the name of its value) for every stop_gradient met
        self.top = parsed
        self.parsed = parsed
        self.src = parsed.source
        self.node = parsed.node
        self.eqns: list = []
        self.problems: list[Problem] = []
        self.env: dict[str, str] = {}
        self.active: set[str] = set()
        self.data_globals: dict[str, object] = {}  # name -> dict or cell it is read from
        self.globals_used: dict[str, object] = {}
        self.line = self.node.lineno
        self.where = ("", "")
        self.bound: set[str] = set()
        self.local_functions: dict[str, FunctionSource] = {}
        self.enclosing: dict[str, str] = {}  # a nested helper's view of its definer's names
        self.stack: list = []
        self.depth = 0  # how many branches and loops the current statement is inside
        self.temps: set[str] = set()  # temporaries, which an assignment may rename
        self.memo: dict = {}  # (operation, operands, other arguments) -> the name of its value
        self.alias: dict[str, str] = {}  # SSA name -> a name of the same array object
        self.maybe: dict[str, set] = {}  # a branch's merge, a loop's phi -> the names it may be
        self.parsed_callees: dict = {}
        self.globals_where: dict = {}  # name -> the dict or cell it was found in
        self.first_user: dict[str, str] = {}  # name -> the function that first read it
        self.def_defaults: dict[int, dict] = {}  # id(nested def) -> its defaults' values
        self.caller_envs: list[dict] = []  # the variables of the functions being inlined into
        self.guards: dict = {}  # (id(container), name) -> (container, name, function)
        self.counter = 0
        self.label = ""
        self.starred: dict[str, str] = {}  # the function's *args, **kwargs: name -> stars
        self.ndims: dict[str, int] = {}  # SSA name -> its number of axes, where known
        self.arrays: set[str] = set()  # SSA names certainly bound to an ndarray
        self.depth_checked: set[int] = set()  # ids of equations _refuse_deep has seen
        self.trees: dict = {}  # a container being differentiated: its holder -> its Tree
        self.leaves: set[str] = set()  # the names of its leaves
        self.known: dict = {}  # SSA name -> its value, known when building (an unrolled counter)
        self.kinds: dict = {}  # a parameter (its own SSA name) -> its kind, where known
        self.lists: set[str] = set()  # SSA names of lists the function built ([], append)
        self.owned: set[str] = set()  # SSA names of arrays made here by arithmetic (writes)
        self.stale: dict = {}  # SSA name -> why reading it is refused: a write changed it
        self.holds: dict = {}  # a list's SSA name -> the arrays it holds (writes.py)
        self.headers: list = []  # the headers of the for loops being lowered (writes.py)
        ids = _identifiers(self.node)
        self.locals = assigned(self.node.body)
        # NumPy is np in the generated code, unless the function uses np for something else.
        own = set(self.locals) | {a.arg for a in ast.walk(self.node.args)
                                  if isinstance(a, ast.arg)}
        self.np_alias = "np" if "np" not in ids or (
            parsed.namespace.lookup("np") is np and "np" not in own) else "_np"
        self.ids = set(ids)
        self.names = Names(ids | set(RESERVED) | {"_np", parsed.name, "grad_" + parsed.name})

    # --- errors ---

    def fail(self, node, message, hint=""):
        raise SymdiffError(problems=(self.src.problem(node, message, hint),))

    # --- the function ---

    def run(self, wrt, kinds=None) -> IR:
        params = self._params()
        wrt_names = self._wrt(params, wrt)
        for p in params:
            if p in RESERVED:
                raise self.src.error(self.node, f"the parameter name {p} is one the generated "
                                     "code uses for itself", "rename the parameter")
            self.env[p] = p
            self.bound.add(p)
        self.active = set(wrt_names)
        self.kinds = dict(kinds or {})
        given = tuple(wrt_names)
        params, wrt_names, leaf_kinds = containers.start(self, params, wrt_names, kinds)
        a = self.node.args
        self.starred = {p.arg: "*" if p is a.vararg else "**" for p in (a.vararg, a.kwarg)
                        if p is not None}
        for default in [*a.defaults, *[d for d in a.kw_defaults if d is not None]]:
            for n in ast.walk(default):  # the generated def repeats the defaults' code
                if isinstance(n, ast.Name) and self.parsed.namespace.lookup(n.id) is not MISSING:
                    self._use_global(n, n.id)
        try:
            body, returns = single_exit(_without_docstring(self.node.body))
        except ExitError as e:
            raise self.src.error(e.node, e.message, e.hint) from None
        self._statements(body)
        result = self.env.get(RETURN)
        if not self.problems and (result is None or not returns):
            what = "has no return statement" if result is None else \
                "does not return a value on every path"
            self.problems.append(self.src.problem(
                self.node, f"{self.parsed.name} {what}",
                "return the scalar value to differentiate"))
        if self.problems:
            raise SymdiffError(problems=tuple(self.problems))
        return IR(self.parsed.name, self.parsed, tuple(params), tuple(wrt_names),
                  tuple(self.eqns), result, frozenset(self.names.taken), frozenset(self.ids),
                  tuple(self.data_globals.items()), self.np_alias,
                  tuple((n, o, self.globals_where[n]) for n, o in self.globals_used.items()),
                  tuple(self.guards.values()), aux=self.env.get(AUX, ""),
                  kinds=leaf_kinds,
                  trees={p: self.trees[f"<{p}>"] for p in given if f"<{p}>" in self.trees},
                  given_wrt=given, sites=tuple(dict.fromkeys(self.sites)),
                  lifted=self.lifted)

    def _params(self):
        a = self.node.args
        return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]

    def _wrt(self, params, wrt):
        a = self.node.args
        positional = [p.arg for p in (*a.posonlyargs, *a.args)]
        starred = [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        out = []
        for w in wrt:
            if isinstance(w, int) and not isinstance(w, bool):
                if not -len(positional) <= w < len(positional):
                    count = _count(len(positional), "positional parameter")
                    if starred:
                        stars = ", ".join(("*" if p is a.vararg else "**") + p.arg
                                          for p in (a.vararg, a.kwarg) if p is not None)
                        what = f"{count} and {stars}" if positional else \
                            f"no named parameter, only {stars}"
                        raise self.src.error(
                            self.node, f"wrt={w} is out of range: {self.parsed.name} has "
                            f"{what}, which cannot be differentiated",
                            "differentiate a function whose parameters are named (a "
                            "functools.wraps wrapper: the function it wraps, __wrapped__)")
                    raise self.src.error(self.node, f"wrt={w} is out of range: "
                                         f"{self.parsed.name} has {count}")
                w = positional[w]
            if w in starred:
                raise self.src.error(self.node, f"cannot differentiate with respect to *{w}",
                                     "name a regular parameter")
            if w not in params:
                raise self.src.error(self.node, f"{self.parsed.name} has no parameter {w!r}",
                                     "wrt names a parameter: " + ", ".join(params))
            out.append(w)
        return out

    def _poison(self, stmt):
        # Bind whatever a failed statement assigns, so later statements report their own
        # problems instead of "used before assignment".
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                self.env[n.id] = self.names.fresh(n.id.strip("<>") or "_t")
                self.bound.add(self.env[n.id])

    def _bound_ssa(self, name) -> str:
        ssa = self._ssa(name)
        self.bound.add(ssa)
        return ssa

    def _ssa(self, name) -> str:
        """A fresh SSA name for ``name``: its own name first, then name_1, name_2, ..."""
        if name.startswith("<"):  # a pseudo-variable: the return value, a break flag
            base = ("_ret" if name == RETURN else "_aux" if name == AUX else
                    "_brk" if name.startswith("<break") else
                    "_done" if name.startswith("<done") else "_t")
            return self.names.fresh(base, numbered=base == "_t")
        ssa = name
        if name in self.bound or name in self.globals_used or name in RESERVED:
            ssa = self.names.fresh(name)
        self.stale.pop(ssa, None)  # (bound again: a loop's body lowered a second time)
        return ssa

    def _bind(self, name, val: Val, node):
        if val.expr is None and isinstance(val.code, ast.Constant):
            val = self._constant(val.code)  # axis=None, mode="valid": run, no gradient
        if name != RETURN and containers.bind(self, name, val):
            return
        self._need_number(val, node)
        if name == RETURN and isinstance(val.code, ast.Name) and val.code.id in self.bound:
            self.env[name] = val.code.id  # return x: the result is x itself, not a copy
            return
        ssa = self._ssa(name)
        self.bound.add(ssa)
        self._define(ssa, val)
        self.env[name] = ssa

    def _define(self, ssa, val: Val):
        last = self.eqns[-1] if self.eqns else None
        if isinstance(last, Eqn) and last.kind in ("array", "const", "stop_gradient") and \
                isinstance(val.code, ast.Name) and val.code.id == last.out and \
                last.out in self.temps:
            # x = np.sum(y): name the array equation itself rather than copy its temporary.
            self.names.taken.discard(last.out)
            self.temps.discard(last.out)
            self.memo = {k: ssa if v == last.out else v for k, v in self.memo.items()}
            self.eqns[-1] = dataclasses.replace(last, out=ssa)
            if last.out in self.active:
                self.active.add(ssa)
            if last.out in self.alias:
                self.alias[ssa] = self.alias[last.out]
            if last.out in self.arrays:
                self.arrays.add(ssa)
            if last.out in self.ndims:
                self.ndims[ssa] = self.ndims[last.out]
            if last.out in self.lists:
                self.lists.add(ssa)
            if last.out in self.holds:
                self.holds[ssa] = self.holds[last.out]
            self._forget(last.out)
        else:
            self._emit_elementwise(ssa, val)
            if isinstance(val.code, ast.Name):  # b = a: one array, two names
                self.alias[ssa] = self._root(val.code.id)
                if self._is_list(val.code.id):  # ys = [f(x) for x in xs]
                    self.lists.add(ssa)

    def _roots(self, name) -> set[str]:
        """Every array ``name`` may be, after branches and loops (``_root`` of each)."""
        roots, todo, seen = set(), [name], set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            todo.extend(self.maybe.get(n, ()))
            if n in self.alias and self.alias[n] != n:
                todo.append(self.alias[n])
            else:
                roots.add(n)
        return roots

    def _root(self, name) -> str:
        while name in self.alias and self.alias[name] != name:
            name = self.alias[name]
        return name


# Python's recursion limit while lowering, which recurses as the code nests (see lower).
_RECURSION_LIMIT = 20_000


def _count(n: int, what: str) -> str:
    """``1 positional parameter``, ``2 positional parameters``."""
    return f"{n} {what}" if n == 1 else f"{n} {what}s"
