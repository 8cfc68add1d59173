"""``hetero conformance``: the conformance suite against an installed backend."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import Any

from hetero.cli.common import UsageError, check_writable


def add_parser(subs: Any) -> None:
    """Register ``hetero conformance`` and its arguments."""
    conformance = subs.add_parser(
        "conformance", help="run the conformance suite against an installed backend (needs pytest)"
    )
    conformance.add_argument("backend", help="the backend to check, e.g. llvm_cpu")
    conformance.add_argument("--known-failures", metavar="FILE",
                             help="test names expected to fail, one a line ('#' comments)")
    conformance.add_argument("--json", metavar="FILE", help="write the op x dtype matrix as JSON")
    conformance.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    conformance.add_argument("--max-examples", type=int, metavar="N",
                             help="cases drawn per op and dtype (default 5)")
    conformance.add_argument("--ops", metavar="OP,OP", help="check only these ops op by op")
    conformance.add_argument("--seed", metavar="N|random", default=None,
                             help="draw the cases from seed N (default: the fixed draw every run makes, "
                                  "as CI runs it); 'random' picks a new seed and prints it, so a longer "
                                  "search for new cases can be replayed: --seed random --max-examples 50")
    conformance.add_argument("-O", "--option", action="append", default=[], metavar="NAME=VALUE",
                             help="a compile option of the backend for every check (repeatable), "
                                  "e.g. -O cuda_emulate=true")
    conformance.set_defaults(func=cmd_conformance)


def cmd_conformance(args: argparse.Namespace) -> int:
    """Run the suite in this process with pytest; 0 when every check passes, else 1.

    A backend that is not installed, or whose plugin is broken, is an
    :class:`~hetero.errors.UnknownBackendError` before the suite starts: one line
    naming it and what to do, exit 2.
    """
    try:
        import pytest
    except ImportError:
        print("hetero conformance: error: pytest is not installed; "
              "run: pip install 'hetero[test]'", file=sys.stderr)
        return 2
    from hetero.testing.plugin import SUITE

    _check_backend(args.backend)
    seed = _seed(args.seed)
    for flag, path in (("--json", args.json), ("--junit", args.junit)):
        if path is not None:
            check_writable(path, flag)  # before the suite's minutes, not after

    # -c devnull: the user's pytest configuration (addopts, filterwarnings=error...)
    # is for their tests, not for the suite; the cache would litter the current folder.
    # Rooted at the suite's folder, test ids read suite.py::test_op[Conv-float32].
    # hetero is imported already, so pytest cannot rewrite its asserts (and would warn);
    # the suite's asserts carry their own messages.
    argv = ["-c", os.devnull, "--rootdir", str(SUITE.parent), "-p", "no:cacheprovider",
            "-W", "ignore::pytest.PytestAssertRewriteWarning",
            "-q", "-rfEX", "--hetero-backend", args.backend]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        argv[:0] = ["-p", "hetero.testing.plugin"]  # otherwise its entry point has loaded it
    for option, value in (("--hetero-known-failures", args.known_failures),
                          ("--hetero-report-json", args.json), ("--junitxml", args.junit),
                          ("--hetero-max-examples", args.max_examples),
                          ("--hetero-ops", args.ops), ("--hetero-seed", seed)):
        if value is not None:
            argv += [option, str(value)]
    for item in args.option:
        argv += ["--hetero-option", item]
    return 0 if pytest.main(argv) == pytest.ExitCode.OK else 1


def _seed(text: str | None) -> int | None:
    """``--seed``: None for the fixed draw, a number, or a fresh one for 'random'."""
    if text is None:
        return None
    if text == "random":
        import secrets

        return secrets.randbelow(2**31 - 1) + 1
    try:
        seed = int(text)
    except ValueError:
        raise UsageError(f"--seed {text!r}: give a whole number, or 'random'") from None
    if seed < 0:
        raise UsageError(f"--seed {seed}: give a number of 0 or more (0 is the fixed draw)")
    return seed


def _check_backend(name: str) -> None:
    """Raise UnknownBackendError unless backend ``name`` loads; its message names the
    broken plugin behind ``name``, or the installed backends."""
    from hetero.core.plugin.manager import load_plugins

    # Held back until the backend is found: the error names a broken plugin itself,
    # and its warning would say it again on a line of its own.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plugins = load_plugins()
    plugins.get(name)
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
