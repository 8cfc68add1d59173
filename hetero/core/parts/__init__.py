"""What the codegen backends share around their kernels: the step part, its compile loop,
its arena, named dumps of their stages and the support checks of a lowering backend."""

from hetero.core.parts.arena import ALIGNMENT, Slot, host_arena, value_types
from hetero.core.parts.compile import BuiltStep, CompiledSteps, KernelBuilder, StageFile, compile_steps
from hetero.core.parts.dump import STAGES, StageDump
from hetero.core.parts.part import ArrayType, Clock, IndexCheck, Step, StepPart
from hetero.core.parts.support import lowerable

__all__ = [
    "ALIGNMENT", "STAGES", "ArrayType", "BuiltStep", "Clock", "CompiledSteps", "IndexCheck", "KernelBuilder", "Slot",
    "StageDump", "StageFile", "Step", "StepPart", "compile_steps", "host_arena", "lowerable", "value_types",
]
