"""Generated ScaledObject and target Deployment names are unique per series: series whose
readable forms collide, or that differ only after the 63rd character, never share one."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

import capacity
from app import ingest
from app.common.names import validate_series_name
from app.db import Database
from app.jobs import ForecastOptions, run_forecasts
from app.plans.kubernetes import k8s_name
from tests.app.test_grafana import PROFILE, SERIES, loaded  # noqa: F401 (fixture)
from tests.app.test_grafana_plan_backtest import FAST
from tests.app.test_jobs import daily_load
from tests.conformance import goyaml
from tests.conformance.kube_validation import hpa_name, problems

LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
NAME_CHARS = st.sampled_from("aAbB09._:@+=-")
SERIES_NAMES = (
    st.lists(st.text(NAME_CHARS, min_size=1, max_size=40), min_size=1, max_size=4)
    .map("/".join)
    .filter(lambda n: n[0].isalnum())
    .filter(lambda n: all(p not in (".", "..") for p in n.split("/")))
)


def test_the_issue_examples_differ() -> None:
    assert k8s_name("demo/servegen-m-small") != k8s_name("Demo/ServeGen.M_Small")
    long = "prod-us/" + "x" * 60
    assert k8s_name(long + "-a") != k8s_name(long + "-b")
    assert k8s_name("demo/servegen-m-small").startswith("demo-servegen-m-small-")


def test_a_series_already_a_dns_label_keeps_its_name_unless_it_looks_hashed() -> None:
    assert k8s_name("chat-eu") == "chat-eu"
    hashed = k8s_name("demo/servegen-m-small")
    assert k8s_name(hashed) != hashed  # a series named like another's object gets its own


@given(st.lists(SERIES_NAMES, min_size=2, max_size=30, unique=True))
def test_names_are_dns_labels_stable_and_unique(names: list[str]) -> None:
    generated = [k8s_name(validate_series_name(n)) for n in names]
    assert len(set(generated)) == len(names)
    for name, object_name in zip(names, generated, strict=True):
        assert LABEL.fullmatch(object_name) and len(object_name) <= 63
        assert k8s_name(name) == object_name


@pytest.fixture
def colliding(loaded: TestClient, database: Database) -> TestClient:  # noqa: F811
    """A second series whose readable form is the first one's."""
    other = "Prod-US/Llama-3.1-70B"
    with database.transaction() as session:
        ingest.store(session, daily_load(days=8).assign(series=other), create_series=True)
    options = ForecastOptions(series=(other,), models=FAST, workers=1)
    assert not run_forecasts(database, options).failed
    return loaded


def test_two_series_that_read_the_same_scale_different_deployments(colliding: TestClient) -> None:
    objects = []
    for series in (SERIES, "Prod-US/Llama-3.1-70B"):
        response = colliding.get(f"/v1/series/{series}/kubernetes", params={"profile": PROFILE})
        assert response.status_code == 200, response.text
        document = goyaml.load(response.text)
        assert problems(document) == []
        objects.append(document)
    names = [d["metadata"]["name"] for d in objects]
    targets = [d["spec"]["scaleTargetRef"]["name"] for d in objects]
    assert names[0] != names[1] and targets[0] != targets[1]
    assert targets == names  # the default Deployment is named like the object
    chosen = colliding.get(
        f"/v1/series/{SERIES}/kubernetes", params={"profile": PROFILE, "deployment": "vllm-70b"}
    )
    assert goyaml.load(chosen.text)["spec"]["scaleTargetRef"]["name"] == "vllm-70b"


def test_the_route_writes_the_hpa_tolerance(loaded: TestClient) -> None:  # noqa: F811
    def behavior(**params: str) -> dict:
        response = loaded.get(
            f"/v1/series/{SERIES}/kubernetes", params={"profile": PROFILE, **params}
        )
        assert response.status_code == 200, response.text
        document = goyaml.load(response.text)
        assert problems(document) == []
        return document["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]

    assert behavior()["scaleUp"]["tolerance"] == "0" == behavior()["scaleDown"]["tolerance"]
    assert "tolerance" not in behavior(hpa_tolerance="none")["scaleUp"]
    assert behavior(hpa_tolerance="0.05")["scaleDown"]["tolerance"] == "0.05"
    for bad in ("2", "-0.1", "ten"):
        for route in ("kubernetes", "capacity", "desired-replicas"):
            response = loaded.get(
                f"/v1/series/{SERIES}/{route}", params={"profile": PROFILE, "hpa_tolerance": bad}
            )
            assert response.status_code == 422 and "hpa_tolerance" in response.json()["detail"]


def test_the_url_keda_polls_serves_the_plan_for_the_tolerance_written(
    loaded: TestClient,  # noqa: F811
) -> None:
    def polled_url(**params: str) -> str:
        response = loaded.get(
            f"/v1/series/{SERIES}/kubernetes", params={"profile": PROFILE, **params}
        )
        assert response.status_code == 200, response.text
        return goyaml.load(response.text)["spec"]["triggers"][0]["metadata"]["url"]

    assert "hpa_tolerance" not in polled_url()  # the default, 0
    for setting, query in (("none", "hpa_tolerance=none"), ("0.1", "hpa_tolerance=0.1")):
        url = polled_url(hpa_tolerance=setting)
        assert query in url
        # the plan KEDA polls is the plan calibrated for that tolerance, and it is served
        path = url.split("://", 1)[1].split("/", 1)[1]
        served = loaded.get(f"/{path}")
        assert served.status_code == 200, served.text
        plan = loaded.get(
            f"/v1/series/{SERIES}/capacity", params={"profile": PROFILE, "hpa_tolerance": setting}
        )
        assert plan.status_code == 200 and plan.json()["hpa_tolerance"] == (
            None if setting == "none" else 0.1
        )


# -- KEDA >= 2.20: the HPA's name fits in 63 characters ----------------------------------------

ISSUE_SERIES = "prod-us-east-1/meta-llama-3.1-70b-instruct-fp8-long-context"


@given(SERIES_NAMES)
def test_generated_names_leave_room_for_keda_s_hpa_prefix(name: str) -> None:
    object_name = k8s_name(validate_series_name(name))
    assert len(object_name) <= 54 and len(f"keda-hpa-{object_name}") <= 63


def test_a_long_series_gets_an_object_keda_2_20_accepts(
    loaded: TestClient,  # noqa: F811
    database: Database,
) -> None:
    """The issue's series (a 62-character object before) and a 63-character one."""
    longest = "prod-eu-west-1/" + "m" * 48
    assert len(longest) == 63
    for series in (ISSUE_SERIES, longest):
        with database.transaction() as session:
            ingest.store(session, daily_load(days=8).assign(series=series), create_series=True)
        options = ForecastOptions(series=(series,), models=FAST, workers=1)
        assert not run_forecasts(database, options).failed
        for mode in ("live", "cron"):
            params = {"profile": PROFILE, "mode": mode}
            response = loaded.get(f"/v1/series/{series}/kubernetes", params=params)
            assert response.status_code == 200, response.text
            document = goyaml.load(response.text)
            assert problems(document) == [], (series, mode)
            name = document["metadata"]["name"]
            assert len(name) <= 54 and hpa_name(document) == f"keda-hpa-{name}"
            assert "name" not in document["spec"]["advanced"]["horizontalPodAutoscalerConfig"]


@pytest.mark.parametrize("length", [1, 53, 54, 55, 62, 63])
def test_a_longer_object_name_names_its_hpa_itself(length: int) -> None:
    """An object named by the library's caller: up to 54 characters KEDA's own HPA name fits;
    beyond, the object states one of 63 characters, unique to its name."""
    name = ("chat-" + "x" * 70)[:length].rstrip("-") or "c"
    plan = pd.DataFrame({"hour": pd.date_range("2027-01-11", periods=2, freq="h", tz="UTC")})
    plan["replicas"] = [1, 2]
    url = "http://gpucast:8000/v1/series/chat/desired-replicas"
    document = goyaml.load(
        capacity.keda_scaled_object(
            plan, name=name, namespace="inference", deployment="chat", desired_replicas_url=url
        )
    )
    assert problems(document) == []
    config = document["spec"]["advanced"]["horizontalPodAutoscalerConfig"]
    if len(name) <= 54:
        assert "name" not in config and hpa_name(document) == f"keda-hpa-{name}"
    else:
        assert len(config["name"]) <= 63 and config["name"].startswith("keda-hpa-chat-")
        assert config["name"] != capacity.keda_hpa_name(name[:-1] + "y")
    with pytest.raises(capacity.InvalidParameterError, match="DNS-1123 label"):
        capacity.keda_scaled_object(
            plan, name="x" * 64, namespace="n", deployment="d", desired_replicas_url=url
        )
