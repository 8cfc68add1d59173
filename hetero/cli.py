"""The ``hetero`` command.

Each subcommand is one ``_cmd_*`` function registered in :func:`build_parser`. A
:class:`hetero.errors.HeteroError` ends the command with its message and exit code
2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hetero.errors import HeteroError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hetero", description="Compile ONNX models across heterogeneous backends."
    )
    parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HeteroError as exc:
        print(f"hetero {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
