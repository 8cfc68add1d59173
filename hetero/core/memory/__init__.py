"""Memory: the hierarchy types backends declare; the partitioner, planner and schedules read them."""

from hetero.core.memory.hierarchy import MemoryHierarchy, MemoryLevel, format_bytes
from hetero.core.memory.liveness import (
    LiveInterval, Liveness, StepUse, analyze_liveness, analyze_step_liveness, schedule_steps,
)
from hetero.core.memory.planner import (
    Allocation, MemoryPlan, plan_arena, plan_memory, plan_memory_spaces,
)

__all__ = [
    "Allocation", "LiveInterval", "Liveness", "MemoryHierarchy", "MemoryLevel", "MemoryPlan", "StepUse",
    "analyze_liveness", "analyze_step_liveness", "format_bytes", "plan_arena", "plan_memory", "plan_memory_spaces",
    "schedule_steps",
]
