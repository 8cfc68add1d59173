"""Compile time of a long elementwise chain: import, passes, partition and llvm_cpu's compile.

Run: ``python benchmarks/bench_chain.py [--nodes 50000] [--repeat 1]``

The model is ``--nodes`` ops in one chain, ``Add`` (every Add reading one shared
constant) alternating with ``Relu``, on a float32 vector of 64 elements: what an exporter
makes of an unrolled loop, and the shape that once made verification quadratic and cost
a kernel per node. Each compile runs in a process of its own (nothing reused from an
earlier one); the script prints the median seconds of ``hetero.load_onnx`` and of
``hetero.compile`` (no compile cache), the kernels made, the largest phases of the
compile (:mod:`hetero.core.timing`) and whether the outputs match onnxruntime's. The
CPU model is printed beside the figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import hetero
from hetero.core import timing

n = int(sys.argv[1])
nodes = [helper.make_node("Add", [f"v{i}", "one"], [f"v{i + 1}"]) if i % 2 == 0 else
         helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(n)]
graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info(f"v{n}", TensorProto.FLOAT, [64])],
                          [numpy_helper.from_array(np.full(64, 1e-3, np.float32), "one")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
start = time.perf_counter()
loaded = hetero.load_onnx(model)
imported = time.perf_counter() - start
start = time.perf_counter()
with timing.recording() as times:
    exe = hetero.compile(model, targets=["llvm_cpu"], num_threads=1)
compiled = time.perf_counter() - start
x = np.random.default_rng(0).standard_normal(64).astype(np.float32)
got = exe.run({"v0": x})[f"v{n}"]
import onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = 1
want = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
    None, {"v0": x})[0]
phases = sorted(((f"{owner} {name}", seconds) for (owner, name), seconds in times.seconds.items()),
                key=lambda item: -item[1])[:6]
print(json.dumps({"import": imported, "compile": compiled, "nodes": len(loaded.nodes),
                  "kernels": sum(p.part.kernel_count for p in exe.placements),
                  "max_error": float(np.abs(got - want).max()), "phases": phases}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=1, help="fresh processes (default 1)")
    args = parser.parse_args()
    from hetero.plugins.llvm_cpu.host import host

    print(f"{args.nodes}-node Add/Relu chain on {host().describe()}")
    runs = []
    for i in range(args.repeat):
        done = subprocess.run([sys.executable, "-c", CHILD, str(args.nodes)], capture_output=True, text=True,
                              check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"  run {i + 1}: import {runs[-1]['import']:.1f} s, compile {runs[-1]['compile']:.1f} s", flush=True)
    first = runs[0]
    print(f"import (load_onnx)  median {statistics.median(r['import'] for r in runs):.1f} s")
    print(f"compile             median {statistics.median(r['compile'] for r in runs):.1f} s "
          f"({first['nodes']} nodes, {first['kernels']} kernels)")
    print(f"largest phases of the first compile: "
          + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in first["phases"]))
    print(f"max |hetero - onnxruntime| {first['max_error']:.2e}")


if __name__ == "__main__":
    main()
