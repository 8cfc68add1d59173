"""The kit: the bundled backends are built from ``hetero.plugin`` alone, and the guide's
export lists are the kit's ``__all__``."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
import re

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "hetero" / "plugins"
KIT = ("hetero.plugin", "hetero.plugin.tir", "hetero.plugin.lower", "hetero.plugin.schedule",
       "hetero.plugin.codegen", "hetero.plugin.parts")


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports (``from X import`` gives X), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_bundled_backends_import_only_the_kit_and_their_own_modules() -> None:
    sources = sorted(PLUGINS.rglob("*.py"))
    assert len(sources) > 40
    wrong = []
    for path in sources:
        parts = path.relative_to(PLUGINS).parts
        own = f"hetero.plugins.{parts[0]}" if len(parts) > 1 else None
        for line, module in _imports(path):
            if module.split(".")[0] != "hetero":
                continue
            if module in KIT or (own is not None and (module == own or module.startswith(own + "."))):
                continue
            wrong.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert not wrong, "\n".join(wrong)


def test_the_kit_checks_catch_a_core_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from hetero.core.ir.tir import Buffer\n    import hetero.cli\n")
    assert [m for _, m in _imports(bad)] == ["hetero.core.ir.tir", "hetero.cli"]


def test_every_kit_name_exists() -> None:
    for name in KIT:
        module = importlib.import_module(name)
        assert module.__all__ == sorted(set(module.__all__), key=module.__all__.index), name
        assert [n for n in module.__all__ if not hasattr(module, n)] == [], name


def test_the_guide_lists_exactly_the_kit() -> None:
    guide = (ROOT / "docs" / "plugin-guide.md").read_text()
    listed = {m: set(re.findall(r"[\w]+", body))
              for m, body in re.findall(r"```exports (hetero\.plugin[\w.]*)\n(.*?)```", guide, re.DOTALL)}
    assert set(listed) == set(KIT)
    for name in KIT:
        assert listed[name] == set(importlib.import_module(name).__all__), name
