"""The cuda backend through the conformance suite, in a fresh process, as any backend is checked.

No GPU is lent to these machines, so the suite runs twice over a set of ops that covers
every schedule (elementwise and injective, cross-thread reductions, tiled matrix
products and convolutions, pooling, the multi-stage normalisations): emulated
(``-O cuda_emulate=true``: every check runs, each kernel's scheduled tensor IR in the
interpreter, against the reference), and as it is (every check compiles and assembles
its PTX with ptxas, and those that would run it are skipped saying that there is no
GPU, never failed and never counted as passed).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from toyplugin import run_conformance

from hetero.plugins.cuda.driver import probe
from hetero.plugins.cuda.ptxas import INSTALL_HINT, find_ptxas
from hetero.testing.matrix import NOT_RUN_PREFIX

pytestmark = [pytest.mark.slow, pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)]

OPS = ("Relu,Add,Mul,Sigmoid,Tanh,Exp,Cast,Where,Clip,Gelu,Transpose,Concat,Softmax,LayerNormalization,"
       "ReduceSum,ReduceMean,MatMul,Gemm,Conv,MaxPool,AveragePool,GlobalAveragePool")


def test_cuda_emulated_passes_the_conformance_suite_over_every_schedule(tmp_path: Path) -> None:
    data, _ = run_conformance(tmp_path, "cuda", "-O", "cuda_emulate=true", "--ops", OPS, "--max-examples", "2")
    assert set(data["summary"]) <= {"passed", "skipped"}, data["summary"]
    assert set(data["matrix"]) == set(OPS.split(","))
    assert all(outcome == "passed" for row in data["matrix"].values() for outcome in row.values()), data["matrix"]
    skipped = {t for t, outcome in data["tests"].items() if outcome == "skipped"}
    assert skipped == {"test_contract_pattern[none]", "test_pattern[none]"}  # cuda declares no patterns


@pytest.mark.skipif(probe().ok, reason="this machine has a GPU: the no-GPU run is not what happens here")
def test_without_a_gpu_the_suite_compiles_everything_and_skips_only_the_runs_saying_why(tmp_path: Path) -> None:
    data, _ = run_conformance(tmp_path, "cuda", "--ops", "Relu,Softmax,Conv,MatMul", "--max-examples", "2")
    assert set(data["summary"]) <= {"passed", "skipped"}, data["summary"]
    details = data["details"]
    for test, outcome in data["tests"].items():
        if outcome == "skipped" and "[none]" not in test:
            assert details[test].startswith(NOT_RUN_PREFIX) and "no CUDA device found" in details[test], test
    # What needs no device still passes: the contract, every rejection, bad inputs.
    assert all(data["tests"][t] == "passed" for t in data["tests"] if t.startswith(("test_contract_loads",
                                                                                   "test_rejection",
                                                                                   "test_bad_input")))
