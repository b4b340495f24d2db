"""np.linalg.solve/inv/det/cholesky/eigvalsh are traced (LAPACK through NumPy, one graph
with the work around them) wherever NumPy's linalg takes the operands; elsewhere they stay
graph breaks and NumPy raises its own errors."""
import numpy as np
import pytest

import numaccel

from conftest import assert_same

DTYPES = [np.float32, np.float64, np.complex64, np.complex128, np.int64]


def _spd(rng, n, dtype):
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    m = a @ a.conj().T + n * np.eye(n)
    return m.astype(dtype) if np.dtype(dtype).kind != "i" else np.round(m).astype(dtype)


def _one_graph(fn, *args, rtol=None):
    ref = fn(*args)
    f = numaccel.accelerate(fn)
    for _ in range(2):
        assert_same(f(*args), ref, rtol=rtol)
    e = f.entries[0]
    assert e.kind == "graph", numaccel.explain(f, *args)
    return f


@pytest.mark.parametrize("dtype", DTYPES)
def test_each_op_matches_numpy_without_a_break(rng, dtype):
    a = _spd(rng, 6, dtype)
    b = (rng.standard_normal((6, 3)) * 3).astype(dtype)
    rtol = 1e-3 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9
    _one_graph(lambda a, b: (np.linalg.solve(a, b), np.linalg.solve(a * 2, b[:, 0]),
                             np.linalg.inv(a), np.linalg.det(a), np.linalg.cholesky(a),
                             np.linalg.cholesky(a, upper=True), np.linalg.eigvalsh(a),
                             np.linalg.eigvalsh(a, UPLO="u")), a, b, rtol=rtol)


def test_stacks_views_mixed_dtypes_and_empty(rng):
    a = np.stack([_spd(rng, 4, np.float64) for _ in range(3)])
    _one_graph(lambda a: (np.linalg.inv(a), np.linalg.det(a), np.linalg.eigvalsh(a),
                          np.linalg.cholesky(a)), a, rtol=1e-9)
    big = _spd(rng, 8, np.float64)
    _one_graph(lambda a, b: np.linalg.solve(a[::2, ::2].T, b), big,
               rng.standard_normal(4).astype(np.float32), rtol=1e-9)
    _one_graph(lambda a: (np.linalg.inv(a), np.linalg.eigvalsh(a), np.linalg.det(a)),
               np.zeros((0, 0)))


def test_a_ridge_path_is_one_graph(rng):
    # the corpus' ridge_path_linalg pattern: a loop of solves around fused work
    def ridge(X, y, lambdas):
        Xs = (X - X.mean(axis=0)) / X.std(axis=0)
        G, rhs = Xs.T @ Xs, Xs.T @ (y - y.mean())
        coefs = np.empty((len(lambdas), X.shape[1]))
        for i, lam in enumerate(lambdas):
            coefs[i] = np.linalg.solve(G + lam * np.eye(X.shape[1]), rhs)
        ev = np.linalg.eigvalsh(G)
        return coefs, (ev[None, :] / (ev[None, :] + np.asarray(lambdas)[:, None])).sum(1)
    _one_graph(ridge, rng.standard_normal((50, 5)), rng.standard_normal(50),
               [0.1, 1.0, 10.0], rtol=1e-9)


def test_numpys_errors(rng):
    f = numaccel.accelerate(lambda a, b: np.linalg.solve(a, b) + 1)
    good = _spd(rng, 3, np.float64)
    assert_same(f(good, np.ones(3)), np.linalg.solve(good, np.ones(3)) + 1)
    with pytest.raises(np.linalg.LinAlgError):      # singular, on a cached graph
        f(np.zeros((3, 3)), np.ones(3))
    with pytest.raises(np.linalg.LinAlgError):      # singular on the first call
        numaccel.accelerate(lambda a: np.linalg.inv(a))(np.ones((2, 2)))
    with pytest.raises(np.linalg.LinAlgError):      # not square
        numaccel.accelerate(lambda a: np.linalg.det(a))(np.ones((2, 3)))
    with pytest.raises(np.linalg.LinAlgError):      # not positive definite
        numaccel.accelerate(lambda a: np.linalg.cholesky(a))(-good)
    with pytest.raises(TypeError):                  # float16: NumPy's linalg refuses it
        numaccel.accelerate(lambda a: np.linalg.inv(a))(good.astype(np.float16))
    with pytest.raises(ValueError):
        numaccel.accelerate(lambda a: np.linalg.eigvalsh(a, UPLO="X"))(good)


def test_nan_and_inf_pass_through_as_in_numpy():
    a = np.array([[np.nan, 1.0], [1.0, 2.0]])
    b = np.array([[np.inf, 0.0], [0.0, 1.0]])
    _one_graph(lambda a, b: (np.linalg.det(a), np.linalg.det(b), np.linalg.eigvalsh(a)), a, b)


def test_stacked_solve_still_runs_as_numpy(rng):
    a = np.stack([_spd(rng, 3, np.float64)] * 2)
    b = rng.standard_normal((2, 3, 1))
    f = numaccel.accelerate(lambda a, b: np.linalg.solve(a, b) * 2)
    assert_same(f(a, b), np.linalg.solve(a, b) * 2, rtol=1e-9)
    assert_same(f(a, b), np.linalg.solve(a, b) * 2, rtol=1e-9)
