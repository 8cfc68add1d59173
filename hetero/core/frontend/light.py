"""The real-architecture models that the onnx package ships, for demos, tests and benchmarks.

``onnx/backend/test/data/light/`` holds nine classic ImageNet networks whose weights
are ConstantOfShape placeholders (see
:func:`hetero.core.frontend.onnx.randomize.randomize_weights` for real numbers).
``light:NAME`` on the command line names one of them.
"""

from __future__ import annotations

import os
from pathlib import Path

from hetero.errors import ModelLoadError, did_you_mean

LIGHT_MODELS = (
    "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
    "shufflenet", "squeezenet", "vgg19", "zfnet512",
)


def light_model_path(name: str) -> Path:
    """The path of onnx's light model ``name`` (e.g. "resnet50")."""
    if name not in LIGHT_MODELS:
        raise ModelLoadError(
            f"no light model {name!r}{did_you_mean(name, LIGHT_MODELS)}; "
            f"onnx ships {', '.join(LIGHT_MODELS)}"
        )
    import onnx

    path = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light" / f"light_{name}.onnx"
    if not path.is_file():
        raise ModelLoadError(f"{path} is missing: the installed onnx ({onnx.__version__}) lacks its light models")
    return path


def resolve_model(spec: str) -> str:
    """A model path from a path or ``light:NAME``."""
    if spec.startswith("light:"):
        return str(light_model_path(spec.removeprefix("light:")))
    return spec
