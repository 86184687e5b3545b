"""gpucast reads back exactly what the plugin's formatting makes of a value: names, numbers,
booleans, single- and multi-value variables (the plugin side: grafana_plugin.py)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from app.grafana.interpolation import ALL, plugin_payload, unescape, values
from tests.conformance import grafana_plugin as plugin

NAME_CHARS = st.sampled_from("abcXYZ019._:@+=-")
SEGMENT = st.text(NAME_CHARS, min_size=1, max_size=12).filter(lambda s: s[0].isalnum())
NAMES = st.lists(SEGMENT, min_size=1, max_size=3).map("/".join)


def sent(value: str | list[str], payload_value: str = "$v") -> object:
    """The payload value the plugin sends for variable ``v`` in builder mode."""
    dashboard = plugin.Dashboard({"v": plugin.Variable(value)})
    return plugin.process_payload({"k": payload_value}, "builder", dashboard)["k"]


def test_the_issue_examples() -> None:
    assert sent("demo/servegen-m-small") == "demo\\/servegen-m-small"
    assert sent("0.7") == "0\\.7"
    assert sent(["a", "b"]) == "(a|b)"
    assert plugin_payload({"series": "demo\\/servegen-m-small"}) == {
        "series": "demo/servegen-m-small"
    }
    assert plugin_payload({"u": "0\\.7", "s": "(a|b)"}) == {"u": "0.7", "s": ["a", "b"]}


def test_grafana_escapes_every_regex_special_and_keeps_one_of_many_bare() -> None:
    assert plugin.escape_regex("\\^$*+?.()|[]{}/-:@=_") == (
        "\\\\\\^\\$\\*\\+\\?\\.\\(\\)\\|\\[\\]\\{\\}\\/-:@=_"
    )
    assert sent(["a.b"]) == "a\\.b"  # one value of a multi-value variable: no parentheses
    assert sent([]) == "()"
    assert unescape(plugin.escape_regex("\\^$*+?.()|[]{}/")) == "\\^$*+?.()|[]{}/"


@given(NAMES)
def test_a_single_name_reads_back(name: str) -> None:
    assert values(sent(name)) == name  # type: ignore[arg-type]


@given(st.lists(NAMES, min_size=2, max_size=5))
def test_a_multi_value_variable_reads_back_as_the_list(names: list[str]) -> None:
    assert values(sent(names)) == names  # type: ignore[arg-type]


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30))
def test_a_number_reads_back(number: float) -> None:
    text = plugin.js_string(number)
    assert float(values(sent(text))) == number  # type: ignore[arg-type]


def test_javascript_number_strings() -> None:
    cases = {0.7: "0.7", 7.0: "7", 1e21: "1e+21", 1e-7: "1e-7", 0.00001: "0.00001", -2.5: "-2.5"}
    for number, text in cases.items():
        assert plugin.js_string(number) == text
    assert math.isclose(float(plugin.js_string(123456789.123)), 123456789.123)


def test_builder_lists_and_non_string_values() -> None:
    dashboard = plugin.Dashboard({"v": plugin.Variable(["x/1", "y.2"])})
    payload = {"series": ["$v", "z"], "replicas": True, "days": 7}
    formatted = plugin.process_payload(payload, "builder", dashboard)
    assert formatted == {"series": ["(x\\/1|y\\.2)", "z"], "replicas": "true", "days": "7"}
    assert plugin_payload(formatted) == {
        "series": ["x/1", "y.2", "z"],
        "replicas": "true",
        "days": "7",
    }
    assert plugin.process_payload({"k": None}, "builder", dashboard) == {}  # null.toString()


def test_code_mode_json_is_filled_in_verbatim() -> None:
    dashboard = plugin.Dashboard({"s": plugin.Variable("a/b.c"), "m": plugin.Variable(["a", "b"])})
    payload = '{"series": "$s", "multi": $m}'
    formatted = plugin.process_payload(payload, "code", dashboard)
    assert formatted == {"series": "a/b.c", "multi": ["a", "b"]}
    assert plugin_payload(formatted) == formatted
    # an explicit regex format puts "\." into the JSON text: unparsable, so the plugin sends {}
    assert plugin.process_payload('{"series": "${s:regex}"}', "code", dashboard) == {}


def test_variable_syntax_formats_and_all() -> None:
    dashboard = plugin.Dashboard(
        {
            "s": plugin.Variable("a.b"),
            "all": plugin.Variable(plugin.ALL, options=("x.1", "y")),
            "custom": plugin.Variable(plugin.ALL, options=("x",), all_value=".*"),
        }
    )
    assert plugin.replace("$s ${s} [[s]] ${s:raw} $nope", dashboard, "regex") == (
        "a\\.b a\\.b a\\.b a.b $nope"
    )
    assert plugin.replace("$all", dashboard, "regex") == "(x\\.1|y)"
    assert plugin.replace("$custom", dashboard, "regex") == ".*"  # a custom All is not escaped


FORMATS = (
    "glob",
    "regex",
    "json",
    "raw",
    "text",
    "pipe",
    "csv",
    "doublequote",
    "singlequote",
    "sqlstring",
    "lucene",
    "percentencode",
)


def as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


@given(st.lists(NAMES, min_size=1, max_size=5), st.sampled_from(FORMATS))
def test_every_variable_format_reads_back_as_its_values(names: list[str], fmt: str) -> None:
    """A dashboard may name a format (``${profile:glob}``, Grafana's default when a payload
    is written with one): each reads back as the variable's values."""
    assert as_list(values(sent(names, f"${{v:{fmt}}}"))) == names  # type: ignore[arg-type]


def test_the_issue_glob_example_and_all() -> None:
    assert sent(["demo-small-a100", "demo-small-h100"], "${v:glob}") == (
        "{demo-small-a100,demo-small-h100}"
    )
    assert values("{demo-small-a100,demo-small-h100}") == ["demo-small-a100", "demo-small-h100"]
    dashboard = plugin.Dashboard(
        {"custom": plugin.Variable(plugin.ALL, options=("x",), all_value=".*")}
    )
    assert values(plugin.replace("$custom", dashboard, "regex")) == ALL
    assert values("$__all") == ALL and values("*") == ALL
    assert values("h100-70b") == "h100-70b"  # a name is never read as anything else
