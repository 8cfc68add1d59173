"""``hetero.compile``: from a model to an :class:`~hetero.core.runtime.executable.Executable`.

The steps: import (ONNX path, ModelProto or Graph), optimise, ask the target backend
whether it takes every node, compile, and wrap the compiled part with its interface.
Partitioning one model across several backends is the partitioner's job
(``hetero/core/partition``); until it lands, one target compiles the whole graph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import os
from pathlib import Path
from typing import Any

import onnx

from hetero.core.frontend import load_onnx
from hetero.core.ir.graph import Graph
from hetero.core.passes.pipeline import optimize
from hetero.core.plugin.manager import get_backend
from hetero.core.runtime.cache import open_cache
from hetero.core.runtime.executable import Executable, Interface, Placement
from hetero.errors import HeteroError, UnsupportedOpError


def compile_model(
    model: str | os.PathLike[str] | onnx.ModelProto | Graph,
    targets: Sequence[str] = ("llvm_cpu",),
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    passes: Sequence[str] | None = None,
    dump: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Executable:
    """Compile ``model`` for ``targets`` and return an executable.

    ``passes`` replaces the default optimisation pipeline (``[]`` runs none);
    ``dump`` names a folder that receives every stage (the graph after passes here,
    each backend's own stages under a folder of its name). Other keyword options go
    to the backends, which ignore what is not theirs. ``cache`` names a compile-cache
    folder (by default ``$HETERO_CACHE_DIR`` when set): a part compiled before with the
    same graph, backend version and options is loaded from it instead of compiled.

    >>> exe = hetero.compile("resnet50.onnx", targets=["llvm_cpu"])   # doctest: +SKIP
    >>> outputs = exe.run({"data": x})                                # doctest: +SKIP
    """
    graph = model if isinstance(model, Graph) else load_onnx(model, input_shapes)
    graph = optimize(graph, passes)
    if isinstance(targets, str):
        targets = [targets]
    if len(targets) != 1:
        raise HeteroError(
            f"targets {list(targets)}: splitting one model across several backends needs the "
            "partitioner, which hetero does not have yet; compile for one target"
        )
    backend = get_backend(targets[0])
    refused = [(n, backend.supports(n)) for n in graph.nodes]
    refused = [(n, s) for n, s in refused if not s.ok]
    if refused:
        listed = "; ".join(f"{n.name} ({n.op}): {s.reason}" for n, s in refused[:10])
        more = f" and {len(refused) - 10} more" if len(refused) > 10 else ""
        raise UnsupportedOpError(
            f"backend {backend.name} refuses {len(refused)} node(s) of {graph.name}: {listed}{more}"
        )
    backend_options = dict(options)
    if dump is not None:
        folder = Path(dump)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "graph.txt").write_text(str(graph) + "\n")
        backend_options["dump_dir"] = str(folder / backend.name)
    store = open_cache(cache)
    # A dump asks for every stage, and only a real compile writes them.
    if store is None or dump is not None:
        part = backend.compile(graph, backend_options)
    else:
        part = store.compile(graph, backend, backend_options)
    return Executable(graph.name, Interface.of(graph), [Placement(backend.name, backend.version, part)])
