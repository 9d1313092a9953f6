"""Exports of a workspace: the graph as GraphML, GEXF or node-link JSON (whole, or the subgraph induced by a set of
node ids), the communities with their reports as CSV, one community's report as Markdown, the query traces as JSON.

The graph is every stored row that is a node: `Node` rows (chunks, statements, entities, relationships, ...),
`Document` rows (kind "document"), `Community` rows (kind "community"); and every `Edge` whose two ends are in the
export, plus a `child_of` edge from each community to its parent (computed from `parent_id`, never stored).
Node attributes: kind, title, type (a community's method, a document's mime type), layer (a community's level),
weight (a community's size), document_id, text (a community's summary; none for a document, whose text is its
chunks), data (the JSON column as a JSON string in GraphML/GEXF, which cannot hold maps; an object in JSON). Edge
attributes: kind, weight, data. Empty strings and empty data are left out.

Text is kept whole by default (`max_text=0`): every node's text is bounded by construction (chunks by the chunk
size, entity descriptions by the resolve and merge caps, reports by the report writer), and a document's own text
is not repeated; `max_text` cuts it for lighter files. Characters XML 1.0 cannot hold (C0 controls but tab and
newlines, lone surrogates, U+FFFE/U+FFFF) become U+FFFD in GraphML/GEXF; carriage returns, tabs and newlines are
written as character references where a parser would normalise them. JSON keeps every character.

Writers stream: rows come from SQLite cursors and go out in blocks, so memory holds the set of exported node ids
(to drop edges to ids that are not nodes), not the graph: the 246k-node, 1.7M-edge benchmark graph writes as
GraphML without building it in memory (networkx's writers would need the whole graph as Python objects; networkx
reads every output back in the tests).
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from sqlalchemy import text as sql

from core.history import export_json
from core.resolution.review import stale_reasons
from core.store import from_json, is_sqlite

EXPORT_FORMATS = ("graphml", "gexf", "json", "csv")
GRAPH_FORMATS = ("graphml", "gexf", "json")
NODE_ATTRS = (("kind", "string"), ("title", "string"), ("type", "string"), ("layer", "int"), ("weight", "double"),
              ("document_id", "string"), ("text", "string"), ("data", "string"))
EDGE_ATTRS = (("kind", "string"), ("weight", "double"), ("data", "string"))
_GEXF_TYPES = {"string": "string", "int": "integer", "double": "double"}
_BLOCK = 2000  # rows per write
_IN = 500  # ids per IN (...) query


class ExportError(ValueError):
    """An export that cannot be made as asked (unknown format or community), with a one-line reason."""


# -- text on its way out ------------------------------------------------------------------------------------------
_BAD_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_MD = re.compile(r"([\\`*_{}\[\]<>|~$#&])")  # with [ ] escaped, ( ) and ! make no link or image
_MD_START = re.compile(r"^(\d+)([.)])(?=\s|$)|^([-+=])(?=\s|$|[-+=])")  # what would open a list (or a heading underline) at a line start
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def clean(s: str) -> str:
    """Characters XML 1.0 cannot hold replaced by U+FFFD."""
    return _BAD_XML.sub("\ufffd", s) if _BAD_XML.search(s) else s


def _xtext(s: str) -> str:
    return clean(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#13;")


def _xattr(s: str) -> str:
    return (_xtext(s).replace('"', "&quot;").replace("\t", "&#9;").replace("\n", "&#10;"))


def md(s: str) -> str:
    """Document text as Markdown text, on one line: control characters replaced (as `clean`), whitespace runs
    collapsed to one space, every character that could start markup (emphasis, code, links, HTML, headings, tables, maths, a list at the start) escaped, so the
    file reads cleanly as plain text too."""
    out = _MD.sub(r"\\\1", " ".join(clean(str(s)).split()))
    return _MD_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"\\{m.group(3)}", out)


def _cell(s: str) -> str:
    """A text cell of the CSV: a leading = + - @ (a formula to a spreadsheet) is quoted with an apostrophe."""
    s = _BAD_XML.sub("", s)
    return "'" + s if s.startswith(_FORMULA) else s


# -- rows -----------------------------------------------------------------------------------------------------------
def _parts(ids: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(ids), _IN):
        yield ids[i : i + _IN]


def _query(conn, q: str, ws_id: int, ids: list[str] | None, col: str = "id") -> Iterator[tuple]:
    """Rows of `q` (which ends in a WHERE on workspace_id) for the workspace, or for `ids` of column `col`."""
    if ids is None:  # in insertion order on SQLite; PostgreSQL has no rowid: by id (an edge's is its insertion order)
        yield from conn.execute(sql(q + (" ORDER BY rowid" if is_sqlite(conn) else " ORDER BY id")), {"ws": ws_id})
        return
    for part in _parts(ids):
        marks = ", ".join(f":i{k}" for k in range(len(part)))
        yield from conn.execute(sql(f"{q} AND {col} IN ({marks})"),
                                {"ws": ws_id, **{f"i{k}": v for k, v in enumerate(part)}})


def _data(raw) -> str:
    if raw is None:
        return ""
    s = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    return "" if s in ("{}", "null", "[]", "") else s


def _nodes(conn, ws_id: int, ids: list[str] | None, max_text: int) -> Iterator[tuple[str, dict]]:
    """(id, attributes) of every node in the export: Node, Document and Community rows."""
    def cut(t: str) -> str:
        return t[:max_text] + "…" if max_text and len(t) > max_text else t

    for i, kind, title, type_, layer, weight, doc, text, data in _query(
            conn, "SELECT id, kind, title, type, layer, weight, document_id, text, data FROM node "
                  "WHERE workspace_id = :ws", ws_id, ids):
        yield i, {"kind": kind, "title": title or "", "type": type_ or "", "layer": int(layer or 0),
                  "weight": float(weight or 0.0), "document_id": doc or "", "text": cut(text or ""),
                  "data": _data(data)}
    for i, title, filename, mime, ext, n_chars, meta in _query(
            conn, "SELECT id, title, filename, mime, external_id, n_chars, meta FROM document "
                  "WHERE workspace_id = :ws", ws_id, ids):
        info = {"filename": filename, "external_id": ext, "n_chars": n_chars, "meta": from_json(meta, {})}
        yield i, {"kind": "document", "title": title or "", "type": mime or "", "layer": 0, "weight": 1.0,
                  "document_id": i, "text": "", "data": json.dumps(info, ensure_ascii=False)}
    for i, method, level, parent, size, title, summary, report, data in _query(
            conn, "SELECT id, method, level, parent_id, size, title, summary, report, data FROM community "
                  "WHERE workspace_id = :ws", ws_id, ids):
        info = {"parent_id": parent, "report": from_json(report, {}), **from_json(data, {})}
        yield i, {"kind": "community", "title": title or "", "type": method, "layer": int(level or 0),
                  "weight": float(size or 0), "document_id": "", "text": cut(summary or ""),
                  "data": json.dumps(info, ensure_ascii=False)}


def _edges(conn, ws_id: int, ids: list[str] | None, have: set[str]) -> Iterator[tuple[str, str, str, dict]]:
    """(edge id, src, dst, attributes) of every edge with both ends in `have`."""
    for eid, src, dst, kind, weight, data in _query(
            conn, "SELECT id, src, dst, kind, weight, data FROM edge WHERE workspace_id = :ws", ws_id, ids, "src"):
        if src in have and dst in have:
            yield f"e{eid}", src, dst, {"kind": kind, "weight": float(weight or 0.0), "data": _data(data)}
    for cid, parent in _query(conn, "SELECT id, parent_id FROM community WHERE workspace_id = :ws "
                                    "AND parent_id IS NOT NULL", ws_id, ids):
        if parent in have and cid in have and parent != cid:
            yield f"child_of:{cid}", cid, parent, {"kind": "child_of", "weight": 1.0, "data": ""}


# -- writers --------------------------------------------------------------------------------------------------------
def _num(v) -> str:
    return repr(float(v)) if isinstance(v, float) else str(v)


def _graphml(nodes, edges, out: BinaryIO, counts: dict) -> None:
    head = ['<?xml version="1.0" encoding="UTF-8"?>\n<graphml xmlns="http://graphml.graphdrawing.org/xmlns" '
            'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://graphml.graphdrawing.'
            'org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">\n']
    head += [f'<key id="n_{a}" for="node" attr.name="{a}" attr.type="{t}"/>\n' for a, t in NODE_ATTRS]
    head += [f'<key id="e_{a}" for="edge" attr.name="{a}" attr.type="{t}"/>\n' for a, t in EDGE_ATTRS]
    head.append('<graph id="G" edgedefault="directed">\n')
    out.write("".join(head).encode())

    def data(prefix: str, attrs: dict, spec) -> str:
        return "".join(f'<data key="{prefix}{a}">{_xtext(v) if t == "string" else _num(v)}</data>'
                       for a, t in spec if (v := attrs[a]) != "")

    _write(out, (f'<node id="{_xattr(i)}">{data("n_", a, NODE_ATTRS)}</node>\n' for i, a in _count(nodes, counts,
                                                                                                  "nodes")))
    _write(out, (f'<edge id="{_xattr(e)}" source="{_xattr(s)}" target="{_xattr(d)}">{data("e_", a, EDGE_ATTRS)}'
                 f'</edge>\n' for e, s, d, a in _count(edges(), counts, "edges")))
    out.write(b"</graph>\n</graphml>\n")


def _gexf(nodes, edges, out: BinaryIO, counts: dict) -> None:
    head = ['<?xml version="1.0" encoding="UTF-8"?>\n<gexf xmlns="http://www.gexf.net/1.2draft" version="1.2">\n'
            '<meta><creator>Strata</creator></meta>\n<graph defaultedgetype="directed" mode="static">\n'
            '<attributes class="node" mode="static">\n']
    head += [f'<attribute id="{k}" title="{a}" type="{_GEXF_TYPES[t]}"/>\n' for k, (a, t) in enumerate(NODE_ATTRS)]
    head.append('</attributes>\n<attributes class="edge" mode="static">\n')
    edge_spec = [(a, t) for a, t in EDGE_ATTRS if a != "weight"]  # the edge's own weight attribute holds it
    head += [f'<attribute id="{k}" title="{a}" type="{_GEXF_TYPES[t]}"/>\n' for k, (a, t) in enumerate(edge_spec)]
    head.append("</attributes>\n<nodes>\n")
    out.write("".join(head).encode())

    def values(attrs: dict, spec) -> str:
        vals = "".join(f'<attvalue for="{k}" value="{_xattr(v) if t == "string" else _num(v)}"/>'
                       for k, (a, t) in enumerate(spec) if (v := attrs[a]) != "")
        return f"<attvalues>{vals}</attvalues>" if vals else ""

    _write(out, (f'<node id="{_xattr(i)}" label="{_xattr(a["title"] or i)}">{values(a, NODE_ATTRS)}</node>\n'
                 for i, a in _count(nodes, counts, "nodes")))
    out.write(b"</nodes>\n<edges>\n")
    _write(out, (f'<edge id="{_xattr(e)}" source="{_xattr(s)}" target="{_xattr(d)}" weight="{_num(a["weight"])}">'
                 f'{values(a, edge_spec)}</edge>\n' for e, s, d, a in _count(edges(), counts, "edges")))
    out.write(b"</edges>\n</graph>\n</gexf>\n")


def _json(nodes, edges, out: BinaryIO, counts: dict, graph: dict) -> None:
    """networkx node-link data (`nx.node_link_graph(doc, edges="edges")` reads it): data stays an object."""
    def obj(a: dict) -> dict:
        return {k: (json.loads(v) if k == "data" else v) for k, v in a.items() if v != ""}

    dumps = json.dumps
    out.write(('{"directed": true, "multigraph": true, "graph": ' + dumps(graph) + ',\n"nodes": [\n').encode())
    _write(out, (("" if n == 0 else ",\n") + dumps({"id": i, **obj(a)}, ensure_ascii=False)
                 for n, (i, a) in enumerate(_count(nodes, counts, "nodes"))), errors="replace")
    out.write(b'\n],\n"edges": [\n')
    _write(out, (("" if n == 0 else ",\n") + dumps({"source": s, "target": d, "key": e, **obj(a)},
                                                    ensure_ascii=False)
                 for n, (e, s, d, a) in enumerate(_count(edges(), counts, "edges"))), errors="replace")
    out.write(b"\n]}\n")


def _count(items: Iterable, counts: dict, key: str) -> Iterator:
    for it in items:
        counts[key] += 1
        yield it


def _write(out: BinaryIO, parts: Iterable[str], errors: str = "strict") -> None:
    block: list[str] = []
    for p in parts:
        block.append(p)
        if len(block) >= _BLOCK:
            out.write("".join(block).encode("utf-8", errors))
            block.clear()
    if block:
        out.write("".join(block).encode("utf-8", errors))


def write_graph(store, ws_id: int, fmt: str, out: BinaryIO, node_ids: Iterable[str] | None = None,
                max_text: int = 0) -> dict:
    """Stream the graph (or the subgraph induced by `node_ids`) as `fmt` into `out` (a binary file). Returns
    {"nodes", "edges"} written."""
    if fmt not in GRAPH_FORMATS:
        raise ExportError(f"unknown graph format {fmt!r}: use one of {', '.join(GRAPH_FORMATS)}")
    ids = None if node_ids is None else sorted(set(node_ids))
    counts = {"nodes": 0, "edges": 0}
    have: set[str] = set()
    with store.engine.connect() as conn:
        name = conn.execute(sql("SELECT name FROM workspace WHERE id = :ws"), {"ws": ws_id}).scalar()

        def nodes() -> Iterator[tuple[str, dict]]:
            for i, a in _nodes(conn, ws_id, ids, max_text):
                if i not in have:  # ids are unique across the three tables; a clash keeps the first row
                    have.add(i)
                    yield i, a

        def edges() -> Iterator:  # called after every node is written: `have` is complete
            return _edges(conn, ws_id, ids, have)

        if fmt == "graphml":
            _graphml(nodes(), edges, out, counts)
        elif fmt == "gexf":
            _gexf(nodes(), edges, out, counts)
        else:
            _json(nodes(), edges, out, counts, {"workspace": name, "workspace_id": ws_id})
    return counts


def graph_export(store, ws_id: int, fmt: str, node_ids: set[str] | None = None, max_text: int = 0) -> bytes:
    """The graph (or the subgraph induced by `node_ids`, which may name nodes, documents and communities) as
    GraphML, GEXF or node-link JSON bytes."""
    buf = io.BytesIO()
    write_graph(store, ws_id, fmt, buf, node_ids, max_text)
    return buf.getvalue()


# -- communities ----------------------------------------------------------------------------------------------------
CSV_COLUMNS = ("id", "method", "level", "parent_id", "size", "title", "summary", "rating", "keywords", "findings",
               "stale", "stale_reasons")


def _findings(report: dict) -> list[dict]:
    out = [f for f in report.get("findings") or [] if isinstance(f, dict)]

    def imp(f: dict) -> float:
        try:
            return float(f.get("importance") or 0)
        except (TypeError, ValueError):
            return 0.0

    return sorted(out, key=lambda f: -imp(f))


def communities_csv(store, ws_id: int) -> bytes:
    """One row per community (CSV_COLUMNS; findings one per line as "summary: explanation (importance)"), UTF-8
    with a byte-order mark so spreadsheets read it as UTF-8."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    with store.engine.connect() as conn:
        rows = conn.execute(sql("SELECT id, method, level, parent_id, size, title, summary, report, data FROM "
                                "community WHERE workspace_id = :ws ORDER BY method, level, id"), {"ws": ws_id}).all()
    for i, method, level, parent, size, title, summary, report, data in rows:
        rep, dat = from_json(report, {}), from_json(data, {})
        finds = "\n".join(f"{f.get('summary', '')}: {f.get('explanation', '')} ({f.get('importance', '')})"
                          for f in _findings(rep))
        stale = bool(dat.get("stale"))
        reasons = "\n".join(stale_reasons(store, ws_id, i)) if stale else ""
        w.writerow([i, method, level, parent or "", size, _cell(title or ""), _cell(summary or ""),
                    rep.get("rating", ""), _cell(", ".join(str(k) for k in rep.get("keywords") or [])),
                    _cell(finds), "yes" if stale else "no", _cell(reasons)])
    return ("\ufeff" + buf.getvalue()).encode("utf-8")


def community_markdown(store, ws_id: int, community_id: str, members: int = 25) -> str:
    """One community's report as Markdown: title, facts, stale note, summary, findings by importance, keywords,
    its `members` heaviest entities. Every document-derived string is escaped (it reads as text, never markup)."""
    with store.engine.connect() as conn:
        row = conn.execute(sql("SELECT method, level, size, title, summary, report, parent_id FROM community "
                               "WHERE workspace_id = :ws AND id = :cid"), {"ws": ws_id, "cid": community_id}).first()
        if row is None:
            raise ExportError(f"no community {community_id!r} in this workspace")
        method, level, size, title, summary, report, parent = row
        ents = conn.execute(sql(
            "SELECT n.title, n.type, n.weight, n.text FROM edge e JOIN node n ON n.id = e.src WHERE e.workspace_id = :ws "
            "AND e.dst = :cid AND e.kind = 'in_community' AND n.kind = 'entity' ORDER BY n.weight DESC, n.title "
            "LIMIT :lim"), {"ws": ws_id, "cid": community_id, "lim": members}).all()
    rep = from_json(report, {})
    facts = [f"{method} community", f"level {level}", f"{size:,} members"]
    if rep.get("rating") is not None:
        facts.append(f"rating {rep['rating']}")
    lines = [f"# {md(title or 'Untitled community')}", "", "*" + md(" · ".join(facts)) + "*", "",
             f"Community id: `{community_id}`" + (f" · parent: `{parent}`" if parent else ""), ""]
    reasons = stale_reasons(store, ws_id, community_id)
    if reasons:
        lines += ["> **Stale:** entity merges since this report was written:"]
        lines += [f"> - {md(r)}" for r in reasons] + [""]
    if summary:
        lines += ["## Summary", ""] + [md(p) for p in summary.split("\n\n") if p.strip()] + [""]
    finds = _findings(rep)
    if finds:
        lines += ["## Findings", ""]
        for k, f in enumerate(finds, 1):
            lines.append(f"{k}. **{md(f.get('summary') or 'finding')}** (importance {md(str(f.get('importance', '—')))})")
            if f.get("explanation"):
                lines.append(f"   {md(f['explanation'])}")
        lines.append("")
    if rep.get("keywords"):
        lines += ["## Keywords", "", md(", ".join(str(k) for k in rep["keywords"])), ""]
    if ents:
        lines += [f"## Members (the {len(ents)} most mentioned entities)", ""]
        for t, ty, w, x in ents:
            desc = f": {md(x[:300] + ('…' if len(x) > 300 else ''))}" if x and x != t else ""
            lines.append(f"- **{md(t)}** ({md(ty or 'entity')}, {w:g} mentions){desc}")
        lines.append("")
    return "\n".join(lines)


def traces_json(store, ws_id: int) -> bytes:
    """Every question asked of the workspace with its answer and full retrieval trace (core/history.py)."""
    return export_json(store, ws_id).encode("utf-8")
