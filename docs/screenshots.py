"""The Web UI screenshot in docs/assets, from a real run: `.venv/bin/python docs/screenshots.py`.

Starts `wow-temporal dev` on free ports and a data directory of its own, hands over commits
whose timers end each way (Delivered, Rejected, Cancelled, Parked, still Scheduled; the echo
convention decides them by aggregate id), waits until the control API shows each status, and
takes a headless Chromium screenshot of the default workflows list (with the job's instance).
Then a parked timer's page and the job's page, through ChromeDriver. Not part
of the test suite (it needs Chromium and ChromeDriver: Debian's `chromium`, `chromium-driver`);
run it after changing what the Web UI shows, and look at the pictures.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "docs" / "assets"
CLI = Path(sys.executable).parent / "wow-temporal"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
CONTEXT, TENANT, KEY = "hand-made", "t1", "payment-grace-period"
OUTCOMES = {  # aggregate id (the echo convention decides by it) -> the status it ends in
    "ok-1": "Delivered",
    "reject-1": "Rejected",
    "fail-1": "Parked",
    "ok-2": "Cancelled",
    "ok-3": "Scheduled",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_dev(data: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    """`wow-temporal dev` on free ports; returns it and the URLs it printed once ready."""
    env = {
        **os.environ,
        "WOW_API_PORT": str(free_port()),
        "WOW_WORKER_METRICS_PORT": "0",
        "WOW_TIMERS_MAX_ATTEMPTS": "3",  # the parked timer parks within seconds
        "WOW_TIMERS_RETRY_MAX_INTERVAL": "2s",
    }
    log = (data / "dev.log").open("wb")
    args = [str(CLI), "dev", "--data-dir", str(data), "--port", "0", "--ui-port", "0"]
    dev = subprocess.Popen([*args, "--host-port", "0"], stdout=log, stderr=log, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = (data / "dev.log").read_text(errors="replace")
        if "is ready" in text:
            ui = re.search(r"Temporal Web UI: (\S+)", text)
            api = re.search(r"control API:\s+(\S+)", text)
            grpc = re.search(r"Temporal gRPC:\s+(\S+)", text)
            assert ui and api and grpc, text
            return dev, {"ui": ui.group(1), "api": api.group(1), "grpc": grpc.group(1)}
        if dev.poll() is not None:
            raise SystemExit(f"wow-temporal dev exited:\n{text}")
        time.sleep(0.5)
    dev.kill()
    raise SystemExit("wow-temporal dev was not ready within 120 s")


def post(api: str, path: str, body: object) -> object:
    request = urllib.request.Request(
        api + path, json.dumps(body).encode(), {"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def get(api: str, path: str) -> object:
    with urllib.request.urlopen(api + path, timeout=30) as answer:
        return json.loads(answer.read())


def commit(aggregate: str, version: int, *events: dict[str, object]) -> dict[str, object]:
    return {
        "id": f"shot-{aggregate}-{version}-{time.time_ns()}",
        "contextName": CONTEXT,
        "aggregateName": "order",
        "tenantId": TENANT,
        "aggregateId": aggregate,
        "version": version,
        "createTime": int(time.time() * 1000),
        "body": [{"id": f"e-{n}", **event} for n, event in enumerate(events, 1)],
    }


def schedule(after: str) -> dict[str, object]:
    return {
        "name": "wow.ScheduleSet",
        "body": {
            "key": KEY,
            "rule": {"after": after},
            "command": {"type": "eshop.order.CancelOrder", "body": {"reason": "PAYMENT_TIMEOUT"}},
            "target": None,
        },
    }


JOB_ID = "wow-job:eshop-inventory:receive-deliveries"


def timer_id(aggregate: str) -> str:
    return f"wow-timer:{CONTEXT}.order:{TENANT}:{aggregate}:{KEY}"


def make_timers(api: str) -> None:
    """One timer per outcome, then wait until the control API lists each as it should."""
    for aggregate, status in OUTCOMES.items():
        after = "PT1H" if status in ("Scheduled", "Cancelled") else "PT1S"
        post(api, "/commits", commit(aggregate, 1, schedule(after)))
        if status == "Cancelled":
            cancel: dict[str, object] = {"name": "wow.ScheduleCancelled", "body": {"key": KEY}}
            post(api, "/commits", commit(aggregate, 2, cancel))
    seen: dict[str, str] = {}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        seen = {a: status_of(get(api, f"/timers/{quote(timer_id(a), safe='')}")) for a in OUTCOMES}
        if seen == OUTCOMES:
            return
        time.sleep(1)
    raise SystemExit(f"the timers did not reach their statuses: {seen}")


def status_of(shown: object) -> str:
    """The `status` of a timer as `GET /timers/{id}` shows it."""
    assert isinstance(shown, dict), shown
    return str(shown["status"])


class Browser:
    """Headless Chromium driven by ChromeDriver's WebDriver HTTP API (urllib, no client
    library): a page is shot after a fixed wait, so a page that keeps polling (a running
    workflow's history) is shot too, which `chromium --screenshot` never finishes."""

    def __init__(self, width: int = 1600) -> None:
        self.width = width
        port = free_port()
        self._driver = subprocess.Popen(
            [CHROMEDRIVER, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._base = f"http://127.0.0.1:{port}"
        self._profile = tempfile.TemporaryDirectory(prefix="wow-shots-chromium-")
        options = {
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                f"--user-data-dir={self._profile.name}", f"--window-size={width},1000",
            ],
        }
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = self._call("POST", "/session", {
                    "capabilities": {"alwaysMatch": {"goog:chromeOptions": options}}
                })
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        self._session = f"/session/{answer['sessionId']}"

    def _call(self, method: str, path: str, body: object | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self._base + path, data, {"content-type": "application/json"}, method=method
        )
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())["value"]

    def shoot(self, url: str, out: Path, height: int = 1000, wait: float = 8.0) -> None:
        """Open `url`, let the Web UI (a JS app) load and draw, and save the viewport."""
        self._call("POST", f"{self._session}/window/rect", {"width": self.width, "height": height})
        self._call("POST", f"{self._session}/url", {"url": url})
        time.sleep(wait)
        png = base64.b64decode(self._call("GET", f"{self._session}/screenshot"))
        out.write_bytes(png)
        print(f"  {out}  <- {url}")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._call("DELETE", self._session)
        self._driver.terminate()
        self._driver.wait(timeout=30)
        self._profile.cleanup()


def workflow_url(ui: str, grpc: str, workflow_id: str, tab: str = "history") -> str:
    """The page of `workflow_id`'s latest run, on `tab` (`history`, where the page opens, or
    `user-metadata`: its Summary and Current Details)."""
    described = subprocess.run(
        [str(CLI.parent / "temporal"), "workflow", "describe", "--address", grpc,
         "-w", workflow_id, "-o", "json"],
        check=True, capture_output=True, timeout=30,
    )
    run = json.loads(described.stdout)["workflowExecutionInfo"]["execution"]["runId"]
    return f"{ui}/namespaces/default/workflows/{quote(workflow_id, safe='')}/{run}/{tab}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ASSETS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="wow-shots-") as data:
        dev, urls = start_dev(Path(data))
        try:
            make_timers(urls["api"])
            ui = urls["ui"]
            time.sleep(3)  # the list is eventually consistent
            print("screenshots:")
            browser = Browser()
            try:
                listing = f"{ui}/namespaces/default/workflows"
                browser.shoot(listing, args.out / "web-ui-list.png", 760)
                for name, workflow_id, tab in (
                    ("web-ui-timer-parked.png", timer_id("fail-1"), "user-metadata"),
                    ("web-ui-job.png", JOB_ID, "user-metadata"),
                ):
                    page = workflow_url(ui, urls["grpc"], workflow_id, tab)
                    browser.shoot(page, args.out / name)
            finally:
                browser.close()
        finally:
            dev.send_signal(signal.SIGINT)
            try:
                dev.wait(timeout=60)
            except subprocess.TimeoutExpired:
                dev.kill()


if __name__ == "__main__":
    main()
