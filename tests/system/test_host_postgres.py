"""The domain host's store on the suite's real PostgreSQL: writers in several stores at once (as
several host processes would be) take a version and a request id once, a follower reading the
log while they write skips no commit (the sequence-gap problem), and `--db` / `WOW_HOST_DB`
reach it with the URI's password never shown."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from pathlib import Path

import httpx
import psycopg
import pytest
from typer.testing import CliRunner

from bench.harness.commits import commit as harness_commit
from bench.harness.postgres import Postgres
from tests.helpers.eventually import eventually
from wow_temporal.cli import app as cli
from wow_temporal.dev.ports import free_port
from wow_temporal.host.store import (
    DuplicateRequestError,
    EventStore,
    VersionConflictError,
)
from wow_temporal.model import Commit

SECRET = "s3cret-never-shown"


def make_commit(aggregate_id: str, version: int = 1, request_id: str = "") -> Commit:
    built = Commit.model_validate(
        harness_commit(aggregate_id, {"name": "Touched"}, version=version)
    )
    return built.model_copy(update={"request_id": request_id})


def with_password(uri: str) -> str:
    """`uri` carrying SECRET as its password (the suite's server trusts; libpq never sends it)."""
    return uri.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")


def test_two_stores_on_one_database_take_a_version_and_a_request_id_once(
    postgres: Postgres,
) -> None:
    uri = postgres.database()
    first, second = EventStore(uri), EventStore(uri)
    try:
        first.append(make_commit("o1", request_id="r1"))
        with pytest.raises(VersionConflictError):
            second.append(make_commit("o1", request_id="r2"))
        with pytest.raises(DuplicateRequestError) as duplicate:
            second.append(make_commit("o2", request_id="r1"))
        assert duplicate.value.record.commit_id == "c1-o1"
        second.advance("relay", 1)
        assert (first.position("relay"), first.behind(0), first.behind(1)) == (1, 1, 0)
        assert [c.aggregate.aggregate_id for _, c in second.commits_after(0)] == ["o1"]
    finally:
        first.close()
        second.close()


def test_a_follower_reading_while_writers_commit_skips_no_commit(postgres: Postgres) -> None:
    """Writers in stores of their own commit at once while a reader follows `commits_after`
    from its last position, as the relay does: what it read is the whole log, in log order."""
    uri = postgres.database()
    writers, per_writer = 6, 60
    done = threading.Event()
    read: list[int] = []

    def write(n: int) -> None:
        store = EventStore(uri)
        try:
            for i in range(per_writer):
                store.append(make_commit(f"w{n}-{i}"))
        finally:
            store.close()

    def follow() -> None:
        store = EventStore(uri)
        try:
            while True:
                finished = done.is_set()  # read once more after the last writer finished
                batch = store.commits_after(read[-1] if read else 0, limit=7)
                read.extend(position for position, _ in batch)
                if finished and not batch:
                    return
        finally:
            store.close()

    reader = threading.Thread(target=follow)
    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    reader.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    reader.join(timeout=60)
    assert not reader.is_alive()
    store = EventStore(uri)
    try:
        log = [position for position, _ in store.commits_after(0, limit=10_000)]
    finally:
        store.close()
    assert len(log) == writers * per_writer
    assert read == log  # no commit passed over, none read twice


def test_a_bad_or_unreachable_uri_is_one_error_line_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    runner = CliRunner()
    base = ["host", "--app", "workers.eshop:apps", "--port", str(free_port())]
    unreachable = runner.invoke(
        cli, [*base, "--db", f"postgresql://u:{SECRET}@127.0.0.1:{port}/shop"]
    )
    assert unreachable.exit_code == 1, unreachable.output
    assert f"error: --db postgresql://u:***@127.0.0.1:{port}/shop: " in unreachable.output
    malformed = runner.invoke(cli, [*base, "--db", f"postgresql://u:{SECRET}@h:x/db?sslmode"])
    assert malformed.exit_code == 2, malformed.output
    assert "error: --db postgresql://u:***@h:x/db?sslmode: not a PostgreSQL URI" in (
        malformed.output
    )
    monkeypatch.setenv("WOW_HOST_DB", f"postgresql://u@h/db?password={SECRET}&bogus")
    from_settings = runner.invoke(cli, base)
    assert from_settings.exit_code == 2, from_settings.output
    assert "error: wow.host.db postgresql://u@h/db?password=***&bogus: not a" in (
        from_settings.output
    )
    for result in (unreachable, malformed, from_settings):
        assert SECRET not in result.output


async def test_the_host_serves_from_the_database_wow_host_db_names(
    postgres: Postgres, tmp_path: Path
) -> None:
    uri = with_password(postgres.database())
    port = free_port()
    log = tmp_path / "host.log"
    # the relay's Temporal is away (a port nothing listens on): commands never wait for it
    env = {**os.environ, "WOW_HOST_DB": uri, "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}"}
    command = [sys.executable, "-m", "wow_temporal.cli", "host", "--app", "workers.eshop:apps"]
    with log.open("wb") as out:
        host = await asyncio.create_subprocess_exec(
            *command, "--port", str(port), stdout=out, stderr=asyncio.subprocess.STDOUT, env=env
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:

            async def up() -> bool:
                try:
                    return (await client.get("/health")).status_code == 200
                except httpx.HTTPError:
                    return host.returncode is not None

            await eventually(up, within=60, what="the host answering")
        assert host.returncode is None, log.read_text()
    finally:
        host.send_signal(signal.SIGINT)
        await asyncio.wait_for(host.wait(), timeout=30)
    text = log.read_text()
    assert f"store {uri.replace(SECRET, '***')}" in text, text
    assert SECRET not in text
    with psycopg.connect(uri) as conn:  # the host made its tables in that database
        tables = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        assert {"stored_events", "notification_tracking"} <= {row[0] for row in tables}
    store = EventStore(uri)
    try:
        assert SECRET not in repr(store)
        assert SECRET not in store.location
    finally:
        store.close()
