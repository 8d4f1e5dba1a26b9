"""Where settings come from, and which wins: the YAML file (`wow:` with Wow/Spring-style keys,
path from an argument or `WOW_CONFIG`), overlaid by the `WOW_*` environment variables, the
environment winning. `load_settings` validates the result at start; a key or `WOW_*` variable
it does not know is refused, naming it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from wow_temporal.settings.errors import Loc, SettingsError, explain
from wow_temporal.settings.model import (
    ApiSettings,
    DevSettings,
    HostSettings,
    JobOverride,
    Settings,
    TelemetrySettings,
    TimerSettings,
    WorkerSettings,
)
from wow_temporal.settings.values import fold, kebab

__all__ = ["load_settings"]

_TIMER_KEYS = tuple(kebab(name) for name in TimerSettings.model_fields)
_WORKER_KEYS = tuple(kebab(name) for name in WorkerSettings.model_fields)
_TELEMETRY_KEYS = tuple(kebab(name) for name in TelemetrySettings.model_fields)
_DEV_KEYS = tuple(kebab(name) for name in DevSettings.model_fields)
_JOB_KEYS = tuple(kebab(name) for name in JobOverride.model_fields)
_CONFIG_ENV = "WOW_CONFIG"
_ENV: dict[str, tuple[str, ...]] = {
    "WOW_HOST_URL": ("host-url",),
    "WOW_API_TOKEN": ("api", "token"),
    "WOW_API_PORT": ("api", "port"),
    "WOW_API_METRICS_PORT": ("api", "metrics-port"),
    "WOW_API_TENANT_TOKENS_FILE": ("api", "tenant-tokens-file"),
    "WOW_LOG_FORMAT": ("log-format",),
    "WOW_HOST_DB": ("host", "db"),
    "WOW_HOST_REPLICA": ("host", "replica"),
}
"""The single-value variables and the key each one sets."""
_TIMERS_ENV = "WOW_TIMERS_"
_WORKER_ENV = "WOW_WORKER_"
_TELEMETRY_ENV = "WOW_TELEMETRY_"
_DEV_ENV = "WOW_DEV_"
_SCHEDULES_ENV = "WOW_SCHEDULES_"
_KNOWN_ENV = ", ".join(
    [
        _CONFIG_ENV,
        *_ENV,
        f"{_TIMERS_ENV}<SETTING>",
        f"{_WORKER_ENV}<SETTING>",
        f"{_TELEMETRY_ENV}<SETTING>",
        f"{_DEV_ENV}<SETTING>",
        f"{_SCHEDULES_ENV}<JOB>_<FIELD>",
    ]
)
_PREFIXED: dict[str, tuple[str, tuple[str, ...], str]] = {
    _TIMERS_ENV: ("timers", _TIMER_KEYS, "timer"),
    _WORKER_ENV: ("worker", _WORKER_KEYS, "worker"),
    _TELEMETRY_ENV: ("telemetry", _TELEMETRY_KEYS, "telemetry"),
    _DEV_ENV: ("dev", _DEV_KEYS, "dev stack"),
}
"""`WOW_<SECTION>_<SETTING>` prefixes: the section, its keys, and what to call them."""
_SECTIONS: dict[str, type[BaseModel]] = {
    "api": ApiSettings,
    "host": HostSettings,
    "timers": TimerSettings,
    "worker": WorkerSettings,
    "telemetry": TelemetrySettings,
    "dev": DevSettings,
    "schedules": JobOverride,
}
"""The model of each `wow.<section>` (a job's keys under `wow.schedules.<name>`)."""
_MOVED = {"api-token": "wow.api.token", "api-port": "wow.api.port"}
"""Keys of earlier versions, refused with where they went (env variable names are unchanged)."""
_SERVICE_LINK = re.compile(
    r"WOW(_\w+)?_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)"
)
"""Kubernetes service-link variables: a Service named `wow-…` puts them in every pod."""


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
        raise SettingsError(explain(error, origins, source, Settings, _SECTIONS)) from None
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
            key = kebab(var[len(prefix) :].lower())
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
    wanted = fold(raw_name)
    for candidates in (file_jobs, code_jobs):
        matches = sorted({name for name in candidates if fold(str(name)) == wanted})
        if len(matches) > 1:
            raise SettingsError(f"{var}: ambiguous job name, matches {', '.join(matches)}")
        if matches:
            return str(matches[0])
    return raw_name.lower().replace("_", "-")
