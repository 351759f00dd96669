"""Write the README's NumPy coverage table from the rules table, so the two cannot drift.

Run: python tools/coverage.py          (rewrites README.md between the coverage markers)
     python tools/coverage.py --check  (exit 1 if README.md is out of date)
"""

import sys
from pathlib import Path

from symdiff import rules

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"


def table() -> str:
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


def render(text: str) -> str:
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


def main(argv):
    text = README.read_text()
    new = render(text)
    if "--check" in argv:
        if new != text:
            print("README.md's coverage table is out of date: run python tools/coverage.py")
            return 1
        return 0
    README.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
