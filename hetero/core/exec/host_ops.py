"""Host kernels for the ONNX ops whose output shape depends on input values.

hetero compiles every region with static shapes, so ``NonZero``, ``Compress``, ``Unique``
and ``NonMaxSuppression`` cannot be compiled: the executable runs them here, in numpy,
between compiled stages, and the importer calls the same kernels to fold them when their
inputs are constants. Both uses need the bits onnxruntime produces, so each kernel follows
onnxruntime's CPU kernel where the ONNX spec leaves room (a 0-d ``NonZero``, a condition
longer than the axis, NaN in ``Unique``, the order of tied scores).

A kernel takes the node's attributes (plain Python values, an absent one meaning the ONNX
default) and its inputs in the node's order (``None`` for an absent optional one), and
returns every ONNX output in order. :func:`run_host_op` is the entry point: it names the
node in every error.

>>> run_host_op("NonZero", {}, [np.array([[1, 0], [0, 2]])], "node nz")
[array([[0, 1],
       [0, 1]])]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
import math
import operator
from typing import Any

import numpy as np

from hetero.errors import HeteroError, InputError, UnsupportedOpError, did_you_mean

#: A host kernel: ``(attrs, inputs) -> outputs``, every ONNX output in order.
HostKernel = Callable[[Mapping[str, Any], Sequence[np.ndarray | None]], list[np.ndarray]]


def run_host_op(
    op_type: str, attrs: Mapping[str, Any], inputs: Sequence[np.ndarray | None], where: str
) -> list[np.ndarray]:
    """Run the host kernel of ``op_type`` on ``inputs``; ``where`` labels the node in errors.

    Raises :class:`~hetero.errors.UnsupportedOpError` for an op with no host kernel and
    :class:`~hetero.errors.InputError` for inputs or attributes the op cannot take.
    """
    kernel = HOST_OPS.get(op_type)
    if kernel is None:
        raise UnsupportedOpError(
            f"{where}: op {op_type!r} has no host kernel{did_you_mean(op_type, HOST_OPS)}; "
            f"the host runs {', '.join(sorted(HOST_OPS))}"
        )
    try:
        return kernel(attrs, inputs)
    except InputError as exc:
        raise InputError(f"{where} ({op_type}): {exc}") from None
    except HeteroError:
        raise
    except (ValueError, TypeError, IndexError) as exc:  # numpy refused what the checks let by
        raise InputError(f"{where} ({op_type}): cannot run on these inputs: {exc}") from None


# --- argument checks -------------------------------------------------------------------


def _operands(inputs: Sequence[np.ndarray | None], names: Sequence[str], required: int
              ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
    """The node's inputs split into the first ``required`` ones, which must be present,
    and the optional rest, padded with None up to ``len(names)``."""
    if len(inputs) > len(names):
        raise InputError(f"takes at most {len(names)} inputs ({', '.join(names)}), got {len(inputs)}")
    padded = [None if a is None else np.asarray(a) for a in inputs]
    padded += [None] * (len(names) - len(padded))
    present: list[np.ndarray] = []
    for name, array in zip(names[:required], padded):
        if array is None:
            raise InputError(f"input {name!r} is missing; pass it")
        present.append(array)
    return present, padded[required:]


def _int_attr(attrs: Mapping[str, Any], name: str, default: int | None) -> int | None:
    """An integer attribute, ``default`` when absent."""
    value = attrs.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(f"attribute {name!r} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise InputError(f"attribute {name!r} must be an integer, got {value!r}") from None


def _check_attrs(attrs: Mapping[str, Any], known: Sequence[str]) -> None:
    """Reject attributes the op does not define, as ONNX's checker does."""
    for name in attrs:
        if name not in known:
            allowed = ", ".join(known) if known else "none"
            raise InputError(f"unknown attribute {name!r}{did_you_mean(name, known)}; "
                             f"the op takes {allowed}")


def _axis(axis: int, rank: int, what: str) -> int:
    """``axis`` in ``[-rank, rank - 1]``, made non-negative."""
    if not -rank <= axis < rank:
        raise InputError(f"axis {axis} is out of range for {what} of rank {rank}; "
                         f"use one in [{-rank}, {rank - 1}]")
    return axis % rank


def _single(array: np.ndarray, name: str) -> Any:
    """The one element of a scalar-like operand (shape ``[]`` or ``[1]``)."""
    if array.size != 1:
        raise InputError(f"input {name!r} must hold one value, got shape {list(array.shape)}")
    return array.reshape(())[()]


# --- NonZero ---------------------------------------------------------------------------


def non_zero(attrs: Mapping[str, Any], inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Indices of the non-zero elements, int64 ``[rank, nnz]`` in row-major order.

    A 0-d input gives ``[1, nnz]`` (numpy's and onnxruntime's answer) rather than the
    spec's ``[0, nnz]``, so that a folded NonZero agrees with onnxruntime. NaN counts as
    non-zero, ``-0.0`` as zero.
    """
    _check_attrs(attrs, ())
    (x,), _ = _operands(inputs, ("X",), 1)
    x = x.reshape(1) if x.ndim == 0 else x
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


# --- Compress --------------------------------------------------------------------------


def compress(attrs: Mapping[str, Any], inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """The slices of ``input`` along ``axis`` (of the flattened input when absent) where
    ``condition`` is true.

    A condition shorter than the axis selects from its first entries only; one longer
    has its extra entries ignored, as onnxruntime does (numpy would raise).
    """
    _check_attrs(attrs, ("axis",))
    (x, condition), _ = _operands(inputs, ("input", "condition"), 2)
    if x.ndim == 0:
        raise InputError("input 'input' must have rank >= 1, got a 0-d tensor")
    if condition.ndim != 1:
        raise InputError(f"input 'condition' must be 1-D, got shape {list(condition.shape)}")
    if condition.dtype != np.bool_:
        raise InputError(f"input 'condition' must be bool, got {condition.dtype}")
    axis = _int_attr(attrs, "axis", None)
    if axis is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = _axis(axis, x.ndim, "input 'input'")
    keep = np.flatnonzero(condition[: x.shape[axis]])
    return [np.take(x, keep, axis=axis)]


# --- Unique ----------------------------------------------------------------------------


def unique(attrs: Mapping[str, Any], inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
    """Unique elements (or slices along ``axis``): ``[Y, indices, inverse_indices, counts]``.

    ``sorted=1`` orders ``Y`` ascending (slices lexicographically), ``sorted=0`` by first
    occurrence. Equal values that differ in bits (``0.0`` and ``-0.0``) keep the first
    occurrence's bits. NaN is grouped as onnxruntime groups it (see :func:`_unique_flat`
    and :class:`_SliceMap`).
    """
    _check_attrs(attrs, ("axis", "sorted"))
    (x,), _ = _operands(inputs, ("X",), 1)
    is_sorted = _int_attr(attrs, "sorted", 1)
    if is_sorted not in (0, 1):
        raise InputError(f"attribute 'sorted' must be 0 or 1, got {is_sorted}")
    axis = _int_attr(attrs, "axis", None)
    if axis is None:
        x = x.reshape(-1)
        first, inverse = _unique_flat(x)
        axis = 0
    else:
        if x.ndim == 0:
            raise InputError("attribute 'axis' needs an input of rank >= 1, got a 0-d tensor")
        axis = _axis(axis, x.ndim, "input 'X'")
        width = math.prod(size for dim, size in enumerate(x.shape) if dim != axis)
        first, inverse = _unique_rows(np.moveaxis(x, axis, 0).reshape(x.shape[axis], width))
    # ``first`` lists each group's first index with groups in ascending order.
    if not is_sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, inverse = first[order], rank[inverse]
    counts = np.bincount(inverse, minlength=first.size).astype(np.int64)
    return [np.take(x, first, axis=axis), first.astype(np.int64), inverse.astype(np.int64), counts]


def _unique_flat(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups of a 1-D array in ascending order: (first index of each, group of each element).

    NaN follows onnxruntime, whose kernel keys a ``std::map`` by the values: a NaN looked
    up there compares equal to the first entry (the smallest value seen so far) and joins
    its group; a NaN first in the input is inserted, and then every later value joins it.
    """
    n = flat.size
    nan = np.isnan(flat) if flat.dtype.kind == "f" else np.zeros(n, np.bool_)
    if n and nan[0]:
        return np.zeros(1, np.intp), np.zeros(n, np.intp)
    where = np.flatnonzero(~nan)
    values = flat[where]
    # A stable sort keeps each group's first occurrence first.
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.ones(ordered.size, np.bool_)
    starts[1:] = ordered[1:] != ordered[:-1]
    group_of_sorted = np.cumsum(starts) - 1
    inverse = np.empty(n, np.intp)
    inverse[where[order]] = group_of_sorted
    if nan.any():
        seen_min = np.minimum.accumulate(np.where(nan, np.inf, flat).astype(flat.dtype))
        uniques = ordered[starts]
        inverse[nan] = np.searchsorted(uniques, seen_min[nan])
    return where[order[starts]], inverse


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Groups of equal rows in lexicographic order: (first index of each, group of each row).

    Rows holding NaN go through :class:`_SliceMap`, which replays onnxruntime's
    ``std::map``: NaN makes its comparison inconsistent, so its groups then depend on
    the shape of the tree. That replay is a Python loop, O(rows log rows) comparisons.
    """
    n, width = rows.shape
    if rows.dtype.kind == "f" and np.isnan(rows).any():
        return _SliceMap(rows).groups()
    if n == 0:
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    order = np.lexsort(rows.T[::-1]) if width else np.arange(n)
    ordered = rows[order]
    starts = np.ones(n, np.bool_)
    starts[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(n, np.intp)
    inverse[order] = np.cumsum(starts) - 1
    return order[starts], inverse


class _RbNode:
    """A node of :class:`_SliceMap`'s tree: the row that is its key and its group."""

    __slots__ = ("key", "group", "left", "right", "parent", "red")

    def __init__(self, key: int, group: int, parent: Any) -> None:
        self.key, self.group, self.parent = key, group, parent
        self.left: Any = None
        self.right: Any = None
        self.red = True


class _SliceMap:
    """onnxruntime's Unique along an axis replayed step by step: a ``std::map`` from rows
    (compared as ``std::vector``s) to group numbers, searched and filled as libstdc++'s
    ``find`` and ``operator[]`` do it.

    Only rows holding NaN come here: with them ``<`` is no strict weak order, so the
    groups depend on the tree's shape and each lookup's path. The header's ``parent``,
    ``left`` and ``right`` are the root, the leftmost and the rightmost node, as in
    libstdc++'s ``_Rb_tree``.
    """

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self.header = _RbNode(-1, -1, None)
        self.size = 0

    def groups(self) -> tuple[np.ndarray, np.ndarray]:
        """(first row of each group, group of each row), groups in the map's order."""
        n = self.rows.shape[0]
        inverse = np.empty(n, np.intp)
        n_groups = 0
        for row in range(n):
            found = self._lower_bound(row)
            if found is None or self._less(row, found.key):  # find() missed: a new group
                self._emplace_hint(found, row, n_groups)
                inverse[row] = n_groups
                n_groups += 1
            else:
                inverse[row] = found.group
        nodes = list(self._in_order())
        if len(nodes) != n_groups:
            raise InputError("Unique along an axis meets NaN in slices that onnxruntime's "
                             "map files under one key twice (its result is undefined "
                             "there); replace the NaN before Unique")
        position = np.empty(n_groups, np.intp)
        for rank, node in enumerate(nodes):
            position[node.group] = rank
        return np.array([node.key for node in nodes], np.intp), position[inverse]

    def _less(self, a: int, b: int) -> bool:
        """``rows[a] < rows[b]`` as C++20's ``std::vector`` has it (``<=>`` element by
        element): the first position whose elements are not equal decides, and one
        holding NaN there is unordered, so neither row is less."""
        differ = np.flatnonzero(~(self.rows[a] == self.rows[b]))
        return bool(differ.size) and bool(self.rows[a][differ[0]] < self.rows[b][differ[0]])

    def _lower_bound(self, row: int) -> _RbNode | None:
        """``_M_lower_bound``: the last node on the search path not less than ``row``."""
        node, bound = self.header.parent, None
        while node is not None:
            if not self._less(node.key, row):
                bound, node = node, node.left
            else:
                node = node.right
        return bound

    def _emplace_hint(self, hint: _RbNode | None, row: int, group: int) -> None:
        """``operator[]``'s ``_M_emplace_hint_unique`` at ``hint`` (None: ``end()``),
        through ``_M_get_insert_hint_unique_pos``; ``row < hint`` holds here."""
        header = self.header
        if hint is None:
            if self.size and self._less(header.right.key, row):
                return self._insert(False, header.right, row, group)
        elif hint is header.left:
            return self._insert(True, hint, row, group)
        else:
            before = self._predecessor(hint)
            if self._less(before.key, row):
                if before.right is None:
                    return self._insert(False, before, row, group)
                return self._insert(True, hint, row, group)
        return self._insert_unique(row, group)

    def _insert_unique(self, row: int, group: int) -> None:
        """``_M_get_insert_unique_pos``; when it meets an equivalent key, ``operator[]``
        gives that node the new group instead of inserting."""
        node, parent, went_left = self.header.parent, self.header, True
        while node is not None:
            parent, went_left = node, self._less(row, node.key)
            node = node.left if went_left else node.right
        before = parent
        if went_left:
            if parent is self.header.left or parent is self.header:
                return self._insert(False, parent, row, group)
            before = self._predecessor(parent)
        if self._less(before.key, row):
            return self._insert(False, parent, row, group)
        before.group = group
        return None

    def _insert(self, at_hint: bool, parent: _RbNode, row: int, group: int) -> None:
        """``_M_insert_node`` then ``_Rb_tree_insert_and_rebalance``."""
        header = self.header
        left = at_hint or parent is header or self._less(row, parent.key)
        x = _RbNode(row, group, parent)
        if left:
            parent.left = x
            if parent is header:
                header.parent = header.right = x
            elif parent is header.left:
                header.left = x
        else:
            parent.right = x
            if parent is header.right:
                header.right = x
        self.size += 1
        while x is not header.parent and x.parent.red:
            xpp = x.parent.parent
            toward_left = x.parent is xpp.left
            uncle = xpp.right if toward_left else xpp.left
            if uncle is not None and uncle.red:
                x.parent.red = uncle.red = False
                xpp.red = True
                x = xpp
                continue
            if x is (x.parent.right if toward_left else x.parent.left):
                x = x.parent
                self._rotate(x, toward_left)
            x.parent.red = False
            xpp.red = True
            self._rotate(xpp, not toward_left)
        header.parent.red = False

    def _rotate(self, x: _RbNode, left: bool) -> None:
        """``_Rb_tree_rotate_left`` (``left``) or ``_Rb_tree_rotate_right`` about ``x``."""
        y = x.right if left else x.left
        inner = y.left if left else y.right
        if left:
            x.right = inner
        else:
            x.left = inner
        if inner is not None:
            inner.parent = x
        y.parent = x.parent
        if x is self.header.parent:
            self.header.parent = y
        elif x is x.parent.left:
            x.parent.left = y
        else:
            x.parent.right = y
        if left:
            y.left = x
        else:
            y.right = x
        x.parent = y

    @staticmethod
    def _predecessor(node: _RbNode) -> _RbNode:
        """``_Rb_tree_decrement`` of a node that is not the leftmost."""
        if node.left is not None:
            node = node.left
            while node.right is not None:
                node = node.right
            return node
        parent = node.parent
        while node is parent.left:
            node, parent = parent, parent.parent
        return parent

    def _in_order(self) -> Iterator[_RbNode]:
        """The nodes in the map's order, as ORT's output loop walks them."""
        stack: list[_RbNode] = []
        node = self.header.parent
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            yield node
            node = node.right


# --- NonMaxSuppression -----------------------------------------------------------------


def non_max_suppression(attrs: Mapping[str, Any], inputs: Sequence[np.ndarray | None]
                        ) -> list[np.ndarray]:
    """Greedy per-class NMS: int64 ``[K, 3]`` rows of ``(batch, class, box)``.

    Rows come by batch, then class, then descending score, tied scores by ascending box
    index, as onnxruntime orders them. A box is a candidate when its score is greater
    than ``score_threshold`` (every box when that input is absent) and is dropped when
    its IoU with an already selected box of its class is greater than ``iou_threshold``.
    ``max_output_boxes_per_class`` absent or 0 selects nothing. IoU is computed in
    float32 with onnxruntime's operations in its order, so that borderline boxes go the
    same way; NaN scores are undefined in onnxruntime and are ranked last here.
    """
    _check_attrs(attrs, ("center_point_box",))
    (boxes, scores), (max_boxes, iou_input, score_input) = _operands(
        inputs, ("boxes", "scores", "max_output_boxes_per_class", "iou_threshold",
                 "score_threshold"), 2)
    center_point_box = _int_attr(attrs, "center_point_box", 0)
    if center_point_box not in (0, 1):
        raise InputError(f"attribute 'center_point_box' must be 0 or 1, got {center_point_box}")
    for name, array in (("boxes", boxes), ("scores", scores), ("iou_threshold", iou_input),
                        ("score_threshold", score_input)):
        if array is not None and array.dtype != np.float32:
            raise InputError(f"input {name!r} must be float32, got {array.dtype}")
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise InputError(f"input 'boxes' must be [batches, boxes, 4], got shape {list(boxes.shape)}")
    if scores.ndim != 3:
        raise InputError(f"input 'scores' must be [batches, classes, boxes], got shape "
                         f"{list(scores.shape)}")
    if scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise InputError(f"scores of shape {list(scores.shape)} do not match boxes of shape "
                         f"{list(boxes.shape)}: scores must be [{boxes.shape[0]}, classes, "
                         f"{boxes.shape[1]}]")
    limit = 0
    if max_boxes is not None:
        if max_boxes.dtype != np.int64:
            raise InputError(f"input 'max_output_boxes_per_class' must be int64, got {max_boxes.dtype}")
        limit = max(int(_single(max_boxes, "max_output_boxes_per_class")), 0)
    iou_threshold = np.float32(0.0)
    if iou_input is not None:
        iou_threshold = _single(iou_input, "iou_threshold")
        if not 0.0 <= iou_threshold <= 1.0:
            raise InputError(f"input 'iou_threshold' must be in [0, 1], got {iou_threshold}")
    score_threshold = None if score_input is None else _single(score_input, "score_threshold")

    selected: list[np.ndarray] = []
    if limit:
        for b in range(boxes.shape[0]):
            extent = _extents(boxes[b], center_point_box)
            for c in range(scores.shape[1]):
                picked = _select(extent, scores[b, c], score_threshold, iou_threshold, limit)
                rows = np.empty((picked.size, 3), np.int64)
                rows[:, 0], rows[:, 1], rows[:, 2] = b, c, picked
                selected.append(rows)
    return [np.concatenate(selected) if selected else np.zeros((0, 3), np.int64)]


def _extents(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """Per box ``(x_min, x_max, y_min, y_max, area)`` in float32, as onnxruntime derives them."""
    with np.errstate(all="ignore"):  # inf and NaN coordinates are legal and handled
        if center_point_box == 0:  # [y1, x1, y2, x2], either corner first
            x_min, x_max = _min_max(boxes[:, 1], boxes[:, 3])
            y_min, y_max = _min_max(boxes[:, 0], boxes[:, 2])
        else:  # [x_center, y_center, width, height]
            half_w, half_h = boxes[:, 2] / np.float32(2), boxes[:, 3] / np.float32(2)
            x_min, x_max = boxes[:, 0] - half_w, boxes[:, 0] + half_w
            y_min, y_max = boxes[:, 1] - half_h, boxes[:, 1] + half_h
        area = (x_max - x_min) * (y_max - y_min)
    return x_min, x_max, y_min, y_max, area


def _min_max(lhs: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's ``MaxMin``: ``lhs >= rhs`` decides, so NaN goes the same way."""
    ge = lhs >= rhs
    return np.where(ge, rhs, lhs), np.where(ge, lhs, rhs)


#: Candidates resolved together: each block is checked against the boxes kept so far in
#: one array operation, then within itself row by row.
_NMS_BLOCK = 256


def _select(extent: tuple[np.ndarray, ...], scores: np.ndarray, score_threshold: Any,
            iou_threshold: np.float32, limit: int) -> np.ndarray:
    """Box indices one class keeps, in selection order.

    onnxruntime's greedy loop, blocked: a candidate is kept when no box kept before it
    suppresses it. Suppression by earlier blocks' boxes is one matrix per block; within
    a block a kept row strikes the candidates after it, so the Python loop runs once per
    candidate on whole rows rather than once per pair.
    """
    candidates = np.arange(scores.size)
    if score_threshold is not None:
        candidates = candidates[scores > score_threshold]
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    if order.size > _NMS_BLOCK:
        pairs = _striking_pairs(extent, order, iou_threshold)
        if pairs is not None:
            return _select_sparse(order, pairs, limit)
    kept = np.zeros(0, np.intp)
    for start in range(0, order.size, _NMS_BLOCK):
        block = order[start:start + _NMS_BLOCK]
        if kept.size:
            block = block[~_suppresses(extent, kept[:, None], block[None, :], iou_threshold)
                          .any(axis=0)]
        within = _suppresses(extent, block[:, None], block[None, :], iou_threshold)
        alive = np.ones(block.size, np.bool_)
        chosen = []
        for row in range(block.size):
            if alive[row]:
                chosen.append(row)
                if kept.size + len(chosen) == limit:
                    break
                alive[row + 1:] &= ~within[row, row + 1:]
        kept = np.concatenate([kept, block[chosen]])
        if kept.size == limit:
            break
    return kept.astype(np.int64)


#: The most overlapping candidate pairs the sparse path takes (denser boxes go blocked),
#: and how many it checks at a time.
_NMS_MAX_PAIRS = 64_000_000
_NMS_PAIR_CHUNK = 1_000_000


def _striking_pairs(extent: tuple[np.ndarray, ...], order: np.ndarray, iou_threshold: np.float32
                    ) -> tuple[np.ndarray, np.ndarray] | None:
    """Every pair of candidates (as ranks in ``order``, the earlier first) in which the
    earlier would suppress the later; None when more than :data:`_NMS_MAX_PAIRS` pairs
    overlap.

    Only boxes that overlap with a positive width and height can pass an IoU threshold
    of 0 or more, and a sweep along x finds them: sorted by ``x_min``, a box can overlap
    only the boxes after it that start before its ``x_max``. Detectors' boxes (per-class
    offsets, as torchvision's batched NMS adds them) overlap sparsely, so this checks far
    fewer pairs than all of them, a chunk at a time.
    """
    x_min, x_max, y_min, y_max, _ = extent
    xs = x_min[order]
    by_x = np.argsort(xs, kind="stable")
    with np.errstate(invalid="ignore"):
        ends = np.searchsorted(xs[by_x], x_max[order][by_x], side="left")
    lengths = np.maximum(ends - np.arange(order.size) - 1, 0)
    reach = np.cumsum(lengths)
    if order.size and int(reach[-1]) > _NMS_MAX_PAIRS:
        return None
    found_earlier, found_later = [np.zeros(0, np.intp)], [np.zeros(0, np.intp)]
    cuts = np.searchsorted(reach, np.arange(_NMS_PAIR_CHUNK, int(reach[-1]) if order.size else 0,
                                            _NMS_PAIR_CHUNK))
    for lo, hi in zip([0, *cuts], [*cuts, order.size]):
        span = lengths[lo:hi]
        first = np.repeat(np.arange(lo, hi), span)
        second = first + 1 + np.arange(first.size) - np.repeat(np.cumsum(span) - span, span)
        a, b = order[by_x[first]], order[by_x[second]]
        with np.errstate(invalid="ignore"):
            near = (y_min[b] < y_max[a]) & (y_min[a] < y_max[b])
        ra, rb = by_x[first[near]], by_x[second[near]]
        earlier, later = np.minimum(ra, rb), np.maximum(ra, rb)
        strikes = _suppresses(extent, order[earlier], order[later], iou_threshold)
        found_earlier.append(earlier[strikes])
        found_later.append(later[strikes])
    return np.concatenate(found_earlier), np.concatenate(found_later)


def _select_sparse(order: np.ndarray, pairs: tuple[np.ndarray, np.ndarray], limit: int) -> np.ndarray:
    """:func:`_select` from the striking pairs: the same greedy loop, each kept candidate
    striking the later candidates it suppresses."""
    earlier, later = pairs
    by_earlier = np.argsort(earlier, kind="stable")
    earlier, later = earlier[by_earlier], later[by_earlier]
    bounds = np.searchsorted(earlier, np.arange(order.size + 1))
    alive = np.ones(order.size, np.bool_)
    chosen = []
    for rank in range(order.size):
        if alive[rank]:
            chosen.append(rank)
            if len(chosen) == limit:
                break
            alive[later[bounds[rank]:bounds[rank + 1]]] = False
    return order[np.array(chosen, np.intp)].astype(np.int64)


def _suppresses(extent: tuple[np.ndarray, ...], selected: np.ndarray, candidate: np.ndarray,
                iou_threshold: np.float32) -> np.ndarray:
    """onnxruntime's ``SuppressByIOU(selected, candidate)`` over broadcast index arrays:
    IoU greater than the threshold, with its early outs for empty overlaps and areas."""
    x_min, x_max, y_min, y_max, area = extent
    with np.errstate(all="ignore"):
        ix_min = _std_max(x_min[selected], x_min[candidate])
        ix_max = _std_min(x_max[selected], x_max[candidate])
        iy_min = _std_max(y_min[selected], y_min[candidate])
        iy_max = _std_min(y_max[selected], y_max[candidate])
        inter = (ix_max - ix_min) * (iy_max - iy_min)
        area1, area2 = area[selected], area[candidate]
        union = area1 + area2 - inter
        overlaps = ~((ix_max <= ix_min) | (iy_max <= iy_min) | (inter <= 0)
                     | (area1 <= 0) | (area2 <= 0) | (union <= 0))
        return overlaps & (inter / union > iou_threshold)


def _std_max(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``std::max(a, b)``: ``b`` only where ``a < b``, so NaN picks the same side."""
    return np.where(a < b, b, a)


def _std_min(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``std::min(a, b)``: ``b`` only where ``b < a``."""
    return np.where(b < a, b, a)


#: ONNX op type -> its host kernel.
HOST_OPS: dict[str, HostKernel] = {
    "NonZero": non_zero,
    "Compress": compress,
    "Unique": unique,
    "NonMaxSuppression": non_max_suppression,
}
