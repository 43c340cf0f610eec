"""Log lines as JSON objects (``npu-emu serve --log-format json``), one per line, for log
collectors (Loki, Elasticsearch, journald's JSON export) that would otherwise have to parse
the text form. Fields: ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
``message`` (the formatted message), ``process``, and ``exception`` (the traceback text)
when the record carries one.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

__all__ = ["JsonLogFormatter"]


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        # Lines never hold a newline: a message with one stays one line (json escapes it).
        return json.dumps(entry, ensure_ascii=False, default=str)
