"""The ``hetero`` command.

Each subcommand is one ``_cmd_*`` function registered in :func:`build_parser`. A
:class:`hetero.errors.HeteroError` ends the command with its message and exit code
2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence

from hetero.errors import HeteroError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hetero", description="Compile ONNX models across heterogeneous backends."
    )
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    plugins = subs.add_parser(
        "plugins", help="list the installed backend plugins, and the broken or disabled ones"
    )
    plugins.add_argument("--json", action="store_true", help="print JSON for tools")
    plugins.set_defaults(func=_cmd_plugins)
    return parser


def _cmd_plugins(args: argparse.Namespace) -> int:
    """List backends; broken plugins are reported, not fatal, so the exit code is 0."""
    # Imported here: the other subcommands need not pay for the plugin machinery.
    from hetero.core.plugin.listing import describe_plugins, format_plugins
    from hetero.core.plugin.manager import PluginWarning, load_plugins

    # The listing reports broken plugins itself; the warnings would say it twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        plugins = load_plugins()
    if args.json:
        print(json.dumps(describe_plugins(plugins), indent=2))
    else:
        print(format_plugins(plugins))
    return 0


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
