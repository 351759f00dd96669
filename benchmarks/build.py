"""Build cost of a gradient, and the size of what is built, for a ten-line scalar chain.

Prints (a) the cold build time (parse, lower, differentiate, emit, compile) with SymPy
already imported, and (b) the operation count of the generated gradient over the
function's own (binary/unary operators and calls, counted on the AST), and the
run time of the gradient over the function's, measured side by side.

Run: python benchmarks/build.py
"""

import ast
import importlib.util
import inspect
import tempfile
import textwrap
import time
import timeit
from pathlib import Path

import sympy  # noqa: F401 - imported up front: the build time below excludes SymPy's import

from symdiff import grad

LINE = "    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)\n"
SOURCE = "import numpy as np\n\ndef chain(x, y, z):\n    e = x\n" + LINE * 10 + "    return e\n"


def load_chain():
    path = Path(tempfile.mkdtemp()) / "chain10.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("chain10", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chain


def operations(source: str) -> int:
    tree = ast.parse(textwrap.dedent(source))
    return sum(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Call)) for n in ast.walk(tree))


def main():
    builds = []
    for _ in range(5):
        f = load_chain()  # a new function object each time: no memory-cache hit
        start = time.perf_counter()
        g = grad(f, wrt=("x", "y", "z"))
        g.source  # noqa: B018 - building happens on first use
        builds.append(time.perf_counter() - start)
    ops_f, ops_g = operations(inspect.getsource(f)), operations(g.source)
    t_f = min(timeit.repeat(lambda: f(0.3, 0.5, 0.7), number=2000, repeat=7)) / 2000
    t_g = min(timeit.repeat(lambda: g(0.3, 0.5, 0.7), number=2000, repeat=7)) / 2000
    print("ten-line chain, gradient w.r.t. x, y, z")
    print(f"  cold build (min of 5, SymPy imported): {min(builds) * 1e3:8.1f} ms")
    print(f"  operations: function {ops_f}, gradient {ops_g}: ratio {ops_g / ops_f:.2f}x")
    print(f"  call time:  function {t_f * 1e6:.2f} us, gradient {t_g * 1e6:.2f} us: "
          f"ratio {t_g / t_f:.2f}x")


if __name__ == "__main__":
    main()
