"""The plugin system: hook specs, the Backend contract and plugin discovery.

A plugin author needs :data:`hookimpl`, :class:`Backend`, :class:`Support`,
:class:`Pattern` and :class:`~hetero.core.memory.MemoryHierarchy`; the hook specs
in :mod:`hetero.core.plugin.hookspecs` say what to implement. The core finds
backends with :func:`load_plugins` and :func:`get_backend`.
"""

from hetero.core.plugin.backend import (
    Backend,
    CompiledPart,
    Pattern,
    Support,
    validate_backend,
)
from hetero.core.plugin.hookspecs import hookimpl, hookspec
from hetero.core.plugin.manager import (
    ENTRY_POINT_GROUP,
    PluginRecord,
    PluginSet,
    PluginWarning,
    discover_plugins,
    get_backend,
    load_plugins,
)

__all__ = [
    "ENTRY_POINT_GROUP", "Backend", "CompiledPart", "Pattern", "PluginRecord", "PluginSet",
    "PluginWarning", "Support", "discover_plugins", "get_backend", "hookimpl", "hookspec",
    "load_plugins", "validate_backend",
]
