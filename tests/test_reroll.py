"""Rolling repeated blocks of the compiled wrapper back into loops (lower/reroll.py)."""
import re

import numpy as np
import pytest

import numaccel
from numaccel.lower.reroll import reroll


def _run(lines, **env):
    src = "def f(x0, x1):\n" + "\n".join(lines) + "\n"
    ns = {"np": np}
    exec(src, ns)
    return ns["f"](**env)


def _steps(n, literal_step=True):
    """A wrapper-style body: n identical update blocks on a carried state, each writing
    row i + 1 of a trajectory (an advancing integer literal)."""
    # named as a block before the first would name them: every block can be rolled
    lines = ["    n2 = np.zeros((%d, 2))" % (n + 1), "    n1 = x0.copy()"]
    prev, traj, nid = "n1", "n2", 10
    for i in range(n):
        a, b, c = (f"n{nid + j}" for j in range(3))
        lines += [f"    {a} = {prev} * x1",
                  f"    {b} = np.empty((2,), np.float64)",
                  "    for i0 in range(2):",
                  f"        k{i + 1}_0 = ({a}[i0] + np.float64(0.5))",
                  f"        {b}[i0] = k{i + 1}_0",
                  f"    {c} = {traj}.copy()",
                  f"    w{nid + 2} = {c}[{i + 1 if literal_step else 1}]",
                  "    for i0 in range(2):",
                  f"        w{nid + 2}[i0] = {b}[i0]"]
        prev, traj, nid = b, c, nid + 10
    lines.append(f"    return ({prev}, {traj})")
    return lines


@pytest.mark.parametrize("n", [3, 4, 11])
def test_rolled_body_computes_the_same(n):
    lines = _steps(n)
    rolled = reroll(lines)
    assert any("for _it in range(1, " in ln for ln in rolled)
    assert len(rolled) < len(lines) - (n - 3) * 8
    x0, x1 = np.array([1.0, -2.0]), 1.5
    for got, ref in zip(_run(rolled, x0=x0, x1=x1), _run(lines, x0=x0, x1=x1)):
        np.testing.assert_array_equal(got, ref)


def test_too_few_repeats_or_different_blocks_stay_unrolled():
    assert reroll(_steps(2)) == _steps(2)
    lines = _steps(4)
    lines[12] = lines[12].replace("* x1", "+ x1")    # the second block differs
    out = reroll(lines)
    x0 = np.array([0.5, 3.0])
    for got, ref in zip(_run(out, x0=x0, x1=2.0), _run(lines, x0=x0, x1=2.0)):
        np.testing.assert_array_equal(got, ref)


def test_reading_an_older_block_after_the_run_keeps_it_unrolled():
    lines = _steps(5)
    # the result also reads the first block's value: not expressible after a loop
    lines[-1] = "    return (n21, n51)"
    out = reroll(lines)
    x0 = np.array([0.25, 1.0])
    for got, ref in zip(_run(out, x0=x0, x1=3.0), _run(lines, x0=x0, x1=3.0)):
        np.testing.assert_array_equal(got, ref)


def _with_scalars(n, prefix=True, order=None):
    """_steps(n) where each block also makes a scalar, all returned as one array (the
    np.array(population) of a per-step value), after a value from before the run."""
    lines = _steps(n)[:-1]
    out = []
    for ln in lines:
        out.append(ln)
        m = re.match(r"    (n\d+) = (n\d+)\.copy\(\)$", ln)
        if m and m.group(2) != "x0":
            nid = int(m.group(1)[1:]) + 1       # n<c id + 1>: the block's scalar
            out.append(f"    n{nid} = {m.group(2)}[0, 0] * np.float64(2.0)")
    scalars = [f"n{10 * (i + 1) + 3}" for i in range(n)]
    if order is not None:
        scalars = [scalars[i] for i in order]
    items = (["n3"] if prefix else []) + scalars
    last = 10 * n
    return ["    n3 = np.float64(7.0)"] + out + [
        f"    n999 = np.array(({', '.join(items)},), np.float64)",
        f"    return (n{last + 1}, n{last + 2}, n999)"]


@pytest.mark.parametrize("prefix", [True, False])
def test_per_block_values_collected_after_the_run(prefix):
    lines = _with_scalars(6, prefix)
    rolled = reroll(lines)
    assert any("for _it in range(1, " in ln for ln in rolled), "\n".join(rolled)
    assert any(".append(" in ln for ln in rolled)
    x0 = np.array([1.0, -2.0])
    for got, ref in zip(_run(rolled, x0=x0, x1=1.5), _run(lines, x0=x0, x1=1.5)):
        np.testing.assert_array_equal(got, ref)
    assert len(_run(rolled, x0=x0, x1=1.5)[2]) == 6 + prefix


def test_per_block_values_out_of_order_keep_it_unrolled():
    lines = _with_scalars(5, order=[1, 0, 2, 3, 4])
    out = reroll(lines)
    assert not any(".append(" in ln for ln in out)
    x0 = np.array([0.5, 2.0])
    for got, ref in zip(_run(out, x0=x0, x1=0.5), _run(lines, x0=x0, x1=0.5)):
        np.testing.assert_array_equal(got, ref)


def _lorenz(state, params, dt, n_steps):
    sigma, rho, beta = params[0], params[1], params[2]

    def rhs(s):
        x, y, z = s[0], s[1], s[2]
        return np.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])

    s = state
    traj = np.empty((n_steps + 1, 3))
    traj[0] = s
    for i in range(n_steps):
        k1 = rhs(s)
        k2 = rhs(s + 0.5 * dt * k1)
        s = s + dt * k2
        traj[i + 1] = s
    return s, traj


@pytest.mark.parametrize("n_steps", [1, 4, 12])
def test_time_stepping_program_compiles_one_body(n_steps):
    f = numaccel.accelerate(_lorenz)
    state, params = np.array([1.0, 1.5, 20.0]), np.array([10.0, 28.0, 8.0 / 3.0])
    for _ in range(2):
        got = f(state, params, 0.01, n_steps)
        ref = _lorenz(state, params, 0.01, n_steps)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-13, atol=1e-13)
    run = f.entries[-1].run
    assert run.wrapper is not None, run.why_steps
    rolled = "for _it in range(1, " in run.wrapper.source
    assert rolled == (n_steps >= 4)
    if rolled:      # the body is compiled once, not n_steps times
        assert run.wrapper.source.count("np.stack") + run.wrapper.source.count(
            "np.array((") <= 3 * 2
