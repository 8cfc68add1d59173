"""onnx's whole backend node suite on hetero (llvm_cpu, no fallback) beside onnxruntime.

Run: ``python benchmarks/onnx_node_suite.py [--only REGEX] [--no-ort] [--write-known-failures FILE]``

Every node test case the installed onnx ships (``onnx/backend/test/data/node``) runs
through :class:`hetero.onnx_backend.HeteroBackend` and through onnxruntime's onnx
backend (``onnxruntime.backend``), each judged by onnx's own ``BackendTest`` runner
at onnx's tolerances. Prints both pass counts, then hetero's non-passing cases grouped
by reason. A case hetero runs but gets wrong (a failed comparison, not a refusal) is
listed first as a wrong number, and makes the script exit 1: hetero may refuse, it
may not compute wrongly.

``--write-known-failures FILE`` writes the refusals as the known-failures file of
``tests/plugins/llvm_cpu/test_onnx_backend.py`` (one case a line, with its reason).
A wrong number is never written there. The one exception is a case whose line in the
current file says ``numerics:`` or ``spec:`` and why hetero's answer differs from
onnx's expected output while being right (hetero's float16 rounding closer to exact
than onnx's reference; an expected output that contradicts the operator's
specification): it is shown apart, kept in the file, and does not fail the run.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
import re
import sys
import time
import unittest
import warnings

import onnx
import onnx.backend.test

from hetero.onnx_backend import HeteroBackend

#: The known-failures file of the adapter's test, whose ``numerics:`` and ``spec:`` lines this reads.
KNOWN_FAILURES = (Path(__file__).parents[1] / "tests" / "plugins" / "llvm_cpu"
                  / "onnx_backend_known_failures.txt")
#: Reasons under which a case may fail its comparison: ``numerics:`` where hetero's answer
#: is the closer one, ``spec:`` where onnx's expected output contradicts the operator's
#: specification, which hetero follows (each line says how, and what onnxruntime does).
DISAGREEMENTS = ("numerics:", "spec:")

HEADER = """\
# onnx backend node tests that hetero (llvm_cpu, no fallback) does not pass yet, with the reason.
# One test a line: NAME  REASON. tests/plugins/llvm_cpu/test_onnx_backend.py marks each as a strict
# expected failure, so a test that starts passing fails the suite until its line is removed here.
# Written by benchmarks/onnx_node_suite.py --write-known-failures (onnx {onnx}); no line is a
# wrong number: those fail the suite outright. A line whose reason starts "numerics:" is a case
# whose comparison fails while hetero's answer is the closer one, with the measurement that shows it;
# one that starts "spec:" a case whose expected output contradicts the op's specification.
"""


def node_cases(backend: object) -> tuple[type[unittest.TestCase], list[str]]:
    """onnx's node test cases for ``backend``: the TestCase class and the case names."""
    suite = onnx.backend.test.BackendTest(backend, __name__)
    cases = suite.test_cases["OnnxBackendNodeModelTest"]
    return cases, sorted(n for n in dir(cases) if n.startswith("test_") and n.endswith("_cpu"))


def accepted_numerics(path: Path = KNOWN_FAILURES) -> dict[str, str]:
    """The cases the known-failures file accepts as numerical differences, with why."""
    if not path.exists():
        return {}
    accepted = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, reason = line.split(maxsplit=1)
            if reason.startswith(DISAGREEMENTS):
                accepted[f"{name}_cpu"] = reason
    return accepted


def run_case(cases: type[unittest.TestCase], name: str) -> tuple[str, str]:
    """``("pass" | "wrong" | "refused", reason)`` for one case."""
    result = unittest.TestResult()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases(name).run(result)
    if result.failures:
        return "wrong", _last_line(result.failures[0][1])
    if result.errors:
        return "refused", _last_line(result.errors[0][1])
    if result.skipped:
        return "refused", f"skipped: {result.skipped[0][1]}"
    return "pass", ""


def _last_line(trace: str) -> str:
    lines = [line for line in trace.strip().splitlines() if line.strip()]
    return " ".join(lines[-1].split()) if lines else "no message"


def reason_group(reason: str) -> str:
    """``reason`` with the names and numbers of one case taken out, so alike ones group."""
    text = re.sub(r"^[\w.]+Error: ", "", reason)
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\b(model|node|graph|value|input|output) [\w/.:-]+", r"\1 …", text)
    text = re.sub(r"\d+", "N", text)
    return text[:150]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the cases whose name matches this regular expression")
    parser.add_argument("--no-ort", action="store_true", help="skip the onnxruntime run")
    parser.add_argument("--write-known-failures", metavar="FILE")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    args = parser.parse_args()
    only = re.compile(args.only) if args.only else None

    cases, names = node_cases(HeteroBackend)
    names = [n for n in names if only is None or only.search(n)]
    outcome: dict[str, tuple[str, str]] = {}
    start = time.perf_counter()
    for i, name in enumerate(names, 1):
        outcome[name] = run_case(cases, name)
        if not args.quiet and sys.stderr.isatty():
            print(f"\r  hetero {i}/{len(names)} {time.perf_counter() - start:6.0f} s", end="", file=sys.stderr)
    if not args.quiet and sys.stderr.isatty():
        print(file=sys.stderr)
    passed = sum(1 for kind, _ in outcome.values() if kind == "pass")
    print(f"onnx {onnx.__version__}: {len(names)} node cases")
    print(f"hetero (llvm_cpu, no fallback): {passed} passed")

    if not args.no_ort:
        import onnxruntime
        import onnxruntime.backend

        onnxruntime.set_default_logger_severity(3)  # its warnings about unused initializers

        ort_cases, _ = node_cases(onnxruntime.backend)
        ort_passed = sum(1 for n in names if run_case(ort_cases, n)[0] == "pass")
        print(f"onnxruntime {onnxruntime.__version__} (CPU): {ort_passed} passed")

    numerics = accepted_numerics()
    wrong = {n: r for n, (kind, r) in outcome.items() if kind == "wrong" and n not in numerics}
    differing = {n: numerics[n] for n, (kind, _) in outcome.items() if kind == "wrong" and n in numerics}
    if differing:
        print(f"\naccepted numerical differences ({len(differing)}, each explained in {KNOWN_FAILURES.name}):")
        for name, reason in differing.items():
            print(f"  {name}: {reason}")
    if wrong:
        print(f"\nWRONG NUMBERS ({len(wrong)} cases hetero ran and got wrong):")
        for name, reason in wrong.items():
            print(f"  {name}: {reason}")
    groups: dict[str, list[str]] = defaultdict(list)
    for name, (kind, reason) in outcome.items():
        if kind == "refused":
            groups[reason_group(reason)].append(name)
    print(f"\nrefused: {sum(len(v) for v in groups.values())} cases, by reason")
    for reason, members in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        shown = ", ".join(m.removeprefix("test_").removesuffix("_cpu") for m in members[:4])
        more = f" and {len(members) - 4} more" if len(members) > 4 else ""
        print(f"  {len(members):4d}  {reason}\n        {shown}{more}")

    if args.write_known_failures:
        with open(args.write_known_failures, "w") as out:
            out.write(HEADER.format(onnx=onnx.__version__))
            for name, (kind, reason) in sorted(outcome.items()):
                if kind == "refused" or name in differing:
                    out.write(f"{name.removesuffix('_cpu')}  {differing.get(name, reason)}\n")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
