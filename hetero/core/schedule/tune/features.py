"""Features of a candidate schedule, for the tuner's learned cost model.

Two kinds, because they serve two kinds of learning:

- *knob features* (:func:`knob_features`), read off the trace alone: per knob of the
  task's :class:`~hetero.core.schedule.tune.space.SearchSpace` its value and log2 of it.
  Every tunable backend has them; they mean something only within one task, so they
  teach the model about the task whose records they come from.
- *task features*, the backend's
  :meth:`~hetero.core.plugin.backend.Backend.tuning_features`: what the schedule makes
  of the hardware (vector lanes, register tile, working set against the caches), the
  same numbers for every task of that backend. Through them records of one kernel help
  rank the candidates of another (transfer); a backend may offer none.

:class:`Featurizer` puts the two together for one task, caching each trace's vector,
since the search ranks the same few hundred points over and over.
"""

from __future__ import annotations

import math

from hetero.core.plugin.backend import Backend
from hetero.core.schedule import Trace
from hetero.core.schedule.tune.space import SearchSpace, replays
from hetero.core.schedule.tune.task import TuningTask


def knob_features(space: SearchSpace, trace: Trace) -> list[float] | None:
    """Per knob of ``space`` the value ``trace`` gives it and log2 of that value; None when
    ``trace`` is not a trace of the space's base (another hetero's schedule, say)."""
    if len(trace.instructions) != len(space.base.instructions) or any(
            a.kind != b.kind or a.inputs != b.inputs for a, b in zip(trace.instructions, space.base.instructions)):
        return None
    found: list[float] = []
    for knob in space.knobs:
        k, name, position = knob.targets[0]
        value = trace.instructions[k].decisions.get(name)
        if position is not None:
            value = value[position] if isinstance(value, (list, tuple)) and position < len(value) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        # A backend's own legal values may include 0 (an option turned off): its log2 is
        # taken as 0, the raw value tells it from 1.
        found.extend((float(value), math.log2(value) if value > 0 else 0.0))
    return found


class Featurizer:
    """The knob and task features of ``task``'s traces, cached by trace.

    ``task_width`` is the length of the backend's task features (0 when it offers none),
    found on the default trace; a trace whose features do not replay, or come back with
    another length, is :meth:`features`' None.
    """

    def __init__(self, task: TuningTask, backend: Backend) -> None:
        self.task = task
        self.backend = backend
        self.space = SearchSpace.from_trace(task.default_trace, lambda t: backend.tuning_replay(task, t))
        default = backend.tuning_features(task, task.default_trace)
        self.task_width = len(default) if default else 0
        self.knob_width = 2 * len(self.space.knobs)
        self._cache: dict[str, tuple[list[float], list[float] | None] | None] = {}

    def features(self, trace: Trace) -> tuple[list[float], list[float] | None] | None:
        """``trace``'s (knob features, task features or None), or None when it does not fit
        the task's space (its knobs cannot be read) or does not replay."""
        key = trace.to_json()
        if key not in self._cache:
            self._cache[key] = self._compute(trace)
        return self._cache[key]

    def _compute(self, trace: Trace) -> tuple[list[float], list[float] | None] | None:
        knobs = knob_features(self.space, trace)
        if knobs is None:
            return None
        if self.task_width:
            # The backend's features replay the trace themselves (None: it does not apply).
            found = self.backend.tuning_features(self.task, trace)
            if found is None or len(found) != self.task_width or not all(math.isfinite(x) for x in found):
                return None
            return knobs, [float(x) for x in found]
        if not replays(trace, lambda t: self.backend.tuning_replay(self.task, t)):
            return None
        return knobs, None
