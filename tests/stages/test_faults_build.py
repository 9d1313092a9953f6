"""A build through a model server of which 30 % of the chat replies fail (issue 23): the bundled sample built
through FakeOllama with injected faults (tests/fake_ollama.py `Faults`: HTTP 500, 503 "overloaded" with a
Retry-After, replies that are not JSON or are nested 100,000 deep, and stalls past the client's timeout) finishes,
and equals the build of the same corpus through the same fake without faults (its replies are deterministic): the
faults cost retries, never a unit of the build."""

from __future__ import annotations

import pytest
from sqlmodel import select

from core.config import Settings
from core.models import LLMCall
from tests.conftest import SAMPLE_DIR, build_workspace
from tests.fake_ollama import FakeOllama, Faults
from tests.stages.test_pipeline import snapshot
from tests.stores import configure

pytestmark = pytest.mark.timeout(300)


def _build(embedder, home, faults: Faults | None, timeout_s: float = 5.0):
    """The sample built through a FakeOllama with `faults`: its snapshot, its cached calls, and the fake."""
    s = Settings()
    s.storage.home = home
    s = configure(s)
    s.backend.kind = "ollama"
    s.backend.timeout_s, s.backend.backoff_s = timeout_s, 0.01  # and the default retries (12): what a user gets
    with FakeOllama() as fake:
        fake.faults = faults
        s.backend.ollama_host = fake.url
        b = build_workspace(home, [SAMPLE_DIR], embedder, name="sample", settings=s)
        with b.store.session() as sess:
            calls = len(sess.exec(select(LLMCall)).all())
        return snapshot(b.store, b.ws.id), calls, fake


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory, embedder):
    """The sample built through the fake without faults (once for the module's tests)."""
    return _build(embedder, tmp_path_factory.mktemp("fault_free"), None)


@pytest.mark.parametrize(("kinds", "timeout_s"), [
    (("500", "503", "malformed", "deep"), 5.0),
    (("500", "503", "malformed", "deep", "stall"), 1.0),  # a stall (2 s of silence) is one timed-out attempt
], ids=["errors", "errors-and-stalls"])
def test_sample_build_through_a_server_failing_30_percent_equals_a_fault_free_one(tmp_path, embedder, fault_free,
                                                                                   kinds, timeout_s):
    ref, ref_calls, ref_fake = fault_free
    faults = Faults(share=0.3, seed=23, kinds=kinds, stall_s=2.0)
    got, calls, fake = _build(embedder, tmp_path / "h", faults, timeout_s)
    assert set(fake.injected) == set(faults.kinds), fake.injected
    injected = sum(fake.injected.values())
    assert injected >= 0.2 * fake.chat_requests  # about 30 % of the requests got a fault (~100 of ~380)
    # every fault cost one more request and no call was given up (with a 1 s timeout, a reply slowed by a busy
    # machine may cost one more)
    if "stall" in kinds:
        assert fake.chat_requests >= ref_fake.chat_requests + injected
    else:
        assert fake.chat_requests == ref_fake.chat_requests + injected
    assert calls == ref_calls
    assert got["counts"] == ref["counts"]
    assert got == ref  # the same nodes, edges with their weights, and communities
