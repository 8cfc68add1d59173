"""Batch-normalisation folding, and per-channel scale and shift folding.

Invariant established: no BatchNormalization, and no Mul or Add by a per-channel
constant, follows a Conv whose weights are constant and whose output nothing else
reads; no BatchNormalization follows such a Gemm, or a 2-D MatMul by a constant
matrix (it becomes a Gemm with a bias). A Mul or Add by a per-channel constant
after a BatchNormalization with constant scale and bias is absorbed into it (the
imported light models scale and shift every BatchNormalization's output that way).

Inference-mode batch normalisation is ``y = (x - mean) * f + B`` with
``f = scale / sqrt(var + epsilon)``, an affine map per channel, so it folds into the
producer's weights (``W * f``) and bias (``(bias - mean) * f + B``); a missing bias is
created. The folded constants are computed in float64 and stored in the weights'
dtype, so results change only by rounding.
"""

from __future__ import annotations

import numpy as np

from hetero.core.ir.graph import Graph, Value
from hetero.core.ir.pattern import Const, Match, Op, Opt, Var
from hetero.core.passes.rewrite import Rule, exclusive_use, rewrite

_BN_PARAMS = ("scale", "bias", "mean", "var")


def _bn(producer: Op) -> Op:
    return Op("BatchNormalization", producer, *(Var(p) for p in _BN_PARAMS), name="bn")


_ROLES = {"w": "weight", "b": "bias", "c": "C"}


def _not_constant(m: Match, names: tuple[str, ...], owner: str) -> str | None:
    for name in names:
        if name in m and m[name].data is None:
            return f"{owner}'s {_ROLES.get(name, name)} {m[name].name!r} is not a constant"
    return None


def _bn_affine(m: Match) -> tuple[np.ndarray, np.ndarray]:
    """The BatchNormalization as ``y = x * factor + shift``, per channel, in float64."""
    scale, bias, mean, var = (m.const(p).astype(np.float64) for p in _BN_PARAMS)
    factor = scale / np.sqrt(var + m.node("bn").attrs["epsilon"])
    return factor, bias - mean * factor


def _along(vector: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """``vector`` shaped to broadcast along ``axis`` of a rank-``rank`` array."""
    shape = [1] * rank
    shape[axis] = -1
    return vector.reshape(shape)


def _check_producer(graph: Graph, m: Match, producer: str, weights: tuple[str, ...]) -> str | None:
    node = m.node(producer)
    owner = f"{node.op} {node.name}"
    return (exclusive_use(graph, node.output, m.root, f"{owner}'s output")
            or _not_constant(m, weights, owner))


# -- BatchNormalization after Conv, Gemm or MatMul -------------------------------------

def _check_bn_conv(graph: Graph, m: Match) -> str | None:
    return (_check_producer(graph, m, "conv", ("w", "b"))
            or _not_constant(m, _BN_PARAMS, f"BatchNormalization {m.root.name}"))


def _fold_bn_conv(graph: Graph, m: Match) -> Value:
    conv, w = m.node("conv"), m.const("w")
    factor, shift = _bn_affine(m)
    bias = m.const("b").astype(np.float64) if "b" in m else 0.0
    return _conv(graph, m, w * _along(factor, 0, w.ndim), bias * factor + shift, conv.attrs)


def _conv(graph: Graph, m: Match, w: np.ndarray, b: np.ndarray, attrs: dict) -> Value:
    conv, dtype = m.node("conv"), m["w"].dtype
    return graph.add_node("Conv", [m["x"], graph.add_constant(w.astype(dtype), f"{conv.name}_w"),
                                   graph.add_constant(b.astype(dtype), f"{conv.name}_b")],
                          attrs, name=conv.name).output


_CONV = Op("Conv", Var("x"), Var("w"), Opt(Var("b")), name="conv")


def _check_bn_gemm(graph: Graph, m: Match) -> str | None:
    return (_check_producer(graph, m, "gemm", ("b", "c"))
            or _not_constant(m, _BN_PARAMS, f"BatchNormalization {m.root.name}"))


def _fold_bn_gemm(graph: Graph, m: Match) -> Value:
    gemm, b = m.node("gemm"), m.const("b")
    factor, shift = _bn_affine(m)
    # Gemm's N axis is B's axis 1, or axis 0 when B is transposed.
    b_new = b * _along(factor, 0 if gemm.attrs["transB"] else 1, 2)
    c = gemm.attrs["beta"] * m.const("c").astype(np.float64) if "c" in m else 0.0
    c_new = np.asarray(c * factor + shift)
    attrs = {**gemm.attrs, "beta": 1.0}
    return _gemm(graph, m, "gemm", b_new, c_new, attrs)


def _gemm(
    graph: Graph, m: Match, producer: str, b: np.ndarray, c: np.ndarray, attrs: dict
) -> Value:
    node, dtype = m.node(producer), m["b"].dtype
    return graph.add_node("Gemm", [m["a"], graph.add_constant(b.astype(dtype), f"{node.name}_w"),
                                   graph.add_constant(c.astype(dtype), f"{node.name}_b")],
                          attrs, name=node.name).output


def _check_bn_matmul(graph: Graph, m: Match) -> str | None:
    node = m.node("matmul")
    if m["a"].type.rank != 2 or m["b"].type.rank != 2:
        return (f"MatMul {node.name} multiplies {m['a'].type} by {m['b'].type}; only a 2-D "
                f"product becomes a Gemm")
    return (_check_producer(graph, m, "matmul", ("b",))
            or _not_constant(m, _BN_PARAMS, f"BatchNormalization {m.root.name}"))


def _fold_bn_matmul(graph: Graph, m: Match) -> Value:
    factor, shift = _bn_affine(m)
    return _gemm(graph, m, "matmul", m.const("b") * _along(factor, 1, 2), shift, {})


# -- a per-channel Mul or Add by a constant after Conv or BatchNormalization ------------

def _per_channel(c: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``c`` as a float64 vector over axis 1 of ``shape`` if it broadcasts only along it."""
    if c.ndim > len(shape):
        return None
    full = c.reshape((1,) * (len(shape) - c.ndim) + c.shape)
    if full.shape[1] not in (1, shape[1]) or any(
            d != 1 for i, d in enumerate(full.shape) if i != 1):
        return None
    return np.broadcast_to(full.reshape(-1).astype(np.float64), (shape[1],))


def _check_channel(graph: Graph, m: Match, producer: str, weights: tuple[str, ...]) -> str | None:
    node = m.node(producer)
    if _per_channel(m.const("c"), node.output.shape) is None:
        return (f"constant {m['c'].name} {m['c'].type} is not per-channel for {node.op} "
                f"{node.name}'s output {node.output.type}: it must broadcast as [C, 1, ...] "
                f"or [1, C, 1, ...]")
    return _check_producer(graph, m, producer, weights)


def _fold_channel_conv(graph: Graph, m: Match) -> Value:
    conv, w = m.node("conv"), m.const("w").astype(np.float64)
    vector = _per_channel(m.const("c"), conv.output.shape)
    bias = m.const("b").astype(np.float64) if "b" in m else np.zeros(w.shape[0])
    if m.root.op == "Mul":
        w, bias = w * _along(vector, 0, w.ndim), bias * vector
    else:
        bias = bias + vector
    return _conv(graph, m, w, bias, conv.attrs)


def _fold_channel_bn(graph: Graph, m: Match) -> Value:
    bn = m.node("bn")
    vector = _per_channel(m.const("c"), bn.output.shape)
    scale, bias = m.const("scale").astype(np.float64), m.const("bias").astype(np.float64)
    if m.root.op == "Mul":
        scale, bias = scale * vector, bias * vector
    else:
        bias = bias + vector
    dtype = m["scale"].dtype
    params = [graph.add_constant(scale.astype(dtype), f"{bn.name}_scale"),
              graph.add_constant(bias.astype(dtype), f"{bn.name}_bias"), m["mean"], m["var"]]
    return graph.add_node("BatchNormalization", [m["x"], *params], bn.attrs, name=bn.name).output


def _channel_op(op: str, producer: Op) -> Op:
    return Op(op, producer, Const("c"), commute=True)


_BN_X = Op("BatchNormalization", Var("x"), *(Var(p) for p in _BN_PARAMS), name="bn")

RULES = (
    Rule("batchnorm_into_conv", _bn(_CONV), _fold_bn_conv, _check_bn_conv,
         doc="Conv then BatchNormalization is one Conv"),
    Rule("batchnorm_into_gemm", _bn(Op("Gemm", Var("a"), Var("b"), Opt(Var("c")), name="gemm")),
         _fold_bn_gemm, _check_bn_gemm, doc="Gemm then BatchNormalization is one Gemm"),
    Rule("batchnorm_into_matmul", _bn(Op("MatMul", Var("a"), Var("b"), name="matmul")),
         _fold_bn_matmul, _check_bn_matmul,
         doc="2-D MatMul by a constant then BatchNormalization is one Gemm"),
    *(Rule(f"{op.lower()}_into_conv", _channel_op(op, _CONV), _fold_channel_conv,
           lambda g, m: _check_channel(g, m, "conv", ("w", "b")),
           doc=f"a per-channel {op} by a constant after a Conv folds into its weights")
      for op in ("Mul", "Add")),
    *(Rule(f"{op.lower()}_into_batchnorm", _channel_op(op, _BN_X), _fold_channel_bn,
           lambda g, m: _check_channel(g, m, "bn", ("scale", "bias")),
           doc=f"a per-channel {op} by a constant after a BatchNormalization folds into it")
      for op in ("Mul", "Add")),
)


def fold_batchnorm(graph: Graph) -> Graph:
    """A copy of ``graph`` with batch normalisations and channel scales folded into weights."""
    return rewrite(graph, RULES).graph
