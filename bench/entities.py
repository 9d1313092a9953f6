"""Entity precision and recall of the offline extractors on a hand-labelled sample.

bench/data/entity_gold.jsonl holds 44 sentences (13 from hotpotqa, 14 from 2wikimultihopqa, cited by corpus id; 17
from data/sample, cited by file), each with the named entities a reader finds in it: people, organisations, places,
facilities, events, works, laws, products and languages by their names as written; no dates, numbers, money or
nationality adjectives ("American"), no common-noun phrases.

Each sentence is extracted on its own (no subject). A prediction written all in lower case is a noun-phrase concept
(the spaCy extractor's GraphRAG-style noun phrases): not a named entity, so it is counted apart and left out of
precision. Names are compared after dropping a leading article, a trailing possessive and case:

* exact: the predicted name is a gold name;
* partial: one contains the other at word boundaries ("Porcaro" / "Jeffrey Thomas Porcaro").

    .venv/bin/python -m bench.entities [--gold bench/data/entity_gold.jsonl] [--show]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from core.backends.offline import OfflineBackend
from core.config import ExtractSettings

GOLD = Path(__file__).parent / "data" / "entity_gold.jsonl"


def norm(name: str) -> str:
    s = " ".join(name.lower().replace("’", "'").split())
    s = re.sub(r"'s$", "", s)
    return re.sub(r"^(the|a|an) ", "", s).strip(" .,;:\"'")


def _contains(a: str, b: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(b) + r"(?!\w)", a) is not None


def partial(a: str, b: str) -> bool:
    return a == b or _contains(a, b) or _contains(b, a)


def score(rows: list[dict], extractor: str, show: bool = False) -> dict:
    backend = OfflineBackend(extractor=extractor)
    types = ExtractSettings().entity_types
    t0 = time.process_time()
    extractions = backend.extract_many([r["text"] for r in rows], types, [None] * len(rows))
    secs = time.process_time() - t0
    tp_exact = tp_partial = n_pred = n_gold = found_exact = found_partial = concepts = 0
    for row, ex in zip(rows, extractions):
        preds = [e.name for e in ex.entities if e.name != e.name.lower()]
        concepts += sum(1 for e in ex.entities if e.name == e.name.lower())
        pred_n = list(dict.fromkeys(norm(p) for p in preds))
        gold_n = list(dict.fromkeys(norm(g) for g in row["gold"]))
        n_pred += len(pred_n)
        n_gold += len(gold_n)
        tp_exact += sum(p in gold_n for p in pred_n)
        tp_partial += sum(any(partial(p, g) for g in gold_n) for p in pred_n)
        found_exact += sum(g in pred_n for g in gold_n)
        found_partial += sum(any(partial(p, g) for p in pred_n) for g in gold_n)
        if show:
            wrong = [p for p in pred_n if p not in gold_n]
            missed = [g for g in gold_n if g not in pred_n]
            if wrong or missed:
                print(f"  [{extractor}] {row['source']} {row['id']}: extra {wrong} missed {missed}")
    return {
        "extractor": backend.model, "sentences": len(rows), "gold": n_gold, "predicted": n_pred,
        "precision_exact": tp_exact / n_pred if n_pred else 0.0,
        "recall_exact": found_exact / n_gold if n_gold else 0.0,
        "precision_partial": tp_partial / n_pred if n_pred else 0.0,
        "recall_partial": found_partial / n_gold if n_gold else 0.0,
        "noun_phrase_concepts": concepts, "cpu_seconds": round(secs, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gold", type=Path, default=GOLD)
    ap.add_argument("--show", action="store_true", help="print each sentence's extra and missed names")
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.gold.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(f"{'extractor':48} {'P exact':>8} {'R exact':>8} {'P part.':>8} {'R part.':>8} {'pred':>5} {'gold':>5} "
          f"{'NP':>4}")
    for extractor in ("heuristic", "spacy"):
        r = score(rows, extractor, args.show)
        print(f"{r['extractor'][:48]:48} {r['precision_exact']:8.3f} {r['recall_exact']:8.3f} "
              f"{r['precision_partial']:8.3f} {r['recall_partial']:8.3f} {r['predicted']:5d} {r['gold']:5d} "
              f"{r['noun_phrase_concepts']:4d}")


if __name__ == "__main__":
    main()
