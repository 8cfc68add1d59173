"""Executables compiled once per input shape or operand value, on first sight.

hetero compiles for static shapes, with a Reshape's shape, a reduction's axes, Pad's
pads and TopK's ``k`` compiled in. Two kinds of model do not give those at import:

- inputs with dynamic dimensions (``batch``, ``sequence``): the import raises
  :class:`~hetero.errors.DynamicInputError` naming them;
- operands computed from graph inputs (onnx's node tests feed ``axes`` that way,
  exporters feed ``k``): the import raises :class:`~hetero.errors.OperandInputError`.

:func:`hetero.compile` then returns a :class:`SpecializingExecutable`. Each run
looks up the shapes of the dynamic inputs and the values of the operand inputs; the
first run with a new combination compiles the model for it (``input_shapes=`` for
the shapes, ``input_values=`` binding the operands, so everything computed from them
folds), and later runs reuse it. Compiling for one may reveal an operand behind a
further input; that input then joins the key. Each specialisation goes through the
compile cache when one is configured, so a new process compiles nothing twice.

At most ``max_specializations`` (:data:`MAX_SPECIALIZATIONS` by default) are
compiled: a run past that bound raises :class:`~hetero.errors.SpecializationLimitError`
naming the inputs and the bound, instead of compiling without end for a model fed
ever-changing shapes. ``input_shapes`` given as a list compiles those shapes ahead of
time.

Operands whose value does not change any shape (Clip's bounds) are not specialised:
their translators read them at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
import os
from typing import Any

import numpy as np

from hetero.core.exec.inputs import Declared, check_declared
from hetero.core.runtime.executable import Executable, Interface
from hetero.errors import (
    DynamicInputError, HeteroError, InputError, Keyword, OperandInputError, SpecializationLimitError,
)

#: How many specialisations one executable compiles unless told otherwise.
MAX_SPECIALIZATIONS = 8

#: Compiles the model for input shapes and operand values.
Build = Callable[[Mapping[str, tuple[int, ...]], Mapping[str, np.ndarray]], Executable]

class SpecializingExecutable:
    """A model compiled once per distinct shape of its dynamic inputs and value of its
    operand inputs, on first use.

    ``run``, ``report``, ``timelines`` and ``interface`` behave as an
    :class:`~hetero.core.runtime.executable.Executable`'s; the report and timelines
    are those of the specialisation run last. ``specialized_on`` names the inputs
    whose values select a specialisation, ``shaped_on`` those whose shapes do;
    ``compiled`` counts the compiles so far.
    """

    def __init__(self, name: str, error: DynamicInputError | OperandInputError, build: Build,
                 max_specializations: int | None = None) -> None:
        if not error.model_inputs:
            raise error
        self.name = name
        self.shaped_on: tuple[str, ...] = error.inputs if isinstance(error, DynamicInputError) else ()
        self.specialized_on: tuple[str, ...] = error.inputs if isinstance(error, OperandInputError) else ()
        self._inputs: list[Declared] = [(n, tuple(s), d) for n, s, d in error.model_inputs]
        self._output_names = list(getattr(error, "model_outputs", []))
        self._build = build
        self._max = max(1, MAX_SPECIALIZATIONS if max_specializations is None else max_specializations)
        self._cache: dict[tuple[Any, ...], Executable] = {}
        self._last: Executable | None = None
        self.compiled = 0

    @property
    def interface(self) -> Interface:
        """Every input of the model (a dynamic dim as -1 until a run fixes it) and the
        outputs of the specialisation run last, or only their names before the first."""
        if self._last is not None:
            shapes = {n: s for n, s, _ in self._last.interface.inputs}
            inputs = [(n, shapes.get(n, tuple(-1 if d is None else d for d in dims)), dtype)
                      for n, dims, dtype in self._inputs]
            return Interface(inputs, self._last.interface.outputs)
        inputs = [(n, tuple(-1 if d is None else d for d in dims), dtype) for n, dims, dtype in self._inputs]
        return Interface(inputs, [(n, (), "float32") for n in self._output_names])

    def prepare(self, shapes: Mapping[str, Sequence[int]]) -> None:
        """Compile the specialisation for ``shapes`` of the dynamic inputs ahead of time
        (a model whose operands are inputs too compiles at its first run)."""
        if self.specialized_on:
            raise HeteroError(f"executable {self.name}: its operand input(s) "
                              f"{', '.join(self.specialized_on)} are known only at run time")
        fixed = {n: tuple(int(d) for d in shapes[n]) for n in self.shaped_on if n in shapes}
        missing = [n for n in self.shaped_on if n not in fixed]
        if missing:
            raise InputError(f"executable {self.name}: the shapes to compile for lack input(s) {missing}")
        self._lookup(fixed, {})

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run on ``inputs``, compiling the specialisation for their shapes and operand
        values first if it is new. Inputs are checked against the declared dtypes, ranks
        and static dims (an InputError, as an Executable's)."""
        arrays = check_declared(self.name, self._inputs, inputs)
        shapes = {n: arrays[n].shape for n in self.shaped_on}
        while True:
            values = {n: arrays[n] for n in self.specialized_on}
            try:
                exe = self._lookup(shapes, values)
                break
            except OperandInputError as exc:
                # Bound shapes and values fold, which may show an operand behind further inputs.
                more = tuple(n for n in exc.inputs if n not in self.specialized_on)
                if not more:
                    raise
                self.specialized_on += more
        return exe.run({n: a for n, a in arrays.items() if n not in self.specialized_on})

    def _lookup(self, shapes: Mapping[str, tuple[int, ...]], values: Mapping[str, np.ndarray]) -> Executable:
        key = (tuple((n, shapes[n]) for n in self.shaped_on),
               tuple((n, values[n].dtype.str, values[n].shape, values[n].tobytes()) for n in self.specialized_on))
        exe = self._cache.get(key)
        if exe is None:
            if len(self._cache) >= self._max:
                raise SpecializationLimitError(
                    f"executable {self.name} has been compiled for {len(self._cache)} distinct "
                    f"{self._what()} already, its bound; raise it ({{bound}}), or compile for the "
                    f"shapes you use ({{shapes}})", bound=Keyword("max_specializations", str(2 * self._max)),
                    shapes=Keyword("input_shapes", "[...]"))
            exe = self._build(shapes, values)
            self.compiled += 1
            self._cache[key] = exe
        self._last = exe
        return exe

    def _what(self) -> str:
        kinds = ([f"shapes of {_listed(self.shaped_on)}"] if self.shaped_on else []) + \
            ([f"values of {_listed(self.specialized_on)}"] if self.specialized_on else [])
        return " and ".join(kinds)

    def report(self) -> str:
        """The last specialisation's report, after a line saying what it is."""
        head = (f"executable {self.name}: specialised on the {self._what()}; "
                f"{self.compiled} compile(s) (at most {self._max})")
        if self._last is None:
            return f"{head}\nnot run yet; call run() first"
        return f"{head}\n{self._last.report()}"

    def timelines(self) -> dict[str, str]:
        """The last specialisation's timelines."""
        if self._last is None:
            raise HeteroError(f"executable {self.name}: no timeline before a run; call run() first")
        return self._last.timelines()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Refused: a saved executable is compiled for one shape and value of each input."""
        if self.specialized_on:
            first = self.specialized_on[0]
            raise HeteroError(
                f"executable {self.name} compiles once per value of its input(s) "
                f"{', '.join(self.specialized_on)}, which set operands hetero compiles as "
                "constants, so it cannot be saved as one file; bind them to the values you will "
                "run with ({values}) and save that", values=Keyword("input_values", key=first))
        raise HeteroError(
            f"executable {self.name} compiles once per shape of its input(s) "
            f"{', '.join(self.shaped_on)}, so it cannot be saved as one file; compile it for the "
            "shape you will run with ({shapes}) and save that",
            shapes=Keyword("input_shapes", key=self.shaped_on[0]))


def _listed(names: Sequence[str], most: int = 4) -> str:
    """``a, b, c, d and 176 more``: input names, not all of them when there are many (a
    detector's tail is shaped on every NonZero's output)."""
    shown = ", ".join(names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"
