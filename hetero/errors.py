"""Every error a user of hetero can trigger.

All of them derive from :class:`HeteroError`, so ``except hetero.errors.HeteroError``
catches anything hetero raises on purpose. Each subclass stands for one kind of
failure; its message names the model, node, op, plugin or file at fault and says
what to do about it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
import difflib


@dataclass(frozen=True)
class Keyword:
    """A keyword argument an error message tells the user to set or names.

    Kept apart from the message's text so that each front end words it its own way:
    Python reads ``load_onnx(..., max_elements=N)``, the command line ``--max-elements N``
    (see :meth:`HeteroError.render`). ``key`` is the entry of a mapping keyword
    (``input_shapes={"x": [...]}``), ``value`` the value to give it, as text, and
    ``function`` the call that takes it. With ``call`` set the keyword names an action
    instead, a function called with ``value`` (``hetero.trust('m.hetero')``), which the
    command line spells as its subcommand (``hetero trust m.hetero``).
    """

    name: str
    value: str | None = None
    key: str | None = None
    function: str | None = None
    call: bool = False

    def python(self) -> str:
        """The Python spelling: ``name``, ``name=value``, ``name={"key": value}``, inside
        ``function(..., ...)`` when one is named; ``function(value)`` for a call."""
        if self.call:
            return f"{self.function or self.name}({self.value!r})"
        if self.key is not None:
            text = f'{self.name}={{"{self.key}": {self.value or "[...]"}}}'
        elif self.value is not None:
            text = f"{self.name}={self.value}"
        else:
            text = self.name
        return f"{self.function}(..., {text})" if self.function else text


class HeteroError(Exception):
    """Base class of every error hetero raises on purpose.

    A message that names keyword arguments holds one ``{field}`` placeholder per
    :class:`Keyword` passed as ``field=``: ``str(error)`` spells them as Python does,
    and :meth:`render` as a front end does. Only those placeholders are filled, so other
    braces in the message (a node's name, a dict) stay as they are.

    >>> err = TensorTooLargeError("too big; raise the budget with {fix}",
    ...                           fix=Keyword("max_elements", "4096", function="load_onnx"))
    >>> str(err)
    'too big; raise the budget with load_onnx(..., max_elements=4096)'
    """

    def __init__(self, *args: object, **keywords: Keyword) -> None:
        self.template = str(args[0]) if args else ""
        self.keywords = keywords
        super().__init__(*((self.render(),) + args[1:] if keywords else args))

    def render(self, spell: Callable[[Keyword], str] = Keyword.python) -> str:
        """The message with each keyword spelt by ``spell``."""
        if not self.keywords:
            return str(self.args[0]) if self.args else ""
        text = self.template
        for name, keyword in self.keywords.items():
            text = text.replace(f"{{{name}}}", spell(keyword))
        return text


class ModelLoadError(HeteroError):
    """A model file is missing, malformed, truncated or not an ONNX model."""


class UnsafePathError(ModelLoadError):
    """An external-data path leaves the model's folder (``..``, absolute, symlink)."""


class DamagedFileError(ModelLoadError):
    """A saved executable, compile-cache entry or artifact is truncated, malformed, larger
    than it may be, or not a regular file; the message names the file and the entry."""


class SignatureError(HeteroError):
    """A saved executable or compile-cache entry carries no signature, or one this user's
    signing key did not make; or the signing key itself is missing, unsafe or unreadable."""


class UnsupportedOpError(HeteroError):
    """A model uses operators outside hetero's canonical op set."""


class TensorTooLargeError(HeteroError):
    """A tensor would exceed the configured element budget."""


class DynamicShapeError(HeteroError):
    """A dimension could not be resolved to a static size."""


class OperandInputError(DynamicShapeError):
    """An operand hetero compiles as a constant (axes, pads, a shape, ``k``) is computed
    from graph inputs; ``inputs`` names them. :func:`hetero.compile` answers it by
    compiling once per distinct value of those inputs (see
    :mod:`hetero.core.runtime.specialize`)."""

    def __init__(self, *args: object, inputs: tuple[str, ...] = (), **keywords: Keyword) -> None:
        self.inputs = tuple(inputs)
        #: The model's inputs ``(name, shape, dtype)`` and output names, filled in by
        #: the importer so that a specialising executable can check its inputs.
        self.model_inputs: list[tuple[str, tuple[int, ...], str]] = []
        self.model_outputs: list[str] = []
        super().__init__(*args, **keywords)


class DynamicInputError(DynamicShapeError):
    """Graph inputs have dynamic dimensions (``inputs`` names them). :func:`hetero.compile`
    answers it by compiling once per distinct input shape (see
    :mod:`hetero.core.runtime.specialize`)."""

    def __init__(self, *args: object, inputs: tuple[str, ...] = (),
                 model_inputs: list[tuple[str, tuple[int | None, ...], str]] | None = None,
                 **keywords: Keyword) -> None:
        self.inputs = tuple(inputs)
        #: Every input ``(name, dims, dtype)``, a dynamic dim as None.
        self.model_inputs = list(model_inputs or [])
        super().__init__(*args, **keywords)


class DataDependentError(DynamicShapeError):
    """A node's output shape, or an operand hetero compiles in, depends on tensor values
    only a run computes: NonZero's count, an If's condition, a Loop's stopping, a ``k``
    computed from data. ``host`` says the node itself runs on the host (its output shape
    follows the data); otherwise only its operand waits for the data, and the node is
    compiled in a later stage specialised on that operand's value.

    The importer raises one for the whole model, its ``split`` set (a
    :class:`~hetero.core.frontend.onnx.stages.StageSplit`): :func:`hetero.compile`
    answers it by compiling in stages (see :mod:`hetero.core.runtime.staged`)."""

    def __init__(self, *args: object, host: bool = False, split: Any = None,
                 **keywords: Keyword) -> None:
        self.host = host
        self.split = split
        super().__init__(*args, **keywords)


class SpecializationLimitError(HeteroError):
    """An executable that compiles once per input shape or operand value met more distinct
    ones than its bound allows."""


class ShapeError(HeteroError):
    """Shapes or dtypes of an op's inputs do not fit together."""


class OpAttributeError(HeteroError):
    """An op attribute is missing, unknown or of the wrong kind."""


class UnknownOpError(HeteroError):
    """An op name that is not in the canonical op set."""


class VerificationError(HeteroError):
    """A graph breaks a rule of the IR; the message names the node and the rule."""


class InputError(HeteroError):
    """Inputs handed to run a graph are missing, extra, or of the wrong shape or dtype."""


class PatternError(HeteroError):
    """A rewrite pattern is malformed or a rewrite produced an invalid graph."""


class UnknownPassError(HeteroError):
    """A graph pass name that is not registered."""


class PluginError(HeteroError):
    """A backend plugin failed to load, declared itself wrongly or raised in a hook."""


class OptionError(HeteroError):
    """A compile option no selected backend declares, or a value its backend refuses."""


class UnknownBackendError(PluginError):
    """A backend name that no loaded plugin provides."""


class PartitionError(HeteroError):
    """A model cannot be split across the selected backends as asked (an override
    naming an unknown node or a backend that refuses it, a node no backend takes)."""


class ScheduleError(HeteroError):
    """A schedule primitive's precondition does not hold; the message names the block or loop."""


class CodegenError(HeteroError):
    """A renderer cannot generate code for a function; the message names it and the construct."""


class CacheError(HeteroError):
    """The compile cache cannot key a compile (an option is not plain JSON data, a key is malformed)."""


class MemoryPlanError(HeteroError):
    """A memory plan does not fit its memory level, or was asked for with bad settings."""


class SimulationError(HeteroError):
    """A program for a simulated device faults (SRAM overflow, DRAM out of bounds, a race
    between engines, a bad operand, a corrupt encoding); the message names the instruction."""


class DeviceUnavailableError(HeteroError):
    """A backend's device is not on this machine (no GPU, no driver): its parts compile and
    save, but cannot run here."""


class OutputPathError(HeteroError):
    """A file hetero was asked to write cannot go where it was asked: a folder, something
    that is not a regular file (a FIFO, a device), or a folder it cannot write in."""


class QuantizationError(HeteroError):
    """A graph cannot be quantised as asked (already quantised, a tensor left uncalibrated,
    a calibration that is empty or malformed)."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest of ``choices``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
