"""The conformance report: every check's outcome, and the op × dtype matrix.

The suite's truthfulness checks are one test per (op, dtype) the backend claims;
their outcomes fill the matrix, one cell each: ``passed``, ``failed``,
``unsupported`` (the backend's ``supports`` declined every case drawn for that
dtype), ``xfail`` (a listed known failure that still fails) or ``xpass`` (a listed
known failure that passes now: the list is stale). Every other check (contract,
rejection, artifacts, models, robustness) is reported by test name.

The report prints as a compact table at the end of a run and saves as JSON::

    {"backend": "toy", "version": "1.0",
     "dtypes": ["float32", ...],
     "matrix": {"Relu": {"float32": "passed", "int8": "unsupported"}, ...},
     "tests": {"test_contract_loads": "passed", ...},
     "details": {"test_op[Relu-int8]": "toy declines ...", ...},
     "summary": {"passed": 12, "failed": 0, ...}}
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: Outcomes, in the order the summary lists them.
OUTCOMES = ("passed", "failed", "unsupported", "xfail", "xpass", "skipped")

#: How the printed matrix abbreviates each outcome; failures shout.
_CELL = {"passed": "ok", "failed": "FAIL", "unsupported": "unsup", "xfail": "xfail",
         "xpass": "XPASS", "skipped": "skip"}

# The reason prefix the suite gives a skip meaning "the backend declined every case".
UNSUPPORTED_PREFIX = "unsupported:"
# The reason prefix of a check that compiled but needs a device this machine lacks.
NOT_RUN_PREFIX = "compiled, not run:"


@dataclass
class Report:
    """The outcomes of one conformance run against one backend."""

    backend: str
    version: str = ""
    matrix: dict[str, dict[str, str]] = field(default_factory=dict)
    tests: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)

    def record(self, test: str, outcome: str, cell: tuple[str, str] | None = None,
               detail: str = "") -> None:
        """Record ``test``'s outcome; ``cell`` is its (op, dtype) when it is a matrix cell.

        A test reported twice (a failing teardown after a passing call) keeps the
        worse outcome: a failure is never hidden by a later pass. The placeholder the
        suite runs when there is no (op, dtype) to check (``test_op[none]``, skipped
        with the reason: the backend does not load, or claims none of the ops) has
        ``None`` for both; it is reported by name, and is no cell.
        """
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {outcome!r}; one of {OUTCOMES}")
        if self.tests.get(test) == "failed" or self.tests.get(test) == "xpass":
            return
        self.tests[test] = outcome
        if detail:
            self.details[test] = detail
        if cell is not None and None not in cell:
            op, dtype = cell
            self.matrix.setdefault(op, {})[dtype] = outcome

    @property
    def dtypes(self) -> list[str]:
        """Every dtype that appears in the matrix, sorted."""
        return sorted({d for row in self.matrix.values() for d in row})

    def summary(self) -> dict[str, int]:
        """How many tests had each outcome (outcomes that never occurred are left out)."""
        counts = Counter(self.tests.values())
        return {outcome: counts[outcome] for outcome in OUTCOMES if counts[outcome]}

    def to_dict(self) -> dict[str, object]:
        """The report as JSON-safe data (the layout in this module's docstring)."""
        return {
            "backend": self.backend, "version": self.version, "dtypes": self.dtypes,
            "matrix": {op: dict(sorted(row.items())) for op, row in sorted(self.matrix.items())},
            "tests": dict(sorted(self.tests.items())), "details": dict(sorted(self.details.items())),
            "summary": self.summary(),
        }

    def write_json(self, path: str | Path) -> None:
        """Write :meth:`to_dict` to ``path`` as indented JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    def table(self) -> str:
        """The op × dtype matrix as a fixed-width table, then one line of totals.

        A ``-`` marks a dtype the op has no cases for.
        """
        dtypes = self.dtypes
        title = f"hetero conformance: {self.backend} {self.version}".rstrip()
        if not self.matrix:
            return f"{title}\n(no op claimed, or no op check ran)\n{self._totals()}"
        width = max(len("op"), *(len(op) for op in self.matrix))
        cols = [max(len(d), 5) for d in dtypes]
        lines = [title, "  ".join(["op".ljust(width), *(d.ljust(c) for d, c in zip(dtypes, cols))]).rstrip()]
        for op, row in sorted(self.matrix.items()):
            cells = [_CELL[row[d]] if d in row else "-" for d in dtypes]
            lines.append("  ".join([op.ljust(width), *(s.ljust(c) for s, c in zip(cells, cols))]).rstrip())
        lines.append(self._totals())
        unrun = [d for t, d in sorted(self.details.items()) if self.tests.get(t) == "skipped"
                 and NOT_RUN_PREFIX in d]
        if unrun:
            why = unrun[0].split(NOT_RUN_PREFIX, 1)[1].strip()
            lines.append(f"{len(unrun)} skipped checks compiled everything they could and did not run it here: {why}")
        return "\n".join(lines)

    def _totals(self) -> str:
        counts = self.summary()
        return "checks: " + (", ".join(f"{n} {o}" for o, n in counts.items()) or "none ran")
