"""Array operations: every row of rules.ARRAY_OPS against central differences, and conventions;
reductions, indexing, linear algebra, stacking and empty arrays."""

import warnings

import numpy as np
import pytest
from gradcheck import agrees, check_grad, equals, load

from symdiff import SymdiffError, grad, rules, value_and_grad

# One or more cases per array row: (source of the body over x, y, shapes of x and y).
CASES = {
    "np.sum": [("np.sum(x ** 2)", (3, 4)), ("np.sum(np.sin(x), axis=0) @ y", (3, 4), (4,)),
               ("np.sum(np.sin(x), axis=(0, 2), keepdims=True).sum()", (2, 3, 4)),
               ("x.sum(1).sum() * 2", (3, 4)), ("np.sum(x * y)", (3, 1), (1, 4))],
    "np.mean": [("np.mean(x ** 2)", (3, 4)), ("np.sum(np.mean(x ** 3, axis=-1))", (3, 4)),
                ("x.mean(axis=0, keepdims=True).sum()", (3, 4))],
    "np.prod": [("np.prod(x)", (4,)), ("np.sum(np.prod(x, axis=1))", (3, 4)),
                ("x.prod()", (2, 2))],
    "np.max": [("np.max(x ** 2)", (5,)), ("np.sum(np.max(x, axis=0) * y)", (3, 4), (4,)),
               ("x.max(axis=1, keepdims=True).sum()", (3, 4))],
    "np.min": [("np.min(x ** 2)", (5,)), ("np.sum(np.min(x, axis=1))", (3, 4)),
               ("x.min()", (3, 4))],
    "np.var": [("np.var(x)", (6,)), ("np.sum(np.var(x, axis=0, ddof=1))", (4, 3)),
               ("x.var(axis=1).sum()", (3, 4))],
    "np.std": [("np.std(x)", (6,)), ("np.sum(np.std(x, axis=1, keepdims=True))", (3, 4)),
               ("x.std(ddof=1)", (5,))],
    "np.cumsum": [("np.sum(np.cumsum(x) * y)", (3, 4), (12,)),
                  ("np.sum(x.cumsum(axis=1) ** 2)", (3, 4))],
    "np.diff": [("np.sum(np.diff(x, 2, axis=0) * y)", (4, 3), (2, 3))],
    "np.cumprod": [("np.sum(np.cumprod(x, 1) * y)", (3, 4), (3, 4)),
                   ("np.sum(x.cumprod())", (5,))],
    "np.nansum": [("np.sum(np.nansum(x, axis=0) * y)", (3, 4), (4,))],
    "np.nanmean": [("np.sum(np.nanmean(x, 1, keepdims=True) * y)", (3, 4), (3, 1))],
    "np.linalg.norm": [("np.linalg.norm(x)", (5,)), ("np.linalg.norm(x)", (3, 4)),
                       ("np.sum(np.linalg.norm(x, axis=1))", (3, 4))],
    "np.matmul": [("np.sum((x @ y) ** 2)", (3, 4), (4, 2)), ("x @ y", (4,), (4,)),
                  ("np.sum(np.sin(x @ y))", (3, 4), (4,)), ("np.sum(x @ y)", (4,), (4, 3)),
                  ("np.sum(np.matmul(x, y) ** 2)", (2, 3, 4), (4, 5)),
                  ("np.sum((x @ y) ** 2)", (2, 3, 4), (2, 4, 2))],
    "np.dot": [("np.sum(np.dot(x, y) ** 2)", (3, 4), (4, 2)), ("np.dot(x, y)", (4,), (4,)),
               ("x.dot(y).sum()", (3, 4), (4,)), ("np.sum(np.dot(x, y))", (), (3,))],
    "np.inner": [("np.inner(x, y)", (4,), (4,)), ("np.sum(np.inner(x, y) ** 2)", (2, 4), (3, 4))],
    "np.outer": [("np.sum(np.outer(x, y) ** 2)", (3,), (4,))],
    "np.einsum": [("np.sum(np.einsum('ij,jk->ik', x, y) ** 2)", (3, 4), (4, 2)),
                  ("np.einsum('ij,ij->', x, y)", (3, 4), (3, 4)),
                  ("np.sum(np.einsum('ij->i', x) ** 2)", (3, 4))],
    "np.trace": [("np.trace(x) ** 2", (3, 3)), ("np.trace(x, 1) ** 2", (3, 4)),
                 ("np.sum(np.trace(x, -1, 1, 2) * y)", (2, 3, 4), (2,)),
                 ("x.trace(offset=-2) ** 2", (4, 3))],
    "np.diagonal": [("np.sum(np.diagonal(x) * y)", (3, 4), (3,)),
                    ("np.sum(np.diagonal(x, -1, 2, 0) * y)", (3, 4, 2), (4, 1)),
                    ("np.sum(x.diagonal(offset=2) ** 3)", (3, 4))],
    "np.diag": [("np.sum(np.diag(x) * y)", (3,), (3, 3)),
                ("np.sum(np.diag(x, -1) * y)", (3,), (4, 4)),
                ("np.sum(np.diag(x, k=1) * y)", (3, 4), (3,))],
    "np.triu": [("np.sum(np.triu(x) * y)", (3, 4), (3, 4)),
                ("np.sum(np.triu(x, 1) * y)", (4,), (4, 4)),
                ("np.sum(np.triu(x, k=-1) * y)", (2, 3, 3), (2, 3, 3))],
    "np.tril": [("np.sum(np.tril(x) * y)", (4, 3), (4, 3)),
                ("np.sum(np.tril(x, -1) * y)", (4,), (4, 4))],
    "np.cross": [("np.sum(np.cross(x, y) ** 2)", (3,), (3,)),
                 ("np.sum(np.cross(x, y) ** 2)", (4, 3), (3,)),
                 ("np.sum(np.cross(x, y) ** 3)", (2, 1, 3), (4, 3))],
    "np.kron": [("np.sum(np.kron(x, y) ** 2)", (2, 3), (4, 2)),
                ("np.sum(np.kron(x, y) ** 2)", (3,), (2,)),
                ("np.sum(np.kron(x, y) ** 2)", (3,), (2, 2))],
    "np.tensordot": [("np.sum(np.tensordot(x, y) ** 2)", (2, 3, 4), (3, 4, 2)),
                     ("np.sum(np.tensordot(x, y, 1) ** 2)", (2, 3), (3, 4)),
                     ("np.sum(np.tensordot(x, y, axes=([2, 0], [0, 1])) ** 2)", (2, 3, 4),
                      (4, 2, 5)),
                     ("np.sum(np.tensordot(x, y, axes=(1, 0)) ** 2)", (2, 3), (3, 4)),
                     ("np.sum(np.tensordot(x, y, 0) ** 2)", (2,), (3,))],
    "np.transpose": [("np.sum(np.transpose(x) * y)", (3, 4), (4, 3)),
                     ("np.sum(np.transpose(x, (2, 0, 1)) * y)", (2, 3, 4), (4, 2, 3)),
                     ("np.sum(x.T * y)", (3, 4), (4, 3)),
                     ("np.sum(x.transpose(1, 0) * y)", (3, 4), (4, 3))],
    "np.reshape": [("np.sum(np.reshape(x, (4, 3)) * y)", (3, 4), (4, 3)),
                   ("np.sum(x.reshape(-1, 2) ** 3)", (3, 4)),
                   ("np.sum(x.reshape((2, 6)) ** 3)", (3, 4))],
    "np.ravel": [("np.sum(np.ravel(x) * y)", (3, 4), (12,)),
                 ("np.sum(x.flatten() * y)", (3, 4), (12,)), ("np.sum(x.ravel() ** 3)", (2, 2))],
    "np.squeeze": [("np.sum(np.squeeze(x) * y)", (3, 1), (3,)),
                   ("np.sum(x.squeeze(axis=1) ** 3)", (3, 1))],
    "np.expand_dims": [("np.sum(np.expand_dims(x, 1) * y)", (3,), (3, 4))],
    "np.broadcast_to": [("np.sum(np.broadcast_to(x, (3, 4)) * y)", (4,), (3, 4))],
    "np.tile": [("np.sum(np.tile(x, (2, 3)) * y)", (2, 2), (4, 6)),
                ("np.sum(np.tile(x, 3) * y)", (2,), (6,))],
    "np.flip": [("np.sum(np.flip(x) * y)", (3, 4), (3, 4)),
                ("np.sum(np.flip(x, axis=0) * y)", (3, 4), (3, 4))],
    "np.moveaxis": [("np.sum(np.moveaxis(x, 0, -1) * y)", (2, 3, 4), (3, 4, 2))],
    "np.swapaxes": [("np.sum(np.swapaxes(x, 0, 2) * y)", (2, 3, 4), (4, 3, 2)),
                    ("np.sum(x.swapaxes(1, 0) * y)", (2, 3), (3, 2))],
    "np.rollaxis": [("np.sum(np.rollaxis(x, 2) * y)", (2, 3, 4), (4, 2, 3)),
                    ("np.sum(np.rollaxis(x, 0, 3) * y)", (2, 3, 4), (3, 4, 2))],
    "np.atleast_1d": [("np.sum(np.atleast_1d(x) * y)", (), (1,))],
    "np.atleast_2d": [("np.sum(np.atleast_2d(x) * y)", (3,), (1, 3))],
    "np.atleast_3d": [("np.sum(np.atleast_3d(x) * y)", (3, 2), (3, 2, 1))],
    "np.flipud": [("np.sum(np.flipud(x) * y)", (3, 4), (3, 4))],
    "np.fliplr": [("np.sum(np.fliplr(x) * y)", (3, 4), (3, 4))],
    "np.roll": [("np.sum(np.roll(x, 1) * y)", (3, 4), (3, 4)),
                ("np.sum(np.roll(x, -2, axis=1) * y)", (3, 4), (3, 4))],
    "np.repeat": [("np.sum(np.repeat(x, 2) * y)", (3, 2), (12,)),
                  ("np.sum(x.repeat([2, 0, 1], axis=0) * y)", (3, 2), (3, 2))],
    "np.concatenate": [("np.sum(np.concatenate([x, y, x]) ** 2)", (3,), (2,)),
                       ("np.sum(np.concatenate([x, y], axis=1) ** 3)", (2, 3), (2, 2))],
    "np.stack": [("np.sum(np.stack([x, y], axis=1) ** 3)", (3,), (3,)),
                 ("np.sum(np.stack([x, x * y]) ** 3)", (2, 3), (2, 3))],
    "np.hstack": [("np.sum(np.hstack([x, y]) ** 3)", (3,), (2,)),
                  ("np.sum(np.hstack([x, y]) ** 3)", (2, 3), (2, 1))],
    "np.vstack": [("np.sum(np.vstack([x, y]) ** 3)", (3,), (3,)),
                  ("np.sum(np.vstack([x, y]) ** 3)", (2, 3), (1, 3))],
    "np.full": [("np.sum(np.full((2, 3), x) * y)", (), (2, 3)),
                ("np.sum(np.full((2, 3), x) ** 2)", (3,))],
    "np.full_like": [("np.sum(np.full_like(y, x) * y)", (), (2, 3)),
                     ("np.sum(np.full_like(x, 2.0) * x) + np.sum(np.full_like(x, y) ** 2)",
                      (3,), ())],
    "np.arange": [("np.sum(np.arange(x, 3.0, y) ** 2)", (), ()),
                  ("np.sum(np.arange(x, 2.0 + x) * y)", (), (2,))],
    "np.linspace": [("np.sum(np.sin(np.linspace(x, y, 5)))", (), ()),
                    ("np.sum(np.linspace(x, y, 4, axis=1) ** 2)", (3,), (3,)),
                    ("np.sum(np.linspace(x, y, num=3, endpoint=False) ** 3)", (2,), ())],
    "np.where": [("np.sum(np.where(x > 0, x ** 2, np.sin(y)))", (3, 4), (3, 4)),
                 ("np.sum(np.where(x > y, x, y) ** 2)", (3, 1), (1, 4)),
                 ("np.sum(np.where(x > 0, x, 0.0))", (5,))],
    "np.gradient": [("np.sum(np.gradient(x) * y)", (6,), (6,)),
                    ("np.sum(np.gradient(x, 0.5, axis=1, edge_order=2) * y)", (3, 4), (3, 4))],
    "np.take": [("np.sum(np.take(x, [0, 2, 2], axis=1) * y)", (3, 4), (3, 3)),
                ("np.sum(x.take([[1, 0], [3, 3]]) ** 2)", (2, 2))],
    "np.take_along_axis": [("np.sum(np.take_along_axis(x, np.argsort(y, 1), 1) * y)", (3, 4),
                            (3, 4))],
    "np.pad": [("np.sum(np.pad(x, ((1, 2), (0, 1)), 'reflect') * y)", (3, 4), (6, 5)),
               ("np.sum(np.pad(y, 1, constant_values=x) ** 2)", (), (2, 3))],
    "np.sort": [("np.sum(np.sort(x) * y)", (3, 4), (3, 4)),
                ("np.sum(np.sort(x, axis=None) * y)", (3, 4), (12,))],
    "np.partition": [("np.sum(np.partition(x, 2) * y)", (6,), (6,))],
    "np.average": [("np.average(x, weights=y)", (5,), (5,)),
                   ("np.sum(np.average(x, 1, y) ** 2)", (3, 4), (4,))],
    "np.column_stack": [("np.sum(np.column_stack([x, y]) ** 3)", (3,), (3, 2))],
    "np.dstack": [("np.sum(np.dstack([x, y]) ** 3)", (2, 3), (2, 3))],
    "np.append": [("np.sum(np.append(x, y) ** 3)", (2, 2), (3,)),
                  ("np.sum(np.append(x, y, axis=1) ** 3)", (2, 2), (2, 1))],
    "np.rot90": [("np.sum(np.rot90(x) * y)", (3, 4), (4, 3)),
                 ("np.sum(np.rot90(x, -3, (1, 2)) * y)", (2, 3, 4), (2, 4, 3))],
    "np.select": [("np.sum(np.select([x > 0, y > 0], [x ** 2, y], x) ** 2)", (3, 4), (3, 4))],
    "np.nan_to_num": [("np.sum(np.nan_to_num(x) * y)", (3, 4), (3, 4))],
    "np.copy": [("np.sum(np.copy(x) * y)", (3, 4), (3, 4)), ("np.sum(x.copy() ** 3)", (5,))],
    "scipy.special.logsumexp": [("logsumexp(x)", (5,)),
                                ("np.sum(logsumexp(x, axis=1) * y)", (3, 4), (3,)),
                                ("logsumexp(x, b=y ** 2)", (3, 4), (4,)),
                                ("np.sum(logsumexp(x, 1, y ** 2) ** 2)", (3, 4), (3, 1)),
                                ("logsumexp(x, b=y ** 2, keepdims=True)[0, 0]", (4,), (3, 4)),
                                ("np.sum(logsumexp(x, 0, return_sign=True)[0] * y)",
                                 (3, 4), (4,)),
                                ("np.sum(logsumexp(x, 1, y - 0.5, return_sign=True)[0] ** 2)",
                                 (3, 4), (3, 4))],
    "scipy.special.softmax": [("np.sum(scipy.special.softmax(x) * y)", (5,), (5,)),
                              ("np.sum(scipy.special.softmax(x, axis=1) * y)", (3, 4), (4,)),
                              ("np.sum(scipy.special.softmax(x, axis=(0, 1)) ** 2)", (3, 4))],
    "scipy.special.log_softmax": [
        ("np.sum(scipy.special.log_softmax(x) * y)", (5,), (5,)),
        ("np.sum(scipy.special.log_softmax(x, 0) * y)", (3, 4), (3, 1)),
        ("np.sum(scipy.special.log_softmax(x, axis=(0, 1)) ** 2)", (3, 4))],
    "scipy.linalg.cho_factor": [("np.sum(np.log(np.diag(scipy.linalg.cho_factor(x @ x.T + "
                                 "3 * np.eye(3), lower=True)[0])))", (3, 3))],
    "scipy.linalg.cho_solve": [("np.sum(scipy.linalg.cho_solve(scipy.linalg.cho_factor("
                                "x @ x.T + 3 * np.eye(3)), y) ** 2)", (3, 3), (3, 2))],
    # Functions returning several values (symmetric or shifted matrices where needed).
    "np.linalg.slogdet": [("np.linalg.slogdet(x + 4 * np.eye(3))[1]", (3, 3)),
                          ("np.sum(np.linalg.slogdet(x + 4 * np.eye(3))[1] * y)", (2, 3, 3),
                           (2,))],
    "np.linalg.eigh": [("np.sum(np.linalg.eigh(x + x.T)[0] * y)", (4, 4), (4,)),
                       ("np.sum(np.linalg.eigh(x @ x.T, 'U')[1] ** 3 * y)", (3, 3), (3, 3))],
    "np.linalg.eigvalsh": [("np.sum(np.linalg.eigvalsh(x) ** 2 * y)", (2, 3, 3), (3,))],
    "np.linalg.svd": [("np.sum(np.linalg.svd(x, compute_uv=False) * y)", (4, 3), (3,)),
                      ("np.sum(np.linalg.svd(x, full_matrices=False)[0] ** 3)", (4, 3))],
    "np.linalg.qr": [("np.sum(np.linalg.qr(x)[1] * y)", (4, 3), (3, 3))],
    "np.linalg.lstsq": [("np.sum(np.linalg.lstsq(x, y, rcond=None)[0] ** 2)", (5, 3), (5,))],
    "np.split": [("np.sum(np.split(x, 2)[0] * np.split(x, 2)[1] ** 2)", (4,)),
                 ("np.sum(np.split(x, [1], axis=1)[1] * y)", (3, 4), (3, 3))],
    "np.array_split": [("np.sum(np.array_split(x, 3)[2] ** 3)", (7,))],
    "np.hsplit": [("np.sum(np.hsplit(x, 2)[1] * y)", (3, 4), (3, 2))],
    "np.vsplit": [("np.sum(np.vsplit(x, [1])[1] ** 3)", (3, 4))],
    "np.dsplit": [("np.sum(np.dsplit(x, 2)[0] ** 3)", (2, 1, 4))],
    "x[...]": [("np.sum(x[1:] ** 2)", (5,)), ("np.sum(x[:, 0] * y)", (3, 4), (3,)),
               ("np.sum(x[::2, -1] ** 3)", (5, 3)), ("x[2] * x[-1]", (4,)),
               ("x[1, 2] ** 2", (3, 4)), ("np.sum(x[[0, 0, 2]] ** 3)", (4,)),
               ("np.sum(x[x > 0] ** 3)", (6,)), ("np.sum(x[:, None] * y)", (3,), (3, 4)),
               ("np.sum(x[:, np.newaxis] * y)", (3,), (3, 4)),
               ("np.sum(x[:-1] * x[1:])", (6,))],
    # (linear algebra on well-conditioned matrices: x + 4 I, or SPD x @ x.T + 3 I)
    "np.linalg.inv": [("np.sum(np.sin(np.linalg.inv(x + 4 * np.eye(3))))", (3, 3)),
                      ("np.sum(np.linalg.inv(x + 4 * np.eye(3)) * y)", (2, 3, 3), (2, 3, 3))],
    "np.linalg.solve": [("np.sum(np.sin(np.linalg.solve(x + 4 * np.eye(3), y)))", (3, 3), (3,)),
                        ("np.sum(np.linalg.solve(x + 4 * np.eye(3), y) ** 2)", (2, 3, 3),
                         (3, 2)),
                        ("np.sum(np.linalg.solve(x + 4 * np.eye(3), y) ** 2)", (3, 3),
                         (2, 3, 1))],
    "np.linalg.det": [("np.linalg.det(x)", (3, 3)),
                      ("np.sum(np.linalg.det(x) * y)", (2, 3, 3), (2,))],
    "np.linalg.pinv": [("np.sum(np.sin(np.linalg.pinv(x)))", (4, 2)),
                       ("np.sum(np.linalg.pinv(x) * y)", (2, 2, 3), (2, 3, 2))],
    "np.linalg.cholesky": [
        ("np.sum(np.sin(np.linalg.cholesky(x @ x.T + 3 * np.eye(3))))", (3, 3)),
        ("np.sum(np.linalg.cholesky(x @ np.swapaxes(x, -1, -2) + 3 * np.eye(3), upper=True)"
         " * y)", (2, 3, 3), (3, 3))],
    "np.linalg.matrix_power": [
        ("np.sum(np.linalg.matrix_power(x, 3) * y)", (3, 3), (3, 3)),
        ("np.sum(np.linalg.matrix_power(x + 4 * np.eye(3), -2) * y)", (2, 3, 3), (3, 3))],
    "np.linalg.multi_dot": [("np.sum(np.linalg.multi_dot([x, y, x.T]) ** 2)", (2, 3), (3, 3)),
                            ("np.linalg.multi_dot([y, x, x.T, y])", (3, 3), (3,))],
    "scipy.linalg.solve_triangular": [
        ("np.sum(np.sin(scipy.linalg.solve_triangular(x + 4 * np.eye(3), y)))", (3, 3), (3,)),
        ("np.sum(scipy.linalg.solve_triangular(x + 4 * np.eye(3), y, trans='T', lower=True)"
         " ** 2)", (3, 3), (3, 2))],
    "scipy.linalg.solve": [
        ("np.sum(np.sin(scipy.linalg.solve(x + 4 * np.eye(3), y)))", (3, 3), (3,)),
        ("np.sum(scipy.linalg.solve(x + 4 * np.eye(3), y, transposed=True) ** 2)", (3, 3),
         (3, 2)),
        ("np.sum(scipy.linalg.solve(x @ x.T + 3 * np.eye(3), y, assume_a='pos') ** 2)", (3, 3),
         (3,))],
    "scipy.linalg.inv": [("np.sum(np.sin(scipy.linalg.inv(x + 4 * np.eye(3))))", (3, 3))],
    "scipy.linalg.det": [("scipy.linalg.det(x)", (3, 3))],
    "scipy.linalg.cholesky": [
        ("np.sum(np.sin(scipy.linalg.cholesky(x @ x.T + 3 * np.eye(3))))", (3, 3)),
        ("np.sum(scipy.linalg.cholesky(x @ x.T + 3 * np.eye(3), lower=True) * y)", (3, 3),
         (3, 3))],
    # building arrays from values (issue 13)
    "np.array": [("np.sum(np.array([x, y * x]) ** 2)", (3,), (3,)),
                 ("np.sum(np.array([[x[0], 1.0], (x[1] * y, y)]) ** 3)", (2,), ()),
                 ("np.sum(np.array(x, dtype=float) * y)", (2, 3), (3,))],
    "np.asarray": [("np.sum(np.asarray(x) * y)", (3,), (3,)),
                   ("np.sum(np.asarray((x[0], y, 2.0)) ** 3)", (2,), ())],
    "[...]": [("np.sum(np.sum([x, y], axis=0) ** 2)", (3,), (3,)),
              ("np.sum(x * [1.0, y])", (2,), ()), ("np.sum((x, x * y))", (), ())],
    "np.ndarray.astype": [("np.sum(x.astype(float) * y)", (3,), (3,)),
                          ("np.sum(x.astype(np.float64) ** 3)", (2, 2))],
    "sum(iterable)": [("np.sum(sum(x) ** 2)", (3, 2)), ("np.sum(sum([x, y]) ** 2)", (3,), ()),
                      ("np.sum(sum(x, y) ** 2)", (2, 3), (3,)),
                      ("sum((x, y * y, 1.0), start=y)", (), ())],
    "max(iterable)": [("max([x[0], x[1] * y, y])", (2,), ()), ("max(x ** 2)", (4,)),
                      ("max(x, y, x * y)", (), ())],
    "min(iterable)": [("min((x[0], y))", (2,), ()), ("min(x) * y", (4,), ())],
}

# scipy.stats and scipy.signal (issue 13): positive rates, an SPD covariance, points on the
# simplex, made from x and y.
_SPD = "x @ x.T + np.eye(3)"
_SIMPLEX = "np.exp(x) / np.sum(np.exp(x), axis=0)"
CASES.update({
    **{f"scipy.stats.poisson.{m}": [
        (f"np.sum(scipy.stats.poisson.{m}(np.array([0.0, 1.0, 3.0, 5.0]), x ** 2 + 0.5))",
         (4,)),
        (f"np.sum(scipy.stats.poisson.{m}(np.array([[1.0], [4.0]]), x ** 2 + 1.0, 1.0))",
         (3,))] for m in ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf")},
    **{f"scipy.stats.multivariate_normal.{m}": [
        (f"np.sum(scipy.stats.multivariate_normal.{m}(x, y, np.eye(3) * 2.0))", (4, 3), (3,)),
        (f"scipy.stats.multivariate_normal.{m}(y, np.sin(y), {_SPD})", (3, 3), (3,)),
        (f"np.sum(scipy.stats.multivariate_normal.{m}(x, np.ones(3), cov=y ** 2 + 1.0))",
         (2, 3), (3,))]
       for m in ("logpdf", "pdf")},
    **{f"scipy.stats.dirichlet.{m}": [
        (f"scipy.stats.dirichlet.{m}({_SIMPLEX}, y ** 2 + 1.0)", (3,), (3,)),
        (f"np.sum(scipy.stats.dirichlet.{m}({_SIMPLEX}, y ** 2 + 1.0))", (3, 2), (3,))]
       for m in ("logpdf", "pdf")},
    **{f"scipy.signal.{how}": [
        (f"np.sum(np.sin(scipy.signal.{how}(x, y)))", (5,), (3,)),
        (f"np.sum(np.sin(scipy.signal.{how}(x, y, 'same')))", (3, 4), (2, 3)),
        (f"np.sum(np.sin(scipy.signal.{how}(x, y, mode='valid', method='direct')))",
         (2, 3), (4, 5))] for how in ("convolve", "correlate")},
})

HEADER = ("import numpy as np\nimport scipy.linalg\nimport scipy.signal\nimport scipy.special\n"
          "import scipy.stats\n"
          "from scipy.special import logsumexp\n")


def _cases():
    for name, cases in CASES.items():
        for k, (body, *shapes) in enumerate(cases):
            yield pytest.param(name, body, shapes, id=f"{name}-{k}")


def test_every_array_rule_has_cases():
    rows = {row.names[0] for row in rules.ARRAY_OPS} | {rules.INDEX.names[0]}
    assert rows == set(CASES)


@pytest.mark.parametrize("name,body,shapes", list(_cases()))
def test_array_rule_matches_central_differences(name, body, shapes):
    pytest.importorskip("scipy")
    rng = np.random.default_rng(abs(hash(body)) % 2**32)
    params = ["x", "y"][: len(shapes)]
    f = load(HEADER + f"def f({', '.join(params)}):\n    return {body}\n", "f")
    args = tuple(rng.uniform(0.5, 1.5, s) * rng.choice([-1, 1], s) if s else 0.7
                 for s in shapes)
    if name == "np.prod":
        args = (rng.uniform(0.5, 1.5, shapes[0]),)
    check_grad(f, args, wrt=tuple(range(len(args))))


def test_max_and_min_split_ties_equally():
    f = load(HEADER + "def f(x):\n    return np.max(x)\ndef g(x):\n"
             "    return np.sum(np.min(x, axis=1))\n")
    np.testing.assert_allclose(grad(f.f)(np.array([1.0, 3.0, 3.0, 3.0])), [0, 1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(grad(f.g)(np.array([[1.0, 1.0], [0.0, 2.0]])),
                               [[0.5, 0.5], [1.0, 0.0]])


def test_prod_is_exact_at_zeros():
    f = load(HEADER + "def f(x):\n    return np.prod(x)\n", "f")
    np.testing.assert_allclose(grad(f)(np.array([2.0, 0.0, 3.0])), [0.0, 6.0, 0.0])
    np.testing.assert_allclose(grad(f)(np.array([0.0, 0.0, 3.0])), [0.0, 0.0, 0.0])


def test_repeated_integer_indices_accumulate():
    f = load(HEADER + "def f(x):\n    return np.sum(x[np.array([0, 0, 0, 2])])\n", "f")
    np.testing.assert_allclose(grad(f)(np.ones(3)), [3.0, 0.0, 1.0])


def test_several_indexings_of_one_array_add_up_in_place_and_right():
    f = load(HEADER + """
def f(x):
    return np.sum(x[1:] ** 2 * x[:-1]) + np.sum(x[np.array([0, 0, 2])] * 3.0) + \\
        np.sum(x[x > 0.5] ** 3)
""", "f")
    assert "_scatter_add(dx, " in grad(f).source
    x = np.array([0.3, 0.9, -0.4, 1.2])
    check_grad(f, (x,))
    expected = np.zeros(4)
    expected[1:] += 2 * x[1:] * x[:-1]
    expected[:-1] += x[1:] ** 2
    np.add.at(expected, [0, 0, 2], 3.0)  # the repeated index gets both
    expected[x > 0.5] += 3 * x[x > 0.5] ** 2
    np.testing.assert_allclose(grad(f)(x), expected, rtol=1e-12)


def test_scatter_add_adds_in_place_only_into_an_array_of_its_own():
    from symdiff.runtime import _scatter_add

    x = np.zeros(3)
    owned = np.ones(3)
    assert _scatter_add(owned, 2.0, x, np.index_exp[1:]) is owned
    np.testing.assert_allclose(owned, [1.0, 3.0, 3.0])
    for acc in (np.broadcast_to(np.ones(1), (3,)), np.ones(3, dtype=int), np.ones(6)[::2],
                np.ones((1, 3))):
        before = acc.copy()
        out = _scatter_add(acc, 0.5, x, np.index_exp[[0, 0]])
        assert out is not acc and out.dtype == np.float64
        np.testing.assert_array_equal(acc, before)
        np.testing.assert_allclose(out, before + [1.0, 0.0, 0.0])


def test_add_to_adds_in_place_only_into_an_array_of_its_own():
    from symdiff.runtime import _add_to

    owned = np.ones(3)
    assert _add_to(owned, np.full(3, 2.0)) is owned and _add_to(owned, 1.0) is owned
    np.testing.assert_allclose(owned, [4.0, 4.0, 4.0])
    rows = np.zeros((2, 3))  # a smaller addend spreads; a float32 one fits float64
    assert _add_to(rows, np.ones(3, dtype=np.float32)) is rows
    assert _add_to(rows, np.arange(2.0)[:, None]) is rows
    np.testing.assert_allclose(rows, [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    for acc, g in ((np.broadcast_to(np.ones(1), (3,)), 0.5), (np.ones(3, dtype=int), 0.5),
                   (np.ones(6)[::2], 0.5), (np.ones(3), np.ones((2, 3))), (1.0, np.ones(3)),
                   (np.ones(3, dtype=np.float32), np.full(3, 1e-9)),
                   (np.ones((2, 3), dtype=np.float32).T, np.ones((3, 2), dtype=np.float32)),
                   (np.ones(3), [1.0, 2.0, 3.0]), (np.ones(3), np.ones(3) * 1j)):
        before = np.array(acc, copy=True)
        out = _add_to(acc, g)
        assert out is not acc and out.dtype == np.result_type(acc, np.asarray(g))
        np.testing.assert_array_equal(acc, before)
        np.testing.assert_allclose(out, before + g)
    # None: nothing has flowed back yet; the sum is then g, in an array of its own (g may be
    # another adjoint's array, which a later addition must not write into).
    g = np.ones(3)
    out = _add_to(None, g)
    assert out is not g and not np.shares_memory(out, g)
    np.testing.assert_array_equal(out, g)
    assert _add_to(None, 2.5) == 2.5


def test_gradients_handed_on_unchanged_are_never_one_array_twice():
    f = load(HEADER + """
def both(a, b):
    s = a + b
    return np.sum(np.sin(s))

def one(z, w):
    s = z - w
    t = s[1:] * 2.0
    return np.sum(np.sin(s)) + np.sum(t)
""")
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    da, db = grad(f.both, wrt=(0, 1))(a, b)
    assert da is not db and not np.shares_memory(da, db)
    np.testing.assert_allclose(da, np.cos(a + b))
    da += 1.0
    np.testing.assert_allclose(db, np.cos(a + b))
    dz, dw = grad(f.one, wrt=(0, 1))(a, b)
    expected = np.cos(a - b) + np.r_[0.0, 2.0, 2.0, 2.0]
    np.testing.assert_allclose(dz, expected)
    np.testing.assert_allclose(dw, -expected)
    assert not np.shares_memory(dz, dw)


def test_values_without_gradient_run_as_they_are():
    f = load(HEADER + """
def f(x):
    n = x.shape[0]
    z = np.zeros_like(x) + np.ones(x.shape) * x.ndim + len(x) + x.size
    i = np.argmax(x)
    r = np.arange(n) * 1.0 + np.linspace(0, 1, n) + np.eye(n)[0]
    return np.sum(x * z + r * x) + x[i] ** 2
""", "f")
    x = np.array([0.3, 0.9, -0.2])
    check_grad(f, (x,))


def test_axis_must_not_depend_on_the_differentiated_input():
    f = load(HEADER + "def f(x, k):\n    return np.sum(np.sum(x, axis=k))\n", "f")
    with pytest.raises(SymdiffError, match="axis must not depend on the differentiated"):
        grad(f, wrt=("x", "k")).source  # noqa: B018


def test_unsupported_numpy_function_names_it_and_the_table():
    f = load(HEADER + "def f(x):\n    return np.sum(np.unwrap(x))\n", "f")
    with pytest.raises(SymdiffError) as e:
        grad(f).source  # noqa: B018
    assert "np.unwrap is not supported" in str(e.value)
    assert "supported instead: the NumPy and math functions: `symdiff coverage` lists them" \
        in str(e.value)


def test_out_and_dtype_arguments_are_refused():
    f = load(HEADER + "def f(x):\n    return np.sum(x, dtype=np.int32)\n", "f")
    with pytest.raises(SymdiffError, match=r"np.sum\(..., dtype=...\) is not supported"):
        grad(f).source  # noqa: B018


RNG = np.random.default_rng(20240601)
V3 = np.array([0.5, -1.2, 2.0])
V4 = np.array([0.5, -1.2, 2.0, 0.8])
M34 = RNG.standard_normal((3, 4))
M45 = RNG.standard_normal((4, 5))
M33 = RNG.standard_normal((3, 3))
B234 = RNG.standard_normal((2, 3, 4))
B245 = RNG.standard_normal((2, 4, 5))
C333 = RNG.standard_normal((3, 3, 3))


# --- reductions -------------------------------------------------------------------------

REDUCE = load("""
import numpy as np

def negative_axis(a):
    return np.sum(np.sum(a, axis=-1) ** 2)

def tuple_axis(a):
    return np.sum(np.sum(a, axis=(0, -1)) ** 2)

def keepdims(a):
    return np.sum(a / np.sum(a * a, axis=-1, keepdims=True))

def mean_keepdims(a):
    return np.sum(np.mean(a, axis=-1, keepdims=True) ** 2 * a)

def max_axis(a):
    return np.sum(np.max(a, axis=-1) ** 2) + np.sum(np.min(a, axis=(0, -1), keepdims=True) * a)

def var_std(a):
    return np.var(a, axis=-1).sum() + np.std(a, axis=0, ddof=1).sum()

def prod_axis(a):
    return np.sum(np.prod(a, axis=-2))

def methods(a):
    return a.sum(axis=-1).max() + a.mean(-1).sum() + a.max(0).sum() + a.std(ddof=1)

def norm_axis(a):
    return np.sum(np.linalg.norm(a, axis=-1)) + np.linalg.norm(a, 'fro')

def prod_with_zeros(a):
    return np.sum(np.prod(a, axis=-1, keepdims=True) * np.arange(2.0).reshape(2, 1)) + a.prod()
""")


@pytest.mark.parametrize("name, arg", [
    ("negative_axis", M34), ("negative_axis", V4), ("tuple_axis", B234), ("keepdims", M34),
    ("mean_keepdims", M34), ("max_axis", M34), ("var_std", M34), ("prod_axis", M34),
    ("methods", M34), ("norm_axis", M34),
])
def test_reductions(name, arg):
    agrees(getattr(REDUCE, name), (arg,))


def test_prod_with_zeros():
    a = np.array([[0.0, 2.0], [3.0, 4.0]])
    equals(REDUCE.prod_with_zeros, (a,), (np.array([[24.0, 0.0], [4.0, 3.0]]),))


# --- indexing ---------------------------------------------------------------------------

INDEX = load("""
import numpy as np

IDX = np.array([0, 2, 2, -1])

def negative_steps(v):
    return np.sum(v[::-2] * v[::-1][:3] ** 2)

def repeated_list(v):
    return np.sum(v[[0, 0, 1, -1, -1]] ** 2)

def repeated_array(v):
    return np.sum(v[IDX] ** 2) + np.sum(v[np.array([3, 3, 0])] ** 3)

def boolean_mask(v):
    return np.sum(v[v > 0] ** 2) + np.sum(v[[True, False, True, True, False, True]] ** 3)

def newaxis(v):
    return np.sum(v[None] * v[:, None])

def ellipsis(T):
    return np.sum(T[..., 0] ** 2 + T[0, ...].sum()) + np.sum(T[..., 1:3, None] ** 3)

def ellipsis_list(T):
    return np.sum(T[..., [0, 0]] ** 2) + np.sum(T[..., None, 1] ** 2)

def scalars(v):
    return v[-1] * v[0] * v[-1]

def two_dim(M):
    return (np.sum(M[1] * M[:, 2].sum()) + M[-1, -1] ** 2 + np.sum(M[[0, 2], [1, 1]] ** 2)
            + np.sum(M[1:, [0, 0, 3]] ** 2) + np.sum(M[[[0, 0], [1, 0]]] ** 2))

def two_dim_masks(M):
    return np.sum(M[M > 0.1] ** 2) + np.sum(M[:, M[0] > 0] ** 3)

def empty_slices(v):
    return np.sum(v[3:3] * 2.0) + np.sum(v[10:]) + v[0] + np.sum(v[range(2)] ** 2)

def variable_index(v):
    i = 2
    j = -1
    return v[i] * v[j] + v[i:j].sum()

def tuple_in_index(M):
    return np.sum(M[(0, 0), :] ** 2)

def tuple_in_index_1d(v):
    return np.sum(v[(1, 1),] ** 2)
""")


V6 = np.array([0.5, -1.2, 2.0, 0.8, -0.3, 1.1])


@pytest.mark.parametrize("name, arg", [
    ("negative_steps", V6), ("repeated_list", V6), ("repeated_array", V6),
    ("boolean_mask", V6), ("newaxis", V6), ("ellipsis", B234), ("ellipsis_list", B234),
    ("scalars", V6), ("two_dim", M34), ("two_dim_masks", M34), ("empty_slices", V6),
    ("variable_index", V6),
])
def test_indexing(name, arg):
    agrees(getattr(INDEX, name), (arg,))


@pytest.mark.parametrize("name, arg", [("tuple_in_index", M34), ("tuple_in_index_1d", V6)])
def test_repeated_indices_in_a_tuple(name, arg):
    agrees(getattr(INDEX, name), (arg,))


# --- linear algebra and shape operations ------------------------------------------------

LINALG = load("""
import numpy as np

W27 = np.arange(27.0).reshape(3, 3, 3)

def matmul(a, b):
    return np.sum(np.sin(a @ b))

def dot(a, b):
    return np.sum(np.sin(np.dot(a, b)))

def dot_method(a, b):
    return np.sum(np.cos(a.dot(b)))

def inner(a, b):
    return np.sum(np.sin(np.inner(a, b)))

def outer(a, b):
    return np.sum(np.sin(np.outer(a, b)))

def einsum(spec, a, b):
    return np.sum(np.sin(np.einsum(spec, a, b)))

def einsum_one(a):
    return np.sum(np.sin(np.einsum("ij->ji", a)) * np.einsum("ij->", a))

def einsum_same_twice(a):
    return np.sum(np.einsum("ij,ij->i", a, a) ** 2)

def einsum_three(a, b, c):
    return np.sum(np.einsum("ij,jk,kl->il", a, b, c) ** 2)

def reshape(a):
    return np.sum(np.sin(a.reshape(-1, 2)) * np.arange(6.0).reshape(3, 2)
                  + np.reshape(a, (2, -1)).sum(0).sum())

def concatenate_same(a):
    return np.sum(np.concatenate([a, a, a * 2]) ** 2 * np.arange(9.0))

def concatenate_axis(a):
    return np.sum(np.concatenate([a, a[:, :2]], axis=-1) ** 2)

def stack_same(a):
    return (np.sum(np.stack([a, a], axis=-1) ** 2 * np.arange(2.0))
            + np.sum(np.stack((a, 2 * a), axis=-2) ** 3))

def h_v_stack(a):
    return np.sum(np.hstack([a, a]) ** 2) + np.sum(np.vstack([a, a, a[0]]) ** 3)

def h_v_stack_1d(v):
    return np.sum(np.hstack([v, v[:2], 1.0 * v[0]]) ** 2) + np.sum(np.vstack([v, v]) ** 3)

def stack_scalars(v):
    return (np.sum(np.stack([v[0], v[2]]) ** 2 * np.arange(2.0))
            + np.sum(np.vstack([v[0], v[1]]) ** 2 * np.arange(2.0).reshape(2, 1)))

def trace(a):
    return np.trace(a @ a.T) + np.trace(a[:, :3]) ** 2

def tile(a):
    return np.sum(np.tile(a, (2, 1, 3)) ** 2 * np.arange(6.0)) + np.sum(np.tile(a, 3) ** 3)

def flip(a):
    return np.sum(np.flip(a, -1) * np.arange(4.0) + np.flip(a) * a)

def transpose(b):
    return (np.sum(np.transpose(b, (2, 0, 1)) * np.arange(24.0).reshape(4, 2, 3))
            + np.sum(b.T ** 2 * np.arange(2.0)))

def squeeze_expand(a):
    return (np.sum(np.squeeze(a[:, None, :, None], axis=(1, -1)) ** 2 * np.arange(4.0))
            + np.sum(np.expand_dims(a, (0, -1)) ** 3))

def broadcast_to(a):
    return np.sum(np.broadcast_to(a, (2, 3, 4)) ** 2 * np.arange(2.0).reshape(2, 1, 1))

def ravel_flatten(a):
    return np.sum(np.ravel(a) * np.arange(12.0)) + np.sum(a.flatten() ** 2)

def transpose_negative(b):
    return np.sum(np.transpose(b, (-1, 0, 1)) * W27)

def einsum_repeated_index(a):
    return np.einsum("ii->", a) ** 2

def einsum_diagonal(a):
    return np.sum(np.einsum("ii->i", a) * np.arange(3.0))

def einsum_implicit(a, b):
    return np.sum(np.einsum("ij,jk", a, b) ** 2)

def einsum_ellipsis(a, b):
    return np.sum(np.einsum("...ij,...jk->...ik", a, b) ** 2)

def trace_3d(b):
    return np.sum(np.trace(b) * np.arange(3.0))

def hstack_scalar_first(v):
    return np.sum(np.hstack([v[0], v[1] * 2, v]) ** 2 * np.arange(5.0))

def concatenate_flat(a):
    return np.sum(np.concatenate([a, a[:1]], axis=None) ** 2 * np.arange(16.0))

def dot_3d(a, b):
    return np.sum(np.dot(a, b) ** 2)
""")


V5 = RNG.standard_normal(5)


@pytest.mark.parametrize("name, args, wrt", [
    ("matmul", (V4, M45), (0, 1)), ("matmul", (M34, V4), (0, 1)), ("matmul", (V4, V4), (0, 1)),
    ("matmul", (B234, B245), (0, 1)), ("matmul", (M34, B245), (0, 1)),
    ("matmul", (B234, V4), (0, 1)), ("matmul", (V3, B234), (0, 1)),
    ("dot", (V4, M45), (0, 1)), ("dot", (M34, V4), (0, 1)), ("dot", (2.0, M34), (0, 1)),
    ("dot", (V3, V3), (0, 1)), ("dot_method", (M34, M45), (0, 1)),
    ("inner", (M34, M34), (0, 1)), ("inner", (V4, M34), (0, 1)), ("inner", (B234, V4), (0, 1)),
    ("outer", (M34, V3), (0, 1)),
    ("einsum", ("ij,jk->ik", M34, M45), (1, 2)), ("einsum", ("ij,j->i", M34, V4), (1, 2)),
    ("einsum", ("i,j->ij", V3, V4), (1, 2)), ("einsum", ("ij,kl->", M34, M45), (1, 2)),
    ("einsum", ("bij,bjk->bik", B234, B245), (1, 2)), ("einsum", ("ij,ij->", M34, M34), (1, 2)),
    ("einsum", ("ij,ji->j", M34, M34.T.copy()), (1, 2)),
    ("einsum_one", (M34,), (0,)), ("einsum_same_twice", (M34,), (0,)),
    ("einsum_three", (M34[:2, :3], M34[:, :4], M45[:, :2]), (0, 1, 2)),
    ("reshape", (M34[:2, :3].copy(),), (0,)),
    ("concatenate_same", (V3,), (0,)), ("concatenate_axis", (M34,), (0,)),
    ("stack_same", (M34,), (0,)), ("h_v_stack", (M34,), (0,)), ("h_v_stack_1d", (V4,), (0,)),
    ("stack_scalars", (V3,), (0,)), ("trace", (M34,), (0,)),
    ("tile", (M34[:2, :2].copy(),), (0,)), ("flip", (M34,), (0,)),
    ("transpose", (B234,), (0,)), ("squeeze_expand", (M34,), (0,)),
    ("broadcast_to", (M34,), (0,)), ("broadcast_to", (V4,), (0,)),
    ("ravel_flatten", (M34,), (0,)),
])
def test_linear_algebra_and_shapes(name, args, wrt):
    agrees(getattr(LINALG, name), args, wrt)


def test_transpose_with_negative_axes():
    agrees(LINALG.transpose_negative, (C333,))


@pytest.mark.parametrize("name, args", [
    ("einsum_repeated_index", (M33,)), ("einsum_diagonal", (M33,)),
    ("einsum_implicit", (M34, M45)), ("einsum_ellipsis", (B234, B245)),
])
def test_einsum_with_diagonals_implicit_output_and_ellipsis(name, args):
    check_grad(getattr(LINALG, name), args, wrt=tuple(range(len(args))))


def test_trace_of_3d_array():
    agrees(LINALG.trace_3d, (C333,))


@pytest.mark.parametrize("name, arg", [("hstack_scalar_first", V3),
                                       ("concatenate_flat", M34)])
def test_stacking_edge_cases(name, arg):
    agrees(getattr(LINALG, name), (arg,))


def test_dot_of_3d_array_is_a_tensordot():
    """np.dot of a stack: a's last axis with b's second-to-last, as NumPy defines it."""
    check_grad(LINALG.dot_3d, [B234, RNG.standard_normal((4, 2))], wrt=(0, 1))


# --- products of vectors and matrices of known ndim: one line of NumPy ---------------------

# (function, arguments, the adjoint lines it must read as)
PRODUCTS = [
    ("matmul", (M34, V4), ["da = np.multiply.outer(d_t0, b)", "db = d_t0 @ a"]),
    ("matmul", (V3, M34), ["da = b @ d_t0", "db = np.multiply.outer(a, d_t0)"]),
    ("matmul", (M34, M45), ["da = d_t0 @ b.T", "db = a.T @ d_t0"]),
    ("matmul", (V4, V4), ["da = d_t0 * b", "db = d_t0 * a"]),
    ("dot", (M34, V4), ["da = np.multiply.outer(d_t0, b)", "db = d_t0 @ a"]),
    ("dot_method", (M34, M45), ["da = d_t0 @ b.T", "db = a.T @ d_t0"]),
    ("outer", (V3, V4), ["da = d_t0 @ b", "db = a @ d_t0"]),
    ("inner", (V4, V4), ["da = d_t0 * b", "db = d_t0 * a"]),
    ("inner", (M34, V4), ["da = np.multiply.outer(d_t0, b)", "db = d_t0 @ a"]),
    ("inner", (V4, M34), ["da = d_t0 @ b", "db = np.multiply.outer(d_t0, a)"]),
    ("inner", (M34, M34[:2]), ["da = d_t0 @ b", "db = d_t0.T @ a"]),
]


def _adjoint_lines(source):
    return [line.strip() for line in source.splitlines() if line.strip().startswith("d")]


@pytest.mark.parametrize(("name", "args", "lines"), PRODUCTS,
                         ids=[f"{n}-{np.ndim(a)}d-{np.ndim(b)}d" for n, (a, b), _ in PRODUCTS])
def test_products_of_known_ndim_are_one_line_of_numpy(name, args, lines):
    f = getattr(LINALG, name)
    g = grad(f, wrt=(0, 1))
    source = g.source_for(*args)
    assert "_matmul_grad" not in source and "_dot_grad" not in source
    assert "_outer_grad" not in source and "_inner_grad" not in source
    for line in lines:
        assert any(line in text for text in _adjoint_lines(source)), (line, source)
    agrees(f, args, (0, 1))
    # The build for arrays of any ndim (the helpers) gives the same gradients.
    for ours, general in zip(g(*args), g.__wrapped__(*args), strict=True):
        np.testing.assert_allclose(ours, general, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("args", [
    (M33, M33), (M34.astype(np.float32), V4), (V3.astype(np.float32), M34.astype(np.float32)),
    (M34, np.array([1, -2, 0, 3])), (np.array([[1, 2, 0, 3], [0, 1, -1, 2]]), V4),
], ids=["one-array-twice", "float32-and-float64", "float32", "int-vector", "int-matrix"])
def test_products_of_known_ndim_of_other_dtypes_and_one_array_twice(args):
    # contract_grads: float32 stays float32, integers give float64, nothing shared
    agrees(LINALG.matmul, args, (0, 1))


def test_the_product_helpers_hand_out_arrays_of_their_own():
    # _fit copies a view it is handed: the general helper gives none for vectors and
    # matrices (a 1000 x 500 adjoint was a k=1 product reshaped, then copied).
    from symdiff.runtime import _matmul_grad, _outer_grad
    for a, b in [(M34, V4), (V3, M34), (M34, M45)]:
        g = np.ones(np.shape(a @ b))
        for which in (0, 1):
            d = _matmul_grad(g, a, b, which)
            assert d.flags.owndata and d.shape == np.shape((a, b)[which])
    for which in (0, 1):
        assert _outer_grad(np.ones((3, 4)), V3, V4, which).flags.owndata


NORMS = load("""
import numpy as np

def vector(v, order):
    return np.linalg.norm(v, order)

def matrix(m, order):
    return np.linalg.norm(m, order)

def rows(m):
    return np.sum(np.linalg.norm(m, 1, axis=1))
""")


@pytest.mark.parametrize("name, args", [
    ("vector", (V4, 1)), ("vector", (V4, np.inf)), ("vector", (V4, 3)),
    ("matrix", (M34, 2)), ("matrix", (M34, "nuc")), ("rows", (M34,)),
])
def test_norm_orders(name, args):
    f = getattr(NORMS, name)
    try:
        g = grad(f)(*args)
    except SymdiffError:
        return
    check_grad(f, args, grads=(g,))


POSITIONAL = load("""
import numpy as np
from scipy.special import logsumexp

W = np.arange(3.0)

def sum_dtype(m):
    return np.sum(np.sum(m, 1, float) * W)

def mean_dtype(m):
    return np.sum(np.mean(m, 1, float) * W)

def sum_method_dtype(m):
    return np.sum(m.sum(1, float) * W)

def logsumexp_b(x):
    return logsumexp(x, 0, 2.0)
""")


@pytest.mark.parametrize("name", ["sum_dtype", "mean_dtype", "sum_method_dtype"])
def test_third_positional_argument_of_reductions(name):
    # NumPy's third positional parameter is dtype (or out): refused, located, not misread.
    with pytest.raises(SymdiffError, match="by position here"):
        grad(getattr(POSITIONAL, name))(M33)


def test_logsumexp_positional_weight():
    # The third positional argument is the weight b, as SciPy reads it (not keepdims).
    check_grad(POSITIONAL.logsumexp_b, (V3,))


EMPTY = load("""
import numpy as np

def sum_of_squares(x):
    return np.sum(x ** 2)

def mean(x):
    return np.mean(x)

def norm(x):
    return np.linalg.norm(x)

def dot(x):
    return np.dot(x, x)

def matmul(x):
    return x @ x

def outer(x):
    return np.sum(np.outer(x, x))

def einsum(x):
    return np.einsum('i,i->', x, x)

def concatenate(x):
    return np.sum(np.concatenate([x, x]) ** 2)

def stack(x):
    return np.sum(np.stack([x, x]) ** 2)

def where(x):
    return np.sum(np.where(x > 0, x, 0.0))

def mask(x):
    return np.sum(x[x > 0])

def tile(x):
    return np.sum(np.tile(x, 2))

def loop(x):
    s = 0.0
    for v in x:
        s = s + v
    return s

def flip(x):
    return np.sum(np.flip(x) * x)

def rows(X):
    s = 0.0
    for r in X:
        s = s + np.sum(r ** 2)
    return s

def logsumexp_rows(X):
    return np.sum(np.log(np.sum(np.exp(X), axis=1)))

def mean_rows(X):
    return np.sum(np.mean(X, axis=1))

def trace(X):
    return np.trace(X)

def prod(x):
    return np.prod(x)

def prod_rows(X):
    return np.sum(np.prod(X, axis=1))
""")


@pytest.mark.parametrize("name, arg", [
    *[(n, np.zeros(0)) for n in ("sum_of_squares", "mean", "norm", "dot", "matmul", "outer",
                                 "einsum", "concatenate", "stack", "where", "mask", "tile",
                                 "loop", "flip")],
    *[(n, a) for n in ("rows", "logsumexp_rows", "mean_rows", "trace")
      for a in (np.zeros((0, 3)), np.zeros((3, 0)))],
])
def test_empty_arrays(name, arg):
    f = getattr(EMPTY, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        value, g = value_and_grad(f)(arg)
        np.testing.assert_array_equal(value, f(arg))
    assert isinstance(g, np.ndarray) and g.shape == arg.shape and g.dtype == np.float64


@pytest.mark.parametrize("name, arg", [("prod", np.zeros(0)), ("prod_rows", np.zeros((3, 0))),
                                       ("prod_rows", np.zeros((0, 3)))])
def test_prod_of_empty_arrays(name, arg):
    g = grad(getattr(EMPTY, name))(arg)
    assert isinstance(g, np.ndarray) and g.shape == arg.shape and g.dtype == np.float64


UNPACKED = load("""
import numpy as np

PAIR = (2.0, 3.0)

def shape(A, x):
    n, m = A.shape
    p, q = PAIR
    s = 0.0
    for i in range(n):
        s = s + np.sum(A[i] ** 2) * m * p + x * n * q
    return s

def rows(A):
    a, b = A
    return np.sum(a * b ** 2)

def rows_of(A, k):
    if k > 0:
        a, b = A.T * 2.0
    else:
        b, a = A.T
    a, b = b, a
    return np.sum(np.sin(a) * b)

def columns(A):
    a, b = A.T
    n, = a.shape
    return np.sum(a * b) * n

def in_a_loop(A, n):
    s = 0.0
    for i in range(n):
        r, c = A.shape
        a, b = A
        s = s + np.sum(a) * r + np.sum(b * b * c)
    return s
""")


def test_a_shape_unpacked_binds_numbers_without_gradient():
    for A in (np.arange(1.0, 7.0).reshape(2, 3), np.ones((3, 1))):
        check_grad(UNPACKED.shape, (A, 1.5), wrt=(0, 1))
    source = grad(UNPACKED.shape, wrt=(0, 1)).source
    assert "_t0, _t1 = A.shape  # line 7" in source  # the shape itself is unpacked, as written


def test_an_array_unpacked_into_its_rows():
    A = np.arange(1.0, 7.0).reshape(2, 3)
    check_grad(UNPACKED.rows, (A,))
    check_grad(UNPACKED.rows, (np.array([0.5, -2.0]),))
    for k in (0, 1):
        check_grad(UNPACKED.rows_of, (np.arange(1.0, 5.0).reshape(2, 2) / 3, k))
    for n in (0, 1, 3):
        check_grad(UNPACKED.in_a_loop, (A, n))
    # a = A.T[0] renames the temporary that held it; the shape's temporary reuses the name,
    # and was once taken for the differentiated array: n = a.shape[0] unpacked as rows.
    check_grad(UNPACKED.columns, (A.T.copy(),))


@pytest.mark.parametrize(("f", "args"), [
    (UNPACKED.shape, (np.ones((2, 2, 2)), 1.0)), (UNPACKED.rows, (np.ones((3, 2)),)),
    (UNPACKED.rows, (np.ones((1, 2)),)), (UNPACKED.rows, (1.0,))])
def test_unpacking_a_value_of_another_length_fails_as_python_does(f, args):
    with pytest.raises(Exception) as expected:
        f(*args)
    with pytest.raises(type(expected.value)) as got:
        grad(f)(*args)
    assert str(got.value) == str(expected.value)


PAIRS = load('''
import numpy as np

def pairs(X):
    D = X[:, None, :] - X[None, :, :]
    return np.sum(np.sin(D) * D)

def halves(x, y):
    c = np.cos(x - 2.0 * y)
    return np.sum(c * c)

def spread(z, t):
    return np.sum(np.exp(z)) - np.sum(t * z)
''')


def test_a_number_multiplies_after_the_sum_down():
    # -dD summed down would negate the whole (n, n, 3) array first; the sum's result is
    # negated instead (and 2.0 * y's factor multiplies y's own shape). Where a number is
    # spread to a larger shape, it is multiplied before: -t, spread, not t spread, negated.
    g = grad(PAIRS.pairs)
    assert "_unbroadcast(-" not in g.source and "-_unbroadcast(dD, " in g.source
    X = np.random.default_rng(3).uniform(-1.0, 1.0, (4, 3))
    check_grad(PAIRS.pairs, (X,))
    h = grad(PAIRS.halves, wrt=(0, 1))
    assert "2*_unbroadcast(" in h.source
    x, y = np.linspace(-1.0, 1.0, 6).reshape(2, 3), np.array([0.2, -0.4, 0.9])
    check_grad(PAIRS.halves, (x, y), wrt=(0, 1))
    check_grad(PAIRS.halves, (x, 0.3), wrt=(0, 1))
    assert "_unbroadcast(-t, z, (t, z))" in grad(PAIRS.spread).source
    check_grad(PAIRS.spread, (x, y))
def test_the_adjoint_of_an_index_that_only_inserts_axes_is_the_adjoint_reshaped():
    from symdiff.runtime import _scatter, _scatter_add

    x = np.arange(6.0).reshape(2, 3)
    g = np.arange(6.0).reshape(1, 2, 3) + 1.0
    for index in (np.index_exp[None, :, :], np.index_exp[None], np.index_exp[None, ...],
                  np.index_exp[:, None], np.index_exp[..., None, :]):
        adjoint = np.reshape(g, np.shape(x[index]))
        out = _scatter(adjoint, x, index)
        assert out.shape == x.shape and out.dtype == np.float64
        assert np.shares_memory(out, adjoint)  # no zeros to place it in: the same entries
        np.testing.assert_array_equal(out, g.reshape(2, 3))
    # an index that leaves entries out, or a g of another dtype: zeros with g placed in them
    np.testing.assert_array_equal(_scatter(np.ones((1, 3)), x, np.index_exp[None, 0, :]),
                                  [[1, 1, 1], [0, 0, 0]])
    assert _scatter(g.astype(np.float32), x, np.index_exp[None]).dtype == np.float64
    # a view: added to, it is not written into (the adjoint it views may be read again)
    view = _scatter(g, x, np.index_exp[None])
    total = _scatter_add(view, g[0, :, :, None], x, np.index_exp[:, :, None])
    np.testing.assert_array_equal(total, 2 * g.reshape(2, 3))
    np.testing.assert_array_equal(g, np.arange(6.0).reshape(1, 2, 3) + 1.0)


INSERTED = load(HEADER + """
def pairs(X):
    D = X[:, None, :] - X[None, :, :]
    return np.sum(np.sin(D) ** 2)

def pairs_and_rows(X):
    D = X[:, None, :] - X[None, :, :]
    return np.sum(D ** 2 * X[None]) + np.sum(X[..., None] ** 3)

def of_a_number(x):
    return np.sum(x[None, None] * np.arange(3.0))
""")


@pytest.mark.parametrize("name, x", [
    ("pairs", np.linspace(-1.0, 2.0, 12).reshape(4, 3)),
    ("pairs", np.linspace(-1.0, 2.0, 24).reshape(4, 6)[:, ::2]),  # not contiguous
    ("pairs", np.linspace(-1.0, 2.0, 12).reshape(4, 3)[::-1]),  # negative strides
    ("pairs", np.zeros((0, 3))),
    ("pairs_and_rows", np.linspace(-1.0, 2.0, 12).reshape(4, 3)),
    ("pairs_and_rows", np.linspace(-1.0, 2.0, 12).reshape(4, 3)[::-1, ::-1]),
    ("of_a_number", np.array(0.7)),
])
def test_indexes_that_only_insert_axes(name, x):
    f = getattr(INSERTED, name)
    got = grad(f)(x)
    assert got.shape == x.shape and got.dtype == np.float64
    if x.size:
        check_grad(f, (x,))
    # float32 gives float32, integers float64, and the argument is left as it was
    x32 = x.astype(np.float32)
    got32 = grad(f)(x32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, got, rtol=1e-4, atol=1e-4)
    before = x.copy()
    grad(f)(x)
    np.testing.assert_array_equal(x, before)
    xi = np.round(x * 2)
    got_int = grad(f)(xi.astype(int))
    assert np.result_type(got_int) == np.float64
    np.testing.assert_allclose(got_int, grad(f)(xi))


def test_a_reshaped_product_is_handed_out_without_a_copy_only_when_nothing_else_holds_it():
    from symdiff.runtime import _fit

    def reshaped_product():
        return np.reshape(np.ones((3, 4)) @ np.ones((4, 5)), (15,))

    g = reshaped_product()
    assert _fit(g, np.zeros(15)) is g
    held = np.ones(15)
    for view in (held.reshape(3, 5), held[::-1].reshape(3, 5), np.ones((5, 3)).T,
                 np.broadcast_to(held, (2, 15))[0].reshape(3, 5)):
        out = _fit(view, np.zeros((3, 5)))
        assert out is not view and not np.shares_memory(out, view)
        np.testing.assert_array_equal(out, view)
    two = reshaped_product()
    other = two.reshape(5, 3)  # a second view of the same product
    assert _fit(two, np.zeros(15)) is not two
    assert _fit(other, np.zeros((5, 3))) is not other


@pytest.mark.parametrize("shape", [(7,), (7, 3), (1,), (0,), (0, 2), (5, 2, 2)])
def test_the_adjoint_of_a_slice_is_zeros_with_the_adjoint_in_its_rows(shape):
    # a run of rows is placed in an array whose other rows only are zeroed: every slice
    # (negative, empty, past the ends, with a step) gives np.zeros with g assigned
    from symdiff.runtime import _scatter

    x = np.zeros(shape)
    rng = np.random.default_rng(3)
    bounds = [None, 0, 1, 3, -1, -3, 9, -9]
    for start, stop, step in [(a, b, c) for a in bounds for b in bounds for c in (None, 2, -1)]:
        index = np.index_exp[start:stop:step]
        for g in (rng.standard_normal(x[index].shape), 2.5,
                  np.ones(x[index].shape, dtype=np.float32)):
            want = np.zeros(shape)
            want[index] = g
            got = _scatter(g, x, index)
            assert got.dtype == np.float64
            np.testing.assert_array_equal(got, want, err_msg=str(index))


# --- the run-time helpers' fast paths give what NumPy's general rules give ---


def _summed_to(g, shape):
    """g summed down to ``shape`` by NumPy's broadcasting rules (the reference)."""
    g = np.asarray(g)
    g = np.sum(g, axis=tuple(range(g.ndim - len(shape)))) if g.ndim > len(shape) else g
    ones = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    return np.broadcast_to(np.sum(g, axis=ones, keepdims=True), shape)


@pytest.mark.parametrize("g_shape, x_shape, like", [
    ((3, 4), (3, 4), [(3, 4), (3, 4)]),  # every operand of g's shape: the fast path
    ((3, 4), (1, 4), [(3, 4), (1, 4)]),
    ((4,), (3, 1), [(3, 1), (4,)]),  # g missing the axis the operands broadcast to
    ((), (), [(), ()]),
    ((1, 4), (4,), [(1, 4), (1, 4), (4,)]),
    ((2, 1, 3), (2, 5, 3), [(2, 5, 3), (2, 1, 3)]),  # spread out, not summed
    ((3, 1), (3, 1), [(3, 4), (3, 1)]),  # g of x's shape, left without the factor of ones
    ((3, 4), (3, 4), [(3, 4), "number"]),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unbroadcast_with_operands_is_numpy_broadcasting(g_shape, x_shape, like, dtype):
    from symdiff.runtime import _Shape, _unbroadcast

    g = np.arange(1.0, 1.0 + np.prod(g_shape)).reshape(g_shape).astype(dtype)
    shapes = [() if s == "number" else s for s in like]
    operands = [2.0 if s == "number" else np.ones(s) if i % 2 else _Shape(s)
                for i, s in enumerate(like)]
    full = np.broadcast_shapes(*shapes)
    want = _summed_to(np.broadcast_to(g, full), x_shape)
    for x in (np.ones(x_shape), _Shape(x_shape)):
        got = _unbroadcast(g, x, tuple(operands))
        assert np.shape(got) == x_shape and np.asarray(got).dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("shapes", [[(3,), (3,)], [(2, 3), (3,)], [(2, 1), (1, 3)], [(), ()],
                                    [(3,), 2.0], [(1,), (4,)], [(2,), (3,)]])
def test_shape_of_is_numpy_broadcasting(shapes):
    from symdiff.runtime import _Shape, _shape_of

    values = [s if type(s) is float else np.ones(s) for s in shapes]
    values += [_Shape(np.shape(values[0]))]
    try:
        want = np.broadcast_shapes(*map(np.shape, values))
    except ValueError:
        with pytest.raises(ValueError):
            _shape_of(*values)
        return
    assert _shape_of(*values).shape == want
    assert _shape_of(*values[::-1]).shape == want


@pytest.mark.parametrize("x_shape, index", [
    ((5,), np.index_exp[1:]), ((5,), np.index_exp[:-1]), ((5,), np.index_exp[:]),
    ((5,), np.index_exp[3:1]), ((5,), np.index_exp[::2]), ((5, 2), np.index_exp[1:, 0]),
    ((5, 2), np.index_exp[2:4]), ((5,), np.index_exp[[0, 0, 3]]), ((5,), np.index_exp[2]),
    ((4, 3), np.index_exp[[1, 1], :]), ((1,), np.index_exp[0:1]), ((), np.index_exp[()]),
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scatter_and_scatter_add_are_numpy_add_at(x_shape, index, dtype):
    from symdiff.runtime import _scatter, _scatter_add

    x = np.ones(x_shape, dtype)
    shape = x[index].shape
    g = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape).astype(dtype)
    want = np.zeros(x_shape)
    np.add.at(want, index, g)
    got = _scatter(g, x, index)
    assert got.shape == x_shape and got.dtype == np.float64
    np.testing.assert_allclose(got, want)
    acc = np.full(x_shape, 0.5)
    got = _scatter_add(acc, g, x, index)
    assert got is acc  # (an array of its own, float64: added into)
    np.testing.assert_allclose(got, want + 0.5)
    narrow = np.full(x_shape, 0.5, dtype)  # (float32 acc: the float64 sum is a new array)
    got = _scatter_add(narrow, g, x, index)
    assert (got is narrow) == (dtype == np.float64) and got.dtype == np.float64
    np.testing.assert_allclose(got, want + 0.5, rtol=1e-6)
