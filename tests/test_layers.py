"""The layers of hetero (``docs/architecture.md``, "Layers"): no module imports a layer above its own.

Every module of the package is read (its AST, so imports inside functions and under
``TYPE_CHECKING`` count too: a deferred import is still a dependency, and a type named in
a signature is still knowledge of that layer). A module's layer is that of the longest
path in :data:`LAYERS` that holds it: a folder holds every module under it, a file only
itself. Importing ``a.b.c`` runs ``a/b/__init__.py`` first, so the packages between
``hetero`` and the module imported count as imported too.

Same-layer imports are allowed; an import of a layer above is a failure naming the module,
the line and both layers, unless :data:`EXCEPTIONS` lists it with its reason. A private
name (``_units``) is imported only within its own layer: what a layer above needs is made
public and documented.
"""

from __future__ import annotations

import ast
from pathlib import Path
import re

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hetero"

#: The layers, bottom to top, each the folders (ending in ``/``) and files it holds.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("hetero/errors.py", "hetero/_version.py", "hetero/core/__init__.py",
              "hetero/core/progress.py", "hetero/core/timing.py")),
    ("ir", ("hetero/core/ir/",)),
    ("exec", ("hetero/core/exec/",)),
    ("memory", ("hetero/core/memory/",)),
    ("schedule", ("hetero/core/schedule/",)),
    ("passes", ("hetero/core/passes/", "hetero/core/quant/")),
    ("frontend", ("hetero/core/frontend/",)),
    ("contract", ("hetero/core/plugin/",)),
    ("quantisation for targets", ("hetero/core/quant/flow.py",)),
    ("lowering", ("hetero/core/lower/", "hetero/core/codegen/")),
    ("parts", ("hetero/core/parts/",)),
    ("partition", ("hetero/core/partition/",)),
    ("runtime", ("hetero/core/runtime/", "hetero/core/staging.py")),
    ("compiler", ("hetero/core/compiler.py",)),
    ("api", ("hetero/__init__.py", "hetero/onnx_backend.py")),
    ("tools", tuple(f"hetero/core/schedule/tune/{name}.py"
                    for name in ("measure", "executors", "search", "features", "model", "tuner", "report"))
     + ("hetero/testing/", "hetero/plugin/")),
    ("cli", ("hetero/cli/",)),
    ("plugins", ("hetero/plugins/",)),
]

#: Imports of a layer above, allowed: ``(module, imported module) -> reason``. Keep it short.
EXCEPTIONS: dict[tuple[str, str], str] = {}

LEVEL = {name: i for i, (name, _) in enumerate(LAYERS)}


def module_name(path: Path) -> str:
    """``hetero/core/ir/graph.py`` -> ``hetero.core.ir.graph``; a package is its ``__init__``."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer_of(path: Path) -> str | None:
    """The layer whose longest folder or file holds ``path``; None when none does."""
    rel = path.relative_to(ROOT).as_posix()
    best: tuple[int, str] | None = None
    for name, places in LAYERS:
        for place in places:
            if rel == place or (place.endswith("/") and rel.startswith(place)):
                if best is None or len(place) > best[0]:
                    best = (len(place), name)
    return None if best is None else best[1]


def imported(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every hetero module ``source`` (the text of ``module``) imports, with its line:
    ``from X import Y`` gives ``X.Y`` where that is a module, else ``X``; relative
    imports are resolved; then the packages between ``hetero`` and each."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                whole = f"{base}.{alias.name}"
                found.append((node.lineno, whole if whole in MODULES else base))
    out = []
    for line, name in found:
        if name.split(".")[0] != "hetero":
            continue
        parts = name.split(".")
        out += [(line, ".".join(parts[:i])) for i in range(2, len(parts))]
        out.append((line, name))
    return sorted(set(out))


def violations(module: str, path: Path, source: str) -> list[str]:
    """Each import of ``module`` (at ``path``) of a layer above its own, as a message."""
    own = layer_of(path)
    wrong = []
    for line, name in imported(source, module, path.name == "__init__.py"):
        if name not in MODULES or name == module or (module, name) in EXCEPTIONS:
            continue
        theirs = layer_of(MODULES[name])
        if theirs is not None and own is not None and LEVEL[theirs] > LEVEL[own]:
            wrong.append(f"{path.relative_to(ROOT)}:{line}: {module} (layer {own}) imports {name} "
                         f"(layer {theirs})")
    return wrong


def private_imports(module: str, path: Path, source: str) -> list[str]:
    """Each private name ``module`` imports from a module of another layer, as a message."""
    wrong = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.level or node.module not in MODULES:
            continue
        for alias in node.names:
            name = alias.name
            if (name.startswith("_") and not name.startswith("__") and f"{node.module}.{name}" not in MODULES
                    and layer_of(MODULES[node.module]) != layer_of(path)):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module} (layer {layer_of(path)}) imports "
                             f"{name} from {node.module} (layer {layer_of(MODULES[node.module])})")
    return wrong


def test_every_module_has_a_layer() -> None:
    assert len(MODULES) > 250
    assert [str(p.relative_to(ROOT)) for p in MODULES.values() if layer_of(p) is None] == []


def test_no_module_imports_a_layer_above_its_own() -> None:
    wrong = [w for module, path in MODULES.items() for w in violations(module, path, path.read_text())]
    assert not wrong, "imports of a higher layer:\n" + "\n".join(wrong)


def test_no_module_imports_a_private_name_of_another_layer() -> None:
    wrong = [w for module, path in MODULES.items() for w in private_imports(module, path, path.read_text())]
    assert not wrong, "private names imported from another layer:\n" + "\n".join(wrong)


def test_every_exception_is_still_an_import_of_a_layer_above() -> None:
    for (module, name), reason in EXCEPTIONS.items():
        assert reason, (module, name)
        path = MODULES[module]
        assert (name in {n for _, n in imported(path.read_text(), module, path.name == "__init__.py")}
                and LEVEL[layer_of(MODULES[name])] > LEVEL[layer_of(path)]), (module, name)


def test_the_check_catches_deferred_relative_and_package_imports() -> None:
    path = PACKAGE / "core" / "ir" / "graph.py"
    source = ("def f():\n    from hetero.core.compiler import Session\n"
              "from ..exec import reference\n"
              "if True:\n    import hetero.core.runtime.executable\n")
    assert violations("hetero.core.ir.graph", path, source) == [
        "hetero/core/ir/graph.py:2: hetero.core.ir.graph (layer ir) imports hetero.core.compiler (layer compiler)",
        "hetero/core/ir/graph.py:3: hetero.core.ir.graph (layer ir) imports hetero.core.exec (layer exec)",
        "hetero/core/ir/graph.py:3: hetero.core.ir.graph (layer ir) imports hetero.core.exec.reference "
        "(layer exec)",
        "hetero/core/ir/graph.py:5: hetero.core.ir.graph (layer ir) imports hetero.core.runtime (layer runtime)",
        "hetero/core/ir/graph.py:5: hetero.core.ir.graph (layer ir) imports hetero.core.runtime.executable "
        "(layer runtime)",
    ]


def test_the_check_catches_a_private_name_from_another_layer() -> None:
    path = PACKAGE / "core" / "schedule" / "tune" / "tuner.py"
    source = "from hetero.core.compiler import Session, _units\nfrom hetero import _version\n"
    assert private_imports("hetero.core.schedule.tune.tuner", path, source) == [
        "hetero/core/schedule/tune/tuner.py:1: hetero.core.schedule.tune.tuner (layer tools) imports _units "
        "from hetero.core.compiler (layer compiler)",
    ]


def test_the_architecture_lists_the_same_layers_in_the_same_order() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\d+\. \*\*([^*]+)\*\*", section, re.MULTILINE) == [name for name, _ in LAYERS]
