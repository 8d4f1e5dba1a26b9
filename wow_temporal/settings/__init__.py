"""Settings: timers, the production worker, per-job schedule overrides, the domain host, the
control API, the log format and Temporal.

They come from a YAML file with Wow/Spring-style keys (`wow.timers.poll-interval`, path from
`WOW_CONFIG` or an argument) and from `WOW_*` environment variables, the environment winning.
Every value is validated by `load_settings`, which fails at start with a `SettingsError` naming
the offending key, so a typo never surfaces later inside a running workflow. Every key and
`WOW_*` variable it does not know is refused too: a misspelt setting must not silently be the
default. Token values never appear in an error message or a repr.

The modules: `model` (the settings models), `delivery` (the delivery policy the workflows
carry), `durations`, `tokens`, `values` (shared value types), `sources` (the file and the
environment, and their precedence), `errors` (`SettingsError` and the explanations).
"""

from wow_temporal.settings.delivery import DeliverySettings
from wow_temporal.settings.durations import parse_duration
from wow_temporal.settings.errors import SettingsError
from wow_temporal.settings.model import (
    DEFAULT_HOST_DB,
    DEFAULT_TEMPORAL_ADDRESS,
    DEFAULT_TEMPORAL_NAMESPACE,
    ApiSettings,
    DevSettings,
    HostSettings,
    JobOverride,
    Settings,
    TelemetrySettings,
    TimerSettings,
    WorkerSettings,
    effective_rule,
)
from wow_temporal.settings.sources import load_settings
from wow_temporal.settings.tokens import TenantTokensFile

__all__ = [
    "DEFAULT_HOST_DB",
    "DEFAULT_TEMPORAL_ADDRESS",
    "DEFAULT_TEMPORAL_NAMESPACE",
    "ApiSettings",
    "DeliverySettings",
    "DevSettings",
    "HostSettings",
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
