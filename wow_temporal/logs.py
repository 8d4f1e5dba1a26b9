"""Logging for the command line and the Temporal runtime: one line per record, plain or JSON.

Unless told otherwise, the Temporal SDK's Rust core writes its own warnings (gRPC calls
retried, polls failing while the server is away) straight to stderr, coloured with ANSI codes
that end up in log files. `configure_temporal_runtime` routes them through Python logging
instead; `configure_logging` gives every record one plain line, or with `json` one JSON object
per line (`JsonFormatter`), for a log pipeline to read.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TextIO

from opentelemetry import trace

if TYPE_CHECKING:
    from temporalio.runtime import LoggingConfig

__all__ = [
    "CORE_LOGGER",
    "LOG_FORMAT",
    "JsonFormatter",
    "OneLineFormatter",
    "configure_logging",
    "configure_temporal_runtime",
    "core_logging",
]

CORE_LOGGER = "temporalio.core"
"""The Python logger that receives the Temporal core's log records (WARN and up)."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""The CLI's record layout: time, level, logger, message."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_configured = False
_configuring = threading.Lock()


def configure_temporal_runtime() -> None:
    """Make the default Temporal runtime forward core logs to the `temporalio.core` logger.

    Once per process, and before any client connects: clients keep the runtime they were
    created on. Core logs WARN and up, the other crates ERROR, as the SDK's default does.
    """
    global _configured
    with _configuring:
        if _configured:
            return
        from temporalio.runtime import Runtime, TelemetryConfig

        runtime = Runtime(telemetry=TelemetryConfig(logging=core_logging()))
        Runtime.set_default(runtime, error_if_already_set=False)
        _configured = True


def core_logging() -> LoggingConfig:
    """The Temporal core's logs (WARN and up, the other crates ERROR, as the SDK's default)
    forwarded to the `temporalio.core` logger, for every runtime this process makes."""
    from temporalio.runtime import LogForwardingConfig, LoggingConfig, TelemetryFilter

    forwarding = LogForwardingConfig(
        logger=logging.getLogger(CORE_LOGGER),
        append_target_to_name=False,  # the target is already in the message
    )
    return LoggingConfig(
        filter=TelemetryFilter(core_level="WARN", other_level="ERROR"), forwarding=forwarding
    )


class OneLineFormatter(logging.Formatter):
    """`LOG_FORMAT` on one line: newlines and tracebacks folded in with ` | `, ANSI codes
    removed, so a log file holds one record per line."""

    def format(self, record: logging.LogRecord) -> str:
        text = _ANSI.sub("", super().format(record))
        return " | ".join(line.rstrip() for line in text.splitlines() if line.strip())


_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}
"""The attributes every LogRecord has; the others are a call's `extra` fields."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: `time` (UTC ISO-8601, milliseconds), `level`,
    `logger`, `message`, the record's `extra` fields (as they are, or as text when JSON cannot
    hold them), `trace_id` and `span_id` of the span it was logged in (OpenTelemetry's log
    correlation: from a delivery's line to its trace), and `exception` (the traceback as text)
    when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": _ANSI.sub("", record.getMessage()),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in entry:
                entry[key] = value
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            entry.setdefault("trace_id", f"{span.trace_id:032x}")
            entry.setdefault("span_id", f"{span.span_id:016x}")
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


LogFormatName = Literal["text", "json"]


def configure_logging(
    level: int = logging.INFO,
    stream: TextIO | None = None,
    log_format: LogFormatName = "text",
) -> None:
    """One line per record on `stream` (stderr) at `level` — plain text, or a JSON object with
    `log_format="json"` — httpx's per-request lines quieted, and the Temporal core's logs among
    them; leaves an existing setup alone."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    formatter = JsonFormatter() if log_format == "json" else OneLineFormatter(LOG_FORMAT)
    handler.setFormatter(formatter)
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("httpx").setLevel(logging.WARNING)
    configure_temporal_runtime()
