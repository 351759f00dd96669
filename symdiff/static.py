"""A Python file's path -> its top-level functions and module-level names, read without running it.

The CLI differentiates the functions of a file it must not execute. The modules it imports
from its own folder are read the same way, recursively, never run (see ``static_loader``); the
others (numpy, math, ...) are imported, from where they are installed; module-level
constants are evaluated from their syntax (literals, arithmetic, and NumPy constructors of
literals); every ``def`` becomes a ``parse.FunctionSource``. A name that cannot be resolved
this way is recorded with the reason, so a function that reads it gets a located error.

What Python would do that this reading does not follow makes a name unresolved rather than
wrong: a name changed in place at module level (``W[0] = 5.0``, ``W += 1`` on an array,
``L.append(...)``), and every name that shares its data; a decorated ``def`` (the decorator
could change what it computes) and an ``async def``, which are skipped as functions to
differentiate. ``if __name__ == "__main__":`` blocks do not run on import and are not read;
in ``try: import a / except ImportError: import b`` the handler is read when an import of the
``try`` block fails. Parameter defaults are evaluated where the ``def`` is, as Python does:
where a name a default reads is set again later, ``Module.defaults`` keeps the value the
``def`` saw.

The reading is in stages, one module each: ``static_source`` (a file's bytes -> its lines and
syntax tree), ``static_loader`` (FILE -> the local modules it imports, each read once),
``static_reader`` (one file's module-level statements -> the names they bind, with
``static_values`` evaluating constants and ``static_statements`` telling what a statement
binds or changes in place), ``static_records`` (what a reading gives: ``Module`` and the
records it holds) and ``static_unresolved`` (a function -> where it reads what the reading
left unresolved).
"""

from __future__ import annotations

import dataclasses
import os
import sys

from .static_loader import Loader, script_path
from .static_records import DefTime, Module, Skipped, StaticModule, Unresolved
from .static_source import source_tree
from .static_unresolved import unresolved_message, unresolved_problems

STDIN = "<stdin>"  # the name of source read from standard input (`symdiff -`), as Python's

# What the command line uses of a static reading; the stages' modules hold the rest.
__all__ = ["STDIN", "DefTime", "Module", "Skipped", "StaticModule", "Unresolved", "read_module",
           "script_path", "unresolved_message", "unresolved_problems"]


def read_module(path: str) -> Module:
    """Read the file at ``path`` (``-``: the source on standard input, named ``STDIN``)
    without running it; raise SymdiffError if it does not parse (or is not text in its
    encoding).

    The modules it imports that are found in its directory (where ``python FILE`` looks
    first) are read the same way, recursively, never imported: see ``static_loader.Loader``.

    >>> import tempfile, os
    >>> import numpy as np
    >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    ...     _ = f.write("import numpy as np\\nSCALE = 2.0\\ndef f(x):\\n    return SCALE * x\\n")
    >>> m = read_module(f.name)
    >>> list(m.functions), m.namespace.lookup("SCALE"), m.namespace.lookup("np") is np
    (['f'], 2.0, True)
    >>> os.remove(f.name)
    """
    if path == "-":  # (local modules are then looked for in the current directory)
        data = sys.stdin.buffer.read()
        filename = path = STDIN
    else:
        with open(path, "rb") as fp:
            data = fp.read()
        filename = os.path.abspath(path)
    source, tree = source_tree(filename, data)
    loader = Loader(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    module = loader.read(path, source, tree, stem if stem.isidentifier() else None, top=True)
    module = dataclasses.replace(module, notes=tuple(loader.notes))
    loader.records[source.filename] = module
    return module
