"""Jobs show the timers' face (issue #40): `JobFilter` is to `JobClient.list`/`page` what
`TimerFilter` is to `TimerClient`'s, and its visibility query is the one `GET /schedules` and
`schedule list` run."""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from wow_temporal import JobClient, JobFilter, TimerClient, TimerFilter
from wow_temporal.jobs.core import JobStatus

_BASE = "WorkflowType = 'wow.Job' AND ExecutionStatus = 'Running'"


def test_no_filter_lists_every_running_instance() -> None:
    assert JobFilter().query() == _BASE


def test_each_filter_given_narrows_the_query() -> None:
    where = JobFilter(context="eshop-inventory", name="receive-deliveries", tenant="t1")
    assert where.query() == (
        f"{_BASE} AND WorkflowId STARTS_WITH 'wow-job:eshop-inventory:' "
        "AND WowJob = 'receive-deliveries' AND WowTenant = 't1'"
    )


def test_a_context_is_encoded_as_the_ids_are_and_values_are_quoted() -> None:
    where = JobFilter(context="a:b", tenant="o'brien")
    assert "WorkflowId STARTS_WITH 'wow-job:a%3Ab:'" in where.query()
    assert "WowTenant = 'o\\'brien'" in where.query()


@pytest.mark.parametrize("given", ["parked", "PARKED", "Parked", JobStatus.PARKED])
def test_a_status_is_read_in_any_case(given: str) -> None:
    where = JobFilter(status=given)
    assert where.status is JobStatus.PARKED
    assert where.query().endswith("AND WowStatus = 'Parked'")


def test_an_unknown_status_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(ValidationError, match="unknown status 'Sleeping': use one of Enabled"):
        JobFilter(status="Sleeping")


def test_the_filter_is_frozen_and_takes_camel_case_as_the_timers_does() -> None:
    assert JobFilter.model_config == TimerFilter.model_config
    where = JobFilter.model_validate({"context": "c", "name": "n"})
    with pytest.raises(ValidationError):
        where.name = "other"


@pytest.mark.parametrize("verb", ["list", "page"])
def test_list_and_page_take_a_filter_as_the_timers_do(verb: str) -> None:
    jobs = inspect.signature(getattr(JobClient, verb)).parameters
    timers = inspect.signature(getattr(TimerClient, verb)).parameters
    assert list(jobs) == list(timers) == ["self", "where", "limit"]
    assert jobs["where"].annotation == "JobFilter | None"
    assert timers["where"].annotation == "TimerFilter | None"
    assert jobs["limit"].kind is timers["limit"].kind is inspect.Parameter.KEYWORD_ONLY
    assert jobs["limit"].default == timers["limit"].default
