"""Citations per sentence, the offline best evidence and the evidence chain (core/explore/evidence.py, chain.py,
core/answer.py).

On the built sample, for every strategy: every sentence the context cites as [n] (what the model reads and the
offline answer quotes) occurs in the text of source n, every cited sentence of the offline answer too, and the best
evidence quotes its own document. By hand: a sentence is cited by the document that holds it (not by the first
ranked source behind its item), a sentence no retrieved document holds by none; the best evidence of a two-hop
question follows the name the first sentence holds to the sentence about it (the county seat, the husband's team)."""

from __future__ import annotations

import re

import pytest

from core.answer import cited_numbers, context_block
from core.backends.offline import OfflineBackend
from core.explore.evidence import Locator, Reading, best_evidence, cited_pieces, highlight, norm, sentences_of
from core.history import shown_answer
from core.retrieval.base import ContextItem, Retrieval, Source, strategy_names
from core.workspace import ask

QUESTIONS = ["Which university trained the engineer who designed the Halden Barrier's sluice gates?",
             "Who chairs the foundation that paid for the Carrow Gold field trials?"]
CITED = re.compile(r"^\[(\d+)\] ")


def _doc_texts(res, r: Retrieval) -> list[str]:
    docs = res.store.documents_by_id(res.ws_id, [s.document_id for s in r.sources])
    return [norm(docs[s.document_id].text) for s in r.sources]


def _holds(text: str, sentence: str) -> bool:
    return norm(sentence).rstrip("…").rstrip() in text


@pytest.fixture(scope="module")
def answered(sample_resources):
    """Every strategy's retrieval and offline answer of each question (nothing logged)."""
    return [(ask(sample_resources, OfflineBackend(), q, name, log=False)) for name in strategy_names()
            for q in QUESTIONS]


def test_every_cited_sentence_of_the_context_is_in_the_cited_document(sample_resources, answered):
    checked = 0
    for r, a in answered:
        texts = _doc_texts(sample_resources, r)
        titles = sorted({it.title for sec in r.sections.values() for it in sec}, key=len, reverse=True)
        for line in a.context.local + a.context.bridge + a.context.global_:
            m = CITED.match(line)
            if not m:
                continue
            body = line[m.end():]
            label = next((t for t in titles if body.startswith(f"{t}: ")), None)
            body = body[len(label) + 2:] if label is not None else body
            for sentence in sentences_of(body):
                assert _holds(texts[int(m.group(1)) - 1], sentence), (r.strategy, m.group(1), sentence)
                checked += 1
    assert checked > 100


def test_every_cited_sentence_of_the_offline_answer_is_in_the_cited_document(sample_resources, answered):
    cited = 0
    for r, a in answered:
        texts = _doc_texts(sample_resources, r)
        for line in a.text.splitlines():
            m = re.match(r"^(?:Local|Bridge|Global)(?: \(from “.*?”\))?: (.*?)(?: \[(\d+)\])?$", line)
            if m and m.group(2):
                assert _holds(texts[int(m.group(2)) - 1], m.group(1)), (r.strategy, line)
                cited += 1
        for e in r.trace["evidence"]:  # the best evidence quotes the document it cites
            assert e["cite"] and r.sources[e["cite"] - 1].document_id == e["document_id"], (r.strategy, e)
            assert _holds(texts[e["cite"] - 1], e["sentence"]), (r.strategy, e)
        assert r.trace["answered_by"] == "offline" and "evidence" in r.trace["timings_ms"]
    assert cited > len(answered)


def test_a_report_sentence_cites_the_document_that_holds_it():
    """A community report mixes sentences of several documents: each is cited by its own, not by the first ranked
    source behind the community (which cited "drafted first overall by the Pittsburgh Pirates" to Anna Benson)."""
    docs = {"anna": "Anna Benson is an American model. She is married to the pitcher Kris Benson.",
            "kris": "Kris Benson is an American former baseball pitcher. He was drafted first overall by the "
                    "Pittsburgh Pirates in 1996.",
            "tom": "Tom Benson bought the New Orleans Saints in 1985."}
    report = ContextItem("c1", "community", "Benson family", "She is married to the pitcher Kris Benson. He was "
                         "drafted first overall by the Pittsburgh Pirates in 1996. The Bensons rarely speak to the "
                         "press. Tom Benson bought the New Orleans Saints in 1985.", 1.0, 0, ["anna", "kris", "tom"])
    r = Retrieval("hirag", "What team was Anna Benson's husband on?")
    r.sections["global"] = [report]
    r.sources = [Source(d, None, d.title(), 1.0, []) for d in ("anna", "kris", "tom")]
    ctx = context_block(r, docs=docs)
    assert ctx.global_ == ["[1] Benson family: She is married to the pitcher Kris Benson.",
                           "[2] Benson family: He was drafted first overall by the Pittsburgh Pirates in 1996.",
                           "Benson family: The Bensons rarely speak to the press.",  # in no document: no citation
                           "[3] Benson family: Tom Benson bought the New Orleans Saints in 1985."]
    # without the texts only an item of one document is cited
    assert context_block(r).global_ == [f"Benson family: {report.text}"]
    text = OfflineBackend().answer(r.question, ctx)
    assert "Pittsburgh Pirates" not in text or "1996. [2]" in text


def test_cut_and_glued_sentences_are_found_and_unknown_ones_are_not():
    loc = Locator({"a": "The barrier opened in 2016. The six sluice gates of the barrier are rising sector gates. "
                        "Each gate spans 40 metres."}, ["a"])
    assert cited_pieces("Halden Barrier The six sluice gates of the barrier are rising sector gates.", loc) == [
        ("a", "The six sluice gates of the barrier are rising sector gates.")]  # a name glued on by a description
    assert cited_pieces("The six sluice gates of the barrier are rising…", loc) == [
        ("a", "The six sluice gates of the barrier are rising…")]
    assert cited_pieces("Each gate weighs 1,450 tonnes of steel.", loc) == [
        (None, "Each gate weighs 1,450 tonnes of steel.")]
    assert cited_pieces("Each gate spans 40 metres. Each gate spans 40 metres.", loc) == [
        ("a", "Each gate spans 40 metres.")]  # said once


def _retrieval(question: str, docs: dict[str, str]) -> tuple[Retrieval, Reading]:
    r = Retrieval("naive", question)
    r.sources = [Source(d, None, d, 1.0 / (1 + i), []) for i, d in enumerate(docs)]
    return r, Reading(docs=docs, sentences={d: sentences_of(t) for d, t in docs.items()})


def test_a_two_hop_question_is_followed_to_the_second_sentence():
    """Offline the answer to "the seat of the county where Van Hook Township is" stopped at the county: the county's
    name in the township's sentence now leads to the sentence that says its seat."""
    r, reading = _retrieval("What is the seat of the county where Van Hook Township is?", {
        "Van Hook Township": "Van Hook Township is a township in Mountrail County, North Dakota, United States. "
                             "Its population was 129 at the 2000 census.",
        "Mountrail County": "Mountrail County is a county in the U.S. state of North Dakota. As of the 2010 census, "
                            "the population was 7,673. Its county seat is Stanley.",
        "Lake County": "Lake County is a county in Minnesota. Its county seat is Two Harbors.",
    })
    first, second = best_evidence(r.question, r, reading)
    assert first.document_id == "Van Hook Township" and first.sentence.startswith("Van Hook Township is a township")
    assert second.sentence == "Its county seat is Stanley." and second.document_id == "Mountrail County"
    assert (second.hop, second.via, second.cite) == (2, "Mountrail County", 2)
    assert {"seat", "county"} <= set(second.words)


def test_the_second_hop_without_a_shared_word_takes_the_sentence_nearest_the_question():
    """"What team was Anna Benson's husband on?": no sentence of Kris Benson's page says "team"; the one nearest the
    question (the statements' cosine) is the second hop, not Tom Benson's football team of the same surname."""
    r, reading = _retrieval("What team was Anna Benson's husband on?", {
        "Anna Benson": "Anna Benson is an American former model. She is married to the baseball pitcher Kris Benson.",
        "Kris Benson": "Kris Benson is an American former professional baseball pitcher. He played for the "
                       "Pittsburgh Pirates and the New York Mets.",
        "Tom Benson": "Tom Benson was an American businessman. He owned the New Orleans Saints football team.",
    })
    reading.similarity = {norm(s): 0.2 for ss in reading.sentences.values() for s in ss}
    reading.similarity[norm("He played for the Pittsburgh Pirates and the New York Mets.")] = 0.55
    reading.similarity[norm("He owned the New Orleans Saints football team.")] = 0.45
    evidence = best_evidence(r.question, r, reading)
    assert [e.document_id for e in evidence] == ["Anna Benson", "Kris Benson"]
    assert evidence[0].sentence == "She is married to the baseball pitcher Kris Benson."
    assert "Pittsburgh Pirates" in evidence[1].sentence and evidence[1].via == "Kris Benson"


def test_no_evidence_without_a_word_of_the_question():
    r, reading = _retrieval("What is the airspeed of a swallow?", {"Kelmouth": "Kelmouth is a small harbour town."})
    assert best_evidence(r.question, r, reading) == []


def test_highlight_marks_the_question_words_only():
    runs = highlight("Its county seat is Stanley.", ["seat", "county"])
    assert "".join(t for t, _ in runs) == "Its county seat is Stanley."
    assert [t for t, hit in runs if hit] == ["county", "seat"]


def test_the_chain_goes_from_the_question_to_the_answer_through_the_bridge(answered):
    r, _ = next((r, a) for r, a in answered if r.strategy == "hirag" and r.question == QUESTIONS[0])
    chain = r.trace["chain"]
    ents = [n["label"] for n in chain["nodes"] if n["kind"] == "entity"]
    assert ents == ["Halden Barrier", "Amara Okafor", "University of Carrow"], chain
    docs = [n for n in chain["nodes"] if n["kind"] == "document"]
    assert docs and all(n["cite"] for n in docs) and len(chain["nodes"]) <= 6


def test_the_history_shows_the_best_evidence_and_the_cited_numbers(answered):
    r, a = answered[0]
    shown = shown_answer(a.text, r.to_dict())
    assert shown.startswith("Best evidence: " + r.trace["evidence"][0]["sentence"][:30])
    assert shown_answer("A model's answer [2].", {"trace": {"answered_by": "llama3.1:8b"}}) == "A model's answer [2]."
    assert cited_numbers("As [2] and [1] say, and [2] again; [9] is not a source.", 3) == [2, 1]


class _Model:
    """A model backend's answer step, written down: it answers citing source [2] (the retrieval itself runs
    offline, with `retrieve`, so only `answer` is a model's here)."""

    name, model = "fake", "fake-8b"

    def answer(self, question, context):
        self.context = context
        return "The University of Carrow [2]."

    def rate_points(self, question, material):
        return []

    def rerank(self, question, passages):
        return [0.0] * len(passages)

    def query_terms(self, question):
        raise NotImplementedError


def test_a_models_answer_is_explained_by_the_documents_it_cites(sample_resources):
    from core.answer import answer
    from core.retrieval.base import get_strategy

    r = get_strategy("hirag").retrieve(sample_resources, QUESTIONS[0])
    model = _Model()
    a = answer(model, r, None, sample_resources)
    assert a.text == "The University of Carrow [2]." and r.trace["answered_by"] == "fake-8b"
    assert r.trace["evidence"] and {e["document_id"] for e in r.trace["evidence"]} == {r.sources[1].document_id}
    # the model reads titles as they are, each sentence cited by the document that holds it
    texts = _doc_texts(sample_resources, r)
    checked = 0
    for line in model.context.local + model.context.global_:
        m = CITED.match(line)
        if not m:
            continue
        # a chunk's sentences, or an item's after its label ("Name — kind, Other: sentence."; HiRAG's summary
        # entities make labels of any length): every sentence is in the document the line cites
        body = line[m.end():]
        label_free = body.split(": ", 1)[1] if ": " in body else body
        doc = texts[int(m.group(1)) - 1]
        assert any(all(_holds(doc, s) for s in sentences_of(b)) for b in (body, label_free)), line
        checked += 1
    assert checked
