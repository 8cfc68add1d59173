"""Auto-tuning: search over the decisions of each kernel's schedule trace, measured in isolation.

A backend that can be tuned implements the small protocol of
:class:`~hetero.core.plugin.backend.Backend` (``tuning_tasks``, ``tuning_replay``,
``tuning_measure``, ``tuning_machine``). The tuner then knows no backend by name:

- :mod:`.task`: a model's distinct kernels, each weighted by occurrences x default time;
- :mod:`.space`: the knobs of a default trace, coupled decisions sharing one variable;
- :mod:`.measure`: candidates built and timed in worker processes, with timeouts, so a
  crash or a hang is a failed trial, not a failed run; :mod:`.executors`: where those
  processes are (local, or a Dask cluster);
- :mod:`.search`: seeded random sampling plus mutation of the best so far, ranked by a
  :class:`~hetero.core.schedule.tune.search.CostModel` where one is given;
- :mod:`.model`: that model, LightGBM trees on :mod:`.features` of each candidate,
  learned as trials arrive and from earlier records;
- :mod:`.records`: the append-only JSON-lines database that ``hetero.compile(records=...)``
  reads back;
- :mod:`.tuner`: ``hetero tune``'s driver; :mod:`.report`: its HTML/SVG plot.
"""

from hetero.core.schedule.tune.records import Record, best_traces, load_records
from hetero.core.schedule.tune.task import TuningTask

__all__ = ["Record", "TuningTask", "best_traces", "load_records"]
