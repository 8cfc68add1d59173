"""The element budget: no tensor the frontend creates may exceed ``max_elements``, and
the import's folding of static operands computes at most ``FOLD_MAX_ELEMENTS`` in all."""

from __future__ import annotations

from collections.abc import Sequence
import math

from hetero.errors import Keyword, TensorTooLargeError

#: The default budget: 2**30 elements (4 GiB of float32) for any one tensor.
DEFAULT_MAX_ELEMENTS = 2**30

#: The most elements the import may compute, in all, to fold static operands (a
#: Reshape's shape, a Slice's starts, ...): those come from small shape computations,
#: so a model whose operand needs more would make a tiny file allocate gigabytes.
FOLD_MAX_ELEMENTS = 2**24


def check_elements(shape: Sequence[int], what: str, max_elements: int) -> None:
    """TensorTooLargeError when a tensor of ``shape`` would exceed ``max_elements``.

    Only the shape is looked at, so the check costs nothing however large the tensor.
    """
    count = math.prod(int(d) for d in shape)
    if count > max_elements:
        raise TensorTooLargeError(
            f"{what} has shape {[int(d) for d in shape]} ({count:,} elements), over the "
            f"budget of {max_elements:,} elements; if the model really needs it, raise the "
            "budget with {fix}", fix=Keyword("max_elements", str(count), function="load_onnx")
        )
