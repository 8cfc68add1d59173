"""hetero: a deep-learning compiler framework that splits a model across backend plugins.

The public face::

    import hetero
    graph = hetero.load_onnx("model.onnx")
    graph = hetero.optimize(graph)
    outputs = hetero.run_reference(graph, {"input": array})
"""

from hetero import errors
from hetero._version import __version__
from hetero.core.compiler import compile_model as compile
from hetero.core.exec.reference import run_reference
from hetero.core.frontend import load_onnx
from hetero.core.ir import Graph, GraphBuilder, TensorType, verify
from hetero.core.passes.pipeline import optimize
from hetero.core.runtime.executable import Executable, load, trust

__all__ = [
    "Executable", "Graph", "GraphBuilder", "TensorType", "compile", "errors", "load", "load_onnx",
    "optimize", "run_reference", "trust", "verify",
]
