"""Vector accesses and unroll hints in the NVPTX renderer.

A VECTORIZED loop inside the thread loops is unrolled into lanes, and each access the
lane moves contiguously is read or written at ``base + lane``; where ``base`` is proven
a multiple of the width, the lanes promise their alignment and LLVM merges them into one
``ld.global.v4`` / ``st.global.v4`` (``.shared`` for shared memory). LLVM 22 prints the
vector accesses untyped (``.v4.b32``, a load of a read-only parameter ``ld.global.nc``),
so the PTX is matched as ``ld.global[.nc].v4.(f32|b32)``. Unproven accesses stay scalar.

Meaning: the proof (:func:`lanes`) is checked by brute force against Python's floored
arithmetic on negative and positive values; the schedules against the unscheduled
lowering in the interpreter (equal bit for bit: vectorising changes which thread computes
an element, not how); hand-written kernels against numpy. No GPU: the PTX assembles with
ptxas for sm_80 and sm_90.
"""

from __future__ import annotations

from dataclasses import replace
import itertools
import re

import numpy as np
import pytest

from hetero.core.ir import GraphBuilder
from hetero.core.ir.tir import Allocate, Barrier, Buffer, For, ForKind, PrimFunc, Stmt, Store, Var, run_func, seq
from hetero.core.ir.tir.expr import Binary, Cast, Const, Expr, cast, maximum
from hetero.core.ir.tir.stmt import walk
from hetero.core.lower import lower_node
from hetero.plugin import GPU_PRESETS
from hetero.plugins.cuda.ptxas import INSTALL_HINT, assemble, find_ptxas
from hetero.plugins.cuda.render import RenderedKernel, lanes, render_ptx, vector_accesses
from hetero.plugins.cuda.schedules import VECTOR_LANES, default_schedule
from hetero.plugins.cuda.schedules_gemm import choose_tiling

needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason=INSTALL_HINT)
V_LOAD = re.compile(r"ld\.global(?:\.nc)?\.v4\.(?:f32|b32)")
V_STORE = re.compile(r"st\.global\.v4\.(?:f32|b32)")
S_LOAD = re.compile(r"ld\.global(?:\.nc)?\.(?:f32|b32)\b")
S_STORE = re.compile(r"st\.global\.(?:f32|b32)\b")
b, t, v = Var("b"), Var("t"), Var("v")
rng = np.random.default_rng(0)


def _eval(e: Expr, env: dict[str, int]) -> int:
    """An integer expression's value, with Python's floored ``//`` and ``%`` (the IR's)."""
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, Cast):
        return _eval(e.a, env)
    assert isinstance(e, Binary)
    x, y = _eval(e.a, env), _eval(e.b, env)
    return {"add": x + y, "sub": x - y, "mul": x * y, "floordiv": x // y if y else 0, "mod": x % y if y else 0}[e.op]


FUSED = (b * 96 + t) * 4 + v
PROVEN = {  # expression -> (step, base a multiple of the width)
    "fused": (FUSED, 1, True),
    "fused // 56": (FUSED // 56, 0, False),
    "fused // 56 % 56": (FUSED // 56 % 56, 0, False),
    "fused % 56": (FUSED % 56, 1, True),
    "flat of (n, c, h, w)": ((FUSED // 3136 % 64 * 56 + FUSED // 56 % 56) * 56 + FUSED % 56, 1, True),
    "offset by 1": (FUSED + 1, 1, False),
    "twice the lane": (t * 8 + v * 2, 2, True),
    "a lane-free load index": (b * 7 - t, 0, False),
    "an int32 index widened": (cast(Var("s", np.dtype("int32")) * 4, "int64") + v, 1, True),
}
REFUSED = {
    "a row of 70 that lanes straddle": FUSED % 70,
    "the lane times a variable": t * v,
    "a negative step under a remainder": (t * 4 - v) % 56,
    "the lane narrowed (it could wrap)": cast(cast(FUSED, "int32"), "int64"),
    "the lane under a shift": Binary("shr", FUSED, Const(1, np.dtype("int64")), np.dtype("int64")),
}


@pytest.mark.parametrize("name", PROVEN)
def test_lanes_prove_what_the_arithmetic_does(name: str) -> None:
    e, step, aligned = PROVEN[name]
    form = lanes(e, v, 4)
    assert form is not None and form.step == step
    assert (form.multiple % 4 == 0) == aligned
    for bv, tv in itertools.product(range(-3, 4), range(-200, 200, 7)):
        env = {"b": bv, "t": tv, "s": tv}
        base = _eval(form.base, env)
        assert form.multiple == 0 and base == 0 or base % form.multiple == 0
        for lane in range(4):
            assert _eval(e, {**env, "v": lane}) == base + form.step * lane


@pytest.mark.parametrize("name", REFUSED)
def test_lanes_refuse_what_they_cannot_show(name: str) -> None:
    assert lanes(REFUSED[name], v, 4) is None


def _lowered(op: str, *shapes: tuple[int, ...], dtype: str = "float32") -> PrimFunc:
    g = GraphBuilder("g")
    g.output(getattr(g, op)(*(g.input(f"x{k}", s, dtype) for k, s in enumerate(shapes)), name="n"))
    return lower_node(g.build().node("n"))


def _vector_loops(func: PrimFunc) -> list[For]:
    return [s for s in walk(func.body) if isinstance(s, For) and s.kind is ForKind.VECTORIZED]


def _assembles(kernel: RenderedKernel) -> None:
    for arch in ("sm_80", "sm_90"):
        report = assemble(kernel.ptx, arch, kernel.name)
        assert report.registers > 0 and report.spill_stores_bytes == report.local_bytes == 0


def _same_meaning(func: PrimFunc, scheduled: PrimFunc) -> None:
    feeds = {p.name: rng.standard_normal(p.shape).astype(p.dtype) for p in func.params if p.name != "n"}
    out = next(p for p in func.params if p.name == "n")
    zeros = {"n": np.zeros(out.shape, out.dtype)}
    np.testing.assert_array_equal(run_func(scheduled, {**feeds, **zeros})["n"], run_func(func, {**feeds, **zeros})["n"])


@needs_ptxas
def test_the_default_schedule_gives_a_relu_vector_loads_and_stores() -> None:
    func = _lowered("Relu", (1, 64, 56, 56))
    scheduled = default_schedule(func, GPU_PRESETS["a100"]).func
    (loop,) = _vector_loops(scheduled)
    assert loop.extent == VECTOR_LANES and vector_accesses(loop)
    kernel = render_ptx(scheduled)
    assert kernel.launch.grid[0] * kernel.launch.block[0] == 64 * 56 * 56 // 4
    assert len(V_LOAD.findall(kernel.ptx)) == 1 and len(V_STORE.findall(kernel.ptx)) == 1
    assert not S_LOAD.findall(kernel.ptx) and not S_STORE.findall(kernel.ptx)
    assert "align 16" in kernel.llvm_ir
    _assembles(kernel)


@pytest.mark.parametrize("op, shapes", [
    ("Relu", [(1, 8, 8, 8)]),
    ("Add", [(5, 68), (68,)]),  # the row broadcast: aligned, since 4 divides 68
    ("Mul", [(3, 4, 48), (3, 1, 48)]),
], ids=["relu", "row broadcast", "middle broadcast"])
def test_vectorised_elementwise_schedules_keep_their_meaning(op: str, shapes: list[tuple[int, ...]]) -> None:
    func = _lowered(op, *shapes)
    scheduled = default_schedule(func, GPU_PRESETS["a100"]).func
    assert [s.extent for s in _vector_loops(scheduled)] == [VECTOR_LANES]
    _same_meaning(func, scheduled)


@needs_ptxas
def test_a_guarded_vector_loop_hoists_its_guard_and_stays_vector() -> None:
    func = _lowered("Add", (5, 68), (68,))  # 85 groups of 4 on 96 threads: a guard
    kernel = render_ptx(default_schedule(func, GPU_PRESETS["a100"]).func)
    assert kernel.launch.block == (96, 1, 1)
    assert len(V_LOAD.findall(kernel.ptx)) == 2 and len(V_STORE.findall(kernel.ptx)) == 1
    _assembles(kernel)


@pytest.mark.parametrize("op, shapes, dtype", [
    ("Add", [(5, 70), (5, 70)], "float32"),  # 350 elements: not a multiple of 4
    ("Add", [(5, 70), (70,)], "float32"),
    ("Transpose", [(16, 24)], "float32"),  # the input moves by a row a lane
    ("Relu", [(8, 64)], "float64"),  # 4 lanes of 8 bytes: more than one access moves
    ("Relu", [(2, 60)], "float32"),  # 30 groups of 4: fewer than a warp
], ids=["ragged", "row of 70", "transpose", "float64", "small"])
def test_stages_that_would_not_gain_stay_scalar(op: str, shapes: list[tuple[int, ...]], dtype: str) -> None:
    func = _lowered(op, *shapes, dtype=dtype)
    scheduled = default_schedule(func, GPU_PRESETS["a100"]).func
    assert not _vector_loops(scheduled)


def _lanes_kernel(out: Buffer, src: Buffer, offset: int, threads: int = 32, width: int = 4) -> PrimFunc:
    """``out[i] = max(src[i + offset], 0) * 2`` with ``i = (b * threads + t) * width + lane``."""
    i = (b * threads + t) * width + v
    value = maximum(src[i + offset], 0.0) * 2.0 if out.dtype == np.float32 else src[i + offset] * src[i + offset]
    return PrimFunc("k", (src, out), For(b, 2, For(t, threads, For(v, width, Store(out, (i,), value), ForKind.VECTORIZED),
                                                   ForKind.THREAD_BINDING, "threadIdx.x"),
                                         ForKind.THREAD_BINDING, "blockIdx.x"))


@needs_ptxas
def test_a_slice_at_offset_one_loads_scalars_and_stores_vectors() -> None:
    src, out = Buffer("A", (257,), "float32"), Buffer("B", (256,), "float32")
    func = _lanes_kernel(out, src, 1)
    kernel = render_ptx(func)
    assert not V_LOAD.findall(kernel.ptx) and len(S_LOAD.findall(kernel.ptx)) == 4
    assert len(V_STORE.findall(kernel.ptx)) == 1 and not S_STORE.findall(kernel.ptx)
    _assembles(kernel)
    a = rng.standard_normal(257).astype(np.float32)
    got = run_func(func, {"A": a, "B": np.zeros(256, np.float32)})["B"]
    np.testing.assert_array_equal(got, np.maximum(a[1:], 0) * np.float32(2))


@needs_ptxas
def test_eight_float16_lanes_move_as_one_16_byte_access() -> None:
    src, out = Buffer("A", (512,), "float16"), Buffer("B", (512,), "float16")
    kernel = render_ptx(_lanes_kernel(out, src, 0, width=8))
    assert re.findall(r"ld\.global(?:\.nc)?\.v4\.b32", kernel.ptx) and re.findall(r"st\.global\.v4\.b32", kernel.ptx)
    assert not re.findall(r"(?:ld|st)\.global(?:\.nc)?\.(?:b16|u16|f16)\b", kernel.ptx)
    _assembles(kernel)


@needs_ptxas
def test_shared_memory_lanes_move_as_vectors_between_barriers() -> None:
    src, out = Buffer("A", (256,), "float32"), Buffer("B", (256,), "float32")
    tile = Buffer("T", (128,), "float32", "shared")

    def lanes_of(body: Stmt) -> For:
        return For(v, 4, body, ForKind.VECTORIZED)

    # Each thread writes its 4 elements to the tile and reads its neighbour's back.
    nest = seq(lanes_of(Store(tile, (t * 4 + v,), src[(b * 32 + t) * 4 + v])), Barrier("shared"),
               lanes_of(Store(out, ((b * 32 + t) * 4 + v,), tile[(t + 1) % 32 * 4 + v] + 1.0)))
    func = PrimFunc("k", (src, out), For(b, 2, Allocate(tile, For(t, 32, nest, ForKind.THREAD_BINDING, "threadIdx.x")),
                                         ForKind.THREAD_BINDING, "blockIdx.x"))
    kernel = render_ptx(func)
    assert re.findall(r"st\.shared\.v4\.(?:f32|b32)", kernel.ptx)
    assert re.findall(r"ld\.shared\.v4\.(?:f32|b32)", kernel.ptx)
    _assembles(kernel)
    a = rng.standard_normal(256).astype(np.float32)
    got = run_func(func, {"A": a, "B": np.zeros(256, np.float32)})["B"]
    np.testing.assert_array_equal(got, np.roll(a.reshape(2, 32, 4), -1, axis=1).reshape(256) + np.float32(1))


@needs_ptxas
def test_the_tiled_matmul_unrolls_its_k_steps() -> None:
    func = _lowered("MatMul", (1024, 1024), (1024, 1024))
    tiling = choose_tiling(1024, 1024, 1024, 1, GPU_PRESETS["a100"])
    assert tiling is not None
    kernel = render_ptx(default_schedule(func, GPU_PRESETS["a100"]).func)
    assert "llvm.loop.unroll.full" in kernel.llvm_ir
    # Every multiply-add of a K step's register tile, for each of the BK steps, written out:
    assert kernel.ptx.count("fma.rn.f32") == tiling.bk * tiling.tm * tiling.tn
    # and one loop left: the K-outer one, with its barriers (its branch back, and no other).
    assert len(re.findall(r"^\s*@%p\d+ bra ", kernel.ptx, re.MULTILINE)) + kernel.ptx.count("\tbra.uni") == 1
    _assembles(kernel)


def test_a_vectorised_stage_past_the_grid_keeps_its_grid_stride_loop() -> None:
    tiny = replace(GPU_PRESETS["a100"], sms=1)  # at most 32 blocks in the grid
    func = _lowered("Neg", (5, 1600))
    sch = default_schedule(func, tiny, threads_per_block=32)
    assert [i.kind for i in sch.trace.instructions] == ["fuse", "split", "vectorize", "split", "bind", "bind"]
    bound = {s.thread_axis: s.extent for s in walk(sch.func.body) if isinstance(s, For) and s.thread_axis}
    assert bound == {"blockIdx.x": 32, "threadIdx.x": 32}
    [outer] = [s for s in walk(sch.func.body) if isinstance(s, For) and s.kind is ForKind.SERIAL]
    assert outer.extent == 2  # 2,000 groups of 4 over 1,024 threads
    assert sch.trace.apply(func) == sch.func
    _same_meaning(func, sch.func)
