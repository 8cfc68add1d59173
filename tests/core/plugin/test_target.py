"""Options written as text, as ``hetero --option`` and the suite's ``--hetero-option`` read them."""

from __future__ import annotations

from hetero.core.plugin.target import parse_option_value


def test_option_text_is_a_boolean_a_number_or_the_string_itself() -> None:
    texts = ("true", "false", "64", "-2", "0.5", "1e3", "npu_a", "True", "")
    values = [parse_option_value(t) for t in texts]
    assert values == [True, False, 64, -2, 0.5, 1000.0, "npu_a", "True", ""]
    assert [type(v) for v in values[:4]] == [bool, bool, int, int]
