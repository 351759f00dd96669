"""The adjoint program before printing: its Lines and Blocks, and the Program they make.

``differentiate`` builds a Program of these; ``prune`` and ``emit`` read it. The helpers
here walk lines (``_flat``), rename the symbols of SymPy values (``_rename``) and list the
names lines read (``_loads``).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass

import sympy as sp

from .ir import IR
from .shapes import Facts


@dataclass(frozen=True)
class Line:
    """``target = value``, where value is an ``ast`` node, a SymPy expression or code text.

    An adjoint update sets ``accumulate`` (add to the target's current value) and ``like``
    (the variable whose shape the contribution must be summed down to, when broadcasting
    may have enlarged it). A line with an empty target is a statement (value) or a heading
    comment (value None) for the source line ``where``.
    """

    target: str
    value: object
    where: tuple[str, str] = ("", "")
    accumulate: bool = False
    like: str = ""
    comment: str = ""
    in_place: bool = False  # accumulate into the target's own array, or None (runtime._add_to)
    unflowed: bool = False  # accumulate into a target that may be None (runtime._plus)


@dataclass(frozen=True)
class Block:
    """A compound statement: ``header`` (``if c:``, ``for ...:``), its body and else part."""

    header: str
    body: tuple
    orelse: tuple = ()
    comment: str = ""


@dataclass(frozen=True)
class Program:
    """The generated gradient before printing."""

    ir: IR
    forward: tuple
    backward: tuple
    grads: tuple[tuple[str, str | None], ...]  # (parameter, its adjoint; None: zero)
    seed: str
    with_value: bool
    as_tuple: bool
    check: bool = True  # whether the call must check that the value is a scalar
    value: str = ""  # with_value: the name that keeps the value for the return
    shared: tuple[bool, ...] = ()  # per gradient: it may be someone else's array: copy it
    floats: tuple[str, ...] = ()  # parameters the backward sweep computes with (_as_float)
    lists: tuple[str, ...] = ()  # parameters it reads otherwise: a list as an array there
    aux: str = ""  # has_aux: the name that keeps aux for the return
    facts: Facts | None = None  # what is known of the values (shapes.facts)
    dtype: str = "float64"  # the float the derivatives compute in (float32 for float32)


def _flat(lines):
    """Every Line of ``lines``, inside blocks too."""
    for line in lines:
        if isinstance(line, Block):
            yield from _flat(line.body)
            yield from _flat(line.orelse)
        else:
            yield line


def _rename(lines, renamed: dict) -> list:
    """``lines`` with SymPy values' symbols replaced as ``renamed`` says."""
    out = []
    for line in lines:
        if isinstance(line, Block):
            out.append(dataclasses.replace(line, body=tuple(_rename(line.body, renamed)),
                                           orelse=tuple(_rename(line.orelse, renamed))))
        elif isinstance(line.value, sp.Basic):
            out.append(dataclasses.replace(line, value=line.value.xreplace(renamed)))
        else:
            out.append(line)
    return out


def _fold_settles(lines) -> list:
    """``dx = c`` then ``dx = _unbroadcast(dx, x)``: one line, ``dx = _unbroadcast(c, x)``."""
    out: list = []
    for line in lines:
        if isinstance(line, Line) and line.like and line.value == line.target:
            for i in range(len(out) - 1, -1, -1):
                prior = out[i]
                if isinstance(prior, Line) and prior.target == line.target:
                    if not prior.accumulate and not prior.like:
                        out[i] = dataclasses.replace(prior, like=line.like)
                        line = None
                    break
        if line is not None:
            out.append(line)
    return out


_IDENT = re.compile(r"[A-Za-z_]\w*")


def _loads(lines) -> list[str]:
    """Every name the backward lines read (a superset is fine: it is filtered later)."""
    out = []
    for line in lines:
        if isinstance(line, Block):
            if line.header.startswith("for "):
                # A for header binds its targets anew in each step: only what follows
                # " in " is read, and the body's reads of the targets are its own.
                bound, read = line.header[4:].split(" in ", 1)
                inner = set(_IDENT.findall(bound))
                out += _IDENT.findall(read) + [n for n in _loads(line.body) if n not in inner]
            else:
                out += _IDENT.findall(line.header) + _loads(line.body) + _loads(line.orelse)
            continue
        value = line.value
        if isinstance(value, sp.Basic):
            out += sorted(s.name for s in value.free_symbols)
        elif isinstance(value, ast.AST):
            out += [n.id for n in ast.walk(value) if isinstance(n, ast.Name)]
        elif isinstance(value, str):
            out += _IDENT.findall(value)
        if line.like:
            out += _IDENT.findall(line.like)
        if line.accumulate:
            out.append(line.target)
    return out


def _pack(names) -> str:
    return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


def _unpack(names) -> str:
    return _pack(names) if names else "_"

