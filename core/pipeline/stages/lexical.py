"""The `lexical` stage: HLG's summarization tier (hierarchical-lexical-graph.txt §3.1.3, §3.2) over the stored graph.

Facts. A relationship node is HLG's fact (subject-predicate-object). A statement states a fact when it was derived
from a chunk the fact was derived from and mentions both the fact's subject and its object: it links to the fact by
a `mentions` edge (statement -> relationship). Relationships are keyed by (subject, object) across chunks, so one
fact links statements of several documents: HLG's inter-document connectivity (§3.2, 1).

Topics. In the paper a model relates topics to propositions while it extracts them (§6.2: "Steps 2-3 rely on an LLM
... to relate domain-relevant entities and topics, with fine-grained propositions"; (3) "From each chunk, we extract
fine-grained propositions, and then link them with topics, entities, and relationships"). With a model backend and
lexical.topics = "model" (the default) so it is here: per chunk, the model is given the chunk's statements, numbered,
and returns topics, each with a title, a summary and the statements it holds (`TopicModel.chunk_topics`; the reply's
cleaning, core/backends/topic_replies.py, puts every statement in exactly one topic of its chunk). Offline, where no
model is configured, or with lexical.topics = "clustering", what stands in is a grouping of each chunk's
statements (their vectors from the embed stage; per chunk as the paper's model relates them, issue 37; it was per
document) by agglomerative clustering (average linkage, cosine distance, cut at
1 - topic_similarity = 0.35 similarity, the paper names no value); a group bigger than max_topic_statements (12, no
paper value either) is split along its own tree; the backend then titles and summarizes each group. Either way each
topic is linked from its statements by `in_topic` and to its document by `derived_from`, and embedded into the
"topic" collection as title, summary and statements (§3.2, 2: "topic embeddings incorporate associated statements"):
HLG's intra-document connectivity.

Units. Fact linking inserts only the edges that are missing, so it is idempotent. Topics are written per document
together with the document's checkpoint in one transaction; checkpointed documents are skipped. A unit that still
fails after its retries (a chunk's topics from the model; with the clustering, a topic's summary) is a failed unit
(core/pipeline/failures.py): its document is written neither topics nor checkpoint, so the next build makes its topics
again (the calls that succeeded replay from the call cache). With the clustering, documents with more than `WINDOW`
statements are clustered in consecutive windows (core/algorithms/topics.py), which bounds the quadratic distance
matrix. Offline, a batch's clustering, summaries and topic vectors are one task (core/pipeline/tasks.py
`clustered_topics`): on a cluster the workers make the topics, batches side by side, while the lease holder writes.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy import func
from sqlmodel import col, delete, select

from core.ids import IdScope, local_id
from core.index.embedding import embed_missing, statement_rows, topic_text
from core.models import Checkpoint, Document, Edge, Node, sql_table
from core.pipeline.beside import EmbedAhead
from core.pipeline.context import BuildContext, Progress
from core.pipeline.tasks import chunk_topics_one, clustered_topics, summarize_one, topic_title
from core.protocols import TopicModel
from core.store import bulk_insert, content_id

STAGE = "lexical"
_BATCH_STATEMENTS = 2000  # statements per write transaction (whole documents only)


# -- the stored graph this stage reads ----------------------------------------------------------------------------
@dataclass
class _Lexicon:
    stmt_doc: dict[str, str | None] = field(default_factory=dict)
    stmt_text: dict[str, str] = field(default_factory=dict)
    stmt_pos: dict[str, tuple] = field(default_factory=dict)  # (chunk ord, statement ord, id): document order
    stmt_chunk: dict[str, str] = field(default_factory=dict)  # the chunk a statement was extracted from
    stmts_of_chunk: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    ents_of_stmt: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    rel_chunks: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    subj: dict[str, str] = field(default_factory=dict)
    obj: dict[str, str] = field(default_factory=dict)
    stated: set[tuple[str, str]] = field(default_factory=set)  # existing statement -> fact edges


def _load(store, ws_id: int) -> _Lexicon:
    lx = _Lexicon()
    with store.session() as s:
        chunk_ord = dict(s.exec(select(Node.id, Node.ord).where(Node.workspace_id == ws_id,
                                                                Node.kind == "chunk")).all())
        for sid, text, doc, ordinal in s.exec(select(Node.id, Node.text, Node.document_id, Node.ord).where(
                Node.workspace_id == ws_id, Node.kind == "statement")).all():
            lx.stmt_doc[sid], lx.stmt_text[sid] = doc, text
            lx.stmt_pos[sid] = (0, ordinal or 0, sid)
        rels = set(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == "relationship")))
        edges = s.exec(select(Edge.src, Edge.dst, Edge.kind).where(
            Edge.workspace_id == ws_id,
            col(Edge.kind).in_(("derived_from", "mentions", "subject", "object")))).all()
    for src, dst, kind in edges:
        if kind == "derived_from":
            if src in lx.stmt_doc:
                lx.stmts_of_chunk[dst].append(src)
                lx.stmt_chunk[src] = dst
                lx.stmt_pos[src] = (chunk_ord.get(dst) or 0,) + lx.stmt_pos[src][1:]
            elif src in rels:
                lx.rel_chunks[src].append(dst)
        elif kind == "mentions":
            if src in lx.stmt_doc:
                if dst in rels:
                    lx.stated.add((src, dst))
                else:
                    lx.ents_of_stmt[src].add(dst)
        elif kind == "subject":
            lx.subj[src] = dst
        else:
            lx.obj[src] = dst
    return lx


# -- facts --------------------------------------------------------------------------------------------------------
def link_facts(store, ws_id: int, lx: _Lexicon) -> tuple[int, int, int]:
    """Insert the missing statement -> fact `mentions` edges; (inserted, total, facts stated in >= 2 documents)."""
    new: list[dict] = []
    for rid in sorted(lx.rel_chunks):
        a, b = lx.subj.get(rid), lx.obj.get(rid)
        if a is None or b is None or a == b:
            continue
        for chunk in lx.rel_chunks[rid]:
            for sid in lx.stmts_of_chunk.get(chunk, ()):
                ents = lx.ents_of_stmt.get(sid)
                if ents and a in ents and b in ents and (sid, rid) not in lx.stated:
                    lx.stated.add((sid, rid))
                    new.append({"workspace_id": ws_id, "src": sid, "dst": rid, "kind": "mentions", "weight": 1.0,
                                "data": {}})
    if new:
        with store.session() as s:
            bulk_insert(s.connection(), sql_table(Edge), new)
            s.commit()
    docs_of_fact: dict[str, set] = defaultdict(set)
    for sid, rid in lx.stated:
        docs_of_fact[rid].add(lx.stmt_doc.get(sid))
    return len(new), len(lx.stated), sum(1 for d in docs_of_fact.values() if len(d) >= 2)


# -- topics -------------------------------------------------------------------------------------------------------
def _statement_vectors(ctx: BuildContext, lx: _Lexicon, ids: list[str]) -> dict[str, np.ndarray]:
    vecs = ctx.index.vectors("statement", ids)
    missing = [i for i in ids if i not in vecs]
    if missing:  # the embed stage embeds statements; only a partial index gets here
        assert ctx.ws.id is not None  # a stored workspace
        rows = statement_rows(ctx.store, ctx.ws.id, missing, titled=ctx.settings.embed.title_prefix)
        for _ in embed_missing(ctx.index, ctx.embedder, "statement", rows, ctx.settings.embed.batch_size,
                               ctx.should_stop):
            pass
        vecs.update(ctx.index.vectors("statement", missing))
    return vecs


def _write_documents(store, ws_id: int, doc_ids: list[str], topics: list[dict]) -> list[str]:
    """One transaction: replace these documents' topics (a leftover of nothing, normally), write the new ones and
    their edges, checkpoint the documents. Returns the ids of the topics replaced."""
    with store.session() as s:
        old = list(s.exec(select(Node.id).where(Node.workspace_id == ws_id, Node.kind == "topic",
                                                col(Node.document_id).in_(doc_ids))))
        if old:
            s.exec(delete(Edge).where(col(Edge.workspace_id) == ws_id, col(Edge.kind) == "in_topic",
                                      col(Edge.dst).in_(old)))
            s.exec(delete(Edge).where(col(Edge.workspace_id) == ws_id, col(Edge.kind) == "derived_from",
                                      col(Edge.src).in_(old)))
            s.exec(delete(Node).where(col(Node.id).in_(old)))
        nodes, edges = [], []
        for t in topics:
            nodes.append({"id": t["id"], "workspace_id": ws_id, "kind": "topic", "key": "", "title": t["title"],
                          "text": t["summary"], "type": "", "layer": 0, "weight": float(len(t["statements"])),
                          "document_id": t["doc"], "ord": t["ord"],
                          "data": {"keywords": t["keywords"], "statements": len(t["statements"])}})
            edges.append({"workspace_id": ws_id, "src": t["id"], "dst": t["doc"], "kind": "derived_from",
                          "weight": 1.0, "data": {}})
            edges += [{"workspace_id": ws_id, "src": sid, "dst": t["id"], "kind": "in_topic", "weight": 1.0,
                       "data": {}} for sid in t["statements"]]
        conn = s.connection()
        if nodes:
            bulk_insert(conn, sql_table(Node), nodes)
            bulk_insert(conn, sql_table(Edge), edges)
        for d in doc_ids:
            s.add(Checkpoint(workspace_id=ws_id, stage=STAGE, unit=d))
        s.commit()
    return old


def _topic_rows(store, ws_id: int, lx: _Lexicon) -> list[tuple[str, str, dict]]:
    """(id, text, meta) of every topic: title, summary and its statements in document order."""
    with store.session() as s:
        topics = s.exec(select(Node.id, Node.title, Node.text, Node.document_id).where(
            Node.workspace_id == ws_id, Node.kind == "topic").order_by(Node.id)).all()
        links = s.exec(select(Edge.src, Edge.dst).where(Edge.workspace_id == ws_id, Edge.kind == "in_topic")).all()
    members: dict[str, list[str]] = defaultdict(list)
    for sid, tid in links:
        members[tid].append(sid)
    return [_topic_row(lx, tid, title, summary, doc, members.get(tid, [])) for tid, title, summary, doc in topics]


def _topic_row(lx: _Lexicon, tid: str, title: str, summary: str, doc: str | None,
               members: list[str]) -> tuple[str, str, dict]:
    """(id, text embedded, meta) of a topic: its title, summary and statements in document order."""
    stmts = sorted(members, key=lambda i: lx.stmt_pos.get(i, (0, 0, i)))
    return (tid, topic_text(title, summary, [lx.stmt_text.get(i, "") for i in stmts]), {"document_id": doc or ""})


def model_topics(ctx: BuildContext) -> bool:
    """Whether the model makes the topics (the paper's way): lexical.topics = "model" and a model backend."""
    return (ctx.settings.lexical.topics == "model" and ctx.backend.name != "offline"
            and isinstance(ctx.backend, TopicModel))


def _topic(ids: IdScope, doc_id: str, doc_title: str, n: int, members: list[str]) -> dict:
    return {"id": ids.id("topic", local_id(doc_id), *sorted(local_id(m) for m in members)), "doc": doc_id, "doc_title": doc_title,
            "ord": n, "statements": members}


def _units(ctx: BuildContext, task, inputs: list) -> list:
    """`task` over `inputs` where the build's model units run (`BuildContext.model_engine`), in order."""
    window = 1 if ctx.backend.name == "offline" else ctx.settings.backend.parallel_calls
    return list(ctx.model_engine.map(task, inputs, ctx.parts, window=window))


def _clustering_units(ctx: BuildContext, lx: _Lexicon, batch: list[tuple[str, str]],
                      by_doc: dict[str | None, list[str]]) -> tuple[list, list]:
    """A batch's input to `clustered_topics` (per document with statements: its title, their texts in document order,
    their chunks, their vectors) and, beside it, (document, title, statement ids) of the same documents."""
    ids = [sid for d, _ in batch for sid in by_doc.get(d, [])]
    vec_of = _statement_vectors(ctx, lx, ids) if ids else {}
    units, docs = [], []
    for doc_id, title in batch:
        stmts = sorted((i for i in by_doc.get(doc_id, []) if i in vec_of), key=lambda i: lx.stmt_pos[i])
        if stmts:
            units.append((title or "", [lx.stmt_text[i] for i in stmts], [lx.stmt_chunk.get(i, "") for i in stmts],
                          np.vstack([vec_of[i] for i in stmts])))
            docs.append((doc_id, title or "", stmts))
    return units, docs


def _clustered(ctx: BuildContext, lx: _Lexicon, batches: list[list[tuple[str, str]]],
               by_doc: dict[str | None, list[str]]) -> Iterator[tuple[list, list]]:
    """Per batch: the documents (`_clustering_units`) and their `clustered_topics`, made on the build's engine (a
    batch's input is read only when the engine takes it: a few batches' vectors in memory at a time)."""
    cfg, finish = ctx.settings.lexical, ctx.backend.name == "offline"
    docs: deque = deque()  # each batch's documents, in the order its units go out (and come back)

    def units() -> Iterator[list]:
        for batch in batches:
            made, of = _clustering_units(ctx, lx, batch, by_doc)
            docs.append(of)
            yield made

    found = ctx.engine.map(clustered_topics, units(), ctx.parts, cfg.topic_similarity, cfg.max_topic_statements,
                           finish, cpu=True)
    return ((docs.popleft(), f) for f in found)


def _topics_by_clustering(ctx: BuildContext, lx: _Lexicon, docs: list, found: list
                          ) -> tuple[list[dict], set[str], dict[str, tuple[str, np.ndarray]]]:
    """The stand-in topics of a batch from its `clustered_topics`, each titled and summarized by the backend (in the
    task offline, else here, one unit per topic); a unit that failed after its retries fails its document. Returns
    the topics, the documents with a failed unit and the vectors the task made (topic id -> (text, vector))."""
    topics: list[dict] = []
    outcomes: list = []
    vectors: dict[str, tuple[str, np.ndarray]] = {}
    for (doc_id, title, stmts), groups in zip(docs, found):
        for n, (members, got, text, vec) in enumerate(groups):
            t = _topic(ctx.ids, doc_id, title, n, [stmts[i] for i in members])
            topics.append(t)
            outcomes.append(got)
            if vec is not None:
                vectors[t["id"]] = (text, vec)
    if any(o is None for o in outcomes):  # summaries not made in the task: a unit each, where model units run
        outcomes = _units(ctx, summarize_one, [("topic", t["doc_title"], [lx.stmt_text[i] for i in t["statements"]])
                                               for t in topics])
    results = [ctx.failures.take(t["id"], got, f"topic {t['ord'] + 1} of {t['doc_title']!r}")
               for t, got in zip(topics, outcomes)]
    for t, r in zip(topics, results):
        if r is not None:
            t.update(title=topic_title(r), summary=r.summary or "", keywords=list(r.keywords or []))
    return topics, {t["doc"] for t, r in zip(topics, results) if r is None}, vectors


def _topics_by_model(ctx: BuildContext, lx: _Lexicon, batch: list[tuple[str, str]],
                     by_doc: dict[str | None, list[str]]) -> tuple[list[dict], set[str]]:
    """The paper's way (§6.2 (3)): per chunk, the model relates its statements to topics it titles and summarizes
    (one unit per chunk, `TopicModel.chunk_topics`). Returns the topics and the documents with a failed unit."""
    jobs: list[tuple[str, str, str, list[str]]] = []  # (document, its title, chunk, the chunk's statements)
    for doc_id, title in batch:
        chunks: dict[str, list[str]] = {}
        for sid in sorted(by_doc.get(doc_id, []), key=lambda i: lx.stmt_pos[i]):
            chunks.setdefault(lx.stmt_chunk.get(sid, ""), []).append(sid)
        jobs += [(doc_id, title or "", chunk, stmts) for chunk, stmts in chunks.items()]

    # the chunk's topics, each chunk a unit; one whose model call failed after its retries is a failed unit
    asked = _units(ctx, chunk_topics_one, [([lx.stmt_text[i] for i in stmts], title) for _, title, _, stmts in jobs])
    replies = [ctx.failures.take(chunk or doc_id, got, f"topics of chunk {lx.stmt_pos[stmts[0]][0] + 1} of {title!r}")
               for (doc_id, title, chunk, stmts), got in zip(jobs, asked)]
    topics: list[dict] = []
    n_of: dict[str, int] = defaultdict(int)
    failed: set[str] = set()
    for (doc_id, title, _, stmts), reply in zip(jobs, replies):
        if reply is None:
            failed.add(doc_id)
            continue
        for ct in reply.topics:
            t = _topic(ctx.ids, doc_id, title, n_of[doc_id], [stmts[i - 1] for i in ct.statements])
            t.update(title=ct.title, summary=ct.summary, keywords=list(ct.keywords))
            topics.append(t)
            n_of[doc_id] += 1
    return topics, failed


def _plan(ctx: BuildContext) -> tuple[_Lexicon, list[list[tuple[str, str]]], dict[str | None, list[str]]]:
    """The stored lexicon, the documents still without topics in batches of whole documents of about
    _BATCH_STATEMENTS statements, and each document's statements."""
    lx = _load(ctx.store, ctx.ws_id)
    done = ctx.store.done_units(ctx.ws_id, STAGE)
    with ctx.store.session() as s:
        docs = s.exec(select(Document.id, Document.title).where(Document.workspace_id == ctx.ws_id)
                      .order_by(col(Document.created_at), col(Document.id))).all()
    by_doc: dict[str | None, list[str]] = defaultdict(list)
    for sid, doc in lx.stmt_doc.items():
        by_doc[doc].append(sid)
    batches: list[list[tuple[str, str]]] = []
    n_stmts = 0
    for d, t in docs:
        if d in done:
            continue
        if not batches or n_stmts + len(by_doc.get(d, [])) > _BATCH_STATEMENTS:
            batches.append([])
            n_stmts = 0
        batches[-1].append((d, t))
        n_stmts += len(by_doc.get(d, []))
    return lx, batches, by_doc


def lexical_stage(ctx: BuildContext) -> Iterator[Progress]:
    store, ws_id, cfg = ctx.store, ctx.ws_id, ctx.settings.lexical
    if not cfg.enabled:
        yield Progress(1, 1, "lexical graph switched off", {})
        return
    lx, batches, by_doc = _plan(ctx)
    _, facts_linked, cross = link_facts(store, ws_id, lx)
    counts = {"facts_linked": facts_linked, "cross_document_facts": cross}
    yield Progress(0, 1, f"{facts_linked} statement-fact links, {cross} facts across documents", counts)

    replaced: list[str] = []  # topics of documents made again
    ahead = EmbedAhead(ctx)  # on a cluster, each batch's topics are embedded while the next batch is made
    clustered = None if model_topics(ctx) else _clustered(ctx, lx, batches, by_doc)
    k, n_todo = 0, sum(map(len, batches))
    for batch in batches:
        vectors: dict[str, tuple[str, np.ndarray]] = {}
        if clustered is None:
            topics, failed = _topics_by_model(ctx, lx, batch, by_doc)
        else:
            topics, failed, vectors = _topics_by_clustering(ctx, lx, *next(clustered))
        # a failed document is left to the next build, whole
        kept = [t for t in topics if t["doc"] not in failed]
        replaced += _write_documents(store, ws_id, [d for d, _ in batch if d not in failed], kept)
        made = [t for t in kept if t["id"] in vectors]  # embedded in the task (offline), stored with their text
        if made:
            ctx.index.upsert("topic", [t["id"] for t in made], np.vstack([vectors[t["id"]][1] for t in made]),
                             [{"document_id": t["doc"] or "", "h": content_id(vectors[t["id"]][0])} for t in made])
        ahead.send("topic", [_topic_row(lx, t["id"], t["title"], t["summary"], t["doc"], t["statements"])
                             for t in kept if t["id"] not in vectors])
        k += len(batch)
        yield Progress(k, n_todo, f"topics for {k}/{n_todo} documents", counts)
        if ctx.should_stop():
            ahead.cancel()
            return
    ahead.store()

    rows = _topic_rows(store, ws_id, lx)
    live = {r[0] for r in rows}  # a document's topics made again (core/pipeline/stages/extract.py): old vectors go
    ctx.index.delete("topic", sorted(set(replaced) - live))
    for d, total in embed_missing(ctx.index, ctx.embedder, "topic", rows, ctx.settings.embed.batch_size,
                                  ctx.should_stop):
        yield Progress(d, total, f"embedded {d}/{total} topics", counts)
    with store.session() as s:
        n_topics = s.exec(select(func.count()).select_from(Node).where(Node.workspace_id == ws_id,
                                                                       Node.kind == "topic")).one()
    n_docs = len(store.done_units(ws_id, STAGE))
    counts |= {"topics": n_topics, "documents": n_docs}
    yield Progress(1, 1, f"{n_topics} topics in {n_docs} documents", counts)
