"""float32 matmul throughput at one thread: hetero's llvm_cpu beside numpy's BLAS.

Run: ``python benchmarks/bench_gemm.py [--repeat N] [SIZE ...]`` (default sizes 256,
512, 1024, 2048).

For each square size n, compiles a one-node MatMul graph with ``hetero.compile(...,
targets=["llvm_cpu"], num_threads=1)`` and prints the median GFLOP/s (2 n^3 flops per
product) over ``--repeat`` runs of hetero and of ``numpy.matmul``, and their ratio.

BLAS is held to one thread through OPENBLAS_NUM_THREADS / OMP_NUM_THREADS /
MKL_NUM_THREADS, set before numpy is imported (threadpoolctl may not be installed).
OPENBLAS_CORETYPE may be set in this machine's environment, which picks OpenBLAS's
kernel for a named core instead of the detected one: the figure printed is for
whatever kernel that selects.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402 - the thread limits must be set before numpy loads

import numpy as np  # noqa: E402

import hetero  # noqa: E402
from hetero.core.ir.builder import GraphBuilder  # noqa: E402
from timing import median_seconds  # noqa: E402


def bench(n: int, repeat: int) -> tuple[float, float, float]:
    """(hetero GFLOP/s, BLAS GFLOP/s, max abs difference) for an n x n x n product."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    builder = GraphBuilder(f"matmul{n}")
    x, w = builder.input("a", (n, n)), builder.input("b", (n, n))
    builder.output(builder.MatMul(x, w))
    exe = hetero.compile(builder.build(), targets=["llvm_cpu"], num_threads=1)
    feeds = {"a": a, "b": b}
    ours = median_seconds(lambda: exe.run(feeds), repeat)
    blas = median_seconds(lambda: a @ b, repeat)
    diff = float(np.abs(next(iter(exe.run(feeds).values())) - a @ b).max())
    flops = 2.0 * n ** 3
    return flops / ours / 1e9, flops / blas / 1e9, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[256, 512, 1024, 2048])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    print(f"{'n':>6} {'hetero GFLOP/s':>15} {'BLAS GFLOP/s':>13} {'ratio':>7} {'max |diff|':>11}")
    for n in args.sizes:
        ours, blas, diff = bench(n, args.repeat)
        print(f"{n:>6} {ours:>15.1f} {blas:>13.1f} {ours / blas:>7.2f} {diff:>11.2e}")


if __name__ == "__main__":
    main()
