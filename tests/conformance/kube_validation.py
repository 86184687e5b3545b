"""What the Kubernetes API server (and ``kubectl apply``) checks before a ScaledObject exists,
and what the HPA that KEDA then creates must pass.

- The CRD's structural schema (vendor/keda: KEDA 2.19.0's ``openAPIV3Schema``) as a JSON
  Schema: types, required fields, enums, minimums, patterns, ``format: int32``; unknown fields
  are refused, as kubectl's default ``--validate=strict`` does (the server would otherwise
  prune them silently); the CRD's one CEL rule (``minReplicaCount <= maxReplicaCount``,
  100 when unset) transcribed.
- ObjectMeta: a custom resource's name is a DNS-1123 subdomain; KEDA also writes it as the
  value of the label ``scaledobject.keda.sh/name`` on the HPA, so it must be a valid label
  value (at most 63 characters); the namespace is a DNS-1123 label; labels and annotations
  are strings, label values valid.
- KEDA's admission webhook (from v2.20.0): the HPA's name — ``advanced.
  horizontalPodAutoscalerConfig.name`` when set, else ``keda-hpa-<metadata.name>`` — must
  fit in 63 characters.
- The HPA's behavior (k8s pkg/apis/autoscaling/validation): stabilization windows 0..3600 s,
  policies with type Pods/Percent, value > 0 and periodSeconds 1..1800, selectPolicy
  Max/Min/Disabled, a tolerance that is a non-negative Quantity.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.conformance import goyaml

CRD = Path(__file__).parent / "vendor" / "keda" / "keda.sh_scaledobjects.yaml"
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
QUANTITY = re.compile(
    r"([+-]?[0-9.]+)([eE][+-]?[0-9]+|[numkMGTPE]|[KMGTPE]i)?"
)  # the number and suffix of a Quantity (the CRD's pattern checks the full syntax)
INT32 = (-(2**31), 2**31 - 1)


def _strict(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with unknown fields refused wherever the CRD lists the known ones."""
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
        if "additionalProperties" not in out and not out.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key])
    if "anyOf" in out:
        out["anyOf"] = [_strict(s) for s in out["anyOf"]]
    return out


@cache
def crd_version() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    (version,) = crd["spec"]["versions"]
    return {"group": crd["spec"]["group"], "kind": crd["spec"]["names"]["kind"], **version}


@cache
def _validator() -> jsonschema.Draft202012Validator:
    checker = jsonschema.FormatChecker()

    @checker.checks("int32")
    def _int32(value: object) -> bool:
        return not isinstance(value, int) or INT32[0] <= value <= INT32[1]

    schema = _strict(crd_version()["schema"]["openAPIV3Schema"])
    return jsonschema.Draft202012Validator(schema, format_checker=checker)


def problems(document: dict[str, Any]) -> list[str]:
    """Everything Kubernetes refuses in ``document`` (empty when it would be accepted)."""
    errors = _validator().iter_errors(document)
    found = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors]
    version = crd_version()
    if document.get("apiVersion") != f"{version['group']}/{version['name']}":
        found.append(f"apiVersion {document.get('apiVersion')!r} is not served by the CRD")
    if document.get("kind") != version["kind"]:
        found.append(f"kind {document.get('kind')!r} is not {version['kind']}")
    spec = document.get("spec") or {}
    if spec.get("minReplicaCount", 0) > spec.get("maxReplicaCount", 100):
        found.append("minReplicaCount must be less than or equal to maxReplicaCount")
    found += _metadata_problems(document.get("metadata") or {})
    hpa = hpa_name(document)
    if hpa is not None and (len(hpa) > 63 or not DNS1123_SUBDOMAIN.fullmatch(hpa)):
        found.append(f"KEDA >= 2.20 refuses the HPA name {hpa!r}: more than 63 characters")
    behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior")
    found += hpa_behavior_problems(behavior or {})
    return found


def hpa_name(document: dict[str, Any]) -> str | None:
    """The name of the HPA KEDA creates for the ScaledObject ``document``."""
    config = (document.get("spec") or {}).get("advanced", {}).get("horizontalPodAutoscalerConfig")
    given = (config or {}).get("name")
    if given:
        return str(given)
    name = (document.get("metadata") or {}).get("name")
    return f"keda-hpa-{name}" if isinstance(name, str) else None


def _metadata_problems(metadata: dict[str, Any]) -> list[str]:
    found = []
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not goyaml.is_string(name) or not DNS1123_SUBDOMAIN.fullmatch(name) or len(name) > 253:
        found.append(f"metadata.name {name!r} is not a DNS-1123 subdomain")
    elif not LABEL_VALUE.fullmatch(name) or len(name) > 63:
        found.append(f"metadata.name {name!r} cannot be KEDA's scaledobject.keda.sh/name label")
    if namespace is not None and (
        not goyaml.is_string(namespace) or not DNS1123_LABEL.fullmatch(namespace)
    ):
        found.append(f"metadata.namespace {namespace!r} is not a DNS-1123 label")
    for key, value in (metadata.get("labels") or {}).items():
        if not goyaml.is_string(value) or not LABEL_VALUE.fullmatch(value) or len(value) > 63:
            found.append(f"label {key} has an invalid value {value!r}")
    for key, value in (metadata.get("annotations") or {}).items():
        if not goyaml.is_string(value):
            found.append(f"annotation {key} is not a string: {value!r}")
    return found


def quantity(text: str) -> Decimal:
    """The value of a Kubernetes Quantity string (decimal and binary suffixes)."""
    match = QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a quantity")
    number, suffix = match.groups()
    scale = {"n": "1e-9", "u": "1e-6", "m": "1e-3", "k": "1e3", "M": "1e6", "G": "1e9"}
    scale |= {"T": "1e12", "P": "1e15", "E": "1e18"}
    binary = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
    try:
        value = Decimal(number)
    except InvalidOperation as exc:
        raise ValueError(f"{text!r} is not a quantity") from exc
    if suffix is None:
        return value
    if suffix in binary:
        return value * binary[suffix]
    if suffix in scale:
        return value * Decimal(scale[suffix])
    return value * Decimal("1" + suffix)


def hpa_behavior_problems(behavior: dict[str, Any]) -> list[str]:
    found = []
    for direction in ("scaleUp", "scaleDown"):
        rules = behavior.get(direction)
        if rules is None:
            continue
        window = rules.get("stabilizationWindowSeconds", 0)
        if not 0 <= window <= 3600:
            found.append(f"{direction}.stabilizationWindowSeconds {window} not in 0..3600")
        if rules.get("selectPolicy", "Max") not in ("Max", "Min", "Disabled"):
            found.append(f"{direction}.selectPolicy {rules['selectPolicy']!r}")
        for policy in rules.get("policies", []):
            if policy.get("type") not in ("Pods", "Percent") or policy.get("value", 0) <= 0:
                found.append(f"{direction} policy {policy} must be Pods/Percent with value > 0")
            if not 0 < policy.get("periodSeconds", 0) <= 1800:
                found.append(f"{direction} policy periodSeconds not in 1..1800: {policy}")
        if "tolerance" in rules:
            try:
                if quantity(str(rules["tolerance"])) < 0:
                    found.append(f"{direction}.tolerance must be >= 0")
            except ValueError as exc:
                found.append(f"{direction}.tolerance: {exc}")
    return found
