"""GEMM tiles of numaccel.kernels_cpu.bf16_dot: float32/float64 FMA tiles, vdpbf16ps and its
portable twin, pair packing, feature switch."""
import os
import subprocess
import sys

import ml_dtypes
import numba
import numpy as np
import pytest

from numaccel.kernels_cpu import bf16_dot as bd

BF16 = ml_dtypes.bfloat16
needs_bf16 = pytest.mark.skipif(not bd.has_avx512_bf16(), reason="CPU without AVX512-BF16")

SHAPES = [(1, 1, 1), (6, 64, 64), (13, 37, 83), (7, 2, 16), (25, 130, 129), (0, 4, 5), (3, 0, 5)]


def _rand_bf16(rng, shape):
    return rng.standard_normal(shape).astype(np.float32).astype(BF16)


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_matmul_bf16_portable_matches_float64(m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, b = _rand_bf16(rng, (m, k)), _rand_bf16(rng, (k, n))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    got = bd.matmul_bf16(a, b, native=False)
    assert got.dtype == np.float32 and got.shape == (m, n)
    # products of bf16 are exact in float32; only the float32 sums round
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * max(1, k))


@needs_bf16
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_vdpbf16ps_is_bit_identical_to_portable(m, k, n):
    rng = np.random.default_rng(7 + m + k + n)
    a, b = _rand_bf16(rng, (m, k)), _rand_bf16(rng, (k, n))
    nat = bd.matmul_bf16(a, b, native=True)
    por = bd.matmul_bf16(a, b, native=False)
    np.testing.assert_array_equal(nat.view(np.uint32), por.view(np.uint32))


def test_matmul_bf16_special_values():
    a = np.array([[np.inf, 1.0], [np.nan, 2.0], [1e37, 1e37]], np.float32).astype(BF16)
    b = np.array([[1.0, -1.0], [0.5, 4.0]], np.float32).astype(BF16)
    got = bd.matmul_bf16(a, b, native=False)
    with np.errstate(all="ignore"):
        ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    fin = np.isfinite(ref)
    np.testing.assert_array_equal(got[~fin & ~np.isnan(ref)], ref[~fin & ~np.isnan(ref)])
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-6)


def test_native_default_follows_switch():
    a = np.ones((2, 3), BF16)
    with bd.force_portable():
        assert not bd.native_bf16_enabled()
        np.testing.assert_array_equal(bd.matmul_bf16(a, a.T.copy()), np.full((2, 2), 3.0))
    assert bd.native_bf16_enabled() == bd.has_avx512_bf16()


def test_env_switch_forces_portable_in_a_new_process():
    code = ("from numaccel.kernels_cpu import bf16_dot as b; "
            "print(b.native_bf16_enabled(), b.has_avx512_bf16())")
    env = dict(os.environ, NUMACCEL_NO_AVX512BF16="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out[0] == "False"
    assert out[1] == str(bd.has_avx512_bf16())


@numba.njit
def _sub_gemm32(a, b, c, i0, j0, m, n, k, acc):
    # C[i0:i0+m, j0:j0+n] (+)= A[i0:i0+m, :k] @ B[:k, j0:j0+n] inside larger buffers
    lda, ldb, ldc = a.shape[1], b.shape[1], c.shape[1]
    bd.gemm_f32(a.reshape(-1), i0 * lda, lda, b.reshape(-1), j0, ldb, c.reshape(-1),
                i0 * ldc + j0, ldc, m, n, k, acc)


@numba.njit
def _sub_gemm64(a, b, c, i0, j0, m, n, k, acc):
    lda, ldb, ldc = a.shape[1], b.shape[1], c.shape[1]
    bd.gemm_f64(a.reshape(-1), i0 * lda, lda, b.reshape(-1), j0, ldb, c.reshape(-1),
                i0 * ldc + j0, ldc, m, n, k, acc)


def _sub_gemm(a, *args):
    (_sub_gemm32 if a.dtype == np.float32 else _sub_gemm64)(a, *args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (6, 64, 64), (13, 37, 83), (20, 5, 200)])
def test_float_gemm_on_sub_blocks(dtype, accumulate, m, k, n):
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m + 3, k + 2)).astype(dtype)
    b = rng.standard_normal((k + 1, n + 9)).astype(dtype)
    c = rng.standard_normal((m + 3, n + 9)).astype(dtype)
    c0 = c.copy()
    _sub_gemm(a, b, c, 2, 5, m, n, k, accumulate)
    ref = c0.copy()
    blk = a[2:2 + m, :k].astype(np.float64) @ b[:k, 5:5 + n]
    ref[2:2 + m, 5:5 + n] = blk + (c0[2:2 + m, 5:5 + n] if accumulate else 0)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(c, ref, rtol=tol, atol=tol * max(k, 1))
    # nothing outside the block is touched
    outside = np.ones(c.shape, bool)
    outside[2:2 + m, 5:5 + n] = False
    np.testing.assert_array_equal(c[outside], c0[outside])


def test_gemm_overwrite_ignores_nan_garbage_in_c():
    a = np.ones((6, 4), np.float32)
    b = np.ones((4, 16), np.float32)
    c = np.full((6, 16), np.nan, np.float32)
    _sub_gemm(a, b, c, 0, 0, 6, 16, 4, False)
    np.testing.assert_array_equal(c, np.full((6, 16), 4.0, np.float32))


def test_pack_pairs_layouts():
    rng = np.random.default_rng(3)
    b = _rand_bf16(rng, (5, 7))
    bits = b.view(np.uint16).astype(np.uint32)
    rows = bd.pack_pairs_rows(b)
    assert rows.shape == (3, 7)
    np.testing.assert_array_equal(rows[:2], bits[0:4:2] | (bits[1:4:2] << 16))
    np.testing.assert_array_equal(rows[2], bits[4])          # odd tail packs a zero high half
    cols = bd.pack_pairs_cols(b)                             # B = b.T: pairs along b's rows
    assert cols.shape == (4, 5)
    np.testing.assert_array_equal(cols[:3].T, bits[:, 0:6:2] | (bits[:, 1:6:2] << 16))
    np.testing.assert_array_equal(cols[3], bits[:, 6])


def test_bad_input_errors():
    a = np.ones((2, 3), BF16)
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(2, 3\)"):
        bd.matmul_bf16(a, a)
    with pytest.raises(TypeError, match="float32"):
        bd.matmul_bf16(np.ones((2, 2), np.float32), a)
    with pytest.raises(ValueError, match="2-D"):
        bd.pack_pairs_rows(np.ones(3, BF16))
