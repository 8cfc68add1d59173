"""The compiled part and its artifact: generated source, constants and interface in one zip.

The artifact is a zip of three members, each written with a fixed timestamp and in a
fixed order, so that compiling the same subgraph twice gives the same bytes:

- ``interface.json``: the format tag, the inputs (name, shape, dtype) and the outputs;
- ``kernel.py``: the generated source (:mod:`hetero_example_backend.codegen`);
- ``constants.npz``: the constants, ``c0``, ``c1``... in the order ``kernel`` reads them.

``numpy.savez`` stamps each member with the current time, so the ``.npz`` is written
here instead, with the same layout (one ``.npy`` file per array) and a fixed stamp.
Loading an artifact runs the Python code inside it: load only artifacts you trust,
as with any compiled code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import io
import json
import zipfile

import numpy as np

from hetero.plugin import InputError, PluginError, did_you_mean
from hetero_example_backend.codegen import ENTRY, Kernel

#: Tags the interface member, so that a foreign zip is refused with a clear message.
FORMAT = "hetero-example-backend/1"
#: The earliest time a zip can record; any fixed time would do.
_STAMP = (1980, 1, 1, 0, 0, 0)


def _zip(members: Sequence[tuple[str, bytes]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in members:
            archive.writestr(zipfile.ZipInfo(name, _STAMP), data)
    return buffer.getvalue()


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def pack(kernel: Kernel) -> bytes:
    """The artifact of ``kernel``: the same kernel always gives the same bytes."""
    interface = {"format": FORMAT, "inputs": kernel.inputs, "outputs": kernel.outputs}
    constants = _zip([(f"c{i}.npy", _npy(a)) for i, a in enumerate(kernel.constants)])
    return _zip([
        ("interface.json", json.dumps(interface, sort_keys=True).encode()),
        ("kernel.py", kernel.source.encode()),
        ("constants.npz", constants),
    ])


def unpack(artifact: bytes) -> Kernel:
    """The kernel packed in ``artifact``; PluginError if it is not an example artifact."""
    try:
        with zipfile.ZipFile(io.BytesIO(artifact)) as archive:
            interface = json.loads(archive.read("interface.json"))
            source = archive.read("kernel.py").decode()
            npz = archive.read("constants.npz")
        if interface.get("format") != FORMAT:
            raise ValueError(f"format is {interface.get('format')!r}, expected {FORMAT!r}")
        with np.load(io.BytesIO(npz), allow_pickle=False) as stored:
            constants = tuple(stored[f"c{i}"] for i in range(len(stored.files)))
    except (zipfile.BadZipFile, KeyError, ValueError, UnicodeDecodeError) as exc:
        raise PluginError(
            f"example: this is not an artifact of the example backend ({type(exc).__name__}: {exc}); "
            "recompile the model with this version of hetero-example-backend"
        ) from exc
    inputs = tuple((name, tuple(shape), dtype) for name, shape, dtype in interface["inputs"])
    return Kernel(source, constants, inputs, tuple(interface["outputs"]))


class ExamplePart:
    """A compiled subgraph: ``run`` calls the generated function on checked inputs."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.inputs = tuple(name for name, _, _ in kernel.inputs)
        self.outputs = kernel.outputs
        self.artifact = pack(kernel)
        namespace: dict[str, object] = {}
        exec(compile(kernel.source, "<hetero-example-backend kernel>", "exec"), namespace)  # noqa: S102 - the compiled program
        self._function = namespace[ENTRY]

    @property
    def source(self) -> str:
        """The generated Python source, to read or to dump."""
        return self.kernel.source

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on ``inputs`` (name → array); InputError for a missing, unknown or mistyped one."""
        unknown = [n for n in inputs if n not in self.inputs]
        if unknown:
            raise InputError(f"example part has no input {unknown[0]!r}"
                             f"{did_you_mean(unknown[0], self.inputs)}; its inputs are {list(self.inputs)}")
        missing = [n for n in self.inputs if n not in inputs]
        if missing:
            raise InputError(f"example part: missing input(s) {missing}; pass each as a numpy array")
        arrays = []
        for name, shape, dtype in self.kernel.inputs:
            array = np.asarray(inputs[name])
            if array.dtype.name != dtype or array.shape != shape:
                raise InputError(
                    f"example part: input {name!r} must be {dtype}{list(shape)}, got "
                    f"{array.dtype.name}{list(array.shape)}; pass it as np.{dtype} of that shape"
                )
            arrays.append(array)
        results = self._function(*arrays, self.kernel.constants)
        return dict(zip(self.outputs, results, strict=True))
