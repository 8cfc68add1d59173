"""``hetero plugins``: the installed backends, and the broken or disabled plugins."""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Any

from hetero.cli.common import UsageError


def add_parser(subs: Any) -> None:
    """Register ``hetero plugins`` and its arguments."""
    plugins = subs.add_parser(
        "plugins", help="list the installed backend plugins, and the broken or disabled ones"
    )
    plugins.add_argument("backend", nargs="?", help="show this backend in detail")
    plugins.add_argument("--json", action="store_true", help="print JSON for tools")
    plugins.add_argument(
        "--isolated", action="store_true",
        help="import each plugin in a child process and list one whose import does not finish "
             "within --timeout as broken; a plain listing imports plugins in this process, "
             "where a hanging import cannot be interrupted and blocks the command",
    )
    plugins.add_argument("--timeout", type=float, metavar="SECONDS",
                         help="with --isolated (implied), the seconds each plugin's child may "
                              "take to start and then to import it (default 30)")
    plugins.set_defaults(func=cmd_plugins)


def cmd_plugins(args: argparse.Namespace) -> int:
    """List backends; broken plugins are reported, not fatal, so the exit code is 0."""
    # Imported here: the other subcommands need not pay for the plugin machinery.
    from hetero.core.plugin.isolated import DEFAULT_TIMEOUT, isolated_listing
    from hetero.core.plugin.listing import describe_plugins, format_backend, format_plugins, listing_of
    from hetero.core.plugin.manager import PluginWarning, load_plugins

    if args.timeout is not None and not args.timeout > 0:
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout:g}")
    # The listing reports broken plugins itself; the warnings would say it twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        if args.isolated or args.timeout is not None:
            plugins = isolated_listing(args.timeout or DEFAULT_TIMEOUT)
        else:
            plugins = listing_of(load_plugins())
    if args.backend and args.json:
        # An unknown name is an error, with a did-you-mean.
        print(json.dumps(plugins.backend(args.backend), indent=2))
    elif args.backend:
        print(format_backend(plugins, args.backend))
    elif args.json:
        print(json.dumps(describe_plugins(plugins), indent=2))
    else:
        print(format_plugins(plugins))
    return 0
