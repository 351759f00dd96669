"""Command-line arguments -> gradients of a file's functions: printed, exported or checked.

``symdiff FILE`` reads FILE without running it (see ``symdiff.static``) and prints the
source of ``grad_<name>`` for each top-level function, exactly the text that
``grad(f, wrt=(...every parameter...))`` compiles; with ``--order 2``, their Hessians.
Exit status: 0 when all went well, 1 when a function could not be differentiated or a
check disagreed, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import importlib.machinery
import importlib.util
import inspect
import itertools
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import kinds
from .errors import Problem, SymdiffError

_EPILOG = """\
By default every top-level function is differentiated with respect to every parameter
(not *args/**kwargs) and its gradient returns a tuple, as grad(f, wrt=(...)) does;
--wrt x gives one gradient, as grad(f, wrt="x"), and --wrt x,y a tuple. A parameter the
function uses only as an integer (an index x[i], a slice bound, range(n), np.zeros(n),
axis=k; never rebound, not annotated or defaulted as a float) is left out, with a note.
A function that cannot be differentiated is skipped with a one-line note, unless -f
names it; the exit status is 1 then, or when no function could be differentiated.

--check imports and runs FILE (nothing else does), then compares each gradient with
central differences at 3 random points (seeded), with every stop_gradient argument frozen
at its value at the point. A function reading module data only running FILE sets
(DATA = rng.normal(...)) is then built from FILE as it ran, as grad() builds it (not
with --output, whose module would hold that data as a constant: it stays skipped).
Values have magnitudes uniform in [0.5, 1.5] with random signs;
where the function is not finite there, positive values; then values in [0.1, 0.9].
Parameters are scalars unless --shape x=3,4 says otherwise, or the annotation is a shape
(x: "(3, 4)") or the default is an array (x=np.ones((3, 4))). A parameter that is not
differentiated takes its default if it has one (one used only as an integer and without
a default is 1), and so does one with an integer default (n=3), whose gradient is not
compared: when that leaves nothing to compare (--wrt n),
the check says "nothing to compare" and does not fail. The check fails where
|g - n| > 1e-5 * max(1, |g|, |n|) + 10 * eps * |f| / h, h being the step (1e-6 * max(1, |x|)):
the second term is the rounding error of the differences where |f| is large. The error
printed is |g - n| / (max(1, |g|, |n|) + 10 * eps * |f| / (h * 1e-5)), over 1e-5 when it fails.

Reading FILE without running it: the modules it imports from its own folder are read the
same way, recursively, never imported (a file there named like a standard module,
wave.py, is neither read nor run: the name is the standard module); other modules
(NumPy, SciPy, what is installed) are imported. A module-level name changed in place
(W[0] = 1.0, W += 1 on an array, L.append(...)), and every name sharing its data, is not
known, so a function reading it gets an error; so is a decorated function (its decorator
could change what it computes). Decorated and async functions are skipped, with a note.
The body of `if __name__ == "__main__":` is not read; in `try: import a` / `except
ImportError: import b`, the except block is read when an import in the try block fails.
A FILE that is not text in its encoding (UTF-8 unless a coding line says otherwise) is
an error, exit 1.
FILE - reads the source from standard input (named <stdin> in messages; local modules
are looked for in the current directory); --check, --output and audit need a file.
--output refuses to overwrite FILE or any file it did not write itself, and to define one
name twice (a name that means two things to two gradients, a name of the file's that is
also grad_<name>).

--order 2 (or --hessian) prints Hessians instead of gradients, in the same --wrt
parameters. --format math or latex: the second partial derivatives as closed formulas
where the function has small ones (straight-line code of scalars), each mixed one once
(d^2f/dx dy, which is d^2f/dy dx), stop_gradient a constant at every order. Otherwise,
and with --format source, the programs symdiff computes them with (reverse over forward
mode), written from the source without running FILE: for scalar parameters, one
grad_df_dx per parameter x, the gradient of df/dx (row x of the Hessian); with an array
parameter, grad_jvp_f, whose value is the Hessian times the tangents (a Hessian-vector
product). Parameters are scalars unless a shape says otherwise, as for --check.
--check --order 2 compares symdiff.hessian of each function with central differences
of symdiff.grad at the same random points, with the same tolerance; where the function
calls stop_gradient, the gradient differenced is central differences of the function
with stop_gradient frozen (steps 1e-4, rounding term 10 * eps * |f| / (h1 * h2)).
--output does not write Hessians.

symdiff audit FILE: what each stop_gradient of each function blocks, at a random point
drawn as --check draws them (FILE is run); exit 1 where one has no effect or makes a
gradient zero. See symdiff audit --help.

symdiff coverage: the table of the functions and methods symdiff differentiates.
symdiff cache info | symdiff cache clear: show or empty the disk cache of gradients.

exit status: 0 all went well, 1 a function failed or a check disagreed, 2 usage error
"""

_checked_modules = itertools.count()


@dataclass(frozen=True)
class _Built:
    name: str
    function: object  # parse.FunctionSource
    ir: object  # lower.IR
    source: str
    as_tuple: bool
    checked: str = ""  # the source --check runs (built for scalars where nothing says more)


def main(argv: list[str] | None = None) -> int:
    """Run the command line on ``argv`` (default ``sys.argv[1:]``); return the exit status.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
    ...     _ = f.write("def f(x, y):\\n    return 3.0 * x * y\\n")
    >>> main([f.name, "--format", "math", "--ascii"])
    f(x, y) = 3*x*y
    df/dx = 3*y
    df/dy = 3*x
    0
    >>> os.remove(f.name)
    """
    from .static import unresolved_problems

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["cache"]:
        return _cache_command(argv[1:])
    if argv[:1] == ["coverage"] and not os.path.isfile("coverage"):
        return _coverage_command(argv[1:])
    if argv[:1] == ["audit"] and not os.path.isfile("audit"):
        return _audit_command(argv[1:])
    parser = _parser()
    opts = parser.parse_args(argv)
    wrt = _parse_wrt(opts.wrt, parser)
    shapes = _parse_shapes(opts.shape, parser)
    if shapes and not (opts.check or opts.order == 2):
        parser.error("--shape gives the shapes of the points --check draws (and of --order "
                     "2's programs): add --check, or leave it out")
    if opts.file == "-" and (opts.check or opts.output):
        parser.error(f"{'--check' if opts.check else '--output'} needs FILE as a file: "
                     f"{'it runs FILE' if opts.check else 'the module it writes reads FILE'}; "
                     "standard input (-) can only be printed from: save it to a file first")
    if opts.output and opts.order == 2:
        parser.error("--output writes gradients; it does not write Hessians (--order 2): "
                     "print their source instead (--format source)")
    if opts.output and _same_file(opts.output, opts.file):
        parser.error(f"--output {opts.output} is FILE itself: it would overwrite the source")
    if opts.output and os.path.isfile(opts.output) and not _exported(opts.output):
        parser.error(f"--output {opts.output} exists and was not written by symdiff: it would "
                     "be overwritten (remove it first, or write to another file)")
    module, names = _read(opts, parser)
    if module is None:
        return 1
    opts.file = module.path  # (<stdin> for -)
    for note in module.notes:
        _report(note, opts.file, "note: ")
    if not names:
        names = list(module.functions)
        if not names and not module.skipped:
            print(f"{opts.file}: note: it defines no top-level function to differentiate "
                  "(methods and lambdas are not read)", file=sys.stderr)
        for name, skipped in module.skipped.items():
            _skip_note(module.source.problem(skipped.node, skipped.reason), name,
                       skipped.node, module, opts.file)

    _known_shapes(shapes, [module.functions[n] for n in names], parser)
    built, failed, unnamed = [], False, []
    ran = []  # FILE as --check ran it, once
    for name in names:
        fs = module.functions[name]
        spec = wrt if wrt is not None else (_default_wrt(fs, module, opts.file), True)
        if not spec[0]:
            if opts.function:
                _report(module.source.problem(fs.node, f"{name} has no parameter to "
                                              "differentiate"), opts.file)
                failed = True
            else:
                unnamed.append((module.source.problem(fs.node, "it has no parameter to "
                                                      "differentiate"), name, fs.node, False))
            continue
        try:
            shown = _kinds(fs.node, shapes, kinds.FLOAT64, spec[0])
            # (an exported module is called with anything: its build is the generic one)
            ir, source = _build(fs, module, *spec, None if opts.output else shown)
            checked = _kinds(fs.node, shapes, kinds.FLOAT, spec[0])
            if opts.check and checked != shown and opts.order == 1:
                checked = _build(fs, module, *spec, checked)[1]
            else:
                checked = source
        except SymdiffError as e:
            # The library's "a bug in symdiff" for a RecursionError it did not foresee is,
            # here, an expression too deep: say so, where.
            cause = e.__cause__ or e.__context__
            too_big = not e.problems and isinstance(cause, (RecursionError, MemoryError))
            error = _too_big(module, fs.node, f"cannot differentiate {name}", cause) \
                if too_big else e
        except (RecursionError, MemoryError) as e:
            error = _too_big(module, fs.node, f"cannot differentiate {name}", e)
        else:
            built.append(_Built(name, fs, ir, source, spec[1], checked))
            continue
        if opts.check and not opts.output and unresolved_problems(fs, module):
            # --check runs FILE anyway: a name the reading could not know (DATA computed
            # when the file runs) is then known, and the function is built as grad() would.
            # (Not to --output: its module would hold that run's data as a constant.)
            try:
                from_run = _built_from_run(module, fs, spec, shapes, opts.order, ran)
            except SymdiffError as e:
                error = e
            except (RecursionError, MemoryError) as e:
                error = _too_big(module, fs.node, f"cannot differentiate {name}", e)
            else:
                if from_run is not None:
                    built.append(from_run)
                    continue
        if name in opts.function:
            _report(error, opts.file)
            failed = True
        else:
            unnamed.append((error, name, fs.node, True))
    # A file's demo code and helpers need not be differentiable: only a function named
    # with -f must be; when nothing at all could be, each reason is given in full.
    for error, name, node, failure in unnamed:
        if built or not failure:  # (no parameter to differentiate is not a failure)
            _skip_note(error, name, node, module, opts.file)
        else:
            _report(error, opts.file)
            failed = True

    if opts.format is not None or not (opts.check or opts.output):
        unicode = not opts.ascii and sys.stdout.isatty() and "utf" in (
            getattr(sys.stdout, "encoding", "") or "").lower()
        if opts.order == 2:
            text, failed_here = _render_second(module, built, opts.format or "source",
                                               unicode, shapes)
            failed |= failed_here
        else:
            text = _render(built, opts.format or "source", unicode)
        if text:
            print(text, end="" if text.endswith("\n") else "\n")
    if opts.output:
        failed |= not _write(module, built, opts.output, argv)
    if opts.check:
        failed |= not _check(module, built, shapes, opts.order, ran)
    return 1 if failed else 0


def _too_big(module, node, what, e):
    """A located problem for RecursionError or MemoryError, which no traceback must show."""
    if isinstance(e, RecursionError):
        return module.source.problem(node, f"{what}: an expression in it is nested too "
                                     "deeply for symdiff (RecursionError)",
                                     "split the expression into several statements")
    return module.source.problem(node, f"{what}: out of memory (MemoryError)",
                                 "smaller arrays or shapes")


def _exported(path) -> bool:
    """Whether the file at ``path`` is a module symdiff exported, by the start of its
    docstring, or empty: overwriting it loses nothing."""
    try:
        with open(path, "rb") as fp:
            head = fp.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return not head or head.startswith('"""Gradients of the functions in ') and (
        ", generated by symdiff" in head)


def _same_file(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def _report(what, path, label="error: "):
    """Print a SymdiffError or a Problem to stderr, naming FILE as it was given."""
    if isinstance(what, SymdiffError) and not what.problems:
        print(what.format(label), file=sys.stderr)
        return
    full = os.path.abspath(path)
    problems = what.problems if isinstance(what, SymdiffError) else (what,)
    print("\n".join((dataclasses.replace(p, filename=path) if p.filename == full else p)
                    .format(label) for p in problems), file=sys.stderr)


def _cache_command(argv) -> int:
    """``symdiff cache info`` and ``symdiff cache clear``: the disk cache of gradients."""
    from . import cache

    parser = argparse.ArgumentParser(
        prog="symdiff cache", description="Show or clear the disk cache of gradients "
        "($SYMDIFF_CACHE_DIR, else the user cache directory; SYMDIFF_CACHE_DIR=off "
        "disables it).")
    parser.add_argument("action", choices=["info", "clear"])
    opts = parser.parse_args(argv)
    if opts.action == "info":
        print(cache.info())
    else:
        print(f"removed {cache.clear()} entries")
    return 0


def _coverage_command(argv) -> int:
    """``symdiff coverage``: the functions and methods symdiff differentiates (the table the
    README has), which error hints send the user to."""
    from .coverage import table

    argparse.ArgumentParser(
        prog="symdiff coverage", description="Print the table of the NumPy and math "
        "functions and array methods symdiff differentiates (Markdown), as the README has "
        "it.").parse_args(argv)
    print(table())
    return 0


def _audit_command(argv) -> int:
    """``symdiff audit FILE``: each function's stop_gradient calls audited (``audit``) at a
    point drawn as --check draws them; exit 1 where one looks like a bug."""
    import json

    from .audit import audit
    from .check import _integer, draw_point

    parser = argparse.ArgumentParser(
        prog="symdiff audit", description="Audit the stop_gradient calls of the functions in "
        "a Python file: what each depends on and how much of the gradient it blocks, at a "
        "random point drawn as --check draws them (FILE is run, as --check runs it). Exit "
        "status 1 where a stop_gradient has no effect or makes a gradient zero.")
    parser.add_argument("file", metavar="FILE", help="a Python file")
    parser.add_argument("--function", "-f", metavar="NAME", action="append", default=[],
                        help="audit this function (repeatable; default: all)")
    parser.add_argument("--wrt", metavar="x,y", help="the parameters the gradient is taken "
                        "with respect to (default: those without an integer default)")
    parser.add_argument("--shape", metavar="x=3,4", action="append", default=[],
                        help="the shape of parameter x at the point (repeatable)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--version", action="version", version=_version())
    opts = parser.parse_args(argv)
    wrt = _parse_wrt(opts.wrt, parser)
    shapes = _parse_shapes(opts.shape, parser)
    if opts.file == "-":
        parser.error("audit runs FILE, as --check does: standard input (-) cannot be run; "
                     "save it to a file first")
    module, names = _read(opts, parser)
    if module is None:
        return 1
    _known_shapes(shapes, [module.functions[n] for n in names or module.functions], parser)
    live = _run(module, "audit")
    if live is None:
        return 1
    reports, failed, unnamed = [], False, []
    for name in names or module.functions:
        fs = module.functions[name]
        fn = _live_function(module, live, fs, "audit")
        if fn is None:
            failed = True
            continue
        params = inspect.signature(fn).parameters
        given = tuple(p for p in wrt[0] if p in params) if wrt is not None else tuple(
            p for p in _default_wrt(fs, module, opts.file) if not _integer(params[p]))
        with np.errstate(all="ignore"):  # (points where fn is not finite are drawn again)
            point = draw_point(fn, given, shapes, namespaces=_local_namespaces(module),
                               integers=_counts(fs.node, given)) \
                if given else "it has no parameter to differentiate"
        try:
            if isinstance(point, str):
                raise SymdiffError(f"cannot audit {name}: {point}")
            reports.append(audit(fn, *point[0], wrt=given, **point[1]))
        except SymdiffError as e:
            if names:  # named: a failure; else skipped, with a note
                _report(e, opts.file)
                failed = True
            else:
                unnamed.append((e, name, fs.node))
    for error, name, node in unnamed:  # as main: in full when nothing could be audited
        if reports:
            _skip_note(error, name, node, module, opts.file)
        else:
            _report(error, opts.file)
            failed = True
    if opts.format == "json":
        print(json.dumps([r.as_dict() for r in reports], indent=2))
    else:
        print("\n\n".join(map(str, reports)))
    return 1 if failed or any(r.likely_bugs for r in reports) else 0


def _read(opts, parser):
    """``(module, names)``: FILE read without running it, and the functions ``-f`` names,
    each a top-level function of it that can be read (else a usage error); ``(None, [])``
    where FILE does not parse (said)."""
    from .static import read_module

    try:
        module = read_module(opts.file)
    except OSError as e:
        parser.error(f"cannot read {opts.file}: {e.strerror or e}")
    except SymdiffError as e:
        _report(e, opts.file)
        return None, []
    names = list(dict.fromkeys(opts.function))
    for name in names:
        if name in module.skipped:  # an async or decorated def
            skipped = module.skipped[name]
            where = module.source.problem(skipped.node, "")
            parser.error(f"{module.path}:{where.line}:{where.col}: cannot differentiate "
                         f"{name}: {skipped.reason}")
    unknown = [n for n in names if n not in module.functions]
    if unknown:
        parser.error(f"{module.path} has no top-level function {unknown[0]!r} (it defines: "
                     f"{', '.join(module.functions) or 'none'})")
    return module, names


def _default_wrt(fs, module, path) -> tuple[str, ...]:
    """Every parameter of ``fs`` but those it uses only as integers (indices, counts), each
    said in a note: differentiating in one fails (x[i]) or gives a meaningless zero."""
    from .integer_uses import integer_only

    counts = integer_only(fs.node)
    for p in counts:
        print(f"{path}:{fs.node.lineno}: note: {fs.name}: {p} is used only as an integer (an "
              "index, a count): not differentiated; --wrt names it to differentiate it "
              "anyway", file=sys.stderr)
    return tuple(p for p in _parameters(fs.node) if p not in counts)


def _known_shapes(shapes, functions, parser):
    """A usage error where --shape names no parameter of the functions: a typo would check
    a scalar and say ok."""
    params = {p for fs in functions for p in _parameters(fs.node)}
    for shape_of in shapes:
        if shape_of not in params:
            parser.error(f"--shape {shape_of}=...: no function differentiated has a parameter "
                         f"{shape_of!r} (they have: {', '.join(sorted(params)) or 'none'})")


def _version() -> str:
    from . import __version__

    return f"symdiff {__version__}"


def _skip_note(error, name, node, module, path):
    """One line on stderr for a function not differentiated (not named with -f): where
    and the first line of why, ``FILE:line: note: skipped NAME: why``."""
    if isinstance(error, SymdiffError) and error.problems:
        first = error.problems[0]
        where = path if first.filename == os.path.abspath(path) else first.filename
        line, why = first.line, first.message
    elif isinstance(error, Problem):
        where, line, why = path, error.line, error.message
    else:
        where, line, why = path, node.lineno, str(error)
    why = why.strip().splitlines()[0] if why.strip() else type(error).__name__
    for verb in ("audit", "differentiate"):  # (said by "skipped NAME")
        why = why.removeprefix(f"cannot {verb} {name}: ")
    print(f"{where}:{line}: note: skipped {name}: {why}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symdiff", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Print the gradients (or Hessians) of the functions in a Python file as\n"
                    "NumPy source or as formulas, check them, or export them to a module.\n"
                    "FILE is read, not run (except by --check).",
        epilog=_EPILOG)
    parser.add_argument("file", metavar="FILE", help="a Python file (-: read the source "
                        "from standard input)")
    parser.add_argument("--function", "-f", metavar="NAME", action="append", default=[],
                        help="differentiate this function (repeatable; default: all)")
    parser.add_argument("--version", action="version", version=_version())
    parser.add_argument("--wrt", metavar="x,y",
                        help="the parameters to differentiate with respect to (default: "
                             "all but those used only as integers)")
    parser.add_argument("--format", choices=("source", "math", "latex"),
                        help="print the gradient source (default), closed formulas of the "
                             "partial derivatives where there are small ones, or LaTeX")
    parser.add_argument("--ascii", action="store_true",
                        help="--format math in ASCII (the default when not on a terminal)")
    parser.add_argument("--check", action="store_true",
                        help="run FILE and compare each gradient with central differences")
    parser.add_argument("--shape", metavar="x=3,4", action="append", default=[],
                        help="the shape of parameter x in --check and --order 2 "
                             "(repeatable)")
    parser.add_argument("--output", "-o", metavar="OUT.py",
                        help="write the gradients to a module that needs only NumPy")
    parser.add_argument("--order", type=int, choices=(1, 2), default=1,
                        help="2: print (or --check) Hessians, the second derivatives, "
                             "instead of gradients")
    parser.add_argument("--hessian", dest="order", action="store_const", const=2,
                        help="the same as --order 2")
    return parser


def _parse_wrt(text, parser):
    """``x`` -> one gradient, as ``grad(f, wrt="x")``; ``x,y`` (or ``x,``) -> a tuple."""
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names or not all(n.isidentifier() for n in names):
        parser.error(f"--wrt {text!r}: give parameter names separated by commas, e.g. x,y")
    return names, "," in text


def _parse_shapes(items, parser) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for item in items:
        name, eq, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("(", "").replace(")", "").split(",")
                          if d.strip())
        except ValueError:
            shape = None
        if not eq or not name.strip().isidentifier() or shape is None or any(
                d < 0 for d in shape):
            parser.error(f"--shape {item!r}: write NAME=DIMS, e.g. x=3,4 (x=, for a scalar)")
        shapes[name.strip()] = shape
    return shapes


def _parameters(node) -> tuple[str, ...]:
    a = node.args
    return tuple(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs))


def _kinds(node, shapes, unknown, wrt=None) -> dict:
    """The kinds a function read from a file is built for: a parameter's --shape, else its
    annotation (a shape, float, int, bool), else its default's (a number, or an array
    made by a call), else an int where it is used only as one and not in ``wrt`` (as
    --check draws it), else ``unknown`` (a float64 array to print; a float to --check,
    which draws floats where nothing says more)."""
    from .check import INTEGER
    from .parse import NOT_LITERAL, default_nodes, literal

    counts = _counts(node, wrt)

    a = node.args
    positional = [*a.posonlyargs, *a.args]
    defaults = default_nodes(a)
    out = {}
    for p in (*positional, *a.kwonlyargs):
        dims = shapes.get(p.arg, _annotated_shape(p.annotation))
        value = literal(defaults[p.arg]) if p.arg in defaults else NOT_LITERAL
        if dims is not None:
            out[p.arg] = kinds.Array("float64", len(dims)) if dims else kinds.FLOAT
        elif p.annotation is not None and not isinstance(
                found := kinds.annotated(ast.unparse(p.annotation).strip("'\"")), kinds.Array):
            if found is not None:  # a number; None: any kind (dict, a class...)
                out[p.arg] = found
        elif value is not NOT_LITERAL:
            out[p.arg] = kinds.kind(value)
        elif isinstance(defaults.get(p.arg), ast.Call):  # np.ones((3, 4)), say
            out[p.arg] = kinds.FLOAT64
        elif p.arg in counts:
            out[p.arg] = kinds.kind(INTEGER)
        else:
            out[p.arg] = unknown
    return out


def _counts(node, wrt) -> tuple[str, ...]:
    """The parameters used only as integers that are not differentiated (in ``wrt``)."""
    from .integer_uses import integer_only

    return () if wrt is None else tuple(p for p in integer_only(node) if p not in wrt)


def _annotated_shape(note) -> tuple[int, ...] | None:
    """The shape an annotation writes (``x: (3, 4)``, ``x: "(3, 4)"``, ``x: 3``), or None."""
    if note is None:
        return None
    try:
        value = ast.literal_eval(note)
        if isinstance(value, str):
            value = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, tuple) and all(isinstance(n, int) and not isinstance(n, bool)
                                        for n in value):
        return value
    return None


def _build(fs, module, wrt, as_tuple, kinds=None):
    """``build_source`` on a function read from a file; where it reads a name that could not
    be resolved without running the file, the problem says so (not just "not defined")."""
    from .api import build_source
    from .parse import parse
    from .static import unresolved_problems

    problems = unresolved_problems(fs, module)
    try:
        ir, source = build_source(parse(fs), wrt, False, as_tuple, kinds)
    except SymdiffError as e:
        if not e.problems and not problems:
            raise
        mine = {(p.filename, p.line, p.col) for p in problems}
        problems += [_explained(p, module) for p in e.problems
                     if (p.filename, p.line, p.col) not in mine]
        problems.sort(key=lambda p: (p.filename != module.source.filename, p.filename,
                                     p.line, p.col))
        raise SymdiffError(problems=tuple(problems)) from None
    if problems:
        raise SymdiffError(problems=tuple(problems))
    return ir, source


def _explained(problem, module):
    from .static import unresolved_message

    home = module.modules.get(problem.filename, module)
    for name, unresolved in home.unresolved.items():
        if problem.filename == home.source.filename and problem.message == (
                f"name {name!r} is not defined"):
            message, hint = unresolved_message(name, unresolved)
            return dataclasses.replace(problem, message=message, hint=hint)
    return problem


def _render(built, fmt, unicode) -> str:
    if fmt == "source":
        return "\n\n".join(b.source for b in built)
    from .formula import formula

    blocks = []
    for b in built:
        closed, note = _closed(formula, b, fmt, unicode)
        blocks.append(closed if closed is not None else _program(b.name, note, b.source, fmt))
    return "\n\n".join(blocks)


def _closed(formulas, b, fmt, unicode) -> tuple[str | None, str]:
    """``(the formulas formulas(b.ir) prints as fmt, "")`` where they are closed, else
    ``(None, why not)``."""
    try:
        f = formulas(b.ir)
        if f.closed:
            return (f.pretty(unicode) if fmt == "math" else f.latex()), ""
        return None, f.note()
    except (RecursionError, MemoryError):  # SymPy recursing on a huge formula
        return None, "nested too deeply to print as a formula"


def _program(name, note, source, fmt) -> str:
    """A program shown where formulas are not: under a comment saying why (verbatim in
    LaTeX)."""
    if fmt == "latex":
        return f"% {name}: {note}:\n\\begin{{verbatim}}\n{source}\\end{{verbatim}}"
    return f"# {name}: {note}:\n\n{source}" if note else source


def _render_second(module, built, fmt, unicode, shapes) -> tuple[str, bool]:
    """The Hessians of the functions built: closed formulas where they are small (math,
    latex), else (and for source) the programs of the second derivatives. Also whether
    any program could not be written (reported)."""
    from .formula import hessian

    blocks, failed = [], False
    for b in built:
        note = ""
        if fmt != "source":
            closed, note = _closed(hessian, b, fmt, unicode)
            if closed is not None:
                blocks.append(closed)
                continue
        try:
            programs = _second_programs(b, module, shapes)
        except SymdiffError as e:
            _report(e, module.path)
            failed = True
            continue
        except (RecursionError, MemoryError) as e:
            _report(_too_big(module, b.function.node, f"cannot differentiate {b.name} "
                             "twice", e), module.path)
            failed = True
            continue
        blocks.append(_program(b.name, note, programs, fmt))
    return "\n\n".join(blocks), failed


def _second_programs(b, module, shapes) -> str:
    """The source of the second derivatives of a function read from the file, made as
    ``hessian`` makes them (reverse over forward mode) without running the file: the
    tangent program is written from the function's source, then differentiated as a
    function of the file. Parameters are scalars unless a shape says otherwise (as for
    --check). For scalars, one program per row: ``grad_df_dx``, the gradient of df/dx;
    with an array, one Hessian-vector product program, ``grad_jvp_f``."""
    from . import runtime
    from .api import build_source
    from .compile import free_names
    from .forward import tangent_program
    from .lower import lower
    from .parse import FunctionSource, Namespace, parse

    fs = b.function
    wrt = tuple(b.ir.wrt)
    shown = _kinds(fs.node, shapes, kinds.FLOAT, wrt)
    # Without its defaults (the kinds above read them): tangents, which have none, follow
    # the parameters in the tangent program's def.
    node = copy.copy(fs.node)
    node.args = copy.copy(node.args)
    node.args.defaults, node.args.kw_defaults = [], [None] * len(node.args.kw_defaults)
    fs = dataclasses.replace(fs, node=node)
    scalars = all(isinstance(shown.get(p), kinds.Number) for p in wrt)
    names = ", ".join(wrt)
    if scalars:
        rows = [(f"d{b.name}_d{a}", lower(parse(fs), (a,)), {a: "1.0"}) for a in wrt]
        head = (f"# The Hessian of {b.name} in ({names}): row a is grad_d{b.name}_da, the "
                f"gradient of d{b.name}/da")
    else:
        rows = [(f"jvp_{b.name}", lower(parse(fs), wrt), None)]
        head = (f"# The Hessian of {b.name} in ({names}): grad_jvp_{b.name}(...) is H @ "
                "the tangents (a Hessian-vector product); column j at the j-th basis "
                "tangent")
    out = [head]
    globals_ = dict(fs.namespace.globals)
    for name, ir, seeds in rows:
        tangent = tangent_program(ir, seeds, "tangent", name)
        if tangent.unreadable:  # (why its derivative cannot be taken, where)
            raise SymdiffError(problems=tangent.unreadable)
        globals_.setdefault(ir.np_alias, importlib.import_module("numpy"))
        for free in free_names(tangent.source):  # the runtime's, as compile_source gives
            if free.startswith("_") and hasattr(runtime, free):
                globals_.setdefault(free, getattr(runtime, free))
        globals_.update(tangent.globals)  # (stop_gradient, by the name it writes)
        program = FunctionSource(name, _at_lines_of(tangent.source, fs),
                                 fs.source, Namespace(globals_, fs.namespace.closure))
        dots = {t: shown.get(p, kinds.FLOAT64) for t, p in zip(
            tangent.params[len(ir.params):], tangent.tangents, strict=True)}
        out.append(build_source(parse(program), wrt, False, b.as_tuple or not scalars,
                                {**shown, **dots})[1])
    return "\n\n".join(out)


def _at_lines_of(source: str, fs) -> ast.FunctionDef:
    """The def of a tangent program of ``fs``, each statement given the line of FILE it
    comes from (the ``# line N`` comment on it or before it; the def's own line before
    any), so that its gradient's comments and errors name FILE's lines, as a gradient's
    do; a statement spans its whole line there."""
    first = fs.node.lineno
    lines, line = {}, first
    for number, text in enumerate(source.splitlines(), 1):
        found = re.search(r"  # line (\d+)$", text)
        line = int(found.group(1)) if found else line
        lines[number] = line
    node = ast.parse(source).body[0]
    for n in ast.walk(node):
        if hasattr(n, "lineno"):
            n.lineno = lines.get(n.lineno, first)
            n.end_lineno = max(n.lineno, lines.get(n.end_lineno, first))
        if isinstance(n, ast.stmt):
            text = fs.source.lines[n.lineno - 1].rstrip().encode() if (
                n.lineno <= len(fs.source.lines)) else b""
            n.col_offset = len(text) - len(text.lstrip())
            n.end_col_offset = len(text)
    node.lineno = first
    return node


def _write(module, built, out, argv) -> bool:
    from .export import export_module

    if not built:
        print(f"{module.path}: error: nothing to write to {out}: no function was "
              "differentiated", file=sys.stderr)
        return False
    command = "symdiff " + " ".join(shlex.quote(a) for a in argv)
    try:
        text = export_module(module, [(b.name, b.source, b.ir) for b in built], command)
        Path(out).write_text(text, encoding="utf-8")  # as Python reads source files
    except SymdiffError as e:
        _report(e, module.path)
        return False
    except (RecursionError, MemoryError) as e:
        print(f"{module.path}: error: cannot export to {out}: {type(e).__name__}",
              file=sys.stderr)
        return False
    except OSError as e:
        print(f"{out}: error: cannot write: {e.strerror or e}", file=sys.stderr)
        return False
    return True


def _built_from_run(module, fs, spec, shapes, order, ran):
    """``fs`` built from the function FILE defines once run (``_run_once``), as ``grad``
    builds it: where the static reading refused a name the running file sets. None when
    the file raised or does not define it as a function (said)."""
    from .api import build_source
    from .parse import FunctionSource, parse

    live = _run_once(module, ran)
    fn = None if live is None else _live_function(module, live, fs, "check")
    if fn is None:
        return None
    parsed = parse(fn)
    fs = FunctionSource(parsed.name, parsed.node, parsed.source, parsed.namespace)
    shown = _kinds(fs.node, shapes, kinds.FLOAT64, spec[0])
    ir, source = build_source(parsed, spec[0], False, spec[1], shown)
    checked = _kinds(fs.node, shapes, kinds.FLOAT, spec[0])
    if checked != shown and order == 1:
        checked = build_source(parsed, spec[0], False, spec[1], checked)[1]
    else:
        checked = source
    return _Built(fs.name, fs, ir, source, spec[1], checked)


def _run_once(module, ran):
    """FILE run for --check (``_run``), the first time only: ``ran`` keeps what it gave."""
    if not ran:
        ran.append(_run(module, "--check"))
    return ran[0]


def _check(module, built, shapes, order=1, ran=None) -> bool:
    """Run FILE, then check each gradient (the text printed, compiled in FILE's namespace),
    or with ``order`` 2 each Hessian (``symdiff.hessian`` of the function FILE defines)."""
    from .check import check_gradient
    from .compile import compile_source
    from .parse import Namespace

    if not built:
        return True
    live = _run_once(module, [] if ran is None else ran)
    if live is None:
        return False
    ok = True
    for b in built:
        fn = _live_function(module, live, b.function, "check")
        if fn is None:
            ok = False
            continue
        if order == 2:
            ok &= _check_second(module, b, fn, shapes)
            continue
        names = _live_names(b.ir, module, Namespace(fn.__globals__))
        try:
            compiled, _ = compile_source(b.checked, "grad_" + b.name, names, b.ir.np_alias)
            # The defaults Python gave fn at its def, not their expressions' values now.
            compiled.__defaults__, compiled.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__
            gradient = compiled if b.as_tuple else _one_to_tuple(compiled)
            wrt = b.ir.given_wrt or b.ir.wrt
            result = check_gradient(fn, gradient, wrt, shapes,
                                    namespaces=_local_namespaces(module),
                                    integers=_counts(b.function.node, wrt))
        except (RecursionError, MemoryError) as e:
            _report(_too_big(module, b.function.node, f"cannot check {b.name}", e), module.path)
            ok = False
            continue
        if result.ok:
            print(result.summary())
            continue
        ok = False  # said once, as a located error (not also as a line of the summary)
        what = (f"cannot check the gradient of {b.name}: {result.problem}"
                if result.problem else
                f"the gradient of {b.name} disagrees with central differences: "
                f"relative error {result.error:.1e} in {result.where} (over "
                f"{result.points} random points)")
        _report(module.source.problem(b.function.node, what), module.path)
    return ok


def _run(module, why):
    """FILE run as a module of its own (as ``why``, --check or audit, says it is), or None
    when it raises (said)."""
    from .static import script_path

    name = f"__symdiff_check_{next(_checked_modules)}__"
    # Whatever FILE's suffix (a script such as ./train has none), as Python source.
    loader = importlib.machinery.SourceFileLoader(name, module.path)
    spec = importlib.util.spec_from_file_location(name, module.path, loader=loader)
    live = importlib.util.module_from_spec(spec)
    sys.modules[name] = live  # some code (dataclasses) looks its module up while it runs
    try:
        with script_path(module.path):
            spec.loader.exec_module(live)
    except (Exception, SystemExit) as e:
        print(f"{module.path}: error: {why} runs {module.path}, which raised "
              f"{type(e).__name__}: {e}", file=sys.stderr)
        return None
    finally:
        sys.modules.pop(name, None)
    return live


def _live_function(module, live, fs, what):
    """The function ``fs`` names as running FILE bound it (under @grad, its function), or
    None when that is not a function (said)."""
    from .api import Gradient

    fn = getattr(live, fs.name, None)
    fn = fn.fun if isinstance(fn, Gradient) else fn
    if not hasattr(fn, "__globals__"):
        _report(module.source.problem(fs.node, f"cannot {what} {fs.name}: after running "
                                      "the file it is not a function"), module.path)
        return None
    return fn


def _check_second(module, b, fn, shapes) -> bool:
    from .check import check_hessian

    try:
        wrt = b.ir.given_wrt or b.ir.wrt
        result = check_hessian(fn, wrt, shapes, namespaces=_local_namespaces(module),
                               integers=_counts(b.function.node, wrt))
    except (RecursionError, MemoryError) as e:
        _report(_too_big(module, b.function.node, f"cannot check {b.name}", e), module.path)
        return False
    if result.ok:
        print(result.summary())
        return True
    what = (f"cannot check the Hessian of {b.name}: {result.problem}" if result.problem else
            f"the Hessian of {b.name} disagrees with central differences of its gradient: "
            f"relative error {result.error:.1e} in {result.where} (over {result.points} "
            "random points)")
    _report(module.source.problem(b.function.node, what), module.path)
    return False


def _live_names(ir, module, live):
    """What each free name of the generated code refers to once FILE has run: FILE's own
    names as running it bound them; names of helpers from other modules as they are."""
    from .parse import MISSING, FunctionSource
    from .static import StaticModule

    names = {}
    for name, obj, *_ in ir.globals:
        if module.namespace.lookup(name) is obj and live.lookup(name) is not MISSING:
            obj = live.lookup(name)
        elif isinstance(obj, (FunctionSource, StaticModule)):
            # Read by a helper of a local module: that module, as running FILE imported it.
            for record in module.modules.values():
                if record is not module and record.namespace.lookup(name) is obj:
                    obj = getattr(_ran(record), name, obj)
                    break
        names[name] = obj
    return names


def _local_namespaces(module):
    """The globals of FILE's local modules as running FILE imported them."""
    return [vars(ran) for record in module.modules.values()
            if record is not module and (ran := _ran(record)) is not None]


def _ran(record):
    """The module running FILE imported from the file of a local module read, or None."""
    ran = sys.modules.get(record.namespace.globals.get("__name__", ""))
    file = getattr(ran, "__file__", None)
    return ran if isinstance(file, str) and _same_file(file, record.source.filename) else None


def _one_to_tuple(gradient):
    return lambda *args, **kwargs: (gradient(*args, **kwargs),)
