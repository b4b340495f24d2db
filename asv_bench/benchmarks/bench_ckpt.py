"""asv: numaccel.ckpt save/load in one process, next to np.save/np.load of the same bytes.

Multi-rank throughput (1, 2, 4 MPI ranks at 1 GiB) is in scripts/bench_ckpt.py; asv times one
process so that its numbers are comparable across commits.
"""
import os
import shutil
import tempfile

import numpy as np

from numaccel import ckpt


class CkptThroughput:
    """Save and load of a 256 MiB float32 state (8 arrays), and the plain NumPy equivalent."""

    params = [["numaccel.ckpt", "np.save"]]  # noqa: RUF012 (asv reads these class attributes)
    param_names = ["writer"]  # noqa: RUF012
    timeout = 300
    number = 1
    repeat = 5

    def setup(self, writer):
        self.dir = tempfile.mkdtemp(prefix="asv_ckpt_")
        self.state = {f"layer{i}": {"w": np.full((8192, 1024), i + 0.5, np.float32)}
                      for i in range(8)}
        self.dest = {k: {"w": np.zeros_like(v["w"])} for k, v in self.state.items()}
        self.path = os.path.join(self.dir, "ck")
        self.npy = os.path.join(self.dir, "plain.npz")
        ckpt.save(self.state, self.path, fsync=False)
        self._np_save()

    def teardown(self, writer):
        shutil.rmtree(self.dir, ignore_errors=True)

    def _np_save(self):
        for k, v in self.state.items():
            np.save(os.path.join(self.dir, f"{k}.npy"), v["w"])

    def time_save(self, writer):
        if writer == "np.save":
            self._np_save()
        else:
            ckpt.save(self.state, self.path, fsync=False)

    def time_load(self, writer):
        if writer == "np.save":
            for k in self.state:
                np.load(os.path.join(self.dir, f"{k}.npy"))
        else:
            ckpt.load(self.dest, self.path)

    def track_save_gbps(self, writer):
        import time
        t = time.perf_counter()
        self.time_save(writer)
        return sum(v["w"].nbytes for v in self.state.values()) / (time.perf_counter() - t) / 1e9

    track_save_gbps.unit = "GB/s"


class CkptAsyncStaging:
    """Time until async_save returns (staging copy) for 256 MiB, with a 64 MiB budget."""

    timeout = 300
    number = 1
    repeat = 5

    def setup(self):
        self.dir = tempfile.mkdtemp(prefix="asv_ckpt_")
        self.state = {"w": np.full((65536, 1024), 0.5, np.float32)}
        self.fut = None

    def teardown(self):
        if self.fut is not None:
            self.fut.result()
        shutil.rmtree(self.dir, ignore_errors=True)

    def time_async_save_returns(self):
        if self.fut is not None:
            self.fut.result()
        self.fut = ckpt.async_save(self.state, os.path.join(self.dir, "ck"),
                                   staging_bytes=64 << 20, fsync=False)
