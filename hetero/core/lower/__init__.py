"""Lowering canonical ops to the tensor IR; importing this package registers every family."""

from hetero.core.lower.registry import group_outputs, is_lowerable, lower_group, lower_node, lowers
from hetero.core.lower import elementwise, quant, reduce, tensor  # noqa: F401
from hetero.core.lower import conv_pool, nn, qint  # noqa: F401
from hetero.core.lower import indexing  # noqa: F401
from hetero.core.lower import topk  # noqa: F401
from hetero.core.lower import conv_transpose  # noqa: F401
from hetero.core.lower import resize  # noqa: F401
from hetero.core.lower import signal  # noqa: F401
from hetero.core.lower import sample  # noqa: F401
from hetero.core.lower import unpool  # noqa: F401
from hetero.core.lower import rnn  # noqa: F401
from hetero.core.lower import deform  # noqa: F401
from hetero.core.lower import layout  # noqa: F401

__all__ = ["group_outputs", "is_lowerable", "lower_group", "lower_node", "lowers"]
