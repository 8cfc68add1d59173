"""Calibration of tensor ranges: min-max, percentile, JSON round trip."""

from __future__ import annotations

import numpy as np
import pytest

from hetero import GraphBuilder
from hetero.core.quant import Calibration, MinMax, Percentile, calibrate
from hetero.errors import QuantizationError


def _relu_graph():
    b = GraphBuilder("calib")
    x = b.input("x", (1, 10000))
    b.output(b.Relu(x, name="r"))
    return b.build()


def _samples_with_outlier() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    samples = [{"x": rng.uniform(-1, 1, (1, 10000)).astype(np.float32)} for _ in range(3)]
    samples[1]["x"][0, 7] = 50.0  # one value in 30000
    return samples


def test_minmax_keeps_the_outlier_and_covers_every_sample() -> None:
    samples = _samples_with_outlier()
    calib = calibrate(_relu_graph(), samples, MinMax())
    lo = min(float(s["x"].min()) for s in samples)
    assert calib["x"] == (lo, 50.0)
    assert calib["r"] == (0.0, 50.0)
    assert calib.method == "minmax"


def test_percentile_clips_the_outlier() -> None:
    calib = calibrate(_relu_graph(), _samples_with_outlier(), Percentile(99.9))
    lo, hi = calib["x"]
    assert 0.99 < hi < 1.0 and -1.0 < lo < -0.99


def test_symmetric_percentile_is_taken_on_magnitudes() -> None:
    calib = calibrate(_relu_graph(), _samples_with_outlier(), Percentile(99.9, symmetric=True))
    lo, hi = calib["x"]
    assert lo == -hi and 0.99 < hi < 1.0


def test_percentile_100_is_minmax() -> None:
    samples = _samples_with_outlier()
    assert dict(calibrate(_relu_graph(), samples, Percentile(100.0))) == \
        dict(calibrate(_relu_graph(), samples, MinMax()))


def test_calibration_saves_and_loads(tmp_path) -> None:
    calib = calibrate(_relu_graph(), _samples_with_outlier()[:1])
    calib.save(tmp_path / "c.json")
    back = Calibration.load(tmp_path / "c.json")
    assert dict(back) == dict(calib) and back.method == calib.method


def test_bad_calibration_file_is_named(tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text('{"ranges": {}}')
    with pytest.raises(QuantizationError, match="c.json"):
        Calibration.load(path)


def test_no_samples_and_bad_percentile_are_errors() -> None:
    with pytest.raises(QuantizationError, match="at least one sample"):
        calibrate(_relu_graph(), [])
    with pytest.raises(QuantizationError, match="percentile"):
        Percentile(0.0)
