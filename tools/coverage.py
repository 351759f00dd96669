"""Write the README's NumPy coverage table (symdiff.coverage.table, what `symdiff coverage`
prints) from the rules table, so the two cannot drift.

Run: python tools/coverage.py          (rewrites README.md between the coverage markers)
     python tools/coverage.py --check  (exit 1 if README.md is out of date)
"""

import sys
from pathlib import Path

from symdiff.coverage import table

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- coverage:begin -->", "<!-- coverage:end -->"


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
