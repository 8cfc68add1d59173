"""The cuda backend's kernels on a GPU beside PyTorch's (cuBLAS, cuDNN), in one process.

Run: ``python benchmarks/bench_cuda.py [--repeat N]`` on a machine with an NVIDIA GPU,
the ``cuda`` extra and PyTorch. Without a GPU it says why and exits with status 2;
``--compile-only`` compiles every case for an H200 and prints its kernels' resources.

For each case (square float32 matmuls, ResNet-50-style 3x3 and 1x1 convolutions, a
Softmax and a LayerNorm of transformer sizes) it compiles a one-node graph with
``hetero.compile(..., targets=["cuda"])`` for the GPU found, runs it ``--repeat`` times
and takes the median of the kernels' own time (CUDA events around each launch, the
part's ``last_profile``; the host-to-device copies of ``run`` are not counted), and times
the same op in PyTorch on device tensors with CUDA events. It prints both, their ratio
(hetero ÷ PyTorch: below 1 is faster), the achieved GFLOP/s and GB/s, and the fraction
of the declared device's float32 peak (CUDA cores; PyTorch may use TF32 tensor cores for
matmuls unless ``torch.backends.cuda.matmul.allow_tf32`` is off, which this script sets).
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np

import hetero
from hetero.core.ir.builder import GraphBuilder
from hetero.plugins.cuda.backend import detected_device
from hetero.plugin import GPU_PRESETS
from hetero.plugins.cuda.driver import probe


def cases() -> list[tuple[str, dict, float, float]]:
    """(name, graph spec, flops, bytes moved) per case."""
    out = []
    for n in (1024, 2048, 4096):
        out.append((f"matmul {n}^3", {"op": "MatMul", "shapes": [(n, n), (n, n)]}, 2.0 * n ** 3, 12.0 * n * n))
    for c, hw, k in ((64, 56, 3), (256, 14, 3), (256, 56, 1), (512, 7, 3)):
        flops = 2.0 * c * c * hw * hw * k * k
        out.append((f"conv {c}x{hw}x{hw} k{k}", {"op": "Conv", "shapes": [(1, c, hw, hw)], "weight": (c, c, k, k),
                                               "pads": [k // 2] * 4}, flops, 4.0 * (2 * c * hw * hw + c * c * k * k)))
    out.append(("softmax 64x4096", {"op": "Softmax", "shapes": [(64, 4096)]}, 5.0 * 64 * 4096, 8.0 * 64 * 4096))
    out.append(("layernorm 512x768", {"op": "LayerNormalization", "shapes": [(512, 768)]}, 8.0 * 512 * 768,
                8.0 * 512 * 768))
    return out


def build(spec: dict) -> tuple[hetero.core.ir.Graph, dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    b = GraphBuilder(spec["op"].lower())
    feeds = {f"x{i}": rng.standard_normal(s, dtype=np.float32) for i, s in enumerate(spec["shapes"])}
    xs = [b.input(name, a.shape) for name, a in feeds.items()]
    consts = {}
    if spec["op"] == "Conv":
        consts["w"] = (rng.standard_normal(spec["weight"], dtype=np.float32) * 0.05)
        y = b.Conv(xs[0], consts["w"], pads=spec["pads"], name="op")
    elif spec["op"] == "LayerNormalization":
        width = spec["shapes"][0][-1]
        consts["g"], consts["b"] = np.ones(width, np.float32), np.zeros(width, np.float32)
        y = b.LayerNormalization(xs[0], consts["g"], consts["b"], axis=-1, name="op")
    elif spec["op"] == "Softmax":
        y = b.Softmax(xs[0], axis=-1, name="op")
    else:
        y = b.MatMul(*xs, name="op")
    b.output(y)
    return b.build(), feeds, consts


def torch_seconds(spec: dict, feeds: dict, consts: dict, repeat: int) -> float:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    xs = [torch.from_numpy(a).cuda() for a in feeds.values()]
    cs = {k: torch.from_numpy(v).cuda() for k, v in consts.items()}
    op = spec["op"]
    if op == "Conv":
        def call():
            return torch.nn.functional.conv2d(xs[0], cs["w"], padding=spec["pads"][0])
    elif op == "LayerNormalization":
        def call():
            return torch.nn.functional.layer_norm(xs[0], xs[0].shape[-1:], cs["g"], cs["b"])
    elif op == "Softmax":
        def call():
            return torch.softmax(xs[0], dim=-1)
    else:
        def call():
            return xs[0] @ xs[1]
    call()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--compile-only", action="store_true",
                        help="no GPU needed: compile every case and print its kernels' ptxas figures")
    args = parser.parse_args()
    if args.compile_only:
        for name, case, _, _ in cases():
            graph, _, _ = build(case)
            part = hetero.compile(graph, targets=["cuda"], cuda_device="h200").placements[0].part
            print(name, "\n".join(part.report().splitlines()[2:]), sep="\n")
        return 0
    found = probe()
    if not found.ok:
        print(f"bench_cuda: {found.summary}", file=sys.stderr)
        return 2
    spec = GPU_PRESETS[detected_device()]
    print(f"GPU: {found.name} ({found.arch}); declared as {spec.name}: {spec.peak_gflops:.0f} GFLOP/s float32 peak, "
          f"{spec.hbm_gbps:.0f} GB/s")
    print(f"{'case':<22} {'hetero ms':>10} {'torch ms':>9} {'ratio':>6} {'GFLOP/s':>8} {'GB/s':>7} {'of peak':>8}"
          f" {'max |diff|':>10}")
    for name, case, flops, moved in cases():
        graph, feeds, consts = build(case)
        exe = hetero.compile(graph, targets=["cuda"], cuda_device=spec.name)
        part = exe.placements[0].part
        out = exe.run(feeds)
        kernel_times = []
        for _ in range(args.repeat):
            exe.run(feeds)
            kernel_times.append(sum(seconds for _, seconds in part.last_profile))
        ours = statistics.median(kernel_times)
        theirs = torch_seconds(case, feeds, consts, args.repeat)
        reference = hetero.run_reference(graph, feeds)
        diff = max(float(np.abs(out[k] - reference[k]).max()) for k in reference)
        print(f"{name:<22} {ours * 1e3:>10.3f} {theirs * 1e3:>9.3f} {ours / theirs:>6.2f} {flops / ours / 1e9:>8.0f} "
              f"{moved / ours / 1e9:>7.0f} {flops / ours / 1e9 / spec.peak_gflops:>8.1%} {diff:>10.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
