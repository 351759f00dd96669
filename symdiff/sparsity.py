"""The columns of a sparse linear program from fewer columns: compressed seeds, checked.

A Jacobian's or a Hessian's columns are a program linear in one parameter, run at each
basis vector e_j (``batch.columns``). Where two columns have no nonzero row in common,
one run along ``e_j + e_k`` gives both: each entry is read back from the seed of its
column's colour (Curtis, Powell and Reid, 1974). A tridiagonal Hessian takes three seeds
whatever its size; a diagonal one, one.

Which entries can be nonzero (the pattern) is not read off the program: it is learnt from
the columns of full calls, so a zero that holds only at some points (a branch not taken,
a factor that vanishes there, sparse data) can be missing from it. Every compressed call
therefore runs two more columns, each along a direction of random entries, and compares
them with those directions applied to the entries read back. An entry M outside the
pattern, in a column coloured as the pattern's entry of its row in column j, is read
back into that entry: the check sees M times the difference of the direction's entries at
the two columns. So within a colour the entries are spread evenly over [1, 2) (in random
order, of random signs): no two of a colour are closer than 1/m (m: the colour's columns),
and the two directions' orders are independent. A call whose check fails runs all its
columns, as without compression, and the pattern grows by what they show. The tolerance
is 256 rounding units of the sum of the terms' sizes, per entry: a missed entry smaller
than that, divided by the larger of its two differences, escapes. After ``_FAILURES``
failed checks the program is not compressed again; nor is one whose columns are float16
(too coarse to check).
"""

from __future__ import annotations

import math

import numpy as np

_add = np.add.reduce  # (the sums over the seeds: no Python wrapper on the way)
_FAILURES = 8  # failed checks after which the columns are always run in full
_CHECKS = 2  # columns along random directions that check each compressed call


class Compression:
    """What the columns of one program at one shape have shown: their pattern, the
    colouring that compresses it, and the seeds to run (``None`` while full runs are
    needed: no pattern yet, or one that would not save runs).

    >>> import numpy as np
    >>> c = Compression((4,))
    >>> c.learn([np.diag([1.0, 2.0, 3.0, 4.0])])
    >>> c.seeds.shape  # (one seed for all four columns, and the checks' directions)
    (3, 4)
    >>> d = np.array([1.0, 2.0, 3.0, 4.0])
    >>> entries = c.rebuilt([np.vstack([d, c.seeds[1:] * d])])
    >>> full = np.zeros((4, 4))
    >>> c.write(0, entries[0], full)
    >>> full.tolist()
    [[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 4.0]]
    """

    def __init__(self, shape):
        self.shape = shape
        self.size = math.prod(shape)
        self.patterns = None  # per output: (size, its entries), True where nonzero
        self.colors = None
        self.seeds = None
        self.failures = 0
        self.dense = False  # (too dense to compress, for good)

    def learn(self, columns):
        """Take in the columns of a full call (per output, ``(size, entries)``): widen the
        pattern by their nonzero entries (NaN and infinities count), and colour it again."""
        if self.failures >= _FAILURES or self.dense:
            self.seeds = None
            return
        if any(c.dtype.itemsize < 4 for c in columns):
            self.dense = True  # (float16: its rounding would hide what the check looks for)
            return
        seen = [np.asarray(c != 0) for c in columns]
        if self.patterns is not None:
            seen = [p | s for p, s in zip(self.patterns, seen, strict=True)]
            if all(np.array_equal(p, s) for p, s in zip(self.patterns, seen, strict=True)):
                return  # (the colouring stands, and so do its seeds, or their absence)
        self.patterns = seen
        self.seeds = None
        pattern = np.concatenate(self.patterns, axis=1)
        limit = self.size // 2 - 1
        # (an entry nonzero in more columns than the limit needs more colours than that, in
        # this pattern and in every wider one it grows into)
        self.dense = limit < 1 or bool(pattern.shape[1] and pattern.sum(axis=0).max() > limit)
        self.colors = None if self.dense else _colors(pattern, limit)
        if self.colors is None:
            return
        k = int(self.colors.max()) + 1 if self.size else 0
        seeds = np.zeros((k + _CHECKS, self.size))
        seeds[self.colors, np.arange(self.size)] = 1.0
        seeds[k:] = _directions(self.colors, _CHECKS)
        self.seeds = seeds
        self._tangents = seeds.reshape((k + _CHECKS, *self.shape))
        # (per output: each entry's column and row, where it is read in the compressed
        # outputs, at each seed's entry each direction at the column the pattern has
        # there, the check's bound per dtype, and where the entry is written in a block)
        self._at = []
        for p in self.patterns:
            rows, cols = np.nonzero(p)
            weights = np.zeros((_CHECKS, k, p.shape[1]))
            weights[:, self.colors[rows], cols] = seeds[k:, rows]
            self._at.append((rows, cols, self.colors[rows] * p.shape[1] + cols, weights, {},
                             cols * self.size + rows))

    def tangents(self, start, stop):
        """Seeds start to stop, shaped as the parameter they are tangents of."""
        return self._tangents[start:stop]

    def rebuilt(self, compressed):
        """The entries of the pattern (per output, in the order ``write`` takes them) read
        back from the outputs of a compressed call (per output, ``(seeds, entries)``, the
        last the check's); None where the check fails (the caller runs the full columns
        and calls ``learn``)."""
        out = []
        for c, (_, _, src, weights, bounds, _) in zip(compressed, self._at, strict=True):
            seeded, checked = c[:-_CHECKS], c[-_CHECKS:]
            # each direction applied to the entries read back (a seed's entry at a row is
            # one entry of the pattern, weighted by the direction at its column), against
            # the tolerance times the sum of its terms' sizes: the two sides sum the same
            # products in other orders
            missed = checked - _add(seeded * weights, 1)
            bound = bounds.get(c.dtype)
            if bound is None:
                bound = bounds[c.dtype] = 256 * np.finfo(c.dtype).eps * np.abs(weights)
            if not (np.abs(missed, out=missed) <= _add(np.abs(seeded) * bound, 1)).all():
                self.failures += 1
                return None
            out.append(c.reshape(-1)[src])
        return out

    def write(self, i, entries, into):
        """Write output i's ``entries`` (from ``rebuilt``) into ``into``: C-contiguous
        zeros of its entries' shape, then the columns' (the columns along the last axes)."""
        into.reshape(-1)[self._at[i][5]] = entries


def _directions(colors, n):
    """n directions for the checks: within each colour, its columns' entries spread
    evenly over [1, 2) in a random order, each of a random sign (fixed by the colouring,
    so that a call's result does not depend on the calls before it)."""
    size = len(colors)
    rng = np.random.default_rng(size)
    counts = np.bincount(colors)
    starts = np.cumsum(counts) - counts
    out = np.empty((n, size))
    for d in out:
        order = np.lexsort((rng.random(size), colors))  # (by colour, randomly within one)
        rank = np.empty(size)
        rank[order] = np.arange(size) - starts[colors[order]]
        d[:] = (1.0 + rank / counts[colors]) * rng.choice((-1.0, 1.0), size)
    return out


def _colors(pattern, limit):
    """A colour per row of ``pattern`` (columns of the program, its entries along the
    second axis) such that no two rows of a colour share an entry: greedily, in order
    (which colours a band with its width). None where that takes more than ``limit``
    colours: fewer runs would not be saved."""
    size = pattern.shape[0]
    if limit < 1:
        return None
    taken = np.zeros((pattern.shape[1], limit), dtype=bool)
    colors = np.zeros(size, dtype=np.intp)
    for j in range(size):
        rows = np.flatnonzero(pattern[j])
        free = np.flatnonzero(~taken[rows].any(axis=0))
        if not free.size:
            return None
        colors[j] = free[0]
        taken[rows, free[0]] = True
    return colors
