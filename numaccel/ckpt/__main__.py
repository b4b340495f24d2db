"""Command line: ``python -m numaccel.ckpt inspect PATH`` / ``consolidate PATH OUT``.

    $ python -m numaccel.ckpt inspect run/ckpt --verify
    $ python -m numaccel.ckpt consolidate run/ckpt model.safetensors
"""
from __future__ import annotations

import argparse
import sys

from ._state import CheckpointError
from ._tools import consolidate, inspect


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 on a bad checkpoint)."""
    p = argparse.ArgumentParser(prog="python -m numaccel.ckpt",
                                description="Inspect or consolidate numaccel checkpoints.")
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("inspect", help="list keys, shapes, dtypes, shards and sizes")
    pi.add_argument("path")
    pi.add_argument("--verify", action="store_true", help="read every chunk, check checksums")
    pc = sub.add_parser("consolidate", help="write one .safetensors file with every array")
    pc.add_argument("path")
    pc.add_argument("out")
    args = p.parse_args(argv)
    try:
        if args.cmd == "inspect":
            print(inspect(args.path, verify=args.verify))
        else:
            print(f"wrote {consolidate(args.path, args.out)}")
    except (CheckpointError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
