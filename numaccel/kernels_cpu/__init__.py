"""Hand-written Numba CPU kernels (flash SDPA, bf16 helpers, 2:4 sparse, ...)."""
