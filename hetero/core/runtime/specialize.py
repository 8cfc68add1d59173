"""Executables for models whose static operands are graph inputs.

hetero compiles for static shapes: a Reshape's shape, a reduction's axes, Pad's pads,
TopK's ``k`` are compiled in. When a model computes one of them from a graph input
(onnx's node tests feed ``axes`` that way, exporters feed ``k``), the import raises
:class:`~hetero.errors.OperandInputError` naming those inputs, and
:func:`hetero.compile` returns a :class:`SpecializingExecutable` instead. Each run
looks up the values of those inputs: the first run with a value compiles the model
with the inputs bound to it (``load_onnx(..., input_values=...)``, so every operand
computed from them folds), later runs with the same value reuse that executable. At
most :data:`MAX_SPECIALIZATIONS` are kept, the least recently used dropped first, so
a model run with ever-changing values stays bounded in memory (and compiles each
time: such a model should bind its values or become dynamic, which is issue 12's).

Operands whose value does not change any shape (Clip's bounds) are not specialised:
their translators read them at run time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
import os
from typing import Any

import numpy as np

from hetero.core.ir.graph import Graph
from hetero.core.runtime.executable import Executable, Interface, ValueType
from hetero.core.runtime.inputs import check_inputs
from hetero.errors import HeteroError, Keyword, OperandInputError

#: How many specialisations one executable keeps (least recently used dropped first).
MAX_SPECIALIZATIONS = 8

#: Compiles the model with some inputs bound to values.
Build = Callable[[Mapping[str, np.ndarray]], Executable]


class SpecializingExecutable:
    """A model compiled once per distinct value of its operand inputs, on first use.

    ``run``, ``report``, ``timelines`` and ``interface`` behave as an
    :class:`~hetero.core.runtime.executable.Executable`'s; the report and timelines
    are those of the specialisation run last. ``specialized_on`` names the inputs
    whose values select a specialisation; ``compiled`` counts the compiles so far.
    """

    def __init__(self, name: str, error: OperandInputError, build: Build,
                 max_specializations: int | None = None) -> None:
        if not error.model_inputs:
            raise error
        self.name = name
        self.specialized_on: tuple[str, ...] = error.inputs
        self._inputs: list[ValueType] = list(error.model_inputs)
        self._output_names = list(error.model_outputs)
        self._build = build
        self._max = max(1, MAX_SPECIALIZATIONS if max_specializations is None else max_specializations)
        self._cache: OrderedDict[tuple[Any, ...], Executable] = OrderedDict()
        self._last: Executable | None = None
        self.compiled = 0

    @property
    def interface(self) -> Interface:
        """Every input of the model; the outputs of the specialisation run last (their
        shapes may differ between values), or only their names before the first run."""
        if self._last is not None:
            return Interface(self._inputs, self._last.interface.outputs)
        return Interface(self._inputs, [(n, (), "float32") for n in self._output_names])

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run on ``inputs``, compiling the specialisation for their operand values first
        if it is new. Inputs are checked as an Executable checks them."""
        graph = Graph("interface")
        for name, shape, dtype in self._inputs:
            graph.add_input(name, shape, dtype)
        arrays = dict(zip((n for n, _, _ in self._inputs), check_inputs(graph, inputs)))
        exe = self._specialization(arrays)
        return exe.run({n: a for n, a in arrays.items() if n not in self.specialized_on})

    def _specialization(self, arrays: Mapping[str, np.ndarray]) -> Executable:
        key = tuple((n, arrays[n].dtype.str, arrays[n].shape, arrays[n].tobytes())
                    for n in self.specialized_on)
        exe = self._cache.get(key)
        if exe is not None:
            self._cache.move_to_end(key)
            self._last = exe
            return exe
        while True:
            values = {n: arrays[n] for n in self.specialized_on}
            try:
                exe = self._build(values)
                break
            except OperandInputError as exc:
                # Bound values fold, which may show an operand behind further inputs.
                more = tuple(n for n in exc.inputs if n not in self.specialized_on)
                if not more:
                    raise
                self.specialized_on += more
                key = tuple((n, arrays[n].dtype.str, arrays[n].shape, arrays[n].tobytes())
                            for n in self.specialized_on)
        self.compiled += 1
        self._cache[key] = exe
        if len(self._cache) > self._max:
            self._cache.popitem(last=False)
        self._last = exe
        return exe

    def report(self) -> str:
        """The last specialisation's report, after a line saying what it is."""
        head = (f"executable {self.name}: specialised on input(s) "
                f"{', '.join(self.specialized_on)}; {self.compiled} compile(s), "
                f"{len(self._cache)} kept (at most {self._max})")
        if self._last is None:
            return f"{head}\nnot run yet; call run() first"
        return f"{head}\n{self._last.report()}"

    def timelines(self) -> dict[str, str]:
        """The last specialisation's timelines."""
        if self._last is None:
            raise HeteroError(f"executable {self.name}: no timeline before a run; call run() first")
        return self._last.timelines()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Refused: a saved executable is compiled for one value of each operand input."""
        first = self.specialized_on[0]
        raise HeteroError(
            f"executable {self.name} compiles once per value of its input(s) "
            f"{', '.join(self.specialized_on)}, which set operands hetero compiles as "
            "constants, so it cannot be saved as one file; bind them to the values you will "
            "run with ({values}) and save that", values=Keyword("input_values", key=first))
