"""Hook specifications: the one page a plugin author reads.

A hetero plugin is an importable module (or any object) that implements some of
the hooks below, each marked with :data:`hookimpl`, and that its distribution
declares in the ``hetero.backends`` entry-point group::

    # pyproject.toml of the plugin's distribution
    [project.entry-points."hetero.backends"]
    my_npu = "my_npu_plugin"

    # my_npu_plugin.py
    from hetero.core.plugin import hookimpl

    @hookimpl
    def hetero_backends():
        return [MyNpu()]

The bundled backends register the same way; there is no private path for them.
Hooks are grouped by the phase in which hetero calls them. An implementation may
accept fewer parameters than its spec lists (pluggy passes only those it names)
but none that the spec does not list: the plugin manager rejects a plugin whose
hook names or parameters do not match a spec here.

Every hook is called on each plugin separately, so that an exception raised in one
plugin's hook is reported against that plugin (``hetero plugins`` lists it as
broken, with the error) and never stops the others from loading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from hetero.core.plugin.backend import Backend

#: The pluggy project name; hook implementations must use :data:`hookimpl`.
PROJECT = "hetero"

#: Marks a function in this module as a hook specification.
hookspec = pluggy.HookspecMarker(PROJECT)

#: Marks a plugin's function as the implementation of the hook of the same name.
hookimpl = pluggy.HookimplMarker(PROJECT)


# -------------------------------------------------------------------------------
# Discovery: called when hetero loads its plugins (the first time a backend is
# looked up, or by ``hetero plugins``).
# -------------------------------------------------------------------------------


@hookspec
def hetero_backends() -> list[Backend]:
    """Return the backends this plugin provides.

    Called once per plugin and process, when hetero first loads plugins (and again
    after ``load_plugins(reload=True)``). Not ``firstresult``: every plugin's list
    counts, and a plugin may provide several backends (one device in two modes)
    or none. A backend whose device is absent from this machine is listed all the
    same, and works as it would with the device: it declares, answers ``supports``,
    plans and compiles (the partition shows what it would take; compiling never
    needs the device). Its :meth:`~hetero.core.plugin.Backend.device_status` says
    what is missing (``hetero plugins`` shows it), and its compiled parts raise
    :class:`~hetero.errors.DeviceUnavailableError` when asked to run.

    Each backend must be an instance of :class:`hetero.core.plugin.Backend` whose
    declarations pass :func:`hetero.core.plugin.validate_backend`, and its name
    must be unique among all installed backends (the names of the backends and
    plugins bundled with hetero are never given to another plugin). A plugin that
    breaks any of these rules, or whose hook raises, is skipped whole and reported
    as broken with the reason; the other plugins load as usual.

    A backend's own hooks (``supports``, ``estimate``, ``compile``, a pattern's
    ``check``) are those of plugin API 3 (:data:`hetero.plugin.API_VERSION`), which
    are version 2's: each takes the backend's target. A backend whose hooks are in
    version 1's forms (``supports(node)``, ``estimate(subgraph)``,
    ``compile(subgraph, options)``, ``check(match)``) loads adapted, with a
    :class:`DeprecationWarning` naming each change; one whose hooks match no form
    is broken (docs/plugin-guide.md, "Migrating from API 1 and 2").

    Keep this hook cheap: build the backend objects, but defer compiler start-up,
    device queries and large imports to the first ``compile``.

    :returns: the plugin's :class:`~hetero.core.plugin.Backend` instances.
    """
