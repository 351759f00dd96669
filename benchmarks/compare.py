"""symdiff's gradients timed side by side with the function, hand-written NumPy, JAX and autograd.

For each case it prints the time of one call of the function (forward only), of symdiff's
gradient, of a hand-written NumPy gradient, of ``jax.jit(jax.grad(...))`` on CPU and of
``autograd.grad``, and the ratios symdiff/f, symdiff/hand, jax/symdiff and autograd/symdiff
(the last two: how many times faster symdiff is). Each hand-written gradient, and JAX's and
autograd's, is checked against symdiff's to 1e-8 relative before anything is timed; a
disagreement stops the run. Then: the cold build time and operation-count ratio of the
ten-line chain, the peak memory of an elementwise chain's gradient (tracemalloc), and the
time of a disk-cache hit in a fresh process where ``symdiff.cache`` exists.

Timing: the contenders of a case are timed interleaved (one measurement of each per round),
each measurement is ``number`` calls with ``time.perf_counter`` (``number`` chosen so a
measurement takes at least ~0.2 s), and the minimum over the rounds is reported per call.
JAX and autograd run the very functions below with ``np`` rebound to ``jax.numpy`` /
``autograd.numpy`` and ``stop_gradient`` to their own (a direct translation, line for line);
JAX is warmed up (compiled) first and its results are waited for (``block_until_ready``).
Either is skipped, with a note, where it is not installed (``pip install -e '.[bench]'``).

Builds in this process bypass the disk cache (SYMDIFF_CACHE_DIR=off), so build times are
real builds; the disk cache is timed in child processes with a cache directory of their own.
Other work on the machine skews everything: the load average is printed at start and end.

Run: python benchmarks/compare.py            (1-2 minutes on 2 cores)
     python benchmarks/compare.py --quick    (sizes and repeats shrunk 10x: a smoke run)
"""

import argparse
import ast
import gc
import importlib.util
import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import tracemalloc
import types
from pathlib import Path

import numpy as np

from symdiff import grad, stop_gradient

# --- the functions differentiated (module level: symdiff reads their source from this file) ---


def rosenbrock(x, y):
    return (1 - x) ** 2 + 100 * (y - x**2) ** 2


def chain10(x, y, z):
    e = x
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    e = np.sin(e + x * y) * np.exp(-z * e) + np.log(1 + x**2)
    return e


def rosenbrock_chain(x):
    return np.sum(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def logistic_nll(w, X, y):
    z = X @ w
    return np.sum(np.logaddexp(0, z) - y * z)


def mlp(W1, b1, W2, X, y):
    H = np.tanh(X @ W1 + b1)
    return np.mean((H @ W2 - y) ** 2)


def softmax_xent(Z, T):
    S = Z - stop_gradient(np.max(Z, axis=1, keepdims=True))
    lse = np.log(np.sum(np.exp(S), axis=1))
    return np.mean(lse - np.sum(T * S, axis=1))


def attention(Q, K, V):
    S = Q @ K.T / 8
    S = S - stop_gradient(np.max(S, axis=1, keepdims=True))
    E = np.exp(S)
    P = E / np.sum(E, axis=1, keepdims=True)
    return np.sum((P @ V) ** 2)


def chain(x):
    a = np.sin(x)
    b = a * x + np.exp(-a)
    c = np.tanh(b) * a
    return np.sum(c**2)


def rnn(W, U, xs, h0):
    h = h0
    for t in range(xs.shape[0]):
        h = np.tanh(W @ h + U @ xs[t])
    return np.sum(h**2)


def kepler(M, e):
    # Newton's iterations for Kepler's equation E - e sin E = M, then a coordinate.
    E = M
    step = 1.0
    while abs(step) > 1e-12:
        step = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - step
    return np.cos(E) - e


def black_scholes(S, K, T, r, sigma):
    # A call's price, with the normal CDF of Abramowitz and Stegun (26.2.17).
    sqrt_t = np.sqrt(T)
    vol = sigma * sqrt_t
    d1 = (np.log(S / K) + (r + 0.5 * sigma**2) * T) / vol
    d2 = d1 - vol
    k1 = 1.0 / (1.0 + 0.2316419 * np.abs(d1))
    k2 = 1.0 / (1.0 + 0.2316419 * np.abs(d2))
    p1 = k1 * (0.319381530 + k1 * (-0.356563782 + k1 * (1.781477937 + k1 * (
        -1.821255978 + k1 * 1.330274429))))
    p2 = k2 * (0.319381530 + k2 * (-0.356563782 + k2 * (1.781477937 + k2 * (
        -1.821255978 + k2 * 1.330274429))))
    tail1 = np.exp(-0.5 * d1 * d1) / math.sqrt(2.0 * math.pi) * p1
    tail2 = np.exp(-0.5 * d2 * d2) / math.sqrt(2.0 * math.pi) * p2
    if d1 >= 0:
        n1 = 1.0 - tail1
    else:
        n1 = tail1
    if d2 >= 0:
        n2 = 1.0 - tail2
    else:
        n2 = tail2
    discount = np.exp(-r * T)
    return S * n1 - K * discount * n2


def lennard_jones(X, mask):
    # mask: 1 off the diagonal, 0 on it (no particle with itself).
    D = X[:, None, :] - X[None, :, :]
    r2 = np.sum(D**2, axis=-1) + (1.0 - mask)
    inv6 = (1.0 / r2) ** 3
    return 2.0 * np.sum(mask * (inv6 * inv6 - inv6))


def matvec_softmax(W, x, t):
    logits = W @ x
    s = logits - stop_gradient(np.max(logits))
    return np.log(np.sum(np.exp(s))) - np.sum(t * s)


def logistic_l2(w, X, y, lam):
    z = X @ w
    return np.sum(np.logaddexp(0.0, z) - y * z) + lam * np.sum(w**2)


# --- hand-written NumPy gradients ---


def rosenbrock_hand(x, y):
    r = y - x * x
    return -2.0 * (1.0 - x) - 400.0 * x * r, 200.0 * r


def chain10_hand(x, y, z):
    # Forward, keeping what the backward step needs; then reverse through the ten lines
    # (on Python floats: math, as a careful hand would).
    xy = x * y
    lg = math.log(1 + x * x)
    tape = []
    e = x
    for _ in range(10):
        s = math.sin(e + xy)
        q = math.exp(-z * e)
        tape.append((e, s, q, math.cos(e + xy)))
        e = s * q + lg
    dx = dy = dz = 0.0
    de = 1.0
    dlg = 0.0
    for e, s, q, c in reversed(tape):
        dlg += de
        du = de * q * c  # d/d(e + x*y) of sin(e + x*y) * exp(-z*e)
        dq = de * s * q  # times d(-z*e)
        dx += du * y
        dy += du * x
        dz -= dq * e
        de = du - dq * z
    dx += de + dlg * 2 * x / (1 + x * x)
    return dx, dy, dz


def rosenbrock_chain_hand(x):
    head = x[:-1]
    d = x[1:] - head * head
    g = np.empty_like(x, dtype=np.float64)
    g[:-1] = -400.0 * head * d - 2.0 * (1.0 - head)
    g[-1] = 0.0
    g[1:] += 200.0 * d
    return g


def logistic_nll_hand(w, X, y):
    z = X @ w
    p = 0.5 * (1.0 + np.tanh(0.5 * z))  # the logistic function, without overflow
    return X.T @ (p - y)


def mlp_hand(W1, b1, W2, X, y):
    H = np.tanh(X @ W1 + b1)
    dr = (2.0 / len(y)) * (H @ W2 - y)
    dA = np.outer(dr, W2)
    dA *= 1.0 - H * H
    return X.T @ dA, dA.sum(axis=0), H.T @ dr


def softmax_xent_hand(Z, T):
    E = np.exp(Z - np.max(Z, axis=1, keepdims=True))
    E /= np.sum(E, axis=1, keepdims=True)
    E -= T
    E /= Z.shape[0]
    return E


def attention_hand(Q, K, V):
    S = Q @ K.T / 8
    P = np.exp(S - np.max(S, axis=1, keepdims=True))
    P /= np.sum(P, axis=1, keepdims=True)
    dO = 2.0 * (P @ V)
    dV = P.T @ dO
    dP = dO @ V.T
    dS = P * (dP - np.sum(dP * P, axis=1, keepdims=True))
    return dS @ K / 8, dS.T @ Q / 8, dV


def chain_hand(x):
    a = np.sin(x)
    ea = np.exp(-a)
    t = np.tanh(a * x + ea)
    c = t * a
    dc = 2.0 * c
    db = dc * a * (1.0 - t * t)
    da = dc * t + db * (x - ea)
    return db * a + da * np.cos(x)


def rnn_hand(W, U, xs, h0):
    hs = [h0]
    for t in range(xs.shape[0]):
        hs.append(np.tanh(W @ hs[-1] + U @ xs[t]))
    dW = np.zeros_like(W)
    dU = np.zeros_like(U)
    dh = 2.0 * hs[-1]
    for t in reversed(range(xs.shape[0])):
        h = hs[t + 1]
        da = dh * (1.0 - h * h)
        dW += np.multiply.outer(da, hs[t])
        dU += np.multiply.outer(da, xs[t])
        dh = da @ W
    return dW, dU


def kepler_hand(M, e):
    E = M
    step = 1.0
    tape = []
    while abs(step) > 1e-12:
        s = math.sin(E)
        c = math.cos(E)
        num = E - e * s - M
        den = 1.0 - e * c
        step = num / den
        tape.append((s, c, num, den))
        E = E - step
    dE = -math.sin(E)
    de = -1.0
    dM = 0.0
    for s, c, num, den in reversed(tape):
        dnum = -dE / den  # step = num / den, E = E - step
        dden = -dnum * num / den
        dM -= dnum
        de -= dnum * s + dden * c
        dE += dnum * (1.0 - e * c) + dden * e * s
    return dM + dE, de


def black_scholes_hand(S, K, T, r, sigma):
    sqrt_t = math.sqrt(T)
    vol = sigma * sqrt_t
    d1 = (math.log(S / K) + (r + 0.5 * sigma * sigma) * T) / vol
    d2 = d1 - vol
    root = math.sqrt(2.0 * math.pi)
    a = 0.2316419

    def tail(d):  # (tail, d tail / d d) of the approximation
        k = 1.0 / (1.0 + a * abs(d))
        p = k * (0.319381530 + k * (-0.356563782 + k * (1.781477937 + k * (
            -1.821255978 + k * 1.330274429))))
        dp = 0.319381530 + k * (-0.713127564 + k * (5.344433811 + k * (
            -7.285023912 + k * 6.651372145)))
        g = math.exp(-0.5 * d * d) / root
        dk = -a * k * k * math.copysign(1.0, d)
        return g * p, g * (dp * dk - d * p)

    tail1, dtail1 = tail(d1)
    tail2, dtail2 = tail(d2)
    n1, s1 = (1.0 - tail1, -1.0) if d1 >= 0 else (tail1, 1.0)
    n2, s2 = (1.0 - tail2, -1.0) if d2 >= 0 else (tail2, 1.0)
    discount = math.exp(-r * T)
    dd2 = -K * discount * s2 * dtail2
    dd1 = S * s1 * dtail1 + dd2
    ddiscount = -K * n2
    dvol = -dd2 - dd1 * d1 / vol
    q = dd1 / vol
    dT = -r * discount * ddiscount + q * (r + 0.5 * sigma * sigma) + 0.5 * dvol * sigma / sqrt_t
    return (n1 + q / S, -discount * n2 - q / K, dT, -T * discount * ddiscount + q * T,
            q * T * sigma + dvol * sqrt_t)


def lennard_jones_hand(X, mask):
    D = X[:, None, :] - X[None, :, :]
    r2 = np.sum(D * D, axis=-1) + (1.0 - mask)
    inv = 1.0 / r2
    inv6 = inv * inv * inv
    dr2 = (-6.0 * mask) * (2.0 * inv6 - 1.0) * inv6 * inv
    dD = D * (2.0 * dr2)[:, :, None]
    return dD.sum(axis=1) - dD.sum(axis=0)


def matvec_softmax_hand(W, x, t):
    logits = W @ x
    p = np.exp(logits - np.max(logits))
    p /= np.sum(p)
    p -= t
    return np.multiply.outer(p, x)


def logistic_l2_hand(w, X, y, lam):
    z = X @ w
    p = 0.5 * (1.0 + np.tanh(0.5 * z))
    return X.T @ (p - y) + (2.0 * lam) * w


# --- the cases ---


def cases(scale):
    """(title, f, wrt, args, hand gradient) for each case; array sizes divided by ``scale``."""
    rng = np.random.default_rng(0)
    n3 = 1_000_000 // scale
    n4 = 100_000 // scale
    X4 = rng.standard_normal((n4, 50))
    y4 = (rng.random(n4) < 0.5).astype(np.float64)
    n5 = 20_000 // scale
    n6 = 1000 // scale
    T6 = np.eye(500)[rng.integers(0, 500, n6)]
    n7 = 256 // scale
    n12 = 200 // scale
    n13 = 1000 // scale
    n14 = 100_000 // scale
    X14 = rng.standard_normal((n14, 100))
    return [
        ("1 rosenbrock, 2 Python floats", rosenbrock, ("x", "y"), (-1.2, 1.0), rosenbrock_hand),
        ("2 ten-line scalar chain", chain10, ("x", "y", "z"), (0.3, 0.5, 0.7), chain10_hand),
        (f"3 chained rosenbrock, n={n3:.0e}", rosenbrock_chain, "x",
         (rng.uniform(-1.0, 1.0, n3),), rosenbrock_chain_hand),
        (f"4 logistic NLL, X {n4}x50", logistic_nll, "w",
         (0.1 * rng.standard_normal(50), X4, y4), logistic_nll_hand),
        (f"5 tanh MLP, X {n5}x100, 64 hidden", mlp, ("W1", "b1", "W2"),
         (0.1 * rng.standard_normal((100, 64)), 0.1 * rng.standard_normal(64),
          0.1 * rng.standard_normal(64), rng.standard_normal((n5, 100)),
          rng.standard_normal(n5)), mlp_hand),
        (f"6 softmax cross-entropy {n6}x500", softmax_xent, "Z",
         (3.0 * rng.standard_normal((n6, 500)), T6), softmax_xent_hand),
        (f"7 attention {n7}x64", attention, ("Q", "K", "V"),
         tuple(rng.standard_normal((n7, 64)) for _ in range(3)), attention_hand),
        (f"8 elementwise chain, n={n3:.0e}", chain, "x", (rng.uniform(-2.0, 2.0, n3),),
         chain_hand),
        ("9 RNN, 50 steps, 32 hidden", rnn, ("W", "U"),
         (0.3 * rng.standard_normal((32, 32)), 0.3 * rng.standard_normal((32, 16)),
          rng.standard_normal((50, 16)), np.zeros(32)), rnn_hand),
        ("10 Kepler: Newton in a while, floats", kepler, ("M", "e"), (1.0, 0.3), kepler_hand),
        ("11 Black-Scholes, 5 floats", black_scholes, ("S", "K", "T", "r", "sigma"),
         (100.0, 95.0, 0.5, 0.02, 0.25), black_scholes_hand),
        (f"12 Lennard-Jones, {n12} particles", lennard_jones, "X",
         (rng.uniform(0.0, 6.0, (n12, 3)), 1.0 - np.eye(n12)), lennard_jones_hand),
        (f"13 W @ x softmax CE, W {n13}x500", matvec_softmax, "W",
         (0.01 * rng.standard_normal((n13, 500)), rng.standard_normal(500),
          np.eye(n13)[3]), matvec_softmax_hand),
        (f"14 logistic NLL + L2, X {n14}x100", logistic_l2, "w",
         (0.01 * rng.standard_normal(100), X14, (rng.random(n14) < 0.5) * 1.0, 0.1),
         logistic_l2_hand),
    ]


def positions(f, wrt):
    names = list(inspect.signature(f).parameters)
    if isinstance(wrt, str):
        return names.index(wrt)
    return tuple(names.index(w) for w in wrt)


def translate(f, xp, stop):
    """``f`` with ``np`` read as ``xp`` and ``stop_gradient`` as ``stop``: the same code."""
    env = dict(f.__globals__, np=xp, stop_gradient=stop)
    return types.FunctionType(f.__code__, env, f.__name__, f.__defaults__, f.__closure__)


def contenders_of_others(f, wrt, args, others):
    """The JAX and autograd gradients of ``f`` (those installed): name -> (call, args)."""
    out = {}
    argnums = positions(f, wrt)
    if "jax" in others:
        jax, jnp = others["jax"]
        plain = jax.grad(translate(f, jnp, jax.lax.stop_gradient), argnums=argnums)
        jg = jax.jit(plain)
        # Arrays live on the device already, as in a JAX program; Python floats stay floats.
        jargs = tuple(a if isinstance(a, float) else jax.device_put(a) for a in args)
        try:
            jax.block_until_ready(jg(*jargs))
        except jax.errors.ConcretizationTypeError:
            # A Python `while` or `if` on a traced value: jit cannot trace it; JAX runs it
            # op by op instead (a JAX user would rewrite it with lax.while_loop or where).
            print(f"note: {f.__name__}: jax.jit cannot trace its Python control flow on "
                  "values; the jax column is jax.grad without jit")
            jg = plain

        def run_jax(*a, _jg=jg):
            return jax.block_until_ready(_jg(*a))

        out["jax"] = (run_jax, jargs)
    if "autograd" in others:
        agrad, anp, getval = others["autograd"]
        out["autograd"] = (agrad(translate(f, anp, getval), argnum=argnums), args)
    return out


def check(name, got, ref, what):
    """Stop the run unless ``got`` agrees with symdiff's gradient ``ref`` to 1e-8 relative."""
    got = got if isinstance(ref, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    if len(got) != len(ref):
        sys.exit(f"{name}: {what} returned {len(got)} gradients, symdiff {len(ref)}")
    for i, (a, b) in enumerate(zip(got, ref, strict=True)):
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if a.shape != b.shape:
            sys.exit(f"{name}: gradient {i} of {what} has shape {a.shape}, symdiff's {b.shape}")
        scale = max(float(np.max(np.abs(b))), np.finfo(float).tiny)
        err = float(np.max(np.abs(a - b))) / scale
        if not err <= 1e-8:
            sys.exit(f"{name}: gradient {i} of {what} differs from symdiff's by {err:.2e} "
                     "relative (max |difference| / max |symdiff|) > 1e-8")


# --- timing ---


def measure(fn, args, number):
    """Seconds per call of ``fn(*args)``, over ``number`` calls, with the GC off (as timeit)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn(*args)
        return (time.perf_counter() - start) / number
    finally:
        if gc_was:
            gc.enable()


def time_side_by_side(contenders, target, max_repeats, budget):
    """Minimum seconds per call of each contender (name -> (fn, args)), timed interleaved.

    ``number`` is chosen per contender so one measurement takes at least ``target`` seconds;
    big cases get fewer rounds (``max_repeats`` while every call is under 1 ms, at most 5
    under 20 ms, else 3), and fewer still (down to 3) where a round would overrun ``budget``.
    Returns ``({name: seconds}, rounds)``.
    """
    numbers, per_call = {}, {}
    for name, (fn, args) in contenders.items():
        fn(*args)  # warm: first-call costs (building, compiling, caches) are not timed
        one = measure(fn, args, 1)
        if one < 0.1 * target:  # too short to trust: time a few more
            one = measure(fn, args, max(1, int(0.1 * target / max(one, 1e-9))))
        numbers[name] = max(1, math.ceil(target / one))
        per_call[name] = one
    round_time = sum(numbers[n] * per_call[n] for n in contenders)
    slowest = max(per_call.values())
    cap = max_repeats if slowest < 1e-3 else min(max_repeats, 5 if slowest < 20e-3 else 3)
    rounds = max(min(3, cap), min(cap, int(budget / round_time)))
    best = {name: math.inf for name in contenders}
    names = list(contenders)
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:  # rotate the order
            fn, args = contenders[name]
            best[name] = min(best[name], measure(fn, args, numbers[name]))
    return best, rounds


def fmt(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}x"


# --- the other measurements: build, size, memory, disk cache ---


def operations(source):
    """Binary/unary operators and calls on the AST, as benchmarks/build.py counts them."""
    tree = ast.parse(textwrap.dedent(source))
    return sum(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Call)) for n in ast.walk(tree))


_FRESH = iter(range(1_000_000))


def fresh(name):
    """A new function object for ``name``, from this file loaded again: no memory-cache hit."""
    spec = importlib.util.spec_from_file_location(f"_compare_fresh{next(_FRESH)}", __file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def build_report(builds):
    grad(rosenbrock).source  # noqa: B018 - imports symdiff's stages, so they are not timed
    times = []
    for _ in range(builds):
        f = fresh("chain10")
        start = time.perf_counter()
        g = grad(f, wrt=("x", "y", "z"))
        g.source  # noqa: B018 - building happens on first use
        times.append(time.perf_counter() - start)
    ops_f, ops_g = operations(inspect.getsource(chain10)), operations(g.source)
    print("case 2, the ten-line chain, gradient w.r.t. x, y, z:")
    print(f"  cold build (grad(f).source of a fresh function, SymPy imported): first "
          f"{fmt(times[0])}, min of {len(times)} {fmt(min(times))}")
    print(f"  operations (BinOp/UnaryOp/Call on the AST): function {ops_f}, gradient {ops_g}: "
          f"ratio {ops_g / ops_f:.2f}x")


def overhead_report(target, rounds):
    """What calling a gradient costs over calling the function it runs, directly: the key
    of the arguments' kinds and the lookup (case 1, two Python floats)."""
    g = grad(rosenbrock, wrt=("x", "y"))
    args = (-1.2, 1.0)
    g(*args)
    direct = g._spec(args, {}).call  # the generated function that call runs
    best, _ = time_side_by_side({"grad": (g, args), "direct": (direct, args)}, target,
                                rounds, budget=4 * target * rounds)
    print(f"call overhead, case 1: grad {fmt(best['grad'])}, the generated function called "
          f"directly {fmt(best['direct'])}: {fmt(best['grad'] - best['direct'])} more "
          "(target: at most 300 ns)")


def peak_bytes(fn, *args):
    """Peak bytes traced while ``fn(*args)`` runs, over what was traced before it started."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn(*args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak - base


def peak_over_input(fn, x):
    """Peak bytes traced while ``fn(x)`` runs (NumPy reports its buffers), over x.nbytes."""
    return peak_bytes(fn, x) / x.nbytes


def memory_report(n):
    x = np.random.default_rng(1).uniform(-2.0, 2.0, n)
    g = grad(chain)
    check("elementwise chain", chain_hand(x[:1000]), g(x[:1000]), "hand")  # builds g, too
    print(f"peak memory of an elementwise chain over {n:.0e} float64 ({x.nbytes / 2**20:.0f} MiB),"
          " tracemalloc peak / input bytes:")
    for name, fn in (("function", chain), ("symdiff grad", g), ("hand grad", chain_hand)):
        print(f"  {name:13s} {peak_over_input(fn, x):5.2f}x")


CHILD = """\
import importlib.util, json, sys, time
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("bench_compare", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
import symdiff
imported = time.perf_counter()
{statement}
done = time.perf_counter()
print(json.dumps([imported - start, done - imported, "sympy" in sys.modules]))
"""
# What the child runs: case 2's gradient, built (or found in the disk cache) and called.
CHAIN_GRAD = 'symdiff.grad(module.chain10, wrt=("x", "y", "z"))(0.3, 0.5, 0.7)'


def child(cache_dir, statement):
    """Run ``statement`` in a fresh process importing this file as ``module`` (and
    symdiff): ``(wall, import time, the statement's time, whether SymPy was imported)``."""
    env = dict(os.environ, SYMDIFF_CACHE_DIR=cache_dir)
    code = CHILD.format(path=str(Path(__file__).resolve()), statement=statement)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    wall = time.perf_counter() - start
    import_time, call_time, sympy_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    return wall, import_time, call_time, sympy_loaded


def disk_cache_report(tries):
    if importlib.util.find_spec("symdiff.cache") is None:
        print("disk cache: not available yet")
        return
    with tempfile.TemporaryDirectory() as cache_dir:
        cold = child(cache_dir, CHAIN_GRAD)  # builds, and fills the cache
        warm = min((child(cache_dir, CHAIN_GRAD) for _ in range(tries)), key=lambda r: r[0])
        base = min((child(cache_dir, "pass") for _ in range(tries)), key=lambda r: r[0])
    print("disk cache, case 2 in a fresh `python -c` process (SYMDIFF_CACHE_DIR a temp dir):")
    for what, (wall, imp, call, sympy_loaded) in (("miss (first process)", cold),
                                                   ("hit (cache warmed)", warm)):
        print(f"  {what:20s} process wall {fmt(wall)}; in it: imports {fmt(imp)}, "
              f"grad(chain10)(...) {fmt(call)}; 'sympy' in sys.modules: {sympy_loaded}")
    print(f"  {'no grad (baseline)':20s} process wall {fmt(base[0])}; imports {fmt(base[1])}")


# --- main ---


def load_others():
    """JAX (CPU, float64) and autograd, where installed; a note for each that is not."""
    others = {}
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        import jax
        import jax.numpy as jnp
    except ImportError as e:
        print(f"note: JAX skipped ({e}); pip install -e '.[bench]'")
    else:
        jax.config.update("jax_enable_x64", True)
        others["jax"] = (jax, jnp)
    try:
        import autograd.numpy as anp
        from autograd import grad as agrad
        from autograd.tracer import getval
    except ImportError as e:
        print(f"note: autograd skipped ({e}); pip install -e '.[bench]'")
    else:
        others["autograd"] = (agrad, anp, getval)
    return others


def environment(others):
    import sympy

    from symdiff import __version__ as symdiff_version

    parts = [f"Python {sys.version.split()[0]}", f"NumPy {np.__version__}",
             f"SymPy {sympy.__version__}", f"symdiff {symdiff_version}"]
    if "jax" in others:
        jax = others["jax"][0]
        parts.append(f"JAX {jax.__version__} on {jax.devices()[0].platform}")
    if "autograd" in others:
        from importlib.metadata import version

        parts.append(f"autograd {version('autograd')}")
    print(", ".join(parts))
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        blas = "threadpoolctl not installed"
    else:
        blas = "; ".join(f"{i['internal_api']} {i.get('version')} kernel {i.get('architecture')}, "
                         f"{i['num_threads']} threads" for i in threadpool_info()
                         if i["user_api"] == "blas")
    coretype = os.environ.get("OPENBLAS_CORETYPE", "unset")
    print(f"BLAS: {blas}; OPENBLAS_CORETYPE={coretype}; {os.cpu_count()} cores; "
          f"{load_average()}")


def load_average():
    """Other work on the machine skews every number: say how busy it was."""
    try:
        return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:  # not available on this platform
        return "load average unknown"


COLUMNS = ("f", "symdiff", "hand", "jax", "autograd")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="sizes and repeats shrunk 10x: a smoke run of a few seconds")
    opts = parser.parse_args(argv)
    scale = 10 if opts.quick else 1
    target = 0.02 if opts.quick else 0.2  # seconds per measurement
    rounds = 3 if opts.quick else 7
    budget = 0.5 if opts.quick else 8.0  # seconds of timing per case, roughly
    os.environ["SYMDIFF_CACHE_DIR"] = "off"  # builds here are real; the disk cache has its own
    import sympy  # noqa: F401 - imported up front: build times exclude SymPy's import

    others = load_others()
    environment(others)
    build_report(builds=2 if opts.quick else 4)
    print()
    head = (f"{'case':38s}" + "".join(f"{c:>10s}" for c in COLUMNS)
            + f"{'sd/f':>8s}{'sd/hand':>8s}{'jax/sd':>8s}{'ag/sd':>8s}{'mem':>8s}{'rounds':>7s}")
    print("time per call (min over rounds); sd = symdiff; jax/sd and ag/sd: how many times "
          "faster symdiff is; mem: symdiff's peak memory over the hand-written gradient's")
    print(head)
    for title, f, wrt, args, hand in cases(scale):
        g = grad(f, wrt=wrt)
        ref = g(*args)
        contenders = {"f": (f, args), "symdiff": (g, args), "hand": (hand, args)}
        contenders.update(contenders_of_others(f, wrt, args, others))
        for name in ("hand", "jax", "autograd"):
            if name in contenders:
                fn, fargs = contenders[name]
                check(title, fn(*fargs), ref, name)
        best, done = time_side_by_side(contenders, target, rounds, budget)
        t = {c: best.get(c) for c in COLUMNS}
        # Peak memory of one call each, symdiff's over the hand-written gradient's (where
        # the hand-written one needs a megabyte at least: else it is Python's small change).
        hand_peak = peak_bytes(hand, *args)
        memory = f"{peak_bytes(g, *args) / hand_peak:.2f}x" if hand_peak >= 2**20 else "-"
        print(f"{title:38s}" + "".join(f"{fmt(t[c]):>10s}" for c in COLUMNS)
              + f"{ratio(t['symdiff'], t['f']):>8s}{ratio(t['symdiff'], t['hand']):>8s}"
              + f"{ratio(t['jax'], t['symdiff']):>8s}{ratio(t['autograd'], t['symdiff']):>8s}"
              + f"{memory:>8s}{done:>7d}", flush=True)
    print()
    overhead_report(target, rounds)
    print()
    memory_report(10_000_000 // scale)
    print()
    disk_cache_report(tries=1 if opts.quick else 3)
    print(f"\nat the end: {load_average()}")


if __name__ == "__main__":
    main()
