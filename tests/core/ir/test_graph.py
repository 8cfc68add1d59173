"""The graph IR: construction, typing, editing, copying and ordering."""

from __future__ import annotations

import numpy as np
import pytest

from hetero.core.ir import Graph, GraphBuilder, TensorType, verify
from hetero.errors import OpAttributeError, ShapeError, UnknownOpError, VerificationError


def small_graph() -> Graph:
    b = GraphBuilder("small")
    x = b.input("x", (2, 3))
    y = b.Relu(b.Add(x, np.ones((1, 3), np.float32), name="add"), name="relu")
    b.output(b.Mul(y, y, name="square"))
    return b.build()


def test_add_node_infers_output_types() -> None:
    g = Graph("g")
    x = g.add_input("x", (4, 1), "float32")
    c = g.add_constant(np.zeros((1, 5), np.float32), "c")
    node = g.add_node("Add", [x, c])
    assert node.output.type == TensorType((4, 5), "float32")
    assert node.output.producer is node
    assert x.users == [node] and c.users == [node]


def test_types_are_static_numpy_types() -> None:
    t = TensorType([1, 3, 224, 224], np.float32)
    assert t.shape == (1, 3, 224, 224) and t.dtype == np.dtype("float32")
    assert t.size == 150528 and t.nbytes == 4 * 150528
    with pytest.raises(ShapeError, match="negative"):
        TensorType((-1, 3), "float32")
    with pytest.raises(ShapeError, match="complex64"):
        TensorType((1,), "complex64")


def test_unknown_op_suggests_the_closest_name() -> None:
    g = Graph()
    x = g.add_input("x", (1,), "float32")
    with pytest.raises(UnknownOpError, match="did you mean 'Relu'"):
        g.add_node("Rleu", [x])


def test_attributes_are_checked_against_the_schema() -> None:
    g = Graph()
    x = g.add_input("x", (1,), "float32")
    with pytest.raises(OpAttributeError, match="alpah.*did you mean 'alpha'"):
        g.add_node("LeakyRelu", [x], {"alpah": 0.1})
    with pytest.raises(OpAttributeError, match="'to'"):
        g.add_node("Cast", [x])
    node = g.add_node("LeakyRelu", [x])
    assert node.attrs == {"alpha": 0.01}


def test_shape_errors_name_the_node() -> None:
    g = Graph()
    a = g.add_input("a", (2, 3), "float32")
    b = g.add_input("b", (4, 3), "float32")
    with pytest.raises(ShapeError, match=r"node add \(Add\).*\[2, 3\] and \[4, 3\]"):
        g.add_node("Add", [a, b])


def test_dtype_mismatch_is_a_shape_error() -> None:
    g = Graph()
    a = g.add_input("a", (2,), "float32")
    b = g.add_input("b", (2,), "int64")
    with pytest.raises(ShapeError, match="float32.*int64|int64.*float32"):
        g.add_node("Mul", [a, b])


def test_arity_is_checked() -> None:
    g = Graph()
    a = g.add_input("a", (2,), "float32")
    with pytest.raises(VerificationError, match="takes 2 inputs"):
        g.add_node("Add", [a])


def test_copy_is_independent_and_shares_constants() -> None:
    g = small_graph()
    c = g.copy()
    assert str(c) == str(g)
    relu = c.node("relu")
    c.replace_all_uses(relu.output, relu.inputs[0])
    c.remove_node(relu)
    assert "Relu" not in c.op_histogram() and "Relu" in g.op_histogram()
    verify(g)
    verify(c)
    (name,) = g.constants
    assert c.constants[name] is g.constants[name]


def test_constants_are_read_only() -> None:
    g = small_graph()
    (array,) = g.constants.values()
    with pytest.raises(ValueError):
        array[0, 0] = 5


def test_remove_node_refuses_while_used() -> None:
    g = small_graph().copy()
    with pytest.raises(VerificationError, match="still used"):
        g.remove_node(g.node("add"))


def test_sort_restores_topological_order() -> None:
    g = small_graph().copy()
    g.nodes.reverse()
    with pytest.raises(VerificationError, match="topological order"):
        verify(g)
    g.sort()
    assert [n.name for n in g.nodes] == ["add", "relu", "square"]
    verify(g)


def test_names_are_made_unique() -> None:
    b = GraphBuilder()
    x = b.input("x", (1,))
    r1 = b.Relu(x)
    r2 = b.Relu(r1)
    assert r1.name != r2.name
    assert r1.producer.name != r2.producer.name


def test_op_histogram_counts_ops() -> None:
    assert small_graph().op_histogram() == {"Add": 1, "Mul": 1, "Relu": 1}


def test_a_constant_is_stored_read_only_and_row_major() -> None:
    # A folded Transpose of a read-only initializer is a strided view; kept as it is, a
    # backend reading the buffer row-major would see the untransposed data.
    frozen = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    frozen.flags.writeable = False
    g = Graph("g")
    c = g.add_constant(frozen.transpose(2, 0, 1))
    assert c.data.flags.c_contiguous and not c.data.flags.writeable
    np.testing.assert_array_equal(c.data, frozen.transpose(2, 0, 1))


def test_copying_a_graph_leaves_its_fresh_names_as_they_were() -> None:
    """Two copies of one graph name the nodes they add alike (the compile cache keys
    on names), and the original's next fresh name is unchanged by copying."""
    g = Graph("g")
    x = g.add_input("x", (2,), np.float32)
    g.set_outputs([g.add_node("Relu", [x], name="relu").output])
    g.add_node("Neg", [g.outputs[0]], name="neg")
    first, second = g.copy(), g.copy()
    # "neg" is taken, so each graph's next Neg draws a fresh name from its counter.
    a = first.add_node("Neg", [first.outputs[0]], name="neg").name
    b = second.add_node("Neg", [second.outputs[0]], name="neg").name
    assert a == b == g.add_node("Neg", [g.outputs[0]], name="neg").name != "neg"
