"""The CLI's log lines on stderr: `text` for people (the default) or `json` for machines (`log.format`).

    text: 2026-11-24 14:39:12,345 INFO epoch_broker.broker.app: node 1 registered with broker epoch 7; ...
    json: {"ts": "2026-11-24T14:39:12.345Z", "level": "INFO", "logger": "epoch_broker.broker.app", "msg": "...",
           "node": 1}

Rules:
- One handler on the root logger, installed by `setup` (before the config is read, so that its errors are
  logged) and switched by `use_format` once `log.format` is known; calling either again replaces, never adds.
- A JSON line is one object: `ts` (wall-clock UTC, milliseconds, as the EVENT lines of broker/events.py), `level`,
  `logger`, `msg` (the formatted message), `node` once the node id is known, `exc` (the traceback text) when the
  record carries one. `events.parse` decodes such a line before looking for its EVENT.
- Only the CLI calls these: a library user's or a test's logging is left as they set it.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
HANDLER_NAME = "epoch-broker"


class JsonFormatter(logging.Formatter):
    """One JSON object a line."""

    def __init__(self, node: int | None = None) -> None:
        super().__init__()
        self.node = node

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if self.node is not None:
            line["node"] = self.node
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(log_format: str, node: int | None = None) -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter(node)
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"unknown log format {log_format!r} (one of {', '.join(FORMATS)})")


def setup(level: str = "INFO", log_format: str = "text", node: int | None = None) -> logging.Handler:
    """Log to stderr at `level` in `log_format` (the root logger's one handler of ours)."""
    root = logging.getLogger()
    handler = _ours(root)
    if handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.set_name(HANDLER_NAME)
        root.addHandler(handler)
    handler.setFormatter(formatter(log_format, node))
    root.setLevel(level)
    return handler


def use_format(log_format: str, node: int | None = None) -> None:
    """Switch the handler `setup` installed to `log_format` (the node id now known); no handler: install one."""
    handler = _ours(logging.getLogger())
    if handler is None:
        setup(logging.getLevelName(logging.getLogger().getEffectiveLevel()), log_format, node)
    else:
        handler.setFormatter(formatter(log_format, node))


def _ours(root: logging.Logger) -> logging.Handler | None:
    return next((h for h in root.handlers if h.get_name() == HANDLER_NAME), None)
