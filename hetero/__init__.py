"""hetero: a deep-learning compiler framework that splits a model across backend plugins.

The public face::

    import hetero
    graph = hetero.load_onnx("model.onnx")
    graph = hetero.optimize(graph)
    outputs = hetero.run_reference(graph, {"input": array})

The names below are imported on first use (PEP 562), so ``import hetero`` and the
command line's ``--version`` and ``--help`` do not pay for onnx, numpy's extensions or
the compiler until something asks for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hetero._version import __version__

#: Each public name and the module it comes from (``name`` there unless renamed).
_LAZY = {
    "Executable": ("hetero.core.runtime.executable", "Executable"),
    "Graph": ("hetero.core.ir", "Graph"),
    "GraphBuilder": ("hetero.core.ir", "GraphBuilder"),
    "TensorType": ("hetero.core.ir", "TensorType"),
    "compile": ("hetero.core.compiler", "compile_model"),
    "errors": ("hetero.errors", None),
    "load": ("hetero.core.runtime.executable", "load"),
    "load_onnx": ("hetero.core.frontend", "load_onnx"),
    "optimize": ("hetero.core.passes.pipeline", "optimize"),
    "run_reference": ("hetero.core.exec.reference", "run_reference"),
    "trust": ("hetero.core.runtime.executable", "trust"),
    "verify": ("hetero.core.ir", "verify"),
}

__all__ = sorted(_LAZY)

if TYPE_CHECKING:
    from hetero import errors
    from hetero.core.compiler import compile_model as compile
    from hetero.core.frontend import load_onnx
    from hetero.core.ir import Graph, GraphBuilder, TensorType, verify
    from hetero.core.passes.pipeline import optimize
    from hetero.core.runtime.executable import Executable, load, trust
    from hetero.core.exec.reference import run_reference


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'hetero' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value  # found once: later reads are plain attribute lookups
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
