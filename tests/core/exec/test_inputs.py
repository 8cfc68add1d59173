"""What a caller hands to a graph: a dict by name, arrays of the declared dtype and byte order."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.ir import GraphBuilder
from hetero.core.exec.inputs import check_declared, check_inputs
from hetero.errors import InputError


def _graph():
    b = GraphBuilder("two_inputs")
    x, y = b.input("x", (2, 3), "float32"), b.input("y", (2, 3), "float32")
    b.output(b.Add(x, y))
    return b.build()


@pytest.mark.parametrize("container", [list, tuple])
def test_a_sequence_of_inputs_is_refused_naming_the_dict_to_pass(container: type) -> None:
    arrays = container([np.ones((2, 3), np.float32)] * 2)
    with pytest.raises(InputError, match=rf"graph two_inputs: inputs must be a dict of name to array, got a "
                                         rf"{container.__name__}; pass \{{'x': \.\.\., 'y': \.\.\.\}}"):
        check_inputs(_graph(), arrays)
    with pytest.raises(InputError, match="must be a dict"):
        check_declared("two_inputs", [("x", (None, 3), "float32")], arrays)


def test_an_executable_refuses_a_sequence_naming_its_model() -> None:
    exe = hetero.compile(_graph(), targets=["llvm_cpu"])
    with pytest.raises(InputError, match=r"graph two_inputs: inputs must be a dict"):
        exe.run([np.ones((2, 3), np.float32)] * 2)


def test_a_big_endian_array_is_refused_naming_its_byte_order() -> None:
    arrays = {"x": np.ones((2, 3), ">f4"), "y": np.ones((2, 3), np.float32)}
    order = "little-endian" if np.little_endian else "big-endian"
    with pytest.raises(InputError, match=rf"input 'x' of graph two_inputs must be float32 in the machine's byte "
                                         rf"order \({order}\), got big-endian float32; convert it with "
                                         rf"\.astype\(np\.float32\)"):
        check_inputs(_graph(), arrays)


def test_a_wrong_dtype_still_names_both() -> None:
    with pytest.raises(InputError, match=r"must be float32, got float64; convert it"):
        check_inputs(_graph(), {"x": np.ones((2, 3)), "y": np.ones((2, 3), np.float32)})
