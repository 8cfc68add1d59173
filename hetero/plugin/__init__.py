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
  :func:`constant_inputs`, :func:`attribute`, :func:`nonempty_outputs`.
- What a backend reads and declares: the graph IR (:class:`Graph`, :class:`Node`,
  :class:`Value`, :class:`TensorType`, :class:`GraphBuilder`), the pattern language
  (:class:`Op`, :class:`Var`, :class:`Const`, :class:`Match`), the memory
  hierarchy (:class:`MemoryHierarchy`, :class:`MemoryLevel`), an op's reference
  semantics (:func:`run_reference`), the canonical op names (:func:`op_names`),
  deterministic artifact archives (:func:`write_zip`, :func:`npz_bytes` and the
  bounded readers :func:`open_zip`, :func:`read_member`, :func:`member_view`, :func:`read_npz`)
  and the errors a plugin raises (:class:`PluginError`, :class:`CodegenError`,
  :class:`InputError`, with :func:`did_you_mean` for their messages).

The kit, for a backend that generates code (API 3): the tensor IR
(:mod:`hetero.plugin.tir`), lowering and the kernel-step plan (:mod:`hetero.plugin.lower`),
schedules and tuning (:mod:`hetero.plugin.schedule`), the shared LLVM emitters and the C
printer (:mod:`hetero.plugin.codegen`) and the step part with its compile loop
(:mod:`hetero.plugin.parts`). From this module too: the graph passes a backend runs on its
region (:func:`fuse_epilogues` is in :mod:`~hetero.plugin.lower`; :func:`block_layout`,
:func:`pads_groups`, :func:`rewrite` with :class:`Rule` and :class:`Opt`), memory planning
(:func:`analyze_step_liveness`, :func:`plan_arena`), index checks (:func:`index_checks`,
:func:`index_problem`), the artifact manifest helpers, GPU presets (:class:`GpuSpec`,
:data:`GPU_PRESETS`), a private folder for native code built on this machine
(:func:`private_folder`), progress and timing (:mod:`progress`, :mod:`timing`) and every
error a backend raises.
"""

from __future__ import annotations

from hetero.core import progress, timing
from hetero.core.exec.archive import (
    constants_member, member_view, npz_bytes, open_zip, read_constants, read_manifest, read_member, read_npz,
    write_zip,
)
from hetero.core.exec.device import HOST, CopiesFrom, Device, NumpyDevice, run_from_host, transfer
from hetero.core.exec.reference import run_reference
from hetero.core.ir import Graph, GraphBuilder, TensorType
from hetero.core.ir.graph import Node, Value, index_checks, saved_index_check
from hetero.core.ir.opdef import index_problem, op_names
from hetero.core.ir.ops.fixed_point import MAX_SHIFT, rounding_shift
from hetero.core.ir.pattern import Const, Match, Op, Opt, Var
from hetero.core.ir.types import as_dtype
from hetero.core.memory import (
    MemoryHierarchy, MemoryLevel, MemoryPlan, StepUse, analyze_step_liveness, format_bytes, plan_arena,
)
from hetero.core.partition.subgraph import extract_subgraph
from hetero.core.passes.layout import block_layout, pads_groups
from hetero.core.passes.rewrite import Rule, rewrite
from hetero.core.plugin.backend import (
    API_VERSION, Backend, CompiledPart, Pattern, Support, roofline, validate_backend,
)
from hetero.core.plugin.capabilities import (
    CountsKernels, DrawsTimeline, OnDevice, Profiles, RecordsTimeline, Reports, RunsIntermediates, device_of,
)
from hetero.core.plugin.gpus import GPU_PRESETS, GpuSpec
from hetero.core.plugin.hookspecs import hookimpl
from hetero.core.plugin.support import (
    Check, any_of, attribute, chain, check, constant_inputs, dtypes, max_rank, nonempty_outputs, ops,
)
from hetero.core.plugin.target import Declarations, Option, Target, bind
from hetero.core.runtime.cache import private_folder
from hetero.errors import (
    CodegenError, DamagedFileError, DeviceUnavailableError, HeteroError, InputError, MemoryPlanError, OptionError,
    PluginError, ScheduleError, ShapeError, SimulationError, did_you_mean,
)

__all__ = [
    "API_VERSION", "GPU_PRESETS", "HOST", "MAX_SHIFT", "Backend", "Check", "CodegenError", "CompiledPart", "Const",
    "CopiesFrom", "CountsKernels", "DamagedFileError", "Declarations", "Device", "DeviceUnavailableError",
    "DrawsTimeline", "GpuSpec", "Graph", "GraphBuilder", "HeteroError", "InputError", "Match", "MemoryHierarchy",
    "MemoryLevel", "MemoryPlan", "MemoryPlanError", "Node", "NumpyDevice", "OnDevice", "Op", "Option", "Opt",
    "OptionError", "Pattern", "PluginError", "Profiles", "RecordsTimeline", "Reports", "Rule", "RunsIntermediates",
    "ScheduleError", "ShapeError", "SimulationError", "StepUse", "Support", "Target", "TensorType", "Value", "Var",
    "analyze_step_liveness", "any_of", "as_dtype", "attribute", "bind", "block_layout", "chain", "check",
    "constant_inputs", "constants_member", "device_of", "did_you_mean", "dtypes", "extract_subgraph",
    "format_bytes", "hookimpl", "index_checks", "index_problem", "max_rank", "member_view", "nonempty_outputs",
    "npz_bytes", "op_names", "open_zip", "ops", "pads_groups", "plan_arena", "private_folder", "progress",
    "read_constants", "read_manifest", "read_member", "read_npz", "rewrite", "roofline", "rounding_shift",
    "run_from_host", "run_reference", "saved_index_check", "timing", "transfer", "validate_backend", "write_zip",
]
