"""The learned cost model: it learns a deterministic relation, guides a reproducible search
to the optimum no later than random search, transfers from records, and says how to
install LightGBM when it is missing; llvm_cpu's task features of real kernels.

The synthetic backend follows the injected-backend pattern of test_tune_measure.py: the
tuner's protocol with a measurement made from the trace, so that every number here is
deterministic. Its tasks have three split knobs; the time of a candidate is the task's
flops times a bowl in log2 of its "roles" (a lane width, a row count, a depth), with one
optimum. Which knob plays which role differs from task to task, and the backend's task
features are the roles' values: what transfers between tasks is the roles, not the knobs.
"""

from __future__ import annotations

import math
import random
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import hetero
from hetero.core.compiler import Session
from hetero.core.plugin.backend import Backend
from hetero.core.schedule import Trace
from hetero.core.schedule.trace import Instruction, LoopRef
from hetero.core.schedule.tune.features import Featurizer, knob_features
from hetero.core.schedule.tune.measure import Measurer
from hetero.core.schedule.tune.model import GradientBoostedModel, MIN_ROWS, make_cost_model
from hetero.core.schedule.tune.records import append_records, load_records, new_record
from hetero.core.schedule.tune.search import TaskSearch
from hetero.core.schedule.tune.space import SearchSpace
from hetero.core.schedule.tune.task import TuningTask
from hetero.core.schedule.tune.tuner import extract_tasks
from hetero.errors import OptionError, PluginError, ScheduleError
from hetero.plugins.llvm_cpu.host import host
from hetero.plugins.llvm_cpu.tuning_features import NAMES

from tune_nets import conv_net

#: The bowl's optimum, in log2 of each role, and the weight of each role's term.
OPTIMUM = (4.0, 3.0, 2.0)
WEIGHTS = (1.0, 0.6, 0.3)
#: Each synthetic split's default factor: 48 gives the knob 11 values (powers of two and
#: divisors up to 48), so a task has 11**3 = 1331 points.
SPLIT = 48
HERE = {"machine": "here"}
THERE = {"machine": "there"}


class SyntheticBackend(Backend):
    """Replays any trace of its own shape; times it with the bowl; offers the roles as
    task features unless ``features`` is off."""

    name = "synthetic"
    version = "0"

    def __init__(self, features: bool = True) -> None:
        self.features = features

    def compile(self, subgraph, target):
        raise NotImplementedError

    def load_artifact(self, artifact):
        raise NotImplementedError

    def tuning_replay(self, task, trace):
        if len(trace.instructions) != len(task.default_trace.instructions):
            raise ScheduleError("not a trace of this task")

    def tuning_measure(self, task, trace, repeats, seed):
        return seconds(task, trace), [np.zeros(3, np.float32)]

    def tuning_machine(self):
        return HERE

    def tuning_features(self, task, trace):
        return [math.log2(v) for v in roles(task, trace)] if self.features else None


def synthetic_task(key: str, order: tuple[int, int, int], flops: float = 1e6) -> TuningTask:
    """A task whose knob ``k`` plays role ``order[k]``."""
    trace = Trace(tuple(Instruction("split", (LoopRef("b", f"i{k}"),), {}, {"factors": [None, SPLIT]})
                        for k in range(3)))
    return TuningTask(key, "synthetic", f"synthetic {key}", 1, flops, trace, payload=order)


def roles(task: TuningTask, trace: Trace) -> list[int]:
    values = [ins.decisions["factors"][1] for ins in trace.instructions]
    by_role = [0, 0, 0]
    for k, role in enumerate(task.payload):
        by_role[role] = values[k]
    return by_role


def bowl(task: TuningTask, trace: Trace) -> float:
    """The log-time excess over the optimum (0 there)."""
    return sum(w * (math.log2(v) - o) ** 2 for v, o, w in zip(roles(task, trace), OPTIMUM, WEIGHTS))


def seconds(task: TuningTask, trace: Trace) -> float:
    return task.flops * 1e-9 * math.exp(bowl(task, trace))


def _space(backend, task) -> SearchSpace:
    return SearchSpace.from_trace(task.default_trace, lambda t: backend.tuning_replay(task, t))


def _points(space: SearchSpace, count: int, seed: int) -> list[tuple[int, ...]]:
    """``count`` distinct random points."""
    rng, found = random.Random(seed), []
    while len(found) < count:
        point = space.sample(rng)
        if point not in found:
            found.append(point)
    return found


def _ranks(values) -> np.ndarray:
    return np.argsort(np.argsort(np.asarray(values, dtype=float))).astype(float)


def spearman(a, b) -> float:
    """Rank correlation (the values here have no ties that matter: continuous bowls)."""
    return float(np.corrcoef(_ranks(a), _ranks(b))[0, 1])


def _search(backend, task, seed: int, model, trials: int) -> list[tuple[tuple[int, ...], float | None]]:
    measurer = Measurer(backend, executor=lambda: ThreadPoolExecutor(1), repeats=1)
    try:
        search = TaskSearch(task, backend, measurer, seed, model=model)
        default = search.default()
        if model is not None:
            model.update(task, [default.trace], [default.seconds])
        return [(t.point, t.seconds) for t in search.run(trials).trials]
    finally:
        measurer.close()


def _trials_to_optimum(found, task, budget: int) -> int:
    """The trial (the default is 0) that measured the bowl's floor; ``budget`` if none did
    (a search that stopped early without it, as well as one that ran out)."""
    best = task.flops * 1e-9  # exp(0)
    return next((k for k, (_, s) in enumerate(found) if s is not None and math.isclose(s, best)), budget)


# -- learning -------------------------------------------------------------------------------

def test_the_model_learns_the_bowl_from_knob_features_alone():
    backend = SyntheticBackend(features=False)
    task = synthetic_task("t", (0, 1, 2))
    space = _space(backend, task)
    traces = [space.trace(p) for p in _points(space, 140, seed=0)]
    model = GradientBoostedModel([backend], seed=0)
    model.update(task, traces[:40], [seconds(task, t) for t in traces[:40]])
    predicted = model.rank(task, traces[40:])
    # On 100 held-out points a ranking unrelated to the truth has a rank correlation of
    # 0 +- 0.1 (1/sqrt(99)); 0.8 is eight of those above chance, and below the 0.91-0.93
    # measured with 40 trials on three seeds.
    assert spearman(predicted, [seconds(task, t) for t in traces[40:]]) > 0.8


def test_the_model_ranks_nothing_before_it_has_enough_trials():
    backend = SyntheticBackend(features=False)
    task = synthetic_task("t", (0, 1, 2))
    space = _space(backend, task)
    traces = [space.trace(p) for p in _points(space, MIN_ROWS + 5, seed=1)]
    model = GradientBoostedModel([backend], seed=0)
    model.update(task, traces[:MIN_ROWS - 1], [seconds(task, t) for t in traces[:MIN_ROWS - 1]])
    assert model.rank(task, traces[MIN_ROWS:]) == [0.0] * 5
    model.update(task, traces[MIN_ROWS - 1:MIN_ROWS], [seconds(task, traces[MIN_ROWS - 1])])
    assert len(set(model.rank(task, traces[MIN_ROWS:]))) > 1


def test_a_failed_trial_ranks_slower_than_every_success():
    backend = SyntheticBackend(features=False)
    task = synthetic_task("t", (0, 1, 2))
    space = _space(backend, task)
    traces = [space.trace(p) for p in _points(space, 30, seed=2)]
    # The optimum's neighbourhood "fails": the model must learn to avoid it, not to seek it.
    failing = [t for t in traces if bowl(task, t) < 1.0] + [space.trace((16, 8, 4))]
    good = [t for t in traces if t not in failing]
    model = GradientBoostedModel([backend], seed=0)
    model.update(task, good + failing, [seconds(task, t) for t in good] + [None] * len(failing))
    scores = model.rank(task, [space.trace((16, 8, 4)), max(good, key=lambda t: seconds(task, t))])
    assert scores[0] > scores[1]


def test_a_trace_that_does_not_fit_the_space_is_ignored_and_ranked_last():
    backend = SyntheticBackend(features=False)
    task = synthetic_task("t", (0, 1, 2))
    space = _space(backend, task)
    traces = [space.trace(p) for p in _points(space, 12, seed=3)]
    short = Trace(traces[0].instructions[:2])
    assert knob_features(space, short) is None
    model = GradientBoostedModel([backend], seed=0)
    model.update(task, traces + [short], [seconds(task, t) for t in traces] + [1e-9])
    assert model.rank(task, [short, traces[0]])[0] == math.inf


# -- search ---------------------------------------------------------------------------------

def test_the_model_guided_search_with_a_fixed_seed_is_reproducible():
    backend = SyntheticBackend()
    task = synthetic_task("t", (2, 0, 1))
    first = _search(backend, task, 5, GradientBoostedModel([backend], seed=5), 24)
    assert len(first) == 25 and len({p for p, _ in first}) == 25
    assert _search(backend, task, 5, GradientBoostedModel([backend], seed=5), 24) == first


@pytest.mark.parametrize("features", [False, True], ids=["knobs", "knobs+task features"])
def test_the_model_guided_search_reaches_the_optimum_no_later_than_random_search(features):
    backend = SyntheticBackend(features=features)
    task = synthetic_task("t", (0, 1, 2))
    budget = 100
    guided, unguided = [], []
    for seed in range(4):
        model = GradientBoostedModel([backend], seed=seed)
        guided.append(_trials_to_optimum(_search(backend, task, seed, model, budget), task, budget))
        unguided.append(_trials_to_optimum(_search(backend, task, seed, None, budget), task, budget))
    # The one optimum of 1331 points: random search (half random draws, half one-knob
    # mutations of the best) took 14, 42, 32 and 48 trials on these seeds (mean 34);
    # ranking 16 valid draws a trial by the model took 20, 26, 18, 22 on knob features
    # (mean 21.5) and 21, 16, 18, 38 with task features too (mean 23.25). The claim is
    # "no later": the mean over the seeds
    # (a run that does not find it counts as the whole budget, which only flatters the
    # slower side); the figures measured leave it a margin of about 1.5x.
    assert sum(guided) / len(guided) <= sum(unguided) / len(unguided), (guided, unguided)


# -- transfer -------------------------------------------------------------------------------

def _records(path, backend, task, count: int, seed: int, machine=HERE):
    space = _space(backend, task)
    traces = [space.trace(p) for p in _points(space, count, seed)]
    append_records(path, [new_record(task.key, backend.name, t.to_json(), seconds(task, t), machine, task.label)
                          for t in traces])


def _first_picks(backend, task, model_for, seeds) -> list[float]:
    """The bowl's excess at the first trial after the default, per search seed."""
    picks = []
    for seed in seeds:
        found = _search(backend, task, seed, model_for(), 1)
        picks.append(bowl(task, _space(backend, task).trace(found[1][0])))
    return picks


@pytest.mark.parametrize("source", ["same task", "another task"])
def test_pretraining_on_records_makes_the_first_proposal_better(tmp_path, source):
    backend = SyntheticBackend()
    task = synthetic_task("t", (0, 1, 2))
    # Another kernel: its knobs play other roles and it is 30x larger; only the task
    # features (the roles) carry over.
    other = synthetic_task("u", (1, 2, 0), flops=3e7) if source == "another task" else task
    path = tmp_path / "records.jsonl"
    _records(path, backend, other, 40, seed=7)
    records = load_records(path)

    def pretrained():
        model = GradientBoostedModel([backend], seed=0)
        summary = model.pretrain(records, [(backend, task), (backend, other)])
        assert summary.used == 40 and summary.other_machine == summary.stale == summary.other_task == 0
        return model

    seeds = range(6)
    cold = _first_picks(backend, task, lambda: GradientBoostedModel([backend], seed=0), seeds)
    warm = _first_picks(backend, task, pretrained, seeds)
    # Untrained, the first proposal is the first of the 16 random draws: a random point,
    # whose excess averages ~4 over this space (7.2 on these seeds). Pretrained, the model
    # picks among the 16: 1.2 and 1.0 measured, pretrained on the same and on the other task. Half the cold mean leaves room for
    # a pick that misses by a little on one seed, and none for a model that does not rank.
    assert sum(warm) < 0.5 * sum(cold), (warm, cold)
    # And not by luck of six picks: over 100 random points of the task the pretrained
    # model's ranking follows the truth (chance: 0 +- 0.1; measured 0.95 and 0.92).
    space = _space(backend, task)
    traces = [space.trace(p) for p in _points(space, 100, seed=11)]
    assert spearman(pretrained().rank(task, traces), [seconds(task, t) for t in traces]) > 0.5


def test_records_of_another_machine_are_used_only_when_asked(tmp_path):
    backend = SyntheticBackend()
    task = synthetic_task("t", (0, 1, 2))
    path = tmp_path / "records.jsonl"
    _records(path, backend, task, 10, seed=1, machine=THERE)
    records = load_records(path)
    model = GradientBoostedModel([backend], seed=0)
    assert model.pretrain(records, [(backend, task)]).other_machine == 10
    assert model.rank(task, [task.default_trace]) == [0.0]  # nothing learned
    assert model.pretrain(records, [(backend, task)], any_machine=True).used == 10
    assert model.rank(task, [task.default_trace]) != [0.0]


def test_records_of_unknown_tasks_and_stale_traces_are_skipped_and_counted(tmp_path):
    backend = SyntheticBackend()
    task = synthetic_task("t", (0, 1, 2))
    path = tmp_path / "records.jsonl"
    _records(path, backend, task, 3, seed=2)
    stale = Trace(task.default_trace.instructions[:1]).to_json()  # an older schedule's shape
    append_records(path, [new_record(task.key, backend.name, stale, 1.0, HERE),
                          new_record("gone", backend.name, task.default_trace.to_json(), 1.0, HERE),
                          new_record(task.key, backend.name, "not json", 1.0, HERE)])
    summary = GradientBoostedModel([backend]).pretrain(load_records(path), [(backend, task)])
    assert (summary.used, summary.stale, summary.other_task) == (3, 2, 1)


# -- choosing the model ---------------------------------------------------------------------

def test_make_cost_model_knows_none_and_lightgbm_and_names_them_otherwise():
    backend = SyntheticBackend()
    assert make_cost_model("none", [backend]) is None
    assert isinstance(make_cost_model("lightgbm", [backend], seed=3), GradientBoostedModel)
    with pytest.raises(OptionError, match="xgboost.*none, lightgbm"):
        make_cost_model("xgboost", [backend])


def test_missing_lightgbm_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # `import lightgbm` now raises ImportError
    with pytest.raises(OptionError, match=r"pip install 'hetero\[tune\]'"):
        make_cost_model("lightgbm", [SyntheticBackend()])


def test_a_task_of_a_backend_the_model_was_not_given_is_named():
    model = GradientBoostedModel([], seed=0)
    task = synthetic_task("t", (0, 1, 2))
    with pytest.raises(PluginError, match="synthetic"):
        model.update(task, [task.default_trace], [1.0])


# -- llvm_cpu's task features ---------------------------------------------------------------

def _conv1():
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    session = Session(["llvm_cpu"], options={"num_threads": 1, "layout": "nchw"})
    return next((b, t) for b, t in extract_tasks(graph, session) if t.label.startswith("conv1"))


def test_llvm_cpu_features_of_a_real_kernel_are_finite_of_fixed_length_and_follow_the_lanes():
    from hetero.plugins.llvm_cpu.schedules_tiled import TILE

    backend, task = _conv1()  # 3x3 conv, 8 output channels: lanes 8 by default, rows as the host's tile
    # 8 rows where the host's tile holds them (32 vector registers), else the most rows of
    # its choices that divide 8 (16 registers, AVX2: 4).
    want_rows = 8 if TILE.row_choices[0] >= 8 else next(r for r in TILE.row_choices if 8 % r == 0)
    space = _space(backend, task)
    lanes = next(i for i, k in enumerate(space.knobs) if len(k.targets) == 2)  # the split tied to the pack
    rows = next(i for i, k in enumerate(space.knobs) if i != lanes)
    assert space.default[lanes] == 8 and space.default[rows] == want_rows
    mutated = list(space.default)
    mutated[lanes], mutated[rows] = 4, 2
    default = backend.tuning_features(task, task.default_trace)
    changed = backend.tuning_features(task, space.trace(tuple(mutated)))
    for found in (default, changed):
        assert len(found) == len(NAMES) and all(math.isfinite(x) for x in found)
    feature = dict(zip(NAMES, zip(default, changed)))
    register_lanes = host().lanes(4)
    assert feature["vector lanes / register lanes"] == (8 / register_lanes, 4 / register_lanes)
    assert feature["log2 unrolled extent"] == (math.log2(want_rows), 1.0)  # the default rows, then 2
    assert feature["log2 flops"][0] == feature["log2 flops"][1] == math.log2(task.flops)
    # The reduction over 8 input channels x 3 x 3 taps, whatever the tile.
    assert feature["log2 reduction extent"] == (math.log2(72), math.log2(72))
    assert feature["register tile bytes / L1"][1] < feature["register tile bytes / L1"][0]


def test_llvm_cpu_features_of_a_trace_that_does_not_replay_are_none():
    backend, task = _conv1()
    split = next(k for k, i in enumerate(task.default_trace.instructions) if i.kind == "split"
                 and i.inputs[0].name == "i1")
    alone = task.default_trace.with_decisions({split: {"factors": [None, 4]}})  # without its pack
    with pytest.raises(ScheduleError):
        backend.tuning_replay(task, alone)
    assert backend.tuning_features(task, alone) is None


def test_a_featurizer_of_a_real_task_holds_knob_and_task_features():
    backend, task = _conv1()
    featurizer = Featurizer(task, backend)
    knobs, features = featurizer.features(task.default_trace)
    assert featurizer.task_width == len(NAMES) and features == backend.tuning_features(task, task.default_trace)
    assert knobs == [v for knob in featurizer.space.knobs for v in (float(knob.default), math.log2(knob.default))]
