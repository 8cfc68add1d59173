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


def _draws(seed_value: int, max_examples: int = 8) -> list[int]:
    from hypothesis import given, strategies as st

    from hetero.testing import plugin, suite

    drawn: list[int] = []
    old = plugin.SEED[0]
    plugin.SEED[0] = seed_value
    try:
        @suite._settings(max_examples)
        @given(st.integers(0, 10**9))
        def draw(x: int) -> None:
            drawn.append(x)

        draw()
    finally:
        plugin.SEED[0] = old
    return drawn


def test_the_draw_is_fixed_by_default_and_replays_from_a_seed() -> None:
    assert _draws(0) == _draws(0)  # the fixed draw: every run, every machine
    assert _draws(7) == _draws(7)  # a seed replays
    assert _draws(7) != _draws(8) and _draws(7) != _draws(0)


def test_a_seeded_run_prints_the_seed_and_how_to_replay_it(tmp_path) -> None:  # noqa: ANN001
    import subprocess
    import sys

    from hetero.testing.plugin import SUITE
    from toyplugin import hetero_environment

    def run(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "pytest", "-c", "/dev/null", "--rootdir", str(SUITE.parent),
                               "-p", "no:cacheprovider", "-q", "--hetero-backend", "llvm_cpu", "--hetero-ops",
                               "Relu", "--hetero-max-examples", "1", "-k", "test_op and float32", *args],
                              capture_output=True, text=True, env=hetero_environment(tmp_path), check=False)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        return done.stdout

    assert "cases drawn from seed 7; replay them with hetero conformance llvm_cpu --seed 7" in run(
        "--hetero-seed", "7")
    assert ("cases from the fixed draw (seed 0), the same on every run; search anew with hetero conformance "
            "llvm_cpu --seed random --max-examples 50") in run()


def test_seed_random_picks_a_positive_seed() -> None:
    from hetero.cli.conformance import _seed

    assert _seed(None) is None and _seed("12") == 12
    drawn = {_seed("random") for _ in range(5)}
    assert all(isinstance(s, int) and s > 0 for s in drawn) and len(drawn) > 1


def test_a_bad_seed_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    err = _one_line(capsys, "llvm_cpu", "--seed", "soon")
    assert "--seed 'soon': give a whole number, or 'random'" in err
