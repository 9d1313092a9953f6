"""The one line a file refused by a limit gets: which limit, the value found, and the setting that raises it
(IngestSettings in core/config.py, each with its environment variable)."""

from __future__ import annotations

from core.config import INGEST_ENV

_VAR = {name: var for var, (name, _unit) in INGEST_ENV.items()}


def over_limit(what: str, found: str, limit: str, setting: str) -> str:
    """E.g. "too many rows: 250,000 > 200,000 limit (ingest.max_table_rows; raise STRATA_MAX_TABLE_ROWS)"."""
    return f"{what}: {found} > {limit} limit (ingest.{setting}; raise {_VAR[setting]})"
