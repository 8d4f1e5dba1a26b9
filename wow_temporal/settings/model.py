"""The settings models: timers, the production worker, telemetry, per-job schedule overrides,
the control API, the domain host's store, and `Settings`, which holds them all and the Temporal
connection's profile.

Every model refuses a key it does not know: a misspelt setting must not silently be the default.
Token values never appear in an error message or a repr.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from wow_temporal.model import Misfire
from wow_temporal.settings.delivery import DeliverySettings
from wow_temporal.settings.durations import Duration, GraceDuration, show_duration
from wow_temporal.settings.errors import SettingsError
from wow_temporal.settings.tokens import (
    OperatorToken,
    TenantTokens,
    TenantTokensFile,
    TokensFile,
    not_the_operator,
)
from wow_temporal.settings.values import (
    AnyPort,
    AtLeastOne,
    CronSetting,
    JobName,
    LogFormat,
    MisfireSetting,
    Pollers,
    PortOrOff,
    Section,
    TaskQueue,
    ZoneSetting,
    blank_is_none,
    fold,
)

__all__ = [
    "DEFAULT_HOST_DB",
    "DEFAULT_TEMPORAL_ADDRESS",
    "DEFAULT_TEMPORAL_NAMESPACE",
    "ApiSettings",
    "HostSettings",
    "JobOverride",
    "Settings",
    "TelemetrySettings",
    "TimerSettings",
    "WorkerSettings",
    "effective_rule",
]

DEFAULT_TEMPORAL_ADDRESS = "localhost:7233"
"""Where the Temporal frontend is when neither TEMPORAL_ADDRESS nor a profile says otherwise."""

DEFAULT_TEMPORAL_NAMESPACE = "default"
"""The namespace used when neither TEMPORAL_NAMESPACE nor a profile says otherwise."""


_DELIVERY = DeliverySettings()
"""The delivery policy's defaults, which `wow.timers.*` start from."""


class TimerSettings(Section):
    """The timers' task queue, their bound on lateness, and how often a delivery is retried
    before it is parked (`delivery`: that policy as the workflows take it)."""

    model_config = ConfigDict(extra="forbid")

    poll_interval: Duration = timedelta(seconds=1)
    """Wow's bound on how late a due command may be sent. Temporal pushes due timers to the
    worker, so nothing polls: a delivery whose first attempt starts later than this after its
    due time is counted in `wow_deliveries_late_total` (a handover or a backlog)."""
    max_attempts: int = _DELIVERY.max_attempts
    """Delivery attempts of one command before it is parked for an operator."""
    retry_initial_interval: Duration = _DELIVERY.initial_interval
    """The wait before the first delivery retry."""
    retry_max_interval: Duration = _DELIVERY.max_interval
    """The longest wait between delivery retries."""
    retry_backoff: float = _DELIVERY.backoff
    """Each retry waits this many times longer than the one before (at least 1)."""
    task_queue: TaskQueue = "wow-timers"
    """The task queue the timers run on: the workers poll it, and ingest (the control API, a
    host's relay, the CLI) starts timers on it, so give every process the same."""

    @property
    def delivery(self) -> DeliverySettings:
        """The delivery policy these settings configure, as the timer and job workflows take it
        (the one place `wow.timers.*` is turned into it)."""
        return DeliverySettings(
            max_attempts=self.max_attempts,
            initial_interval=self.retry_initial_interval,
            max_interval=self.retry_max_interval,
            backoff=self.retry_backoff,
        )

    @field_validator("max_attempts")
    @classmethod
    def _at_least_one(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    @field_validator("retry_backoff")
    @classmethod
    def _backoff(cls, value: float) -> float:
        if not math.isfinite(value) or value < 1.0:
            raise ValueError(f"must be a number of at least 1.0, got {value}")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.retry_max_interval < self.retry_initial_interval:
            raise ValueError(
                f"retry-max-interval ({show_duration(self.retry_max_interval)}) must not be "
                f"less than retry-initial-interval ({show_duration(self.retry_initial_interval)})"
            )
        return self


class WorkerSettings(Section):
    """The production worker: its health and metrics ports, shutdown and concurrency."""

    model_config = ConfigDict(extra="forbid")

    health_port: PortOrOff = 8081
    """Where `/livez` and `/readyz` are served (on every interface); 0: no health endpoints."""
    metrics_port: PortOrOff = 9464
    """Where the Prometheus metrics are to be served; 0: none."""
    shutdown_timeout: GraceDuration = timedelta(seconds=30)
    """How long a stopping worker lets in-flight deliveries and ticks finish before it cancels
    them (they are then retried by another worker)."""
    max_concurrent_activities: AtLeastOne = 200
    """Deliveries and ticks one worker runs at once (per task queue)."""
    max_concurrent_workflow_tasks: AtLeastOne = 100
    """Workflow tasks one worker runs at once (per task queue); the Temporal SDK's default."""
    workflow_pollers: Pollers = "auto"
    """Pollers of workflow tasks per task queue: `auto` scales them with the backlog (fixed
    numbers starved the sticky or the normal queue under load), or at most this many."""
    activity_pollers: Pollers = "auto"
    """Pollers of deliveries and ticks per task queue: `auto`, or at most this many."""

    @model_validator(mode="after")
    def _distinct_ports(self) -> Self:
        if self.health_port and self.health_port == self.metrics_port:
            raise ValueError(
                f"health-port and metrics-port must differ, both are {self.health_port}"
            )
        return self


def _otlp_endpoint(value: str | None) -> str | None:
    if value is None:
        return None
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"must be the OTLP/HTTP collector's base URL such as http://collector:4318, "
            f"got {value!r}"
        )
    return value.strip().rstrip("/")


DEFAULT_HOST_DB = ".wow-temporal/domain.db"
"""The domain host's store when neither `--db` nor `wow.host.db` says otherwise."""


class HostSettings(Section):
    """The domain host process (`wow-temporal host`); kept out of a repr: a URI's password."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    db: str = Field(default=DEFAULT_HOST_DB, repr=False)
    """Its event store: a SQLite file (one host per file) or a `postgresql://` URI (any number
    of replicas), its password there or in `PGPASSWORD` or a password file (`PGPASSFILE`);
    `--db` wins."""

    replica: Annotated[str | None, BeforeValidator(blank_is_none)] = Field(
        default=None, max_length=200
    )
    """This process's name among the host replicas sharing a PostgreSQL store, shown as the
    holder of the followers it runs (`/wow/followers`); unset: `hostname:pid`. A pod sets its
    own name (the Helm chart does)."""

    @field_validator("db")
    @classmethod
    def _db(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must be a SQLite file's path or a postgresql:// URI, got nothing")
        return value.strip()


class TelemetrySettings(Section):
    """Traces and metrics: on by default, exported only where these say."""

    model_config = ConfigDict(extra="forbid")

    tracing: bool = True
    """Spans for ingest, deliveries and ticks, and the W3C trace context carried from a commit
    to the command its timer delivers (false: the commit's `traceparent` is passed on as is)."""
    otlp_endpoint: Annotated[
        str | None, BeforeValidator(blank_is_none), AfterValidator(_otlp_endpoint)
    ] = None
    """The OTLP/HTTP collector (`http://collector:4318`) spans are exported to; unset: none
    are exported. Needs the `wow-temporal[otlp]` extra."""
    metrics: Literal["prometheus", "otlp"] = "prometheus"
    """Where the worker's metrics go: `prometheus`, served on `wow.worker.metrics-port`, or
    `otlp`, pushed to `otlp-endpoint` (Temporal's runtime takes one metrics sink)."""

    @field_validator("metrics", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.strip().lower() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _otlp_needs_endpoint(self) -> Self:
        if self.metrics == "otlp" and self.otlp_endpoint is None:
            raise ValueError("metrics: otlp needs otlp-endpoint, the collector's URL")
        return self


class JobOverride(Section):
    """A host's or tenant's change to one recurring job; None keeps what comes below it."""

    model_config = ConfigDict(extra="forbid")

    expression: CronSetting = None
    """A six-field Spring cron expression replacing the job's own."""
    zone: ZoneSetting = None
    """The IANA zone the expression is read in."""
    misfire: MisfireSetting = None
    """What to do with slots missed while nothing ran the job."""
    enabled: bool | None = None
    """False turns the job off (a SYSTEM job is then not started)."""
    partitions: Annotated[int | None, Field(ge=1, le=1024)] = None
    """How many partitions a sharded job has (one instance each); 1 when not given."""


class ApiSettings(Section):
    """The HTTP control API: its port, the operator's token and each tenant's own tokens."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    token: OperatorToken = Field(default=None, repr=False)
    """The operator's bearer token, reaching every tenant; None (and no tenant): no auth."""
    port: AnyPort = 8088
    """The port the HTTP control API listens on; 0: any free port (the process prints it)."""
    metrics_port: PortOrOff = 0
    """Where the control API process serves its Prometheus metrics (the commits it ingests,
    beside the Temporal client's); 0: none."""
    tenant_tokens: TenantTokens = Field(default_factory=dict, repr=False)
    """Tenant id -> its bearer tokens (several while one is rotated), each reaching that tenant."""
    tenant_tokens_file: TokensFile = None
    """The same mapping from a YAML or JSON file (a mounted Kubernetes secret), read at load."""

    @field_validator("tenant_tokens")
    @classmethod
    def _inline_tokens(
        cls, value: dict[str, tuple[str, ...]], info: ValidationInfo
    ) -> dict[str, tuple[str, ...]]:
        not_the_operator(value, info.data.get("token"), "")
        return value

    @field_validator("tenant_tokens_file")
    @classmethod
    def _file_tokens(
        cls, value: TenantTokensFile | None, info: ValidationInfo
    ) -> TenantTokensFile | None:
        if value is None:
            return None
        if info.data.get("tenant_tokens"):
            raise ValueError(
                "cannot be used together with wow.api.tenant-tokens: "
                "keep every tenant's tokens in one of them"
            )
        not_the_operator(value.tenants, info.data.get("token"), f"{value.path}: ")
        return value

    @property
    def tenants(self) -> Mapping[str, tuple[str, ...]]:
        """Tenant id -> its tokens, from `tenant-tokens` or the file (only one may be set)."""
        if self.tenant_tokens_file is not None:
            return self.tenant_tokens_file.tenants
        return self.tenant_tokens


class DevSettings(Section):
    """The ports of `wow-temporal dev`'s own servers, each also a flag of the same name
    (`--temporal-port`, …); its control API and metrics are on `wow.api.port` and
    `wow.worker.metrics-port`. 0: any free port, printed at start."""

    model_config = ConfigDict(extra="forbid")

    temporal_port: AnyPort = 7233
    """The embedded Temporal server's gRPC frontend."""
    ui_port: AnyPort = 8233
    """Its Web UI (none with `--headless`)."""
    host_port: AnyPort = 8089
    """The dev domain host (the e-shop's, or the echo host's)."""


class Settings(Section):
    """Everything the timers, the control API and the Temporal client are configured with."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    host_url: Annotated[str | None, BeforeValidator(blank_is_none)] = None
    """The domain host's base URL (http or https) that scheduled commands are delivered to."""
    api: ApiSettings = Field(default_factory=ApiSettings)
    timers: TimerSettings = Field(default_factory=TimerSettings)
    schedules: dict[JobName, JobOverride] = Field(default_factory=dict)
    """Per-job overrides by job name (the host's layer of `effective_rule`)."""
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    host: HostSettings = Field(default_factory=HostSettings)
    dev: DevSettings = Field(default_factory=DevSettings)
    log_format: LogFormat = "text"
    """How the CLI writes log records: `text` (one plain line each) or `json` (one object)."""

    _environ: Mapping[str, str] | None = PrivateAttr(default=None)
    """The TEMPORAL_* variables `load_settings` saw; None: read `os.environ` when asked."""

    @field_validator("host_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        problem = "must be an http or https URL such as http://localhost:8080"
        try:
            parts = urlsplit(value.strip())
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            raise ValueError(f"{problem}, got {value!r}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{problem}, got {value!r}")
        if parts.query or parts.fragment:
            raise ValueError(f"{problem} without query or fragment, got {value!r}")
        return value.strip().rstrip("/")

    @model_validator(mode="before")
    @classmethod
    def _api_keywords(cls, data: Any) -> Any:
        """`Settings(api_token=..., api_port=...)` in Python, as before `api` was a section.

        `load_settings` refuses these keys in a file (they moved to `wow.api.*`).
        """
        if not isinstance(data, dict) or not {"api_token", "api_port"} & data.keys():
            return data
        if "api" in data:
            raise ValueError("give either api or api_token/api_port, not both")
        data = dict(data)
        data["api"] = {
            name: data.pop(f"api_{name}") for name in ("token", "port") if f"api_{name}" in data
        }
        return data

    @property
    def api_token(self) -> str | None:
        """The operator's bearer token (`wow.api.token`); None: no operator token."""
        return self.api.token

    @property
    def api_port(self) -> int:
        """The port the control API listens on (`wow.api.port`)."""
        return self.api.port

    @property
    def api_tenant_tokens(self) -> Mapping[str, str]:
        """Token -> tenant, read-only: what `wow_temporal.api.create_app(tenant_tokens=)` takes."""
        return MappingProxyType(
            {token: tenant for tenant, tokens in self.api.tenants.items() for token in tokens}
        )

    def schedule_override(self, name: str) -> JobOverride | None:
        """The host's override of job `name`: exact key first, else `-`/`_` and case-blind."""
        if name in self.schedules:
            return self.schedules[name]
        wanted = fold(name)
        matches = [job for key, job in self.schedules.items() if fold(key) == wanted]
        return matches[0] if len(matches) == 1 else None

    def temporal_connect_config(self) -> dict[str, Any]:
        """Keyword arguments for `temporalio.client.Client.connect`.

        Read by `temporalio.envconfig` from TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
        TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_PROFILE and the TOML profile file
        (TEMPORAL_CONFIG_FILE), in the environment `load_settings` was given; defaults
        localhost:7233 and the `default` namespace; with the pydantic data converter that the
        project's models need. Raises `SettingsError` if the profile cannot be loaded.
        """
        from temporalio.contrib.pydantic import pydantic_data_converter
        from temporalio.envconfig import ClientConfigProfile

        environ = self._environ if self._environ is not None else dict(os.environ)
        try:
            profile = ClientConfigProfile.load(override_env_vars=environ)
        except (RuntimeError, ValueError, OSError) as error:
            where = "TEMPORAL_PROFILE / TEMPORAL_CONFIG_FILE"
            raise SettingsError(f"{where}: cannot load the Temporal profile: {error}") from None
        try:  # reads the TLS files TEMPORAL_TLS_*_PATH name
            config: dict[str, Any] = dict(profile.to_client_connect_config())
        except OSError as error:
            raise SettingsError(
                f"TEMPORAL_TLS_*: cannot read {getattr(error, 'filename', None) or 'a TLS file'}: "
                f"{error.strerror or error}"
            ) from None
        config.setdefault("target_host", DEFAULT_TEMPORAL_ADDRESS)
        config.setdefault("namespace", DEFAULT_TEMPORAL_NAMESPACE)
        config["data_converter"] = pydantic_data_converter
        return config


def effective_rule(
    code: tuple[str, str, Misfire], host: JobOverride | None, tenant: JobOverride | None
) -> tuple[str, str, Misfire]:
    """The (expression, zone, misfire) a job runs with, field by field: tenant, host, code.

    "A tenant's own rule comes before the host's, which comes before the code's."
    """
    expression, zone, misfire = code
    for layer in (host, tenant):  # later layers win
        if layer is None:
            continue
        expression = layer.expression if layer.expression is not None else expression
        zone = layer.zone if layer.zone is not None else zone
        misfire = layer.misfire if layer.misfire is not None else misfire
    return expression, zone, misfire
