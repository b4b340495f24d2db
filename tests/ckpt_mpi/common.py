"""A model-and-optimizer-like state, its shardings, and exact checks; shared by pytest and ranks.

The global arrays come from seeded generators, so every process (any rank count) knows what a
box of each array must hold without communicating.
"""
from __future__ import annotations

import math
import zlib

import ml_dtypes
import numpy as np

from numaccel.ckpt import Shard

# name -> (global shape, dtype, layout when saved by 4 ranks)
ARRAYS = {
    "model.embed.weight": ((10, 6), np.float32, "rows"),
    "model.layers.0.attn.q.weight": ((8, 6), np.float32, "block"),
    "model.layers.0.mlp.w": ((5, 9), ml_dtypes.bfloat16, "cols"),
    "model.norm.scale": ((6,), np.float64, "rep"),
    "model.pos": ((7,), np.int64, "rep"),
    "model.empty": ((0, 3), np.float32, "rows"),
}
OPT_OF = ["model.embed.weight", "model.layers.0.attn.q.weight", "model.layers.0.mlp.w"]


def global_array(name: str) -> np.ndarray:
    shape, dtype, _ = _spec(name)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    a = rng.standard_normal(shape) * 4
    if np.dtype(dtype).kind in "iu":
        return a.astype(dtype)
    a = a.astype(dtype)
    if a.size > 2:
        a.reshape(-1)[:2] = [np.nan, np.inf]
    return a


def _spec(name: str):
    if name in ARRAYS:
        return ARRAYS[name]
    base = name.rsplit(".", 1)[0].removeprefix("optim.state.")
    shape, dtype, layout = ARRAYS[base]
    return shape, np.float32 if name.endswith("exp_avg_sq") else dtype, layout


def _splits(n: int, parts: int) -> list[tuple[int, int]]:
    """Uneven contiguous splits (np.array_split boundaries)."""
    b = [len(x) for x in np.array_split(np.arange(n), parts)]
    starts = np.cumsum([0] + b[:-1])
    return [(int(s), int(k)) for s, k in zip(starts, b)]


def box(layout: str, shape: tuple, rank: int, n: int):
    """(offsets, shape) of this rank's block, or None for a replicated array."""
    if layout == "rep":
        return None
    off, shp = [0] * len(shape), list(shape)
    if len(shape) < 2:
        layout = "rows"
    if layout == "rows":
        off[0], shp[0] = _splits(shape[0], n)[rank]
    elif layout == "cols":
        off[1], shp[1] = _splits(shape[1], n)[rank]
    elif layout == "block":
        gr = 2 if n % 2 == 0 else 1
        gc = n // gr
        off[0], shp[0] = _splits(shape[0], gr)[rank // gc]
        off[1], shp[1] = _splits(shape[1], gc)[rank % gc]
    else:
        raise ValueError(layout)
    return tuple(off), tuple(shp)


def leaf(name: str, rank: int, n: int, layout: str | None = None, fill: bool = True):
    shape, dtype, saved_layout = _spec(name)
    g = global_array(name)
    b = box(layout or saved_layout, shape, rank, n)
    if b is None:
        return g.copy() if fill else np.zeros(shape, dtype)
    sl = tuple(slice(o, o + k) for o, k in zip(*b))
    local = g[sl].copy() if fill else np.zeros(b[1], dtype)
    return Shard(local, b[0], shape)


def make_state(rank: int, n: int, layout: str | None = None, fill: bool = True) -> dict:
    """The nested state as rank ``rank`` of ``n`` holds it (zeros when ``fill`` is False)."""
    model: dict = {"layers": {"0": {"attn": {}, "mlp": {}}}}
    for name in ARRAYS:
        parts = name.split(".")[1:]
        d = model
        for p in parts[:-1]:
            d = d.setdefault(p, {})
        d[parts[-1]] = leaf(name, rank, n, layout, fill)
    state_opt = {p: {"exp_avg": leaf(f"optim.state.{p}.exp_avg", rank, n, layout, fill),
                     "exp_avg_sq": leaf(f"optim.state.{p}.exp_avg_sq", rank, n, layout, fill),
                     "step": np.float32(10.0) if fill else np.float32(0)}
                 for p in OPT_OF}
    groups = [{"lr": 1e-3 if fill else 0.0, "betas": (0.9, 0.999) if fill else (0.0, 0.0),
               "params": list(OPT_OF) if fill else []}]
    return {"model": model,
            "optim": {"step": 10 if fill else 0, "state": state_opt, "param_groups": groups},
            "extra": {"note": "nan" if fill else "", "loss": float("nan") if fill else 0.0}}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Exact equality including NaN payloads and bf16: compare the raw bytes."""
    return (a.shape == b.shape and a.dtype == b.dtype and
            np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def check_state(state: dict, rank: int, n: int, layout: str | None = None) -> None:
    """Raise AssertionError unless ``state`` holds exactly what ``make_state`` would fill."""
    want = make_state(rank, n, layout, fill=True)
    _cmp(state, want, "")


def _cmp(got, want, where: str) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), where
        for k in want:
            _cmp(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, Shard):
        assert isinstance(got, Shard) and got.offsets == want.offsets, where
        assert same_bits(got.local, want.local), f"{where}: {got.local} != {want.local}"
    elif isinstance(want, np.ndarray):
        assert same_bits(got, want), f"{where}: {got} != {want}"
    elif isinstance(want, float) and math.isnan(want):
        assert isinstance(got, float) and math.isnan(got), where
    elif isinstance(want, np.generic):
        assert type(got) is type(want) and same_bits(np.asarray(got), np.asarray(want)), where
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"
