"""The console's and the API reference's files as `memsvc serve` answers them (docs/console.md).

Pure answers in the router's response shape (`statusCode`, `headers`, `body`, here bytes): which
file a request path names, refusing anything that is not a plain relative name inside the site's
directories; its content type and cache rule; the security headers every answer carries; the
console's generated `config.json`; and the checks of the loopback sign-in helper, which only a
loopback client with a loopback `Host` (and no foreign `Origin`) reaches.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsvc.api.identity import is_tenant_id
from memsvc.core import strict_json
from memsvc.core.errors import InvalidArgument, echoed

__all__ = [
    "AssetRoot",
    "StaticSite",
    "SignIn",
    "CONSOLE_CSP",
    "SIGN_IN_PATH",
    "console_site",
    "docs_site",
    "config_json",
    "parse_sign_in",
    "sign_in_reachable",
    "loopback_request",
    "error_response",
]

# For /docs too: Swagger UI 5 sets its styles through the DOM, which `style-src 'self'` allows.
CONSOLE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
               "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

SIGN_IN_PATH = "/console/sign-in"
MAX_PATH_CHARS = 200
MAX_METHOD_CHARS = 16
MAX_SIGN_IN_BYTES = 16 * 1024
MAX_SUB_CHARS = 256
MAX_LIST_ITEMS = 32
SIGN_IN_LISTS = ("roles", "projects", "teams", "orgs")
# A reverse proxy on this machine connects from loopback and may pass `Host: 127.0.0.1` on; these
# are what proxies add to say whom they carry.
FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip",
                      "via")

# A relative file name of at most 8 segments, none empty or starting with a dot: no `..`, no
# hidden files, no percent-encoding, backslash, NUL or absolute path can match.
_FILE_NAME = re.compile(r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]*/){0,7}[A-Za-z0-9_-][A-Za-z0-9._-]*")
_LIST_ITEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}")
_LOOPBACK_HOST = re.compile(r"(?:localhost|127\.0\.0\.1|\[::1\])(?::[0-9]{1,5})?", re.IGNORECASE)

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".txt": "text/plain; charset=utf-8",
}
# A page is revalidated on every load so a new build shows at once; the other files' names are
# not content-hashed, so they are cached only briefly.
SHORT_CACHE = "max-age=300"


@dataclass(frozen=True)
class AssetRoot:
    """A directory a site serves from; `names`, if given, the only files of it that are served."""

    path: Path
    names: frozenset[str] | None = None


@dataclass(frozen=True)
class StaticSite:
    """The files under `prefix` (`/console`, `/docs`), looked up in `roots` in order."""

    prefix: str
    roots: tuple[AssetRoot, ...]

    def owns(self, raw_path: str) -> bool:
        return raw_path == self.prefix or raw_path.startswith(self.prefix + "/")

    def relative(self, raw_path: str) -> str:
        """The file name a path under `prefix/` asks for: `index.html` for the directory itself."""
        return raw_path[len(self.prefix) + 1:] or "index.html"

    def find(self, relative: str) -> Path | None:
        """The file `relative` names, or None if it is not a plain name of a file of a known type
        inside one of the roots (a symlink leading out of its root is not inside)."""
        if len(relative) > MAX_PATH_CHARS or not _FILE_NAME.fullmatch(relative):
            return None
        for root in self.roots:
            if root.names is not None and relative not in root.names:
                continue
            base = root.path.resolve()
            candidate = (base / relative).resolve()
            if candidate.is_relative_to(base) and candidate.suffix in CONTENT_TYPES and candidate.is_file():
                return candidate
        return None

    def headers(self) -> dict[str, str]:
        return {
            "content-security-policy": CONSOLE_CSP,
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
        }

    def file_response(self, path: Path) -> dict[str, Any]:
        cache = "no-cache" if path.suffix == ".html" else SHORT_CACHE
        return {"statusCode": 200, "body": path.read_bytes(),
                "headers": {**self.headers(), "content-type": CONTENT_TYPES[path.suffix], "cache-control": cache}}

    def redirect_to_directory(self) -> dict[str, Any]:
        return {"statusCode": 308, "body": b"", "headers": {**self.headers(), "location": self.prefix + "/"}}

    def not_found(self) -> dict[str, Any]:
        return {**error_response(404, "NOT_FOUND", "no such file"), "headers": self._error_headers()}

    def method_not_allowed(self, method: str) -> dict[str, Any]:
        allowed = ["GET", "HEAD"]
        response = error_response(405, "METHOD_NOT_ALLOWED", f"method {echoed(method, MAX_METHOD_CHARS)} not allowed here",
                                  {"allowed": allowed})
        return {**response, "headers": {**self._error_headers(), "allow": ", ".join(allowed)}}

    def json(self, status: int, body: Any, *, cache: str = "no-store") -> dict[str, Any]:
        return {**_json_response(status, body), "headers": {**self._error_headers(), "cache-control": cache}}

    def _error_headers(self) -> dict[str, str]:
        return {**self.headers(), "content-type": "application/json", "cache-control": "no-store"}


def console_site(static_dir: Path | None = None) -> StaticSite:
    """The console, from the built assets the package ships (`memsvc/console/static/`)."""
    return StaticSite("/console", (AssetRoot(static_dir or Path(__file__).parent / "console" / "static"),))


def docs_site() -> StaticSite:
    """The API reference: our page and initializer, then Swagger UI's own files from its package."""
    from swagger_ui_bundle import swagger_ui_path

    swagger = frozenset({"swagger-ui-bundle.js", "swagger-ui.css", "index.css", "favicon-32x32.png",
                         "favicon-16x16.png"})
    return StaticSite("/docs", (AssetRoot(Path(__file__).parent / "api_reference"),
                                AssetRoot(Path(str(swagger_ui_path)), swagger)))


def config_json(*, sign_in_helper: bool) -> dict[str, Any]:
    """What the console reads first: the API is this server's origin, tokens are the local issuer's."""
    return {"api_base": "", "auth": {"mode": "local", "sign_in_helper": sign_in_helper}}


def loopback_request(client: Sequence[Any] | None, headers: Mapping[str, str]) -> bool:
    """A client on this machine that also named this machine: a page of another site that
    resolves its own name to 127.0.0.1 (DNS rebinding) sends that name as its `Host`. A request
    that a proxy says it forwarded came from elsewhere, whatever address it arrives from."""
    if not client or any(name in headers for name in FORWARDING_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(str(client[0]))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback and bool(_LOOPBACK_HOST.fullmatch(headers.get("host", "")))


def sign_in_reachable(client: Sequence[Any] | None, headers: Mapping[str, str]) -> bool:
    """Whether the sign-in helper answers this request at all: a loopback request whose body is
    declared JSON (which no cross-site form can send without a preflight that is never granted)
    and whose `Origin`, if any, is this same loopback origin."""
    if not loopback_request(client, headers):
        return False
    if headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        return False
    origin = headers.get("origin")
    return origin is None or origin.lower() == "http://" + headers["host"].lower()


@dataclass(frozen=True)
class SignIn:
    """Who the console signs in as: the claims of the token the helper mints."""

    sub: str
    tenant: str | None
    roles: list[str]
    projects: list[str]
    teams: list[str]
    orgs: list[str]


def parse_sign_in(body: bytes) -> SignIn:
    """The sign-in request, checked strictly; `InvalidArgument` naming the field otherwise."""
    if len(body) > MAX_SIGN_IN_BYTES:
        raise InvalidArgument(f"the body must be at most {MAX_SIGN_IN_BYTES} bytes",
                              details={"max_bytes": MAX_SIGN_IN_BYTES})
    try:
        request = strict_json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InvalidArgument("the body is not valid JSON") from None
    except strict_json.Refused as exc:  # a repeated key: which one is meant is not guessed
        raise InvalidArgument(str(exc), details={"field": exc.path}) from None
    if not isinstance(request, dict):
        raise InvalidArgument("the body must be a JSON object")
    unknown = sorted(set(request) - {"sub", "tenant", *SIGN_IN_LISTS})
    if unknown:
        field = unknown[0][:64]  # the client's text, cut short before it is echoed
        raise InvalidArgument(f"unknown field {field!r}", details={"field": field})
    sub = request.get("sub")
    if (not isinstance(sub, str) or not 0 < len(sub) <= MAX_SUB_CHARS or not sub.isprintable()
            or sub.strip() != sub):
        raise InvalidArgument(f"sub must be 1..{MAX_SUB_CHARS} printable characters without surrounding spaces",
                              details={"field": "sub"})
    tenant = request.get("tenant")
    if tenant is not None and not (isinstance(tenant, str) and is_tenant_id(tenant)):
        raise InvalidArgument("tenant is not a valid tenant id", details={"field": "tenant"})
    lists = {name: _short_names(request.get(name, []), name) for name in SIGN_IN_LISTS}
    return SignIn(sub=sub, tenant=tenant, **lists)


def _short_names(value: Any, field: str) -> list[str]:
    if (not isinstance(value, list) or len(value) > MAX_LIST_ITEMS
            or not all(isinstance(item, str) and _LIST_ITEM.fullmatch(item) for item in value)):
        raise InvalidArgument(
            f"{field} must be a list of at most {MAX_LIST_ITEMS} names of 1..64 letters, digits and ._:@-",
            details={"field": field})
    return value


def _json_response(status: int, body: Any) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"content-type": "application/json"},
            "body": json.dumps(body, separators=(",", ":")).encode()}


def error_response(status: int, code: str, message: str, details: dict[str, Any] | None = None, *,
                   retryable: bool = False) -> dict[str, Any]:
    """The service's error envelope, for what `memsvc serve` answers outside the router."""
    return _json_response(status, {"error": {"code": code, "message": message, "retryable": retryable,
                                            "details": details or {}}})
