"""Execution without a compiler: what passes, plugins and the runtime all stand on.

- :mod:`.reference`: the reference executor, running a graph with its ops' numpy
  semantics (the oracle, and constant folding's engine), and :mod:`.inputs`, the
  check of the inputs a caller hands any executor;
- :mod:`.host_ops`: host kernels for the ops whose output shape depends on data;
- :mod:`.device`: devices, where a compiled part's values live, and the copies between;
- :mod:`.archive`: the deterministic, bounds-checked zip and ``.npz`` files artifacts
  and executables are written in.

None of it knows passes, plugins, the partitioner or the compiler, so each of those can
use it (``docs/architecture.md``, "Layers"); the executable, the cache and saving, which
do know them, are :mod:`hetero.core.runtime`.
"""
