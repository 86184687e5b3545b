"""A deployment's serving-metrics source: the Prometheus server and the series its engine
exports, from which the hourly cycle measures each closed hour of the fleet (the production
hours a GPU profile learns from).

Per closed hour ``[t - 1h, t)`` it asks Prometheus at ``t``:

- ``ttft_p95_s``, ``tpot_p95_s``: ``histogram_quantile(0.95, sum by (le)
  (increase(NAME_bucket{selector}[1h])))`` — the p95 as Prometheus computes it from the buckets;
- ``requests``, ``prompt_tokens``, ``completion_tokens``: ``sum(increase(NAME{selector}[1h]))``;
- ``replicas``: the hour's average replica count — kube-state-metrics'
  ``kube_deployment_status_replicas_available{deployment="…"}`` when a Kubernetes deployment is
  named, otherwise the count of the engine's running-requests series (one per replica), or a
  PromQL expression of the user's own.

The metric names default to the engine preset's (:data:`PRESETS`; vLLM unless told) and can be
set one by one. The URL and credentials are handled as a series' load source
(:mod:`app.sources.spec`): stored, never shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from app.errors import InputError
from app.sources.spec import (
    DEFAULT_LOOKBACK_HOURS,
    DEFAULT_TIMEOUT_S,
    validate_limits,
    validate_query,
    validate_token,
    validate_url,
)

NAMES = (
    "ttft_histogram",
    "tpot_histogram",
    "requests_counter",
    "prompt_tokens_counter",
    "completion_tokens_counter",
    "running_gauge",
)


@dataclass(frozen=True)
class Preset:
    """The series one serving engine exports (None: the engine exports no such series)."""

    ttft_histogram: str | None
    tpot_histogram: str | None
    requests_counter: str
    prompt_tokens_counter: str
    completion_tokens_counter: str
    running_gauge: str


# vLLM: vllm/engine/metrics.py and vllm/v1/metrics/loggers.py (the V1 engine deprecates the
# per-token time_per_output_token for inter_token_latency_seconds and adds the per-request
# request_time_per_output_token_seconds, what load tests report as TPOT). SGLang:
# sglang/srt/metrics/collector.py. NIM for LLMs: its observability page (no prefix; it documents
# no finished-requests counter, so requests are its end-to-end latency histogram's count). TGI:
# router metrics; TGI exports no time-to-first-token histogram, so its preset needs one given.
PRESETS: dict[str, Preset] = {
    "vllm": Preset(
        ttft_histogram="vllm:time_to_first_token_seconds",
        tpot_histogram="vllm:time_per_output_token_seconds",
        requests_counter="vllm:request_success_total",
        prompt_tokens_counter="vllm:prompt_tokens_total",
        completion_tokens_counter="vllm:generation_tokens_total",
        running_gauge="vllm:num_requests_running",
    ),
    "sglang": Preset(
        ttft_histogram="sglang:time_to_first_token_seconds",
        tpot_histogram="sglang:time_per_output_token_seconds",
        requests_counter="sglang:e2e_request_latency_seconds_count",
        prompt_tokens_counter="sglang:prompt_tokens_total",
        completion_tokens_counter="sglang:generation_tokens_total",
        running_gauge="sglang:num_running_reqs",
    ),
    "nim": Preset(
        ttft_histogram="time_to_first_token_seconds",
        tpot_histogram="time_per_output_token_seconds",
        requests_counter="e2e_request_latency_seconds_count",
        prompt_tokens_counter="prompt_tokens_total",
        completion_tokens_counter="generation_tokens_total",
        running_gauge="num_requests_running",
    ),
    "tgi": Preset(
        ttft_histogram=None,
        tpot_histogram="tgi_request_mean_time_per_token_duration",
        requests_counter="tgi_request_success",
        prompt_tokens_counter="tgi_request_input_length_sum",
        completion_tokens_counter="tgi_request_generated_tokens_sum",
        running_gauge="tgi_batch_current_size",
    ),
}
ENGINES = tuple(PRESETS)
KUBE_REPLICAS = "kube_deployment_status_replicas_available"
METRIC_NAME_PATTERN = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
MAX_NAME_LENGTH = 200
MAX_SELECTOR_LENGTH = 1000
# label matchers: name op "value", comma-separated (the value's quotes and backslashes escaped)
_MATCHER = r'[a-zA-Z_][a-zA-Z0-9_]*\s*(?:=~|!~|!=|=)\s*"(?:[^"\\\x00-\x1f]|\\.)*"'
SELECTOR_PATTERN = rf"^\s*{_MATCHER}(?:\s*,\s*{_MATCHER})*\s*,?\s*$"
KUBE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"

_NAME_RE = re.compile(METRIC_NAME_PATTERN)
_SELECTOR_RE = re.compile(SELECTOR_PATTERN)
_KUBE_RE = re.compile(KUBE_NAME_PATTERN)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")  # JSON carries them, no database stores them


@dataclass(frozen=True)
class ServingSpec:
    """Where and how the hourly cycle measures a deployment's production hours. Names left
    None take the engine preset's (:meth:`resolved`)."""

    url: str
    engine: str = "vllm"
    ttft_histogram: str | None = None
    tpot_histogram: str | None = None
    requests_counter: str | None = None
    prompt_tokens_counter: str | None = None
    completion_tokens_counter: str | None = None
    running_gauge: str | None = None
    selector: str | None = None
    kube_deployment: str | None = None
    replicas_query: str | None = None
    bearer_token: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    lookback_hours: int = DEFAULT_LOOKBACK_HOURS

    def resolved(self) -> ServingSpec:
        """This spec with every name the user left out taken from the engine preset."""
        if self.engine not in PRESETS:
            raise InputError(f"unknown engine {self.engine[:40]!r}; one of {', '.join(ENGINES)}")
        preset = PRESETS[self.engine]
        given = {name: getattr(self, name) or getattr(preset, name) for name in NAMES}
        return replace(self, **given)

    def validate(self) -> ServingSpec:
        """The resolved spec, or an :class:`InputError` naming the first bad field."""
        spec = self.resolved()
        validate_url(spec.url)
        for name in NAMES:
            value = getattr(spec, name)
            if value is None:
                raise InputError(
                    f"the {spec.engine} engine exports no {name.replace('_', ' ')}; give its "
                    f"series name ({name})"
                )
            validate_metric_name(value, what=name)
        if spec.selector is not None:
            validate_selector(spec.selector)
        if spec.kube_deployment is not None and spec.replicas_query is not None:
            raise InputError("give kube_deployment or replicas_query, not both")
        if spec.kube_deployment is not None and not _KUBE_RE.fullmatch(spec.kube_deployment):
            raise InputError(
                f"kube_deployment {spec.kube_deployment[:60]!r} is not a Kubernetes object name "
                "(lowercase letters, digits, '-' and '.', at most 253)"
            )
        if spec.replicas_query is not None:
            validate_query(spec.replicas_query, metric="replicas")
        if spec.bearer_token is not None:
            validate_token(spec.bearer_token)
        validate_limits(timeout_s=spec.timeout_s, lookback_hours=spec.lookback_hours)
        return spec

    def queries(self) -> list[tuple[str, str]]:
        """(observation field, PromQL evaluated at the hour's end) of a validated spec,
        requests first."""
        matchers = f"{{{self.selector.strip()}}}" if self.selector else ""

        def increase(name: str | None) -> str:
            return f"sum(increase({name}{matchers}[1h]))"

        def p95(name: str | None) -> str:
            return f"histogram_quantile(0.95, sum by (le) (increase({name}_bucket{matchers}[1h])))"

        return [
            ("requests", increase(self.requests_counter)),
            ("prompt_tokens", increase(self.prompt_tokens_counter)),
            ("completion_tokens", increase(self.completion_tokens_counter)),
            ("ttft_p95_s", p95(self.ttft_histogram)),
            ("tpot_p95_s", p95(self.tpot_histogram)),
            ("replicas", self.replicas_promql()),
        ]

    def replicas_promql(self) -> str:
        """The hour's average replica count (one point a minute)."""
        if self.replicas_query is not None:
            return self.replicas_query
        if self.kube_deployment is not None:
            counted = f'sum({KUBE_REPLICAS}{{deployment="{self.kube_deployment}"}})'
        else:
            matchers = f"{{{self.selector.strip()}}}" if self.selector else ""
            counted = f"count({self.running_gauge}{matchers})"
        return f"avg_over_time({counted}[1h:1m])"


def validate_metric_name(name: str, *, what: str) -> str:
    if len(name) > MAX_NAME_LENGTH or not _NAME_RE.fullmatch(name):
        raise InputError(
            f"{what} {name[:60]!r} is not a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*, "
            f"at most {MAX_NAME_LENGTH} characters)"
        )
    return name


def validate_selector(selector: str) -> str:
    if (
        len(selector) > MAX_SELECTOR_LENGTH
        or not _SELECTOR_RE.fullmatch(selector)
        or _SURROGATE_RE.search(selector)
    ):
        raise InputError(
            f"selector {selector[:60]!r} must be Prometheus label matchers without braces, "
            'e.g. model_name="llama-3.1-70b",namespace=~"prod-.*"'
        )
    return selector
