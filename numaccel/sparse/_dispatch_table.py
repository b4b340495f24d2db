"""Measured 2:4 dispatch table (written by ``scripts/bench_sparse24.py --calibrate``).

Placeholder until the first calibration: sparse only for a single row.
"""
TABLE = {
    "machine": {},
    "entries": [],
}
