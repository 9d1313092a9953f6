"""One retrieval drawn, on the Ask page and on the Evaluate page's question view: its answer block (offline the
best evidence, quoted with the question's words highlighted; with a model its answer and what it cites) and its
evidence chain drawn small (core/explore/chain.py); its local / bridge / global context panels (every item names
its node and says what its score is; one click shows it on the Graph page) and the path it took on the graph
(core/explore/route.py: the Graph page's canvas, the roles' legend), with the gold documents and their chunks
highlighted, and the gold documents it missed drawn apart, when the Evaluate page passes them."""

from __future__ import annotations

import json
from collections import Counter

import streamlit as st

from core.answer import cited_numbers
from core.explore.chain import Chain, chain_payload
from core.explore.evidence import Evidence, highlight
from core.explore.route import legend_html, route_graph, route_payload
from core.explore.strategies import item_score
from core.retrieval.base import Retrieval, get_strategy, per_kind
from ui import resources as R
from ui.graph_canvas import graph_canvas
from ui.lazy import lazy_expander
from ui.text import md_answer, md_escape, md_label

SECTION_HELP = {"local": "Detail", "bridge": "Connection", "global": "Overview"}
MAX_ITEMS = 12  # shown per kind of item in a panel (`per_kind`)


@st.cache_data(show_spinner=False, max_entries=48)
def _route(ws_id: int, version: str, payload: str, height: int, gold: tuple[str, ...] = (),
           gold_docs: tuple[str, ...] = ()) -> tuple[dict, str, str]:
    rg = route_graph(Retrieval.from_dict(json.loads(payload)), R.store(), ws_id, gold=set(gold),
                     gold_docs=list(gold_docs))
    return route_payload(rg, height=height), legend_html(rg), rg.note


def strategy_about(name: str) -> tuple[str, str]:
    """A strategy's label and description (its name alone for a past result of a strategy this version lacks)."""
    try:
        s = get_strategy(name)
        return s.label, s.description
    except KeyError:
        return name, ""


def strategy_label(name: str) -> str:
    return strategy_about(name)[0]


def show_on_graph(node_id: str, key: str) -> None:
    if st.button("Show on graph", key=key, icon=":material/hub:", type="tertiary"):
        st.session_state["graph_focus"] = node_id
        st.switch_page("views/graph.py")


def panel(i: int | str, r: Retrieval, section: str, key: str, width: int) -> None:
    """The `section` context of `r` in a bordered container `key`: each item in an expander naming its node."""
    items = r.sections.get(section, [])
    with st.container(border=True, key=key):
        st.markdown(f"**{section.capitalize()}** · {SECTION_HELP[section]} ({len(items)})")
        if not items:
            st.caption("Nothing at this level for this strategy.")
            return
        kinds = Counter(it.kind for it in items)
        st.caption("From " + ", ".join(f"{n} {k} node{'s' if n > 1 else ''}" for k, n in kinds.most_common())
                   + "; each names its node.")
        shown, left_out = per_kind(items, MAX_ITEMS)
        for j, it in shown:
            score = f"{item_score(r.strategy, section, it.kind)} {it.score:.3g}"
            with lazy_expander(f"{md_label(it.title, width)} · {it.kind} · {md_escape(score)}", f"{key}_{j}") as box:
                if box.open:
                    st.markdown(md_escape(it.text[:1500]))
                    level = f" · level {it.level}" if it.level is not None else ""
                    st.caption(f"node {md_escape(it.id)} · {it.kind}{level}")
                    show_on_graph(it.id, f"go_{i}_{section}_{j}")
        if left_out:  # (a leading "+ " would render as a list)
            st.caption("and " + ", ".join(f"{n} more {k} node{'s' if n > 1 else ''}" for k, n in left_out.items()))


def path(ws_id: int, version: str, i: int | str, r: Retrieval, height: int, gold: set[str] | None = None,
         gold_docs: list[str] | None = None) -> None:
    """The path `r` took, drawn in container `route_{i}`; a click on a node names it and offers it on the Graph
    page. `gold` / `gold_docs`: the gold nodes to highlight and the gold documents to draw when not reached."""
    st.markdown("#### Path on the graph")
    if not r.path_nodes and not r.sources and not gold_docs:
        st.caption("This strategy visited no graph nodes.")
        return
    drawing, legend, note = _route(ws_id, version, json.dumps(r.to_dict()), height, tuple(sorted(gold or ())),
                                   tuple(gold_docs or ()))
    with st.container(key=f"route_{i}"):
        clicked = graph_canvas(drawing, key=f"route_canvas_{i}")
    st.markdown(legend, unsafe_allow_html=True)  # Strata's own role / kind names and colours only
    if note:
        st.caption(note)
    node = next((n for n in drawing["nodes"] if clicked and n["id"] == clicked.get("id")), None)
    if node is not None:  # a click on a node of the path: name it, and offer it on the Graph page
        a, b = st.columns([4, 1], vertical_alignment="center")
        a.caption(f"Clicked: {md_escape(node['label'])} · {node['kind']} · {', '.join(node['roles'])}")
        with b:
            show_on_graph(node["id"], f"goroute_{i}")


def by_model(r: Retrieval) -> bool:
    """Whether a language model wrote the answer of `r` (a result from before `answered_by`: its model steps)."""
    return r.trace.get("answered_by", "offline") != "offline" if "answered_by" in r.trace else "llm" in r.trace


def quote(e: Evidence) -> str:
    """The sentence as escaped Markdown, the question's words in bold."""
    return "".join(f"**{md_escape(t)}**" if hit else md_escape(t) for t, hit in highlight(e.sentence, e.words))


def evidence_card(i: int | str, r: Retrieval, evidence: list[Evidence], title: str = "Best evidence") -> None:
    """The sentences quoted with their document and [n], the question's words highlighted."""
    with st.container(border=True, key=f"evidence_{i}"):
        st.markdown(f"**{title}**")
        if not evidence:
            st.caption("No sentence of the retrieved documents holds a word of the question.")
        for e in evidence:
            st.markdown(f"> {quote(e)}")
            hop = f" · then, about {md_escape(e.via)}" if e.hop == 2 and e.via else (" · and" if e.hop == 2 else "")
            st.caption(f"[{e.cite}] {md_label(e.title, 90)}{hop}" if e.cite else md_label(e.title, 90) + hop)


def answer_block(i: int | str, r: Retrieval, text: str, evidence: list[Evidence]) -> None:
    """With a model: its answer and the sources it cites (its evidence in them below). Offline: the best evidence,
    and a line saying no model wrote it."""
    if by_model(r):
        st.markdown(md_answer(text))
        cited = cited_numbers(text, len(r.sources))
        st.caption(("Cites " + " · ".join(f"[{n}] {md_label(r.sources[n - 1].title, 60)}" for n in cited))
                   if cited else "The model cited no source.")
        st.caption(f"Written by the model {md_escape(str(r.trace.get('answered_by', '')))} from the retrieved "
                   "context; check it against the sentences quoted below.")
        evidence_card(i, r, evidence, "Evidence in the cited documents")
        return
    evidence_card(i, r, evidence)
    st.caption("No language model wrote this (offline backend): it is the retrieved sentence that best matches the "
               "question, quoted as it stands in its document. It is evidence to read, not an answer.")


def chain_view(i: int | str, chain: Chain, height: int = 190) -> None:
    """The evidence chain as one line and drawn small (a few nodes); a click on a node offers it on the Graph page."""
    with st.container(key=f"chain_{i}"):
        line = chain.line()
        st.markdown("**Evidence chain** · " + (md_escape(line) if line else "no entity of the graph to start from"))
        if chain.note:
            st.caption(md_escape(chain.note))
        if len(chain.nodes) < 2:
            return
        drawing = chain_payload(chain, height)
        clicked = graph_canvas(drawing, key=f"chain_canvas_{i}")
        node = next((n for n in chain.nodes if clicked and n.id == clicked.get("id")), None)
        if node is not None:
            a, b = st.columns([4, 1], vertical_alignment="center")
            a.caption(f"Clicked: {md_escape(node.label)} · {node.kind}")
            with b:
                show_on_graph(node.id, f"gochain_{i}")
