"""What the model-taking subcommands share: their arguments, and one way to read a model.

Every command that takes a model (``inspect``, ``compile``, ``run``, ``partition``,
``compare``) gets its model arguments from :func:`add_model_arguments` and reads the
model through :func:`load_graph` (import, random weights, passes) and
:func:`prepare_graph` (quantisation and lowering for the targets, as
``hetero.compile`` does). So the nodes every command shows carry the same names, and a
node name read from one command's output works in another's ``--override``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hetero.errors import HeteroError


class UsageError(HeteroError):
    """A malformed command-line argument."""


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and the options that say how to read it, the same for every model-taking
    command: the input shapes, the element budget, random weights, the graph passes and
    quantisation. ``--quiet`` turns the progress display off."""
    parser.add_argument("model", help="an .onnx file, or light:NAME for a model onnx ships "
                        "(light:resnet50, light:squeezenet, ...)")
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=D,D,...",
                        help="fix a dynamic input shape, e.g. input=1,3,224,224")
    parser.add_argument("--input-value", action="append", default=[], metavar="NAME=V,V,...",
                        help="bind an input that sets an operand (axes, pads, a shape, k) to a "
                        "value, e.g. axes=1,2; it is compiled in as a constant")
    parser.add_argument("--max-elements", type=int, default=None,
                        help="element budget of any one tensor (default 2**30)")
    parser.add_argument("--random-weights", type=int, metavar="SEED",
                        help="replace the model's weights by seeded random ones first")
    parser.add_argument("--no-optimize", action="store_true", help="skip the graph passes")
    add_quantize_arguments(parser)
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="show no progress (it shows only on a terminal anyway)")


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """--input and --seed: the arrays a model runs on."""
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                        help="an input array (default: seeded standard-normal data)")
    parser.add_argument("--seed", type=int, default=0, help="seed of generated inputs")


def add_placement_arguments(parser: argparse.ArgumentParser, extra: str = "") -> None:
    """--targets, --policy and --override."""
    parser.add_argument("--targets", default="llvm_cpu",
                        help="comma-separated backends in priority order; the fallback (the first "
                             f"backend that takes every op, llvm_cpu as installed) is added{extra}")
    parser.add_argument("--policy", choices=["priority", "cost"], default="priority",
                        help="first target that takes a node, or least estimated time (default priority)")
    parser.add_argument("--override", action="append", default=[], metavar="NODE_OR_OP=BACKEND",
                        help="pin a node (by name) or every node of an op type to a backend")
    parser.add_argument("-O", "--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a backend's compile option (e.g. npu_sram_kib=64; `hetero plugins BACKEND` "
                             "lists them); goes to the targets that declare it")


def add_quantize_arguments(parser: argparse.ArgumentParser) -> None:
    """--quantize and its calibration options."""
    parser.add_argument("--quantize", action="store_true",
                        help="post-training int8 quantisation after the graph passes (npu_sim computes int8 only)")
    parser.add_argument("--calibrate", type=int, default=8, metavar="N",
                        help="with --quantize: calibrate on N seeded standard-normal inputs (default 8)")
    parser.add_argument("--calibration-data", metavar="FILE.npz",
                        help="with --quantize: calibrate on these inputs instead (one array per input "
                             "name, samples along the first axis)")
    parser.add_argument("--calibration-method", choices=["minmax", "percentile"], default="minmax",
                        help="with --quantize: how tensor ranges are taken (default minmax)")


def quantize_options(args: argparse.Namespace, graph: Any) -> dict[str, object]:
    """``hetero.compile``'s quantize= and calibration_method=, from the command line."""
    import numpy as np

    if not args.quantize:
        if args.calibration_data:
            raise UsageError("--calibration-data calibrates a quantisation: give --quantize too")
        return {}
    inputs = graph.inputs
    if args.calibration_data:
        try:
            with np.load(args.calibration_data) as data:
                arrays = {name: data[name] for name in data.files}
        except (OSError, ValueError) as exc:
            raise UsageError(f"--calibration-data {args.calibration_data}: cannot read it: {exc}") from None
        missing = [v.name for v in inputs if v.name not in arrays]
        if missing:
            raise UsageError(f"--calibration-data {args.calibration_data} holds no array for input(s) "
                             f"{', '.join(missing)}; it has {', '.join(arrays) or 'none'}")
        count = min(len(arrays[v.name]) for v in inputs)
        samples = [{v.name: arrays[v.name][i] for v in inputs} for i in range(count)]
    else:
        if args.calibrate < 1:
            raise UsageError(f"--calibrate {args.calibrate}: calibrate on at least one input")
        # Seeds away from --seed, so the run's own input is not among the calibration samples.
        rng = np.random.default_rng(10_000 + getattr(args, "seed", 0))
        samples = [{v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in inputs}
                   for _ in range(args.calibrate)]
    return {"quantize": samples, "calibration_method": args.calibration_method}


def session(args: argparse.Namespace, graph: Any, **options: Any) -> Any:
    """The compile driver (:class:`~hetero.core.compiler.Session`) the command line asks
    for: its targets, placement and quantisation (calibrated on ``graph``'s inputs), and
    the backend ``options``; what ``hetero.compile`` itself would build."""
    from hetero.core.compiler import Session

    return Session(target_names(args), strict=getattr(args, "strict", False), **placement(args),
                   **quantize_options(args, graph), options={**backend_options(args), **options})


def prepared(args: argparse.Namespace, graph: Any) -> Any:
    """``graph`` quantised as --quantize asks, as ``hetero.compile`` does before it
    partitions (no target's integer lowering: for ``hetero inspect``)."""
    from hetero.core.quant.flow import prepare_for_targets

    options = quantize_options(args, graph)
    return prepare_for_targets(graph, [], None, options.get("quantize"),  # type: ignore[arg-type]
                               options.get("calibration_method", "minmax"))  # type: ignore[arg-type]


def backend_options(args: argparse.Namespace) -> dict[str, object]:
    """The --option NAME=VALUE items as compile options: ``true``/``false`` are booleans,
    integers and decimals numbers, anything else a string."""
    from hetero.core.plugin.target import parse_option_value

    options: dict[str, object] = {}
    for item in getattr(args, "option", ()):
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--option {item!r}: write NAME=VALUE (e.g. npu_sram_kib=64)")
        options[name] = parse_option_value(text)
    return options


def placement(args: argparse.Namespace) -> dict[str, object]:
    """The compile/partition keywords the placement arguments ask for."""
    overrides = {}
    for item in args.override:
        key, sep, backend = item.partition("=")
        if not sep or not key or not backend:
            raise UsageError(f"--override {item!r}: write NODE_OR_OP=BACKEND (e.g. Conv=npu_sim)")
        overrides[key] = backend
    return {"policy": args.policy, "overrides": overrides}


def model_source(args: argparse.Namespace, proto: bool = False) -> Any:
    """The model the command line names: its path, or its ModelProto when ``proto`` is set
    or ``--random-weights`` replaced its weights."""
    from hetero.core.frontend.light import resolve_model
    from hetero.core.frontend.onnx import randomize_weights
    from hetero.core.frontend.onnx.loader import read_model

    path = resolve_model(args.model)
    if args.random_weights is None and not proto:
        return path
    model = read_model(path).model
    return model if args.random_weights is None else randomize_weights(model, args.random_weights)


def import_graph(args: argparse.Namespace, source: Any = None) -> Any:
    """The model imported as the command line asks (input shapes, element budget, random
    weights); ``source`` is the path or ModelProto from :func:`model_source`."""
    import hetero

    options = {} if args.max_elements is None else {"max_elements": args.max_elements}
    source = model_source(args) if source is None else source
    with stage("import"):
        return hetero.load_onnx(source, parse_shapes(args.input_shape),
                                input_values=parse_values(args.input_value), **options)


def load_graph(args: argparse.Namespace, source: Any = None) -> Any:
    """:func:`import_graph`, then :func:`optimized`: the graph whose node names every
    command shows."""
    return optimized(args, import_graph(args, source))


def optimized(args: argparse.Namespace, graph: Any) -> Any:
    """``graph`` after the graph passes, unless ``--no-optimize``."""
    import hetero

    if args.no_optimize:
        return graph
    with stage("optimise"):
        return hetero.optimize(graph)


def target_names(args: argparse.Namespace) -> list[str]:
    """The names --targets lists."""
    return [t for t in args.targets.split(",") if t]


def stage(name: str) -> Any:
    """A context that shows ``name`` as the current stage on the progress display."""
    from hetero.core import progress

    return progress.stage(name)


def parse_values(items: Sequence[str]) -> dict[str, list[float]] | None:
    """--input-value NAME=V,V,... items as load_onnx's input_values (a 1-D list each;
    ``NAME=`` is an empty one). Integers stay integers, so an int64 input takes them."""
    values: dict[str, list[float]] = {}
    for item in items:
        name, sep, text = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            values[name] = [_number(v) for v in text.split(",")] if text else []
        except ValueError:
            raise UsageError(f"--input-value {item!r}: write NAME=V,V,... (e.g. axes=1,2)") from None
    return values or None


def _number(text: str) -> float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def parse_shapes(items: Sequence[str]) -> dict[str, list[int]] | None:
    """--input-shape NAME=D,D,... items as load_onnx's input_shapes."""
    shapes = {}
    for item in items:
        name, sep, dims = item.rpartition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise UsageError(f"--input-shape {item!r}: write NAME=D,D,... (e.g. input=1,3,224,224)") from None
    return shapes or None


def make_inputs(graph: Any, args: argparse.Namespace) -> dict[str, object]:
    """The --input arrays, and seeded standard-normal data for the inputs not given."""
    import numpy as np

    given = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--input {item!r}: write NAME=FILE.npy")
        given[name] = _read_array(name, path)
    from hetero.core.frontend.onnx.budget import DEFAULT_MAX_ELEMENTS

    rng = np.random.default_rng(args.seed)
    missing = [v for v in graph.inputs if v.name not in given]
    budget = getattr(args, "max_elements", None) or DEFAULT_MAX_ELEMENTS
    total = sum(int(np.prod(v.shape, dtype=np.int64)) for v in missing)
    if total > budget:
        raise UsageError(f"random inputs for {', '.join(v.name for v in missing)} would take {total} elements, "
                         f"above the budget of {budget} (--max-elements); pass them with --input NAME=FILE.npy")
    for v in missing:
        try:
            given[v.name] = _random_array(rng, v.shape, v.dtype)
        except MemoryError:
            raise UsageError(f"not enough memory for a random input {v.name} of shape {list(v.shape)}; pass it "
                             "with --input NAME=FILE.npy") from None
    return given


def _random_array(rng: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """Seeded standard-normal floats (0 or 1 for other types), made in ``dtype`` (float32
    for narrower floats) rather than through float64."""
    import numpy as np

    if dtype.kind == "f" or dtype.name == "bfloat16":
        wide = dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)
        data = rng.standard_normal(shape, dtype=wide)
        return data if data.dtype == dtype else data.astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 2, shape, dtype=dtype)
    return rng.integers(0, 2, shape).astype(dtype)


def _read_array(name: str, path: str) -> Any:
    """The array in the .npy file ``path``; a UsageError naming --input when it cannot be read."""
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"--input {name}={path}: no such file") from None
    except (OSError, ValueError, EOFError) as exc:
        if not isinstance(exc, OSError) and not _is_numpy_file(path):
            raise UsageError(f"--input {name}={path}: is not a .npy or .npz file (numpy's files start with "
                             "\\x93NUMPY or are zip archives); save the array with np.save") from None
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else " ".join(str(exc).split())
        raise UsageError(f"--input {name}={path}: cannot read it as a .npy array: {why}") from None
    if not isinstance(array, np.ndarray):
        array.close()
        raise UsageError(f"--input {name}={path}: holds several arrays (.npz); save the one input with np.save")
    return array


def _is_numpy_file(path: str) -> bool:
    """Whether ``path`` starts as a .npy file (the magic string) or an .npz (a zip) does."""
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError:
        return True  # let numpy's own error speak
    return head == b"\x93NUMPY" or head.startswith(b"PK")


def write_text(path: str, text: str, flag: str) -> None:
    """Write ``text`` to ``path``; a UsageError naming ``flag`` when it cannot be written."""
    from hetero.core.exec.archive import write_atomically
    from hetero.errors import OutputPathError

    try:
        write_atomically(path, text.encode("utf-8"))  # checks the path first (output_problem)
    except OutputPathError as exc:
        raise UsageError(f"{flag} {exc}") from None
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write it: {exc.strerror}") from None


def check_writable(path: str, flag: str) -> None:
    """A UsageError naming ``flag`` when ``path`` cannot be written; called before the work
    whose result goes there, so a typo costs no compile."""
    from hetero.core.exec.archive import output_problem

    problem = output_problem(path)
    if problem is not None:
        raise UsageError(f"{flag} {path}: {problem}")
