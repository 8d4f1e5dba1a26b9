"""The docs hold to the code: the site builds with `mkdocs build --strict` and fetches nothing
when read, and every code block of `README.md` and `docs/` is checked by its language.

A block is checked as its fence's language says (see `docs/contributing.md`, "The docs"):
`json` parses, and a commit validates as `wow_temporal.Commit`; `python` compiles, and runs when
marked `<!-- docs: run -->`; `sh`/`bash` name real `wow-temporal` subcommands and options and
`./run` commands, and a `curl … /commits` body is a commit; `yaml` parses, and a `wow:` document
loads as settings. `<!-- docs: skip (why) -->` on the line before a block leaves it unchecked.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml
from typer.testing import CliRunner

from wow_temporal import Commit, load_settings
from wow_temporal.cli import app as cli_app

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CHECKED = {"json", "python", "sh", "bash", "yaml"}
UNCHECKED = {"text", "mermaid"}  # output shown as it is, and a diagram
NOW_MS = "1764470000000"  # stands in for `$(date +%s000)` in a curl example
_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!-- docs: (?P<what>run|skip)(?P<why> \(.+\))? -->\s*$")
_SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "&"}


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text and its marker, if any."""

    page: Path
    line: int
    lang: str
    text: str
    marker: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks(page: Path) -> Iterator[Block]:
    """The page's fenced blocks, dedented by their fence's indentation (a block in a list)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, start = opening["indent"], index
        index += 1
        body: list[str] = []
        while index < len(lines) and lines[index] != f"{indent}```":
            body.append(lines[index].removeprefix(indent))
            index += 1
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        marker = _MARKER.match(before)
        yield Block(
            page=page,
            line=start + 1,
            lang=opening["info"].strip().split(" ")[0],
            text="\n".join(body) + "\n",
            marker=marker["what"] if marker else None,
        )
        index += 1


BLOCKS = [block for page in PAGES for block in _blocks(page)]


def _params(*langs: str) -> list[Any]:
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.lang in langs and b.marker != "skip"]


def _is_commit(value: object) -> bool:
    return isinstance(value, dict) and {"contextName", "aggregateId", "body"} <= value.keys()


# --- the site -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as `mkdocs build --strict` builds it: any warning (a broken link or
    anchor, a page left out of the navigation) fails the build."""
    out = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stderr}"
    return out


def test_the_site_builds_strict_with_every_page(site: Path) -> None:
    for page in (ROOT / "docs").rglob("*.md"):
        relative = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / "index.html" if relative.name == "index" else site / relative / "index.html"
        assert built.is_file(), f"{page.relative_to(ROOT)} was not built"


def test_the_site_fetches_nothing_when_read(site: Path) -> None:
    """No web fonts, CDN scripts or styles, and no Mermaid block (Material loads Mermaid from a
    CDN): the diagram is a committed SVG."""
    external = re.compile(
        r"<(?:script|img)[^>]*\bsrc=\"(?:https?:)?//|<link[^>]*\bhref=\"(?:https?:)?//|"
        r"@import\s+url\(\s*[\"']?(?:https?:)?//|fonts\.googleapis|class=\"mermaid\""
    )
    for html in site.rglob("*.html"):
        found = external.search(html.read_text(encoding="utf-8"))
        assert found is None, f"{html.relative_to(site)} fetches {found.group(0)!r} when read"


# --- the README -----------------------------------------------------------------------------------


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    commands = next(b.text for b in BLOCKS if b.page.name == "README.md" and b.lang == "sh")
    assert [line.split("#")[0].strip() for line in commands.splitlines()] == [
        "./run dev",
        "./run test",
    ]


def test_the_readmes_links_lead_somewhere() -> None:
    """mkdocs checks the site's links; the README's own links to files are checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert local, "the README links into the docs"
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readmes_python_runs_as_pasted_on_the_dev_stack(tmp_path: Path) -> None:
    """The README's Python, saved as a file and run with `python` beside a real `wow-temporal
    dev` (its Temporal server, worker and domain host), prints what the README says: its
    commit's timer started, then Delivered, then the parked count."""
    (block,) = [b for b in BLOCKS if b.page.name == "README.md" and b.lang == "python"]
    script = tmp_path / "timers.py"
    script.write_text(block.text, encoding="utf-8")
    env = {**os.environ, "WOW_CONFIG": "", "WOW_HOST_URL": ""}
    ports = ["--temporal-port", "0", "--headless", "--host-port", "0", "--api-port", "0",
             "--metrics-port", "0"]
    dev = subprocess.Popen(
        [str(Path(sys.executable).parent / "wow-temporal"), "dev", "--data-dir",
         str(tmp_path / "dev"), *ports],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
    )
    try:
        assert dev.stdout is not None
        printed: list[str] = []
        while not printed or "is ready" not in printed[-1]:
            line = dev.stdout.readline()
            assert line, "dev exited:\n" + "".join(printed)
            printed.append(line)
        address = "".join(printed).split("Temporal gRPC:", 1)[1].split()[0]
        ran = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
            env={**env, "TEMPORAL_ADDRESS": address}, timeout=120,
        )
    finally:
        dev.send_signal(signal.SIGINT)
        dev.communicate(timeout=60)
    assert ran.returncode == 0, ran.stderr
    started, *rest = ran.stdout.splitlines()
    assert re.fullmatch(
        r"started wow-timer:hand-made\.order:t1:readme-[0-9a-f]{8}:payment-grace-period", started
    ), ran.stdout
    assert rest == ["Delivered", "0 parked"], ran.stdout
    assert dev.returncode == 128 + signal.SIGINT


# --- the blocks -----------------------------------------------------------------------------------


def test_every_block_names_a_language_and_every_marker_a_block() -> None:
    unknown = [f"{b.where} ```{b.lang}" for b in BLOCKS if b.lang not in CHECKED | UNCHECKED]
    assert not unknown, f"blocks with no language, or one the docs test does not know: {unknown}"
    misplaced = [b.where for b in BLOCKS if b.marker == "run" and b.lang != "python"]
    assert not misplaced, f"`docs: run` marks only python blocks: {misplaced}"
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.lstrip().startswith("<!-- docs:"):
                continue
            where = f"{page.relative_to(ROOT)}:{number}"
            assert _MARKER.match(line), f"{where}: a marker is `<!-- docs: run -->` or skip (why)"
            assert "docs: run" in line or "(" in line, f"{where}: a skip says why"
            following = next((n for n in lines[number:] if n.strip()), "")
            assert _FENCE.match(following), f"{where}: a marker stands right before its block"


@pytest.mark.parametrize("block", _params("json"))
def test_json_blocks_parse_and_commits_validate(block: Block) -> None:
    value = json.loads(block.text)
    if _is_commit(value):
        Commit.model_validate(value)


@pytest.mark.parametrize("block", _params("python"))
def test_python_blocks_compile_and_marked_ones_run(block: Block) -> None:
    code = compile(
        block.text, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
    )
    if block.marker == "run":
        exec(code, {"__name__": "docs_example"})


def test_some_python_blocks_run() -> None:
    assert [b for b in BLOCKS if b.marker == "run"], "the docs show something that runs"


def _logical_lines(text: str) -> Iterator[str]:
    """The block's command lines: continued by a backslash, or by a quote left open."""
    pending = ""
    for line in text.replace("$(date +%s000)", NOW_MS).replace("\\\n", " ").splitlines():
        pending = f"{pending}\n{line}" if pending else line
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # a quote still open
            continue
        yield pending
        pending = ""
    assert not pending, f"a quote is never closed: {pending!r}"


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def _run_commands() -> set[str]:
    script = (ROOT / "run").read_text(encoding="utf-8")
    return set(re.findall(r"^\s+(\w+)\)", script, flags=re.MULTILINE))


def _cli_problems(argv: list[str]) -> list[str]:
    """What is wrong with `wow-temporal <argv>`: a subcommand that is not there (each of
    `a|b`), or an option its command does not take; each command's `--help` must answer."""
    command: Any = typer.main.get_command(cli_app)
    paths: list[list[str]] = [[]]
    commands: list[Any] = [command]
    rest = list(argv)
    while rest and not rest[0].startswith("-") and all(hasattr(c, "commands") for c in commands):
        names = rest.pop(0).split("|")
        group = commands[0]
        missing = [name for name in names if name not in group.commands]
        if missing:
            return [f"no command `wow-temporal {' '.join([*paths[0], name])}`" for name in missing]
        paths = [[*paths[0], name] for name in names]
        commands = [group.commands[name] for name in names]
    problems = []
    for path, found in zip(paths, commands, strict=True):
        answer = CliRunner().invoke(cli_app, [*path, "--help"])
        if answer.exit_code != 0:
            problems.append(f"`wow-temporal {' '.join(path)} --help` exits {answer.exit_code}")
        options = {"--help"} | {o for p in found.params for o in (*p.opts, *p.secondary_opts)}
        for word in rest:
            option = word.split("=")[0]
            if option.startswith("--") and option not in options:
                problems.append(f"`wow-temporal {' '.join(path)}` has no option {option}")
    return problems


def _commands(block: Block) -> Iterator[list[str]]:
    """Each simple command of the block's lines, as its words."""
    for line in _logical_lines(block.text):
        command: list[str] = []
        for word in [*_words(line), ";"]:
            if word in _SHELL_OPERATORS:
                if command:
                    yield command
                command = []
            else:
                command.append(word)


@pytest.mark.parametrize("block", _params("sh", "bash"))
def test_shell_blocks_name_real_commands(block: Block) -> None:
    problems: list[str] = []
    for words in _commands(block):
        program = Path(words[0]).name
        if program == "wow-temporal":
            problems += _cli_problems(words[1:])
        elif words[0] == "./run" and words[1:2] and words[1] not in _run_commands():
            problems.append(f"`./run {words[1]}`: the run script takes {sorted(_run_commands())}")
        elif program == "curl" and any(w.endswith("/commits") for w in words):
            value = json.loads(words[words.index("-d") + 1])
            for commit in value if isinstance(value, list) else [value]:
                Commit.model_validate(commit)
    assert not problems, f"{block.where}: " + "; ".join(problems)


def test_shell_blocks_are_checked_at_all() -> None:
    """The parser finds the commands it is meant to check (a broken parser checks nothing)."""
    found = [w for b in BLOCKS if b.lang in {"sh", "bash"} for w in _commands(b)]
    assert any(Path(w[0]).name == "wow-temporal" for w in found)
    assert any(w[0] == "curl" and w[-1].startswith("{") for w in found)
    assert _cli_problems(["timers", "lst"]) == ["no command `wow-temporal timers lst`"]
    assert _cli_problems(["cron", "* * * * * *", "--zon", "UTC"]) == [
        "`wow-temporal cron` has no option --zon"
    ]


def _shown_commits() -> Iterator[tuple[str, dict[str, Any]]]:
    for block in BLOCKS:
        if block.lang == "json":
            value = json.loads(block.text)
            if _is_commit(value):
                yield block.where, value
        elif block.lang in {"sh", "bash"}:
            for words in _commands(block):
                if words[0] == "curl" and "-d" in words and words[-1].startswith("{"):
                    value = json.loads(words[words.index("-d") + 1])
                    if _is_commit(value):
                        yield block.where, value


def test_each_commit_shown_has_its_own_id() -> None:
    """A commit id names one commit: the request ids of its deliveries are its events' and
    slots', decided once. Two examples that shared an id would be the same commit to the host
    (the second answered `DuplicateRequestId`), unless they are the same commit."""
    seen: dict[str, tuple[str, dict[str, Any]]] = {}
    commits = list(_shown_commits())
    assert len(commits) >= 3
    for where, commit in commits:
        first = seen.setdefault(commit["id"], (where, commit))
        assert first[1] == commit, f"{where} reuses commit id {commit['id']!r} of {first[0]}"


@pytest.mark.parametrize("block", _params("yaml"))
def test_yaml_blocks_parse_and_settings_load(block: Block, tmp_path: Path) -> None:
    value = yaml.safe_load(block.text)
    if isinstance(value, dict) and set(value) == {"wow"}:
        path = tmp_path / "settings.yaml"
        path.write_text(block.text, encoding="utf-8")
        load_settings(path, environ={})
