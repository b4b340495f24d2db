"""The fused Numba CPU backend gives NumPy's results (dtypes, shapes, values)."""
import numpy as np
import pytest

import numaccel
from numaccel.lower.passes import fuse, simplify

from conftest import BF16, assert_same, check_np, cpu, kernels_of


pytestmark = pytest.mark.usefixtures("step_wrapper")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", BF16])
def test_elementwise_chain_fuses_into_one_kernel(dtype, rng):
    x = rng.standard_normal((37, 5)).astype(dtype)
    y = rng.standard_normal((37, 5)).astype(dtype)
    acc = cpu(lambda x, y: np.sin(x) * y + np.exp(-x) * 0.5, x, y)
    run = kernels_of(acc)
    assert [type(s).__name__ for s in run.steps] == ["MapStep"]


def test_a_value_shared_by_one_kernel_is_not_stored(rng):
    """``nb`` feeds two comparisons that meet again in one expression: computed once in
    that kernel, no buffer (Game of Life), also through chains of shared values."""
    b = (rng.random((40, 50)) < 0.3).astype(np.uint8)

    def life(b):
        nb = b[:-2, 1:-1] + b[2:, 1:-1] + b[1:-1, :-2] + b[1:-1, 2:]
        alive = b[1:-1, 1:-1] == 1
        return ((nb == 3) & ~alive | alive & ((nb == 2) | (nb == 3))).astype(np.uint8)

    acc = cpu(life, b)
    assert [type(s).__name__ for s in kernels_of(acc).steps].count("MapStep") == 1
    x = rng.standard_normal((30, 7))
    acc = cpu(lambda x: (lambda t: np.sin(t) + np.cos(t) * t)(x * 2.0 - 1.0), x)
    assert [type(s).__name__ for s in kernels_of(acc).steps] == ["MapStep"]
    # consumers in different kernels (an output and a reduction): the value is stored
    acc = cpu(lambda x: (lambda t: (t, (t * t).sum(axis=0)))(np.exp(x)), x)
    assert [type(s).__name__ for s in kernels_of(acc).steps].count("MapStep") == 1


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "int64", "uint64", "bool"])
def test_integer_and_bool_semantics(dtype, rng):
    x = (rng.integers(0, 100, (6, 7)) if dtype != "bool" else rng.random((6, 7)) > .5)
    x = x.astype(dtype)
    cpu(lambda x: (x + x) * 3 - 1 if x.dtype != np.bool_ else x & ~x | x, x)
    cpu(lambda x: np.maximum(x, 7) + (x > 3) + np.where(x < 50, x, 0), x)
    cpu(lambda x: (x == 4) | (x != 2), x)


def test_mixed_dtypes_and_weak_scalars(rng):
    a = rng.standard_normal(50).astype(np.float32)
    i = rng.integers(-5, 5, 50).astype(np.int16)
    cpu(lambda a, i: a * i + 2.5, a, i)
    cpu(lambda a, i: i * 3 + np.int64(2), a, i)
    cpu(lambda a, i: (a > 0) * 1.5 + i.astype(np.float64), a, i)
    cpu(lambda a, dt: a * dt - dt, a, 0.25)
    # a Python int out of the array's range: NumPy raises, so must the cpu backend
    with pytest.raises(OverflowError):
        numaccel.accelerate(lambda i: i + 70000, backend="cpu")(i)


def test_nan_inf_semantics(rng):
    x = np.array([np.nan, -np.inf, np.inf, 0.0, -0.0, 1.0, -2.5, 1e30], np.float32)
    y = x[::-1].copy()
    cpu(lambda x, y: (np.maximum(x, y), np.minimum(x, y), np.fmax(x, y), np.fmin(x, y)), x, y)
    cpu(lambda x: (np.isnan(x), np.isinf(x), np.isfinite(x), np.sign(x), np.abs(x)), x)
    cpu(lambda x: (np.exp(x), np.log(x), np.sqrt(x), np.tanh(x), 1 / x), x)
    cpu(lambda x: np.clip(x, -1, 1), x)
    cpu(lambda x: (x.max(), x.min(), x.sum()), x)


def test_views_broadcast_and_noncontiguous(rng):
    a = rng.standard_normal((8, 9))
    cpu(lambda a: a[1:-1, 2:] + a[1:-1, :-2] - 2 * a[1:-1, 1:-1], a)
    cpu(lambda a: a.T * a[:, 0] + a[::-1, ::2].sum(), a)
    cpu(lambda a: a + a[:, :1] * a[:1, :], a)
    cpu(lambda a: np.exp(a) * 2, a[::2, ::3])
    cpu(lambda a: np.exp(a) * 2, np.asfortranarray(a))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("name", ["sum", "max", "min", "mean", "prod", "any", "all"])
def test_fused_reductions(name, axis, rng):
    # every axis longer than unroll.MAX_LEN (shorter ones become elementwise code)
    x = rng.standard_normal((5, 6, 7)).astype(np.float32)
    fn = getattr(np, name)
    acc = cpu(lambda x: fn(np.abs(x) * 2 - 1, axis=axis), x, calls=1)
    # last-axis reductions are row kernels, the others reduction kernels
    assert any(type(s).__name__ in ("ReduceStep", "RowStep") for s in kernels_of(acc).steps)
    cpu(lambda x: fn(x, axis=axis, keepdims=True), x, calls=1)


def test_long_full_reductions_are_accurate(rng):
    x = rng.standard_normal(300_001).astype(np.float32)
    cpu(lambda x: (x.sum(), (x * x).mean(), x.max(), np.abs(x).min()), x, rtol=1e-6)
    cpu(lambda x: np.sum(x[::3] > 0), x)


def test_reductions_of_empty_and_size_one(rng):
    cpu(lambda x: (x.sum(), x.sum(axis=0), x.prod(axis=1)), np.zeros((0, 3)))
    cpu(lambda x: (x.max(axis=1), x.mean()), rng.standard_normal((1, 1)))
    f = numaccel.accelerate(lambda x: x.max(), backend="cpu")
    with pytest.raises(ValueError, match="zero-size"):
        f(np.zeros(0))


def test_softmax_layernorm_rowwise(rng):
    def softmax(x):
        m = x.max(axis=-1, keepdims=True)
        e = np.exp(x - m)
        return e / e.sum(axis=-1, keepdims=True)

    def layernorm(x, g, b):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * g + b
    x = rng.standard_normal((33, 65)).astype(np.float32)
    cpu(softmax, x)
    cpu(layernorm, x, rng.standard_normal(65).astype(np.float32),
        rng.standard_normal(65).astype(np.float32))


def test_inplace_stencil_time_loop_reuses_one_kernel(rng):
    def heat(u, steps):
        for _ in range(steps):
            u[1:-1, 1:-1] += 0.1 * (u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2]
                                    - 4 * u[1:-1, 1:-1])
        return u
    acc = cpu(heat, rng.standard_normal((20, 30)), 25)
    run = kernels_of(acc)
    mods = {id(m) for s in run.steps if hasattr(s, "mods") for m in s.mods.values()}
    assert len(mods) <= 2   # 25 identical step bodies share compiled kernels


def test_unsupported_nodes_run_in_numpy_inside_the_graph(rng):
    z = (rng.standard_normal(10) + 1j * rng.standard_normal(10))
    a = rng.integers(1, 9, 10)
    acc = cpu(lambda z, a: (np.abs(z * 2) + a // 3 + a % 4, np.cumsum(a)), z, a)
    kinds = [type(s).__name__ for s in kernels_of(acc).steps]
    assert "NumpyStep" in kinds


def test_dynamic_shapes_on_cpu(rng):
    f = numaccel.accelerate(lambda x, y: np.sin(x) * y + x.sum(), backend="cpu")
    for n in range(3, 30):
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        assert_same(f(x, y), np.sin(x) * y + x.sum())
    assert f.cache_info().compiles == 2


def test_cse_and_fusion_plan():
    import numaccel.trace.api as api  # noqa: F401
    f = numaccel.accelerate(lambda x: np.exp(x) + np.exp(x), backend="numpy")
    f(np.ones(3))
    g = simplify(f.entries[0].graph)
    assert sum(n.op == "exp" for n in g.nodes) == 1
    kinds, mat, kernels = fuse(g)
    assert len(kernels) == 1


DISK_SCRIPT = r"""
import numpy as np, numaccel
x = np.ones((50, 40), np.float32)
numaccel.config.compiled_wrapper = False          # the step kernels
f = numaccel.accelerate(lambda x, y: np.exp(x) * y - x.sum(axis=-1, keepdims=True))
f(x, x)
run = f.entries[0].run
disp = [m.kernel for s in run.steps for m in getattr(s, "mods", {}).values()
        if hasattr(m, "kernel")] + [m[0].kernel for s in run.steps
        for m in getattr(s, "mods", {}).values() if isinstance(m, tuple)]
numaccel.config.compiled_wrapper = True           # and a compiled wrapper
g = numaccel.accelerate(lambda x, y: np.exp(x) * y - x.sum(axis=-1, keepdims=True))
g(x, x)
disp.append(g.entries[0].run.wrapper.entry)
print(sum(sum(d.stats.cache_hits.values()) for d in disp),
      sum(sum(d.stats.cache_misses.values()) for d in disp))
"""


def test_second_process_loads_kernels_from_disk_cache(tmp_path):
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMACCEL_CACHE_DIR=str(tmp_path))

    def run():
        out = subprocess.run([sys.executable, "-c", DISK_SCRIPT], env=env, text=True,
                             capture_output=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return [int(v) for v in out.stdout.split()]
    hits, misses = run()
    assert misses > 0 and hits == 0
    hits, misses = run()
    assert hits > 0 and misses == 0
    # a corrupted generated file is detected and rewritten, never served
    for p in (tmp_path / "kernels").glob("k_*.py"):
        p.write_text("garbage = (")
    hits, misses = run()
    assert hits + misses > 0


def test_hypothesis_programs_on_cpu():
    from test_trace_hypothesis import check_random_programs
    check_random_programs(30)


@pytest.mark.parametrize("dtype", ["float16", BF16])
def test_narrow_float_ops_round_like_numpy(dtype, rng):
    # NumPy rounds each float16/bfloat16 op to its dtype; fused kernels must too
    x = (rng.standard_normal(50) * 3).astype(dtype)
    cpu(lambda x: np.sqrt(np.abs(x) + 1.7) * np.float32(-2.5), x, rtol=1e-6, atol=0)
    cpu(lambda x: ((x * x + x) / 3).astype(np.float32), x, rtol=1e-6, atol=0)


def test_bool_arithmetic_is_logical(rng):
    b = rng.random(20) > 0.5
    cpu(lambda b: np.tanh(b + b) * 2, b)
    cpu(lambda b: (b * b + b).astype(np.int8) - np.maximum(b, ~b), b)


@pytest.mark.parametrize("sub,sa,sb", [
    ("bhqd,bhkd->bhqk", (2, 3, 5, 4), (2, 3, 6, 4)), ("bhqk,bhkd->bhqd", (2, 3, 5, 6), (2, 3, 6, 4)),
    ("ij,kj->ki", (3, 4), (5, 4)), ("ijk,ikl->jl", (3, 4, 5), (3, 5, 6)), ("i,i->", (4,), (4,)),
    ("abcd,cdbe->ae", (2, 3, 4, 5), (4, 5, 3, 6)), ("ij,jk->ik", (0, 4), (4, 5)),
    ("ij,ij->ij", (3, 4), (3, 4))])
def test_einsum_contractions_as_matmul(sub, sa, sb, rng):
    # batched contractions run as transposes + one np.matmul (BLAS), same results
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    cpu(lambda a, b: np.einsum(sub, a, b) * 2, a, b, rtol=1e-5, atol=1e-5)
    cpu(lambda a, b: np.einsum(sub, a, b), a.astype(np.float64), b, rtol=1e-6, atol=1e-6)
