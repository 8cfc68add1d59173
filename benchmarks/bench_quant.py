"""hetero's int8 kernels on llvm_cpu against onnxruntime's own QDQ int8 model.

Run: ``python benchmarks/bench_quant.py [--repeat N] [--threads 1,2] [--calibrate N] [MODEL ...]``
(default models: resnet50 and squeezenet, of the light models onnx ships).

Each model gets seeded random weights and is calibrated on ``--calibrate`` seeded
random inputs. hetero quantises it itself (``quantize=``) and runs it on llvm_cpu alone
with ``int8=True``, so every QDQ unit is an integer kernel; onnxruntime quantises the
same float model on the same calibration inputs with its static quantiser (QDQ format,
int8 activations and per-channel int8 weights, as hetero's quantiser writes) and runs
that model with all its graph optimisations (which fuse the QDQ units into QLinear
kernels). Both run one seeded input in this process, ``--repeat`` times each, in three
blocks of back-to-back runs per runtime taken in turn (so that the shared machine's
changing load falls on both sides of the ratio), each block after a warm-up run and once
the other runtime's threads have stopped spinning (``timing.blockwise_medians``); the script prints
the medians and the ratio hetero / onnxruntime (below 1: hetero is faster).

Before timing, hetero's result is checked bit for bit against hetero's integer
reference: the numpy reference run of the very graph the compile partitioned (the
quantised graph with its QDQ units lowered to integer ops). Every int8 tensor that
leaves the integer ops for float ones (the input of each DequantizeLinear of an
activation) is made a graph output and compared for equality; the float tail after it
(ResNet-50's Softmax) is compared within :data:`FLOAT_TAIL_RTOL` and :data:`FLOAT_TAIL_ATOL`. The two quantisers
calibrate alike but not identically, so hetero's and onnxruntime's outputs are only
compared for agreement (cosine similarity), not equality.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.version_converter

import hetero
from hetero.core.compiler import Session
from hetero.core.frontend.light import light_model_path
from hetero.core.frontend.onnx import randomize_weights
from hetero.core.ir.ops.qint import INTEGER_OPS
from hetero.plugins.llvm_cpu.host import host
from timing import blockwise_medians, ort_session

#: onnxruntime's per-channel QDQ needs DequantizeLinear's axis, which opset 13 added; the
#: light models are older, so both sides get the model converted to it.
QDQ_OPSET = 13
#: Tolerances of the float ops after the last integer one (ResNet-50's Softmax of 1000
#: classes, whose mean output is 1e-3): llvm_cpu's vectorised exp and numpy's differ by a
#: few float32 ulps, 1e-6 relative; the absolute term covers outputs near underflow.
FLOAT_TAIL_RTOL = 1e-4
FLOAT_TAIL_ATOL = 1e-7
#: Below this cosine similarity hetero's and onnxruntime's int8 outputs are taken to
#: disagree: two int8 quantisations of one model agree to about 0.99 on these models
#: (the CLI's comparison of a quantised run uses the same kind of bound).
MIN_COSINE = 0.95


def _calibration(graph: hetero.Graph, count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(10_000)
    return [{v.name: rng.standard_normal(v.shape).astype(np.float32) for v in graph.inputs}
            for _ in range(count)]


def _integer_graph(graph: hetero.Graph, samples: list[dict[str, np.ndarray]], threads: int) -> hetero.Graph:
    """The graph a compile for llvm_cpu with ``int8=True`` partitions: optimised, quantised
    on ``samples``, its QDQ units lowered to integer ops."""
    session = Session(["llvm_cpu"], quantize=samples, options={"int8": True, "num_threads": threads})
    return session.prepare(hetero.optimize(graph))


def _with_boundaries(graph: hetero.Graph) -> tuple[hetero.Graph, list[str]]:
    """``graph`` with every int8 activation a DequantizeLinear reads made an output too;
    and those outputs' names."""
    boundary = {n.inputs[0].name: n.inputs[0] for n in graph.nodes
                if n.op == "DequantizeLinear" and n.inputs[0].producer is not None}
    graph.set_outputs(graph.outputs + [v for name, v in boundary.items()
                                       if v not in graph.outputs])
    return graph, list(boundary)


def _ort_qdq(model: onnx.ModelProto, samples: list[dict[str, np.ndarray]], folder: Path) -> Path:
    """onnxruntime's static QDQ int8 quantisation of ``model``, calibrated on ``samples``."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.samples = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.samples, None)

    source, target = folder / "float.onnx", folder / "qdq.onnx"
    onnx.save(model, source)
    # The quantiser logs advice (run its pre-processing) on the root logger at WARNING.
    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(str(source), str(target), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return target


def _integer_kernels(exe: Any) -> int:
    """How many of ``exe``'s kernels compute one of hetero's integer ops."""
    ops = [step.name.rpartition("(")[2].rstrip(")") for p in exe.placements for step in p.part.steps]
    return sum(any(op in INTEGER_OPS for op in label.split("+")) for label in ops)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) or 1.0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50", "squeezenet"])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--calibrate", type=int, default=4, help="calibration inputs (seeded, random)")
    args = parser.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    print(f"CPU: {host().describe()}")
    print(f"{'model':<12}{'thr':>4}{'int kernels':>12}{'compile s':>10}{'hetero ms':>11}{'ort ms':>9}"
          f"{'ratio':>8}{'cosine':>8}", flush=True)
    ratios: dict[int, list[float]] = {t: [] for t in counts}
    for name in args.models:
        model = randomize_weights(onnx.load(light_model_path(name)), seed=0)
        if model.opset_import[0].version < QDQ_OPSET:
            model = onnx.version_converter.convert_version(model, QDQ_OPSET)
        graph = hetero.load_onnx(model)
        samples = _calibration(graph, args.calibrate)
        feeds = {v.name: np.random.default_rng(0).standard_normal(v.shape).astype(np.float32)
                 for v in graph.inputs}
        out = graph.outputs[0].name
        with tempfile.TemporaryDirectory() as folder:
            qdq = _ort_qdq(model, samples, Path(folder))
            sessions = {t: ort_session(str(qdq), t) for t in counts}
        integer, exact = _with_boundaries(_integer_graph(graph, samples, counts[0]))
        want = hetero.run_reference(integer, feeds)
        for threads in counts:
            start = time.perf_counter()
            exe = hetero.compile(integer, targets=["llvm_cpu"], int8=True, num_threads=threads)
            compile_s = time.perf_counter() - start
            got = exe.run(feeds)
            for value in exact:
                if not np.array_equal(got[value], want[value]):
                    sys.exit(f"{name}: hetero's int8 tensor {value} differs from the integer reference in "
                             f"{np.count_nonzero(got[value] != want[value])} of {want[value].size} values; "
                             "not timing a wrong answer")
            if not np.allclose(got[out], want[out], rtol=FLOAT_TAIL_RTOL, atol=FLOAT_TAIL_ATOL):
                sys.exit(f"{name}: hetero's output {out} differs from the reference beyond rtol "
                         f"{FLOAT_TAIL_RTOL}, atol {FLOAT_TAIL_ATOL}; not timing a wrong answer")
            cosine = _cosine(got[out], sessions[threads].run(None, feeds)[0])
            if cosine < MIN_COSINE:
                sys.exit(f"{name}: hetero's and onnxruntime's int8 outputs disagree (cosine {cosine:.3f})")
            t_ours, t_ort = blockwise_medians(
                [lambda: exe.run(feeds), lambda: sessions[threads].run(None, feeds)], args.repeat)
            ratio = t_ours / t_ort
            ratios[threads].append(ratio)
            print(f"{name:<12}{threads:>4}{_integer_kernels(exe):>12}{compile_s:>10.2f}{t_ours * 1e3:>11.2f}"
                  f"{t_ort * 1e3:>9.2f}{ratio:>8.2f}{cosine:>8.3f}", flush=True)
    for threads, values in ratios.items():
        geomean = math.exp(sum(math.log(r) for r in values) / len(values))
        print(f"geometric mean ratio at {threads} thread(s): {geomean:.2f} over {len(values)} models")


if __name__ == "__main__":
    main()
