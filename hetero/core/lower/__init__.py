"""Lowering canonical ops to the tensor IR; importing this package registers every family."""

from hetero.core.lower.registry import is_lowerable, lower_group, lower_node, lowers

__all__ = ["is_lowerable", "lower_group", "lower_node", "lowers"]
