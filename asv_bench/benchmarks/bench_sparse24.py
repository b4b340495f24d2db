"""asv: 2:4 sparse linear (numaccel.sparse.linear) vs the dense float32 product."""
import ml_dtypes
import numpy as np

from numaccel.sparse import linear, prune_2_4, to_sparse_semi_structured


class Linear24:
    params = ([1, 8, 64, 512], ["4096x4096", "4096x11008"], ["float32", "bfloat16"])
    param_names = ("batch", "layer", "dtype")
    timeout = 300

    def setup(self, batch, layer, dtype):
        m, k = (int(v) for v in layer.split("x"))
        dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
        rng = np.random.default_rng(0)
        w = prune_2_4(rng.standard_normal((m, k), np.float32).astype(dt))
        self.s = to_sparse_semi_structured(w)
        self.wd = w.astype(np.float32)
        self.x = rng.standard_normal((batch, k), np.float32).astype(dt)
        self.xd = self.x.astype(np.float32)
        linear(self.x, self.s)        # compile, and build the dense cache if dispatched

    def time_sparse_linear(self, batch, layer, dtype):
        linear(self.x, self.s)

    def time_dense_matmul(self, batch, layer, dtype):
        self.xd @ self.wd.T


class Compress24:
    params = (["float32", "bfloat16"],)
    param_names = ("dtype",)

    def setup(self, dtype):
        dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
        self.w = prune_2_4(np.random.default_rng(0).standard_normal((4096, 4096),
                                                                    np.float32).astype(dt))
        self.s = to_sparse_semi_structured(self.w)

    def time_to_sparse(self, dtype):
        to_sparse_semi_structured(self.w)

    def time_to_dense(self, dtype):
        self.s.to_dense()
