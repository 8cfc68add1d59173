"""`hetero conformance` on a backend it cannot check: one line naming it and what to do,
exit 2, before the suite starts (no traceback)."""

from __future__ import annotations

import pytest

from hetero.cli import main
from toyplugin import plugin_source


def _one_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(["conformance", *argv])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err + out, err
    assert "hetero conformance matrix" not in out  # the suite never started
    return err.strip()


def test_an_unknown_backend_is_one_line_naming_what_is_installed(capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line(capsys, "nosuch")
    assert err.startswith("hetero conformance: error: no backend named 'nosuch'.")
    assert "Available backends: " in err and "llvm_cpu" in err


def test_a_broken_backend_is_one_line_with_the_reason(site, capsys: pytest.CaptureFixture[str]) -> None:
    site.install("hetero-bad", "2.0", {"bad": plugin_source("bad", body="raise ImportError('no libbad')")})
    with pytest.warns(UserWarning, match="bad"):
        site.load()
    err = _one_line(capsys, "bad")
    assert err.startswith("hetero conformance: error: backend 'bad' is broken: plugin bad (hetero-bad 2.0) "
                          "did not load: cannot import ")
    assert err.endswith("ImportError: no libbad. Run `hetero plugins` for details.")
