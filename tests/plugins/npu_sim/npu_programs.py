"""Small hand-written npu_sim programs shared by the npu_sim tests."""

from __future__ import annotations

import numpy as np

from hetero.core.ir import Graph, GraphBuilder
from hetero.core.ir.ops.fixed_point import quantize_multiplier

from hetero.plugins.npu_sim.isa import (
    Buf,
    DType,
    Engine,
    Gemm,
    Instr,
    Load,
    Signal,
    Store,
    Wait,
)
from hetero.plugins.npu_sim.program import Binding, Program

ROWS, K, N = 4, 8, 8
TILE = ROWS * K
X_ADDR, W_ADDR, Y_ADDR = 0x000, 0x400, 0x800


def matmul_program(tiles: int, *, double_buffered: bool = True, drop: str | None = None) -> Program:
    """``Y[tiles·4, 8] (int32) = X[tiles·4, 8] @ W[8, 8]`` tiled by 4 rows through ``inp``.

    Double-buffered: tiles alternate between ``inp[0]`` and ``inp[32]`` and the load
    engine runs ahead of the matrix unit. Otherwise one buffer, each LOAD after the
    GEMM before it. ``drop`` removes one synchronisation: ``"raw"`` the compute
    engine's WAIT before its second GEMM, ``"war"`` the load engine's WAIT before it
    refills a buffer.
    """
    def load_tile(t: int) -> Load:
        buf_off = (t % 2) * TILE if double_buffered else 0
        return Load(Buf.INP, buf_off, X_ADDR + t * TILE, DType.INT8, (1, 1, ROWS, K), (TILE, TILE, K, 1))

    def gemm(t: int) -> Gemm:
        buf_off = (t % 2) * TILE if double_buffered else 0
        return Gemm(t * ROWS * N, buf_off, 0, ROWS, K, N, K, N, False, tag=f"tile{t}")

    lc, cl = Signal(Engine.LOAD, Engine.COMPUTE), Signal(Engine.COMPUTE, Engine.LOAD)
    cs = Signal(Engine.COMPUTE, Engine.STORE)
    w_lc, w_cl, w_cs = Wait(Engine.LOAD, Engine.COMPUTE), Wait(Engine.COMPUTE, Engine.LOAD), \
        Wait(Engine.COMPUTE, Engine.STORE)
    ahead = 2 if double_buffered else 1
    code: list[Instr] = [Load(Buf.WGT, 0, W_ADDR, DType.INT8, (1, 1, K, N), (K * N, K * N, N, 1))]
    for t in range(min(ahead, tiles)):
        code += [load_tile(t), lc]
    for t in range(tiles):
        if not (drop == "raw" and t == 1):
            code.append(w_lc)
        code += [gemm(t), cs, w_cs,
                 Store(Buf.ACC, t * ROWS * N, Y_ADDR + 4 * t * ROWS * N, DType.INT32, (1, 1, ROWS, N),
                       (0, 0, 4 * N, 4))]
        if t + ahead < tiles:
            code.append(cl)
            if not (drop == "war" and t == 0):
                code.append(w_cl)
            code += [load_tile(t + ahead), lc]
    return Program(
        tuple(code), dram_size=0x1000,
        inputs=(Binding("x", X_ADDR, (tiles * ROWS, K), "int8"), Binding("w", W_ADDR, (K, N), "int8")),
        outputs=(Binding("y", Y_ADDR, (tiles * ROWS, N), "int32"),),
    )


def matmul_inputs(tiles: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Random int8 operands for :func:`matmul_program`."""
    rng = np.random.default_rng(seed)
    return {"x": rng.integers(-128, 128, (tiles * ROWS, K), dtype=np.int8),
            "w": rng.integers(-128, 128, (K, N), dtype=np.int8)}


def int8_net(channels: int, size: int, features: int, seed: int) -> Graph:
    """QConv (3×3, ``channels`` → 2·``channels``) → MaxPool → Flatten → QMatMul (→ 10):
    every kind of code the compiler emits, on a ``size``×``size`` int8 image."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("net")
    x = b.input("x", (1, channels, size, size), "int8")
    m, s = quantize_multiplier(1 / (150 * channels))
    h = b.QConv(x, rng.integers(-127, 128, (2 * channels, channels, 3, 3)).astype(np.int8), None,
                pads=(1,) * 4, x_zero=3, multiplier=(m,), shift=(s,), y_zero=-128, y_min=-128, name="conv")
    h = b.MaxPool(h, kernel_shape=(2, 2), strides=(2, 2), name="pool")
    h = b.Flatten(h, axis=1, name="flat")
    m, s = quantize_multiplier(1 / (150 * features))
    y = b.QMatMul(h, rng.integers(-127, 128, (2 * channels * (size // 2) ** 2, 10)).astype(np.int8), None,
                  a_zero=-128, multiplier=(m,), shift=(s,), y_zero=0, name="fc")
    b.output(y)
    return b.build()


def int8_inputs(graph: Graph) -> dict[str, np.ndarray]:
    """Seeded random int8 data for every input of ``graph``."""
    rng = np.random.default_rng(0)
    return {v.name: rng.integers(-128, 128, v.shape).astype(np.int8) for v in graph.inputs}
