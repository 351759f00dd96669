"""symdiff's gradients over the same data as NumPy arrays and as Dask arrays, side by side.

Cases: compare.py's logistic NLL and tanh MLP, with the weights NumPy arrays and the data
(X, y) either NumPy arrays or Dask arrays of the same values in chunks of ``--chunk`` rows
(``da.from_array``), computed by Dask's threads scheduler (one thread per core). The
gradient is the same generated code; on Dask arrays it builds a graph that one
``dask.compute`` runs at the return. Each pair of results is checked to agree (1e-8
relative, compare.check) before anything is timed.

Timing: compare.py's (``time_side_by_side``: interleaved, best of several rounds), with
OpenBLAS held to one thread (OPENBLAS_NUM_THREADS=1 unless the environment sets it), so
Dask's threads are the only parallelism; the ratio is Dask's time over NumPy's.

Memory: each case runs in a child process of its own, which builds the gradient (on one
chunk's worth of data), resets the kernel's record of its peak resident size
(``/proc/self/clear_refs``, Linux), then makes the data and calls the gradient once, and
reports the peak (``VmHWM``) over the resident size before: what the data and the call took
(the data included: NumPy's and ``da.from_array``'s hold X whole). A third column runs the
Dask gradient on data that Dask generates chunk by chunk (``da.random``, the same values'
distribution and shape): no copy of X exists whole, so its peak is what chunked data costs.

Run: python benchmarks/dask.py [--quick]   (--quick: sizes divided by 10, fewer rounds)
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

# Single-threaded BLAS, as compare.py's figures (set before NumPy loads OpenBLAS; an explicit
# setting in the environment wins).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = Path(__file__).resolve().parent
# Run as a script, this folder is first on sys.path, where this file's own name would hide
# the dask package: it is taken out before Dask is imported.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import numpy as np  # noqa: E402

_spec = importlib.util.spec_from_file_location("compare", HERE / "compare.py")
compare = importlib.util.module_from_spec(_spec)
sys.modules["compare"] = compare
_spec.loader.exec_module(compare)

from symdiff import grad  # noqa: E402


def cases(scale):
    """name -> (function, wrt, the weights, the data's shapes): compare.py's cases 4 and 5,
    with more rows (the data is what Dask splits)."""
    rng = np.random.default_rng(0)
    return {
        f"logistic NLL, X {400_000 // scale}x50": (
            compare.logistic_nll, "w", (0.1 * rng.standard_normal(50),),
            ((400_000 // scale, 50), (400_000 // scale,))),
        f"tanh MLP, X {100_000 // scale}x100, 64 hidden": (
            compare.mlp, ("W1", "b1", "W2"),
            (0.1 * rng.standard_normal((100, 64)), 0.1 * rng.standard_normal(64),
             0.1 * rng.standard_normal(64)),
            ((100_000 // scale, 100), (100_000 // scale,))),
    }


def generated(shapes, chunk):
    """The data as Dask arrays generated chunk by chunk: X normal, y zeros and ones."""
    rng = da.random.default_rng(1)
    (n, d), _ = shapes
    X = rng.standard_normal((n, d), chunks=(chunk, d))
    y = (rng.random(n, chunks=chunk) < 0.5).astype(np.float64)
    return X, y


def child_main(name, how, scale, chunk):
    """In a child process: one gradient call of case ``name`` with its data ``how`` (numpy,
    dask, generated); prints JSON: the peak resident size the data and the call added to
    the process, and the data's bytes."""
    f, wrt, weights, shapes = cases(scale)[name]
    g = grad(f, wrt=wrt)
    small = generated(((chunk, shapes[0][1]), None), chunk)
    if how == "numpy":
        small = dask.compute(*small)
    g(*weights, *small)  # built (SymPy's memory is not the gradient's)
    del small
    base = _reset_peak()
    if how == "generated":
        X, y = generated(shapes, chunk)
    else:  # (made by NumPy: computing Dask's chunks would hold a second copy while joining)
        rng = np.random.default_rng(1)
        X = rng.standard_normal(shapes[0])
        y = (rng.random(shapes[1]) < 0.5).astype(np.float64)
        if how == "dask":
            X, y = da.from_array(X, chunks=(chunk, X.shape[1])), da.from_array(y, chunks=chunk)
    with dask.config.set(scheduler="threads"):
        g(*weights, X, y)
    print(json.dumps([_peak() - base, X.nbytes + y.nbytes]))


def _status(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # (kB)
    raise OSError(f"no {field} in /proc/self/status")


def _reset_peak():
    """The resident size now, with the peak (VmHWM) reset to it (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status("VmRSS")


def _peak():
    return _status("VmHWM")


def peak_memory(name, how, scale, chunk):
    out = subprocess.run([sys.executable, __file__, "--child", name, how, "--scale",
                          str(scale), "--chunk", str(chunk)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="sizes divided by 10, fewer rounds: a smoke run")
    parser.add_argument("--chunk", type=int, default=None, help="rows per chunk")
    parser.add_argument("--scale", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=2, default=None, help=argparse.SUPPRESS)
    opts = parser.parse_args(argv)
    scale = opts.scale or (10 if opts.quick else 1)
    chunk = opts.chunk or 50_000 // scale
    if opts.child:
        return child_main(*opts.child, scale, chunk)
    target = 0.05 if opts.quick else 0.3
    rounds = 3 if opts.quick else 5
    print(f"NumPy {np.__version__}, Dask {dask.__version__}, {os.cpu_count()} cores, "
          f"OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, chunks of {chunk} rows; "
          f"{compare.load_average()}")
    print(f"{'case':38s}{'numpy':>10s}{'dask':>10s}{'dask/np':>9s}{'rounds':>7s}"
          f"{'data':>9s}{'peak np':>9s}{'peak da':>9s}{'peak gen':>9s}")
    for name, (f, wrt, weights, shapes) in cases(scale).items():
        X, y = generated(shapes, chunk)
        X, y = dask.compute(X, y)
        Xd, yd = da.from_array(X, chunks=(chunk, X.shape[1])), da.from_array(y, chunks=chunk)
        g = grad(f, wrt=wrt)
        with dask.config.set(scheduler="threads"):
            compare.check(name, g(*weights, Xd, yd), g(*weights, X, y), "numpy")
            best, done = compare.time_side_by_side(
                {"numpy": (g, (*weights, X, y)), "dask": (g, (*weights, Xd, yd))},
                target, rounds, budget=2.0 if opts.quick else 10.0)
        del X, y, Xd, yd
        peaks = {how: peak_memory(name, how, scale, chunk) for how in
                 ("numpy", "dask", "generated")}
        data = peaks["numpy"][1]
        print(f"{name:38s}{compare.fmt(best['numpy']):>10s}{compare.fmt(best['dask']):>10s}"
              f"{compare.ratio(best['dask'], best['numpy']):>9s}{done:>7d}"
              + f"{data / 2**20:>6.0f} MB"
              + "".join(f"{peaks[h][0] / 2**20:>6.0f} MB" for h in ("numpy", "dask",
                                                                   "generated")),
              flush=True)
    print("peak: what making the data and one gradient call added to a child process's peak "
          "resident size (VmHWM after, over VmRSS before)")
    print(f"at the end: {compare.load_average()}")


if __name__ == "__main__":
    main()
