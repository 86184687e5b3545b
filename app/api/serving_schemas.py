"""API schemas of a deployment's serving-metrics source (:mod:`app.sources.serving_spec`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.source_fields import (
    ImportState,
    lookback_field,
    timeout_field,
    token_field,
    url_field,
)
from app.sources.serving_spec import (
    ENGINES,
    KUBE_NAME_PATTERN,
    MAX_NAME_LENGTH,
    MAX_SELECTOR_LENGTH,
    METRIC_NAME_PATTERN,
    SELECTOR_PATTERN,
    ServingSpec,
)
from app.sources.spec import MAX_QUERY_LENGTH


def _name(what: str) -> Any:
    return Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description=f"the {what} series name (default: the engine preset's)",
        json_schema_extra={"pattern": METRIC_NAME_PATTERN},
    )


class ServingSourceIn(BaseModel):
    """PUT replaces the whole serving source: send the bearer token again, it is never
    returned."""

    model_config = ConfigDict(extra="forbid")

    url: str = url_field()
    engine: Literal[ENGINES] = Field(  # type: ignore[valid-type]
        default="vllm", description="whose series names are the defaults"
    )
    ttft_histogram: str | None = _name("time-to-first-token histogram")
    tpot_histogram: str | None = _name("time-per-output-token histogram")
    requests_counter: str | None = _name("finished-requests counter")
    prompt_tokens_counter: str | None = _name("prompt-tokens counter")
    completion_tokens_counter: str | None = _name("generation-tokens counter")
    running_gauge: str | None = _name("running-requests gauge (one series per replica)")
    selector: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SELECTOR_LENGTH,
        examples=['model_name="llama-3.1-70b",namespace="prod"'],
        description="label matchers (without braces) added to every engine series",
        json_schema_extra={"pattern": SELECTOR_PATTERN},
    )
    kube_deployment: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="count replicas with kube-state-metrics' "
        "kube_deployment_status_replicas_available of this Kubernetes deployment (not with "
        "replicas_query)",
        json_schema_extra={"pattern": KUBE_NAME_PATTERN},
    )
    replicas_query: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_QUERY_LENGTH,
        description="PromQL of the hour's average replica count at its end, as one series",
    )
    bearer_token: str | None = token_field()
    timeout_s: float = timeout_field()
    lookback_hours: int = lookback_field(
        "how far back an import looks for hours the profile has not stored"
    )

    @model_validator(mode="after")
    def _valid_source(self) -> ServingSourceIn:
        self.spec().validate()
        return self

    def spec(self) -> ServingSpec:
        return ServingSpec(**self.model_dump())


class ServingSourceOut(ImportState):
    """A deployment's serving source with its import state; credentials redacted, the token
    only "set"; ``queries`` is the PromQL each closed hour is measured with."""

    series: str
    url: str
    engine: str
    ttft_histogram: str
    tpot_histogram: str
    requests_counter: str
    prompt_tokens_counter: str
    completion_tokens_counter: str
    running_gauge: str
    selector: str | None
    kube_deployment: str | None
    replicas_query: str | None
    bearer_token: Literal["set"] | None
    timeout_s: float
    lookback_hours: int
    queries: dict[str, str]
    hours_skipped_total: int
