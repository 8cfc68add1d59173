"""float32 matmul throughput at one thread: hetero's llvm_cpu beside numpy's BLAS.

Run: ``python benchmarks/bench_gemm.py [--repeat N] [--tune TRIALS] [SIZE ...]`` (default
sizes 256, 512, 1024, 2048).

For each square size n, compiles a one-node MatMul graph with ``hetero.compile(...,
targets=["llvm_cpu"], num_threads=1)`` and prints the median GFLOP/s (2 n^3 flops per
product) over ``--repeat`` runs of hetero and of ``numpy.matmul``, and their ratio.
With ``--tune TRIALS`` it also tunes the product's kernel (``hetero tune``'s search,
TRIALS trials, seed 0, records in a temporary file) and prints the tuned compile's
GFLOP/s and its ratio to BLAS beside the default's.

BLAS is held to one thread through OPENBLAS_NUM_THREADS / OMP_NUM_THREADS /
MKL_NUM_THREADS, set before numpy is imported (threadpoolctl may not be installed).
OPENBLAS_CORETYPE, which some machines here set (to ``Haswell``: an AVX2 kernel on an
AVX-512 CPU, half the width), is removed first, so that OpenBLAS picks its kernel for
the CPU it detects; ``--blas-coretype NAME`` names one instead. The header line names
the kernel OpenBLAS uses.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import tempfile

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
# Read before argparse runs: OpenBLAS reads its kernel when numpy loads.
_early = argparse.ArgumentParser(add_help=False)
_early.add_argument("--blas-coretype")
os.environ.pop("OPENBLAS_CORETYPE", None)
if (_core := _early.parse_known_args()[0].blas_coretype):
    os.environ["OPENBLAS_CORETYPE"] = _core

import numpy as np  # noqa: E402 - the thread limits and the kernel must be set before numpy loads

import hetero  # noqa: E402
from hetero.core.compiler import Session  # noqa: E402
from hetero.core.ir.builder import GraphBuilder  # noqa: E402
from hetero.core.schedule.tune.tuner import Budget, extract_tasks, tune  # noqa: E402
from hetero.plugins.llvm_cpu.host import host  # noqa: E402
from timing import median_seconds  # noqa: E402


def blas_kernel() -> str:
    """The OpenBLAS kernel numpy's BLAS runs ("SkylakeX", "Haswell"), or "unknown"."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*")
    for path in glob.glob(libs):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"):
            if hasattr(lib, name):
                getter = getattr(lib, name)
                getter.restype = ctypes.c_char_p
                return getter().decode()
    return "unknown"


def bench(n: int, repeat: int, trials: int) -> tuple[float, float, float | None, float]:
    """(hetero GFLOP/s, BLAS GFLOP/s, tuned hetero GFLOP/s or None, max abs difference of
    either compile from BLAS) for an n x n x n product."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    builder = GraphBuilder(f"matmul{n}")
    x, w = builder.input("a", (n, n)), builder.input("b", (n, n))
    builder.output(builder.MatMul(x, w))
    graph = builder.build()
    compiles = [hetero.compile(graph, targets=["llvm_cpu"], num_threads=1)]
    with tempfile.TemporaryDirectory() as folder:
        if trials:
            records = os.path.join(folder, "records.jsonl")
            tasks = extract_tasks(hetero.optimize(graph), Session(["llvm_cpu"], options={"num_threads": 1}))
            tune(tasks, Budget(trials=trials), records, seed=0)
            compiles.append(hetero.compile(graph, targets=["llvm_cpu"], num_threads=1, records=records))
    feeds = {"a": a, "b": b}
    blas = median_seconds(lambda: a @ b, repeat)
    ours = [median_seconds(lambda: exe.run(feeds), repeat) for exe in compiles]
    diff = max(float(np.abs(next(iter(exe.run(feeds).values())) - a @ b).max()) for exe in compiles)
    flops = 2.0 * n ** 3
    tuned = flops / ours[1] / 1e9 if trials else None
    return flops / ours[0] / 1e9, flops / blas / 1e9, tuned, diff


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[256, 512, 1024, 2048])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--tune", type=int, default=0, metavar="TRIALS",
                        help="also tune each product's kernel with this many trials and time the tuned compile")
    parser.add_argument("--blas-coretype", metavar="NAME",
                        help="OpenBLAS kernel to use (OPENBLAS_CORETYPE), instead of the one it detects")
    args = parser.parse_args()
    print(f"{host().describe()}; OpenBLAS kernel {blas_kernel()}; 1 thread")
    tuned_head = f" {'tuned GFLOP/s':>14} {'ratio':>7}" if args.tune else ""
    print(f"{'n':>6} {'hetero GFLOP/s':>15} {'BLAS GFLOP/s':>13} {'ratio':>7}{tuned_head} {'max |diff|':>11}")
    for n in args.sizes:
        ours, blas, tuned, diff = bench(n, args.repeat, args.tune)
        tuned_cells = f" {tuned:>14.1f} {tuned / blas:>7.2f}" if tuned is not None else ""
        print(f"{n:>6} {ours:>15.1f} {blas:>13.1f} {ours / blas:>7.2f}{tuned_cells} {diff:>11.2e}")


if __name__ == "__main__":
    main()
