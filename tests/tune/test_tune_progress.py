"""The tuner's progress: ``tune`` and ``trial`` steps for a front end, and the command
line's lines (one a trial in a log; on a terminal, the status line and one line a task)."""

from __future__ import annotations

import io
import re
import sys

import onnx

import hetero
from hetero.cli import main
from hetero.core import progress
from hetero.core.compiler import Session
from hetero.core.schedule.tune.tuner import Budget, extract_tasks, gflops, tune

from tune_backends import TraceTimedBackend
from tune_nets import conv_net

ERASE = "\r\x1b[K"


class Recorder:
    """A progress reporter that keeps every step and end."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, int, int, str]] = []
        self.ended: list[str] = []

    def step(self, stage: str, index: int, total: int, label: str) -> None:
        self.steps.append((stage, index, total, label))

    def end(self, stage: str) -> None:
        self.ended.append(stage)


def test_steps_name_the_task_the_trials_the_best_and_the_time_left(tmp_path):
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    backend = TraceTimedBackend()
    tasks = [(backend, t) for _, t in extract_tasks(graph, Session(["llvm_cpu"], options={"num_threads": 1}))]
    recorder = Recorder()
    with progress.reporting(recorder):
        results = tune(tasks, Budget(trials=9), tmp_path / "r.jsonl", repeats=1, confirm_rounds=1)
    # Each task's default, then each task's search, as task i of N.
    tune_steps = [(i, n) for stage, i, n, _ in recorder.steps if stage == "tune"]
    assert tune_steps == [(1, 3), (2, 3), (3, 3)] * 2
    trials = [(i, n, label) for stage, i, n, label in recorder.steps if stage == "trial"]
    # Per task: trial k of the task's share. The shares add up to the budget, less what a
    # task whose space holds fewer candidates than its share leaves (the MatMul head on
    # a host of 16 vector registers, whose tile has fewer row choices).
    shares = [len(r.trials) - 1 for r in results]
    planned: list[int] = []
    done: list[int] = []
    for i, n, _ in trials:
        if i == 1:
            planned.append(n)
            done.append(0)
        done[-1] += 1
        assert (i, n) == (done[-1], planned[-1])
    assert sum(planned) == 9 and done == shares and all(d <= p for d, p in zip(done, planned))
    assert [int(re.search(r"(\d+)/9 in all", label).group(1)) for _, _, label in trials] == list(
        range(1, len(trials) + 1))
    # The best so far, in GFLOP/s, as the results have it after that trial.
    curves = [r.best_so_far()[1:] for r in results]
    best = [gflops(seconds, r.task) for r, curve in zip(results, curves) for seconds in curve]
    assert [float(re.search(r"best ([\d.]+) GFLOP/s", label).group(1)) for _, _, label in trials] == \
        [round(b, 1) for b in best]
    assert all(re.search(r"elapsed \d+ s, ~\d+ s left", label) for _, _, label in trials)
    assert trials[-1][2].endswith("~0 s left")  # the budget is spent
    assert recorder.ended[-1] == "tune" and {"trial", "confirm"} <= set(recorder.ended)


def _model(tmp_path):
    model = tmp_path / "net.onnx"
    onnx.save(conv_net(), model)
    return str(model)


def test_in_a_log_every_trial_has_its_line(tmp_path, capsys):
    argv = ["tune", _model(tmp_path), "--budget", "3", "--confirm", "0", "-o", str(tmp_path / "r.jsonl"),
            "-O", "num_threads=1"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert ERASE not in err  # stderr is not a terminal: no status line
    trial_lines = [line for line in err.splitlines() if re.match(r"task \d/3 trial \d/\d+: ", line)]
    assert len(trial_lines) == 3
    assert all("GFLOP/s" in line and "left" in line for line in trial_lines)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_status_line_shows_the_trials_and_only_task_lines_are_printed(tmp_path, monkeypatch,
                                                                                    capsys):
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setenv("COLUMNS", "400")  # the status line is cut to the terminal's width
    argv = ["tune", _model(tmp_path), "--budget", "3", "--confirm", "0", "-o", str(tmp_path / "r.jsonl"),
            "-O", "num_threads=1"]
    assert main(argv) == 0
    text = terminal.getvalue()
    # What stays on the screen: each line's text after the last erase of the status line.
    printed = [segment.split(ERASE)[-1] for segment in text.split("\n")[:-1]]
    assert not any(" trial " in line for line in printed)
    assert sum(bool(re.match(r"task \d/3 .*: default ", line)) for line in printed) == 3
    assert any(re.match(r"task \d/3 searched: \d+ trials \(0 failed\), best ", line) for line in printed)
    drawn = [d for d in text.split(ERASE) if " > trial " in d]
    assert drawn and all("GFLOP/s" in d and "left" in d for d in drawn)
    assert re.search(r"tune \d/3 .* > trial \d/\d best [\d.]+ GFLOP/s; \d/3 in all", drawn[-1])
    assert text.endswith(ERASE)  # the status line is erased at the end
