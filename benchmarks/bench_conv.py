"""float32 convolution throughput at one thread on ResNet-50's conv shapes: hetero's
llvm_cpu beside onnxruntime running the same single-Conv model.

Run: ``python benchmarks/bench_conv.py [--repeat N]``

Each shape is one Conv node (with bias) on a 1-batch input, exported as an ONNX model;
hetero compiles it with ``num_threads=1`` and onnxruntime runs it with
``intra_op_num_threads=1``. Prints median GFLOP/s (2 * K * C * R * S * OH * OW flops)
and hetero / onnxruntime.
"""

from __future__ import annotations

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import hetero
from timing import median_seconds, ort_session

#: (label, C in, K out, input H = W, kernel, stride, pad)
SHAPES = (
    ("stem 7x7/2 3->64 @224", 3, 64, 224, 7, 2, 3),
    ("3x3 64->64 @56", 64, 64, 56, 3, 1, 1),
    ("1x1 256->64 @56", 256, 64, 56, 1, 1, 0),
    ("1x1 64->256 @56", 64, 256, 56, 1, 1, 0),
    ("3x3 256->256 @14", 256, 256, 14, 3, 1, 1),
    ("1x1/2 512->1024 @28", 512, 1024, 28, 1, 2, 0),
)


def conv_model(c: int, k: int, h: int, r: int, stride: int, pad: int) -> onnx.ModelProto:
    """One Conv with random weights and bias, input ``x`` of shape (1, c, h, h)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((k, c, r, r), dtype=np.float32) * 0.05, "w")
    b = numpy_helper.from_array(rng.standard_normal(k, dtype=np.float32), "b")
    out = (h + 2 * pad - r) // stride + 1
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[r, r], strides=[stride, stride],
                            pads=[pad] * 4)
    graph = helper.make_graph([node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, k, out, out])], [w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{'shape':<24} {'hetero GFLOP/s':>15} {'ORT GFLOP/s':>12} {'ratio':>6} {'max |diff|':>11}")
    for label, c, k, h, r, stride, pad in SHAPES:
        model = conv_model(c, k, h, r, stride, pad)
        x = np.random.default_rng(1).standard_normal((1, c, h, h), dtype=np.float32)
        exe = hetero.compile(model, targets=["llvm_cpu"], num_threads=1)
        session = ort_session(model, 1)
        ours = median_seconds(lambda: exe.run({"x": x}), args.repeat)
        theirs = median_seconds(lambda: session.run(None, {"x": x}), args.repeat)
        diff = float(np.abs(next(iter(exe.run({"x": x}).values())) - session.run(None, {"x": x})[0]).max())
        out = (h + 2 * pad - r) // stride + 1
        flops = 2.0 * k * c * r * r * out * out
        print(f"{label:<24} {flops / ours / 1e9:>15.1f} {flops / theirs / 1e9:>12.1f} "
              f"{theirs / ours:>6.2f} {diff:>11.2e}")


if __name__ == "__main__":
    main()
