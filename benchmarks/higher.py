"""Second derivatives timed side by side: symdiff's Hessians and Hessian-vector products
against JAX, autograd and hand-written NumPy, and the build time of a Hessian.

Cases (issue 14's "Performance"):

- the Hessian of the chained Rosenbrock function, n=100, and of the logistic regression
  NLL with 50 features (X 500x50): ``symdiff.hessian(f)`` against ``jax.jit(jax.hessian(f))``,
  ``autograd.hessian(f)`` and the Hessian written by hand (Rosenbrock's tridiagonal formula;
  ``X.T @ (p (1 - p) X)`` for the NLL); target: within 2x of JAX's time. Rosenbrock's
  Hessian is tridiagonal: after the first call symdiff runs it from 3 compressed columns
  and two check columns (symdiff/sparsity.py); it is also timed with every column run
  (batch.SPARSE off), as a dense Hessian would be, and at n=1000. autograd is timed apart
  from the others (they get the rounds of a fast case);
- a Hessian-vector product on compare.py's tanh MLP (X 20000x100, 64 hidden) along all three
  weights: ``symdiff.jvp(symdiff.grad(f), primals, tangents)`` against symdiff's own gradient
  of f (target: within 3x of it), JAX's ``jit(jvp(grad(f)))`` and autograd's ``grad`` of
  ``<grad f, v>`` (what its ``hessian_vector_product`` does, for several arguments). Once with
  the data X, y read as module data (the function of the weights alone, as a JAX user closes
  over the data), once with X and y passed as arguments with zero tangents (jvp's signature
  taken literally: every float argument is differentiated);
- the cold build time of the Hessian of compare.py's ten-line chain, ``hessian(f, wrt=(0, 1,
  2))(x, y, z)``, and of ``grad(grad(f))``: in this process (SymPy imported, a new function
  object so no memory-cache hit, disk cache off), and in a new process from nothing (imports
  included, a fresh cache directory); target: under 1 s.

Every result is checked to agree (1e-8 relative, compare.check) before anything is timed.
The measuring is compare.py's (interleaved rounds, best of several), with OpenBLAS held to
one thread (OPENBLAS_NUM_THREADS=1 unless the environment sets it); JAX and autograd are
skipped, with a note, where missing, and symdiff's column is skipped, with its error's
first line, where it refuses a case.
Ratios here are symdiff's time over the other's (below 1: symdiff is faster): sd/jax is the
inverse of compare.py's jax/sd.

Run: python benchmarks/higher.py [--quick] [--profile]
     (--profile: where the time of symdiff's Hessian calls goes, by cProfile)
"""

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
import types
from pathlib import Path

# Single-threaded BLAS, as the README's figures say (set before NumPy loads OpenBLAS; an
# explicit setting in the environment wins): on a shared machine, threads measure the others.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare  # noqa: E402 - the measuring helpers and the functions themselves
from compare import logistic_nll, mlp, rosenbrock_chain  # noqa: E402

import symdiff  # noqa: E402
from symdiff import SymdiffError, batch  # noqa: E402

# --- the data of the MLP case, read as module data by mlp_weights (set in main) ---

MLP_X = np.zeros((1, 100))
MLP_Y = np.zeros(1)


def mlp_weights(W1, b1, W2):
    return mlp(W1, b1, W2, MLP_X, MLP_Y)


# --- hand-written Hessians ---


def rosenbrock_chain_hessian(x):
    # f = sum 100 (x[i+1] - x[i]**2)**2 + (1 - x[i])**2: tridiagonal.
    n = x.shape[0]
    head = x[:-1]
    diag = np.zeros(n)
    diag[:-1] = 1200.0 * head * head - 400.0 * x[1:] + 2.0
    diag[1:] += 200.0
    off = -400.0 * head
    H = np.zeros((n, n))
    H.flat[:: n + 1] = diag
    H.flat[1:: n + 1] = off  # (i, i + 1)
    H.flat[n:: n + 1] = off  # (i + 1, i)
    return H


def logistic_nll_hessian(w, X, y):
    p = 0.5 * (1.0 + np.tanh(0.5 * (X @ w)))  # the logistic function, without overflow
    return X.T @ ((p * (1.0 - p))[:, None] * X)


# --- the others' versions ---


def translate(f, xp, stop):
    """compare.translate, with the helpers ``f`` calls (functions it names) translated too."""
    env = dict(f.__globals__, np=xp, stop_gradient=stop)
    for name in f.__code__.co_names:
        helper = f.__globals__.get(name)
        if isinstance(helper, types.FunctionType) and helper is not f:
            env[name] = translate(helper, xp, stop)
    return types.FunctionType(f.__code__, env, f.__name__, f.__defaults__, f.__closure__)


def jax_args(jax, args):
    return tuple(a if isinstance(a, float) else jax.device_put(a) for a in args)


def others_hessian(f, args, others):
    """``jax.jit(jax.hessian(f))`` and ``autograd.hessian(f)``, in the first argument."""
    out = {}
    if "jax" in others:
        jax, jnp = others["jax"]
        jh = jax.jit(jax.hessian(translate(f, jnp, jax.lax.stop_gradient)))
        # (one array out: its own block_until_ready, without jax.block_until_ready's walk
        # of a tree, a few microseconds on a call this short)
        out["jax"] = (lambda *a, _jh=jh: _jh(*a).block_until_ready(), jax_args(jax, args))
    if "autograd" in others:
        from autograd import hessian

        agrad, anp, getval = others["autograd"]
        out["autograd"] = (hessian(translate(f, anp, getval)), args)
    return out


def others_hvp(f, wrt, args, tangents, others):
    """Hessian-vector products of ``f`` along ``wrt`` (positions; ``tangents`` one for each):
    JAX's jit(jvp(grad f)) (grad f and H t, as symdiff's jvp gives) and autograd's grad of
    <grad f, t> (H t alone: autograd's hessian_vector_product, for several arguments)."""
    out = {}
    n = len(args)
    if "jax" in others:
        jax, jnp = others["jax"]
        jg = jax.grad(translate(f, jnp, jax.lax.stop_gradient), argnums=wrt)
        full = [np.zeros_like(a) for a in args]
        for position, t in zip(wrt, tangents, strict=True):
            full[position] = t

        @jax.jit
        def hvp(*a):
            return jax.jvp(jg, a[:n], a[n:])

        out["jax"] = (lambda *a: jax.block_until_ready(hvp(*a)),
                      jax_args(jax, (*args, *full)))
    if "autograd" in others:
        agrad, anp, getval = others["autograd"]
        ag = agrad(translate(f, anp, getval), argnum=wrt)

        def along(*a):
            return sum(anp.sum(d * t) for d, t in zip(ag(*a[:n]), a[n:], strict=True))

        out["autograd"] = (agrad(along, argnum=wrt), (*args, *tangents))
    return out


# --- the cases ---


def hessian_cases(scale):
    """``(title, f, args, hand, sparse)``: sparse False times symdiff with every column run
    (batch.SPARSE off: no compressed columns), as for a dense Hessian."""
    rng = np.random.default_rng(0)
    m = 500 // scale
    X = rng.standard_normal((m, 50))
    x100 = rng.uniform(-1.0, 1.0, 100)
    return [
        ("Hessian, chained Rosenbrock n=100", rosenbrock_chain, (x100,),
         rosenbrock_chain_hessian, True),
        ("  the same, every column (SPARSE off)", rosenbrock_chain, (x100,),
         rosenbrock_chain_hessian, False),
        (f"Hessian, chained Rosenbrock n={1000 // scale}", rosenbrock_chain,
         (rng.uniform(-1.0, 1.0, 1000 // scale),), rosenbrock_chain_hessian, True),
        (f"Hessian, logistic NLL, X {m}x50", logistic_nll,
         (0.1 * rng.standard_normal(50), X, (rng.random(m) < 0.5) * 1.0), logistic_nll_hessian,
         True),
    ]


def every_column(h):
    """``h`` with every column run: batch.SPARSE off for its calls."""
    def call(*args):
        batch.SPARSE = False
        try:
            return h(*args)
        finally:
            batch.SPARSE = True
    return call


def mlp_data(scale):
    global MLP_X, MLP_Y
    rng = np.random.default_rng(1)
    n = 20_000 // scale
    MLP_X, MLP_Y = rng.standard_normal((n, 100)), rng.standard_normal(n)
    weights = (0.1 * rng.standard_normal((100, 64)), 0.1 * rng.standard_normal(64),
               0.1 * rng.standard_normal(64))
    tangents = tuple(rng.standard_normal(w.shape) for w in weights)
    return n, weights, tangents


def symdiff_hvp(g, n):
    """``symdiff.jvp(g, primals, tangents)`` called with the n primals, then the tangents."""
    def hvp(*a):
        return symdiff.jvp(g, a[:n], a[n:])
    return hvp


def symdiff_call(title, make):
    """``make()`` (symdiff's contender, called once to build it), or None with a note where
    symdiff refuses the case."""
    try:
        fn, args = make()
        return fn, args, fn(*args)
    except SymdiffError as e:
        print(f"note: {title}: symdiff refuses: {str(e).splitlines()[0]}")
        return None, None, None


def agree(title, contenders, reference):
    """Stop unless every contender agrees with ``reference`` (compare.check: 1e-8 relative)."""
    for name, (fn, args) in contenders.items():
        compare.check(title, fn(*args), reference, name)


COLUMNS = ("symdiff", "sd grad", "hand", "jax", "autograd")


def row(title, best, rounds):
    t = {c: best.get(c) for c in COLUMNS}
    r = compare.ratio
    print(f"{title:44s}" + "".join(f"{compare.fmt(t[c]):>10s}" for c in COLUMNS)
          + f"{r(t['symdiff'], t['sd grad']):>9s}{r(t['symdiff'], t['hand']):>8s}"
          + f"{r(t['symdiff'], t['jax']):>8s}{r(t['symdiff'], t['autograd']):>8s}{rounds:>7d}",
          flush=True)


def run_hessians(scale, others, timing):
    for title, f, args, hand, sparse in hessian_cases(scale):
        contenders = {}
        fn, sargs, ref = symdiff_call(title, lambda f=f, args=args, sparse=sparse: (
            symdiff.hessian(f) if sparse else every_column(symdiff.hessian(f)), args))
        if fn is not None:
            contenders["symdiff"] = (fn, sargs)
            contenders["sd grad"] = (symdiff.grad(f), args)
        contenders["hand"] = (hand, args)
        contenders.update(others_hessian(f, args, others))
        rest = {k: v for k, v in contenders.items() if k != "sd grad"}
        agree(title, rest, hand(*args) if ref is None else ref)
        # (autograd, 100x slower or more, timed apart: beside it the others would get the
        # few rounds a slow case gets, and their ratios the noise of few rounds)
        slow = {k: contenders.pop(k) for k in ("autograd",) if k in contenders}
        best, rounds = compare.time_side_by_side(contenders, *timing)
        if slow:
            best.update(compare.time_side_by_side(slow, *timing)[0])
        row(title, best, rounds)


def run_hvps(scale, others, timing):
    n, weights, tangents = mlp_data(scale)
    args5 = (*weights, MLP_X, MLP_Y)
    zeros = (np.zeros_like(MLP_X), np.zeros_like(MLP_Y))
    g5 = symdiff.grad(mlp, wrt=(0, 1, 2))
    for title, f, args, ts in (
            (f"hvp, tanh MLP {n}x100-64, data as module data", mlp_weights, weights, tangents),
            (f"hvp, tanh MLP {n}x100-64, X, y as arguments", mlp, args5, (*tangents, *zeros))):
        contenders = {}
        g = symdiff.grad(f, wrt=(0, 1, 2))
        fn, sargs, ref = symdiff_call(title, lambda g=g, args=args, ts=ts: (
            symdiff_hvp(g, len(args)), (*args, *ts)))
        if fn is not None:
            contenders["symdiff"] = (fn, sargs)
        contenders["sd grad"] = (g5, args5)  # the gradient with the data as arguments: the
        # same NumPy as mlp_weights' (compare.py's case 5, at these sizes)
        theirs = others_hvp(f, (0, 1, 2), args, tangents, others)
        contenders.update(theirs)
        if "jax" in theirs:
            fj, aj = theirs["jax"]
            got = fj(*aj)
            if ref is None:  # symdiff refused: JAX's is the reference
                ref = got
            compare.check(title, got[0], ref[0], "jax (grad)")
            compare.check(title, got[1], ref[1], "jax (hvp)")
        if "autograd" in theirs and ref is not None:
            fa, aa = theirs["autograd"]
            compare.check(title, fa(*aa), ref[1], "autograd (hvp)")
        row(title, *compare.time_side_by_side(contenders, *timing))


# --- build time ---


def build_once(what):
    """Seconds from a new function object (no memory-cache hit) to the first result."""
    f = compare.fresh("chain10")
    start = time.perf_counter()
    if what == "hessian":
        symdiff.hessian(f, wrt=(0, 1, 2))(0.3, 0.5, 0.7)
    else:
        symdiff.grad(symdiff.grad(f))(0.3, 0.5, 0.7)
    return time.perf_counter() - start


CALLS = {"hessian": "symdiff.hessian(module.chain10, wrt=(0, 1, 2))(0.3, 0.5, 0.7)",
         "grad(grad)": "symdiff.grad(symdiff.grad(module.chain10))(0.3, 0.5, 0.7)"}


def build_in_new_process(call):
    """``(wall, imports, work)`` of ``call`` in a fresh process with an empty disk cache."""
    with tempfile.TemporaryDirectory() as cache_dir:
        wall, imports, work, _ = compare.child(cache_dir, call)
    return wall, imports, work


def build_report(builds):
    # Imports symdiff's stages (forward mode's too), which are not timed.
    symdiff.hessian(compare.rosenbrock, wrt=(0, 1))(-1.2, 1.0)
    print("build, compare.py's ten-line chain (target: the Hessian under 1 s):")
    for what in ("hessian", "grad(grad)"):
        times = [build_once(what) for _ in range(builds)]
        wall, imports, work = build_in_new_process(CALLS[what])
        label = "hessian(f, wrt=(0, 1, 2))(x, y, z)" if what == "hessian" else \
            "grad(grad(f))(x, y, z)"
        print(f"  {label:36s} in this process (SymPy imported): first "
              f"{compare.fmt(times[0])}, min of {len(times)} {compare.fmt(min(times))}; "
              f"a new process: {compare.fmt(wall)} wall (imports {compare.fmt(imports)}, "
              f"the build and call {compare.fmt(work)})")


# --- where the time goes ---


def profile_report(scale):
    """cProfile of symdiff's Hessian calls (built first): calls a column, own time by place."""
    for title, f, args, _, sparse in hessian_cases(scale):
        h = symdiff.hessian(f) if sparse else every_column(symdiff.hessian(f))
        try:
            h(*args)
        except SymdiffError as e:
            print(f"{title}: symdiff refuses: {str(e).splitlines()[0]}")
            continue
        calls = 50
        profiler = cProfile.Profile()
        profiler.runcall(lambda h=h, args=args, calls=calls: [h(*args) for _ in range(calls)])
        stats = pstats.Stats(profiler)
        columns = int(np.size(args[0]))
        total = stats.total_tt / calls
        print(f"\n{title}: {compare.fmt(total)} a Hessian under cProfile, {columns} columns: "
              f"{compare.fmt(total / columns)} a column; "
              f"{sum(s[1] for s in stats.stats.values()) / calls / columns:.0f} "
              "Python calls a column")
        by_place = {}
        for (filename, _, function), (_, _, own, _, _) in stats.stats.items():
            if filename.startswith("/tmp/") or "symdiff-" in filename:
                place = "generated code (NumPy calls in it apart)"
            elif "symdiff" in filename:
                place = f"symdiff/{Path(filename).name}:{function}"
            elif filename == "~":
                place = function  # a builtin: NumPy's C functions, ndarray methods
            else:
                place = f"{Path(filename).name}:{function}"
            by_place[place] = by_place.get(place, 0.0) + own
        for place, own in sorted(by_place.items(), key=lambda kv: -kv[1])[:12]:
            print(f"  {place[:70]:70s} {compare.fmt(own / calls / columns):>9s} a column "
                  f"{100 * own / stats.total_tt:5.1f}%")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="data shrunk 10x, shorter measurements: a smoke run")
    parser.add_argument("--profile", action="store_true",
                        help="also: where the time of symdiff's Hessian calls goes")
    opts = parser.parse_args(argv)
    scale = 10 if opts.quick else 1
    target = 0.02 if opts.quick else 0.2
    rounds = 3 if opts.quick else 7
    budget = 0.5 if opts.quick else 8.0
    timing = (target, rounds, budget)
    os.environ["SYMDIFF_CACHE_DIR"] = "off"  # builds here are real; the new process's apart
    import sympy  # noqa: F401 - imported up front: build times exclude SymPy's import

    others = compare.load_others()
    compare.environment(others)
    build_report(builds=1 if opts.quick else 3)
    print()
    print("time per call (min over rounds); sd = symdiff; 'sd grad': symdiff's gradient of "
          "the same f (the hvp's yardstick); ratios: symdiff's time over the other's")
    print(f"{'case':44s}" + "".join(f"{c:>10s}" for c in COLUMNS)
          + f"{'sd/grad':>9s}{'sd/hand':>8s}{'sd/jax':>8s}{'sd/ag':>8s}{'rounds':>7s}")
    run_hessians(scale, others, timing)
    run_hvps(scale, others, timing)
    if opts.profile:
        profile_report(scale)
    print(f"\nat the end: {compare.load_average()}")


if __name__ == "__main__":
    main()
