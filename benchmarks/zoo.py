"""hetero's model zoo: real architectures exported from PyTorch, run by hetero (llvm_cpu)
and by onnxruntime, and compared.

Run: ``python benchmarks/zoo.py [--models SUBSTR[,SUBSTR]] [--exporter torchscript|dynamo]
[--axes static|dynamic] [--quick] [--quantize] [--out DIR] [--repeat N] [--timeout S]``
(needs the zoo extra: ``pip install -e '.[zoo]'``).

Every model is built with random weights (torchvision ``weights=None``, timm
``pretrained=False``, transformers from a small config made here), so nothing is
downloaded. Each is exported with both of ``torch.onnx.export``'s exporters
(``dynamo=False``, TorchScript, at opset 17; ``dynamo=True`` at opset 18, the lowest it
writes) with static shapes and with dynamic axes (batch for the CNNs, batch and sequence
for the text transformers, height and width for the detectors, which take one image).
Exports are cached under ``--out``, and so is an exporter's failure, so reruns skip both.

Each case runs in a child process of its own, so a hang or a crash in one (an exporter,
hetero's compiler, generated code) is a row, not the end of the zoo. hetero compiles
the file with ``hetero.compile(path, targets=["llvm_cpu"], num_threads=1)`` (a dynamic
export without ``input_shapes``, so hetero specialises at the first run of each shape),
onnxruntime runs it on one thread, both on two input sets (for a dynamic export, two
batch sizes / sequence lengths / image sizes). One markdown row per (model, exporter,
axes) goes to stdout: the export, import and compile+run stages, max |hetero - ort| and
max |ort| over all outputs and both input sets, the verdict (``ok`` when the difference
is within 1e-3 of max(1, max |ort|)), the median time ratio hetero / onnxruntime on the
first input set, and the first failure's exception class and message. Detectors'
outputs (boxes, scores, labels) depend on the data: they are compared by count first,
then by value. Progress goes to stderr.

``--quantize`` prints instead, for the CNNs and transformers, the cosine similarity of
``hetero.compile(..., targets=["npu_sim", "llvm_cpu"], quantize=<calibration inputs>)``'s
output to the float model's (onnxruntime's), on the static TorchScript export unless
``--exporter`` / ``--axes`` say otherwise.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402 - the thread limits must be set before numpy loads
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
import multiprocessing  # noqa: E402
from pathlib import Path  # noqa: E402
import queue  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from bench_ops import cpu_name  # noqa: E402
from timing import median_seconds, ort_session  # noqa: E402

EXPORTERS = ("torchscript", "dynamo")
AXES = ("static", "dynamic")
#: The opset each exporter is asked for: 17 where it can, 18 for dynamo, which writes no lower.
OPSET = {"torchscript": 17, "dynamo": 18}
#: How close hetero must come to onnxruntime, relative to the output's magnitude.
TOLERANCE = 1e-3
CALIBRATION_SAMPLES = 4

Inputs = dict[str, np.ndarray]


@dataclass(frozen=True)
class Spec:
    """One architecture: how to build it, feed it and which of its axes may vary.

    ``build`` returns an eval-mode module whose positional inputs are ``input_names``
    and whose outputs are ``output_names``; ``inputs(rng, variant)`` makes one input set
    (variant ``"static"``: the static export's shape; ``"a"`` and ``"b"``: the dynamic
    export's two shapes, ``"a"`` also the one it is traced at).
    """

    name: str
    family: str
    kind: str  # "cnn", "detector" or "transformer"
    config: str
    build: Callable[[], Any]
    inputs: Callable[[np.random.Generator, str], Inputs]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    dynamic_axes: dict[str, dict[int, str]]


@dataclass
class Row:
    """What one (model, exporter, axes) case came to; ``-`` where a stage did not run."""

    model: str
    config: str
    exporter: str
    axes: str
    export: str = "-"
    imported: str = "-"
    compiled: str = "-"
    max_diff: str = "-"
    max_ort: str = "-"
    verdict: str = "-"
    ratio: str = "-"
    cosine: str = "-"  # --quantize: the int8 model's lowest output cosine to the float one
    error: str = ""
    stage: str = "start"

    def fail(self, stage: str, exc: BaseException) -> None:
        """Record ``exc`` as the case's failure at ``stage``."""
        self.error = f"{stage}: {describe(exc)}"

    def markdown(self) -> str:
        cells = [self.model, self.config, self.exporter, self.axes, self.export, self.imported,
                 self.compiled, self.max_diff, self.max_ort, self.verdict, self.ratio, self.error]
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


HEADER = ("| model | config | exporter | axes | export | import | compile+run | max abs diff | "
          "max abs ort | verdict | time hetero/ort | first failure |\n" + "|---" * 12 + "|")


def describe(exc: BaseException) -> str:
    """An exception as the table shows it: its class and the first 100 characters of its
    message (terminal colours and line breaks removed)."""
    message = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())
    return f"{type(exc).__name__}: {message[:100]}"


def describe_export(exc: BaseException) -> str:
    """An exporter's failure: its own exception and, where it wraps one, the innermost
    cause (the dynamo exporter's own message is boilerplate; the cause names the op)."""
    cause = exc
    while cause.__cause__ is not None or (cause.__context__ is not None and not cause.__suppress_context__):
        cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
    return describe(exc) if cause is exc else f"{describe(exc)} <- {describe(cause)}"


# --- the architectures -----------------------------------------------------------------


def _image(size: int, batch_static: int = 1) -> Callable[[np.random.Generator, str], Inputs]:
    """Inputs ``x[B, 3, size, size]``: batch 1 static, 2 and 3 dynamic."""
    batches = {"static": batch_static, "a": 2, "b": 3}
    return lambda rng, variant: {"x": rng.standard_normal((batches[variant], 3, size, size)).astype(np.float32)}


def _detector_image(rng: np.random.Generator, variant: str) -> Inputs:
    """One image ``image[3, H, W]`` in [0, 1]: 320x320, and 256x384 for the dynamic export's second set."""
    height, width = (256, 384) if variant == "b" else (320, 320)
    return {"image": rng.random((3, height, width), dtype=np.float32)}


def _tokens(vocab: int) -> Callable[[np.random.Generator, str], Inputs]:
    """``input_ids`` and ``attention_mask`` (the second set's first row padded at its end),
    1x8 static, 2x8 and 3x16 dynamic."""
    shapes = {"static": (1, 8), "a": (2, 8), "b": (3, 16)}

    def make(rng: np.random.Generator, variant: str) -> Inputs:
        batch, length = shapes[variant]
        attention = np.ones((batch, length), dtype=np.int64)
        if variant == "b":
            attention[0, -5:] = 0
        return {"input_ids": rng.integers(0, vocab, (batch, length), dtype=np.int64), "attention_mask": attention}

    return make


def _audio(mels: int, frames: int) -> Callable[[np.random.Generator, str], Inputs]:
    """Whisper's log-mel features ``input_features[B, mels, frames]``."""
    batches = {"static": 1, "a": 2, "b": 3}
    return lambda rng, variant: {
        "input_features": rng.standard_normal((batches[variant], mels, frames)).astype(np.float32)}


def _torchvision(name: str, **kwargs: Any) -> Callable[[], Any]:
    def build() -> Any:
        import torch
        import torchvision

        model = torchvision.models.get_model(name, weights=None, **kwargs)
        for head in [m for m in model.modules() if isinstance(m, torch.nn.Linear)][-1:]:
            if not head.weight.any():  # vit_b_16's classifier starts at zero: its output would be 0
                torch.nn.init.normal_(head.weight, std=0.02)
        return model
    return build


def _segmentation(name: str) -> Callable[[], Any]:
    def build() -> Any:
        import torch
        import torchvision

        class Segmenter(torch.nn.Module):
            """The ``out`` map of a torchvision segmentation model (its forward returns a dict)."""

            def __init__(self) -> None:
                super().__init__()
                self.model = torchvision.models.get_model(name, weights=None, weights_backbone=None)

            def forward(self, x: Any) -> Any:
                return self.model(x)["out"]

        return Segmenter()
    return build


def _detector(name: str, **kwargs: Any) -> Callable[[], Any]:
    def build() -> Any:
        import torch
        import torchvision

        class Detector(torch.nn.Module):
            """boxes, scores and labels of one image (torchvision's detectors take a list
            of images and return a list of dicts)."""

            def __init__(self) -> None:
                super().__init__()
                self.model = torchvision.models.get_model(name, weights=None, weights_backbone=None, **kwargs)

            def forward(self, image: Any) -> Any:
                found = self.model([image])[0]
                return found["boxes"], found["scores"], found["labels"]

        return Detector()
    return build


def _timm(name: str) -> Callable[[], Any]:
    def build() -> Any:
        import timm

        return timm.create_model(name, pretrained=False)
    return build


def _transformers(make: Callable[[], Any], first: str) -> Callable[[], Any]:
    """A transformers model's first output (last hidden state, or GPT-2's logits), its
    input ``first`` (and ``attention_mask`` where given) taken positionally, so the
    exporters can name them."""
    def build() -> Any:
        import torch

        class FirstOutput(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = make()

            def forward(self, x: Any, attention_mask: Any = None) -> Any:
                masked = {} if attention_mask is None else {"attention_mask": attention_mask}
                return self.model(**{first: x}, **masked, return_dict=False)[0]

        return FirstOutput()
    return build


def _bert() -> Any:
    from transformers import BertConfig, BertModel

    return BertModel(BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=256, max_position_embeddings=64))


def _distilbert() -> Any:
    from transformers import DistilBertConfig, DistilBertModel

    return DistilBertModel(DistilBertConfig(vocab_size=1000, dim=128, n_layers=2, n_heads=4, hidden_dim=256,
                                            max_position_embeddings=64))


def _gpt2() -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=64,
                                      use_cache=False))


def _t5_encoder() -> Any:
    from transformers import T5Config, T5EncoderModel

    return T5EncoderModel(T5Config(vocab_size=1000, d_model=128, d_kv=32, d_ff=256, num_layers=2, num_heads=4))


def _whisper_encoder() -> Any:
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(vocab_size=1000, num_mel_bins=80, d_model=128, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                           decoder_ffn_dim=256, max_source_positions=100, max_target_positions=64,
                           pad_token_id=1, bos_token_id=2, eos_token_id=2, decoder_start_token_id=2)
    return WhisperModel(config).get_encoder()


def _vit() -> Any:
    from transformers import ViTConfig, ViTModel

    return ViTModel(ViTConfig(image_size=64, patch_size=8, hidden_size=128, num_hidden_layers=2,
                              num_attention_heads=4, intermediate_size=256))


def _cnn(name: str, family: str, build: Callable[[], Any], size: int = 224) -> Spec:
    return Spec(name, family, "cnn", f"random weights, {size}x{size}", build, _image(size), ("x",), ("y",),
                {"x": {0: "batch"}, "y": {0: "batch"}})


_TEXT_AXES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"},
              "y": {0: "batch", 1: "sequence"}}
_TEXT = ("input_ids", "attention_mask")
_DETECTION_AXES = {"image": {1: "height", 2: "width"}}
_DETECTION_OUT = ("boxes", "scores", "labels")


def _text(name: str, config: str, make: Callable[[], Any]) -> Spec:
    return Spec(name, "transformers", "transformer", config, _transformers(make, "input_ids"), _tokens(1000), _TEXT,
                ("y",), _TEXT_AXES)


SPECS: tuple[Spec, ...] = (
    *(_cnn(n, "torchvision classification", _torchvision(n)) for n in (
        "resnet18", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf", "convnext_tiny", "vit_b_16",
        "swin_t", "shufflenet_v2_x1_0", "densenet121")),
    # googlenet's aux heads and input transform stay off: they are training-time only.
    _cnn("googlenet", "torchvision classification",
         _torchvision("googlenet", aux_logits=False, init_weights=True, transform_input=False)),
    Spec("ssdlite320_mobilenet_v3_large", "torchvision detection", "detector", "random weights, 1 image 320x320",
         _detector("ssdlite320_mobilenet_v3_large"), _detector_image, ("image",), _DETECTION_OUT, _DETECTION_AXES),
    Spec("retinanet_resnet50_fpn", "torchvision detection", "detector",
         "random weights, min/max size 320, 1 image 320x320",
         _detector("retinanet_resnet50_fpn", min_size=320, max_size=320), _detector_image, ("image",),
         _DETECTION_OUT, _DETECTION_AXES),
    Spec("fasterrcnn_mobilenet_v3_large_320_fpn", "torchvision detection", "detector",
         "random weights, box_score_thresh 0.001, 1 image 320x320",
         # Random weights score every class near 1/91, under the default threshold of 0.05.
         _detector("fasterrcnn_mobilenet_v3_large_320_fpn", box_score_thresh=0.001), _detector_image,
         ("image",), _DETECTION_OUT, _DETECTION_AXES),
    *(Spec(n, "torchvision segmentation", "cnn", "random weights, 224x224", _segmentation(n), _image(224), ("x",),
           ("y",), {"x": {0: "batch"}, "y": {0: "batch"}})
      for n in ("lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50")),
    *(_cnn(n, "timm", _timm(n), size) for n, size in (
        ("mobilevit_xxs", 256), ("efficientvit_b0", 224), ("levit_128s", 224))),
    _text("bert", "BertConfig hidden 128, 2 layers, 4 heads, ffn 256, vocab 1000", _bert),
    _text("distilbert", "DistilBertConfig dim 128, 2 layers, 4 heads, ffn 256, vocab 1000", _distilbert),
    _text("gpt2", "GPT2Config n_embd 128, 2 layers, 4 heads, vocab 1000 (LM head logits)", _gpt2),
    _text("t5_encoder", "T5Config d_model 128, 2 layers, 4 heads, ffn 256, vocab 1000 (T5EncoderModel)",
          _t5_encoder),
    # Whisper's encoder checks that its input has exactly 2 * max_source_positions
    # frames, so only the batch is dynamic.
    Spec("whisper_encoder", "transformers", "transformer",
         "WhisperConfig d_model 128, 2 encoder layers, 4 heads, 80 mels x 200 frames",
         _transformers(_whisper_encoder, "input_features"), _audio(80, 200), ("input_features",), ("y",),
         {"input_features": {0: "batch"}, "y": {0: "batch"}}),
    Spec("vit_hf", "transformers", "transformer", "ViTConfig 64x64, patch 8, hidden 128, 2 layers, 4 heads",
         _transformers(_vit, "pixel_values"), _image(64), ("pixel_values",), ("y",),
         {"pixel_values": {0: "batch"}, "y": {0: "batch"}}),
)


def inputs_for(spec: Spec, variant: str, seed: int) -> Inputs:
    """``spec``'s input set ``variant`` with seed ``seed``, under the spec's input names."""
    made = spec.inputs(np.random.default_rng(seed), variant)
    return dict(zip(spec.input_names, made.values()))


# --- one case, in a child process --------------------------------------------------------


def export(spec: Spec, exporter: str, axes: str, folder: Path) -> tuple[Path, bool]:
    """``spec`` exported to ONNX under ``folder`` (reused when there), and whether it was
    cached. An exporter's failure is cached beside it and raised again as ``ExportError``."""
    path = folder / f"{spec.name}-{exporter}-{axes}.onnx"
    failed = path.with_suffix(".export-error")
    if path.exists():
        return path, True
    if failed.exists():
        raise ExportError(failed.read_text())
    import torch

    torch.manual_seed(0)
    module = spec.build().eval()
    example = inputs_for(spec, "static" if axes == "static" else "a", seed=0)
    args = tuple(torch.from_numpy(a) for a in example.values())
    options: dict[str, Any] = dict(input_names=list(spec.input_names), output_names=list(spec.output_names),
                                   opset_version=OPSET[exporter], dynamo=exporter == "dynamo")
    if axes == "dynamic" and exporter == "dynamo":
        # The dynamo exporter cannot turn dynamic_axes into torch.export's dynamic_shapes
        # for these models; the same axes as named Dims (one Dim per name) it can.
        dims = {n: torch.export.Dim(n) for axes_of in spec.dynamic_axes.values() for n in axes_of.values()}
        options["dynamic_shapes"] = tuple({axis: dims[n] for axis, n in spec.dynamic_axes.get(i, {}).items()}
                                          for i in spec.input_names)
    elif axes == "dynamic":
        options["dynamic_axes"] = spec.dynamic_axes
    folder.mkdir(parents=True, exist_ok=True)
    try:
        # nn.MultiheadAttention's fused inference path (aten::_native_multi_head_attention)
        # has no TorchScript export; users turn it off to export, as here.
        fastpath = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            with torch.no_grad():
                torch.onnx.export(module, args, str(path), **options)
        finally:
            torch.backends.mha.set_fastpath_enabled(fastpath)
    except Exception as exc:
        path.unlink(missing_ok=True)  # a half-written file is not a cached export
        failed.write_text(describe_export(exc))
        raise ExportError(describe_export(exc)) from exc
    return path, False


class ExportError(Exception):
    """torch's exporter raised (the message is its class and first 100 characters)."""


def compare(spec: Spec, ours: Inputs, theirs: Inputs) -> tuple[float, float]:
    """max |hetero - ort| and max |ort| over ``spec``'s outputs; a detector's outputs must
    first agree in count, any output in shape (``ValueError`` says which does not), and a
    detector's detections are matched as a set (:func:`match_detections`)."""
    if spec.kind == "detector":
        return match_detections(ours, theirs)
    diff = top = 0.0
    for name, want in theirs.items():
        got = ours[name]
        if got.shape != want.shape:
            what = "count" if spec.kind == "detector" else "shape"
            raise ValueError(f"{name}: hetero's {what} {got.shape} != onnxruntime's {want.shape}")
        if want.size:
            diff = max(diff, float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()))
            top = max(top, float(np.abs(want.astype(np.float64)).max()))
    return diff, top


def match_detections(ours: Inputs, theirs: Inputs, tolerance: float = 1e-3) -> tuple[float, float]:
    """max |hetero - ort| and max |ort| over boxes and scores, each of onnxruntime's
    detections matched with one of hetero's of the same label (the nearest box).

    Order is not compared: random weights score many boxes within a float32 rounding of
    each other, and two correct runs may list such near-ties in either order. Each box
    must lie within ``tolerance`` of the largest coordinate, each score within
    ``tolerance``; the counts must agree. ``ValueError`` names a detection that does not.
    """
    boxes, scores, labels = (np.asarray(ours[k], np.float64) for k in ("boxes", "scores", "labels"))
    want_boxes, want_scores, want_labels = (np.asarray(theirs[k], np.float64) for k in ("boxes", "scores", "labels"))
    if len(scores) != len(want_scores):
        raise ValueError(f"hetero found {len(scores)} detections, onnxruntime {len(want_scores)}")
    top = float(np.abs(want_boxes).max(initial=1.0))
    free = np.ones(len(scores), bool)
    diff = 0.0
    for i in np.argsort(-want_scores, kind="stable"):
        apart = np.abs(boxes - want_boxes[i]).max(axis=1, initial=0.0)
        apart[~free | (labels != want_labels[i])] = np.inf
        j = int(np.argmin(apart)) if len(apart) else -1
        if j < 0 or apart[j] > tolerance * top or abs(scores[j] - want_scores[i]) > tolerance:
            raise ValueError(f"onnxruntime's detection {i} (label {int(want_labels[i])}, score "
                             f"{want_scores[i]:.6g}) has no match in hetero's within {tolerance:g}")
        free[j] = False
        diff = max(diff, float(apart[j]), abs(float(scores[j] - want_scores[i])))
    return diff, top


def run_case(spec: Spec, exporter: str, axes: str, folder: Path, repeat: int, row: Row,
             report: Callable[[Row], None]) -> None:
    """Export, import, compile and compare one case, filling ``row`` stage by stage
    (``report`` sends it to the parent after each, so a timeout still shows where)."""
    import hetero
    from hetero.errors import DynamicShapeError

    def stage(name: str) -> None:
        row.stage = name
        report(row)
        print(f"  {spec.name} {exporter} {axes}: {name}", file=sys.stderr, flush=True)

    stage("export")
    path = _exported(spec, exporter, axes, folder, row)
    if path is None:
        return
    sets = ([inputs_for(spec, "static", 1), inputs_for(spec, "static", 2)] if axes == "static"
            else [inputs_for(spec, "a", 1), inputs_for(spec, "b", 2)])
    stage("onnxruntime")
    try:
        session = ort_session(str(path), 1)
        names = [o.name for o in session.get_outputs()]
        expected = [dict(zip(names, session.run(None, feeds))) for feeds in sets]
    except Exception as exc:
        row.fail("onnxruntime", exc)
        return
    stage("import")
    try:
        shapes = None if axes == "static" else {k: v.shape for k, v in sets[0].items()}
        hetero.load_onnx(str(path), shapes)
        row.imported = "ok"
    except DynamicShapeError:
        row.imported = "ok (specialises)"  # an operand computed from inputs: compile handles it
    except Exception as exc:
        row.imported = "FAIL"
        row.fail("import", exc)
        return
    stage("compile+run")
    try:
        exe = hetero.compile(str(path), targets=["llvm_cpu"], num_threads=1)
        got = [exe.run(feeds) for feeds in sets]
        row.compiled = "ok"
    except Exception as exc:
        row.compiled = "FAIL"
        row.fail("compile+run", exc)
        return
    stage("compare")
    try:
        results = [compare(spec, ours, theirs) for ours, theirs in zip(got, expected)]
    except ValueError as exc:
        row.verdict = "MISMATCH"
        row.fail("compare", exc)
        return
    diff, top = max(r[0] for r in results), max(r[1] for r in results)
    row.max_diff, row.max_ort = f"{diff:.2e}", f"{top:.2e}"
    row.verdict = "ok" if diff <= TOLERANCE * max(1.0, top) else "MISMATCH"
    if row.verdict != "ok":
        row.error = f"compare: max abs diff {diff:.2e} over {TOLERANCE:g} x max(1, {top:.2e})"
    if spec.kind == "detector":
        row.verdict += " (" + ", ".join(str(len(e["scores"])) for e in expected) + " detections)"
    stage("time")
    ours_s = median_seconds(lambda: exe.run(sets[0]), repeat)
    theirs_s = median_seconds(lambda: session.run(None, sets[0]), repeat)
    row.ratio = f"{ours_s / theirs_s:.2f}"


def _exported(spec: Spec, exporter: str, axes: str, folder: Path, row: Row) -> Path | None:
    """The case's exported file (``row.export`` says whether it was cached), or None
    with ``row.error`` saying how torch's exporter failed."""
    try:
        path, cached = export(spec, exporter, axes, folder)
    except ExportError as exc:
        row.export, row.error = "FAIL", f"export (torch): {exc}"
        return None
    row.export = "cached" if cached else "ok"
    return path


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two outputs, flattened (1 when both are zero)."""
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b / norms) if norms else 1.0


def quantize_case(spec: Spec, exporter: str, axes: str, folder: Path, row: Row,
                  report: Callable[[Row], None]) -> None:
    """Compile ``spec`` int8 for npu_sim and llvm_cpu, calibrated on seeded random inputs,
    and put the lowest cosine similarity of its outputs to onnxruntime's float ones in
    ``row.cosine``."""
    import hetero

    row.stage = "export"
    report(row)
    path = _exported(spec, exporter, axes, folder, row)
    if path is None:
        return
    variant = "static" if axes == "static" else "a"
    feeds = inputs_for(spec, variant, 1)
    calibration = [inputs_for(spec, variant, 100 + i) for i in range(CALIBRATION_SAMPLES)]
    session = ort_session(str(path), 1)
    expected = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    row.stage = "compile+run (quantised)"
    report(row)
    print(f"  {spec.name} {exporter} {axes}: quantise", file=sys.stderr, flush=True)
    try:
        exe = hetero.compile(str(path), targets=["npu_sim", "llvm_cpu"], quantize=calibration, num_threads=1)
        got = exe.run(feeds)
    except Exception as exc:
        row.compiled = "FAIL"
        row.fail("compile+run (quantised)", exc)
        return
    # A specialising executable (a dynamic export) has no one partition to count.
    placed = [c["placed"] for c in getattr(exe, "partition", {}).get("coverage", {}).values()]
    on_npu = sum(p.get("npu_sim", 0) for p in placed)
    row.compiled = f"ok, {on_npu}/{sum(sum(p.values()) for p in placed)} nodes on npu_sim" if placed else "ok"
    row.cosine = f"{min(cosine(got[n], want) for n, want in expected.items()):.4f}"


def _child(spec_name: str, exporter: str, axes: str, folder: str, repeat: int, quantize: bool,
           channel: Any) -> None:
    """A case in its own process: stdout goes to stderr, so only the parent writes the table."""
    sys.stdout = sys.stderr
    import torch

    torch.set_num_threads(1)
    spec = next(s for s in SPECS if s.name == spec_name)
    row = Row(spec.name, spec.config, exporter, axes)

    def report(current: Row) -> None:
        channel.put(("progress", current))

    try:
        if quantize:
            quantize_case(spec, exporter, axes, Path(folder), row, report)
        else:
            run_case(spec, exporter, axes, Path(folder), repeat, row, report)
    except Exception as exc:
        row.fail(row.stage, exc)
    channel.put(("done", row))


def run_isolated(spec: Spec, exporter: str, axes: str, folder: Path, repeat: int, quantize: bool,
                 timeout: float) -> Row:
    """One case in a fresh process, given ``timeout`` seconds; a crash or a timeout is the row's error."""
    context = multiprocessing.get_context("spawn")
    channel = context.Queue()
    process = context.Process(target=_child, args=(spec.name, exporter, axes, str(folder), repeat, quantize,
                                                   channel))
    process.start()
    row = Row(spec.name, spec.config, exporter, axes)
    deadline = time.monotonic() + timeout
    while True:
        try:
            kind, row = channel.get(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            if kind == "done":
                break
        except queue.Empty:
            if not process.is_alive():
                row.error = f"{row.stage}: the process died (exit code {process.exitcode})"
                break
            if time.monotonic() > deadline:
                process.kill()
                row.error = f"{row.stage}: timed out after {timeout:.0f} s"
                break
    process.join(timeout=10)
    return row


def select(args: argparse.Namespace) -> list[Spec]:
    """The specs ``--models`` and ``--quick`` pick (and ``--quantize``: CNNs and transformers)."""
    specs = list(SPECS)
    if args.models:
        wanted = [w.strip() for w in args.models.split(",") if w.strip()]
        specs = [s for s in specs if any(w in s.name for w in wanted)]
    if args.quick:
        seen: set[str] = set()
        specs = [s for s in specs if not (s.family in seen or seen.add(s.family))]
    if args.quantize:
        specs = [s for s in specs if s.kind in ("cnn", "transformer")]
    return specs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated substrings of model names")
    parser.add_argument("--exporter", choices=EXPORTERS, help="one exporter only (default: both)")
    parser.add_argument("--axes", choices=AXES, help="static or dynamic shapes only (default: both)")
    parser.add_argument("--quick", action="store_true", help="one model per family")
    parser.add_argument("--quantize", action="store_true",
                        help="int8 on npu_sim + llvm_cpu: cosine similarity to the float model")
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "hetero-zoo",
                        help="export cache (default ~/.cache/hetero-zoo)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per side (median)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for one case")
    parser.add_argument("--no-header", action="store_true", help="rows only (to append to a table)")
    args = parser.parse_args()
    import llvmlite.binding as llvm
    import torch

    folder = args.out / f"torch-{torch.__version__}"
    exporters = [args.exporter] if args.exporter else (["torchscript"] if args.quantize else list(EXPORTERS))
    axes_list = [args.axes] if args.axes else (["static"] if args.quantize else list(AXES))
    specs = select(args)
    cases = [(s, e, a) for s in specs for e in exporters for a in axes_list]
    if not args.no_header:
        print(f"CPU: {cpu_name()} (LLVM: {llvm.get_host_cpu_name()}), 1 thread, medians of {args.repeat} runs; "
              f"torch {torch.__version__}", flush=True)
        print()
        if args.quantize:
            print("| model | config | exporter | axes | export | compile+run (int8) | min cosine to float "
                  "| failure |\n" + "|---" * 8 + "|", flush=True)
        else:
            print(HEADER, flush=True)
    for index, (spec, exporter, axes) in enumerate(cases, 1):
        print(f"[{index}/{len(cases)}] {spec.name} {exporter} {axes}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        row = run_isolated(spec, exporter, axes, folder, args.repeat, args.quantize, args.timeout)
        if args.quantize:
            cells = [row.model, row.config, exporter, axes, row.export, row.compiled, row.cosine, row.error]
            print("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |", flush=True)
        else:
            print(row.markdown(), flush=True)
        print(f"[{index}/{len(cases)}] {spec.name} {exporter} {axes}: {time.perf_counter() - start:.0f} s "
              f"{row.error or 'ok'}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
