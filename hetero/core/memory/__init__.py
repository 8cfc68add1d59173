"""Memory: the hierarchy types backends declare; the partitioner, planner and schedules read them."""

from hetero.core.memory.hierarchy import MemoryHierarchy, MemoryLevel, format_bytes

__all__ = ["MemoryHierarchy", "MemoryLevel", "format_bytes"]
