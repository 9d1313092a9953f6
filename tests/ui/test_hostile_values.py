"""A signed-in stranger sends every page values it never offered (issue 35, points 1 and 3).

Two people share one app (`STRATA_AUTH=oidc`): bob's workspace `vault` holds a document with a secret; alice owns
only `mine`. As alice, each page of the app is opened and every choice widget on it (selectbox, radio, multiselect,
select slider) is sent values through the same path a hand-made websocket message takes (a WidgetState whose string
value is not among the options: Streamlit 1.67 hands such a value to the page and to its callbacks), every text box
gets them typed in, and the session state the pages' callbacks copy (a picked node, a focus, a community path) is set
to them: ids of bob's nodes, relationships, chunks, communities and documents, numbers that are his runs' and
queries' ids, his workspace's name, and garbage. After each run: no exception, and no text of bob's workspace
anywhere in what the page sent to the browser. A deep link to his workspace, and one carrying Markdown, is refused in
one line whose Markdown is escaped.
"""

from __future__ import annotations

import re

import pytest
from sqlmodel import select
from streamlit.proto.WidgetStates_pb2 import WidgetState
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import element_tree as et

from core import access
from core.models import BuildRun, Community, CommunityVariant, Document, Node, QueryLog
from tests.conftest import build_workspace, write_tiny_docs
from tests.ui.conftest import APP, app_home

SECRET = "ZEPHYRQUARTZ"
VAULT_DOC = (f"The password for the data room is {SECRET}-7741. Marta Vell keeps the key of the Kelmouth data room, "
             f"and Orrin Vell signs every visit to the {SECRET} archive. Marta Vell reports to the Kelmouth board.")
PAGES = ["views/workspaces.py", "views/build.py", "views/hierarchy.py", "views/graph.py", "views/ask.py",
         "views/quality.py", "views/quality.py?Entity resolution", "views/quality.py?What-if", "views/evaluate.py"]
TAB_KEYS = {"views/quality.py": "q_tab"}  # a page whose lazy tabs draw only the open one: "page?tab" opens that tab
MARKDOWN = "[sign in again here](https://evil.example/login) ![x](https://evil.example/x.png) <b>bold</b>"
CHOICE = {"selectbox": et.Selectbox, "radio": et.Radio, "multiselect": et.Multiselect,
          "select_slider": et.SelectSlider}
STATE_KEYS = ("graph_pick", "graph_focus", "graph_open", "graph_drawn", "graph_match")


@pytest.fixture(scope="module")
def homes(tmp_path_factory, embedder):
    home = tmp_path_factory.mktemp("hostile")
    mine = write_tiny_docs(home / "mine_docs")
    vault = home / "vault_docs"
    vault.mkdir()
    (vault / "data_room.txt").write_text(VAULT_DOC * 3, encoding="utf-8")
    (vault / "board.txt").write_text(f"The Kelmouth board met Marta Vell about the {SECRET} archive twice.",
                                     encoding="utf-8")
    a = build_workspace(home, [mine], embedder, name="mine")
    b = build_workspace(home, [vault], embedder, name="vault", settings=a.settings)
    c = build_workspace(home, [mine], embedder, name="commons", settings=a.settings)
    access.adopt(a.store, a.ws, "alice@example.org")
    access.adopt(b.store, b.ws, "bob@example.org")
    access.adopt(c.store, c.ws, "strata-service", everyone="viewer")  # as the sample is shared
    # names alice's own workspace holds, each a Markdown link, image and tag: a question, a member, an evaluation, a
    # variant (every page below draws them; `_check` finds any drawn as Markdown)
    access.share(a.store, access.User("alice@example.org"), a.ws, MARKDOWN, "viewer")
    from core.evaluation.records import create_evaluation

    with a.store.session() as s:
        first_doc = s.exec(select(Document.id).where(Document.workspace_id == a.ws.id)).first()
        s.add(QueryLog(workspace_id=a.ws.id, question=MARKDOWN, strategy="naive", answer=MARKDOWN, result={},
                       ms=1.0, asked_by="alice@example.org"))
        s.add(CommunityVariant(workspace_id=a.ws.id, name=MARKDOWN, settings={}, metrics={}, partition={}))
        s.commit()
    create_evaluation(a.store, a.ws, [{"question": MARKDOWN, "gold": [{"key": "d", "docs": [first_doc]}]}], ["naive"],
                      name=MARKDOWN)
    with c.store.session() as s:  # bob asked the shared workspace about his vault
        s.add(QueryLog(workspace_id=c.ws.id, question=f"Is {SECRET} the password Marta Vell keeps?",
                       strategy="naive", answer="", result={}, ms=1.0, asked_by="bob@example.org"))
        s.commit()
    with b.store.session() as s:
        ids: list[str] = []
        for kind in ("entity", "relationship", "chunk", "statement"):
            ids += list(s.exec(select(Node.id).where(Node.workspace_id == b.ws.id, Node.kind == kind)
                               .order_by(Node.id).limit(3)))
        ids += list(s.exec(select(Community.id).where(Community.workspace_id == b.ws.id).limit(3)))
        ids += list(s.exec(select(Document.id).where(Document.workspace_id == b.ws.id)))
        runs = [str(r) for r in s.exec(select(BuildRun.id).where(BuildRun.workspace_id == b.ws.id))]
    assert len(ids) >= 8
    return home, ids, runs


def _text(node) -> str:
    """Everything the run sent the browser below `node`: every element's proto, as text."""
    out = []
    proto = getattr(node, "proto", None)
    if proto is not None:
        out.append(str(proto))
    for child in getattr(node, "children", {}).values():
        out.append(_text(child))
    return "\n".join(out)


def _session(home) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.user = {"is_logged_in": True, "email": "alice@example.org", "email_verified": True, "sub": "alice-sub",
               "iss": "http://127.0.0.1/idp"}
    at.query_params["workspace"] = "mine"  # her own workspace (the sidebar would open `commons` first)
    return at


DRAWN_AS_MARKDOWN = re.compile(r"(?<!\\)\]\((?:\\)?https|(?<!\\)<b>")  # a link or a tag that Markdown would draw


def _check(at: AppTest, what: str) -> None:
    assert not at.exception, (what, [e.value for e in at.exception])
    sent = _text(at._tree)
    assert SECRET not in sent and "Marta Vell" not in sent, f"bob's text reached alice's page: {what}"
    for kind in ("markdown", "caption", "error", "warning", "info", "success"):
        for el in getattr(at, kind):
            body = str(el.value)
            # an HTML block (a table the page writes) is not read as Markdown: there only a tag would be drawn
            found = re.search(r"(?<!\\)<b>", body) if body.lstrip().startswith("<") else DRAWN_AS_MARKDOWN.search(body)
            assert not found, f"{what}: drawn as Markdown: {body}"


@pytest.fixture
def app_env(homes, monkeypatch):
    home, _, _ = homes
    monkeypatch.setenv("STRATA_AUTH", "oidc")
    monkeypatch.setenv("STRATA_SAMPLE", "0")
    with app_home(home):
        yield


@pytest.fixture
def inject(monkeypatch):
    """widget id -> the WidgetState the next run sends for it (a hand-made websocket message's)."""
    sent: dict[str, WidgetState] = {}
    for cls in CHOICE.values():
        real = cls._widget_state

        def state(self, real=real):
            if self.id in sent:
                return sent.pop(self.id)
            try:
                return real.fget(self)
            except ValueError:  # AppTest's own serialisation of a value it never offered (a form's widget keeps it)
                ws = WidgetState()
                ws.id = self.id
                return ws

        monkeypatch.setattr(cls, "_widget_state", property(state))
    return sent


def _hostile_state(kind: str, wid: str, value: str) -> WidgetState:
    ws = WidgetState()
    ws.id = wid
    if kind in ("multiselect", "select_slider"):
        ws.string_array_value.data[:] = [value]
    else:
        ws.string_value = value
    return ws


@pytest.mark.parametrize("page", PAGES)
def test_a_stranger_sends_every_widget_values_it_never_offered(app_env, homes, inject, page):
    _, ids, runs = homes
    values = [*ids, *runs, "vault", "1", "2", "99999", "../../etc/passwd", "'; DROP TABLE node; --", MARKDOWN]
    at = _session(homes[0])
    at.run()
    page, _, tab = page.partition("?")
    if tab:
        at.session_state[TAB_KEYS[page]] = tab
    at.switch_page(page)
    at.run()
    _check(at, f"{page} {tab} opened")
    assert "vault" not in [o for s in at.sidebar.selectbox for o in s.options]
    tried = 0
    widgets = [(kind, w.id) for kind in CHOICE for w in getattr(at, kind)]
    for n, (kind, wid) in enumerate(widgets):
        for k in range(3):
            value = values[(3 * n + k) % len(values)]
            if not any(w.id == wid for w in getattr(at, kind)):
                break  # an earlier value changed the page: this widget is gone
            inject[wid] = _hostile_state(kind, wid, value)
            at.run()
            tried += 1
            _check(at, f"{page}: {kind} {wid} = {value!r}")
    boxes = [w.key or w.label for w in at.text_input] + [w.key or w.label for w in at.text_area]
    for n, box in enumerate(boxes):
        for k in range(2):
            found = [w for w in [*at.text_input, *at.text_area] if (w.key or w.label) == box]
            if not found:
                break
            found[0].set_value(values[(2 * n + k) % len(values)])
            at.run()
            tried += 1
            _check(at, f"{page}: text {box}")
    for key in STATE_KEYS:  # what the pages' callbacks copy into session state
        at.session_state[key] = ids[0]
        at.run()
        tried += 1
        _check(at, f"{page}: session state {key}")
    assert tried >= len(STATE_KEYS)


def test_a_deep_link_to_anothers_workspace_is_one_escaped_line(app_env, homes):
    for name in ("vault", MARKDOWN):
        at = _session(homes[0])
        at.query_params["workspace"] = name
        at.run()
        _check(at, f"link {name!r}")
        lines = [e.value for e in at.error]
        assert len(lines) == 1 and "you have access to" in lines[0], lines
        assert not re.search(r"(?<!\\)\]\(|(?<!\\)<b>", lines[0]), f"Markdown drawn as such: {lines[0]}"


def test_on_a_workspace_shared_with_everyone_each_reads_only_their_own_questions(app_env, homes):
    at = _session(homes[0])
    at.query_params["workspace"] = "commons"
    at.run()
    at.switch_page("views/ask.py")
    at.run()
    assert [t.value for t in at.title] == ["Ask"]
    _check(at, "the Ask page of a workspace shared with everyone")
