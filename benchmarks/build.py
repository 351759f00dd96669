"""Build cost of a gradient, and the size of what is built.

Prints (a) for the ten-line scalar chain: the cold build time (parse, lower, differentiate,
emit, compile) with SymPy already imported, the operation count of the generated gradient
over the function's own (binary/unary operators and calls, counted on the AST), and the
run time of the gradient over the function's, measured side by side; (b) how the cold
build time grows with the number of statements (10 to 1000 lines of a scalar chain and of
one on arrays): ms a statement, and the exponent fitted to time ~ n**k (k = 1: linear);
(c) with --profile, where the time of the 1000-statement build goes (cProfile).

Run: python benchmarks/build.py [--quick] [--profile]
"""

import argparse
import ast
import cProfile
import importlib.util
import inspect
import math
import os
import pstats
import tempfile
import textwrap
import time
import timeit
from pathlib import Path

os.environ["SYMDIFF_CACHE_DIR"] = "off"  # every build cold: no disk-cache hit

import sympy  # noqa: E402,F401 - imported up front: the build times exclude SymPy's import

from symdiff import grad  # noqa: E402

LINE = "    e = np.sin(e + x*y) * np.exp(-z*e) + np.log(1 + x**2)\n"
# On arrays: elementwise and a reduction, so that shapes and unbroadcasting are built too.
ARRAY_LINE = "    e = np.tanh(e * x + y) * z + np.mean(e * x)\n"
SIZES = (10, 30, 100, 300, 1000)


def chain_source(n: int, line: str = LINE) -> str:
    return "import numpy as np\n\ndef chain(x, y, z):\n    e = x\n" + line * n + "    return e\n"


_loaded = 0


def load_chain(source: str):
    """A new function object from ``source`` (a new module each time: no memory-cache hit)."""
    global _loaded
    _loaded += 1
    path = Path(tempfile.mkdtemp()) / f"chain_{_loaded}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"chain_{_loaded}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chain


def operations(source: str) -> int:
    tree = ast.parse(textwrap.dedent(source))
    return sum(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Call)) for n in ast.walk(tree))


def cold_build(n: int, on_arrays: bool) -> float:
    """CPU seconds to build the gradient of an n-line chain: for Python floats, or float64
    arrays (what ``.source`` shows). (The process's CPU time, not the wall clock: on a
    machine shared with other work, the wall clock measures the others too.)"""
    f = load_chain(chain_source(n, ARRAY_LINE if on_arrays else LINE))
    g = grad(f, wrt=("x", "y", "z"))
    start = time.process_time()
    if on_arrays:
        g.source  # noqa: B018 - building happens on first use
    else:
        g.source_for(0.3, 0.5, 0.7)
    return time.process_time() - start


def slope(sizes, times) -> float:
    """The least-squares slope of log(time) over log(n): the k of time ~ n**k."""
    xs, ys = [math.log(n) for n in sizes], [math.log(t) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / \
        sum((x - mx) ** 2 for x in xs)


def ten_lines():
    builds = []
    for _ in range(5):
        f = load_chain(chain_source(10))
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


def growth(sizes, repeats):
    print("\ncold build CPU time by the number of statements (min of "
          f"{repeats}; a new function each time, disk cache off)")
    print(f"  {'statements':>10s} {'floats ms':>11s} {'ms/stmt':>8s} "
          f"{'arrays ms':>11s} {'ms/stmt':>8s}")
    found = {False: [], True: []}
    for n in sizes:
        row = []
        for on_arrays in (False, True):
            t = min(cold_build(n, on_arrays) for _ in range(repeats if n < 1000 else 1))
            found[on_arrays].append(t)
            row.append(f"{t * 1e3:11.1f} {t * 1e3 / n:8.2f}")
        print(f"  {n:10d} " + " ".join(row))
    print(f"  fitted exponent k of time ~ n**k: floats {slope(sizes, found[False]):.2f}, "
          f"arrays {slope(sizes, found[True]):.2f}")


def profile(n):
    """Where the time of a cold n-statement build goes: the top entries by own time, and
    SymPy's share (its assumptions system apart)."""
    f = load_chain(chain_source(n))
    g = grad(f, wrt=("x", "y", "z"))
    profiler = cProfile.Profile()
    profiler.runcall(g.source_for, 0.3, 0.5, 0.7)
    stats = pstats.Stats(profiler)
    calls = sum(s[1] for s in stats.stats.values())
    print(f"\n{calls / n:,.0f} Python function calls a statement")
    total = stats.total_tt
    by_area: dict[str, float] = {}
    for (filename, _, _), (_, _, own, _, _) in stats.stats.items():
        if "sympy" in filename:
            area = "sympy assumptions" if "assumptions" in filename or \
                filename.endswith("facts.py") else "sympy (other)"
        elif "symdiff" in filename:
            area = "symdiff/" + Path(filename).name
        else:
            area = "other (ast, builtins, re...)"
        by_area[area] = by_area.get(area, 0.0) + own
    print(f"\nprofile of a cold {n}-statement build (floats): {total:.2f} s, own time by place")
    for area, t in sorted(by_area.items(), key=lambda kv: -kv[1])[:14]:
        print(f"  {area:32s} {t:6.2f} s {100 * t / total:5.1f}%")
    print("  top functions by cumulative time:")
    stats.sort_stats("cumulative").print_stats(25)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="up to 300 statements, once")
    parser.add_argument("--profile", action="store_true", help="profile a 1000-line build")
    opts = parser.parse_args()
    ten_lines()
    sizes = SIZES[:-1] if opts.quick else SIZES
    growth(sizes, 1 if opts.quick else 3)
    if opts.profile:
        profile(SIZES[-1])


if __name__ == "__main__":
    main()
