"""hetero (llvm_cpu) against onnxruntime on the heavy operators, one node each, at the
shapes real models give them, 1 thread.

Run: ``python benchmarks/bench_ops.py [--repeat N] [--only REGEX]``

Each case is a one-node ONNX model with seeded random inputs (constants where a model
would have weights). hetero and onnxruntime run it on the same inputs in this process,
``--repeat`` times each after a warm-up; the script checks that the outputs agree
first, then prints the medians and the ratio hetero / onnxruntime (below 1 means
hetero is faster; the target is at most 2), and the CPU it ran on.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
import platform
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import hetero
from timing import median_seconds, ort_session

F32 = TensorProto.FLOAT
I64 = TensorProto.INT64


@dataclass
class Case:
    """One node: its op, attributes, inputs (name -> array; ``consts`` are initializers)."""

    name: str
    op: str
    inputs: dict[str, np.ndarray]
    attrs: dict[str, object] = field(default_factory=dict)
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    order: list[str] | None = None  # the node's operand order ("" for an absent one)
    outputs: int = 1
    opset: int = 23

    def model(self) -> onnx.ModelProto:
        order = self.order or [*self.inputs, *self.consts]
        outs = [f"y{i}" for i in range(self.outputs)]
        node = helper.make_node(self.op, order, outs, **self.attrs)
        declared = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in self.inputs.items()]
        graph = helper.make_graph([node], self.name, declared,
                                  [helper.make_value_info(o, onnx.TypeProto()) for o in outs],
                                  [numpy_helper.from_array(a, n) for n, a in self.consts.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        del model.graph.output[:]
        first = declared[0]
        for info in inferred.graph.output:
            # Shape inference leaves a function op's outputs (GroupNormalization) untyped:
            # those have their first input's type.
            model.graph.output.append(info if info.type.HasField("tensor_type") else
                                      helper.make_value_info(info.name, first.type))
        return model


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _f32(*shape: int) -> np.ndarray:
    return _rng().standard_normal(shape).astype(np.float32)


def _ints(values: list[int]) -> np.ndarray:
    return np.array(values, np.int64)


def cases() -> list[Case]:
    """The cases, each named after the model family its shape comes from."""
    rng = _rng()
    out = [
        Case("Resize nearest 2x, SD UNet up-block (1,640,32,32)", "Resize", {"x": _f32(1, 640, 32, 32)},
             {"mode": "nearest"}, {"roi": np.zeros(0, np.float32),
                                   "scales": np.array([1, 1, 2, 2], np.float32)}),
        Case("Resize linear 2x, FPN (1,256,50,50)", "Resize", {"x": _f32(1, 256, 50, 50)},
             {"mode": "linear"}, {"roi": np.zeros(0, np.float32),
                                  "scales": np.array([1, 1, 2, 2], np.float32)}),
        Case("Resize cubic to 224, preprocessing (1,3,256,256)", "Resize", {"x": _f32(1, 3, 256, 256)},
             {"mode": "cubic"}, {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                                 "sizes": _ints([1, 3, 224, 224])}),
        Case("ConvTranspose k4 s2 256->128, DCGAN (1,256,16,16)", "ConvTranspose",
             {"x": _f32(1, 256, 16, 16)}, {"strides": [2, 2], "pads": [1, 1, 1, 1]},
             {"w": _f32(256, 128, 4, 4) * 0.05, "b": _f32(128)}),
        Case("ConvTranspose k2 s2 512->256, UNet (1,512,28,28)", "ConvTranspose",
             {"x": _f32(1, 512, 28, 28)}, {"strides": [2, 2]},
             {"w": _f32(512, 256, 2, 2) * 0.05, "b": _f32(256)}),
        Case("Attention, BERT-base (1,12,128,64)", "Attention",
             {"q": _f32(1, 12, 128, 64), "k": _f32(1, 12, 128, 64), "v": _f32(1, 12, 128, 64)}),
        Case("Attention causal GQA 32/8 heads, Llama (1,32,128,64)", "Attention",
             {"q": _f32(1, 32, 128, 64), "k": _f32(1, 8, 128, 64), "v": _f32(1, 8, 128, 64)},
             {"is_causal": 1}),
        Case("GroupNormalization 32 groups, SD UNet (1,320,64,64)", "GroupNormalization",
             {"x": _f32(1, 320, 64, 64)}, {"num_groups": 32, "epsilon": 1e-5},
             {"scale": _f32(320), "bias": _f32(320)}, opset=21),
        Case("Einsum bhqd,bhkd->bhqk, BERT-base (1,12,128,64)", "Einsum",
             {"a": _f32(1, 12, 128, 64), "b": _f32(1, 12, 128, 64)}, {"equation": "bhqd,bhkd->bhqk"}),
        Case("TopK k=5, ImageNet logits (1,1000)", "TopK", {"x": _f32(1, 1000)}, {},
             {"k": _ints([5])}, outputs=2),
        Case("TopK k=50, Llama sampling (1,32000)", "TopK", {"x": _f32(1, 32000)}, {},
             {"k": _ints([50])}, outputs=2),
        Case("GatherND batch_dims=1, token pick (8,512,768)", "GatherND", {"x": _f32(8, 512, 768)},
             {"batch_dims": 1}, {"i": rng.integers(0, 512, (8, 16, 1))}),
        Case("ScatterND none, KV-cache write (1,8,1024,64)", "ScatterND",
             {"data": _f32(1, 8, 1024, 64), "u": _f32(1, 8, 16, 64)}, {},
             {"i": np.stack(np.meshgrid(np.arange(1), np.arange(8), np.arange(500, 516),
                                        indexing="ij"), -1).astype(np.int64)},
             order=["data", "i", "u"]),
        Case("ScatterND add, embedding grad (30522,128)", "ScatterND",
             {"data": _f32(30522, 128), "u": _f32(2048, 128)}, {"reduction": "add"},
             {"i": rng.permutation(30522)[:2048].reshape(2048, 1).astype(np.int64)},
             order=["data", "i", "u"]),
    ]
    return out


def run(case: Case, repeat: int) -> tuple[float, float]:
    """hetero's and onnxruntime's median seconds for ``case``, after checking they agree."""
    model = case.model()
    feeds = dict(case.inputs)
    exe = hetero.compile(model, targets=["llvm_cpu"], num_threads=1)
    session = ort_session(model, 1)
    ours = exe.run(feeds)
    theirs = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    for name, expected in theirs.items():
        if name == "y1" and case.op == "TopK":
            continue  # indices may differ at ties; the values decide
        if not np.allclose(ours[name], expected, rtol=1e-3, atol=1e-4):
            sys.exit(f"{case.name}: hetero and onnxruntime disagree on {name} (max |err| "
                     f"{np.abs(ours[name] - expected).max():.2e}); not timing a wrong answer")
    return (median_seconds(lambda: exe.run(feeds), repeat),
            median_seconds(lambda: session.run(None, feeds), repeat))


def cpu_name() -> str:
    """The CPU's model name (Linux), else the platform's word for it."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", default="", help="run only the cases matching this regex")
    args = parser.parse_args()
    import llvmlite.binding as llvm

    print(f"CPU: {cpu_name()} (LLVM: {llvm.get_host_cpu_name()}), 1 thread, "
          f"medians of {args.repeat} runs", flush=True)
    print(f"{'case':<56}{'hetero ms':>11}{'ort ms':>9}{'ratio':>8}", flush=True)
    over = []
    for case in cases():
        if args.only and not re.search(args.only, case.name):
            continue
        ours, theirs = run(case, args.repeat)
        ratio = ours / theirs
        if ratio > 2:
            over.append(case.name)
        print(f"{case.name[:55]:<56}{ours * 1e3:>11.3f}{theirs * 1e3:>9.3f}{ratio:>8.2f}", flush=True)
    print(f"over 2x onnxruntime: {', '.join(over) if over else 'none'}")


if __name__ == "__main__":
    main()
