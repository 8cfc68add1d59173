"""hetero-example-c: a codegen backend plugin that builds graph regions as C99 with the
system C compiler, from hetero's plugin kit alone.

The backend is in :mod:`~hetero_example_c.backend`; one kernel's way from the tensor IR to
C in :mod:`~hetero_example_c.kernels`; the compiler, its cache and the loaded library in
:mod:`~hetero_example_c.toolchain`; the compile loop and the compiled part in
:mod:`~hetero_example_c.part`.
"""

from __future__ import annotations

from hetero.plugin import hookimpl
from hetero_example_c.backend import ExampleCBackend

__version__ = "0.1.0"


@hookimpl
def hetero_backends() -> list[ExampleCBackend]:
    """The example C backend; building it looks for no compiler (the first compile does)."""
    return [ExampleCBackend()]


__all__ = ["ExampleCBackend", "__version__", "hetero_backends"]
