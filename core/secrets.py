"""What must never be stored or shown: the database URL's password, the OpenAI API key, the Chroma token, and any
URL's `user:password@` or `?token=` / `?api_key=` values. One place redacts them, for everything that writes
settings or messages somewhere another person can read: a run's stored settings and parameters
(core/pipeline/runs.py), the worker's log and messages (core/worker.py), the sidebar, the CLI's output.

* `redact_url(url)`: `postgresql+psycopg://strata:***@host/db`, `https://h/x?token=***`; other URLs unchanged.
* `redact_text(text)`: every known secret replaced by `***`, and every URL in the text redacted as above.
* `public_settings(settings)`: the settings as stored on a run (`model_dump(mode="json")`, every string redacted;
  the API key and the Chroma token are excluded from dumps already).
* `with_secrets(stored, current)`: a run's stored settings with the secret parts put back from the caller's own
  (a worker's, read from its environment): the database and server URLs whose redacted form is the stored one.

The secrets known to a process are those of its environment (STRATA_DATABASE_URL's password, STRATA_OPENAI_API_KEY,
OPENAI_API_KEY, STRATA_CHROMA_TOKEN) and of every Settings passed to `remember` or `public_settings` (tests set
them in code).

What STRATA_HOME holds is no other user's to read either: `private_dir` (folders 0700, the home, vectors/,
derived/, logs/), `private_file` (files 0600: the SQLite database, whose -wal and -shm SQLite gives the database's
mode, and the worker logs) and `private_tree` (after chromadb, which writes its files with the usual modes).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
SECRET_PARAMS = {"token", "api_key", "apikey", "key", "password", "passwd", "secret", "access_token", "auth"}
SECRET_ENV = ("STRATA_OPENAI_API_KEY", "OPENAI_API_KEY", "STRATA_CHROMA_TOKEN")
URL_ENV = ("STRATA_DATABASE_URL", "STRATA_CHROMA_URL", "OLLAMA_HOST", "STRATA_OPENAI_BASE_URL", "OPENAI_BASE_URL")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_KNOWN: set[str] = set()


def redact_url(url: str) -> str:
    """`url` with its password and secret query values replaced by ***; unchanged when it holds none."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k.lower() in SECRET_PARAMS for k, _ in pairs):
            query = urlencode([(k, MASK if k.lower() in SECRET_PARAMS else v) for k, v in pairs], safe="*")
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _url_secrets(url: str | None) -> set[str]:
    if not url:
        return set()
    try:
        parts = urlsplit(url)
        out = {parts.password} if parts.password else set()
        return out | {v for k, v in parse_qsl(parts.query) if k.lower() in SECRET_PARAMS and v}
    except ValueError:
        return set()


def settings_secrets(settings) -> set[str]:
    """The secret values `settings` hold: URL passwords and tokens, the API key, the Chroma token."""
    out: set[str] = set()
    for url in (settings.storage.database_url, settings.storage.chroma_url, settings.backend.ollama_host,
                settings.backend.openai_base_url, *settings.backend.hosts):
        out |= _url_secrets(url)
    for secret in (settings.backend.api_key, getattr(settings.storage, "chroma_token", None)):
        if secret is not None and secret.get_secret_value():
            out.add(secret.get_secret_value())
    return out


def remember(settings) -> None:
    """Redact the secrets of `settings` from this process's redacted texts from now on."""
    _KNOWN.update(settings_secrets(settings))


def known_secrets() -> set[str]:
    out = set(_KNOWN)
    for var in SECRET_ENV:
        if os.environ.get(var):
            out.add(os.environ[var])
    for var in URL_ENV:
        out |= _url_secrets(os.environ.get(var))
    return {s for s in out if len(s) >= 3}  # a one- or two-character "secret" would mangle every text


def redact_text(text: str, secrets: set[str] | None = None) -> str:
    """`text` with every URL redacted and every known secret (plus `secrets`) replaced by ***."""
    if not text:
        return text
    out = _URL.sub(lambda m: redact_url(m.group(0)), text)
    for secret in sorted(known_secrets() | (secrets or set()), key=len, reverse=True):
        out = out.replace(secret, MASK)
    return out


def redact(value: Any, secrets: set[str] | None = None) -> Any:
    """Every string inside `value` (JSON-like: dicts, lists) redacted."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    return value


def public_settings(settings) -> dict:
    """`settings` as stored on a run or shown: model_dump(mode="json") with every secret redacted."""
    remember(settings)
    return redact(settings.model_dump(mode="json"), settings_secrets(settings))


def with_secrets(stored, current):
    """`stored` (Settings rebuilt from a run's row) with the URLs it holds redacted replaced by `current`'s (the
    worker's own, from its environment) where they redact to the same text, and `current`'s API key and token."""
    out = stored.model_copy(deep=True)
    for section, field in (("storage", "database_url"), ("storage", "chroma_url"), ("backend", "ollama_host"),
                           ("backend", "openai_base_url")):
        mine, theirs = getattr(current, section), getattr(out, section)
        value, own = getattr(theirs, field), getattr(mine, field)
        if value and own and MASK in value and redact_url(own) == value:
            setattr(theirs, field, own)
    own_hosts = {redact_url(h): h for h in current.backend.hosts}
    out.backend.hosts = [own_hosts.get(h, h) for h in out.backend.hosts]
    out.backend.api_key = current.backend.api_key
    out.storage.chroma_token = current.storage.chroma_token
    return out


class _Redacting:
    """A text stream whose writes are redacted (`redact_text`); everything else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def redacted_output(settings=None) -> Iterator[None]:
    """sys.stdout and sys.stderr redacted while inside (the CLI, the worker and its log), also of the secrets of
    `settings`: a no-op when this process knows no secret."""
    if settings is not None:
        remember(settings)
    if not known_secrets():
        yield
        return
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Redacting(out), _Redacting(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


# -- files only their owner reads --------------------------------------------------------------------------------------
PRIVATE_DIR, PRIVATE_FILE = 0o700, 0o600
_log = logging.getLogger(__name__)
_TOLD: set[str] = set()  # folders open to others that this process could not close, said once each


def _close(path: Path, mode: int, say: bool) -> None:
    """`path` given `mode` when others may read or enter it and it is this user's own, not a shared folder (sticky,
    like /tmp) and not the root; `say`: in one line of the log (or, when it cannot be closed, the line that says so,
    once per process)."""
    try:
        real = path.resolve()
        st = real.stat()
    except OSError:
        return
    if not st.st_mode & 0o077:
        return
    if st.st_uid != os.geteuid():
        why = "not this user's own"
    elif st.st_mode & stat.S_ISVTX or real == Path(real.anchor):
        why = "a shared folder"
    else:
        try:
            real.chmod(mode)
        except OSError as exc:
            why = exc.strerror or str(exc)
        else:
            if say:
                _log.warning("%s was open to other users (mode %o): now %o, its owner's alone", real,
                             stat.S_IMODE(st.st_mode), mode)
            return
    if say and str(real) not in _TOLD:
        _TOLD.add(str(real))
        _log.warning("%s is open to other users (mode %o) and was left so (%s): chmod %o it", real,
                     stat.S_IMODE(st.st_mode), why, mode)


def private_dir(path: str | Path, close: bool = True) -> Path:
    """Folder `path`, made 0700 with every missing folder above it; when `close`, an existing one that others may
    read or enter is closed to 0700, in one line of the log (only this user's own: not a sticky folder like /tmp,
    not /)."""
    path = Path(path)
    for p in reversed([p for p in (path, *path.parents) if not p.exists()]):
        p.mkdir(mode=PRIVATE_DIR, exist_ok=True)
    if close:
        _close(path, PRIVATE_DIR, say=True)
    return path


def private_file(path: str | Path, create: bool = True) -> Path:
    """File `path`, made empty and 0600 when missing (and `create`); an existing one that others may read closed to
    0600 (this user's own only)."""
    path = Path(path)
    if create:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
            return path
        except FileExistsError:
            pass
    _close(path, PRIVATE_FILE, say=False)  # (nothing when missing)
    return path


def private_tree(path: str | Path) -> None:
    """Every folder and file at or below `path` that others may read or enter, closed (their owner's bits kept, the
    rest cleared), silently: for what a library writes with the usual modes (chromadb's files)."""

    def close(p: str) -> None:
        with suppress(OSError):  # gone meanwhile (a journal), or not this user's to change
            st = os.lstat(p)
            if st.st_mode & 0o077 and not stat.S_ISLNK(st.st_mode) and st.st_uid == os.geteuid():
                os.chmod(p, stat.S_IMODE(st.st_mode) & 0o700)

    close(str(path))
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            close(os.path.join(root, name))
