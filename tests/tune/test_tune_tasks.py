"""Tasks of a small conv net: equal kernels are one task, occurrences counted."""

from __future__ import annotations

import hetero
from hetero.core.compiler import Session
from hetero.core.schedule.tune.tuner import extract_tasks, share

from tune_nets import conv_net


def _tasks():
    graph = hetero.optimize(hetero.load_onnx(conv_net()))
    return extract_tasks(graph, Session(["llvm_cpu"], options={"num_threads": 1}))


def test_equal_convolutions_are_one_task_with_two_occurrences():
    tasks = [t for _, t in _tasks()]
    by_op = {t.label.split(" ")[0]: t for t in tasks}
    # conv1 and conv2 (Conv+Relu, same shapes) are one task; conv3 and the head one each.
    assert sorted(by_op) == ["conv1", "conv3", "head"]
    assert by_op["conv1"].occurrences == 2
    assert by_op["conv3"].occurrences == 1 and by_op["head"].occurrences == 1
    assert len({t.key for t in tasks}) == len(tasks)


def test_every_task_has_decisions_and_its_flops():
    for backend, task in _tasks():
        assert backend.name == "llvm_cpu" and task.backend == "llvm_cpu"
        assert task.default_trace.decisions
    head = next(t for _, t in _tasks() if t.label.startswith("head"))
    # Two per multiply-add (one per weight), one per other store (the zero and the result of each output).
    assert 2 * 1024 * 10 <= head.flops <= 2 * 1024 * 10 + 3 * 10


def test_share_follows_the_weights_and_spends_the_budget():
    assert share(10, [3.0, 1.0, 0.0, 1.0]) == [6, 2, 0, 2]
    assert sum(share(7, [1.0, 1.0, 1.0])) == 7
    assert share(5, [0.0, 0.0]) == [0, 0]
