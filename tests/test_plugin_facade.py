"""hetero.plugin: the one module a backend author imports, and its support combinators."""

from __future__ import annotations

from pathlib import Path
import re

import numpy as np
import pytest

import hetero.plugin as plugin
from hetero.plugin import (
    GraphBuilder, Support, any_of, attribute, bind, chain, check, constant_inputs, dtypes, max_rank,
    nonempty_outputs, ops,
)
from toyplugin import ToyBackend

ROOT = Path(__file__).resolve().parent.parent
#: ``from hetero... import`` and ``import hetero...`` (not ``hetero_example_backend``).
IMPORT = re.compile(r"^\s*(?:from\s+(hetero(?:\.[\w.]+)?)\s+import|import\s+(hetero(?:\.[\w.]+)?)\b(?!_))",
                    re.MULTILINE)
TARGET = bind(ToyBackend())


def _hetero_imports(text: str) -> set[str]:
    return {a or b for a, b in IMPORT.findall(text)}


def test_the_example_plugin_imports_only_from_the_facade() -> None:
    sources = sorted((ROOT / "examples" / "hetero-example-backend" / "src").rglob("*.py"))
    assert sources
    found = {str(p.relative_to(ROOT)): _hetero_imports(p.read_text()) - {"hetero.plugin"} for p in sources}
    assert not any(found.values()), found


def test_the_guide_imports_only_from_the_facade() -> None:
    guide = (ROOT / "docs" / "plugin-guide.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
    imported = set().union(*(_hetero_imports(b) for b in blocks))
    kit = {"hetero.plugin", "hetero.plugin.tir", "hetero.plugin.lower", "hetero.plugin.schedule",
           "hetero.plugin.codegen", "hetero.plugin.parts"}
    assert "hetero.plugin" in imported and imported <= kit, imported - kit


def test_every_name_the_facade_lists_exists_under_the_stated_api_version() -> None:
    missing = [name for name in plugin.__all__ if not hasattr(plugin, name)]
    assert not missing
    assert plugin.API_VERSION == 3


def _node(op: str = "Relu", dtype: str = "float32", shape: tuple[int, ...] = (2, 3), **attrs: object):
    b = GraphBuilder("g")
    x = b.input("x", shape, dtype)
    if op == "MatMul":
        b.output(b.MatMul(x, np.ones((shape[-1], 4), dtype), name="n"))
    elif op == "MatMulDynamic":
        b.output(b.MatMul(x, b.input("w", (shape[-1], 4), dtype), name="n"))
    else:
        b.output(getattr(b, op)(x, name="n", **attrs))
    return b.build().node("n")


def test_chain_accepts_when_every_check_does_and_reports_the_first_refusal() -> None:
    both = chain(ops({"Relu", "Softmax"}, "acc"), dtypes({np.float32}, "acc"))
    assert both(_node(), TARGET)
    assert both(_node("Neg"), TARGET).reason == "acc does not implement Neg"
    assert both(_node("Neg", "float16"), TARGET).reason == "acc does not implement Neg"
    assert both(_node(dtype="float16"), TARGET).reason == (
        "acc computes in float32 only; Relu n has x of float16")


def test_any_of_accepts_when_one_check_does_and_joins_the_reasons() -> None:
    either = any_of(ops({"Neg"}, "acc"), dtypes({np.int8}, "acc"))
    assert either(_node("Neg"), TARGET)
    assert either(_node("Relu", "int8"), TARGET)
    assert either(_node(), TARGET).reason == (
        "acc does not implement Relu; acc computes in int8 only; Relu n has x of float32")


def test_rank_constant_and_attribute_filters() -> None:
    assert not max_rank(2, "acc")(_node(shape=(1, 2, 3)), TARGET)
    assert max_rank(3, "acc")(_node(shape=(1, 2, 3)), TARGET)
    weights = constant_inputs([1], "acc")
    assert weights(_node("MatMul"), TARGET)
    assert "input 1 of MatMul constant" in weights(_node("MatMulDynamic"), TARGET).reason
    axis = attribute("Softmax", "axis", lambda a: a == 1, "acc softmaxes the last axis only")  # canonical: -1 is 1
    assert axis(_node("Softmax", axis=-1), TARGET) and axis(_node("Relu"), TARGET)
    assert axis(_node("Softmax", axis=0), TARGET).reason == "acc softmaxes the last axis only (n has axis=0)"


def test_a_node_with_an_empty_output_is_refused_by_name() -> None:
    empty = nonempty_outputs("acc")
    assert empty(_node(shape=(2, 3)), TARGET)
    assert empty(_node(shape=(2, 0)), TARGET).reason == "n produces an empty tensor; acc needs at least one element"


def test_a_check_from_a_predicate_sees_the_target() -> None:
    small = check(lambda node, target: node.outputs[0].type.nbytes <= target.memory.levels[-1].capacity_bytes,
                  lambda node: f"{node.name} does not fit on chip")
    assert small(_node(), TARGET)
    assert small(_node(shape=(1024, 1024)), TARGET) == Support.no("n does not fit on chip")


@pytest.mark.parametrize("name", ["Backend", "Target", "Option", "hookimpl", "chain", "Device", "OnDevice"])
def test_the_facade_reexports_the_core_objects_themselves(name: str) -> None:
    import hetero.core.plugin.backend as backend
    import hetero.core.plugin.capabilities as capabilities
    import hetero.core.plugin.hookspecs as hookspecs
    import hetero.core.plugin.support as support
    import hetero.core.plugin.target as target
    import hetero.core.exec.device as device

    homes = [backend, capabilities, hookspecs, support, target, device]
    assert any(getattr(m, name, None) is getattr(plugin, name) for m in homes)
