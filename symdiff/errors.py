"""Located problems and the one exception family, ``SymdiffError``, that carries them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing symdiff cannot do, tied to a place in the user's source.

    ``line`` and ``col`` are 1-based; ``source_line`` is the text of that line (may be empty
    when the source is unknown); ``hint`` says what is supported instead.
    """

    filename: str
    line: int
    col: int
    message: str
    source_line: str = ""
    hint: str = ""

    def format(self, label: str = "") -> str:
        """``file:line:col: message``, the source line, a caret under the column, the hint."""
        head = f"{self.filename}:{self.line}:{self.col}: {label}{self.message}"
        parts = [head]
        if self.source_line:
            text = self.source_line.rstrip("\n")
            # Keep tabs in the caret line so the caret sits under the same column on screen.
            pad = "".join(c if c == "\t" else " " for c in text[: max(self.col - 1, 0)])
            parts += ["    " + text, "    " + pad + "^"]
        if self.hint:
            parts.append("  supported instead: " + self.hint)
        return "\n".join(parts)


class SymdiffError(Exception):
    """Raised for any input symdiff cannot differentiate, and for misuse of a gradient.

    ``problems`` lists every located problem found (all of them, not just the first).

    >>> try:
    ...     raise SymdiffError.at("f.py", 3, 5, "unsupported", "x = y", "use z")
    ... except SymdiffError as e:
    ...     print(e.problems[0].line)
    3
    """

    def __init__(self, message: str = "", problems: tuple[Problem, ...] = ()):
        self.problems = tuple(problems)
        if not message:
            message = "\n".join(p.format() for p in self.problems)
        super().__init__(message)

    @classmethod
    def at(cls, filename, line, col, message, source_line="", hint="") -> SymdiffError:
        return cls(problems=(Problem(filename, line, col, message, source_line, hint),))

    def format(self, label: str = "error: ") -> str:
        """All problems in compiler style, as the CLI prints them."""
        if not self.problems:
            return f"{label}{self}"
        return "\n".join(p.format(label) for p in self.problems)
