"""Compile phases: exclusive of what they nest, summed per owner, silent without a recorder.

A fake clock drives :mod:`hetero.core.timing` here, so every figure is exact."""

from __future__ import annotations

import re

import pytest

from hetero.core import progress, timing


class _Clock:
    """perf_counter that moves only when told to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(timing.time, "perf_counter", fake)
    return fake


def test_a_nested_phase_is_taken_out_of_the_one_around_it(clock: _Clock) -> None:
    with timing.recording() as times:
        with timing.phase("compile"):
            clock.now += 1.0
            with timing.phase("lower", "my_backend"):
                clock.now += 2.0
            with timing.phase("lower", "my_backend"):
                clock.now += 0.5
            clock.now += 0.25
        clock.now += 4.0
    assert times.seconds == {("hetero", "compile"): 1.25, ("my_backend", "lower"): 2.5}
    assert times.counts == {("hetero", "compile"): 1, ("my_backend", "lower"): 2}
    assert times.wall == 7.75
    assert times.total() == 3.75 and times.total("my_backend") == 2.5
    assert times.owners() == ["hetero", "my_backend"]


def test_the_table_adds_up_to_the_wall_time(clock: _Clock) -> None:
    with timing.recording() as times:
        with progress.stage("optimise"):  # a progress stage is a core phase too
            clock.now += 1.0
        with timing.phase("emit", "my_backend"):
            clock.now += 2.0
        clock.now += 0.5  # waiting for work done elsewhere, which is then added
        timing.add("link", 0.5, "my_backend", count=3)
        clock.now += 1.0
    rows = {}
    for line in times.table().splitlines()[1:]:
        found = re.fullmatch(r"(.+?)\s+(\d+\.\d{3})\s+([\d.]+%)\s*(\d*)", line)
        assert found, line
        rows[found[1]] = list(found.groups()[1:])
    assert list(rows) == ["hetero  optimise", "my_backend  emit", "my_backend  link", "my_backend  (all)",
                          "other", "total"]
    assert rows["hetero  optimise"] == ["1.000", "22.2%", "1"]
    assert rows["my_backend  link"] == ["0.500", "11.1%", "3"]
    assert rows["my_backend  (all)"] == ["2.500", "55.6%", ""]
    assert rows["other"] == ["1.000", "22.2%", ""]
    assert rows["total"] == ["4.500", "100.0%", ""]


def test_without_a_recorder_phases_record_nothing(clock: _Clock) -> None:
    with timing.phase("lower", "my_backend"):
        clock.now += 1.0
    timing.add("link", 1.0)
    with timing.recording() as times:
        pass
    assert times.seconds == {} and times.wall == 0.0
