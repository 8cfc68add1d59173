"""hetero-example-backend: a complete hetero backend plugin, small enough to read in one go.

The package's ``pyproject.toml`` declares this module in the ``hetero.backends``
entry-point group; hetero imports it and calls :func:`hetero_backends`. The backend
is in :mod:`~hetero_example_backend.backend`, its code generator in
:mod:`~hetero_example_backend.codegen`, the compiled part and its artifact in
:mod:`~hetero_example_backend.part`.
"""

from __future__ import annotations

from hetero.plugin import hookimpl
from hetero_example_backend.backend import ExampleBackend

__version__ = "0.1.0"


@hookimpl
def hetero_backends() -> list[ExampleBackend]:
    """The example backend; building it is cheap, so nothing is deferred."""
    return [ExampleBackend()]


__all__ = ["ExampleBackend", "__version__", "hetero_backends"]
