"""What the codegen backends share beyond the tensor IR: named dumps of their stages."""

from hetero.core.parts.dump import STAGES, StageDump

__all__ = ["STAGES", "StageDump"]
