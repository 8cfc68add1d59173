"""The ``hetero`` command.

One module per family of subcommands, each registering its parsers:
:mod:`.plugins` (``plugins``), :mod:`.model` (``inspect``, ``compile``,
``partition``), :mod:`.run` (``run``, ``compare``), :mod:`.conformance`, :mod:`.tune`;
:mod:`.common` holds the model arguments and the model loading they all share.
:mod:`.terminal` is how it talks to a person: the progress line (on a terminal,
unless ``--quiet``), one-line warnings, and error messages in the command line's
terms.

An error the user can cause ends the command with one line on stderr and exit code
2, never a traceback: a :class:`hetero.errors.HeteroError` (its message naming CLI
flags where it names a Python keyword). A closed output pipe (``hetero plugins |
head -1``) ends the command quietly with exit code 0, however early the reader left.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from hetero import __version__
from hetero.cli import conformance, model, plugins, run, tune
from hetero.cli.common import UsageError
from hetero.cli.terminal import cli_message, one_line_warnings, progress_reporter
from hetero.errors import HeteroError

__all__ = ["UsageError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The ``hetero`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="hetero", description="Compile ONNX models across heterogeneous backends."
    )
    parser.add_argument("--version", action="version", version=f"hetero {__version__}")
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plugins.add_parser(subs)
    model.add_parsers(subs)
    run.add_parsers(subs)
    conformance.add_parser(subs)
    tune.add_parser(subs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``hetero`` command with ``argv`` (default ``sys.argv[1:]``); return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with progress_reporter(getattr(args, "quiet", False)) as status, \
                one_line_warnings(args.command, status=status):
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
            return code
    except HeteroError as exc:
        print(f"hetero {args.command}: error: {cli_message(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (hetero plugins | head -1): it read what it wanted. Whether
        # the write that noticed came before or after the reader left is timing, so the
        # only exit that does not depend on it is a quiet 0, as when everything fitted in
        # the pipe. Python would fail again flushing stdout at exit, so stdout points to
        # devnull from here on.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass  # stdout is not a real file (a test's capture): nothing to flush at exit
        return 0
