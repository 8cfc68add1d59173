"""A slice of the model zoo (benchmarks/zoo.py): models exported from PyTorch with random
weights, compiled by hetero for llvm_cpu and compared with onnxruntime on the same file.

One CNN (resnet18 at 64x64 with a dynamic batch, run at batch 1, 2 and 8), one
transformer (a two-layer BERT with dynamic batch and sequence, run at two sequence
lengths, from both exporters) and one detector (ssdlite320 on two images, whose boxes
depend on the data: compared by count, then matched as a set).
"""

from __future__ import annotations

from pathlib import Path
import sys
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the zoo tests need the zoo extra: pip install -e '.[zoo]'")
torchvision = pytest.importorskip("torchvision", reason="the zoo tests need the zoo extra: pip install -e '.[zoo]'")
transformers = pytest.importorskip("transformers",
                                   reason="the zoo tests need the zoo extra: pip install -e '.[zoo]'")
ort = pytest.importorskip("onnxruntime")

import hetero  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from zoo import match_detections  # noqa: E402

pytestmark = pytest.mark.slow


def _export(module: Any, args: tuple[Any, ...], path: Path, inputs: list[str], outputs: list[str],
            dynamo: bool = False, **axes: Any) -> Path:
    """``module`` (eval mode, seeded) exported to ``path``: opset 17 through TorchScript,
    18 through dynamo (the lowest it writes)."""
    with torch.no_grad():
        torch.onnx.export(module.eval(), args, str(path), input_names=inputs, output_names=outputs,
                          opset_version=18 if dynamo else 17, dynamo=dynamo, **axes)
    return path


def _onnxruntime(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def _assert_close(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    """Every output within float32 rounding of onnxruntime's: relative 1e-3, and an
    absolute floor of 1e-4 of the output's largest magnitude (sums over hundreds of
    products in another order)."""
    assert set(got) >= set(want)
    for name, expected in want.items():
        floor = 1e-4 * max(1.0, float(np.abs(expected).max(initial=0.0)))
        np.testing.assert_allclose(got[name], expected, rtol=1e-3, atol=floor, err_msg=name)


def test_resnet18_with_a_dynamic_batch_runs_at_batch_1_2_and_8(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    path = _export(model, (torch.from_numpy(x),), tmp_path / "resnet18.onnx", ["x"], ["y"],
                   dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    exe = hetero.compile(str(path), targets=["llvm_cpu"])  # one compile call, specialised per batch
    for batch in (1, 2, 8):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 64, 64)).astype(np.float32)
        got = exe.run({"x": x})
        assert got["y"].shape == (batch, 1000)
        _assert_close(got, _onnxruntime(path, {"x": x}))
    assert exe.compiled == 3


class _Bert(torch.nn.Module):
    """A two-layer BERT's last hidden state, from a config made here (nothing downloaded)."""

    def __init__(self) -> None:
        super().__init__()
        config = transformers.BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, intermediate_size=256,
                                         max_position_embeddings=64)
        self.model = transformers.BertModel(config)

    def forward(self, input_ids: Any, attention_mask: Any) -> Any:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]


def _tokens(batch: int, length: int, seed: int) -> dict[str, np.ndarray]:
    """Random ids and a mask whose first row is padded over its last two tokens."""
    mask = np.ones((batch, length), dtype=np.int64)
    mask[0, -2:] = 0
    ids = np.random.default_rng(seed).integers(0, 1000, (batch, length), dtype=np.int64)
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
def test_bert_with_dynamic_batch_and_sequence_matches_onnxruntime(tmp_path: Path, dynamo: bool) -> None:
    torch.manual_seed(0)
    example = _tokens(2, 8, seed=0)
    args = tuple(torch.from_numpy(a) for a in example.values())
    if dynamo:
        batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
        axes: dict[str, Any] = {"dynamic_shapes": ({0: batch, 1: sequence}, {0: batch, 1: sequence})}
    else:
        dims = {0: "batch", 1: "sequence"}
        axes = {"dynamic_axes": {"input_ids": dims, "attention_mask": dims, "y": dims}}
    path = _export(_Bert(), args, tmp_path / "bert.onnx", list(example), ["y"], dynamo, **axes)
    # No input_shapes: hetero specialises on each shape it is run with.
    exe = hetero.compile(str(path), targets=["llvm_cpu"])
    for batch_size, length in ((2, 8), (3, 16)):
        feeds = _tokens(batch_size, length, seed=length)
        got = exe.run(feeds)
        assert got["y"].shape == (batch_size, length, 128)
        _assert_close(got, _onnxruntime(path, feeds))


class _Detector(torch.nn.Module):
    """ssdlite320's boxes, scores and labels for one image."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)

    def forward(self, image: Any) -> Any:
        found = self.model([image])[0]
        return found["boxes"], found["scores"], found["labels"]


@pytest.mark.parametrize("seed", [0, 1])
def test_ssdlite320_detections_match_onnxruntime(tmp_path: Path, seed: int) -> None:
    torch.manual_seed(0)
    image = np.random.default_rng(seed).random((3, 320, 320), dtype=np.float32)
    path = _export(_Detector(), (torch.from_numpy(image),), tmp_path / "ssdlite.onnx", ["image"],
                   ["boxes", "scores", "labels"])
    exe = hetero.compile(str(path), targets=["llvm_cpu"])
    got, want = exe.run({"image": image}), _onnxruntime(path, {"image": image})
    assert len(want["scores"]) > 0  # random weights still find boxes over the 0.001 threshold
    for name in ("boxes", "scores", "labels"):
        assert got[name].shape == want[name].shape, f"{name}: hetero found a different count"
    # Every detection matched, in any order (near-tied scores may swap): boxes within a
    # thousandth of the largest coordinate (320 pixels), scores within 1e-3.
    diff, top = match_detections(got, want)
    assert diff <= 1e-3 * top
