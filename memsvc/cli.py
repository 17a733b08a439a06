"""The `memsvc` command: serve, token."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from memsvc.settings import LocalSettings

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
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

    token = sub.add_parser("token", help="print a bearer token the local server accepts")
    token.add_argument("--sub", required=True, help="the user id (JWT subject)")
    token.add_argument("--tenant", default=None, help="tenant id (default: 'default')")
    token.add_argument("--roles", default="", help="comma-separated roles, e.g. admin")
    token.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds")
    token.add_argument("--data-dir", type=Path, default=env.data_dir)

    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    return _token(args)


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from memsvc.bootstrap import build_local
    from memsvc.local_server import LocalServer

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = build_local(args.data_dir, events_file=args.events_file)
    print(f"memsvc: data in {args.data_dir}, embedder {app.embedder.model_id}", file=sys.stderr)
    print(f"memsvc: listening on http://{args.host}:{args.port}  (try GET /health)", file=sys.stderr)
    try:
        uvicorn.run(LocalServer(app.router, app.issuer, on_shutdown=app.close), host=args.host, port=args.port,
                    log_level=args.log_level, access_log=args.log_level == "debug", lifespan="on")
    finally:
        app.close()
    return 0


def _token(args: argparse.Namespace) -> int:
    from memsvc.adapters.local.issuer import LocalIssuer

    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    print(LocalIssuer(args.data_dir / "keys").mint(sub=args.sub, tenant=args.tenant, roles=roles,
                                                  ttl_seconds=args.ttl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
