"""The Helm chart helm/wow-temporal, rendered and linted offline by Helm itself (helm-python-sdk):
for the default values and with every option on. What renders must be what the worker, the
control API and the domain host really do: probes on their real endpoints, the settings file at
the path WOW_CONFIG names (and accepted by `load_settings`), secrets only referenced, the schema
refusing bad values with a message naming the key, `helm lint` clean. Also the Dockerfile's few
promises."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import typer
import yaml

from wow_temporal.cli.host import domain_host
from wow_temporal.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "wow-temporal"
RELEASE = "wt"
NAMESPACE = "scheduling"

# Fake secret values: the cluster's Secrets hold them; no rendered manifest may.
SECRET_VALUES = {
    ("temporal-mtls", "tls.crt"): "-----BEGIN CERTIFICATE-----\nFAKE-CLIENT-CERT\n",
    ("temporal-mtls", "tls.key"): "-----BEGIN PRIVATE KEY-----\nFAKE-CLIENT-KEY\n",
    ("temporal-mtls", "ca.crt"): "-----BEGIN CERTIFICATE-----\nFAKE-SERVER-CA\n",
    ("temporal-cloud", "api-key"): "temporal-api-key-s3cr3t-0042",
    ("wow-api-auth", "token"): "operator-token-s3cr3t-0042",
    ("wow-api-auth", "tenants.yaml"): "tenant-a: tenant-a-token-s3cr3t\ntenant-b: [b-new-s3cr3t]\n",
    ("wow-host-db", "uri"): "postgresql://shop@postgres.db:5432/shop?application_name=s3cr3t-0042",
    ("wow-host-pg", "pw"): "pg-password-s3cr3t-0042",
}
POD = "wt-wow-temporal-host-5d8f7c9b6-x2x4q"
"""The pod name the downward API gives a materialized pod's `metadata.name`."""
REPLICA_ENV = "WOW_HOST_REPLICA"
"""The host replica's name at /wow/followers; not yet a variable `load_settings` knows (#19's
integration adds it), so left out of the environment the tests load."""

EVERYTHING: dict[str, Any] = {
    "image": {"repository": "registry.example/wow-temporal", "tag": "1.2.3"},
    "hostUrl": "https://orders.example:8443",
    "temporal": {
        "address": "my-ns.a1b2c.tmprl.cloud:7233",
        "namespace": "my-ns.a1b2c",
        "tls": {
            "enabled": True,
            "serverName": "my-ns.a1b2c.tmprl.cloud",
            "existingSecret": "temporal-mtls",
            "caKey": "ca.crt",
        },
        "apiKey": {"existingSecret": "temporal-cloud", "key": "api-key"},
    },
    "settings": {
        "timers": {"poll-interval": "500ms", "max-attempts": 5, "retry-max-interval": "2m"},
        "schedules": {
            "restock": {
                "expression": "0 */5 * * * *",
                "zone": "Europe/Paris",
                "misfire": "catch-up",
            },
            "nightly-report": {"enabled": False, "partitions": 4},
        },
        "worker": {
            "max-concurrent-activities": 50, "workflow-pollers": 8, "activity-pollers": "auto"
        },
        "log-format": "json",
    },
    "telemetry": {
        "tracing": True,
        "otlpEndpoint": "http://otel-collector.observability:4318",
        "metrics": "prometheus",
    },
    "worker": {
        "app": "workers.eshop.inventory:app",
        "shutdownTimeoutSeconds": 90,
        "healthPort": 8181,
        "metrics": {"enabled": True, "port": 9464},
        "jobContexts": ["eshop-inventory"],
        "extraEnv": [{"name": "WOW_TIMERS_RETRY_BACKOFF", "value": "3"}],
        "keda": {"enabled": True, "minReplicaCount": 1, "maxReplicaCount": 20},
    },
    "api": {
        "enabled": True,
        "app": "workers.eshop.inventory:app",
        "replicas": 2,
        "port": 8088,
        "metrics": {"enabled": True, "port": 9465},
        "auth": {
            "existingSecret": "wow-api-auth",
            "tokenKey": "token",
            "tenantTokensKey": "tenants.yaml",
        },
        "pdb": {"enabled": True},
    },
    "host": {
        "enabled": True,
        "app": "workers.eshop:apps",
        "replicas": 3,
        "port": 8090,
        "metrics": {"enabled": True, "port": 9466},
        "db": {
            "existingSecret": "wow-host-db",
            "key": "uri",
            "passwordSecret": "wow-host-pg",
            "passwordKey": "pw",
        },
        "extraEnv": [{"name": "WOW_LOG_FORMAT", "value": "text"}],
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
            }
        ],
    },
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
}

# The domain host alone, its store's URI in a Secret; hostUrl left empty, so the worker
# delivers to the chart's host Service.
HOST: dict[str, Any] = {
    "host": {"enabled": True, "app": "workers.eshop:apps", "db": {"existingSecret": "wow-host-db"}}
}

# Metrics pushed to the collector: nothing serves /metrics, so no ServiceMonitor either.
OTLP_METRICS: dict[str, Any] = {
    "telemetry": {"otlpEndpoint": "https://otel-collector.observability:4318", "metrics": "otlp"},
    "api": {"enabled": True, "auth": {"existingSecret": "wow-api-auth"}},
}


@pytest.fixture(scope="module")
def chart() -> Iterator[Any]:
    with helm.Chart.load(CHART) as loaded:
        yield loaded


def render(chart: Any, values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every object the chart renders (NOTES.txt aside), parsed."""
    manifests = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    objects = []
    for path, text in manifests.items():
        if path.endswith("NOTES.txt"):
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return objects


def only(objects: list[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    found = [
        o
        for o in objects
        if o["kind"] == kind
        and (
            component is None or o["metadata"]["labels"]["app.kubernetes.io/component"] == component
        )
    ]
    assert len(found) == 1, f"expected one {kind} {component or ''}, got {len(found)}"
    return found[0]


def kinds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["kind"] for o in objects}


def container(deployment: dict[str, Any]) -> dict[str, Any]:
    (one,) = deployment["spec"]["template"]["spec"]["containers"]
    return one


def env_of(one: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in one["env"]}


def settings_file(objects: list[dict[str, Any]], root: Path) -> Path:
    """The settings file the ConfigMap holds, written under `root`."""
    path = root / "settings.yaml"
    path.write_text(only(objects, "ConfigMap")["data"]["settings.yaml"], encoding="utf-8")
    return path


def port_number(one: dict[str, Any], name: str) -> int:
    return next(p["containerPort"] for p in one["ports"] if p["name"] == name)


def probe(one: dict[str, Any], kind: str) -> tuple[str, int]:
    """The path and the port number a probe asks."""
    get = one[kind]["httpGet"]
    port = get["port"]
    return get["path"], port if isinstance(port, int) else port_number(one, port)


def materialize(
    objects: list[dict[str, Any]], deployment: dict[str, Any], root: Path
) -> dict[str, str]:
    """Do what the kubelet does for the pod, under `root`: write each mounted ConfigMap and
    Secret file, resolve secretKeyRef variables; return the container's environment with every
    mounted path moved under `root`."""
    spec = deployment["spec"]["template"]["spec"]
    one = container(deployment)
    volumes = {v["name"]: v for v in spec["volumes"]}
    configmaps = {o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"}
    moved: list[tuple[str, Path]] = []
    for mount in one["volumeMounts"]:
        volume = volumes[mount["name"]]
        target = root / mount["mountPath"].lstrip("/")
        moved.append((mount["mountPath"], target))
        if "emptyDir" in volume:
            target.mkdir(parents=True, exist_ok=True)
            continue
        if "configMap" in volume:
            data = configmaps[volume["configMap"]["name"]]
            files = {i["path"]: data[i["key"]] for i in volume["configMap"]["items"]}
        else:
            secret = volume["secret"]["secretName"]
            files = {
                i["path"]: SECRET_VALUES[(secret, i["key"])] for i in volume["secret"]["items"]
            }
        if "subPath" in mount:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(files[mount["subPath"]], encoding="utf-8")
        else:
            for name, text in files.items():
                (target / name).parent.mkdir(parents=True, exist_ok=True)
                (target / name).write_text(text, encoding="utf-8")
    environ = {}
    for name, item in env_of(one).items():
        if "valueFrom" in item:
            source = item["valueFrom"]
            if "fieldRef" in source:
                assert source["fieldRef"] == {"fieldPath": "metadata.name"}
                environ[name] = POD
                continue
            ref = source["secretKeyRef"]
            environ[name] = SECRET_VALUES[(ref["name"], ref["key"])]
            continue
        value = item["value"]
        for path, target in moved:
            if value == path or value.startswith(path + "/"):
                value = str(target) + value[len(path) :]
        environ[name] = value
    return environ


# --- defaults ----------------------------------------------------------------------------------


def test_defaults_render_the_worker_and_no_optional_object(chart: Any) -> None:
    objects = render(chart)
    assert kinds(objects) == {
        "ConfigMap",
        "ServiceAccount",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    }
    worker = only(objects, "Deployment", "worker")
    one = container(worker)
    assert worker["spec"]["replicas"] == 2
    assert one["image"] == "wow-temporal:0.1.0"
    assert one["args"] == ["worker"]
    assert "command" not in one  # the image's ENTRYPOINT is wow-temporal
    assert not [o for o in objects if "host" in o["metadata"]["name"]]
    for o in objects:
        labels = o["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == "wow-temporal"
        assert labels["app.kubernetes.io/instance"] == RELEASE
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["helm.sh/chart"] == "wow-temporal-0.1.0"


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_worker_probes_ask_the_health_endpoints_on_the_health_port(
    chart: Any, values: dict[str, Any] | None, tmp_path: Path
) -> None:
    objects = render(chart, values)
    worker = only(objects, "Deployment", "worker")
    one = container(worker)
    settings = load_settings(environ=materialize(objects, worker, tmp_path))
    health_port = settings.worker.health_port
    assert health_port == (values or {}).get("worker", {}).get("healthPort", 8081)
    assert probe(one, "livenessProbe") == ("/livez", health_port)
    assert probe(one, "startupProbe") == ("/livez", health_port)
    assert probe(one, "readinessProbe") == ("/readyz", health_port)
    assert port_number(one, "metrics") == settings.worker.metrics_port == 9464


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_the_settings_file_reaches_the_path_wow_config_names_and_loads(
    chart: Any, values: dict[str, Any] | None, tmp_path: Path
) -> None:
    objects = render(chart, values)
    configmap = only(objects, "ConfigMap")
    for deployment in (o for o in objects if o["kind"] == "Deployment"):
        one = container(deployment)
        env = env_of(one)
        assert env["WOW_CONFIG"]["value"] == "/etc/wow-temporal/settings.yaml"
        mount = next(m for m in one["volumeMounts"] if m["mountPath"] == env["WOW_CONFIG"]["value"])
        assert mount["readOnly"] is True
        volume = next(
            v
            for v in deployment["spec"]["template"]["spec"]["volumes"]
            if v["name"] == mount["name"]
        )
        assert volume["configMap"]["name"] == configmap["metadata"]["name"]
        environ = materialize(objects, deployment, tmp_path / deployment["metadata"]["name"])
        settings = load_settings(environ=environ)  # what the pod's process would do at start
        connect = settings.temporal_connect_config()
        expected_temporal = (values or {}).get("temporal", {})
        assert connect["target_host"] == expected_temporal.get(
            "address", "temporal-frontend.temporal.svc.cluster.local:7233"
        )
        assert connect["namespace"] == expected_temporal.get("namespace", "default")
        grace = deployment["spec"]["template"]["spec"].get("terminationGracePeriodSeconds")
        if deployment["metadata"]["labels"]["app.kubernetes.io/component"] == "worker":
            assert settings.host_url == (values or {}).get("hostUrl", "http://domain-host:8089")
            timeout = settings.worker.shutdown_timeout.total_seconds()
            assert grace == timeout + 15
    if values is EVERYTHING:
        assert settings.timers.max_attempts == 5
        assert settings.timers.poll_interval.total_seconds() == 0.5
        assert settings.timers.retry_backoff == 3  # WOW_TIMERS_RETRY_BACKOFF from worker.extraEnv
        assert settings.schedules["restock"].zone == "Europe/Paris"
        assert settings.schedules["nightly-report"].enabled is False
        assert settings.worker.max_concurrent_activities == 50
        assert (settings.worker.workflow_pollers, settings.worker.activity_pollers) == (8, "auto")
        assert settings.worker.shutdown_timeout.total_seconds() == 90
        assert settings.telemetry.otlp_endpoint == "http://otel-collector.observability:4318"


def test_everything_wires_temporal_cloud_and_the_api_tokens(chart: Any, tmp_path: Path) -> None:
    objects = render(chart, EVERYTHING)
    worker = only(objects, "Deployment", "worker")
    env = env_of(container(worker))
    assert env["TEMPORAL_TLS"]["value"] == "true"
    assert env["TEMPORAL_TLS_SERVER_NAME"]["value"] == "my-ns.a1b2c.tmprl.cloud"
    for var, key in [
        ("TEMPORAL_TLS_CLIENT_CERT_PATH", "tls.crt"),
        ("TEMPORAL_TLS_CLIENT_KEY_PATH", "tls.key"),
        ("TEMPORAL_TLS_SERVER_CA_CERT_PATH", "ca.crt"),
    ]:
        assert env[var]["value"] == f"/etc/wow-temporal/temporal-tls/{key}"
    assert env["TEMPORAL_API_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "temporal-cloud",
        "key": "api-key",
    }
    connect = load_settings(
        environ=materialize(objects, worker, tmp_path)
    ).temporal_connect_config()
    tls = connect["tls"]
    assert tls.client_cert == SECRET_VALUES[("temporal-mtls", "tls.crt")].encode()
    assert tls.client_private_key == SECRET_VALUES[("temporal-mtls", "tls.key")].encode()
    assert tls.server_root_ca_cert == SECRET_VALUES[("temporal-mtls", "ca.crt")].encode()
    assert tls.domain == "my-ns.a1b2c.tmprl.cloud"
    assert connect["api_key"] == SECRET_VALUES[("temporal-cloud", "api-key")]

    api = only(objects, "Deployment", "api")
    one = container(api)
    assert one["args"] == [
        "api", "--port", "8088", "--host", "0.0.0.0", "--app", "workers.eshop.inventory:app"
    ]  # fmt: skip
    assert probe(one, "livenessProbe") == ("/health", 8088)
    assert probe(one, "readinessProbe") == ("/ready", 8088)
    api_env = env_of(one)
    assert api_env["WOW_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "wow-api-auth",
        "key": "token",
    }
    settings = load_settings(environ=materialize(objects, api, tmp_path / "api"))
    assert settings.api_token == SECRET_VALUES[("wow-api-auth", "token")]
    assert settings.api_tenant_tokens["tenant-a-token-s3cr3t"] == "tenant-a"
    assert settings.api_tenant_tokens["b-new-s3cr3t"] == "tenant-b"
    service = only(objects, "Service", "api")
    assert service["spec"]["ports"][0]["port"] == 8088
    assert service["spec"]["selector"] == api["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_no_secret_value_is_in_any_manifest(chart: Any, values: dict[str, Any] | None) -> None:
    objects = render(chart, values)
    assert "Secret" not in kinds(objects)
    text = "\n".join(chart.render(values, name=RELEASE, namespace=NAMESPACE).values())
    for secret in SECRET_VALUES.values():
        for line in secret.splitlines():
            if "FAKE" in line or "s3cr3t" in line:
                assert line not in text
                assert base64.b64encode(line.encode()).decode() not in text


@pytest.mark.parametrize("values", [None, EVERYTHING], ids=["defaults", "everything"])
def test_every_container_runs_locked_down(chart: Any, values: dict[str, Any] | None) -> None:
    for deployment in (o for o in render(chart, values) if o["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["automountServiceAccountToken"] is False
        assert pod["enableServiceLinks"] is False
        one = container(deployment)
        context = one["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"]["drop"] == ["ALL"]
        tmp = next(m for m in one["volumeMounts"] if m["mountPath"] == "/tmp")
        assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == tmp["name"])
        assert one["resources"]["requests"] and one["resources"]["limits"]


# --- optional objects ----------------------------------------------------------------------------


def test_keda_follows_the_timers_task_queue_setting(chart: Any) -> None:
    values = {
        **EVERYTHING,
        "settings": {**EVERYTHING["settings"], "timers": {"task-queue": "shop-timers"}},
    }
    objects = render(chart, values)
    notes = chart.render(values, name=RELEASE, namespace=NAMESPACE)[
        "wow-temporal/templates/NOTES.txt"
    ]
    assert "polls task queue shop-timers" in notes
    triggers = only(objects, "ScaledObject")["spec"]["triggers"]
    assert [t["metadata"]["taskQueue"] for t in triggers] == [
        "shop-timers", "wow-jobs-eshop-inventory"
    ]


def test_service_monitor_and_keda_render_only_when_enabled(chart: Any) -> None:
    assert not {"ServiceMonitor", "ScaledObject", "TriggerAuthentication"} & kinds(render(chart))
    objects = render(chart, EVERYTHING)
    monitor = only(objects, "ServiceMonitor", "worker")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    metrics = only(objects, "Service", "worker")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    )
    assert (
        metrics["spec"]["selector"]
        == only(objects, "Deployment", "worker")["spec"]["selector"]["matchLabels"]
    )
    assert metrics["spec"]["ports"] == [
        {"name": "metrics", "port": 9464, "targetPort": "metrics", "protocol": "TCP"}
    ]

    scaled = only(objects, "ScaledObject")
    worker = only(objects, "Deployment", "worker")
    assert scaled["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert "replicas" not in worker["spec"]  # KEDA owns the replica count
    triggers = scaled["spec"]["triggers"]
    assert [t["metadata"]["taskQueue"] for t in triggers] == [
        "wow-timers",
        "wow-jobs-eshop-inventory",
    ]
    auth = only(objects, "TriggerAuthentication")
    for trigger in triggers:
        assert trigger["type"] == "temporal"
        meta = trigger["metadata"]
        assert meta["endpoint"] == "my-ns.a1b2c.tmprl.cloud:7233"
        assert meta["namespace"] == "my-ns.a1b2c"
        assert all(isinstance(v, str) for v in meta.values())  # KEDA metadata is strings
        assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]
    refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"]}
    assert refs == {
        "apiKey": ("temporal-cloud", "api-key"),
        "cert": ("temporal-mtls", "tls.crt"),
        "key": ("temporal-mtls", "tls.key"),
        "ca": ("temporal-mtls", "ca.crt"),
    }
    assert "HorizontalPodAutoscaler" not in kinds(objects)


def test_the_hpa_scales_the_worker_deployment(chart: Any) -> None:
    objects = render(chart, {"worker": {"autoscaling": {"enabled": True, "maxReplicas": 6}}})
    hpa = only(objects, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    worker = only(objects, "Deployment", "worker")
    assert hpa["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert hpa["spec"]["maxReplicas"] == 6
    assert "replicas" not in worker["spec"]
    pdb = only(objects, "PodDisruptionBudget", "worker")
    assert pdb["spec"]["selector"]["matchLabels"] == worker["spec"]["selector"]["matchLabels"]


def test_metrics_off_leaves_no_metrics_port(chart: Any, tmp_path: Path) -> None:
    objects = render(chart, {"worker": {"metrics": {"enabled": False}}})
    worker = only(objects, "Deployment", "worker")
    assert [p["name"] for p in container(worker)["ports"]] == ["health"]
    assert "Service" not in kinds(objects)
    assert load_settings(environ=materialize(objects, worker, tmp_path)).worker.metrics_port == 0


# --- telemetry -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values", [None, EVERYTHING, OTLP_METRICS], ids=["defaults", "everything", "otlp-metrics"]
)
def test_the_configmap_settings_file_loads_as_it_is(
    chart: Any, values: dict[str, Any] | None, tmp_path: Path
) -> None:
    """The file alone, no WOW_* variable: a misspelt key the chart writes fails here."""
    objects = render(chart, values)
    settings = load_settings(settings_file(objects, tmp_path), environ={})
    telemetry = (values or {}).get("telemetry", {})
    assert settings.telemetry.tracing is telemetry.get("tracing", True)
    assert settings.telemetry.otlp_endpoint == (telemetry.get("otlpEndpoint") or None)
    assert settings.telemetry.metrics == telemetry.get("metrics", "prometheus")
    assert settings.log_format == "json"


def test_the_defaults_trace_and_export_nothing(chart: Any) -> None:
    document = yaml.safe_load(only(render(chart), "ConfigMap")["data"]["settings.yaml"])
    assert document["wow"]["telemetry"] == {"tracing": True, "metrics": "prometheus"}


def test_the_otlp_endpoint_and_tracing_reach_the_settings_file(chart: Any, tmp_path: Path) -> None:
    endpoint = "http://otel-collector.observability:4318"
    objects = render(chart, {"telemetry": {"otlpEndpoint": endpoint, "tracing": False}})
    document = yaml.safe_load(only(objects, "ConfigMap")["data"]["settings.yaml"])
    assert document["wow"]["telemetry"] == {
        "tracing": False,
        "otlp-endpoint": endpoint,
        "metrics": "prometheus",
    }
    worker = only(objects, "Deployment", "worker")
    settings = load_settings(environ=materialize(objects, worker, tmp_path))
    assert settings.telemetry.otlp_endpoint == endpoint
    assert settings.telemetry.tracing is False
    assert port_number(container(worker), "metrics") == settings.worker.metrics_port == 9464


def test_otlp_metrics_leave_no_metrics_port_service_or_monitor(chart: Any, tmp_path: Path) -> None:
    objects = render(chart, OTLP_METRICS)
    worker = only(objects, "Deployment", "worker")
    api = only(objects, "Deployment", "api")
    assert [p["name"] for p in container(worker)["ports"]] == ["health"]
    assert [p["name"] for p in container(api)["ports"]] == ["http"]
    assert "WOW_API_METRICS_PORT" not in env_of(container(api))
    assert [p["name"] for p in only(objects, "Service", "api")["spec"]["ports"]] == ["http"]
    assert "ServiceMonitor" not in kinds(objects)
    assert not [o for o in objects if o["metadata"]["name"].endswith("-metrics")]
    for deployment in (worker, api):
        root = tmp_path / deployment["metadata"]["name"]
        settings = load_settings(environ=materialize(objects, deployment, root))
        assert settings.telemetry.metrics == "otlp"
        assert settings.telemetry.otlp_endpoint == "https://otel-collector.observability:4318"
        assert settings.worker.metrics_port == 0 and settings.api.metrics_port == 0
    notes = chart.render(OTLP_METRICS, name=RELEASE, namespace=NAMESPACE)[
        "wow-temporal/templates/NOTES.txt"
    ]
    assert "Metrics: pushed over OTLP/HTTP to https://otel-collector.observability:4318" in notes


def test_the_api_serves_its_metrics_on_a_named_port_the_monitor_scrapes(
    chart: Any, tmp_path: Path
) -> None:
    objects = render(chart, EVERYTHING)
    api = only(objects, "Deployment", "api")
    one = container(api)
    assert env_of(one)["WOW_API_METRICS_PORT"]["value"] == "9465"
    settings = load_settings(environ=materialize(objects, api, tmp_path))
    assert port_number(one, "metrics") == settings.api.metrics_port == 9465
    service = only(objects, "Service", "api")
    assert {"name": "metrics", "port": 9465, "targetPort": "metrics", "protocol": "TCP"} in (
        service["spec"]["ports"]
    )
    monitor = only(objects, "ServiceMonitor", "api")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert not selector.items() <= only(objects, "Service", "worker")["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}


def test_the_monitor_scrapes_the_api_alone_when_the_worker_serves_no_metrics(chart: Any) -> None:
    values = {
        "worker": {"metrics": {"enabled": False}},
        "api": {"enabled": True, "auth": {"existingSecret": "wow-api-auth"}},
        "serviceMonitor": {"enabled": True},
    }
    objects = render(chart, values)
    assert only(objects, "ServiceMonitor")["metadata"]["name"] == f"{RELEASE}-wow-temporal-api"
    worker = only(objects, "Deployment", "worker")
    assert [p["name"] for p in container(worker)["ports"]] == ["health"]


def test_api_metrics_off_serve_none_and_the_monitor_scrapes_the_worker(
    chart: Any, tmp_path: Path
) -> None:
    values = {
        "api": {
            "enabled": True,
            "metrics": {"enabled": False},
            "auth": {"existingSecret": "wow-api-auth"},
        },
        "serviceMonitor": {"enabled": True},
    }
    objects = render(chart, values)
    api = only(objects, "Deployment", "api")
    assert [p["name"] for p in container(api)["ports"]] == ["http"]
    assert load_settings(environ=materialize(objects, api, tmp_path)).api.metrics_port == 0
    assert only(objects, "ServiceMonitor")["metadata"]["name"] == f"{RELEASE}-wow-temporal-worker"
    assert [p["name"] for p in only(objects, "Service", "api")["spec"]["ports"]] == ["http"]


# --- refused values ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "where", "what"),
    [
        ({"worker": {"app": "workers.eshop.inventory"}}, "/worker/app", "pattern"),
        ({"worker": {"app": "no spaces:app"}}, "/worker/app", "pattern"),
        ({"worker": {"replicas": -1}}, "/worker/replicas", "minimum"),
        ({"worker": {"healthPort": 0}}, "/worker/healthPort", "minimum"),
        ({"api": {"port": 70000}}, "/api/port", "maximum"),
        ({"worker": {"metrics": {"port": "9464"}}}, "/worker/metrics/port", "integer"),
        ({"replicaCount": 3}, "at ''", "'replicaCount' not allowed"),
        ({"settings": {"api": {"token": "inline"}}}, "/settings", "'api' not allowed"),
        ({"settings": {"timers": {"poll_interval": "1s"}}}, "/settings/timers", "poll_interval"),
        ({"settings": {"worker": {"health-port": 1}}}, "/settings/worker", "health-port"),
        (
            {"settings": {"schedules": {"x": {"misfire": "later"}}}},
            "/settings/schedules/x/misfire",
            "one of 'COALESCE', 'CATCH_UP'",
        ),
        ({"hostUrl": "domain-host:8089"}, "/hostUrl", "pattern"),
        ({"temporal": {"address": "temporal"}}, "/temporal/address", "pattern"),
        (
            {"telemetry": {"otlpEndpoint": "otel-collector:4318"}},
            "/telemetry/otlpEndpoint",
            "does not match pattern '^(https?://",
        ),
        (
            {"telemetry": {"otlpEndpoint": "grpc://otel-collector:4317"}},
            "/telemetry/otlpEndpoint",
            "pattern",
        ),
        ({"telemetry": {"metrics": "statsd"}}, "/telemetry/metrics", "'prometheus', 'otlp'"),
        ({"telemetry": {"tracing": "yes"}}, "/telemetry/tracing", "want boolean"),
        ({"settings": {"telemetry": {"tracing": False}}}, "/settings", "'telemetry' not allowed"),
        ({"api": {"metrics": {"port": 0}}}, "/api/metrics/port", "minimum"),
        ({"host": {"db": {"uri": "postgresql://shop@pg/shop"}}}, "/host/db", "'uri' not allowed"),
        ({"host": {"app": "workers.eshop"}}, "/host/app", "pattern"),
        (
            {"host": {"db": {"existingSecret": "Not_A_Secret"}}},
            "/host/db/existingSecret",
            "pattern",
        ),
    ],
)
def test_the_schema_refuses_bad_values_naming_the_key(
    chart: Any, values: dict[str, Any], where: str, what: str
) -> None:
    with pytest.raises(helm.HelmValuesError) as refused:
        chart.render(values, name=RELEASE)
    message = str(refused.value)
    assert where in message and what in message, message


def test_otlp_metrics_without_an_endpoint_are_refused_naming_otlp_endpoint(chart: Any) -> None:
    with pytest.raises(helm.HelmValuesError) as refused:
        chart.render({"telemetry": {"metrics": "otlp"}}, name=RELEASE)
    message = str(refused.value)
    # Either metrics stays prometheus, or otlpEndpoint is the collector's http(s) URL.
    assert "at '/telemetry/metrics': value must be 'prometheus'" in message, message
    assert "at '/telemetry/otlpEndpoint'" in message and "https?://" in message, message
    chart.render({"telemetry": {"metrics": "otlp", "otlpEndpoint": "http://c:4318"}}, name=RELEASE)


@pytest.mark.parametrize(
    ("values", "what"),
    [
        (
            {"worker": {"autoscaling": {"enabled": True}, "keda": {"enabled": True}}},
            "choose one",
        ),
        ({"api": {"enabled": True}}, "api.auth.existingSecret"),
        (
            {"api": {"enabled": True, "auth": {"existingSecret": "s", "tokenKey": ""}}},
            "accept every caller",
        ),
        (
            {"serviceMonitor": {"enabled": True}, "worker": {"metrics": {"enabled": False}}},
            "metrics",
        ),
        ({"temporal": {"tls": {"existingSecret": "cert"}}}, "temporal.tls.enabled"),
        ({**OTLP_METRICS, "serviceMonitor": {"enabled": True}}, "telemetry.metrics is otlp"),
        (
            {
                "api": {
                    "enabled": True,
                    "port": 9000,
                    "metrics": {"port": 9000},
                    "auth": {"existingSecret": "s"},
                }
            },
            "api.metrics.port and api.port must differ",
        ),
        ({"host": {"enabled": True, "db": {"existingSecret": "pg"}}}, "host.app"),
        ({"host": {"enabled": True, "app": "workers.eshop:apps"}}, "host.db.existingSecret"),
        (
            {"host": {**HOST["host"], "port": 9466}},
            "host.metrics.port and host.port must differ",
        ),
    ],
)
def test_combinations_that_cannot_work_fail_with_a_reason(
    chart: Any, values: dict[str, Any], what: str
) -> None:
    with pytest.raises(helm.HelmError) as refused:
        chart.render(values, name=RELEASE)
    assert what in str(refused.value)


@pytest.mark.parametrize(
    "values",
    [None, EVERYTHING, OTLP_METRICS, HOST],
    ids=["defaults", "everything", "otlp-metrics", "host"],
)
def test_helm_lint_is_clean(values: dict[str, Any] | None) -> None:
    report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]  # warnings and errors
    assert problems == []


def test_the_defaults_pass_the_schema_and_the_notes_name_the_endpoints(chart: Any) -> None:
    chart.validate_schema(yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8")))
    notes = chart.render(EVERYTHING, name=RELEASE, namespace=NAMESPACE)[
        "wow-temporal/templates/NOTES.txt"
    ]
    assert "/livez" in notes and "/readyz" in notes and "port 8181" in notes
    assert "grace period is 105 s" in notes
    assert "exported over OTLP/HTTP to http://otel-collector.observability:4318" in notes
    assert "GET /metrics on port 9464" in notes and "GET /metrics on port 9465" in notes


# --- the domain host -----------------------------------------------------------------------------


def host_args(one: dict[str, Any]) -> dict[str, Any]:
    """The container's `wow-temporal host …` as the real CLI parses it (ranges checked)."""
    command, *args = one["args"]
    assert command == "host"
    alone = typer.Typer()
    alone.command()(domain_host)
    return typer.main.get_command(alone).make_context(command, args).params


def test_the_host_serves_its_probes_and_service_on_the_port_its_command_serves(
    chart: Any, tmp_path: Path
) -> None:
    objects = render(chart, EVERYTHING)
    host = only(objects, "Deployment", "host")
    one = container(host)
    params = host_args(one)
    assert params["app_ref"] == "workers.eshop:apps"
    assert (params["host"], params["port"]) == ("0.0.0.0", 8090)
    assert params["metrics_port"] == port_number(one, "metrics") == 9466
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert probe(one, kind) == ("/health", params["port"])
    # A Deployment whose rollout adds a replica before it removes one: failover rests on leases
    # in the database, not on pod identity.
    assert host["spec"]["replicas"] == 3
    assert host["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert "StatefulSet" not in kinds(objects)
    spread = host["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread == EVERYTHING["host"]["topologySpreadConstraints"]

    service = only(objects, "Service", "host")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == host["spec"]["selector"]["matchLabels"]
    ports = {p["name"]: (p["port"], p["targetPort"]) for p in service["spec"]["ports"]}
    assert ports == {"http": (8090, "http"), "metrics": (9466, "metrics")}
    pdb = only(objects, "PodDisruptionBudget", "host")
    assert pdb["spec"]["selector"]["matchLabels"] == host["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["maxUnavailable"] == 1
    monitor = only(objects, "ServiceMonitor", "host")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"


def test_the_host_reads_its_database_from_secrets_and_temporal_as_the_worker_does(
    chart: Any, tmp_path: Path
) -> None:
    objects = render(chart, EVERYTHING)
    host = only(objects, "Deployment", "host")
    env = env_of(container(host))
    assert env["WOW_HOST_DB"]["valueFrom"]["secretKeyRef"] == {"name": "wow-host-db", "key": "uri"}
    assert env["PGPASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "wow-host-pg", "key": "pw"}
    assert env[REPLICA_ENV]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    worker_env = env_of(container(only(objects, "Deployment", "worker")))
    temporal = [name for name in worker_env if name.startswith("TEMPORAL_")]
    assert len(temporal) == 8  # address, namespace, TLS, server name, 3 files, API key
    assert [env[name] for name in temporal] == [worker_env[name] for name in temporal]
    assert "WOW_HOST_URL" not in env
    environ = materialize(objects, host, tmp_path)
    assert environ[REPLICA_ENV] == POD
    assert environ["PGPASSWORD"] == SECRET_VALUES[("wow-host-pg", "pw")]
    settings = load_settings(environ=environ)
    assert settings.host.db == SECRET_VALUES[("wow-host-db", "uri")]
    assert settings.host.replica == POD
    assert settings.log_format == "text"  # host.extraEnv
    assert (
        settings.temporal_connect_config()["api_key"]
        == SECRET_VALUES[("temporal-cloud", "api-key")]
    )


def test_the_worker_delivers_to_the_charts_host_unless_host_url_is_given(
    chart: Any, tmp_path: Path
) -> None:
    objects = render(chart, HOST)
    service = only(objects, "Service", "host")
    assert service["metadata"]["name"] == f"{RELEASE}-wow-temporal-host"
    (http,) = (p for p in service["spec"]["ports"] if p["name"] == "http")
    worker = only(objects, "Deployment", "worker")
    settings = load_settings(environ=materialize(objects, worker, tmp_path))
    assert settings.host_url == f"http://{service['metadata']['name']}:{http['port']}"
    host = only(objects, "Deployment", "host")
    assert host_args(container(host))["port"] == http["port"] == 8089
    assert "PGPASSWORD" not in env_of(container(host))
    assert only(objects, "PodDisruptionBudget", "host")["spec"]["maxUnavailable"] == 1
    notes = chart.render(HOST, name=RELEASE, namespace=NAMESPACE)[
        "wow-temporal/templates/NOTES.txt"
    ]
    assert "delivers due commands to http://wt-wow-temporal-host:8089" in notes
    assert "The domain host serves workers.eshop:apps in 2 replica(s)" in notes
    assert "Secret wow-host-db (key uri)" in notes and "/wow/followers" in notes

    given = render(chart, {**HOST, "hostUrl": "http://orders.shop:8089"})
    worker = only(given, "Deployment", "worker")
    assert env_of(container(worker))["WOW_HOST_URL"]["value"] == "http://orders.shop:8089"


def test_a_single_host_replica_gets_no_disruption_budget(chart: Any) -> None:
    objects = render(chart, {"host": {**HOST["host"], "replicas": 1}})
    assert only(objects, "Deployment", "host")["spec"]["replicas"] == 1
    budgets = [o["metadata"]["name"] for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert budgets == [f"{RELEASE}-wow-temporal-worker"]


# --- the image -----------------------------------------------------------------------------------


def test_the_dockerfile_builds_a_slim_non_root_image_of_the_wheel_only() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    stages = [line.split() for line in text.splitlines() if line.startswith("FROM ")]
    assert len(stages) >= 2 and all(stage[1] == "python:3.11-slim" for stage in stages)
    assert "pip wheel --no-deps" in text
    # The otlp extra (span exporter) so wow.telemetry.otlp-endpoint works, the postgres one so
    # the host's --db takes a postgresql:// URI; no dev or testing.
    assert 'pip install "$(ls /tmp/dist/*.whl)[otlp,postgres]"' in text
    assert "[dev]" not in text and "[testing]" not in text
    exposed = next(line for line in text.splitlines() if line.startswith("EXPOSE ")).split()[1:]
    assert {"8081", "9464", "8088", "9465", "8089", "9466"} <= set(exposed)
    user = next(line for line in text.splitlines() if line.startswith("USER "))
    assert user.split()[1].split(":")[0] not in ("0", "root")
    assert 'ENTRYPOINT ["wow-temporal"]' in text and 'CMD ["worker"]' in text
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    assert {".venv", ".git", "tests"} <= set(ignored)


def test_the_deploy_check_runs_before_an_upgrade_only_when_enabled(chart: Any) -> None:
    assert "Job" not in kinds(render(chart))
    objects = render(chart, {"deployCheck": {"enabled": True, "app": "workers.eshop:apps"}})
    job = only(objects, "Job", "deploy-check")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-upgrade"
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    (check,) = pod["containers"]
    assert check["args"] == ["timers", "check", "--app", "workers.eshop:apps", "--strict"]
    names = {env["name"] for env in check["env"]}
    assert {"WOW_CONFIG", "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"} <= names
    assert pod["restartPolicy"] == "Never"
    with pytest.raises(helm.HelmError, match=r"deployCheck\.app"):
        chart.render({"deployCheck": {"enabled": True}}, name=RELEASE)
    with pytest.raises(helm.HelmValuesError, match="/deployCheck/app"):
        chart.render({"deployCheck": {"enabled": True, "app": "not a reference"}}, name=RELEASE)
