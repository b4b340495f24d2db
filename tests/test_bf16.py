import ml_dtypes
import numpy as np
import pytest

from numaccel.kernels_cpu.bf16 import bf16_to_float32, to_bf16, bfloat16


def special_f32():
    bits = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                     0x7F800001, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0x3F808000,
                     0x3F818000, 0x3F80FFFF, 0x7F7F8000], dtype=np.uint32)
    return bits.view(np.float32)


@pytest.mark.parametrize("n", [0, 1, 17, 100_003])
def test_round_trip_matches_ml_dtypes(n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32) * np.float32(1e3)
    x = np.concatenate([x, special_f32()])
    got = to_bf16(x)
    ref = x.astype(ml_dtypes.bfloat16)
    assert got.dtype == bfloat16
    # NaN payloads: ml_dtypes keeps a quiet NaN; compare NaN-ness there, bits elsewhere
    nan = np.isnan(x)
    np.testing.assert_array_equal(got.view(np.uint16)[~nan], ref.view(np.uint16)[~nan])
    assert np.isnan(got.astype(np.float32)[nan]).all()
    np.testing.assert_array_equal(bf16_to_float32(ref), ref.astype(np.float32))


def test_all_bit_patterns_of_a_range_round_like_ml_dtypes():
    # every float32 whose high half is in a band around 1.0, all low halves
    hi = np.arange(0x3F7F, 0x3F82, dtype=np.uint32)
    lo = np.arange(0, 1 << 16, dtype=np.uint32)
    x = ((hi[:, None] << 16) | lo[None, :]).reshape(-1).view(np.float32)
    np.testing.assert_array_equal(to_bf16(x).view(np.uint16),
                                  x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_float16_bits_conversions_match_numpy():
    import numba
    from numaccel.kernels_cpu.bf16 import f16_to_f32, f32_to_f16

    @numba.njit
    def widen(bits, out):
        for i in range(bits.size):
            out[i] = f16_to_f32(bits[i])

    @numba.njit
    def narrow(x, out):
        for i in range(x.size):
            out[i] = f32_to_f16(x[i])

    bits = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty(bits.size, np.float32)
    widen(bits, out)
    np.testing.assert_array_equal(out, bits.view(np.float16).astype(np.float32))
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(10000).astype(np.float32) * 1e4,
                        special_f32()])
    o16 = np.empty(x.size, np.uint16)
    narrow(x, o16)
    ref = x.astype(np.float16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(o16[~nan], ref.view(np.uint16)[~nan])
    assert np.isnan(o16.view(np.float16)[nan]).all()
    # every float16 value round-trips, and ties between halves round to even
    h = bits.view(np.float16)
    finite = np.isfinite(h)
    o16 = np.empty(int(finite.sum()), np.uint16)
    narrow(h[finite].astype(np.float32), o16)
    np.testing.assert_array_equal(o16, bits[finite])
    mid = (h[finite][:-1].astype(np.float64) + h[finite][1:].astype(np.float64)) / 2
    mid = mid[np.isfinite(mid) & (mid.astype(np.float32) == mid)].astype(np.float32)
    o16 = np.empty(mid.size, np.uint16)
    narrow(mid, o16)
    np.testing.assert_array_equal(o16, mid.astype(np.float16).view(np.uint16))
