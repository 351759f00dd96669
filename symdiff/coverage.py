"""The rules table -> the coverage table, which ``symdiff coverage`` prints.

The README shows the same table (tools/coverage.py writes it there), so neither can drift
from what is supported, and error hints can send a pip-installed user, who has no README,
to the command."""

from __future__ import annotations

from . import rules


def table() -> str:
    """The coverage table in Markdown: each supported function or method, its kind, a note.

    >>> table().splitlines()[:2]
    ['| function | kind | notes |', '| --- | --- | --- |']
    """
    rows = ["| function | kind | notes |", "| --- | --- | --- |"]
    for row in rules.ELEMENTWISE:
        rows.append(f"| {', '.join(f'`{n}`' for n in row.names)} | elementwise | {row.note} |")
    for row in (*rules.ARRAY_OPS, rules.INDEX, *rules.CONCATENATORS):
        names = [f"`{n}`" for n in row.names] + ([f"`.{row.method}()`"] if row.method else [])
        rows.append(f"| {', '.join(names)} | array | {row.note} |")
    rows.append("| `.T`, `.flatten()` | array | as np.transpose, np.ravel |")
    no_grad = ", ".join(f"`{n}`" for n in rules.NO_GRADIENT)
    attrs = ", ".join(f"`.{a}`" for a in rules.NO_GRADIENT_ATTRIBUTES)
    rows.append(f"| {no_grad}, {attrs}, comparisons | no gradient | run as written |")
    return "\n".join(rows)
