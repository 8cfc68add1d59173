"""hetero's version, the one place it is written (``pyproject.toml`` reads it from here).

A module of its own, in the lowest layer, so that the compile cache, saved executables and
tuning records can stamp it without importing the package's public face
(``docs/architecture.md``, "Layers").
"""

__version__ = "0.1.0"
