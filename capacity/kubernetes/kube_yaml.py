"""YAML that Kubernetes reads back as written.

``kubectl`` turns YAML into JSON with go-yaml, which types a plain (unquoted) scalar by its
own rules, not PyYAML's: ``1e-06``, ``1e5``, ``0o17`` and ``0X1F`` are numbers there and
``y``/``n`` are booleans, while PyYAML writes them unquoted as strings. A ScaledObject whose
``threshold`` or ``name`` arrives as a number is refused by the CRD (string fields). So every
string that go-yaml could read as anything but a string is quoted: the YAML 1.1 and 1.2
keywords, and every scalar that starts like a number (sign, dot or digit).
"""

from __future__ import annotations

from typing import Any

import yaml

# go-yaml v2 (what sigs.k8s.io/yaml uses) and v3 words for booleans, nulls, infinities and NaN.
_KEYWORDS = frozenset(
    (
        *("y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO"),
        *("true", "True", "TRUE", "false", "False", "FALSE"),
        *("on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~", "<<"),
    )
)
_NUMBER_START = frozenset("+-.0123456789")


def ambiguous(text: str) -> bool:
    """True when a plain scalar ``text`` might not come back from go-yaml as a string."""
    return text == "" or text in _KEYWORDS or text[0] in _NUMBER_START


class _KubernetesDumper(yaml.SafeDumper):
    pass


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "'" if ambiguous(value) and "\n" not in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_KubernetesDumper.add_representer(str, _represent_str)


def dump(document: Any) -> str:
    """``document`` as YAML in key order, every ambiguous string quoted."""
    return yaml.dump(document, Dumper=_KubernetesDumper, sort_keys=False)
