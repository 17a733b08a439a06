import threading

import numpy as np
import pytest

from memsvc.adapters.local import embedder as embedder_module
from memsvc.adapters.local.embedder import MiniLMEmbedder

pytestmark = pytest.mark.slow

SENTENCES = [
    "Python uses indentation for blocks",
    "whitespace-sensitive syntax",
    "The cat sat on the mat",
    "How do I reset my password?",
    "The meeting was moved to Friday afternoon because the client could not attend on Thursday",
    "ok",
    "",
    "Émoji 🎉, ünïcode and テキスト in one memory",
]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_identity_and_dimension(embedder):
    assert embedder.model_id == "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
    assert embedder.dimension == 384
    vectors = embedder.embed(SENTENCES)
    assert len(vectors) == len(SENTENCES)
    assert all(len(v) == 384 and all(type(x) is float for x in v) for v in vectors)


def test_empty_input(embedder):
    assert embedder.embed([]) == []
    assert embedder.embed_array([]).shape == (0, 384)


def test_embed_array_matches_embed(embedder):
    array = embedder.embed_array(SENTENCES)
    assert array.dtype == np.float32 and array.shape == (len(SENTENCES), 384)
    np.testing.assert_array_equal(array, np.array(embedder.embed(SENTENCES), dtype=np.float32))


def test_unit_length(embedder):
    norms = np.linalg.norm(embedder.embed_array(SENTENCES), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


def test_deterministic(embedder):
    np.testing.assert_array_equal(embedder.embed_array(SENTENCES), embedder.embed_array(SENTENCES))


def test_batch_equals_one_by_one(embedder):
    batched = embedder.embed_array(SENTENCES)
    single = np.stack([embedder.embed_array([text])[0] for text in SENTENCES])
    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_order_preserved_with_mixed_lengths():
    small_batches = MiniLMEmbedder(batch_size=3)  # several batches, each sorted by length
    texts = [("word " * n).strip() for n in (3, 40, 1, 17, 0, 90, 8, 2, 55, 5)]
    expected = np.stack([small_batches.embed_array([t])[0] for t in texts])
    np.testing.assert_allclose(small_batches.embed_array(texts), expected, atol=1e-5)
    np.testing.assert_allclose(small_batches.embed_array(texts[::-1]), expected[::-1], atol=1e-5)


@pytest.mark.parametrize(
    "anchor, related, unrelated",
    [
        ("Python uses indentation for blocks", "whitespace-sensitive syntax", "The cat sat on the mat"),
        ("How do I reset my password?", "I forgot my login credentials", "The stock market fell sharply today"),
        (
            "The user prefers dark mode in the editor",
            "They like a dark colour theme",
            "Quarterly revenue grew by ten percent",
        ),
    ],
)
def test_semantic_sanity(embedder, anchor, related, unrelated):
    a, r, u = embedder.embed_array([anchor, related, unrelated])
    assert float(a @ r) > float(a @ u) + 0.1


def test_long_text_is_truncated(embedder):
    long_text = ("memory " * 2000)[:10_000]
    (vector,) = embedder.embed_array([long_text])
    assert vector.shape == (384,)
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
    # Only the first 256 tokens count: what follows them changes nothing.
    (same,) = embedder.embed_array([long_text + " completely different ending"])
    np.testing.assert_allclose(vector, same, atol=1e-6)


def test_uses_256_tokens_not_the_tokenizer_files_128(embedder):
    # ~148 and ~232 tokens: identical if cut at 128, different if cut at 256.
    words = [f"w{i}" for i in range(100)]
    shorter, longer = embedder.embed_array([" ".join(words[:70]), " ".join(words)])
    assert float(shorter @ longer) < 0.999


@pytest.mark.parametrize("constant, file_name", [("MODEL_SHA256", "model.onnx"), ("TOKENIZER_SHA256", "tokenizer.json")])
def test_sha256_mismatch_raises(monkeypatch, constant, file_name):
    expected = "0" * 64
    monkeypatch.setattr(embedder_module, constant, expected)
    with pytest.raises(RuntimeError, match="sha256 mismatch") as info:
        MiniLMEmbedder()
    message = str(info.value)
    assert file_name in message and expected in message


def test_thread_safety(embedder):
    groups = [[f"thread {t} memory {i}: " + "detail " * (i * 7 % 23) for i in range(24)] for t in range(4)]
    sequential = [embedder.embed_array(texts) for texts in groups]
    results: list[list[np.ndarray]] = [[] for _ in groups]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(groups))

    def work(t: int) -> None:
        try:
            barrier.wait()
            for _ in range(3):
                results[t].append(embedder.embed_array(groups[t]))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(groups))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert not errors
    for t, expected in enumerate(sequential):
        assert len(results[t]) == 3
        for got in results[t]:
            np.testing.assert_allclose(got, expected, atol=1e-5)


def test_a_lone_text_from_a_waiting_caller_runs_on_the_lone_text_session_and_background_work_never_does():
    from memsvc.adapters.local.low_priority_pool import low_priority_pool

    model = MiniLMEmbedder(lone_text_threads=2)
    used: list[str] = []

    class Spy:
        def __init__(self, name, inner):
            self.name, self.inner = name, inner

        def run(self, *args, **kwargs):
            used.append(self.name)
            return self.inner.run(*args, **kwargs)

    model._session, model._lone_session = Spy("batch", model._session), Spy("lone", model._lone_session)
    lone = model.embed_array([SENTENCES[0]])
    pair = model.embed_array(SENTENCES[:2])
    with low_priority_pool(1, name="test-background") as pool:
        background = pool.submit(model.embed_array, [SENTENCES[0]]).result()
    assert used == ["lone", "batch", "batch"]
    np.testing.assert_allclose(lone[0], pair[0], atol=1e-5)  # the same vector whichever session
    np.testing.assert_allclose(lone, background, atol=1e-5)
    single = MiniLMEmbedder()  # without lone_text_threads: one session for every call
    assert single._lone_session is single._session
