"""Shared test setup: the helpers in tests/ on the path, a signing key of the session's
own, and the ``site`` fixture of throwaway installed plugin distributions."""

from collections.abc import Iterator
from pathlib import Path
import sys
import uuid
import warnings

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hetero.core.plugin import PluginSet, load_plugins  # noqa: E402
from hetero.core.plugin.manager import ALLOW_ENV, DENY_ENV, PluginWarning  # noqa: E402
from hetero.core.runtime.signing import KEY_ENV  # noqa: E402
from toyplugin import write_distribution  # noqa: E402


@pytest.fixture(autouse=True, scope="session")
def signing_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Executables and cache entries are signed with a key made for this session (in
    its subprocesses too), never with the key in the user's home."""
    path = tmp_path_factory.mktemp("signing") / "signing.key"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, str(path))
        yield path


class Site:
    """A folder on ``sys.path`` to install plugins into, and a way to load them."""

    def __init__(self, path: Path, mp: pytest.MonkeyPatch) -> None:
        self.path = path
        self._mp = mp
        # Module names are unique per test: sys.modules would otherwise hand a later
        # test the module an earlier one imported under the same name.
        self._prefix = f"hetero_test_{uuid.uuid4().hex[:8]}"
        self.modules: list[str] = []

    def install(self, dist: str, version: str, plugins: dict[str, str]) -> dict[str, str]:
        """Install ``dist``: one module per plugin (name → source); return name → module."""
        modules = {name: f"{self._prefix}_{dist.replace('-', '_')}_{name}" for name in plugins}
        write_distribution(
            self.path, dist, version,
            entry_points=modules,
            modules={modules[name]: source for name, source in plugins.items()},
        )
        self.modules += modules.values()
        return modules

    def load(self, allow: str | None = None, deny: str | None = None) -> PluginSet:
        """Rediscover plugins with ``HETERO_PLUGINS=allow`` / ``HETERO_DISABLE_PLUGINS=deny``."""
        for variable, value in ((ALLOW_ENV, allow), (DENY_ENV, deny)):
            if value is None:
                self._mp.delenv(variable, raising=False)
            else:
                self._mp.setenv(variable, value)
        return load_plugins(reload=True)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Site]:
    """An empty site folder, prepended to ``sys.path`` for the test."""
    path = tmp_path / "site"
    path.mkdir()
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(path))
        mp.delenv(ALLOW_ENV, raising=False)
        mp.delenv(DENY_ENV, raising=False)
        created = Site(path, mp)
        yield created
    for module in created.modules:
        sys.modules.pop(module, None)
    # Leave the process-wide cache as it would be without this test's site.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PluginWarning)
        load_plugins(reload=True)
