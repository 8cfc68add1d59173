"""Placeholder: filled in by the op-definition work."""
