"""docker-compose.yml cannot run here (no Docker engine); check its structure instead."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from croniter import croniter

from app.cli import build_parser
from tests.conformance.grafana_plugin import PLUGIN_VERSION

ROOT = Path(__file__).resolve().parents[1]


def load_compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_postgres_service_has_healthcheck_and_volume() -> None:
    postgres = load_compose()["services"]["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    volume = postgres["volumes"][0].split(":")[0]
    assert volume in load_compose()["volumes"]


def test_api_waits_for_healthy_postgres_and_migrates_first() -> None:
    api = load_compose()["services"]["api"]
    assert api["build"] == "."
    assert api["depends_on"]["postgres"]["condition"] == "service_healthy"
    url = api["environment"]["GPUCAST_DATABASE_URL"]
    assert url.startswith("postgresql://") and "@postgres:5432/" in url
    command = " ".join(api["command"])
    assert command.index("gpucast db upgrade") < command.index("gpucast serve")
    assert (ROOT / "Dockerfile").is_file()


def test_dockerfile_copies_every_package() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for package in ("app", "forecasting", "capacity", "migrations"):
        assert f"COPY {package} ./{package}" in dockerfile


def test_scheduler_runs_the_nightly_job_after_the_api_migrated() -> None:
    services = load_compose()["services"]
    scheduler = services["scheduler"]
    assert scheduler["build"] == services["api"]["build"]
    command = " ".join(scheduler["command"])
    assert command.startswith("gpucast schedule --cron")
    assert croniter.is_valid(scheduler["command"][scheduler["command"].index("--cron") + 1])
    # The hourly import + refresh cycle is on: not switched off, not run once.
    args = build_parser().parse_args(scheduler["command"][1:])
    assert not args.no_hourly and not args.hourly_once and args.hourly_minute == 5
    url = scheduler["environment"]["GPUCAST_DATABASE_URL"]
    assert url == services["api"]["environment"]["GPUCAST_DATABASE_URL"]
    assert scheduler["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert scheduler["depends_on"]["api"]["condition"] in ("service_started", "service_healthy")
    assert scheduler["restart"] == "unless-stopped"
    # The image's HEALTHCHECK probes the API port; the scheduler must not inherit it.
    assert scheduler["healthcheck"] == {"disable": True}


def test_the_example_scaled_object_is_valid_and_its_auth_is_wired() -> None:
    import jsonschema

    schema = json.loads(
        (ROOT / "tests" / "capacity" / "schemas" / "keda-scaledobject.schema.json").read_text()
    )
    secret, auth, scaled = yaml.safe_load_all(
        (ROOT / "deploy" / "kubernetes" / "scaledobject.yaml").read_text()
    )
    jsonschema.validate(scaled, schema)
    live = scaled["spec"]["triggers"][0]
    assert live["type"] == "metrics-api" and "/desired-replicas?profile=" in live["metadata"]["url"]
    assert live["authenticationRef"]["name"] == auth["metadata"]["name"]
    (ref,) = auth["spec"]["secretTargetRef"]
    assert (ref["name"], ref["parameter"]) == (secret["metadata"]["name"], "token")
    assert ref["key"] in secret["stringData"]
    assert scaled["spec"]["fallback"]["replicas"] >= 1
    assert {secret["metadata"]["namespace"], auth["metadata"]["namespace"]} == {
        scaled["metadata"]["namespace"]
    }


def test_kubernetes_cronjob_runs_nightly_without_overlap() -> None:
    cronjob = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "cronjob.yaml").read_text())
    assert cronjob["apiVersion"] == "batch/v1"
    assert cronjob["kind"] == "CronJob"
    spec = cronjob["spec"]
    assert croniter.is_valid(spec["schedule"]) and spec["schedule"] == "0 2 * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] >= 0
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # required by podFailurePolicy
    (container,) = pod["containers"]
    assert container["command"] == ["gpucast", "forecast", "--all", "--workers", "2"]
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env["GPUCAST_DATABASE_URL"]["valueFrom"]
    assert {"requests", "limits"} <= set(container["resources"])
    rule = job["podFailurePolicy"]["rules"][0]
    assert rule["onExitCodes"]["containerName"] == container["name"]
    assert 4 in rule["onExitCodes"]["values"]  # another run holds the lock: never retry


def test_crontab_lines_are_valid_and_run_the_nightly_job_and_the_hourly_cycle() -> None:
    lines = [
        line.strip()
        for line in (ROOT / "deploy" / "crontab").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    env = dict(line.split("=", 1) for line in lines if re.match(r"^[A-Z_]+=", line))
    nightly, hourly = [line for line in lines if not re.match(r"^[A-Z_]+=", line)]
    assert env["CRON_TZ"] == "UTC"
    assert env["GPUCAST_DATABASE_URL"].startswith("postgresql://")
    for job, expected_schedule, expected_command in (
        (nightly, "0 2 * * *", "gpucast forecast --all"),
        (hourly, "5 * * * *", "gpucast schedule --hourly-once"),
    ):
        fields = job.split(None, 5)
        schedule, command = " ".join(fields[:5]), fields[5]
        assert croniter.is_valid(schedule) and schedule == expected_schedule
        assert expected_command in command
        assert ">>" in command and "2>&1" in command
        assert "%" not in command  # cron turns an unescaped % into a newline
    # Separate flock files: the hourly cycle must not stop the nightly run from starting.
    locks = [re.search(r"flock -n -E 4 (\S+)", job)[1] for job in (nightly, hourly)]
    assert len(set(locks)) == 2


def test_kubernetes_hourly_cronjob_runs_one_cycle_an_hour_without_overlap() -> None:
    nightly = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "cronjob.yaml").read_text())
    cronjob = yaml.safe_load((ROOT / "deploy" / "kubernetes" / "hourly-cronjob.yaml").read_text())
    assert (cronjob["apiVersion"], cronjob["kind"]) == ("batch/v1", "CronJob")
    assert cronjob["metadata"]["name"] != nightly["metadata"]["name"]
    spec = cronjob["spec"]
    assert croniter.is_valid(spec["schedule"]) and spec["schedule"] == "5 * * * *"
    assert spec["timeZone"] == nightly["spec"]["timeZone"] == "Etc/UTC"
    assert spec["concurrencyPolicy"] == "Forbid"
    job = spec["jobTemplate"]["spec"]
    assert job["activeDeadlineSeconds"] < 3600  # done before the next cycle is due
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    assert container["command"] == ["gpucast", "schedule", "--hourly-once"]
    assert build_parser().parse_args(container["command"][1:]).hourly_once
    env = {e["name"]: e for e in container["env"]}
    nightly_env = {e["name"]: e for e in nightly["spec"]["jobTemplate"]["spec"]["template"]
                   ["spec"]["containers"][0]["env"]}  # fmt: skip
    assert env["GPUCAST_DATABASE_URL"] == nightly_env["GPUCAST_DATABASE_URL"]
    assert {"requests", "limits"} <= set(container["resources"])
    rule = job["podFailurePolicy"]["rules"][0]
    assert rule["onExitCodes"]["containerName"] == container["name"]
    assert {1, 4} <= set(rule["onExitCodes"]["values"])


GRAFANA = ROOT / "deploy" / "grafana"


def test_grafana_service_installs_the_plugin_and_mounts_provisioning() -> None:
    compose = load_compose()
    grafana = compose["services"]["grafana"]
    assert re.fullmatch(r"grafana/grafana:11\.[\d.]+", grafana["image"])
    # the plugin version whose variable interpolation tests/conformance reproduce
    plugin = f"simpod-json-datasource {PLUGIN_VERSION}"
    assert grafana["environment"]["GF_INSTALL_PLUGINS"] == plugin
    assert grafana["ports"] == ["127.0.0.1:3000:3000"]
    assert "api" in grafana["depends_on"]
    mounts = {}
    for volume in grafana["volumes"]:
        source, target = volume.split(":")[:2]
        mounts[target] = source
        if source.startswith("./"):
            assert (ROOT / source).is_dir(), source
        else:
            assert source in compose["volumes"]
    assert mounts["/etc/grafana/provisioning"] == "./deploy/grafana/provisioning"
    provider = yaml.safe_load((GRAFANA / "provisioning/dashboards/gpucast.yaml").read_text())
    (dashboards,) = provider["providers"]
    assert dashboards["type"] == "file"
    assert mounts[dashboards["options"]["path"]] == "./deploy/grafana/dashboards"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith(dashboards["options"]["path"] + "/")
    assert (GRAFANA / "dashboards" / home.rsplit("/", 1)[1]).is_file()


def test_grafana_datasource_points_at_the_api() -> None:
    provisioning = yaml.safe_load((GRAFANA / "provisioning/datasources/gpucast.yaml").read_text())
    (datasource,) = provisioning["datasources"]
    assert datasource["type"] == "simpod-json-datasource"
    assert datasource["url"] == "http://api:8000/grafana"
    assert datasource["access"] == "proxy"  # server side, so the auth header stays secret
    assert datasource["jsonData"]["httpHeaderName1"] == "Authorization"
    assert datasource["secureJsonData"]["httpHeaderValue1"].startswith("Bearer ")
    api = load_compose()["services"]["api"]
    assert "8000" in " ".join(api["command"]) and "/grafana" in datasource["url"]


def _dashboard_queries(dashboard: dict) -> list[dict]:
    queries = [t for panel in dashboard["panels"] for t in panel["targets"]]
    queries += [a["target"] for a in dashboard["annotations"]["list"] if "target" in a]
    return queries


def test_dashboard_uses_only_targets_the_datasource_serves() -> None:
    from app.grafana import TARGETS, VARIABLES

    provisioning = yaml.safe_load((GRAFANA / "provisioning/datasources/gpucast.yaml").read_text())
    uid = provisioning["datasources"][0]["uid"]
    dashboard = json.loads((GRAFANA / "dashboards" / "gpucast.json").read_text())
    queries = _dashboard_queries(dashboard)
    used = {q["target"] for q in queries}
    unknown = used - set(TARGETS)
    assert not unknown, f"dashboard uses targets the datasource does not serve: {unknown}"
    assert {"history", "forecast", "gpus", "cost", "backtest"} <= used
    annotations = {a["target"]["target"] for a in dashboard["annotations"]["list"] if "target" in a}
    assert annotations == {"events", "anomalies", "scale_events"}
    assert all(TARGETS[name].annotation for name in annotations)
    for query in queries:
        assert isinstance(query["payload"], dict)
        names = {p.name for p in TARGETS[query["target"]].payloads}
        assert set(query["payload"]) <= names, (query["target"], query["payload"])
    sources = [p["datasource"] for p in dashboard["panels"]]
    sources += [t["datasource"] for p in dashboard["panels"] for t in p["targets"]]
    assert all(s == {"type": "simpod-json-datasource", "uid": uid} for s in sources)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["series"]["type"] == "query"
    assert variables["series"]["query"]["query"] == "series"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["query"]["query"] in VARIABLES
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
