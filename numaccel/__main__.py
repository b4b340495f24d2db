"""Command line: ``python -m numaccel demo [options]`` or ``python -m numaccel bench [options]``.

Example::

    python -m numaccel demo --only heat2d_inplace
    python -m numaccel bench --quick --only chain_f32
"""
from __future__ import annotations

import sys
from collections.abc import Sequence

_USAGE = """usage: python -m numaccel {demo,bench} [options]

  demo    corpus programs plain vs accelerated, checked against NumPy (see --help)
  bench   side-by-side benchmark: NumPy, numexpr, Numba, torch.compile, numaccel
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch to the sub-command; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_USAGE, end="")
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd == "demo":
        from .demo import main as demo_main
        return demo_main(rest)
    if cmd == "bench":
        from .bench import main as bench_main
        return bench_main(rest)
    print(f"unknown command {cmd!r}\n" + _USAGE, end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
