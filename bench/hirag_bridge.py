"""Where HiRAG's bridge (Eq. 16) meets the sources, on a built workspace (issue 37).

    python -m bench.hirag_bridge --home bench/out/hotpotqa --workspace hotpotqa \
        --queries ../shared/eval/hotpotqa/queries.jsonl --out bench/results/issue37/hirag-bridge-hotpotqa.json

For every question `hirag` runs as `python -m core eval` runs it, and the script reads its retrieval:

* backs: the questions where a bridge triple (an extracted relationship of the bridge section) was extracted from a
  chunk of one of the ranked sources: the bridge's triples back a source;
* own: the questions where a source is backed by the bridge's chunks and by no text unit of the local entities (what
  the bridge alone adds to the sources); with the sources in HiRAG's context order (local text units first, then the
  bridge relationships' chunks, then the key entities' units: `HiRAGStrategy.text_units`) this needs the local units
  to span fewer documents than `max_sources`;
* local_documents: per question, how many distinct documents the local entities' text units span: when it is at
  least `max_sources` (10), the sources are full before the first bridge chunk is reached, which is why `hirag`,
  `hirag-local` (no bridge, no global) and `hirag-nobridge` rank the same sources;
* gold_behind: the questions where a gold document is backed by the bridge's triples but is not among the sources.

One example question of each kind is written with its bridge triples and the sources they back.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--home", type=Path, required=True, help="STRATA_HOME of the built workspace")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    os.environ["STRATA_HOME"] = str(args.home.resolve())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from core.backends.servers import embedder_kind
    from core.config import Settings
    from core.eval import document_ids, load_queries
    from core.pipeline.factory import workspace_embedder
    from core.retrieval.base import get_strategy
    from core.retrieval.hirag import related_text_units
    from core.store import Store
    from core.workspace import open_resources

    settings = Settings.from_env()
    store = Store(settings.storage.db_url)
    ws = store.require_workspace(args.workspace)  # a built workspace, as `python -m core eval` opens it
    settings.embed.embedder = embedder_kind(ws.embedder)  # type: ignore[assignment]
    res = open_resources(store, ws, settings, workspace_embedder(settings, ws.name, strict=False))
    view = res.view
    ids_of = document_ids(store, res.ws_id)
    limit = settings.retrieval.max_sources
    strategy = get_strategy("hirag")
    rows = []
    for q in load_queries(args.queries):
        r = strategy.retrieve(res, q.question)
        local = [i.id for i in r.sections["local"] if i.kind == "entity"]
        local_docs = view.documents_of(related_text_units(view, local))
        rels = [i for i in r.sections["bridge"] if i.kind == "relationship"]
        rel_docs = {i.id: view.documents_of(view.rel_chunks.get(i.id, [])) for i in rels}
        bridge_docs = {d for ds in rel_docs.values() for d in ds}
        sources = [s.document_id for s in r.sources]
        gold_docs = {d for d, xs in ids_of.items() if xs & q.gold}
        rows.append({
            "id": q.id, "question": q.question, "local_documents": len(local_docs),
            "bridge_relationships": len(rels), "bridge_documents": len(bridge_docs),
            "backs": sorted(set(sources) & bridge_docs),
            "own": sorted(d for d in sources if d in bridge_docs and d not in local_docs),
            "gold_behind": sorted((gold_docs & bridge_docs) - set(sources)),
            "triples": [(i.title, rel_docs[i.id]) for i in rels if set(rel_docs[i.id]) & set(sources)][:5],
            "sources": [(s.document_id, s.title) for s in r.sources],
        })
    n = len(rows)
    full = sum(1 for x in rows if x["local_documents"] >= limit)
    summary = {
        "workspace": args.workspace, "queries": n, "max_sources": limit,
        "with_bridge_triples": sum(1 for x in rows if x["bridge_relationships"]),
        "bridge_backs_a_source": sum(1 for x in rows if x["backs"]),
        "bridge_alone_backs_a_source": sum(1 for x in rows if x["own"]),
        "local_units_fill_the_sources": full,
        "gold_backed_by_the_bridge_but_not_a_source": sum(1 for x in rows if x["gold_behind"]),
        "example_backs": next((x for x in rows if x["backs"]), None),
        "example_gold_behind": next((x for x in rows if x["gold_behind"]), None),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"summary": summary, "command": " ".join(["python -m bench.hirag_bridge"]
                                                                             + sys.argv[1:])}, indent=2))
    print(json.dumps({k: v for k, v in summary.items() if not k.startswith("example")}, indent=2))


if __name__ == "__main__":
    main()
