"""The app's query resources (ui/resources.py): one Resources per (workspace, build version), shared by every
session; a new build version opens a new one whose derived structures are built afresh."""

from __future__ import annotations

from core.retrieval.base import HETERO, VIEW
from core.retrieval.hlg.graph import LEXICON, lexicon
from core.retrieval.noderag import NodeRAGStrategy
from tests.ui.conftest import app_home


def test_a_new_build_version_gets_fresh_caches(sample_built, monkeypatch):
    from ui import resources as R

    monkeypatch.setattr(R, "embedder", lambda kind, runtime="": sample_built.embedder)  # the session's model, not a second one
    with app_home(sample_built.settings.storage.home):
        ws = sample_built.store.require_workspace("sample")
        v = R.ws_key(ws)
        res = R.resources("sample", v)
        assert res.cache.peek(VIEW) is not None  # loaded with the resources, not on the first question
        walk, lx = NodeRAGStrategy.walk(res), lexicon(res)
        assert R.resources("sample", v) is res  # another session, the same build: everything shared
        assert NodeRAGStrategy.walk(R.resources("sample", v)) is walk

        ws.build_version += 1  # a new build of the same workspace
        new = R.resources("sample", R.ws_key(ws))
        assert new is not res and new.cache is not res.cache
        assert new.cache.peek(LEXICON) is None and new.cache.peek(HETERO) is None
        assert NodeRAGStrategy.walk(new) is not walk and lexicon(new) is not lx
        assert new.view is not res.view
