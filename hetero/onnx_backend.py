"""hetero as an ``onnx.backend.base.Backend``, so onnx's own backend test suite runs on it.

::

    import onnx.backend.test
    from hetero.onnx_backend import HeteroBackend
    suite = onnx.backend.test.BackendTest(HeteroBackend, __name__)

``prepare`` compiles the model with :func:`hetero.compile` for the targets in the
``targets`` keyword (by default the fallback alone: the installed backend that declares
it takes every canonical op), other keywords going to ``hetero.compile`` as they are;
the returned rep runs it on positional or named inputs. Models that
use ops outside hetero's canonical set are reported incompatible.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from hetero.core.compiler import compile_model
from hetero.core.runtime.executable import Executable
from hetero.errors import HeteroError

class HeteroBackendRep(BackendRep):
    """A compiled model that runs on a list or dict of inputs."""

    def __init__(self, executable: Executable) -> None:
        self.executable = executable

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        names = [name for name, _, _ in self.executable.interface.inputs]
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            arrays = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            feeds = dict(zip(names, arrays))
        outputs = self.executable.run(feeds)
        return tuple(outputs[name] for name, _, _ in self.executable.interface.outputs)


class HeteroBackend(Backend):
    """onnx's backend interface over :func:`hetero.compile`."""

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> HeteroBackendRep:
        if not cls.supports_device(device):
            raise HeteroError(f"hetero's ONNX backend runs on the CPU, not {device}")
        targets: Sequence[str] = kwargs.pop("targets", ())
        return HeteroBackendRep(compile_model(model, targets=targets, **kwargs))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = HeteroBackend.prepare
run_model = HeteroBackend.run_model
supports_device = HeteroBackend.supports_device
