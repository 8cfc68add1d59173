"""``hetero plugins``: the installed backends, and the broken or disabled plugins."""

from __future__ import annotations

import argparse
import json
import warnings
from typing import Any


def add_parser(subs: Any) -> None:
    """Register ``hetero plugins`` and its arguments."""
    plugins = subs.add_parser(
        "plugins", help="list the installed backend plugins, and the broken or disabled ones"
    )
    plugins.add_argument("backend", nargs="?", help="show this backend in detail")
    plugins.add_argument("--json", action="store_true", help="print JSON for tools")
    plugins.set_defaults(func=cmd_plugins)


def cmd_plugins(args: argparse.Namespace) -> int:
    """List backends; broken plugins are reported, not fatal, so the exit code is 0."""
    # Imported here: the other subcommands need not pay for the plugin machinery.
    from hetero.core.plugin.listing import describe_plugins, format_backend, format_plugins
    from hetero.core.plugin.manager import PluginWarning, load_plugins

    # The listing reports broken plugins itself; the warnings would say it twice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        plugins = load_plugins()
    if args.backend and args.json:
        plugins.get(args.backend)  # an unknown name is an error, with a did-you-mean
        described = describe_plugins(plugins)
        print(json.dumps(next(b for b in described["backends"] if b["name"] == args.backend), indent=2))
    elif args.backend:
        print(format_backend(plugins, args.backend))
    elif args.json:
        print(json.dumps(describe_plugins(plugins), indent=2))
    else:
        print(format_plugins(plugins))
    return 0
