"""Everything a backend author needs, from one module: ``from hetero.plugin import ...``.

This facade is the plugin contract. Its names keep their meaning within an
:data:`API_VERSION`; what lies under ``hetero.core`` may move between releases, so a
plugin imports from here only (the example plugin under ``examples/`` does, and the
guide, ``docs/plugin-guide.md``, walks through it).

- Registration: :data:`hookimpl` marks the ``hetero_backends`` hook a plugin module
  implements; :func:`validate_backend` is what the plugin manager checks.
- The contract: :class:`Backend` (its declarations and hooks), :class:`Support`,
  :class:`Pattern`, :class:`CompiledPart` and the optional part capabilities
  (:class:`RunsIntermediates`, :class:`Reports`, :class:`DrawsTimeline`,
  :class:`RecordsTimeline`, :class:`Profiles`, :class:`CountsKernels`,
  :class:`OnDevice`).
- Devices, after ONNX Runtime's allocator and ``IDataTransfer``: :class:`Device`
  (allocate, copy in, copy out), :class:`CopiesFrom` (device to device),
  :class:`NumpyDevice` and :data:`HOST`; a part that is :class:`OnDevice` takes and
  returns its device's arrays, and the executable moves values between devices
  (:func:`transfer`; :func:`device_of` a part's device, :func:`run_from_host` a part
  run on host arrays, as the conformance suite runs it).
- Targets: :class:`Option` (a compile option a backend declares), :class:`Target`
  (the backend bound to the user's options, which every hook receives),
  :class:`Declarations` (what :meth:`Backend.declare` returns) and :func:`bind`.
- Support combinators after torch.fx's ``OperatorSupport``: :func:`chain`,
  :func:`any_of`, :func:`check`, :func:`ops`, :func:`dtypes`, :func:`max_rank`,
  :func:`constant_inputs`, :func:`attribute`.
- What a backend reads and declares: the graph IR (:class:`Graph`, :class:`Node`,
  :class:`Value`, :class:`TensorType`, :class:`GraphBuilder`), the pattern language
  (:class:`Op`, :class:`Var`, :class:`Const`, :class:`Match`), the memory
  hierarchy (:class:`MemoryHierarchy`, :class:`MemoryLevel`), an op's reference
  semantics (:func:`run_reference`), the canonical op names (:func:`op_names`),
  deterministic artifact archives (:func:`write_zip`, :func:`npz_bytes` and the
  bounded readers :func:`open_zip`, :func:`read_member`, :func:`member_view`, :func:`read_npz`)
  and the errors a plugin raises (:class:`PluginError`, :class:`CodegenError`,
  :class:`InputError`, with :func:`did_you_mean` for their messages).
"""

from __future__ import annotations

from hetero.core.ir import Graph, GraphBuilder, TensorType
from hetero.core.ir.graph import Node, Value
from hetero.core.ir.opdef import op_names
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.passes.pattern import Const, Match, Op, Var
from hetero.core.plugin.backend import API_VERSION, Backend, CompiledPart, Pattern, Support, validate_backend
from hetero.core.plugin.capabilities import (
    CountsKernels, DrawsTimeline, OnDevice, Profiles, RecordsTimeline, Reports, RunsIntermediates, device_of,
)
from hetero.core.plugin.hookspecs import hookimpl
from hetero.core.plugin.support import (
    Check, any_of, attribute, chain, check, constant_inputs, dtypes, max_rank, ops,
)
from hetero.core.plugin.target import Declarations, Option, Target, bind
from hetero.core.runtime.archive import member_view, npz_bytes, open_zip, read_member, read_npz, write_zip
from hetero.core.runtime.device import HOST, CopiesFrom, Device, NumpyDevice, run_from_host, transfer
from hetero.core.runtime.reference import run_reference
from hetero.errors import CodegenError, InputError, PluginError, did_you_mean

__all__ = [
    "API_VERSION", "HOST", "Backend", "Check", "CodegenError", "CompiledPart", "Const", "CopiesFrom",
    "CountsKernels", "Declarations", "Device", "DrawsTimeline", "Graph", "GraphBuilder", "InputError", "Match", "MemoryHierarchy", "MemoryLevel",
    "Node", "NumpyDevice", "OnDevice", "Op", "Option", "Pattern", "PluginError", "Profiles",
    "RecordsTimeline", "Reports", "RunsIntermediates", "Support", "Target", "TensorType", "Value", "Var", "any_of", "attribute", "bind",
    "chain", "check", "constant_inputs", "did_you_mean", "device_of", "dtypes", "hookimpl", "max_rank", "member_view", "npz_bytes", "op_names", "open_zip", "ops", "read_member", "read_npz",
    "run_from_host", "run_reference", "transfer",
    "validate_backend", "write_zip",
]
