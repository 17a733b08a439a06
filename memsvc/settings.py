"""The one place that reads the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LocalSettings", "AwsSettings"]


@dataclass(frozen=True)
class LocalSettings:
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    events_file: Path | None = None
    # Vectors a tenant holds before its wide-scope searches use the ANN graph; None ("off"): never.
    ann_threshold: int | None = 150_000
    workers: int = 1  # `memsvc serve --workers N`: the server's processes
    # An HTTP rerank endpoint (Cohere- or TEI-shaped, `adapters.local.http_rerank`) for tenants
    # that turn `rerank` on: memories' texts are sent there. None: no reranking.
    rerank_url: str | None = None
    rerank_api: str = "auto"  # auto | cohere | tei: the request shape the endpoint takes
    rerank_timeout_seconds: float = 2.0
    # An OpenAI-compatible chat endpoint (Ollama, vLLM, llama.cpp, LM Studio, OpenAI:
    # `adapters.local.openai_llm`) for learning from conversations, the same-fact judge and the
    # graph's extractor: conversations and memories' texts are sent there. None: the
    # deterministic ones. `llm_model` is required with it.
    llm_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout_seconds: float = 30.0
    # The local embedding model: e5-small or minilm; auto: the one the data dir's vectors were made
    # with, e5-small for a new data dir (`bootstrap.local_embedder`).
    local_embedder: str = "auto"
    # The console's loopback sign-in helper (`POST /console/sign-in`): off on a machine shared with
    # people who may not act as any user (docs/console.md).
    console_sign_in: bool = True

    @classmethod
    def from_env(cls) -> "LocalSettings":
        events_file = os.environ.get("MEMSVC_EVENTS_FILE")
        ann = os.environ.get("MEMSVC_ANN_THRESHOLD")
        llm_url, llm_model = os.environ.get("MEMSVC_LLM_URL") or None, os.environ.get("MEMSVC_LLM_MODEL") or None
        if llm_url and not llm_model:
            raise ValueError("MEMSVC_LLM_URL is set but MEMSVC_LLM_MODEL is not: name the model the endpoint runs")
        return cls(
            data_dir=Path(os.environ.get("MEMSVC_DATA_DIR", "~/.memsvc")).expanduser(),
            host=os.environ.get("MEMSVC_HOST", "127.0.0.1"),
            port=int(os.environ.get("MEMSVC_PORT", "8000")),
            events_file=Path(events_file).expanduser() if events_file else None,
            ann_threshold=cls.ann_threshold if ann is None else None if ann == "off" else int(ann),
            workers=int(os.environ.get("MEMSVC_WORKERS", "1")),
            rerank_url=os.environ.get("MEMSVC_RERANK_URL") or None,
            rerank_api=_one_of("MEMSVC_RERANK_API", ("auto", "cohere", "tei"), "auto"),
            rerank_timeout_seconds=float(os.environ.get("MEMSVC_RERANK_TIMEOUT_SECONDS", "2")),
            llm_url=llm_url,
            llm_model=llm_model,
            llm_api_key=os.environ.get("MEMSVC_LLM_API_KEY") or None,
            llm_timeout_seconds=float(os.environ.get("MEMSVC_LLM_TIMEOUT_SECONDS", "30")),
            local_embedder=_one_of("MEMSVC_LOCAL_EMBEDDER", ("auto", "e5-small", "minilm"), "auto"),
            console_sign_in=_one_of("MEMSVC_CONSOLE_SIGN_IN", ("on", "off"), "on") == "on",
        )

    def export(self) -> None:
        """Put the data dir and the events file in the environment, where the worker processes of
        `memsvc serve --workers N` (started afresh, not forked) read them back with `from_env`."""
        os.environ["MEMSVC_DATA_DIR"] = str(self.data_dir)
        os.environ["MEMSVC_WORKERS"] = str(self.workers)
        os.environ["MEMSVC_CONSOLE_SIGN_IN"] = "on" if self.console_sign_in else "off"
        if self.events_file is not None:
            os.environ["MEMSVC_EVENTS_FILE"] = str(self.events_file)
        else:
            os.environ.pop("MEMSVC_EVENTS_FILE", None)

    def request_threads(self) -> int:
        """Requests each server process runs at once: one per core across the `workers` processes,
        at least two in a lone process. More only contend for the GIL: with 16 threads, eight
        concurrent filter searches answered 258/s, fewer than one client's 445/s; one per core
        across two workers, 862/s (`python -m benchmarks.parallel_reads [--workers 2]`, 2 cores).
        Requests that only wait give their turn back, on more threads (`FairPool`)."""
        cores = os.cpu_count() or 1
        return max(2, cores) if self.workers == 1 else max(1, cores // self.workers)

    @staticmethod
    def one_blas_thread() -> None:
        """One BLAS thread per vector product, unless the user set their own (read when numpy
        loads, so call it before; worker processes inherit it). The server already runs requests
        side by side, and OpenBLAS's threads spinning for a 1 ms product took a core from them:
        a 10k x 384 product took 0.5 ms with one thread and 1.7 ms with two, under load."""
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@dataclass(frozen=True)
class AwsSettings:
    """What a Lambda function is configured with (every variable is set by the CDK stack)."""

    region: str
    table_name: str
    keyword_table_name: str  # the keyword index's own table (`DynamoKeywordIndex`)
    vector_bucket: str
    vector_index: str
    kms_key_id: str
    embedding_model_id: str = "amazon.titan-embed-text-v2:0"
    embedding_dimension: int = 1024
    embedding_concurrency: int = 8
    data_key_cache_seconds: float = 300.0
    event_bus_name: str = ""  # the timeline publishes here; empty: not published
    default_tenant: str | None = None  # for callers that name no tenant; None: they are refused
    metrics_namespace: str = "memsvc"  # seed 001's EMF metrics: CloudWatch namespace and `service` dimension
    metrics_service: str = "memsvc-api"
    remember_queue_url: str = ""  # the SQS queue of `remember` calls with `wait: false`
    extraction_model_id: str = "amazon.nova-micro-v1:0"  # the knowledge graph's entity extractor (Converse)
    rerank_model_id: str = "amazon.rerank-v1:0"  # search's rerank step, for tenants that turn it on
    memory_extraction_model_id: str = "amazon.nova-lite-v1:0"  # learning from conversations (Converse)
    export_kms_key_arns: tuple[str, ...] = ()  # the KMS keys exports may be sealed under (issue 26)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, region: str | None = None) -> "AwsSettings":
        """This process's environment, or a deployed function's (`env`, `region`: `memsvc aws-restore`)."""
        env = os.environ if env is None else env
        return cls(
            region=region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1",
            table_name=env["MEMSVC_TABLE_NAME"],
            keyword_table_name=env["MEMSVC_KEYWORD_TABLE_NAME"],
            vector_bucket=env["MEMSVC_VECTOR_BUCKET"],
            vector_index=env["MEMSVC_VECTOR_INDEX"],
            kms_key_id=env["MEMSVC_KMS_KEY_ID"],
            embedding_model_id=env.get("MEMSVC_EMBEDDING_MODEL_ID", "amazon.titan-embed-text-v2:0"),
            embedding_dimension=int(env.get("MEMSVC_EMBEDDING_DIMENSION", "1024")),
            embedding_concurrency=int(env.get("MEMSVC_EMBEDDING_CONCURRENCY", "8")),
            data_key_cache_seconds=float(env.get("MEMSVC_DATA_KEY_CACHE_SECONDS", "300")),
            event_bus_name=env.get("MEMSVC_EVENT_BUS_NAME", ""),
            default_tenant=env.get("MEMSVC_DEFAULT_TENANT") or None,
            metrics_namespace=env.get("POWERTOOLS_METRICS_NAMESPACE") or "memsvc",
            metrics_service=env.get("POWERTOOLS_SERVICE_NAME") or "memsvc-api",
            remember_queue_url=env.get("MEMSVC_REMEMBER_QUEUE_URL", ""),
            extraction_model_id=env.get("MEMSVC_EXTRACTION_MODEL_ID", "amazon.nova-micro-v1:0"),
            rerank_model_id=env.get("MEMSVC_RERANK_MODEL_ID", "amazon.rerank-v1:0"),
            memory_extraction_model_id=env.get("MEMSVC_MEMORY_EXTRACTION_MODEL_ID", "amazon.nova-lite-v1:0"),
            export_kms_key_arns=tuple(arn for arn in env.get("MEMSVC_EXPORT_KMS_KEY_ARNS", "").split(",") if arn),
        )


def _one_of(name: str, allowed: tuple[str, ...], default: str) -> str:
    """An environment setting that names one of `allowed`: a typo stops the server at start, never
    silently means the default."""
    value = os.environ.get(name, default)
    if value not in allowed:
        raise ValueError(f"{name} is {value!r}; it must be one of {', '.join(allowed)}")
    return value
