"""The `memsvc` command: serve, token, reindex, backup, restore, aws-restore, smoke, eval, mcp."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys
from pathlib import Path

from memsvc import transfer_cli
from memsvc.conversation_eval import MODES, QUESTION_KINDS
from memsvc.evaluation import KINDS, Thresholds
from memsvc.settings import LocalSettings

__all__ = ["main", "worker_server"]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["mcp"]:  # its options are the MCP server's own, parsed where it lives
        return _mcp(argv[1:])
    env = LocalSettings.from_env()
    parser = argparse.ArgumentParser(prog="memsvc", description="A memory service for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the whole service on this machine")
    serve.add_argument("--host", default=env.host)
    serve.add_argument("--port", type=int, default=env.port)
    serve.add_argument("--data-dir", type=Path, default=env.data_dir)
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument("--events-file", type=Path, default=env.events_file,
                       help="also append every timeline event to this file, one JSON line each "
                            "(EventBridge's envelope, no values)")
    serve.add_argument("--workers", type=int, default=1,
                       help="HTTP worker processes sharing the data dir (one Python process answers on one "
                            "core: its GIL); with more than 1, this process runs the indexer, the timeline "
                            "and the sweeper, and the workers answer requests")
    serve.add_argument("--no-console-sign-in", dest="console_sign_in", action="store_false",
                       default=env.console_sign_in,
                       help="turn off the console's loopback sign-in helper, which mints a token for any "
                            "user (also MEMSVC_CONSOLE_SIGN_IN=off); the console then takes pasted tokens only")

    token = sub.add_parser("token", help="print a bearer token the local server accepts")
    token.add_argument("--sub", required=True, help="the user id (JWT subject)")
    token.add_argument("--tenant", default=None, help="tenant id (default: 'default')")
    token.add_argument("--roles", default="", help="comma-separated roles, e.g. admin")
    for layer, plural in (("project", "projects"), ("team", "teams"), ("org", "orgs")):
        token.add_argument(f"--{plural}", default="",
                           help=f"comma-separated ids of the {layer} layers the user may use (claim {plural!r})")
    token.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds")
    token.add_argument("--data-dir", type=Path, default=env.data_dir)

    reindex = sub.add_parser("reindex", help="embed every item again, with the server stopped (after a change "
                                             "of MEMSVC_LOCAL_EMBEDDER)")
    reindex.add_argument("--data-dir", type=Path, default=env.data_dir)

    backup = sub.add_parser("backup", help="copy the data dir (every SQLite file and the keys) into a new "
                                           "directory, while the server runs")
    backup.add_argument("--data-dir", type=Path, default=env.data_dir)
    backup.add_argument("--to", type=Path, required=True, help="the backup directory to create")

    restore = sub.add_parser("restore", help="replace a data dir with a backup, with the server stopped")
    restore.add_argument("--from", dest="source", type=Path, required=True, help="the backup directory")
    restore.add_argument("--data-dir", type=Path, default=env.data_dir)
    restore.add_argument("--force", action="store_true", help="replace a data dir that is not empty")

    aws_restore = sub.add_parser("aws-restore", help="restore a deployment's tables to a point in time into new "
                                                     "tables and rebuild their indexes (the stack keeps running)")
    aws_restore.add_argument("--stack", required=True, help="the CloudFormation stack, e.g. memsvc-prod")
    aws_restore.add_argument("--to-time", required=True,
                             help="the time to restore to, RFC 3339 with its offset, e.g. 2026-11-27T09:30:00Z")
    aws_restore.add_argument("--region", required=True)
    aws_restore.add_argument("--suffix", default=None,
                             help="appended to the restored tables' and the new vector index's names "
                                  "(default: pitr-<the time, as digits>)")
    aws_restore.add_argument("--resume", action="store_true",
                             help="finish an earlier run with this suffix: each step does what it left")

    smoke = sub.add_parser("smoke", help="call every route family of a running deployment once, in a namespace "
                                         "of its own, and delete what it wrote (exit 1 if a step fails)")
    smoke.add_argument("--url", required=True, help="the API's base URL (on AWS: JwtApiUrl or IamApiUrl)")
    smoke_auth = smoke.add_mutually_exclusive_group(required=True)
    smoke_auth.add_argument("--token", help="a bearer token (JwtApiUrl, or memsvc serve's `memsvc token`)")
    smoke_auth.add_argument("--sigv4", action="store_true",
                            help="sign with SigV4 (IamApiUrl), credentials from the default AWS chain")
    smoke.add_argument("--region", default=None, help="SigV4's region (default: the URL's, else the AWS config's)")
    smoke.add_argument("--tenant", default=None, help="X-Tenant-Id, for --sigv4")
    smoke.add_argument("--user", default=None,
                       help="the user whose namespaces the run writes (default: the token's sub; memsvc-smoke "
                            "with --sigv4)")

    transfer_cli.add_commands(sub)  # export, import, convert

    evaluate = sub.add_parser("eval", help="measure retrieval quality against a golden dataset (exit 1 under "
                                           "the thresholds, 2 on errors)")
    evaluate.add_argument("--url", default=f"http://{env.host}:{env.port}", help="the server to measure")
    evaluate.add_argument("--serve", action="store_true",
                          help="start a throwaway local server (temporary data dir, free port) and measure it")
    evaluate.add_argument("--dataset", type=Path, default=Path("eval/memory_golden_dataset.json"))
    evaluate.add_argument("--check-dataset", action="store_true",
                          help="only validate the dataset and print its cases per kind and split")
    evaluate.add_argument("--data-dir", type=Path, default=env.data_dir,
                          help="the local server's data dir, whose key mints the two users' tokens")
    evaluate.add_argument("--tenant", default=None, help="tenant of the minted tokens")
    evaluate.add_argument("--token", default=None, help="bearer token of the measured user (a deployed URL)")
    evaluate.add_argument("--other-token", default=None,
                          help="bearer token of a second user, whose copies must never come back")
    evaluate.add_argument("--split", choices=["dev", "test", "all"], default="all")
    evaluate.add_argument("--extraction", action="store_true",
                          help="measure the local memory extractor on eval/extraction instead (in process, no "
                               "server; exit 1 under precision 0.8 or recall 0.6 on the test half)")
    evaluate.add_argument("--kinds", nargs="+", choices=list(dict.fromkeys(KINDS + QUESTION_KINDS)), default=[],
                          help="only these kinds of case (or of question, on a conversation dataset)")
    evaluate.add_argument("--cases", type=int, default=None,
                          help="only the first N cases after the filters (a conversation dataset: N conversations)")
    evaluate.add_argument("--limit", type=int, default=5, help="k: the search's limit")
    evaluate.add_argument("--mode", default=None, help="the search's mode (sent only when given)")
    evaluate.add_argument("--min-score", type=float, default=None, help="the search's min_score (sent only when given)")
    evaluate.add_argument("--token-budget", type=int, default=1000, help="tokens the returned contents must fit in")
    evaluate.add_argument("--min-recall", type=float, default=Thresholds.min_recall, help="search's R@k")
    evaluate.add_argument("--min-precision", type=float, default=Thresholds.min_precision,
                          help="recall's P@k after its cut (search's P@k has no cut: no threshold)")
    evaluate.add_argument("--min-cut-recall", type=float, default=Thresholds.min_cut_recall,
                          help="recall's R@k after its cut")
    evaluate.add_argument("--haystack", type=int, default=0,
                          help="also write N memories of other cases into each case's namespace")
    evaluate.add_argument("--concurrency", type=int, default=4,
                          help="parallel writes while seeding (the golden set's queries run one at a time; a "
                               "conversation dataset's run this many at once too)")
    evaluate.add_argument("--cleanup", action=argparse.BooleanOptionalAction, default=True,
                          help="delete the run's memories afterwards")
    evaluate.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    evaluate.add_argument("--modes", nargs="+", choices=MODES, default=[],
                          help="a conversation dataset: the search modes compared side by side (default: all)")
    evaluate.add_argument("--as-messages", action="store_true",
                          help="a conversation dataset: write each turn as a session message, not a memory")
    evaluate.add_argument("--mlflow", action="store_true", help="also log to MLflow (the mlflow extra)")
    evaluate.add_argument("--mlflow-experiment", default="memsvc-eval")

    sub.add_parser("mcp", add_help=False,
                   help="serve query_memory, remember, get_memory and forget over MCP on stdio, for an agent host "
                        "(MEMORY_SERVICE_URL, MEMORY_SERVICE_TOKEN; `memsvc mcp --help` for the options)")

    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    if args.command == "eval":
        return _eval(args)
    if args.command == "reindex":
        return _reindex(args, env)
    if args.command == "backup":
        return _backup(args)
    if args.command == "restore":
        return _restore(args)
    if args.command == "smoke":
        return _smoke(args)
    if args.command == "aws-restore":
        return _aws_restore(args)
    if args.command in ("export", "import", "convert"):
        return transfer_cli.run(args)
    return _token(args)


_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class _WithExtras(logging.Formatter):
    """The line, then the fields a log call passed as `extra` (`key=value`), as the JSON logs on
    Lambda carry them: a recall's request id, query hash, result count and latency, say. Log calls
    pass only fields that hold no value or secret (docs/security-and-encryption.md)."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # before any traceback
        line = super().formatMessage(record)
        extras = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS and not k.startswith("_")}
        return line + "".join(f" {k}={v}" for k, v in extras.items()) if extras else line


def _serve(args: argparse.Namespace) -> int:
    from memsvc.adapters.local.data_dir_lock import DataDirBusy, data_dir_lock

    LocalSettings.one_blas_thread()
    handler = logging.StreamHandler()
    handler.setFormatter(_WithExtras("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    if args.workers < 1:
        print("memsvc: --workers must be at least 1", file=sys.stderr)
        return 2
    try:
        with data_dir_lock(args.data_dir, exclusive=False):  # no `memsvc reindex` meanwhile
            return _serve_data_dir(args)
    except DataDirBusy as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 1


def _serve_data_dir(args: argparse.Namespace) -> int:
    import uvicorn

    from memsvc.adapters.local.openai_llm import local_language_model
    from memsvc.bootstrap import build_local, local_reranker
    from memsvc.console_assets import console_site, docs_site
    from memsvc.local_server import EnvelopeHttpProtocol, LocalServer

    # Built before any worker starts: the files, keys and schemas exist once they do.
    env = LocalSettings.from_env()
    app = build_local(args.data_dir, events_file=args.events_file, ann_threshold=env.ann_threshold,
                      reranker=local_reranker(env), llm=local_language_model(env), model=env.local_embedder)
    print(f"memsvc: data in {args.data_dir}, embedder {app.embedder.model_id}", file=sys.stderr)
    print(f"memsvc: listening on http://{args.host}:{args.port}  (try GET /health)"
          + (f", {args.workers} worker processes" if args.workers > 1 else ""), file=sys.stderr)
    print(f"memsvc: console: http://{args.host}:{args.port}/console/", file=sys.stderr)
    print(f"memsvc: API reference: http://{args.host}:{args.port}/docs", file=sys.stderr)
    try:
        if args.workers == 1:
            # No WebSocket routes: an upgrade request is answered as the plain HTTP request it also is
            uvicorn.run(LocalServer(app.router, app.issuer, threads=LocalSettings(args.data_dir).request_threads(),
                                    on_shutdown=app.close, console=console_site(), docs=docs_site(),
                                    console_sign_in=args.console_sign_in),
                        host=args.host, port=args.port, http=EnvelopeHttpProtocol, ws="none",
                        log_level=args.log_level, access_log=args.log_level == "debug", lifespan="on")
        else:
            LocalSettings(data_dir=args.data_dir, events_file=args.events_file, workers=args.workers,
                          console_sign_in=args.console_sign_in).export()
            _serve_workers(uvicorn.Config("memsvc.cli:worker_server", factory=True, workers=args.workers,
                                          http="memsvc.local_server:EnvelopeHttpProtocol", ws="none",
                                          host=args.host, port=args.port, log_level=args.log_level,
                                          access_log=args.log_level == "debug", lifespan="on"))
    finally:
        app.close()
    return 0


def _serve_workers(config) -> None:
    """`uvicorn.run(workers=N)`, but with a listening socket that says it is TCP: uvicorn's says
    protocol 0, the workers' copies and their connections inherit that, and asyncio then leaves
    Nagle's algorithm on (`TCP_NODELAY` only for `IPPROTO_TCP`), which costs every keep-alive
    request a delayed ACK: 40 ms."""
    import socket

    from uvicorn.supervisors import Multiprocess

    bound = config.bind_socket()
    sock = socket.socket(bound.family, bound.type, socket.IPPROTO_TCP, fileno=bound.detach())
    sock.set_inheritable(True)
    try:
        Multiprocess(config, sockets=[sock]).run()
    except KeyboardInterrupt:
        pass


def worker_server():
    """One worker process of `memsvc serve --workers N`: it answers requests on the data dir and
    flushes its recall access counts; the background work stays with the process that started it
    (which the workers' writes reach within its poll interval, 0.5 s)."""
    from memsvc.adapters.local.openai_llm import local_language_model
    from memsvc.bootstrap import build_local, local_reranker
    from memsvc.console_assets import console_site, docs_site
    from memsvc.local_server import LocalServer

    env = LocalSettings.from_env()
    app = build_local(env.data_dir, events_file=env.events_file, start_workers=False, ann_threshold=env.ann_threshold,
                      reranker=local_reranker(env), llm=local_language_model(env), model=env.local_embedder)
    app.accesses.start()
    return LocalServer(app.router, app.issuer, threads=env.request_threads(), on_shutdown=app.close,
                       console=console_site(), docs=docs_site(), console_sign_in=env.console_sign_in)


def _reindex(args: argparse.Namespace, env: LocalSettings) -> int:
    from memsvc.adapters.local.data_dir_lock import DataDirBusy
    from memsvc.local_reindex import reindex

    try:
        report = reindex(args.data_dir, env.local_embedder)
    except DataDirBusy as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 1
    print(f"memsvc: {report.indexed} items embedded with {report.model_id}"
          + (f", {report.quarantined} quarantined" if report.quarantined else "")
          + (f"; {report.left} left pending (a batch failed): run it again" if report.left else ""))
    return 1 if report.left else 0


def _backup(args: argparse.Namespace) -> int:
    from memsvc.local_backup import BackupError, backup

    try:
        manifest = backup(args.data_dir, args.to)
    except BackupError as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 1
    print(f"memsvc: backed up {len(manifest.files)} files ({manifest.total_bytes / 1e6:.1f} MB) of {args.data_dir} "
          f"to {args.to}")
    return 0


def _restore(args: argparse.Namespace) -> int:
    from memsvc.adapters.local.data_dir_lock import DataDirBusy
    from memsvc.local_backup import BackupError, restore

    try:
        manifest = restore(args.source, args.data_dir, force=args.force)
    except (BackupError, DataDirBusy) as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 1
    print(f"memsvc: restored {len(manifest.files)} files of the backup made {manifest.created_at} into "
          f"{args.data_dir} (vectors of {manifest.embedder_model_id or 'no model yet'})")
    return 0


def _aws_restore(args: argparse.Namespace) -> int:
    from memsvc.adapters.aws.point_in_time import PointInTimeError
    from memsvc.aws_restore import default_suffix, recover_stack
    from memsvc.core.timestamps import parse_rfc3339

    try:
        at = parse_rfc3339(args.to_time)
    except (ValueError, OverflowError):
        print(f"memsvc: --to-time {args.to_time!r} is not an RFC 3339 time with its offset", file=sys.stderr)
        return 2
    suffix = args.suffix or default_suffix(at)
    try:
        report = recover_stack(args.stack, args.region, at, suffix=suffix, resume=args.resume,
                               progress=lambda line: print(f"memsvc: {line}", file=sys.stderr))
    except PointInTimeError as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 1
    restored = report.settings
    print(f"memsvc: {report.indexed} of {report.items} live items indexed"
          + (f", {report.quarantined} quarantined" if report.quarantined else "")
          + (f"; {report.failed} failed: run again with --suffix {suffix} --resume" if report.failed else ""))
    print("Cut over by pointing the stack's functions at (docs/backup-and-restore.md, \"Cut-over\"):")
    print(f"  MEMSVC_TABLE_NAME={restored.table_name}\n  MEMSVC_KEYWORD_TABLE_NAME={restored.keyword_table_name}\n"
          f"  MEMSVC_VECTOR_INDEX={restored.vector_index}")
    return 1 if report.failed else 0


def _smoke(args: argparse.Namespace) -> int:
    from memsvc.smoke import Bearer, SmokeError, format_table, run_smoke, sigv4, user_of_token

    try:
        auth = sigv4(args.url, args.region) if args.sigv4 else Bearer(args.token)
        user = args.user or ("memsvc-smoke" if args.sigv4 else user_of_token(args.token))
    except SmokeError as exc:
        print(f"memsvc: {exc}", file=sys.stderr)
        return 2
    results = run_smoke(args.url, auth, user=user, tenant=args.tenant)
    print(format_table(results))
    return 1 if any(r.status == "fail" for r in results) else 0


def _eval(args: argparse.Namespace) -> int:
    if args.extraction:  # imported here: it loads the embedding model
        from memsvc.extraction_eval import main as extraction_main

        return extraction_main(args.split)
    from memsvc.evaluation import Command, EvalOptions, main

    return main(Command(
        url=args.url, dataset=args.dataset, data_dir=args.data_dir, token=args.token, other_token=args.other_token,
        tenant=args.tenant, serve=args.serve, split=args.split, kinds=tuple(args.kinds), count=args.cases,
        options=EvalOptions(limit=args.limit, mode=args.mode, min_score=args.min_score,
                            token_budget=args.token_budget, cleanup=args.cleanup, concurrency=args.concurrency,
                            haystack=args.haystack),
        thresholds=Thresholds(min_recall=args.min_recall, min_precision=args.min_precision,
                              min_cut_recall=args.min_cut_recall),
        report=args.report, mlflow_experiment=args.mlflow_experiment if args.mlflow else None,
        check_dataset=args.check_dataset, modes=tuple(args.modes), as_messages=args.as_messages,
    ))


def _mcp(argv: list[str]) -> int:
    # The MCP server is the client package's (memsvc_client.mcp_server), so an agent host can run it
    # with `pip install 'memsvc-client[mcp]'` alone. The service never imports the client (house rule,
    # tests/unit/test_layers.py): this command hands the process over to it.
    if importlib.util.find_spec("memsvc_client") is None:
        print("memsvc mcp needs the client with its mcp extra: pip install './clients/python[mcp]'", file=sys.stderr)
        return 2
    os.execv(sys.executable, [sys.executable, "-m", "memsvc_client.mcp_server", *argv])


def _token(args: argparse.Namespace) -> int:
    from memsvc.adapters.local.issuer import LocalIssuer

    def comma_list(text: str) -> list[str]:
        return [i.strip() for i in text.split(",") if i.strip()]

    print(LocalIssuer(args.data_dir / "keys").mint(sub=args.sub, tenant=args.tenant, roles=comma_list(args.roles),
                                                  ttl_seconds=args.ttl, projects=comma_list(args.projects),
                                                  teams=comma_list(args.teams), orgs=comma_list(args.orgs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
