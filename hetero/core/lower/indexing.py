"""Lowering the indexing ops (meanings: :mod:`hetero.core.ir.ops.indexing`).

Gathers, tiles, triangles and block rearrangements map each output element to one
input element. Scatters, CumSum and CumProd are serial by nature, so each is a stage written
as statements (:func:`hetero.core.ir.tir.compute.extern`): a scatter copies ``data``
and then applies the updates one after another in the reference's order (so repeated
targets combine, or the last one wins, exactly as there), in time linear in the data
and the updates; CumSum and CumProd walk their axis once per row, carrying the running
sums (products) in :func:`accumulator_dtype`.

Every index read from a tensor is wrapped (negative counts from the end) and clamped
into range, so no access leaves its buffer; indices out of range are an error checked
outside the kernel (the ops' ``index_bounds``), as for Gather.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.ir.tir.buffer import Buffer
from hetero.core.ir.tir.compute import Tensor, extern
from hetero.core.ir.tir.expr import (
    INDEX, Expr, Var, cast, const, eq, ge, le, logical_and, lt, maximum, minimum, select,
)
from hetero.core.ir.tir.stmt import Allocate, For, Stmt, Store, seq
from hetero.core.ir.types import TensorType
from hetero.core.lower.elementwise import Indices, compute_nd, serial_nest
from hetero.core.lower.reduce import accumulator_dtype
from hetero.core.lower.registry import lowers


def _wrapped(j: Expr, dim: int) -> Expr:
    """Index ``j`` into an axis of ``dim``: wrapped if negative, clamped into range."""
    j = cast(j, INDEX)
    j = select(lt(j, 0), j + dim, j)
    return minimum(maximum(j, 0), dim - 1)


def _index(t: Tensor, at: Sequence[Expr | int], dim: int) -> Expr:
    return _wrapped(t[tuple(at)], dim)



def _combined(reduction: str, old: Expr, new: Expr) -> Expr:
    if reduction == "none":
        return new
    if reduction == "add":
        return old + new
    if reduction == "mul":
        return old * new
    return maximum(old, new) if reduction == "max" else minimum(old, new)


def _scatter(data: Tensor, inputs: Sequence[Tensor], reduction: str, updates_shape: tuple[int, ...],
             target: Callable[[Indices], tuple[Expr, ...]], read: Callable[[Indices], Expr],
             name: str) -> Tensor:
    """A copy of ``data``, then for each update position u (row-major): the element at
    ``target(u)`` combined with ``read(u)``."""

    def build(out: Buffer) -> Stmt:
        copy = serial_nest(data.shape, f"{name}_c", lambda p: Store(out, p, data.buffer[p]))

        def update(u: Indices) -> Stmt:
            at = target(u)
            return Store(out, at, _combined(reduction, out[at], read(u)))

        return seq(copy, serial_nest(updates_shape, f"{name}_u", update))

    return extern(data.shape, data.dtype, name, inputs, build)


@lowers("GatherElements")
def lower_gather_elements(inputs: list[Tensor | None], attrs: dict[str, Any],
                          out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """``data`` at the output's position with the index on ``axis``."""
    data, indices = inputs
    assert data is not None and indices is not None
    axis, out, dim = attrs["axis"], out_types[0], data.shape[attrs["axis"]]

    def element(i: Indices) -> Expr:
        return data[i[:axis] + (_index(indices, i, dim),) + i[axis + 1:]]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("ScatterElements")
def lower_scatter_elements(inputs: list[Tensor | None], attrs: dict[str, Any],
                           out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Update position u writes data's element at u with the index on ``axis``."""
    data, indices, updates = inputs
    assert data is not None and indices is not None and updates is not None
    axis, dim = attrs["axis"], data.shape[attrs["axis"]]

    def target(u: Indices) -> tuple[Expr, ...]:
        return u[:axis] + (_wrapped(indices.buffer[u], dim),) + u[axis + 1:]

    return [_scatter(data, (data, indices, updates), attrs["reduction"], indices.shape, target,
                     lambda u: updates.buffer[u], names[0])]


@lowers("GatherND")
def lower_gather_nd(inputs: list[Tensor | None], attrs: dict[str, Any],
                    out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Output (batch, k, rest) reads data at (batch, the index tuple at k, rest)."""
    data, indices = inputs
    assert data is not None and indices is not None
    b, q, out = attrs["batch_dims"], indices.shape[-1], out_types[0]
    lead = len(indices.shape) - 1

    def element(i: Indices) -> Expr:
        tuple_at = i[:lead]
        picked = tuple(_index(indices, tuple_at + (j,), data.shape[b + j]) for j in range(q))
        return data[i[:b] + picked + i[lead:]]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("ScatterND")
def lower_scatter_nd(inputs: list[Tensor | None], attrs: dict[str, Any],
                     out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Update position (k, s) writes data's element at (the index tuple at k, s)."""
    data, indices, updates = inputs
    assert data is not None and indices is not None and updates is not None
    q, lead = indices.shape[-1], len(indices.shape) - 1

    def target(u: Indices) -> tuple[Expr, ...]:
        k = u[:lead]
        return tuple(_wrapped(indices.buffer[k + (j,)], data.shape[j]) for j in range(q)) + u[lead:]

    return [_scatter(data, (data, indices, updates), attrs["reduction"], updates.shape, target,
                     lambda u: updates.buffer[u], names[0])]


@lowers("Tile")
def lower_tile(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
               names: list[str]) -> list[Tensor]:
    """Each axis reads its index modulo the input's extent."""
    x = inputs[0]
    assert x is not None
    out = out_types[0]
    return [compute_nd(out.shape, lambda i: x[tuple(v % d for v, d in zip(i, x.shape))],
                       names[0], out.dtype)]


@lowers("Trilu")
def lower_trilu(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                names: list[str]) -> list[Tensor]:
    """The input where column - row is >= k (upper) or <= k (lower), else zero."""
    x = inputs[0]
    assert x is not None
    k, keep = attrs["k"], ge if attrs["upper"] else le

    def element(i: Indices) -> Expr:
        return select(keep(i[-1] - i[-2], k), x[i], const(0, x.dtype))

    return [compute_nd(x.shape, element, names[0], x.dtype)]


@lowers("EyeLike")
def lower_eye_like(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                   names: list[str]) -> list[Tensor]:
    """One where column - row == k."""
    out, k = out_types[0], attrs["k"]

    def element(i: Indices) -> Expr:
        return select(eq(i[1] - i[0], k), const(1, out.dtype), const(0, out.dtype))

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("OneHot")
def lower_one_hot(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
                  names: list[str]) -> list[Tensor]:
    """on_value where the position on the new axis equals the (wrapped) index."""
    indices, values = inputs
    assert indices is not None and values is not None
    axis, depth, out = attrs["axis"], attrs["depth"], out_types[0]

    def element(i: Indices) -> Expr:
        j = cast(indices[i[:axis] + i[axis + 1:]], INDEX)  # float indices truncate toward zero
        j = select(lt(j, 0), j + depth, j)
        return select(eq(j, i[axis]), values[1], values[0])

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("DepthToSpace")
def lower_depth_to_space(inputs: list[Tensor | None], attrs: dict[str, Any],
                         out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The index map of the reference's reshape-transpose-reshape."""
    x = inputs[0]
    assert x is not None
    out, bs, dcr = out_types[0], attrs["blocksize"], attrs["mode"] == "DCR"
    channels = out.shape[1]

    def element(i: Indices) -> Expr:
        n, c, y, w = i
        by, bx = y % bs, w % bs
        source = (by * bs + bx) * channels + c if dcr else (c * bs + by) * bs + bx
        return x[n, source, y // bs, w // bs]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("SpaceToDepth")
def lower_space_to_depth(inputs: list[Tensor | None], attrs: dict[str, Any],
                         out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """The index map of the reference's reshape-transpose-reshape."""
    x = inputs[0]
    assert x is not None
    out, bs, dcr = out_types[0], attrs["blocksize"], attrs["mode"] == "DCR"
    channels = x.shape[1]

    def element(i: Indices) -> Expr:
        n, c, y, w = i
        block, c_in = (c // channels, c % channels) if dcr else (c % (bs * bs), c // (bs * bs))
        return x[n, c_in, y * bs + block // bs, w * bs + block % bs]

    return [compute_nd(out.shape, element, names[0], out.dtype)]


@lowers("ReverseSequence")
def lower_reverse_sequence(inputs: list[Tensor | None], attrs: dict[str, Any],
                           out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Time step t of batch entry b reads step len[b] - 1 - t while t < len[b]."""
    x, lens = inputs
    assert x is not None and lens is not None
    b, t = attrs["batch_axis"], attrs["time_axis"]
    steps = x.shape[t]

    def element(i: Indices) -> Expr:
        n = minimum(maximum(lens[i[b]], 0), steps)
        source = select(lt(i[t], n), n - 1 - i[t], i[t])
        return x[tuple(source if k == t else v for k, v in enumerate(i))]

    return [compute_nd(x.shape, element, names[0], x.dtype)]


@lowers("TensorScatter")
def lower_tensor_scatter(inputs: list[Tensor | None], attrs: dict[str, Any],
                         out_types: list[TensorType], names: list[str]) -> list[Tensor]:
    """Each cache position reads the update step written there, if any: position i of
    batch entry b holds step ``i - start[b]`` (modulo the length when circular) when
    that lies in ``[0, len)``, else the past cache's element."""
    cache, update, where = inputs
    assert cache is not None and update is not None
    axis, circular = attrs["axis"], attrs["mode"] == "circular"
    width, length = cache.shape[axis], update.shape[axis]

    def element(i: Indices) -> Expr:
        start = const(0, "int64") if where is None else where[i[0]]
        step = i[axis] - start
        if circular:
            step = step % width  # floored, as Python's % in the reference
        inside = logical_and(ge(step, 0), lt(step, length))
        clamped = minimum(maximum(step, 0), length - 1)  # read in bounds in either branch
        fresh = update[tuple(clamped if k == axis else v for k, v in enumerate(i))]
        return select(inside, fresh, cache[i])

    return [compute_nd(cache.shape, element, names[0], cache.dtype)]


def _lower_cumulative(product: bool) -> Callable[..., list[Tensor]]:
    def lower(inputs: list[Tensor | None], attrs: dict[str, Any], out_types: list[TensorType],
              names: list[str]) -> list[Tensor]:
        return _cumulative(inputs, attrs, names, product)

    return lower


def _cumulative(inputs: list[Tensor | None], attrs: dict[str, Any], names: list[str],
                product: bool) -> list[Tensor]:
    """Each row along the axis walked once (backwards when ``reverse``), the running sums
    (products) of the trailing positions kept in an accumulator row."""
    x = inputs[0]
    assert x is not None
    axis, n, name = attrs["axis"], x.shape[attrs["axis"]], names[0]
    pre, post = x.shape[:axis], x.shape[axis + 1:] or (1,)
    trailing = len(x.shape) - axis - 1
    acc_dtype = accumulator_dtype(x.dtype)
    t = Var(f"{name}_t")
    step = (n - 1 - t) if attrs["reverse"] else t

    def build(out: Buffer) -> Stmt:
        def row(p: Indices) -> Stmt:
            acc = Buffer(f"{name}_acc", post, acc_dtype, "local")

            def add(s: Indices) -> Stmt:
                at = p + (step,) + s[:trailing]
                term = cast(x.buffer[at], acc_dtype)
                running = Store(acc, s, acc[s] * term if product else acc[s] + term)
                written = Store(out, at, cast(acc[s], x.dtype))
                return seq(written, running) if attrs["exclusive"] else seq(running, written)

            identity = const(int(product), acc_dtype)
            start = serial_nest(post, f"{name}_z", lambda s: Store(acc, s, identity))
            return Allocate(acc, seq(start, For(t, n, serial_nest(post, f"{name}_s", add))))

        return serial_nest(pre, f"{name}_p", row)

    return [extern(x.shape, x.dtype, name, (x,), build)]


lowers("CumSum")(_lower_cumulative(product=False))
lowers("CumProd")(_lower_cumulative(product=True))
