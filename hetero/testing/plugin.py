"""The pytest plugin behind ``pytest --hetero-backend NAME`` and ``hetero conformance NAME``.

Registered through the ``pytest11`` entry point, so pytest loads it in every run
in an environment where hetero is installed; it stays dormant (adds its options
and does nothing else) until ``--hetero-backend`` is given.
Then it adds the suite (:mod:`hetero.testing.suite`) to the collected paths (in
place of the default paths when none were named on the command line), marks the
known failures, and reports the op × dtype matrix at the end.

Options:

- ``--hetero-backend NAME``: the installed backend to check.
- ``--hetero-ops OP,OP``: check only these ops (the op-wise checks; the others run).
- ``--hetero-max-examples N``: cases drawn per (op, dtype) (default 5).
- ``--hetero-known-failures FILE``: test names expected to fail, one a line
  (``test_op[Conv-float16]``; ``#`` starts a comment). A listed test that fails is
  an xfail; a listed test that passes fails the run, asking for the line's removal.
- ``--hetero-report-json FILE``: write the report (:mod:`hetero.testing.matrix`).
- ``--hetero-option NAME=VALUE`` (repeatable): a compile option of the backend, for
  every check (``cuda_emulate=true``: the cuda backend's kernels run in the interpreter).
- ``--hetero-seed N``: draw the cases from seed N. Without it (or with 0) every run
  makes the same fixed draw, on every machine, as CI does; a seed gives another draw,
  the same again for the same seed. The seed is printed in the report's header and
  summary, with the command that replays it.

JUnit XML comes from pytest's own ``--junitxml FILE``; test names read as
``test_op[Conv-float32]``. The JSON report's ``details`` carry each failed check's
message. Hypothesis keeps its files under ``$XDG_CACHE_HOME/hetero/hypothesis``
(``~/.cache``; ``HYPOTHESIS_STORAGE_DIRECTORY`` overrides), never in the working
directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from hetero.testing.matrix import Report

#: The file the plugin adds to the collection when a backend is named.
SUITE = Path(__file__).with_name("suite.py")

#: Cases drawn per (op, dtype) unless ``--hetero-max-examples`` says otherwise.
DEFAULT_MAX_EXAMPLES = 5

#: The backend's compile options for this run (``--hetero-option``), read by the suite.
BACKEND_OPTIONS: dict[str, object] = {}

#: The seed cases are drawn from (``--hetero-seed``); 0, the fixed draw, by default.
SEED = [0]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add the ``--hetero-*`` options."""
    group = parser.getgroup("hetero", "hetero backend conformance")
    group.addoption("--hetero-backend", metavar="NAME", default=None,
                    help="check this installed hetero backend (runs the conformance suite)")
    group.addoption("--hetero-ops", metavar="OP,OP", default=None,
                    help="run the op-wise conformance checks for these ops only")
    group.addoption("--hetero-max-examples", metavar="N", type=int, default=DEFAULT_MAX_EXAMPLES,
                    help=f"cases drawn per op and dtype (default {DEFAULT_MAX_EXAMPLES})")
    group.addoption("--hetero-known-failures", metavar="FILE", default=None,
                    help="test names expected to fail, one a line; '#' comments")
    group.addoption("--hetero-report-json", metavar="FILE", default=None,
                    help="write the op x dtype matrix and every check's outcome as JSON")
    group.addoption("--hetero-option", metavar="NAME=VALUE", action="append", default=[],
                    help="a compile option of the backend for every check (repeatable)")
    group.addoption("--hetero-seed", metavar="N", type=int, default=0,
                    help="draw the cases from seed N (default 0: the fixed draw every run makes)")


def pytest_configure(config: pytest.Config) -> None:
    """Wake up when ``--hetero-backend`` is given: add the suite and the reporter."""
    name = config.getoption("hetero_backend")
    if name is None:
        return
    if config.getoption("hetero_max_examples") < 1:
        raise pytest.UsageError("--hetero-max-examples must be at least 1")
    known = _read_known_failures(config.getoption("hetero_known_failures"))
    BACKEND_OPTIONS.clear()
    BACKEND_OPTIONS.update(_read_options(config.getoption("hetero_option")))
    if config.getoption("hetero_seed") < 0:
        raise pytest.UsageError("--hetero-seed must be 0 (the fixed draw) or more")
    SEED[0] = config.getoption("hetero_seed")
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        config.args.append(str(SUITE))
    else:
        # Nothing named on the command line: run the suite alone, not the project's tests.
        config.args[:] = [str(SUITE)]
    config.pluginmanager.register(Conformance(name, known), "hetero-conformance")
    _keep_hypothesis_out_of_cwd()


def _read_options(items: list[str]) -> dict[str, object]:
    from hetero.core.plugin.target import parse_option_value

    options = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise pytest.UsageError(f"--hetero-option {item!r}: write NAME=VALUE (e.g. cuda_emulate=true)")
        options[name] = parse_option_value(text)
    return options


@dataclass
class KnownFailure:
    """One line of a known-failures file."""

    test: str
    where: str
    matched: bool = False


def _read_known_failures(path: str | None) -> list[KnownFailure]:
    if path is None:
        return []
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise pytest.UsageError(
            f"--hetero-known-failures {path}: cannot read it ({exc.strerror or exc})"
        ) from None
    known = []
    for number, line in enumerate(text.splitlines(), start=1):
        test = line.split("#", 1)[0].strip()
        if test:
            known.append(KnownFailure(test, f"{path}:{number}"))
    return known


def _seed_line(backend: str) -> str:
    """Which draw the cases came from, and how to make it again."""
    if SEED[0] == 0:
        return ("cases from the fixed draw (seed 0), the same on every run; search anew with "
                f"hetero conformance {backend} --seed random --max-examples 50")
    return f"cases drawn from seed {SEED[0]}; replay them with hetero conformance {backend} --seed {SEED[0]}"


# eq=False: pluggy keeps registered plugins in sets, so it must stay hashable.
@dataclass(eq=False)
class Conformance:
    """The plugin's state during one run: known failures, matrix cells, the report."""

    backend: str
    known: list[KnownFailure]
    suite_ids: set[str] = field(default_factory=set)
    cells: dict[str, tuple[str, str]] = field(default_factory=dict)
    report: Report | None = None

    def _report(self) -> Report:
        if self.report is None:
            from hetero.testing.matrix import Report

            self.report = Report(self.backend)
        return self.report

    @pytest.hookimpl
    def pytest_report_header(self, config: pytest.Config) -> str:
        return f"hetero conformance of {self.backend}: {_seed_line(self.backend)}"

    @pytest.hookimpl
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Mark listed known failures as strict xfails; remember which tests are cells."""
        by_name: dict[str, list[KnownFailure]] = {}
        for entry in self.known:
            by_name.setdefault(entry.test, []).append(entry)
        for item in items:
            if Path(str(item.path)) != SUITE:
                continue
            self.suite_ids.add(item.nodeid)
            callspec = getattr(item, "callspec", None)
            if item.originalname == "test_op" and callspec is not None:
                self.cells[item.nodeid] = (callspec.params["op"], callspec.params["dtype"])
            for entry in by_name.get(item.name, ()):
                entry.matched = True
                item.add_marker(pytest.mark.xfail(
                    strict=True,
                    reason=f"listed as a known failure at {entry.where}; if it passes now, "
                           f"remove that line",
                ))

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Turn each phase's report into the test's outcome in the conformance report."""
        if report.nodeid not in self.suite_ids:
            return
        outcome = _outcome(report)
        if outcome is None:
            return
        name = report.nodeid.rsplit("::", 1)[-1]
        details = [str(v) for k, v in report.user_properties if k == "hetero_detail"]
        if outcome == "unsupported" or (outcome == "skipped" and not details):
            details.append(_skip_reason(report))
        if outcome in ("failed", "xpass"):
            details.append(_failure_message(report))
        self._report().record(name, outcome, self.cells.get(report.nodeid), "; ".join(details))

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter,
                                config: pytest.Config) -> None:
        """Print the matrix (and stale known-failure lines); write the JSON report."""
        report = self._report()
        report.version = _version(self.backend)
        terminalreporter.section("hetero conformance matrix")
        terminalreporter.write_line(report.table())
        terminalreporter.write_line(_seed_line(self.backend))
        stale = [e for e in self.known if not e.matched]
        for entry in stale:
            terminalreporter.write_line(
                f"known failure {entry.test!r} ({entry.where}) names no test of this run"
            )
        path = config.getoption("hetero_report_json")
        if path is not None:
            report.write_json(path)
            terminalreporter.write_line(f"report written to {path}")


def _outcome(report: pytest.TestReport) -> str | None:
    """The conformance outcome a phase report settles, or None (a passing setup/teardown)."""
    from hetero.testing.matrix import UNSUPPORTED_PREFIX

    if str(report.longrepr).startswith("[XPASS(strict)]"):
        return "xpass"
    if hasattr(report, "wasxfail"):
        return "xfail" if report.skipped else "xpass"
    if report.failed:
        return "failed"
    if report.skipped:
        return "unsupported" if _skip_reason(report).startswith(UNSUPPORTED_PREFIX) else "skipped"
    return "passed" if report.when == "call" else None


def _failure_message(report: pytest.TestReport) -> str:
    """What a failed check says: its exception's message (the whole assertion message),
    without the traceback."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    lines = [line for line in str(report.longrepr).splitlines() if line.strip()]
    return lines[-1] if lines else report.outcome


def _keep_hypothesis_out_of_cwd() -> None:
    """Point hypothesis' files (its example database, the constants cache it keeps even
    with ``database=None``) at the user's cache, so the suite writes no ``.hypothesis/``
    into the working directory; ``HYPOTHESIS_STORAGE_DIRECTORY`` still wins."""
    if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        return
    from hypothesis.configuration import set_hypothesis_home_dir

    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    set_hypothesis_home_dir(Path(cache) / "hetero" / "hypothesis")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _version(name: str) -> str:
    """The backend's declared version, or "" when it cannot be loaded."""
    from hetero.core.plugin.manager import load_plugins

    backend = load_plugins().backends.get(name)
    return str(backend.version) if backend is not None else ""
