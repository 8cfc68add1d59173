"""The ``hetero`` command.

One module per family of subcommands, each registering its parsers:
:mod:`.plugins` (``plugins``), :mod:`.model` (``inspect``, ``compile``,
``partition``), :mod:`.run` (``run``, ``compare``), :mod:`.conformance`;
:mod:`.common` holds the model arguments and the model loading they all share.
A :class:`hetero.errors.HeteroError` ends the command with its message and exit
code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hetero.cli import conformance, model, plugins, run
from hetero.cli.common import UsageError
from hetero.errors import HeteroError

__all__ = ["UsageError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``hetero`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="hetero", description="Compile ONNX models across heterogeneous backends."
    )
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plugins.add_parser(subs)
    model.add_parsers(subs)
    run.add_parsers(subs)
    conformance.add_parser(subs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``hetero`` command with ``argv`` (default ``sys.argv[1:]``); return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HeteroError as exc:
        print(f"hetero {args.command}: error: {exc}", file=sys.stderr)
        return 2
