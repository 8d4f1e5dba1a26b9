"""Settings: timers, the production worker, per-job schedule overrides, the domain host, the
control API, the log format and Temporal.

They come from a YAML file with Wow/Spring-style keys (`wow.timers.poll-interval`, path from
`WOW_CONFIG` or an argument) and from `WOW_*` environment variables, the environment winning.
Every value is validated by `load_settings`, which fails at start with a `SettingsError` naming
the offending key, so a typo never surfaces later inside a running workflow. Every key and
`WOW_*` variable it does not know is refused too: a misspelt setting must not silently be the
default. Token values never appear in an error message or a repr.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, Self
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from wow_temporal.schedule import CronText, Misfire, ZoneName, validate_key

__all__ = [
    "DEFAULT_TEMPORAL_ADDRESS",
    "DEFAULT_TEMPORAL_NAMESPACE",
    "ApiSettings",
    "JobOverride",
    "Settings",
    "SettingsError",
    "TelemetrySettings",
    "TenantTokensFile",
    "TimerSettings",
    "WorkerSettings",
    "effective_rule",
    "load_settings",
    "parse_duration",
]

DEFAULT_TEMPORAL_ADDRESS = "localhost:7233"
"""Where the Temporal frontend is when neither TEMPORAL_ADDRESS nor a profile says otherwise."""

DEFAULT_TEMPORAL_NAMESPACE = "default"
"""The namespace used when neither TEMPORAL_NAMESPACE nor a profile says otherwise."""


class SettingsError(ValueError):
    """Settings that cannot be used; the message starts with the key (`wow.timers.x` or `WOW_X`)."""


# --- value parsers -------------------------------------------------------------------------

_UNIT_DURATION = re.compile(r"([+-]?\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h|d)", re.IGNORECASE)
_ISO_DURATION = re.compile(
    r"([+-]?)P(?:(\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?",
    re.IGNORECASE,
)
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def parse_duration(value: Any) -> timedelta:
    """A duration from `1s`, `500ms`, `2m`, `1h`, `1d`, ISO `PT1S`, or a number of seconds.

    Raises ValueError with a message saying what is accepted.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}: {_DURATION_FORMS}")
    if isinstance(value, int | float):
        return _seconds(float(value), value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return _seconds(float(text), value)
        except ValueError:
            pass
        if match := _UNIT_DURATION.fullmatch(text):
            return _seconds(float(match[1]) * _UNIT_SECONDS[match[2].lower()], value)
        if (
            (match := _ISO_DURATION.fullmatch(text))
            and any(match.groups()[1:])
            and (not text.upper().endswith("T"))
        ):
            sign = -1.0 if match[1] == "-" else 1.0
            days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups()[1:])
            total = days * 86400 + hours * 3600 + minutes * 60 + seconds
            return _seconds(sign * total, value)
    raise ValueError(f"invalid duration {value!r}: {_DURATION_FORMS}")


_DURATION_FORMS = "use e.g. 1s, 500ms, 2m, 1h, PT1S or a number of seconds"


def _seconds(seconds: float, original: Any) -> timedelta:
    if not math.isfinite(seconds):
        raise ValueError(f"invalid duration {original!r}: {_DURATION_FORMS}")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise ValueError(f"duration {original!r} is too large") from None


def _positive(value: timedelta) -> timedelta:
    if value <= timedelta(0):
        raise ValueError(f"must be a positive duration, got {_show(value)}")
    return value


def _show(value: timedelta) -> str:
    return f"{value.total_seconds():g}s"


def _blank_is_none(value: Any) -> Any:
    """An empty string (e.g. `WOW_API_TOKEN=`) means "not set"."""
    if isinstance(value, str) and not value.strip():
        return None
    return value


def _misfire(value: Any) -> Any:
    """Misfire names case-insensitively, `-` for `_` (`catch-up`), as Spring binds enums."""
    if isinstance(value, str):
        return value.strip().upper().replace("-", "_")
    return value


def _job_name(value: str) -> str:
    return validate_key(value, "job name")


# Token checks name the tenant and what is wrong, never the token: messages reach logs.


def _token(value: Any) -> str | None:
    """The operator's token: blank is "not set"; a YAML number is refused, not reformatted."""
    value = _blank_is_none(value)
    if value is None:
        return None
    return _checked_token(value, "")


def _checked_token(value: Any, whose: str) -> str:
    """A non-empty string token without surrounding whitespace (which no request could send)."""
    if not isinstance(value, str):
        raise ValueError(f"{whose}must be a string, got {type(value).__name__} (quote it in YAML)")
    if not value.strip():
        raise ValueError(f"{whose}must not be empty")
    if value != value.strip():
        raise ValueError(f"{whose}must not start or end with whitespace")
    return value


def _tenant_token_map(value: Any) -> dict[str, tuple[str, ...]]:
    """Tenant id -> its tokens, from `{t1: token}` or `{t1: [new, old]}` (several to rotate).

    No token may be shared by two tenants: the API could not tell which tenant is calling.
    """
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(
            "must be a mapping of tenant id to token (or to a list of tokens), "
            f"got {type(value).__name__}"
        )
    tenants: dict[str, tuple[str, ...]] = {}
    owners: dict[str, str] = {}
    for raw_tenant, raw_tokens in value.items():
        tenant = _tenant_id(raw_tenant)
        if tenant in tenants:
            raise ValueError(f"tenant {tenant!r} is given twice")
        listed = [raw_tokens] if isinstance(raw_tokens, str) else raw_tokens
        if not isinstance(listed, list | tuple) or not listed:
            raise ValueError(
                f"tenant {tenant!r}: give a token or a non-empty list of tokens, "
                f"got {type(raw_tokens).__name__}"
            )
        whose = f"tenant {tenant!r}: a token "
        tokens = tuple(dict.fromkeys(_checked_token(token, whose) for token in listed))
        for token in tokens:
            owner = owners.setdefault(token, tenant)
            if owner != tenant:
                raise ValueError(f"tenants {owner!r} and {tenant!r} share a token")
        tenants[tenant] = tokens
    return tenants


def _tenant_id(value: Any) -> str:
    """A tenant id: a non-blank string, or a YAML integer key such as `1001:` read as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"tenant ids must be non-empty strings, got {value!r}")
    return value


Duration = Annotated[timedelta, BeforeValidator(parse_duration), AfterValidator(_positive)]


def _not_negative(value: timedelta) -> timedelta:
    if value < timedelta(0):
        raise ValueError(f"must not be a negative duration, got {_show(value)}")
    return value


def _log_format(value: Any) -> Any:
    """`text` or `json`, case-insensitively."""
    return value.strip().lower() if isinstance(value, str) else value


def _task_queue(value: str) -> str:
    if not value or value != value.strip() or any(c.isspace() for c in value) or len(value) > 200:
        raise ValueError(
            f"must be a task queue name: 1 to 200 characters, no spaces, got {value!r}"
        )
    return value


def _pollers(value: Any) -> Any:
    """`auto`, any case, or a whole number of at least 1."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"must be auto or a number of pollers of at least 1, got {value!r}")
    return value


def _port_or_off(value: int) -> int:
    if not 0 <= value <= 65535:
        raise ValueError(f"must be a port from 1 to 65535, or 0 for off, got {value}")
    return value


def _at_least_one(value: int) -> int:
    if value < 1:
        raise ValueError(f"must be at least 1, got {value}")
    return value


GraceDuration = Annotated[
    timedelta, BeforeValidator(parse_duration), AfterValidator(_not_negative)
]
PortOrOff = Annotated[int, AfterValidator(_port_or_off)]
AtLeastOne = Annotated[int, AfterValidator(_at_least_one)]
LogFormat = Annotated[Literal["text", "json"], BeforeValidator(_log_format)]
TaskQueue = Annotated[str, AfterValidator(_task_queue)]
Pollers = Annotated[Literal["auto"] | int, BeforeValidator(_pollers)]
CronSetting = Annotated[CronText | None, BeforeValidator(_blank_is_none)]


ZoneSetting = Annotated[ZoneName | None, BeforeValidator(_blank_is_none)]
JobName = Annotated[str, AfterValidator(_job_name)]


def _kebab(name: str) -> str:
    return name.replace("_", "-")


class _Config(BaseModel):
    """Frozen, kebab-case keys in YAML (`poll-interval`), snake_case in Python."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=_kebab,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


# --- models --------------------------------------------------------------------------------


class TimerSettings(_Config):
    """How the timers poll and how often they retry a delivery before parking it."""

    model_config = ConfigDict(extra="forbid")

    poll_interval: Duration = timedelta(seconds=1)
    """Wow's bound on how late a due command may be sent. Temporal pushes due timers to the
    worker, so there is nothing to poll: it is kept for Wow's settings, and bench/timers.py
    holds delivery lateness well under it (p99 ~150 ms against the default 1 s)."""
    max_attempts: int = 10
    """Delivery attempts of one command before it is parked for an operator."""
    retry_initial_interval: Duration = timedelta(seconds=1)
    """The wait before the first delivery retry."""
    retry_max_interval: Duration = timedelta(seconds=60)
    """The longest wait between delivery retries."""
    retry_backoff: float = 2.0
    """Each retry waits this many times longer than the one before (at least 1)."""
    task_queue: TaskQueue = "wow-timers"
    """The task queue the timers run on: the workers poll it, and ingest (the control API, a
    host's relay, the CLI) starts timers on it, so give every process the same."""

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
                f"retry-max-interval ({_show(self.retry_max_interval)}) must not be less than "
                f"retry-initial-interval ({_show(self.retry_initial_interval)})"
            )
        return self


class WorkerSettings(_Config):
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


class TelemetrySettings(_Config):
    """Traces and metrics: on by default, exported only where these say."""

    model_config = ConfigDict(extra="forbid")

    tracing: bool = True
    """Spans for ingest, deliveries and ticks, and the W3C trace context carried from a commit
    to the command its timer delivers (false: the commit's `traceparent` is passed on as is)."""
    otlp_endpoint: Annotated[
        str | None, BeforeValidator(_blank_is_none), AfterValidator(_otlp_endpoint)
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


class JobOverride(_Config):
    """A host's or tenant's change to one recurring job; None keeps what comes below it."""

    model_config = ConfigDict(extra="forbid")

    expression: CronSetting = None
    """A six-field Spring cron expression replacing the job's own."""
    zone: ZoneSetting = None
    """The IANA zone the expression is read in."""
    misfire: Annotated[Misfire | None, BeforeValidator(_misfire)] = None
    """What to do with slots missed while nothing ran the job."""
    enabled: bool | None = None
    """False turns the job off (a SYSTEM job is then not started)."""
    partitions: Annotated[int | None, Field(ge=1, le=1024)] = None
    """How many partitions a sharded job has (one instance each); 1 when not given."""


class TenantTokensFile(BaseModel):
    """A tenant-token file (`wow.api.tenant-tokens-file`) and the tokens it held when loaded."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    path: Path
    tenants: Annotated[dict[str, tuple[str, ...]], BeforeValidator(_tenant_token_map)] = Field(
        repr=False
    )
    """Tenant id -> its tokens, as in `wow.api.tenant-tokens`."""


def _tokens_file(value: Any) -> TenantTokensFile | None:
    """Read and check a tenant-token file (YAML or JSON) now, so a bad secret fails at start."""
    value = _blank_is_none(value)
    if value is None or isinstance(value, TenantTokensFile):
        return value
    if not isinstance(value, str | os.PathLike):
        raise ValueError(f"must be a file path, got {type(value).__name__}")
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: file not found") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: cannot read: not UTF-8 text") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot read: {error.strerror or error}") from None
    document = _parse_tokens(text, path)
    if not document:
        raise ValueError(f"{path}: holds no tenant tokens")
    try:
        tenants = _tenant_token_map(document)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return TenantTokensFile(path=path, tenants=tenants)


_QUOTED = re.compile(r"'[^']*'" + r'|"[^"]*"')


def _hide_word(quoted: re.Match[str]) -> str:
    """A quoted name in a YAML problem as `'…'`; a character (`','`) or `'<scalar>'` stays."""
    text = quoted[0]
    return text if len(text) <= 4 or text[1] == "<" else "'…'"


def _parse_tokens(text: str, path: Path) -> Any:
    """JSON if it starts with `{`, else YAML; a parse error says where, never the text there."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            where = f"line {error.lineno}, column {error.colno}"
            raise ValueError(f"{path}: malformed JSON: {error.msg} at {where}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        # str(error) quotes the offending line, which may hold a token: keep only the position,
        # and no quoted word of the problem (an undefined alias `*x` is named in it).
        problem = _QUOTED.sub(_hide_word, str(getattr(error, "problem", None) or "cannot parse"))
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"{path}: malformed YAML: {problem}{where}") from None


def _file_path(value: TenantTokensFile | None) -> str | None:
    """A tenant-token file dumps as its path: the tokens stay in the file."""
    return None if value is None else str(value.path)


class ApiSettings(_Config):
    """The HTTP control API: its port, the operator's token and each tenant's own tokens."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    token: Annotated[str | None, BeforeValidator(_token)] = Field(default=None, repr=False)
    """The operator's bearer token, reaching every tenant; None (and no tenant): no auth."""
    port: int = 8088
    """The port the HTTP control API listens on."""
    metrics_port: PortOrOff = 0
    """Where the control API process serves its Prometheus metrics (the commits it ingests,
    beside the Temporal client's); 0: none."""
    tenant_tokens: Annotated[dict[str, tuple[str, ...]], BeforeValidator(_tenant_token_map)] = (
        Field(default_factory=dict, repr=False)
    )
    """Tenant id -> its bearer tokens (several while one is rotated), each reaching that tenant."""
    tenant_tokens_file: Annotated[
        TenantTokensFile | None, BeforeValidator(_tokens_file), PlainSerializer(_file_path)
    ] = None
    """The same mapping from a YAML or JSON file (a mounted Kubernetes secret), read at load."""

    @field_validator("port")
    @classmethod
    def _port(cls, value: int) -> int:
        if not 1 <= value <= 65535:
            raise ValueError(f"must be a port from 1 to 65535, got {value}")
        return value

    @field_validator("tenant_tokens")
    @classmethod
    def _inline_tokens(
        cls, value: dict[str, tuple[str, ...]], info: ValidationInfo
    ) -> dict[str, tuple[str, ...]]:
        _not_the_operator(value, info.data.get("token"), "")
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
        _not_the_operator(value.tenants, info.data.get("token"), f"{value.path}: ")
        return value

    @property
    def tenants(self) -> Mapping[str, tuple[str, ...]]:
        """Tenant id -> its tokens, from `tenant-tokens` or the file (only one may be set)."""
        if self.tenant_tokens_file is not None:
            return self.tenant_tokens_file.tenants
        return self.tenant_tokens


def _not_the_operator(
    tenants: Mapping[str, tuple[str, ...]], operator: str | None, where: str
) -> None:
    """A tenant's token must not be the operator's, which reaches every tenant."""
    for tenant, tokens in tenants.items():
        if operator is not None and operator in tokens:
            raise ValueError(
                f"{where}tenant {tenant!r} has the operator's token "
                "(wow.api.token, WOW_API_TOKEN): give each tenant its own"
            )


class Settings(_Config):
    """Everything the timers, the control API and the Temporal client are configured with."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    host_url: Annotated[str | None, BeforeValidator(_blank_is_none)] = None
    """The domain host's base URL (http or https) that scheduled commands are delivered to."""
    api: ApiSettings = Field(default_factory=ApiSettings)
    timers: TimerSettings = Field(default_factory=TimerSettings)
    schedules: dict[JobName, JobOverride] = Field(default_factory=dict)
    """Per-job overrides by job name (the host's layer of `effective_rule`)."""
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
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
        wanted = _fold(name)
        matches = [job for key, job in self.schedules.items() if _fold(key) == wanted]
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


# --- loading -------------------------------------------------------------------------------

_TIMER_KEYS = tuple(_kebab(name) for name in TimerSettings.model_fields)
_WORKER_KEYS = tuple(_kebab(name) for name in WorkerSettings.model_fields)
_TELEMETRY_KEYS = tuple(_kebab(name) for name in TelemetrySettings.model_fields)
_JOB_KEYS = tuple(_kebab(name) for name in JobOverride.model_fields)
_CONFIG_ENV = "WOW_CONFIG"
_ENV: dict[str, tuple[str, ...]] = {
    "WOW_HOST_URL": ("host-url",),
    "WOW_API_TOKEN": ("api", "token"),
    "WOW_API_PORT": ("api", "port"),
    "WOW_API_METRICS_PORT": ("api", "metrics-port"),
    "WOW_API_TENANT_TOKENS_FILE": ("api", "tenant-tokens-file"),
    "WOW_LOG_FORMAT": ("log-format",),
}
"""The single-value variables and the key each one sets."""
_TIMERS_ENV = "WOW_TIMERS_"
_WORKER_ENV = "WOW_WORKER_"
_TELEMETRY_ENV = "WOW_TELEMETRY_"
_SCHEDULES_ENV = "WOW_SCHEDULES_"
_KNOWN_ENV = ", ".join(
    [
        _CONFIG_ENV,
        *_ENV,
        f"{_TIMERS_ENV}<SETTING>",
        f"{_WORKER_ENV}<SETTING>",
        f"{_TELEMETRY_ENV}<SETTING>",
        f"{_SCHEDULES_ENV}<JOB>_<FIELD>",
    ]
)
_PREFIXED: dict[str, tuple[str, tuple[str, ...], str]] = {
    _TIMERS_ENV: ("timers", _TIMER_KEYS, "timer"),
    _WORKER_ENV: ("worker", _WORKER_KEYS, "worker"),
    _TELEMETRY_ENV: ("telemetry", _TELEMETRY_KEYS, "telemetry"),
}
"""`WOW_<SECTION>_<SETTING>` prefixes: the section, its keys, and what to call them."""
_SECTIONS: dict[str, type[BaseModel]] = {
    "api": ApiSettings,
    "timers": TimerSettings,
    "worker": WorkerSettings,
    "telemetry": TelemetrySettings,
    "schedules": JobOverride,
}
"""The model of each `wow.<section>` (a job's keys under `wow.schedules.<name>`)."""
_MOVED = {"api-token": "wow.api.token", "api-port": "wow.api.port"}
"""Keys of earlier versions, refused with where they went (env variable names are unchanged)."""
_SERVICE_LINK = re.compile(
    r"WOW(_\w+)?_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)"
)
"""Kubernetes service-link variables: a Service named `wow-…` puts them in every pod."""

Loc = tuple[str, ...]


def _fold(name: str) -> str:
    """A job name compared case-blind with `-` and `_` the same."""
    return name.lower().replace("-", "_")


def load_settings(
    path: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    known_jobs: Iterable[str] = (),
) -> Settings:
    """Settings from the YAML file (`path`, else `WOW_CONFIG`) overridden by `WOW_*` variables.

    `environ` defaults to `os.environ`. `known_jobs` are the code's job names, used to map
    `WOW_SCHEDULES_<NAME>_*` back to a name besides those in the file. Raises `SettingsError`,
    also for any key or `WOW_*` variable it does not know.
    """
    env: Mapping[str, str] = dict(os.environ) if environ is None else environ
    source = ""
    wow: dict[str, Any] = {}
    if path is not None:
        source = str(path)
        wow = _read_file(Path(path), f"settings file {source}", source)
    elif env.get(_CONFIG_ENV):
        source = env[_CONFIG_ENV]
        wow = _read_file(Path(source), f"{_CONFIG_ENV}={source}", source)

    origins: dict[Loc, str] = {}
    _apply_env(wow, env, origins, known_jobs)
    try:
        settings = Settings.model_validate(wow)
    except ValidationError as error:
        raise SettingsError(_explain(error, origins, source)) from None
    settings._environ = {k: v for k, v in env.items() if k.startswith("TEMPORAL_")}
    settings.temporal_connect_config()  # fail at start on a broken Temporal profile
    return settings


def _read_file(path: Path, label: str, source: str) -> dict[str, Any]:
    """The `wow` mapping of a settings file, copied so env overrides can be merged in.

    The file is wow-temporal's own: a top-level key other than `wow` is a mistake, refused.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsError(f"{label}: file not found") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"{label}: cannot read: {error}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        detail = " ".join(str(error).split())
        raise SettingsError(f"{label}: malformed YAML: {detail}") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise SettingsError(f"{label}: must be a mapping with a 'wow' key")
    for key in document:
        if key != "wow":
            raise SettingsError(f"{key}: unknown key; known: wow (in {source})")
    wow = document.get("wow")
    if wow is None:
        return {}
    if not isinstance(wow, dict):
        raise SettingsError(f"wow: must be a mapping, got {type(wow).__name__} ({label})")
    for key in wow:
        if isinstance(key, str) and (moved := _MOVED.get(key.replace("_", "-"))):
            raise SettingsError(f"wow.{key}: moved to {moved} (in {source})")
    merged = dict(wow)
    for section in _SECTIONS:
        value = merged.get(section)
        if value is None:
            merged.pop(section, None)
        elif isinstance(value, dict):
            merged[section] = dict(value)
    if isinstance(merged.get("schedules"), dict):
        merged["schedules"] = {
            name: {} if job is None else dict(job) if isinstance(job, dict) else job
            for name, job in merged["schedules"].items()
        }
    return merged


def _set(section: dict[str, Any], key: str, value: str) -> None:
    """Put an env value at its kebab key, dropping a snake_case spelling from the file."""
    section.pop(key.replace("-", "_"), None)
    section[key] = value


def _section(wow: dict[str, Any], name: str) -> dict[str, Any]:
    section = wow.setdefault(name, {})
    if not isinstance(section, dict):
        raise SettingsError(f"wow.{name}: must be a mapping, got {type(section).__name__}")
    return section


def _apply_env(
    wow: dict[str, Any],
    env: Mapping[str, str],
    origins: dict[Loc, str],
    known_jobs: Iterable[str],
) -> None:
    """Merge the `WOW_*` variables into the file's `wow` mapping, remembering their names."""
    file_jobs = list(wow["schedules"]) if isinstance(wow.get("schedules"), dict) else []
    code_jobs = list(known_jobs)
    for var in sorted(env):
        value = env[var]
        if not var.startswith("WOW_") or var == _CONFIG_ENV:
            continue
        if var in _ENV:
            loc = _ENV[var]
            target = _section(wow, loc[0]) if len(loc) > 1 else wow
            _set(target, loc[-1], value)
            origins[loc] = var
        elif _is_service_link(var, value):
            continue
        elif prefix := next((p for p in _PREFIXED if var.startswith(p)), None):
            section, keys, what = _PREFIXED[prefix]
            key = _kebab(var[len(prefix) :].lower())
            if key not in keys:
                known = ", ".join(prefix + k.replace("-", "_").upper() for k in keys)
                raise SettingsError(f"{var}: unknown {what} setting; known: {known}")
            _set(_section(wow, section), key, value)
            origins[(section, key)] = var
        elif var.startswith(_SCHEDULES_ENV):
            rest = var[len(_SCHEDULES_ENV) :]
            field = next((k for k in _JOB_KEYS if rest.upper().endswith("_" + k.upper())), None)
            if field is None:
                fields = "|".join(k.upper() for k in _JOB_KEYS)
                raise SettingsError(f"{var}: expected {_SCHEDULES_ENV}<NAME>_{fields}")
            raw_name = rest[: -len(field) - 1]
            if not raw_name:
                raise SettingsError(f"{var}: the job name is missing")
            name = _job_for(var, raw_name, file_jobs, code_jobs)
            jobs = _section(wow, "schedules")
            job = jobs.setdefault(name, {})
            if not isinstance(job, dict):
                raise SettingsError(
                    f"wow.schedules.{name}: must be a mapping, got {type(job).__name__}"
                )
            _set(job, field, value)
            origins[("schedules", name, field)] = var
        else:
            raise SettingsError(f"{var}: unknown variable; known: {_KNOWN_ENV}")


def _is_service_link(var: str, value: str) -> bool:
    """A variable Kubernetes injects for a Service named `wow-…`, not a setting.

    `WOW_X_SERVICE_HOST`, `WOW_X_SERVICE_PORT[_NAME]`, `WOW_X_PORT_8088_TCP[_ADDR|…]`, and
    `WOW_X_PORT=tcp://…`; refusing them would stop every pod of such a namespace.
    """
    if _SERVICE_LINK.fullmatch(var):
        return True
    return var.endswith("_PORT") and re.match(r"(tcp|udp|sctp)://", value) is not None


def _job_for(var: str, raw_name: str, file_jobs: list[str], code_jobs: list[str]) -> str:
    """The job a `WOW_SCHEDULES_<NAME>_*` variable means: one in the file, else in the code."""
    wanted = _fold(raw_name)
    for candidates in (file_jobs, code_jobs):
        matches = sorted({name for name in candidates if _fold(str(name)) == wanted})
        if len(matches) > 1:
            raise SettingsError(f"{var}: ambiguous job name, matches {', '.join(matches)}")
        if matches:
            return str(matches[0])
    return raw_name.lower().replace("_", "-")


def _explain(error: ValidationError, origins: dict[Loc, str], source: str) -> str:
    """`key: what is wrong` for each problem, the key as the user wrote it (YAML or env).

    The input is shown for a wrong type, except under `wow.api` (but its port), where it may
    be a token.
    """
    lines = []
    for item in error.errors(include_url=False)[:5]:
        loc: Loc = tuple(str(part) for part in item["loc"] if part != "[key]")
        where = origins.get(loc) or ".".join(("wow", *loc))
        suffix = f" (in {source})" if source and loc not in origins else ""
        message = str(item["msg"]).removeprefix("Value error, ")
        secret = loc[:1] == ("api",) and [_kebab(part) for part in loc[1:2]] != ["port"]
        if item["type"] == "extra_forbidden":
            section = Settings if len(loc) == 1 else _SECTIONS.get(loc[0], Settings)
            known = ", ".join(_kebab(name) for name in section.model_fields)
            message = f"unknown key; known: {known}"
        elif item["type"] != "value_error" and not secret:
            message += f", got {item['input']!r}"
        lines.append(f"{where}: {message}{suffix}")
    return "; ".join(lines)
