"""The host's layer of a job's rule: `wow.schedules.<name>.*` read for an `App`'s jobs."""

from __future__ import annotations

from wow_temporal.domain.app import App
from wow_temporal.jobs.core import HostRule, RuleLayer
from wow_temporal.settings import Settings, SettingsError

__all__ = ["host_rules"]


def host_rules(settings: Settings, app: App) -> dict[str, HostRule]:
    """Each of `app`'s jobs' host override; `SettingsError` for an override of a job the app
    does not have (a misspelt name would otherwise change nothing, silently)."""
    rules: dict[str, HostRule] = {}
    for name, job in app.jobs.items():
        override = settings.schedule_override(name)
        if override is None:
            continue
        if override.partitions is not None and not job.definition.sharded:
            raise SettingsError(
                f"wow.schedules.{name}.partitions: job {name} is not sharded (sharded=True)"
            )
        rules[name] = HostRule(
            layer=RuleLayer(
                expression=override.expression, zone=override.zone, misfire=override.misfire
            ),
            enabled=override.enabled,
            partitions=override.partitions or 1,
        )
    matched = {key for key in settings.schedules if any(
        settings.schedule_override(name) is settings.schedules[key] for name in app.jobs
    )}
    unknown = sorted(set(settings.schedules) - matched)
    if unknown:
        known = ", ".join(sorted(app.jobs)) or "none"
        raise SettingsError(
            f"wow.schedules.{unknown[0]}: no job {unknown[0]} in context {app.context} "
            f"(its jobs: {known})"
        )
    return rules
