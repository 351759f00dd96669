"""What a static reading gives: a Module, its Unresolved names, Skipped defs, DefTime defaults.

``StaticModule`` is a local module as it was read (its names, none of its code run)."""

from __future__ import annotations

import ast
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import Problem
from .parse import FunctionSource, Namespace, Source


@dataclass(frozen=True)
class Unresolved:
    """A module-level name whose value is only known by running the file: where, and why.

    ``message`` and ``hint``, when set, are what is said where the name is read (instead of
    "set at module level by code symdiff does not run").
    """

    line: int
    col: int
    reason: str
    message: str = ""
    hint: str = ""


@dataclass(frozen=True)
class Skipped:
    """A top-level ``def`` that is not differentiated (async, decorated), and why."""

    node: ast.AST
    reason: str


@dataclass(frozen=True)
class DefTime:
    """A parameter default as Python evaluated it when its ``def`` ran, kept where that
    differs from what its expression gives at the end of the file (a name it reads is set
    again later). ``reason`` says why the value is not known (then ``value`` is None)."""

    node: ast.expr  # the default's expression
    value: object
    line: int  # of the def
    reason: str = ""


@dataclass(frozen=True)
class Module:
    """A file read statically.

    ``path`` is as given, ``source.filename`` the absolute path (as in co_filename);
    ``functions`` are its top-level ``def``s in file order; ``namespace`` resolves the
    names they read; ``imports`` holds, per imported name, the statement that binds it
    (for exporting); ``unresolved`` the names that could not be resolved; ``skipped`` the
    top-level defs that are not differentiated (async, decorated); ``defaults``, per
    function, the defaults whose value at the ``def`` is not what their expression gives at
    the end of the file; ``bindings`` the statement that last bound each name.
    """

    path: str
    source: Source
    functions: Mapping[str, FunctionSource]
    namespace: Namespace
    imports: Mapping[str, str]
    unresolved: Mapping[str, Unresolved]
    skipped: Mapping[str, Skipped] = field(default_factory=dict)
    defaults: Mapping[str, Mapping[str, DefTime]] = field(default_factory=dict)
    bindings: Mapping[str, ast.AST] = field(default_factory=dict)
    # Every file read for this one (it, and the local modules it imports), by absolute path.
    modules: Mapping[str, Module] = field(default_factory=dict, repr=False, compare=False)
    notes: tuple[Problem, ...] = ()  # what the reading could not follow as Python would


class StaticModule(types.ModuleType):
    """A local module (one found next to FILE) as the CLI reads it: its names are what its
    reading resolved (functions as ``FunctionSource``), and none of its code has run."""
