"""Fused groups: an anchor and its elementwise epilogue lowered into one function.

Each group must become one loop nest that stores every output element exactly once,
with the anchor's reduction in a local accumulator and no intermediate tensor in
global memory, and must compute the numbers of the unfused graph's reference.
Tolerances as in test_lower_conv_pool: a float32 sum of k terms is within
``k * eps * sum(|terms|)`` of the exact sum; each epilogue addition is one more
rounding, the reference's own rounding of its intermediate one more again.
"""

from __future__ import annotations

import math
import re

import numpy as np

from hetero.core.exec.reference import run_reference
from hetero.core.ir import Graph, GraphBuilder
from hetero.core.ir.tir import Allocate, Block, For, PrimFunc, Seq, Stmt, Store, run_func, walk
from hetero.core.lower import lower_group
from opcheck import assert_within

RNG = np.random.default_rng(23)


def uniform(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def run_fused(graph: Graph, feeds: dict[str, np.ndarray]) -> tuple[PrimFunc, np.ndarray]:
    """The whole graph lowered as one group, and its output run on the interpreter."""
    func = lower_group(graph.nodes, "fused")
    produced = {id(v) for n in graph.nodes for v in n.outputs}
    external = list({id(v): v for n in graph.nodes for v in n.inputs
                     if v is not None and id(v) not in produced}.values())
    arrays = [v.data if v.data is not None else feeds[v.name] for v in external]
    out = graph.outputs[0]
    # The output starts as NaN, so an element the function never writes cannot pass.
    arrays.append(np.full(out.shape, np.nan, out.dtype))
    assert len(arrays) == len(func.params)
    results = run_func(func, {b.name: a for b, a in zip(func.params, arrays)})
    return func, results[func.params[-1].name]


def stores_to(stmt: Stmt, name: str, extents: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """For each Store to buffer ``name``, the extents of the loops around it."""
    if isinstance(stmt, Store):
        return [extents] if stmt.buffer.name == name else []
    if isinstance(stmt, For):
        return stores_to(stmt.body, name, extents + (stmt.extent,))
    if isinstance(stmt, Seq):
        return [found for part in stmt.stmts for found in stores_to(part, name, extents)]
    assert isinstance(stmt, (Allocate, Block)), f"unexpected {type(stmt).__name__}"
    return stores_to(stmt.body, name, extents)


def allocations(func: PrimFunc) -> list[Allocate]:
    return [s for s in walk(func.body) if isinstance(s, Allocate)]


def assert_one_fused_nest(func: PrimFunc, out_size: int) -> None:
    """One store to the output, inside loops that visit each element once; nothing
    but local accumulators allocated."""
    out = func.params[-1]
    (loops,) = stores_to(func.body, out.name)
    assert math.prod(loops) == out_size
    assert str(func).count(f"  {out.name}[") == 1
    allocated = allocations(func)
    assert allocated and all(a.buffer.scope == "local" for a in allocated)
    assert " global " not in str(func)


def conv_magnitude(x: np.ndarray, w: np.ndarray, pads: tuple[int, ...]) -> np.ndarray:
    """Sum of |x * w| over each output's window: Conv of the absolute values."""
    b = GraphBuilder("abs")
    y = b.Conv(b.input("x", x.shape, np.float64), np.abs(w).astype(np.float64), pads=pads)
    b.output(y)
    return run_reference(b.build(), {"x": np.abs(x).astype(np.float64)})[y.name]


def test_conv_bias_relu_is_one_nest() -> None:
    x, w, bias = uniform(1, 2, 5, 5), uniform(3, 2, 3, 3), uniform(1, 3, 1, 1)
    b = GraphBuilder("conv_bias_relu")
    y = b.Relu(b.Add(b.Conv(b.input("x", x.shape), w, pads=(1, 1, 1, 1)), bias))
    b.output(y)
    graph = b.build()
    func, ours = run_fused(graph, {"x": x})
    assert_one_fused_nest(func, y.type.size)
    expected = run_reference(graph, {"x": x})[y.name]
    magnitude = conv_magnitude(x, w, (1, 1, 1, 1)) + np.abs(bias)
    assert_within(ours, expected, magnitude, 2 * 9 + 3)


def test_matmul_add_clip_is_one_nest() -> None:
    x, w, bias = uniform(3, 4), uniform(4, 2), uniform(2)
    b = GraphBuilder("matmul_add_clip")
    y = b.Clip(b.Add(b.MatMul(b.input("x", x.shape), w), bias), min=-0.5, max=0.5)
    b.output(y)
    graph = b.build()
    func, ours = run_fused(graph, {"x": x})
    assert_one_fused_nest(func, y.type.size)
    expected = run_reference(graph, {"x": x})[y.name]
    magnitude = np.abs(x).astype(np.float64) @ np.abs(w) + np.abs(bias)
    assert_within(ours, expected, magnitude, 4 + 3)
    assert np.all(np.abs(ours) <= 0.5)


def test_conv_residual_add_relu_is_one_nest() -> None:
    """The residual is a second graph input read at the store."""
    x, w, skip = uniform(1, 2, 4, 4), uniform(2, 2, 3, 3), uniform(1, 2, 4, 4)
    b = GraphBuilder("conv_residual_relu")
    conv = b.Conv(b.input("x", x.shape), w, pads=(1, 1, 1, 1))
    y = b.Relu(b.Add(conv, b.input("skip", skip.shape)))
    b.output(y)
    graph = b.build()
    func, ours = run_fused(graph, {"x": x, "skip": skip})
    assert [p.name for p in func.params][-2:] == ["skip", y.name]
    assert_one_fused_nest(func, y.type.size)
    expected = run_reference(graph, {"x": x, "skip": skip})[y.name]
    magnitude = conv_magnitude(x, w, (1, 1, 1, 1)) + np.abs(skip)
    assert_within(ours, expected, magnitude, 2 * 9 + 3)


def test_an_anchor_read_by_a_reduction_stays_a_buffer() -> None:
    """Conv -> Relu -> GlobalAveragePool: the Conv's reduction cannot sit inside the
    pool's, so the Conv gets an allocated buffer while Relu still inlines into the pool.
    Sums of 8 then 9 terms, with the reference's rounding of each intermediate."""
    x, w = uniform(1, 2, 4, 4), uniform(2, 2, 2, 2)
    b = GraphBuilder("conv_relu_gap")
    conv = b.Conv(b.input("x", x.shape), w)
    y = b.GlobalAveragePool(b.Relu(conv))
    b.output(y)
    graph = b.build()
    func, ours = run_fused(graph, {"x": x})
    materialised = [a.buffer.name for a in allocations(func) if a.buffer.scope == "global"]
    assert materialised == [conv.name]
    assert "block relu" not in str(func)
    expected = run_reference(graph, {"x": x})[y.name]
    magnitude = conv_magnitude(x, w, (0, 0, 0, 0)).mean(axis=(2, 3), keepdims=True)
    assert_within(ours, expected, magnitude, 8 + 9 + 3)


def test_an_anchor_read_twice_by_its_epilogue_stays_a_buffer() -> None:
    """MatMul -> Add -> Gelu: Gelu reads its input twice (x · Φ(x)), so inlining would
    compute the product twice, and the accumulator could hold only one copy. The
    product gets a buffer; the Add still inlines into the Gelu. A sum of 4 terms,
    then the bias and Gelu's few roundings."""
    x, w, bias = uniform(3, 4), uniform(4, 5), uniform(5)
    b = GraphBuilder("matmul_add_gelu")
    mm = b.MatMul(b.input("x", x.shape), w)
    y = b.Gelu(b.Add(mm, bias))
    b.output(y)
    graph = b.build()
    func, ours = run_fused(graph, {"x": x})
    materialised = [a.buffer.name for a in allocations(func) if a.buffer.scope == "global"]
    assert materialised == [mm.name]
    # The product's reduction loop exists once, in the MatMul's own block.
    assert len(re.findall(r"for \w+_k\w* in range", str(func))) == 1
    expected = run_reference(graph, {"x": x})[y.name]
    magnitude = np.abs(x).astype(np.float64) @ np.abs(w) + np.abs(bias)
    assert_within(ours, expected, magnitude, 4 + 8)
