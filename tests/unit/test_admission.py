"""Admission (`wow_temporal.timers.admission`): the one check every entrance's batch passes before
ingest touches Temporal; pure, so every refusal is tested here without a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wow_temporal.model import Commit, InvalidCommitError
from wow_temporal.timers.admission import MAX_WORKFLOW_ID_BYTES, Admission, admit
from wow_temporal.timers.changes import changes_of, continuing

CREATED = int(datetime(2026, 12, 1, tzinfo=UTC).timestamp() * 1000)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def set_event(event_id: str, key: str) -> dict[str, Any]:
    body = {"key": key, "rule": {"after": "PT1M"}, "command": {"type": "shop.Cancel", "body": {}}}
    return {"id": event_id, "name": "wow.ScheduleSet", "body": body}


def cancel_event(event_id: str, key: str) -> dict[str, Any]:
    return {"id": event_id, "name": "wow.ScheduleCancelled", "body": {"key": key}}


def domain_event(event_id: str) -> dict[str, Any]:
    return {"id": event_id, "name": "shop.OrderPaid", "body": {}}


def commit(version: int = 1, *events: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "id": f"c{version}",
        "contextName": "shop",
        "aggregateName": "order",
        "tenantId": "t",
        "aggregateId": "1",
        "version": version,
        "createTime": CREATED,
        "body": list(events) or [set_event("e1", "grace")],
        **fields,
    }


def refused(batch: list[Any]) -> str:
    with pytest.raises(InvalidCommitError) as caught:
        admit(batch)
    return str(caught.value)


# --- what passes ---------------------------------------------------------------------------


def test_a_batch_is_admitted_in_order_with_the_changes_ingest_makes_of_each() -> None:
    first = commit(1, set_event("e1", "a"), cancel_event("e2", "b"))
    second = commit(2, {"id": "e1", "name": "wow.AggregateDeleted", "body": {}})
    admission = admit([first, second])
    assert [item.commit.id for item in admission] == ["c1", "c2"]
    for item, raw in zip(admission, (first, second), strict=True):
        assert list(item.changes) == changes_of(Commit.parse(raw))


def test_a_commit_is_taken_as_a_model_a_decoded_object_or_json_text() -> None:
    raw = commit(3)
    forms: list[Any] = [Commit.parse(raw), raw, json.dumps(raw), json.dumps(raw).encode()]
    admitted = [admit([form]).admitted[0] for form in forms]
    assert all(item == admitted[0] for item in admitted)


def test_an_admission_is_not_checked_again_and_admitted_items_join_a_new_batch() -> None:
    admission = admit([commit(1)])
    assert admit(admission) is admission
    joined = admit([*admission, *admit([commit(2)])])
    assert [item.commit.version for item in joined] == [1, 2]
    assert joined.admitted[0] is admission.admitted[0]  # not read again


def test_the_same_commit_twice_in_a_batch_is_admitted_ingest_applies_it_once() -> None:
    raw = commit(1)
    again = {**raw, "header": {"traceparent": TRACEPARENT}}  # a hand-over may differ in headers
    assert len(admit([raw, again])) == 2


def test_domain_events_are_not_read_so_their_ids_are_not_checked() -> None:
    raw = commit(1, domain_event("e1"), domain_event("e1"), set_event("e2", "a"))
    assert len(admit([raw])) == 1


def test_continuing_gives_what_changes_of_gives_with_that_traceparent() -> None:
    parsed = Commit.parse(commit(1, set_event("e1", "a"), cancel_event("e2", "b")))
    (admitted,) = admit([parsed])
    assert continuing(admitted.changes, TRACEPARENT) == changes_of(parsed, TRACEPARENT)
    assert continuing(admitted.changes, None) == changes_of(parsed)


# --- what one commit gets wrong ------------------------------------------------------------


def test_two_schedule_events_with_one_id_are_refused_naming_the_commit_and_the_id() -> None:
    message = refused([commit(4, set_event("e1", "a"), set_event("e1", "b"))])
    assert message.startswith("commit 'c4': event id 'e1' is given to 2 schedule events")
    assert "duplicate" in message
    assert refused([commit(4, set_event("e1", "a"), cancel_event("e1", "a"))]).startswith(
        "commit 'c4': event id 'e1'"
    )


@pytest.mark.parametrize("name", ["contextName", "aggregateName", "tenantId", "aggregateId"])
def test_a_control_character_in_a_name_is_refused(name: str) -> None:
    message = refused([commit(1, **{name: "a\nb"})])
    assert message == f"commit 'c1': {name} 'a\\nb' has a control character"


def test_a_workflow_id_longer_than_temporal_holds_is_refused() -> None:
    message = refused([commit(1, aggregateId="x" * MAX_WORKFLOW_ID_BYTES)])
    assert message.startswith("commit 'c1': its workflow id 'wow-deleted:shop.order:t:xxx")
    assert f"more than the {MAX_WORKFLOW_ID_BYTES} Temporal holds" in message
    fits = MAX_WORKFLOW_ID_BYTES - len("wow-timer:shop.order:t::grace")
    assert len(admit([commit(1, aggregateId="x" * fits)])) == 1


def test_what_is_no_commit_is_refused_as_the_model_refuses_it() -> None:
    assert refused([42]) == "a commit must be a JSON object, got int"
    assert refused(["{"]).startswith("invalid commit:")
    assert "version" in refused([commit(0)])
    assert "unknown system event" in refused([commit(1, {"id": "e", "name": "wow.X", "body": {}})])


def test_in_a_batch_the_refusal_names_the_commits_place() -> None:
    assert refused([commit(1), commit(2, aggregateId="a\x00")]).startswith("commit [1]: ")


# --- what a batch gets wrong together ------------------------------------------------------


def test_one_commit_id_for_two_different_commits_is_refused() -> None:
    message = refused([commit(1), commit(2, id="c1")])
    assert message.startswith("commit id 'c1' is given to two different commits in this batch")
    other_aggregate = commit(1, aggregateId="2")
    assert "commit id 'c1'" in refused([commit(1), other_aggregate])
    other_events = commit(1, set_event("e1", "other"))
    assert "commit id 'c1'" in refused([commit(1), other_events])


def test_two_commits_claiming_one_version_of_an_aggregate_are_refused() -> None:
    message = refused([commit(3), commit(3, id="c3-bis")])
    assert message == (
        "commits 'c3' and 'c3-bis' both claim version 3 of shop.order 1 of tenant 't': a log "
        "holds one commit a version"
    )
    assert len(admit([commit(3), commit(3, id="c3-other", aggregateId="2")])) == 2


def test_a_refused_batch_is_refused_whole() -> None:
    """`admit` returns nothing of a refused batch: a caller can only apply all or nothing."""
    with pytest.raises(InvalidCommitError):
        admit([commit(1), commit(2), commit(3, set_event("e1", "a"), set_event("e1", "b"))])


# --- properties ----------------------------------------------------------------------------

event_ids = st.sampled_from(["e1", "e2", "e3", "e4"])
keys = st.sampled_from(["a", "b"])
schedule_events = st.one_of(
    st.builds(set_event, event_ids, keys), st.builds(cancel_event, event_ids, keys)
)


@given(st.lists(schedule_events, min_size=1, max_size=5))
def test_a_commit_is_admitted_exactly_when_its_schedule_event_ids_are_distinct(
    events: list[dict[str, Any]],
) -> None:
    ids = [event["id"] for event in events]
    raw = commit(1, *events)
    if len(set(ids)) == len(ids):
        (item,) = admit([raw])
        assert list(item.changes) == changes_of(Commit.parse(raw))
    else:
        assert "is given to" in refused([raw])


@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4)), min_size=1, max_size=6))
def test_a_batch_is_admitted_exactly_when_ids_and_versions_name_one_commit_each(
    pairs: list[tuple[int, int]],
) -> None:
    """Commits `(id, version)` of one aggregate, the body following the version: admitted
    exactly when no id names two versions and no version has two ids."""
    batch = [commit(version, set_event("e1", f"k{version}"), id=f"c{n}") for n, version in pairs]
    ids_one_version = all(len({v for n, v in pairs if n == m}) == 1 for m, _ in pairs)
    versions_one_id = all(len({n for n, v in pairs if v == w}) == 1 for _, w in pairs)
    if ids_one_version and versions_one_id:
        assert isinstance(admit(batch), Admission)
    else:
        refused(batch)


@pytest.mark.parametrize("expression", ["0 0 0 30 2 *", "0 0 0 31 4,6,9,11 *", "0 0 0 ? * MON#6"])
def test_a_cron_rule_no_time_ever_matches_is_refused_naming_the_event_and_the_expression(
    expression: str,
) -> None:
    """Issue #38: such a rule was started, never due, ended at once and showed as Delivered
    with no delivery; it is refused where a commit comes in (`POST /commits` answers 400,
    `wow-temporal apply` exits 2), while the model still reads it (stored inputs replay)."""
    rule = {"cron": expression, "zone": "Europe/Amsterdam"}
    event = {**set_event("e1", "k"), "body": {**set_event("e1", "k")["body"], "rule": rule}}
    given_commit = commit(1, event)
    Commit.parse(given_commit)  # the model reads it: a stored commit or timer input still loads
    said = refused([given_commit])
    assert f"commit 'c1': event 0 ('e1', wow.ScheduleSet): cron {expression!r} never fires" in said
    assert "no time ever matches it" in said
