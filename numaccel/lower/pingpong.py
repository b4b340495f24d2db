"""A time step's in-place stencil update without a temporary (``u[1:-1, 1:-1] += ...``).

NumPy computes the right side into a temporary and copies it into ``u``. A kernel cannot
write that box of ``u`` in place while it reads the neighbours of each element, so the
step path did the same: a temporary, then a copy (two passes over the array). When the
old buffer is dead after the update (a time loop's previous state), the kernel instead
writes straight into a fresh buffer and only the box's complement (a border) is copied
from the old one: one pass. The old buffer then goes back to the pool, so the steps of a
time loop alternate between two buffers (the ping-pong of a hand-written stencil).
"""
from __future__ import annotations

from . import pool


def box_ranges(index, shape):
    """Per dim ``(start, stop)`` of a basic index of unit steps, or None (another index:
    a step, a new axis, an ellipsis, an array)."""
    index = tuple(index)
    if len(index) > len(shape):
        return None
    out = []
    for it, n in zip(index + (slice(None),) * (len(shape) - len(index)), shape):
        if type(it) is slice:
            start, stop, step = it.indices(n)
            if step != 1:
                return None
            out.append((start, max(start, stop)))
        elif type(it) is int and -n <= it < n:
            out.append((it % n, it % n + 1))
        else:
            return None
    return out


def complement_boxes(ranges, shape):
    """Index tuples of boxes that together cover exactly the elements outside the box
    ``ranges``: for each dim, the parts before and after its range, with the earlier dims
    inside theirs (so no element is in two boxes)."""
    boxes = []
    for d, ((a, b), n) in enumerate(zip(ranges, shape)):
        pre = tuple(slice(x, y) for x, y in ranges[:d])
        post = (slice(None),) * (len(shape) - d - 1)
        if a > 0:
            boxes.append(pre + (slice(0, a),) + post)
        if b < n:
            boxes.append(pre + (slice(b, n),) + post)
    return boxes


class PingPongScatterStep:
    """``scatter_view`` (one ``getitem`` of unit-step slices and ints) of a map kernel that
    reads the destination buffer, which is dead afterwards: the kernel writes into a new
    buffer's box, the complement comes from the old buffer."""

    def __init__(self, n, map_step, resolve):
        self.n, self.root, self.map = n, n.inputs[0], map_step
        (_, attrs), = n.attrs["chain"]
        self.index = attrs["index"]
        self.resolve = resolve
        map_step.dest = (n.id, n.attrs["chain"])
        # (the kernel's own output, a view of the new buffer, too: freed after this step,
        # or it would keep the buffer from returning to the pool)
        self.reads = list(map_step.k.operands) + [self.root, map_step.out]

    @staticmethod
    def applies(n) -> bool:
        chain = n.attrs["chain"]
        return len(chain) == 1 and chain[0][0] == "getitem" and all(
            type(it) is int or type(it) is slice and it.step in (None, 1)
            for it in chain[0][1]["index"])

    def __call__(self, vals, env):
        old = vals[self.root]
        index = self.resolve({"index": self.index}, env)["index"]
        ranges = box_ranges(index, old.shape)
        buf = pool.empty(old.shape, old.dtype)
        if ranges is None:      # (not at run time: applies() checked the kinds)
            buf[...] = old
        else:
            for box in complement_boxes(ranges, old.shape):
                buf[box] = old[box]
        vals[self.n.id] = buf
        self.map(vals, env)

    def describe(self) -> str:
        return f"pingpong %{self.n.id}: scatter_view (kernel %{self.map.out} into a " \
               f"new buffer, border copied)"
