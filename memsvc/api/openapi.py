"""The OpenAPI 3.1 document, generated from the route table and the pydantic wire models."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from memsvc.api.schemas import ErrorOut

__all__ = ["openapi_document"]

_PARAMS = {
    "ns": ("array", "One namespace segment; repeat once per segment"),
    "key": ("string", "The memory's key"),
    "prefix": ("array", "Prefix segment ('*' matches one segment); repeat per segment"),
    "suffix": ("array", "Suffix segment ('*' matches one segment); repeat per segment"),
    "max_depth": ("integer", "Truncate returned namespaces to this depth"),
    "limit": ("integer", "Page size"),
    "offset": ("integer", "Items to skip"),
    "refresh_ttl": ("boolean", "Restart the item's TTL from now (LangGraph refresh_on_read)"),
    "kinds": ("array", "Event kinds to include (add, update, delete, expired); repeat per kind; default all"),
    "after": ("string", "Only events that occurred after this RFC 3339 time"),
    "before": ("string", "Only events that occurred before this RFC 3339 time"),
    "after_cursor": ("string", "The previous page's after_cursor (or a resume_cursor)"),
}

_ERRORS = {"400": "Invalid argument", "401": "Missing or invalid identity", "403": "Not allowed",
           "404": "Not found", "413": "Content too long", "500": "Internal error"}


def openapi_document(routes) -> dict[str, Any]:
    models = {ErrorOut}
    for r in routes:
        models |= {m for m in (r.body_model, r.response_model) if m is not None}
    _, defs = models_json_schema(
        [(m, "validation" if m in {r.body_model for r in routes} else "serialization") for m in models],
        ref_template="#/components/schemas/{model}",
    )
    paths: dict[str, Any] = {}
    for r in routes:
        op: dict[str, Any] = {"summary": r.summary, "operationId": f"{r.method.lower()}_{_slug(r.path)}"}
        params = [
            {"name": name, "in": "query", "required": name in ("ns", "key"),
             "schema": {"type": "array", "items": {"type": "string"}} if _PARAMS[name][0] == "array"
             else {"type": _PARAMS[name][0]},
             "description": _PARAMS[name][1], **({"explode": True} if _PARAMS[name][0] == "array" else {})}
            for name in r.query_params
        ]
        if "{id" in r.path:
            params.append({"name": "id", "in": "path", "required": True, "schema": {"type": "string"}})
        if params:
            op["parameters"] = params
        if r.body_model is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{r.body_model.__name__}"}}}}
        ok: dict[str, Any] = {"description": "OK"}
        if r.response_model is not None:
            ok["content"] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{r.response_model.__name__}"}}}
        responses: dict[str, Any] = {str(r.status): ok}
        if not r.public:
            for code, text in _ERRORS.items():
                responses[code] = {"description": text, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/ErrorOut"}}}}
            op["security"] = [{"bearerAuth": []}, {"sigv4": []}]
        op["responses"] = responses
        paths.setdefault(r.path.replace(":uuid", ""), {})[r.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "memsvc", "version": "1", "description": "A memory service for LLM agents."},
        "paths": paths,
        "components": {
            "schemas": defs.get("$defs", {}),
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "sigv4": {"type": "apiKey", "in": "header", "name": "Authorization",
                          "description": "AWS Signature Version 4, service execute-api"},
            },
        },
    }


def _slug(path: str) -> str:
    return path.replace(":uuid", "").strip("/").replace("/", "_").replace("{", "").replace("}", "").replace(".", "_") or "root"
