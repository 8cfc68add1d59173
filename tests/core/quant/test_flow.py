"""Quantisation in the compile flow: quantize_model, lower_for_backends, hetero.compile(quantize=)."""

from __future__ import annotations

import numpy as np
import pytest
from toyplugin import ToyBackend

import hetero
from hetero import GraphBuilder
from hetero.core.ir.graph import Graph
from hetero.core.plugin import get_backend
from hetero.core.quant import calibrate
from hetero.core.quant.flow import lower_for_backends, prepare_for_targets, quantize_model
from hetero.errors import QuantizationError


def conv_net() -> Graph:
    rng = np.random.default_rng(0)
    b = GraphBuilder("conv_net")
    x = b.input("x", (1, 3, 8, 8))
    w = b.constant((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
    y = b.MaxPool(b.Relu(b.Conv(x, w, pads=(1, 1, 1, 1), name="conv"), name="relu"),
                  kernel_shape=(2, 2), strides=(2, 2), name="pool")
    b.output(b.Softmax(b.Reshape(y, shape=(1, 64), name="flat"), axis=1, name="softmax"))
    return b.build()


def samples(count: int, seed: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(count)]


def test_samples_and_a_ready_calibration_quantise_alike() -> None:
    graph = conv_net()
    from_samples = quantize_model(graph, samples(4, 1))
    from_calibration = quantize_model(graph, calibrate(graph, samples(4, 1)))
    assert str(from_samples) == str(from_calibration)
    assert from_samples.op_histogram()["QuantizeLinear"] >= 3
    percentile = quantize_model(graph, samples(4, 1), method="percentile")
    assert str(percentile) != str(from_samples)


def test_bad_quantisation_requests_name_the_problem() -> None:
    graph = conv_net()
    with pytest.raises(QuantizationError, match="unknown calibration method 'minmx' .*did you mean 'minmax'"):
        quantize_model(graph, samples(1, 1), method="minmx")
    with pytest.raises(QuantizationError, match="wrap it in a list"):
        quantize_model(graph, samples(1, 1)[0])


def test_integer_ops_appear_only_where_a_selected_backend_runs_them() -> None:
    q = quantize_model(conv_net(), samples(4, 1))
    # The fallback runs the integer ops a declined region hands it, but runs QDQ as float:
    # selected alone, it lowers nothing.
    assert prepare_for_targets(q, [get_backend("llvm_cpu")], "llvm_cpu") is q
    npu_like = ToyBackend("int8_acc", ops=("QConv", "MaxPool"))
    lowered = lower_for_backends(q, [npu_like])
    hist = lowered.op_histogram()
    assert hist["QConv"] == 1 and "Conv" not in hist
    # The toy takes no Reshape: the flat unit stays float QDQ.
    assert "Reshape" in hist and next(n for n in lowered.nodes if n.op == "Reshape").output.dtype == np.float32
    assert lower_for_backends(conv_net(), [npu_like]).op_histogram() == conv_net().op_histogram()


def test_compile_quantises_when_asked_and_stays_close_to_the_float_model() -> None:
    graph = conv_net()
    exe = hetero.compile(graph, targets=["llvm_cpu"], quantize=samples(8, 1))
    held_out = samples(2, 99)
    for feed in held_out:
        got, want = exe.run(feed)["softmax"], hetero.run_reference(graph, feed)["softmax"]
        a, b = got.ravel().astype(np.float64), want.ravel().astype(np.float64)
        assert a @ b / (np.linalg.norm(a) * np.linalg.norm(b)) >= 0.99
        assert not np.array_equal(got, want)  # it did quantise


class _RaisingOnQConv(ToyBackend):
    """An int8 toy whose ``supports`` raises for QConv (a plugin bug)."""

    def supports(self, node, target):  # noqa: ANN001, ANN201
        if node.op == "QConv":
            raise ZeroDivisionError("scale table is empty")
        return super().supports(node, target)


def test_a_raising_supports_during_lowering_is_a_refusal_with_the_reason_reported() -> None:
    from hetero.core.plugin.manager import PluginWarning

    q = quantize_model(conv_net(), samples(4, 1))
    broken = _RaisingOnQConv("int8_acc", ops=("QConv", "MaxPool"))
    with pytest.warns(PluginWarning) as caught:
        lowered = lower_for_backends(q, [broken])
    # Refused: the conv unit stays float QDQ, as it would for Support.no().
    assert "QConv" not in lowered.op_histogram() and lowered.op_histogram()["Conv"] == 1
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert messages[0].startswith("backend int8_acc: quantisation's lowering of conv_net asked it about "
                                  "the integer form of 1 unit(s) (conv) and int8_acc.supports() raised "
                                  "ZeroDivisionError: scale table is empty; that counts as a refusal")
