"""The columns of a sparse linear program from fewer columns: compressed seeds, checked.

A Jacobian's or a Hessian's columns are a program linear in one parameter, run at each
basis vector e_j (``batch.columns``). Where two columns have no nonzero row in common,
one run along ``e_j + e_k`` gives both: each entry is read back from the seed of its
column's colour (Curtis, Powell and Reid, 1974). A tridiagonal Hessian takes three seeds
whatever its size; a diagonal one, one.

Which entries can be nonzero (the pattern) is not read off the program: it is learnt from
the columns of full calls, so a zero that holds only at some points (a branch not taken,
a factor that vanishes there) can be missing from it. Every compressed call therefore
runs one more column, along a fixed direction ``v`` of random entries, and compares it
with ``v`` applied to the entries read back: an entry outside the pattern (or a colour
mixing two entries of one row, its consequence) changes that product, unless the missed
entries and the differences of ``v``'s entries conspire to cancel, which random entries
make a null event. A call whose check fails runs all its columns, as without compression,
and the pattern grows by what they show. After ``_FAILURES`` such calls the program is
not compressed again.
"""

from __future__ import annotations

import numpy as np

_FAILURES = 8  # failed checks after which the columns are always run in full


class Compression:
    """What the columns of one program at one shape have shown: their pattern, the
    colouring that compresses it, and the seeds to run (``None`` while full runs are
    needed: no pattern yet, or one that would not save runs).

    >>> import numpy as np
    >>> c = Compression(4)
    >>> c.learn([np.diag([1.0, 2.0, 3.0, 4.0])])
    >>> c.seeds.shape  # (one seed for all four columns, and the check's direction)
    (2, 4)
    >>> [r.tolist() for r in c.rebuilt([np.array([[1.0, 2.0, 3.0, 4.0],
    ...                                           c.v * [1.0, 2.0, 3.0, 4.0]])])]
    [[[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0], [0.0, 0.0, 0.0, 4.0]]]
    """

    def __init__(self, size):
        self.size = size
        self.patterns = None  # per output: (size, its entries), True where nonzero
        self.colors = None
        self.seeds = None
        self.failures = 0
        # (fixed, so a call's result does not depend on how many calls came before;
        # entries away from zero and of both signs, distinct with probability one)
        rng = np.random.default_rng(size)
        self.v = rng.uniform(1.0, 2.0, size) * rng.choice((-1.0, 1.0), size)

    def learn(self, columns):
        """Take in the columns of a full call (per output, ``(size, entries)``): widen the
        pattern by their nonzero entries (NaN and infinities count), and colour it again."""
        if self.failures >= _FAILURES:
            self.seeds = None
            return
        seen = [np.asarray(c != 0) for c in columns]
        if self.patterns is not None:
            seen = [p | s for p, s in zip(self.patterns, seen, strict=True)]
            if all(np.array_equal(p, s) for p, s in zip(self.patterns, seen, strict=True)):
                return  # (the colouring stands, and so do its seeds, or their absence)
        self.patterns = seen
        self.seeds = None
        self.colors = _colors(np.concatenate(self.patterns, axis=1), self.size // 2 - 1)
        if self.colors is None:
            return
        k = int(self.colors.max()) + 1 if self.size else 0
        seeds = np.zeros((k + 1, self.size))
        seeds[self.colors, np.arange(self.size)] = 1.0
        seeds[k] = self.v
        self.seeds = seeds
        # (per output: each entry's column and row, where it is read in the compressed
        # outputs, and |v| at its column)
        self._at = []
        for p in self.patterns:
            rows, cols = np.nonzero(p)
            self._at.append((rows, cols, self.colors[rows] * p.shape[1] + cols,
                             np.abs(self.v[rows])))

    def rebuilt(self, compressed):
        """The full columns (per output, ``(size, entries)``) from the outputs of a
        compressed call (per output, ``(seeds, entries)``, the last the check's); None
        where the check fails (the caller runs the full columns and calls ``learn``)."""
        out = []
        for c, (rows, cols, src, weight) in zip(compressed, self._at, strict=True):
            entries = c.shape[1]
            values = c.reshape(-1)[src]
            # (H v and |v| |H| over the pattern's entries alone, not over the full columns;
            # rounding: the two sides of the check sum the same products in other orders)
            rebuilt = np.bincount(cols, weights=values * self.v[rows], minlength=entries)
            scale = np.bincount(cols, weights=np.abs(values) * weight, minlength=entries)
            checked = c[-1]
            tol = np.finfo(c.dtype).eps ** 0.75
            if not np.all(np.abs(checked - rebuilt) <= tol * (scale + np.abs(checked))):
                self.failures += 1
                return None
            # (written entry by entry along its rows: the caller moves the columns' axis
            # last, which is then a plain copy)
            full = np.zeros((entries, self.size), dtype=c.dtype)
            full[cols, rows] = values
            out.append(full.T)
        return out


def _colors(pattern, limit):
    """A colour per row of ``pattern`` (columns of the program, its entries along the
    second axis) such that no two rows of a colour share an entry: greedily, in order
    (which colours a band with its width). None where that takes more than ``limit``
    colours: fewer runs would not be saved."""
    size = pattern.shape[0]
    if limit < 1 or (pattern.shape[1] and pattern.sum(axis=0).max() > limit):
        return None  # (an entry nonzero in more columns than that needs more colours)
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
