"""A toy backend and throwaway installed distributions for the plugin tests.

:class:`ToyBackend` is a complete, if slow, backend: it "compiles" a subgraph to a
JSON program of canonical ops and runs it with the ops' reference semantics.
:func:`write_distribution` installs a plugin the way an installer leaves it on
disk (modules plus a ``NAME-VERSION.dist-info`` folder), and
:func:`write_project` lays out a source project that pip can build and install
without network, setuptools or wheel (its PEP 517 backend is in-tree).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
import json
import os
from pathlib import Path
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

from hetero.core.ir.graph import Graph, Node
from hetero.core.ir.opdef import get_op, op_names
from hetero.core.memory import MemoryHierarchy, MemoryLevel
from hetero.core.plugin import Backend, Support
from hetero.core.plugin.target import Option, Target

TOY_MEMORY = MemoryHierarchy([
    MemoryLevel("DRAM", 2**30, bandwidth_gbps=20.0, latency_ns=100.0),
    MemoryLevel("L1", 32 * 2**10, bandwidth_gbps=200.0, latency_ns=1.0, scope="local"),
])


class ToyPart:
    """A compiled toy program: constants, then nodes run in order by reference semantics."""

    def __init__(self, program: dict[str, Any]) -> None:
        self.program = program
        self.inputs = tuple(program["inputs"])
        self.outputs = tuple(program["outputs"])
        self.artifact = json.dumps(program).encode()

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, np.ndarray] = {name: np.asarray(inputs[name]) for name in self.inputs}
        for name, c in self.program["constants"].items():
            env[name] = np.array(c["data"], dtype=c["dtype"]).reshape(c["shape"])
        for node in self.program["nodes"]:
            args = [env[n] if n is not None else None for n in node["inputs"]]
            results = get_op(node["op"]).reference(args, node["attrs"])
            for (name, dtype), result in zip(node["outputs"], results):
                env[name] = np.asarray(result).astype(dtype)
        return {name: env[name] for name in self.outputs}


class ToyBackend(Backend):
    """Runs chains of attribute-free (or plain-attribute) canonical ops; the artifact is JSON."""

    peak_gflops = 10.0
    options = (Option("num_threads", "ignored: the toy runs on numpy", types=(int,)),
               Option("hook", "any object, for tests of options that are not JSON"))

    def __init__(
        self,
        name: str = "toy_cpu",
        ops: Sequence[str] = ("Relu", "Neg", "Add"),
        memory: MemoryHierarchy = TOY_MEMORY,
        device_kind: str = "cpu",
        version: str = "1.0",
        every_op: bool = False,
    ) -> None:
        self.name = name
        # every_op: a toy that declares every canonical op (it runs each by its reference),
        # so that it can serve as the fallback.
        self.supported_ops = frozenset(op_names() if every_op else ops)
        self.takes_every_op = every_op
        self.memory = memory
        self.device_kind = device_kind
        self.version = version

    def supports(self, node: Node, target: Target) -> Support:
        if node.op not in self.supported_ops:
            return Support.no(f"{self.name} does not implement {node.op}")
        for key, value in node.attrs.items():
            if not isinstance(value, (int, float, str, tuple)):
                return Support.no(f"{self.name} keeps only plain attributes; {key} is {type(value).__name__}")
        return Support.yes()

    def compile(self, subgraph: Graph, target: Target) -> ToyPart:
        program = {
            "inputs": [v.name for v in subgraph.inputs],
            "outputs": [v.name for v in subgraph.outputs],
            "constants": {
                name: {"data": a.ravel().tolist(), "dtype": a.dtype.name, "shape": list(a.shape)}
                for name, a in subgraph.constants.items()
            },
            "nodes": [
                {
                    "op": n.op,
                    "attrs": n.attrs,
                    "inputs": [v.name if v is not None else None for v in n.inputs],
                    "outputs": [[v.name, v.dtype.name] for v in n.outputs],
                }
                for n in subgraph.nodes
            ],
        }
        return ToyPart(program)

    def load_artifact(self, artifact: bytes) -> ToyPart:
        return ToyPart(json.loads(artifact))


def plugin_source(*names: str, ops: Sequence[str] = ("Relu", "Neg", "Add"),
                  capacity: str = "2**30", body: str = "", every_op: bool = False) -> str:
    """A plugin module providing a ToyBackend for each of ``names``.

    ``capacity`` is the DRAM capacity expression (to declare a bad one); ``body``
    is extra module code run at import (to make the import fail); ``every_op`` makes
    each toy declare every canonical op (so it can be the fallback).
    """
    imports = textwrap.dedent("""\
        from hetero.core.memory import MemoryHierarchy, MemoryLevel
        from hetero.core.plugin import hookimpl
        from toyplugin import ToyBackend
        """)
    rest = textwrap.dedent(f"""\
        MEMORY = MemoryHierarchy([MemoryLevel("DRAM", {capacity}, 20.0, 100.0)])

        @hookimpl
        def hetero_backends():
            return [ToyBackend(name, ops={tuple(ops)!r}, memory=MEMORY, every_op={every_op!r})
                    for name in {names!r}]
        """)
    return imports + textwrap.dedent(body) + "\n" + rest


def write_distribution(
    site: Path, dist: str, version: str, entry_points: Mapping[str, str],
    modules: Mapping[str, str],
) -> Path:
    """Install ``modules`` (name → source) into ``site`` as distribution ``dist``.

    ``entry_points`` maps plugin names to their targets in the ``hetero.backends``
    group. Returns the ``.dist-info`` folder.
    """
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entry_points.items())
    (info / "entry_points.txt").write_text(f"[hetero.backends]\n{lines}")
    return info


_IN_TREE_BACKEND = '''\
"""A PEP 517 build backend that writes one pure-Python wheel, for the tests only."""
import base64, hashlib, zipfile

DIST, VERSION, MODULE, ENTRY = {dist!r}, {version!r}, {module!r}, {entry!r}


def _record(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{{name}},sha256={{digest}},{{len(data)}}\\n"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    stem = DIST.replace("-", "_")
    info = f"{{stem}}-{{VERSION}}.dist-info"
    files = {{
        f"{{MODULE}}.py": open(f"{{MODULE}}.py", "rb").read(),
        f"{{info}}/METADATA": f"Metadata-Version: 2.1\\nName: {{DIST}}\\nVersion: {{VERSION}}\\n".encode(),
        f"{{info}}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: tinybuild\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
        f"{{info}}/entry_points.txt": f"[hetero.backends]\\n{{ENTRY}} = {{MODULE}}\\n".encode(),
    }}
    record = "".join(_record(n, d) for n, d in files.items()) + f"{{info}}/RECORD,,\\n"
    wheel = f"{{stem}}-{{VERSION}}-py3-none-any.whl"
    with zipfile.ZipFile(f"{{wheel_directory}}/{{wheel}}", "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{{info}}/RECORD", record)
    return wheel
'''


def write_project(root: Path, dist: str, version: str, module: str, source: str, entry: str) -> Path:
    """A source project for ``pip install``: one module, one ``hetero.backends`` entry point."""
    root.mkdir(parents=True)
    (root / f"{module}.py").write_text(source)
    (root / "tinybuild.py").write_text(
        _IN_TREE_BACKEND.format(dist=dist, version=version, module=module, entry=entry)
    )
    (root / "pyproject.toml").write_text(textwrap.dedent(f"""\
        [build-system]
        requires = []
        build-backend = "tinybuild"
        backend-path = ["."]

        [project]
        name = "{dist}"
        version = "{version}"
        """))
    return root


def hetero_environment(site: Path, **env: str) -> dict[str, str]:
    """The environment of a fresh process that sees the plugins installed in ``site`` (and
    this folder, for :mod:`toyplugin`), with no HETERO_* variable but ``env`` and the
    test session's signing key (so nothing signs with a key in the real home)."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("HETERO_") or k == "HETERO_SIGNING_KEY_FILE"}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).parent)])
    environ.update(env)
    return environ


def run_hetero(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -m hetero.cli ARGS`` in a fresh process with :func:`hetero_environment`."""
    # No timeout: a hang is not what these runs test, and a loaded machine may take minutes.
    return subprocess.run([sys.executable, "-m", "hetero.cli", *args],
                          capture_output=True, text=True, env=hetero_environment(site, **env),
                          check=False)


def run_conformance(folder: Path, backend: str, *args: str, **env: str) -> tuple[dict[str, Any], ET.Element]:
    """``hetero conformance BACKEND [ARGS]`` in a fresh process (with ``env`` over
    :func:`hetero_environment`'s); its JSON report and JUnit suite.

    Fails the calling test, with the end of the output, unless the run exits 0 and
    prints the matrix, and unless JUnit counts no failure or error.
    """
    report, junit = folder / "matrix.json", folder / "junit.xml"
    done = run_hetero(folder, "conformance", backend, *args, "--json", str(report), "--junit", str(junit), **env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "hetero conformance matrix" in done.stdout
    data = json.loads(report.read_text())
    assert data["backend"] == backend
    suites = ET.parse(junit).getroot()
    suite = suites if suites.tag == "testsuite" else suites[0]
    assert int(suite.get("failures")) == 0 and int(suite.get("errors")) == 0
    return data, suite
