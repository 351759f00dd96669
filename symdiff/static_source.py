"""A file's name and bytes -> its Source lines and syntax tree, or a located SymdiffError."""

from __future__ import annotations

import ast
import io
import re
import tokenize

from .errors import Problem, SymdiffError
from .parse import Source

# Characters no text file holds (tab, newlines and form feed aside): a file with them that
# does not decode is binary, and its lines are not echoed.
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f\x7f]")


def source_tree(filename: str, data: bytes) -> tuple[Source, ast.Module]:
    """A file's lines and syntax tree; a located SymdiffError if it is not Python source."""
    lines = _decode(filename, data)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"  # as linecache does: the lines must match a live function's
    # Named by its absolute path, as a function imported from it is (co_filename): the
    # generated docstring, which names it, is then the same text as grad() gives.
    source = Source(filename, tuple(lines))
    try:
        tree = ast.parse("".join(lines), source.filename)
    except SyntaxError as e:
        problem = Problem(source.filename, e.lineno or 1, e.offset or 1, e.msg,
                          (e.text or "").rstrip("\n"))
        raise SymdiffError(problems=(problem,)) from None
    except (RecursionError, MemoryError) as e:
        # Python cannot compile it either; say where the expression that is too deep is.
        line = _busiest_line(lines)
        problem = Problem(source.filename, line, 1, "an expression nested too deeply for "
                          f"Python's parser ({type(e).__name__}): Python cannot run this "
                          "file either", source.line_text(line)[:200],
                          "split the expression into several statements")
        raise SymdiffError(problems=(problem,)) from None
    return source, tree


def _busiest_line(lines) -> int:
    """The line with the most operators and brackets (read by tokens, which do not recurse):
    where an expression too deep to parse most likely is."""
    counts = [sum(line.count(c) for c in "+-*/(~[") for line in lines]
    return max(range(len(counts)), key=counts.__getitem__, default=0) + 1


def _decode(filename: str, data: bytes) -> list[str]:
    """The lines of a source file as ``tokenize.open`` (and so linecache) reads them: in the
    encoding its coding cookie or BOM declares, else UTF-8. A file that is not text in that
    encoding is a located error (not a traceback)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:  # a bad coding cookie, or no cookie and bytes that are not UTF-8
        if "invalid or missing encoding declaration" not in str(e):
            head = data.splitlines()[:2]
            line = next((k + 1 for k, text in enumerate(head) if b"coding" in text), 1)
            text = head[line - 1].decode("utf-8", "replace").lstrip("\ufeff") if head else ""
            raise SymdiffError(problems=(Problem(filename, line, 1, str(e.msg), text),)) \
                from None
        encoding = "utf-8"
    if b"\x00" in data:  # (Python refuses it too): binary data, whose bytes are not shown
        at = data.index(b"\x00")
        start = data.rfind(b"\n", 0, at) + 1
        col = len(data[start:at].decode(encoding, errors="replace")) + 1
        raise SymdiffError(problems=(Problem(
            filename, data.count(b"\n", 0, at) + 1, col, "the file is binary, not Python "
            "source: it holds a NUL byte", "", "give symdiff a Python source file"),)) from None
    try:
        data.decode(encoding)
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        end = data.find(b"\n", e.start)
        text = data[start:len(data) if end < 0 else end].decode(encoding, errors="replace")
        text = text.rstrip("\r")
        col = len(data[start:e.start].decode(encoding, errors="replace")) + 1
        binary = bool(_CONTROL.search(data.decode(encoding, errors="replace")))
        problem = Problem(filename, data.count(b"\n", 0, e.start) + 1, col,
                          f"the file is not valid {encoding}: byte 0x{data[e.start]:02x} "
                          "cannot be decoded" + (" (it looks binary: it holds control "
                                                 "characters)" if binary else ""),
                          "" if binary else text,
                          "give symdiff a Python source file" if binary else
                          "save it as UTF-8, or declare its encoding on its first line "
                          "(# -*- coding: latin-1 -*-)")
        raise SymdiffError(problems=(problem,)) from None
    with io.TextIOWrapper(io.BytesIO(data), encoding, line_buffering=True) as text:
        return text.readlines()
