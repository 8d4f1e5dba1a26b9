"""Settings: defaults, the YAML file, env over file, errors naming the key, job rule precedence,
the control API's tokens (never shown)."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from wow_temporal.model import Misfire
from wow_temporal.settings import (
    ApiSettings,
    DeliverySettings,
    JobOverride,
    Settings,
    SettingsError,
    TimerSettings,
    WorkerSettings,
    effective_rule,
    load_settings,
    parse_duration,
)

EXAMPLE = """\
wow:
  timers:
    poll-interval: 1s        # accept 1s, 500ms, 2m, PT1S, or a number of seconds
    max-attempts: 10
  schedules:
    receive-deliveries:
      expression: "0 0 7 * * *"
      zone: Europe/Amsterdam
      misfire: CATCH_UP
      enabled: false
  host-url: http://localhost:8080
  api:
    token: secret
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """An environment isolated from the machine's: no Temporal profile file, no WOW_* vars."""
    return {"TEMPORAL_CONFIG_FILE": str(tmp_path / "no-temporal.toml")}


def write(tmp_path: Path, text: str, name: str = "wow.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- defaults and the file -----------------------------------------------------------------


def test_defaults(env: dict[str, str]) -> None:
    settings = load_settings(None, env)
    assert settings.model_dump() == Settings().model_dump()
    assert settings.timers == TimerSettings(
        poll_interval=timedelta(seconds=1),
        max_attempts=10,
        retry_initial_interval=timedelta(seconds=1),
        retry_max_interval=timedelta(seconds=60),
        retry_backoff=2.0,
    )
    assert settings.schedules == {}
    assert settings.host_url is None
    assert settings.api == ApiSettings(token=None, port=8088, tenant_tokens={})
    assert settings.api_token is None
    assert settings.api_port == 8088
    assert settings.api_tenant_tokens == {}


def test_yaml_example(tmp_path: Path, env: dict[str, str]) -> None:
    settings = load_settings(write(tmp_path, EXAMPLE), env)
    assert settings.timers.poll_interval == timedelta(seconds=1)
    assert settings.timers.max_attempts == 10
    assert settings.schedules == {
        "receive-deliveries": JobOverride(
            expression="0 0 7 * * *",
            zone="Europe/Amsterdam",
            misfire=Misfire.CATCH_UP,
            enabled=False,
        )
    }
    assert settings.host_url == "http://localhost:8080"
    assert settings.api_token == "secret"
    assert "secret" not in repr(settings)


def test_path_from_wow_config(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  api:\n    port: 9000\n")
    assert load_settings(None, {**env, "WOW_CONFIG": str(path)}).api_port == 9000


def test_explicit_path_beats_wow_config(tmp_path: Path, env: dict[str, str]) -> None:
    explicit = write(tmp_path, "wow:\n  api:\n    port: 9001\n", "a.yaml")
    other = write(tmp_path, "wow:\n  api:\n    port: 9002\n", "b.yaml")
    assert load_settings(explicit, {**env, "WOW_CONFIG": str(other)}).api_port == 9001


@pytest.mark.parametrize(
    "text",
    ["", "# nothing\n", "wow:\n", "wow:\n  timers:\n  schedules:\n"],
)
def test_empty_files_give_defaults(tmp_path: Path, env: dict[str, str], text: str) -> None:
    assert load_settings(write(tmp_path, text), env).model_dump() == Settings().model_dump()


def test_snake_case_keys_and_empty_job(tmp_path: Path, env: dict[str, str]) -> None:
    text = (
        "wow:\n  timers:\n    max_attempts: 4\n  schedules:\n    nightly:\n"
        "  api:\n    tenant_tokens:\n      t1: tok\n"
    )
    settings = load_settings(write(tmp_path, text), env)
    assert settings.timers.max_attempts == 4
    assert settings.schedules == {"nightly": JobOverride()}
    assert settings.api_tenant_tokens == {"tok": "t1"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "wow:\n  host-urll: http://x\n",
            r"^wow\.host-urll: unknown key; known: host-url, api, timers, schedules, worker, "
            r"telemetry, host, dev, log-format \(in ",
        ),
        ("wow:\n  timerz:\n    max-attempts: 3\n", r"^wow\.timerz: unknown key; known: "),
        (
            "wow:\n  dev:\n    ui: true\n",
            r"^wow\.dev\.ui: unknown key; known: temporal-port, ui-port, host-port",
        ),
        ("wo:\n  host-url: http://x\n", r"^wo: unknown key; known: wow \(in .*wow\.yaml\)$"),
        ("spring:\n  application: x\n", r"^spring: unknown key; known: wow \(in "),
        ("wow: {}\nwow-temporal: {}\n", r"^wow-temporal: unknown key; known: wow"),
    ],
)
def test_unknown_keys_are_refused(
    tmp_path: Path, env: dict[str, str], text: str, message: str
) -> None:
    """A misspelt key must not silently leave its setting at the default."""
    with pytest.raises(SettingsError, match=message):
        load_settings(write(tmp_path, text), env)


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.api_port = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        settings.api.port = 1  # type: ignore[misc]


# --- environment over file -----------------------------------------------------------------


def test_env_overrides_yaml(tmp_path: Path, env: dict[str, str]) -> None:
    environ = {
        **env,
        "WOW_TIMERS_POLL_INTERVAL": "250ms",
        "WOW_TIMERS_MAX_ATTEMPTS": "3",
        "WOW_TIMERS_RETRY_INITIAL_INTERVAL": "2s",
        "WOW_TIMERS_RETRY_MAX_INTERVAL": "PT5M",
        "WOW_TIMERS_RETRY_BACKOFF": "1.5",
        "WOW_HOST_URL": "https://host.example:8443/",
        "WOW_API_TOKEN": "from-env",
        "WOW_API_PORT": "9999",
    }
    settings = load_settings(write(tmp_path, EXAMPLE), environ)
    assert settings.timers == TimerSettings(
        poll_interval=timedelta(milliseconds=250),
        max_attempts=3,
        retry_initial_interval=timedelta(seconds=2),
        retry_max_interval=timedelta(minutes=5),
        retry_backoff=1.5,
    )
    assert settings.host_url == "https://host.example:8443"
    assert settings.api_token == "from-env"
    assert settings.api_port == 9999
    # What the environment does not mention stays as the file says.
    assert settings.schedules["receive-deliveries"].zone == "Europe/Amsterdam"


def test_the_hosts_store_is_wow_host_db_and_its_uri_is_not_in_a_repr(
    tmp_path: Path, env: dict[str, str]
) -> None:
    assert load_settings(None, env).host.db == ".wow-temporal/domain.db"
    path = write(tmp_path, "wow:\n  host:\n    db: /var/lib/wow/domain.db\n")
    assert load_settings(path, env).host.db == "/var/lib/wow/domain.db"
    uri = "postgresql://wow:s3cret@db:5432/wow"
    settings = load_settings(path, {**env, "WOW_HOST_DB": uri})
    assert settings.host.db == uri
    assert "s3cret" not in repr(settings)
    with pytest.raises(SettingsError, match=r"^WOW_HOST_DB: must be a SQLite"):
        load_settings(None, {**env, "WOW_HOST_DB": " "})


def test_env_overrides_snake_case_yaml_key(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  timers:\n    max_attempts: 4\n")
    assert load_settings(path, {**env, "WOW_TIMERS_MAX_ATTEMPTS": "7"}).timers.max_attempts == 7


def test_empty_env_value_unsets_optional_string(tmp_path: Path, env: dict[str, str]) -> None:
    settings = load_settings(write(tmp_path, EXAMPLE), {**env, "WOW_API_TOKEN": ""})
    assert settings.api_token is None


def test_variables_not_starting_wow_are_ignored(env: dict[str, str]) -> None:
    environ = {**env, "WOWZA": "1", "HOME": "/root", "WOW_CONFIG": "", "wow_host_url": "x"}
    assert load_settings(None, environ).model_dump() == Settings().model_dump()


@pytest.mark.parametrize(
    "var", ["WOW_HOST_URLL", "WOW_DATA_DIR", "WOW_TIMERS", "WOW_CONFIG_FILE", "WOW_API_TOKENS"]
)
def test_unknown_wow_variables_are_refused(env: dict[str, str], var: str) -> None:
    known = "WOW_CONFIG, WOW_HOST_URL, WOW_API_TOKEN, WOW_API_PORT, "
    with pytest.raises(SettingsError, match=rf"^{var}: unknown variable; known: {known}"):
        load_settings(None, {**env, var: "x"})


def test_kubernetes_service_links_are_not_settings(env: dict[str, str]) -> None:
    """A Service named `wow-temporal-api` puts these in every pod of its namespace."""
    links = {
        "WOW_TEMPORAL_API_SERVICE_HOST": "10.0.0.7",
        "WOW_TEMPORAL_API_SERVICE_PORT": "8088",
        "WOW_TEMPORAL_API_SERVICE_PORT_HTTP": "8088",
        "WOW_TEMPORAL_API_PORT": "tcp://10.0.0.7:8088",
        "WOW_TEMPORAL_API_PORT_8088_TCP": "tcp://10.0.0.7:8088",
        "WOW_TEMPORAL_API_PORT_8088_TCP_PROTO": "tcp",
        "WOW_TEMPORAL_API_PORT_8088_TCP_PORT": "8088",
        "WOW_TEMPORAL_API_PORT_8088_TCP_ADDR": "10.0.0.7",
        "WOW_SERVICE_HOST": "10.0.0.8",
        "WOW_PORT": "udp://10.0.0.8:53",
    }
    assert load_settings(None, {**env, **links}).model_dump() == Settings().model_dump()
    with pytest.raises(SettingsError, match=r"^WOW_TEMPORAL_PORT: unknown variable"):
        load_settings(None, {**env, "WOW_TEMPORAL_PORT": "7233"})


def test_os_environ_is_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TEMPORAL_CONFIG_FILE", str(tmp_path / "none.toml"))
    monkeypatch.setenv("WOW_API_PORT", "7001")
    monkeypatch.delenv("WOW_CONFIG", raising=False)
    assert load_settings().api_port == 7001


# --- job overrides by env ------------------------------------------------------------------


def test_env_job_override_matches_yaml_name(tmp_path: Path, env: dict[str, str]) -> None:
    environ = {
        **env,
        "WOW_SCHEDULES_RECEIVE_DELIVERIES_ZONE": "UTC",
        "WOW_SCHEDULES_RECEIVE_DELIVERIES_MISFIRE": "coalesce",
        "WOW_SCHEDULES_RECEIVE_DELIVERIES_ENABLED": "true",
        "WOW_SCHEDULES_RECEIVE_DELIVERIES_EXPRESSION": "0 30 6 * * MON-FRI",
    }
    settings = load_settings(write(tmp_path, EXAMPLE), environ)
    assert settings.schedules == {
        "receive-deliveries": JobOverride(
            expression="0 30 6 * * MON-FRI", zone="UTC", misfire=Misfire.COALESCE, enabled=True
        )
    }


def test_env_job_override_matches_snake_case_yaml_name(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  schedules:\n    Nightly_Report:\n      zone: UTC\n")
    settings = load_settings(path, {**env, "WOW_SCHEDULES_NIGHTLY_REPORT_ENABLED": "false"})
    assert settings.schedules == {"Nightly_Report": JobOverride(zone="UTC", enabled=False)}


def test_env_job_override_matches_known_job(env: dict[str, str]) -> None:
    environ = {**env, "WOW_SCHEDULES_PURGE_CARTS_MISFIRE": "CATCH_UP"}
    settings = load_settings(None, environ, known_jobs=["purge_carts"])
    assert settings.schedules == {"purge_carts": JobOverride(misfire=Misfire.CATCH_UP)}


def test_env_job_override_of_unknown_job_is_kebab_case(env: dict[str, str]) -> None:
    settings = load_settings(None, {**env, "WOW_SCHEDULES_SEND_NEWSLETTER_ENABLED": "0"})
    assert settings.schedules == {"send-newsletter": JobOverride(enabled=False)}


def test_env_job_override_ambiguous_name(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  schedules:\n    a-b: {}\n    a_b: {}\n")
    with pytest.raises(SettingsError, match=r"^WOW_SCHEDULES_A_B_ZONE: ambiguous job name"):
        load_settings(path, {**env, "WOW_SCHEDULES_A_B_ZONE": "UTC"})


def test_schedule_override_lookup() -> None:
    settings = Settings(schedules={"receive-deliveries": JobOverride(enabled=False)})
    assert settings.schedule_override("receive-deliveries") == JobOverride(enabled=False)
    assert settings.schedule_override("RECEIVE_DELIVERIES") == JobOverride(enabled=False)
    assert settings.schedule_override("other") is None


# --- errors name the key -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "wow:\n  timers:\n    max-attempts: 0\n",
            r"^wow\.timers\.max-attempts: must be at least 1, got 0",
        ),
        ("wow:\n  timers:\n    max-attempts: many\n", r"^wow\.timers\.max-attempts: .*integer"),
        (
            "wow:\n  timers:\n    poll-intervall: 1s\n",
            r"^wow\.timers\.poll-intervall: unknown key; known: poll-interval, max-attempts",
        ),
        (
            "wow:\n  timers:\n    poll-interval: 1x\n",
            r"^wow\.timers\.poll-interval: invalid duration '1x'",
        ),
        (
            "wow:\n  timers:\n    poll-interval: 0s\n",
            r"^wow\.timers\.poll-interval: must be a positive",
        ),
        (
            "wow:\n  timers:\n    poll-interval: -5\n",
            r"^wow\.timers\.poll-interval: must be a positive",
        ),
        (
            "wow:\n  timers:\n    retry-backoff: 0.5\n",
            r"^wow\.timers\.retry-backoff: must be a number of at least 1",
        ),
        (
            "wow:\n  timers:\n    retry-initial-interval: 2m\n    retry-max-interval: 1m\n",
            r"^wow\.timers: retry-max-interval \(60s\) must not be less than",
        ),
        ("wow:\n  timers: 5\n", r"^wow\.timers: "),
        (
            "wow:\n  schedules:\n    nightly:\n      expression: '0 0 6 * *'\n",
            r"^wow\.schedules\.nightly\.expression: .*cron expression.*0 0 6 \* \*.*6 fields",
        ),
        (
            "wow:\n  schedules:\n    nightly:\n      zone: Mars/Olympus\n",
            r"^wow\.schedules\.nightly\.zone: unknown time zone 'Mars/Olympus'",
        ),
        (
            "wow:\n  schedules:\n    nightly:\n      zone: Europe\n",
            r"^wow\.schedules\.nightly\.zone: unknown time zone 'Europe'",
        ),
        (
            "wow:\n  schedules:\n    nightly:\n      misfire: SOMETIMES\n",
            r"^wow\.schedules\.nightly\.misfire: .*COALESCE.*CATCH_UP",
        ),
        (
            "wow:\n  schedules:\n    nightly:\n      enable: false\n",
            r"^wow\.schedules\.nightly\.enable: unknown key; known: expression, zone",
        ),
        (
            "wow:\n  schedules:\n    'nightly report': {}\n",
            r"^wow\.schedules\.nightly report: invalid job name 'nightly report'",
        ),
        (
            "wow:\n  schedules:\n    " + "x" * 65 + ": {}\n",
            r"^wow\.schedules\.x{65}: invalid job name",
        ),
        ("wow:\n  host-url: ftp://files\n", r"^wow\.host-url: must be an http or https URL"),
        ("wow:\n  host-url: localhost:8080\n", r"^wow\.host-url: must be an http or https URL"),
        ("wow:\n  host-url: 'http://x:99999'\n", r"^wow\.host-url: must be an http or https URL"),
        (
            "wow:\n  api:\n    port: 65536\n",
            r"^wow\.api\.port: must be a port from 1 to 65535, or 0 for any free port, got 65536",
        ),
        (
            "wow:\n  dev:\n    ui-port: -1\n",
            r"^wow\.dev\.ui-port: must be a port from 1 to 65535, or 0 for any free port, got -1",
        ),
        ("wow:\n  dev:\n    port: 1\n", r"^wow\.dev\.port: unknown key; known: temporal-port, "),
        ("wow:\n  api:\n    port: web\n", r"^wow\.api\.port: .*integer.*, got 'web'"),
        ("wow:\n  api: 5\n", r"^wow\.api: "),
        (
            "wow:\n  api:\n    tokn: x\n",
            r"^wow\.api\.tokn: unknown key; known: token, port, metrics-port, tenant-tokens, "
            r"tenant-tokens-file",
        ),
        (
            "wow:\n  telemetry:\n    metrics: otlp\n",
            r"^wow\.telemetry: metrics: otlp needs otlp-endpoint, the collector's URL",
        ),
        (
            "wow:\n  telemetry:\n    otlp-endpoint: collector:4318\n",
            r"^wow\.telemetry\.otlp-endpoint: must be the OTLP/HTTP collector's base URL",
        ),
        ("wow:\n  telemetry:\n    metrics: statsd\n", r"^wow\.telemetry\.metrics: "),
        (
            "wow:\n  timers:\n    task-queue: my timers\n",
            r"^wow\.timers\.task-queue: must be a task queue name: 1 to 200 characters, no "
            r"spaces, got 'my timers'",
        ),
        (
            "wow:\n  worker:\n    workflow-pollers: 0\n",
            r"^wow\.worker\.workflow-pollers: must be auto or a number of pollers of at least 1",
        ),
        (
            "wow:\n  worker:\n    activity-pollers: lots\n",
            r"^wow\.worker\.activity-pollers: must be auto or a number of pollers",
        ),
        (
            "wow:\n  telemetry:\n    trace: true\n",
            r"^wow\.telemetry\.trace: unknown key; known: tracing, otlp-endpoint, metrics",
        ),
        ("wow:\n  api-token: x\n", r"^wow\.api-token: moved to wow\.api\.token \(in "),
        ("wow:\n  api_token: x\n", r"^wow\.api_token: moved to wow\.api\.token"),
        ("wow:\n  api-port: 9000\n", r"^wow\.api-port: moved to wow\.api\.port"),
        ("wow:\n  api_port: 9000\n", r"^wow\.api_port: moved to wow\.api\.port"),
        ("wow:\n  - a\n", r"^wow: must be a mapping"),
        ("- a\n", r"must be a mapping with a 'wow' key"),
    ],
)
def test_invalid_file_names_the_key(
    tmp_path: Path, env: dict[str, str], text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError, match=message) as caught:
        load_settings(path, env)
    assert isinstance(caught.value, ValueError)


def test_invalid_file_error_names_the_file(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  timers:\n    max-attempts: 0\n")
    with pytest.raises(SettingsError, match=re.escape(f"(in {path})")):
        load_settings(path, env)


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("WOW_TIMERS_MAX_ATTEMPTS", "0", r"^WOW_TIMERS_MAX_ATTEMPTS: must be at least 1, got 0$"),
        ("WOW_TIMERS_MAX_ATTEMPTS", "ten", r"^WOW_TIMERS_MAX_ATTEMPTS: .*integer.*'ten'"),
        ("WOW_TIMERS_POLL_INTERVAL", "soon", r"^WOW_TIMERS_POLL_INTERVAL: invalid duration 'soon'"),
        ("WOW_TIMERS_POLL_INTERVALL", "1s", r"^WOW_TIMERS_POLL_INTERVALL: unknown timer setting"),
        ("WOW_TIMERS_RETRY_BACKOFF", "nan", r"^WOW_TIMERS_RETRY_BACKOFF: must be a number of at"),
        ("WOW_API_PORT", "http", r"^WOW_API_PORT: .*integer"),
        ("WOW_API_PORT", "70000", r"^WOW_API_PORT: must be a port from 1 to 65535"),
        ("WOW_HOST_URL", "not a url", r"^WOW_HOST_URL: must be an http or https URL"),
        (
            "WOW_SCHEDULES_NIGHTLY_ZONE",
            "Nowhere/Town",
            r"^WOW_SCHEDULES_NIGHTLY_ZONE: unknown time",
        ),
        (
            "WOW_SCHEDULES_NIGHTLY_EXPRESSION",
            "0 0 25 * * *",
            r"^WOW_SCHEDULES_NIGHTLY_EXPRESSION: .*cron expression.*0 0 25 \* \* \*.*25",
        ),
        ("WOW_SCHEDULES_NIGHTLY_MISFIRE", "NEVER", r"^WOW_SCHEDULES_NIGHTLY_MISFIRE: .*COALESCE"),
        ("WOW_SCHEDULES_NIGHTLY_ENABLED", "maybe", r"^WOW_SCHEDULES_NIGHTLY_ENABLED: .*boolean"),
        ("WOW_SCHEDULES_NIGHTLY_ENABLE", "false", r"^WOW_SCHEDULES_NIGHTLY_ENABLE: expected"),
        ("WOW_SCHEDULES__ZONE", "UTC", r"^WOW_SCHEDULES__ZONE: the job name is missing"),
        ("WOW_SCHEDULES_ZONE", "UTC", r"^WOW_SCHEDULES_ZONE: expected"),
    ],
)
def test_invalid_env_names_the_variable(
    env: dict[str, str], var: str, value: str, message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(None, {**env, var: value})


def test_missing_file_from_wow_config(tmp_path: Path, env: dict[str, str]) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(SettingsError, match=r"^WOW_CONFIG=.*missing\.yaml: file not found"):
        load_settings(None, {**env, "WOW_CONFIG": str(missing)})


def test_missing_explicit_file(tmp_path: Path, env: dict[str, str]) -> None:
    with pytest.raises(SettingsError, match=r"missing\.yaml: file not found"):
        load_settings(tmp_path / "missing.yaml", env)


def test_malformed_yaml(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  timers: [1, 2\n")
    with pytest.raises(SettingsError, match=r"malformed YAML: .*line \d+"):
        load_settings(None, {**env, "WOW_CONFIG": str(path)})


def test_several_problems_are_all_named(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  timers:\n    max-attempts: 0\n  api:\n    port: -1\n")
    with pytest.raises(SettingsError) as caught:
        load_settings(path, {**env, "WOW_HOST_URL": "gopher://x"})
    text = str(caught.value)
    assert "wow.timers.max-attempts" in text
    assert "wow.api.port" in text
    assert "WOW_HOST_URL" in text


# --- the control API's tokens --------------------------------------------------------------

TENANTS_YAML = """\
t1: [t1-new, t1-old]    # two while t1's token is rotated
t2: t2-only
1001: numeric-tenant
"""
TOKEN_OWNERS = {"t1-new": "t1", "t1-old": "t1", "t2-only": "t2", "numeric-tenant": "1001"}


def test_tenant_tokens_in_the_settings_file(tmp_path: Path, env: dict[str, str]) -> None:
    indented = "".join(f"      {line}\n" for line in TENANTS_YAML.splitlines())
    text = f"wow:\n  api:\n    token: operator\n    tenant-tokens:\n{indented}"
    settings = load_settings(write(tmp_path, text), env)
    assert settings.api_token == "operator"
    assert settings.api_tenant_tokens == TOKEN_OWNERS
    assert settings.api.tenants == {
        "t1": ("t1-new", "t1-old"),
        "t2": ("t2-only",),
        "1001": ("numeric-tenant",),
    }
    with pytest.raises(TypeError):
        settings.api_tenant_tokens["x"] = "t3"  # type: ignore[index]


# Tab-indented JSON, which YAML refuses: it must be read as JSON.
TENANTS_JSON = json.dumps(
    {"t1": ["t1-new", "t1-old"], "t2": "t2-only", "1001": "numeric-tenant"}, indent="\t"
)


@pytest.mark.parametrize(
    ("name", "text"), [("tokens.yaml", TENANTS_YAML), ("tokens.json", TENANTS_JSON)]
)
def test_tenant_tokens_file_yaml_or_json(
    tmp_path: Path, env: dict[str, str], name: str, text: str
) -> None:
    tokens = write(tmp_path, text, name)
    settings = load_settings(None, {**env, "WOW_API_TENANT_TOKENS_FILE": str(tokens)})
    assert settings.api_tenant_tokens == TOKEN_OWNERS
    assert settings.api.tenant_tokens_file is not None
    assert settings.api.tenant_tokens_file.path == tokens


def test_tenant_tokens_file_from_yaml_and_env_wins(tmp_path: Path, env: dict[str, str]) -> None:
    in_file = write(tmp_path, "t1: from-file-key\n", "a.yaml")
    from_env = write(tmp_path, "t1: from-env\n", "b.yaml")
    path = write(tmp_path, f"wow:\n  api:\n    tenant-tokens-file: {in_file}\n")
    assert load_settings(path, env).api_tenant_tokens == {"from-file-key": "t1"}
    environ = {**env, "WOW_API_TENANT_TOKENS_FILE": str(from_env)}
    assert load_settings(path, environ).api_tenant_tokens == {"from-env": "t1"}
    assert load_settings(path, {**env, "WOW_API_TENANT_TOKENS_FILE": ""}).api_tenant_tokens == {}


def test_tenant_tokens_file_is_read_at_load(tmp_path: Path, env: dict[str, str]) -> None:
    """The tokens are those of load time, and a dump names the file, not its tokens."""
    tokens = write(tmp_path, "t1: first-token\n", "tokens.yaml")
    settings = load_settings(None, {**env, "WOW_API_TENANT_TOKENS_FILE": str(tokens)})
    tokens.write_text("t1: second-token\n", encoding="utf-8")
    assert settings.api_tenant_tokens == {"first-token": "t1"}
    dumped = settings.model_dump()
    assert dumped["api"]["tenant-tokens-file"] == str(tokens)
    assert "first-token" not in repr(dumped["api"])
    assert Settings.model_validate(dumped).api_tenant_tokens == {"second-token": "t1"}


SECRET = "s3cr3t-t0ken"


@pytest.mark.parametrize(
    ("api", "message"),
    [
        ({"token": 12345}, r"^wow\.api\.token: must be a string, got int \(quote it in YAML\)"),
        ({"token": f" {SECRET}"}, r"^wow\.api\.token: must not start or end with whitespace"),
        ({"tenant-tokens": {"t1": ""}}, r"^wow\.api\.tenant-tokens: tenant 't1': a token must not"),
        ({"tenant-tokens": {"t1": []}}, r"^wow\.api\.tenant-tokens: tenant 't1': give a token"),
        ({"tenant-tokens": {"t1": [SECRET, 5]}}, r"^wow\.api\.tenant-tokens: tenant 't1': .*int"),
        ({"tenant-tokens": {"t1": {"a": SECRET}}}, r"^wow\.api\.tenant-tokens: tenant 't1': give"),
        ({"tenant-tokens": {"t1": f"{SECRET}\n"}}, r"^wow\.api\.tenant-tokens: .*whitespace"),
        ({"tenant-tokens": [SECRET]}, r"^wow\.api\.tenant-tokens: must be a mapping of tenant id"),
        ({"tenant-tokens": SECRET}, r"^wow\.api\.tenant-tokens: must be a mapping"),
        (
            {"tenant-tokens": {"": SECRET}},
            r"^wow\.api\.tenant-tokens: tenant ids must be non-empty",
        ),
        (
            {"tenant-tokens": {"t1": [SECRET, "x"], "t2": ["y", SECRET]}},
            r"^wow\.api\.tenant-tokens: tenants 't1' and 't2' share a token",
        ),
        (
            {"token": SECRET, "tenant-tokens": {"t1": ["x", SECRET]}},
            r"^wow\.api\.tenant-tokens: tenant 't1' has the operator's token",
        ),
        ({"tenant-tokens-file": 5}, r"^wow\.api\.tenant-tokens-file: must be a file path"),
    ],
)
def test_bad_api_settings_name_the_key_never_the_token(
    tmp_path: Path, env: dict[str, str], api: dict[object, object], message: str
) -> None:
    path = write(tmp_path, json.dumps({"wow": {"api": api}}))  # JSON is YAML
    with pytest.raises(SettingsError, match=message) as caught:
        load_settings(path, env)
    assert SECRET not in str(caught.value)
    assert "12345" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"holds no tenant tokens$"),
        ("{}", r"holds no tenant tokens$"),
        (f"- {SECRET}\n", r"must be a mapping of tenant id to token .*got list$"),
        (f"{SECRET}\n", r"must be a mapping of tenant id to token .*got str$"),
        (f"t1: [{SECRET}\n", r"malformed YAML: .* at line 2, column 1$"),
        (f"t1: *{SECRET}\n", r"malformed YAML: found undefined alias '…' at line 1, column 5$"),
        (f'{{"t1": "{SECRET}",}}', r"malformed JSON: .* at line 1, column \d+$"),
        (f"t1: ''\nt2: {SECRET}\n", r"tenant 't1': a token must not be empty$"),
        (f"t1: {SECRET}\nt2: [x, {SECRET}]\n", r"tenants 't1' and 't2' share a token$"),
        (f"t1: [a, {SECRET}]\n", r"tenant 't1' has the operator's token"),
        (b"t1: \xff\n", r"cannot read: not UTF-8 text$"),
    ],
)
def test_bad_tenant_tokens_file_names_variable_and_file_never_the_token(
    tmp_path: Path, env: dict[str, str], text: str | bytes, message: str
) -> None:
    tokens = tmp_path / "tokens"
    if isinstance(text, bytes):
        tokens.write_bytes(text)
    else:
        tokens.write_text(text, encoding="utf-8")
    environ = {**env, "WOW_API_TOKEN": SECRET, "WOW_API_TENANT_TOKENS_FILE": str(tokens)}
    with pytest.raises(SettingsError, match=message) as caught:
        load_settings(None, environ)
    assert str(caught.value).startswith(f"WOW_API_TENANT_TOKENS_FILE: {tokens}: ")
    assert SECRET not in str(caught.value)


def test_tenant_given_as_number_and_as_text_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    path = write(tmp_path, "wow:\n  api:\n    tenant-tokens:\n      1: a\n      '1': b\n")
    with pytest.raises(SettingsError, match=r"^wow\.api\.tenant-tokens: tenant '1' is given twice"):
        load_settings(path, env)


def test_missing_or_unreadable_tenant_tokens_file(tmp_path: Path, env: dict[str, str]) -> None:
    missing = tmp_path / "missing.yaml"
    path = write(tmp_path, f"wow:\n  api:\n    tenant-tokens-file: {missing}\n")
    pattern = rf"^wow\.api\.tenant-tokens-file: {re.escape(str(missing))}: file not found \(in "
    with pytest.raises(SettingsError, match=pattern):
        load_settings(path, env)
    environ = {**env, "WOW_API_TENANT_TOKENS_FILE": str(tmp_path)}  # a directory
    with pytest.raises(SettingsError, match=r"^WOW_API_TENANT_TOKENS_FILE: .*: cannot read: "):
        load_settings(None, environ)


def test_tenant_tokens_in_file_and_settings_at_once_is_refused(
    tmp_path: Path, env: dict[str, str]
) -> None:
    tokens = write(tmp_path, "t1: a\n", "tokens.yaml")
    path = write(tmp_path, "wow:\n  api:\n    tenant-tokens:\n      t2: b\n")
    environ = {**env, "WOW_API_TENANT_TOKENS_FILE": str(tokens)}
    with pytest.raises(
        SettingsError,
        match=r"^WOW_API_TENANT_TOKENS_FILE: cannot be used together with wow\.api\.tenant-tokens",
    ):
        load_settings(path, environ)


def test_tokens_are_not_in_the_repr(tmp_path: Path, env: dict[str, str]) -> None:
    tokens = write(tmp_path, f"t1: {SECRET}-file\n", "tokens.yaml")
    environ = {**env, "WOW_API_TOKEN": SECRET, "WOW_API_TENANT_TOKENS_FILE": str(tokens)}
    settings = load_settings(None, environ)
    inline = Settings(api=ApiSettings(token=SECRET, tenant_tokens={"t1": f"{SECRET}-inline"}))
    for shown in (repr(settings), str(settings), repr(settings.api), repr(inline), str(inline)):
        assert SECRET not in shown
    assert str(tokens) in repr(settings)  # which file is shown


def test_python_validation_errors_do_not_show_tokens() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(api=ApiSettings(token=SECRET, tenant_tokens={"t1": SECRET}))
    assert "operator's token" in str(caught.value)
    assert SECRET not in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate({"api": {"tenant_tokens": {"t1": [SECRET, 1]}}})
    assert SECRET not in str(caught.value)


def test_python_api_keywords_still_build_settings() -> None:
    """`Settings(api_token=..., api_port=...)` as callers wrote it before `api` was a section."""
    settings = Settings(api_token="operator", api_port=9100)  # type: ignore[call-arg]
    assert settings.api == ApiSettings(token="operator", port=9100)
    assert (settings.api_token, settings.api_port) == ("operator", 9100)
    assert Settings(api_port=9101).api == ApiSettings(port=9101)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="either api or api_token/api_port"):
        Settings(api_token="x", api=ApiSettings())  # type: ignore[call-arg]


# --- durations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1s", timedelta(seconds=1)),
        ("500ms", timedelta(milliseconds=500)),
        ("2m", timedelta(minutes=2)),
        ("3h", timedelta(hours=3)),
        ("1d", timedelta(days=1)),
        ("1.5s", timedelta(milliseconds=1500)),
        ("250us", timedelta(microseconds=250)),
        (" 10 S ", timedelta(seconds=10)),
        ("PT1S", timedelta(seconds=1)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("pt30m", timedelta(minutes=30)),
        ("PT1H30M", timedelta(minutes=90)),
        ("P1DT2H", timedelta(days=1, hours=2)),
        ("P2D", timedelta(days=2)),
        ("5", timedelta(seconds=5)),
        ("0.25", timedelta(milliseconds=250)),
        (5, timedelta(seconds=5)),
        (0.5, timedelta(milliseconds=500)),
        (timedelta(minutes=1), timedelta(minutes=1)),
    ],
)
def test_duration_formats(text: object, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "s", "1x", "PT", "P", "P1DT", "1 minute", "nan", "inf", True, None, [1]]
)
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("yaml_value", "expected"),
    [("1s", 1.0), ("500ms", 0.5), ("2m", 120.0), ("PT1S", 1.0), ("3", 3.0), ("0.1", 0.1)],
)
def test_duration_formats_in_yaml(
    tmp_path: Path, env: dict[str, str], yaml_value: str, expected: float
) -> None:
    path = write(tmp_path, f"wow:\n  timers:\n    poll-interval: {yaml_value}\n")
    assert load_settings(path, env).timers.poll_interval.total_seconds() == expected


# --- effective rule ------------------------------------------------------------------------

CODE = ("0 0 6 * * *", "UTC", Misfire.COALESCE)


def test_effective_rule_code_alone() -> None:
    assert effective_rule(CODE, None, None) == CODE
    assert effective_rule(CODE, JobOverride(), JobOverride(enabled=False)) == CODE


def test_effective_rule_host_over_code() -> None:
    host = JobOverride(expression="0 0 7 * * *", zone="Europe/Amsterdam", misfire=Misfire.CATCH_UP)
    assert effective_rule(CODE, host, None) == ("0 0 7 * * *", "Europe/Amsterdam", Misfire.CATCH_UP)


def test_effective_rule_tenant_over_host_over_code() -> None:
    host = JobOverride(expression="0 0 7 * * *", zone="Europe/Amsterdam", misfire=Misfire.CATCH_UP)
    tenant = JobOverride(expression="0 0 8 * * *", zone="Asia/Tokyo", misfire=Misfire.COALESCE)
    assert effective_rule(CODE, host, tenant) == ("0 0 8 * * *", "Asia/Tokyo", Misfire.COALESCE)


def test_effective_rule_field_by_field() -> None:
    host = JobOverride(zone="Europe/Amsterdam", misfire=Misfire.CATCH_UP)
    tenant = JobOverride(expression="0 0 8 * * *")
    assert effective_rule(CODE, host, tenant) == (
        "0 0 8 * * *",
        "Europe/Amsterdam",
        Misfire.CATCH_UP,
    )
    assert effective_rule(CODE, None, JobOverride(zone="Asia/Tokyo")) == (
        "0 0 6 * * *",
        "Asia/Tokyo",
        Misfire.COALESCE,
    )
    assert effective_rule(CODE, JobOverride(misfire=Misfire.CATCH_UP), JobOverride(zone="UTC")) == (
        "0 0 6 * * *",
        "UTC",
        Misfire.CATCH_UP,
    )


def test_job_override_validates_when_built_in_python() -> None:
    with pytest.raises(ValidationError, match="unknown time zone 'Mars/Base'"):
        JobOverride(zone="Mars/Base")
    with pytest.raises(ValidationError, match=r"(?i)invalid cron expression"):
        JobOverride(expression="0 0 25 * * *")


# --- Temporal connection -------------------------------------------------------------------


def test_temporal_defaults(env: dict[str, str]) -> None:
    config = load_settings(None, env).temporal_connect_config()
    assert config["target_host"] == "localhost:7233"
    assert config["namespace"] == "default"
    assert config["data_converter"] is pydantic_data_converter
    assert "api_key" not in config
    assert "tls" not in config


def test_temporal_from_env(env: dict[str, str]) -> None:
    environ = {**env, "TEMPORAL_ADDRESS": "temporal.internal:7233", "TEMPORAL_NAMESPACE": "shop"}
    config = load_settings(None, environ).temporal_connect_config()
    assert config["target_host"] == "temporal.internal:7233"
    assert config["namespace"] == "shop"


def test_temporal_api_key_turns_tls_on(env: dict[str, str]) -> None:
    environ = {**env, "TEMPORAL_ADDRESS": "ns.tmprl.cloud:7233", "TEMPORAL_API_KEY": "k"}
    config = load_settings(None, environ).temporal_connect_config()
    assert config["api_key"] == "k"
    assert config["tls"] is True


def test_temporal_from_profile_file_with_env_winning(tmp_path: Path) -> None:
    toml = write(
        tmp_path,
        '[profile.default]\naddress = "file:7233"\nnamespace = "from-file"\n'
        '[profile.prod]\naddress = "prod:7233"\nnamespace = "prod"\n',
        "temporal.toml",
    )
    base = {"TEMPORAL_CONFIG_FILE": str(toml)}
    config = load_settings(None, base).temporal_connect_config()
    assert (config["target_host"], config["namespace"]) == ("file:7233", "from-file")
    config = load_settings(None, {**base, "TEMPORAL_PROFILE": "prod"}).temporal_connect_config()
    assert (config["target_host"], config["namespace"]) == ("prod:7233", "prod")
    config = load_settings(None, {**base, "TEMPORAL_NAMESPACE": "env"}).temporal_connect_config()
    assert (config["target_host"], config["namespace"]) == ("file:7233", "env")


def test_temporal_bad_profile_fails_at_start(tmp_path: Path) -> None:
    toml = write(tmp_path, "not toml [", "temporal.toml")
    with pytest.raises(SettingsError, match="TEMPORAL_PROFILE / TEMPORAL_CONFIG_FILE"):
        load_settings(None, {"TEMPORAL_CONFIG_FILE": str(toml)})
    with pytest.raises(SettingsError, match="not found"):
        load_settings(None, {"TEMPORAL_CONFIG_FILE": str(toml) + ".none", "TEMPORAL_PROFILE": "x"})


# --- the production worker and the log format ----------------------------------------------


def test_worker_and_log_format_defaults(env: dict[str, str]) -> None:
    settings = load_settings(None, env)
    assert settings.worker == WorkerSettings(
        health_port=8081,
        metrics_port=9464,
        shutdown_timeout=timedelta(seconds=30),
        max_concurrent_activities=200,
        max_concurrent_workflow_tasks=100,
    )
    assert settings.log_format == "text"


def test_worker_settings_from_yaml_and_env(tmp_path: Path, env: dict[str, str]) -> None:
    text = (
        "wow:\n  log-format: json\n  worker:\n    health-port: 9000\n    metrics-port: 0\n"
        "    shutdown-timeout: PT2M\n    max-concurrent-activities: 5\n"
        "    max_concurrent_workflow_tasks: 7\n"
    )
    settings = load_settings(write(tmp_path, text), env)
    assert settings.log_format == "json"
    assert settings.worker == WorkerSettings(
        health_port=9000,
        metrics_port=0,
        shutdown_timeout=timedelta(minutes=2),
        max_concurrent_activities=5,
        max_concurrent_workflow_tasks=7,
    )
    environ = {
        **env,
        "WOW_LOG_FORMAT": "Text",
        "WOW_WORKER_HEALTH_PORT": "0",
        "WOW_WORKER_METRICS_PORT": "9100",
        "WOW_WORKER_SHUTDOWN_TIMEOUT": "45",
        "WOW_WORKER_MAX_CONCURRENT_ACTIVITIES": "50",
        "WOW_WORKER_MAX_CONCURRENT_WORKFLOW_TASKS": "60",
    }
    settings = load_settings(write(tmp_path, text), environ)
    assert settings.log_format == "text"
    assert settings.worker == WorkerSettings(
        health_port=0,
        metrics_port=9100,
        shutdown_timeout=timedelta(seconds=45),
        max_concurrent_activities=50,
        max_concurrent_workflow_tasks=60,
    )
    zero = load_settings(None, {**env, "WOW_WORKER_SHUTDOWN_TIMEOUT": "0s"})
    assert zero.worker.shutdown_timeout == timedelta(0)  # cancel at once


@pytest.mark.parametrize(
    ("var", "value", "message"),
    [
        ("WOW_WORKER_HEALTH_PORT", "web", r"^WOW_WORKER_HEALTH_PORT: .*integer.*'web'$"),
        (
            "WOW_WORKER_HEALTH_PORT",
            "70000",
            r"^WOW_WORKER_HEALTH_PORT: must be a port from 1 to 65535, or 0 for off, got 70000$",
        ),
        ("WOW_WORKER_METRICS_PORT", "-1", r"^WOW_WORKER_METRICS_PORT: must be a port from 1"),
        (
            "WOW_WORKER_METRICS_PORT",
            "8081",
            r"^wow\.worker: health-port and metrics-port must differ, both are 8081$",
        ),
        (
            "WOW_WORKER_SHUTDOWN_TIMEOUT",
            "later",
            r"^WOW_WORKER_SHUTDOWN_TIMEOUT: invalid duration 'later'",
        ),
        (
            "WOW_WORKER_SHUTDOWN_TIMEOUT",
            "-PT5S",
            r"^WOW_WORKER_SHUTDOWN_TIMEOUT: must not be a negative duration, got -5s$",
        ),
        (
            "WOW_WORKER_MAX_CONCURRENT_ACTIVITIES",
            "0",
            r"^WOW_WORKER_MAX_CONCURRENT_ACTIVITIES: must be at least 1, got 0$",
        ),
        (
            "WOW_WORKER_MAX_CONCURRENT_WORKFLOW_TASKS",
            "many",
            r"^WOW_WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: .*integer.*'many'$",
        ),
        (
            "WOW_WORKER_HEALTHPORT",
            "1",
            r"^WOW_WORKER_HEALTHPORT: unknown worker setting; known: WOW_WORKER_HEALTH_PORT, ",
        ),
        ("WOW_LOG_FORMAT", "xml", r"^WOW_LOG_FORMAT: Input should be 'text' or 'json', got 'xml'$"),
    ],
)
def test_invalid_worker_settings_name_the_variable(
    env: dict[str, str], var: str, value: str, message: str
) -> None:
    with pytest.raises(SettingsError, match=message) as caught:
        load_settings(None, {**env, var: value})
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("wow:\n  log-format: yaml\n", r"^wow\.log-format: Input should be 'text' or 'json'"),
        ("wow:\n  worker:\n    health-port: x\n", r"^wow\.worker\.health-port: .*integer"),
        ("wow:\n  worker:\n    shutdown-timeout: soon\n", r"^wow\.worker\.shutdown-timeout: inv"),
        (
            "wow:\n  worker:\n    pollers: 3\n",
            r"^wow\.worker\.pollers: unknown key; known: health-port, metrics-port, "
            r"shutdown-timeout, max-concurrent-activities, max-concurrent-workflow-tasks",
        ),
    ],
)
def test_invalid_worker_settings_in_the_file_name_the_key(
    tmp_path: Path, env: dict[str, str], text: str, message: str
) -> None:
    with pytest.raises(SettingsError, match=message):
        load_settings(write(tmp_path, text), env)


def test_a_service_named_wow_worker_is_not_a_setting(env: dict[str, str]) -> None:
    links = {"WOW_WORKER_SERVICE_HOST": "10.0.0.9", "WOW_WORKER_PORT": "tcp://10.0.0.9:8081"}
    assert load_settings(None, {**env, **links}).worker == WorkerSettings()


def test_telemetry_settings_from_the_environment() -> None:
    settings = load_settings(
        environ={
            "WOW_TELEMETRY_TRACING": "false",
            "WOW_TELEMETRY_OTLP_ENDPOINT": "http://collector:4318/",
            "WOW_TELEMETRY_METRICS": "OTLP",
            "WOW_API_METRICS_PORT": "9465",
        }
    )
    assert settings.telemetry.tracing is False
    assert settings.telemetry.otlp_endpoint == "http://collector:4318"
    assert settings.telemetry.metrics == "otlp"
    assert settings.api.metrics_port == 9465
    defaults = load_settings(environ={}).telemetry
    assert (defaults.tracing, defaults.otlp_endpoint, defaults.metrics) == (
        True, None, "prometheus"
    )
    with pytest.raises(SettingsError, match=r"^WOW_TELEMETRY_X: unknown telemetry setting"):
        load_settings(environ={"WOW_TELEMETRY_X": "1"})


def test_task_queue_and_pollers_from_a_file_and_the_environment(tmp_path: Path) -> None:
    path = write(
        tmp_path, "wow:\n  timers:\n    task-queue: shop\n  worker:\n    workflow-pollers: 4\n"
    )
    settings = load_settings(path, environ={"WOW_WORKER_ACTIVITY_POLLERS": "Auto"})
    assert settings.timers.task_queue == "shop"
    assert (settings.worker.workflow_pollers, settings.worker.activity_pollers) == (4, "auto")
    defaults = load_settings(environ={})
    assert defaults.timers.task_queue == "wow-timers"
    assert (defaults.worker.workflow_pollers, defaults.worker.activity_pollers) == ("auto", "auto")


def test_the_delivery_policy_is_derived_from_the_timer_settings() -> None:
    assert TimerSettings().delivery == DeliverySettings()  # one set of defaults
    settings = load_settings(
        environ={
            "WOW_TIMERS_MAX_ATTEMPTS": "3",
            "WOW_TIMERS_RETRY_INITIAL_INTERVAL": "200ms",
            "WOW_TIMERS_RETRY_MAX_INTERVAL": "5s",
            "WOW_TIMERS_RETRY_BACKOFF": "1.5",
        }
    )
    assert settings.timers.delivery == DeliverySettings(
        max_attempts=3,
        initial_interval=timedelta(milliseconds=200),
        max_interval=timedelta(seconds=5),
        backoff=1.5,
    )


# --- the dev stack's ports ------------------------------------------------------------------


def test_every_dev_port_is_a_setting_and_0_is_any_free_port(
    tmp_path: Path, env: dict[str, str]
) -> None:
    defaults = load_settings(None, env)
    assert (defaults.dev.temporal_port, defaults.dev.ui_port, defaults.dev.host_port) == (
        7233, 8233, 8089
    )
    assert (defaults.api_port, defaults.worker.metrics_port) == (8088, 9464)
    path = write(tmp_path, "wow:\n  dev:\n    temporal-port: 7000\n    ui-port: 0\n")
    environ = {**env, "WOW_CONFIG": str(path), "WOW_DEV_HOST_PORT": "0", "WOW_API_PORT": "0"}
    settings = load_settings(None, environ)
    assert (settings.dev.temporal_port, settings.dev.ui_port, settings.dev.host_port) == (
        7000, 0, 0
    )
    assert settings.api_port == 0  # any free port, as --api-port 0 (was refused)


def test_an_unknown_dev_variable_names_the_known_ones(env: dict[str, str]) -> None:
    with pytest.raises(
        SettingsError,
        match=r"^WOW_DEV_PORT: unknown dev stack setting; known: WOW_DEV_TEMPORAL_PORT, "
        r"WOW_DEV_UI_PORT, WOW_DEV_HOST_PORT$",
    ):
        load_settings(None, {**env, "WOW_DEV_PORT": "7233"})
