"""The OpenAPI 3.1 document, generated from the route table: the same models the router parses
with, so the document is exactly as strict as the server."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import models_json_schema

from memsvc.api.router import Route, query_kind
from memsvc.api.schemas import ErrorOut
from memsvc.core.validation import if_match_pattern
from memsvc.service.admin import BUNDLE_VERSION
from memsvc.service.workflow_rules import VERSION_NUMBER, WorkflowId
from memsvc.service.user_erasure import USER_ID_SCHEMA

__all__ = ["openapi_document"]

_ERRORS = {"400": "Invalid argument", "401": "Missing or invalid identity", "403": "Not allowed",
           "404": "Not found", "409": "Conflict: changed by another writer, or already exists",
           "412": "Precondition failed: If-Match names another version", "413": "Content too long",
           "422": "Refused by a governance policy", "429": "Rate limited (see Retry-After)", "500": "Internal error",
           "502": "A provider (embedding, model, key service) failed", "503": "The store is unavailable"}
_RETRY_AFTER = {"description": "seconds to wait before a retry (API.md: a 429 comes with it)",
                "schema": {"type": "string", "pattern": "^[0-9]+$"}}
_PATH_PARAMETER = re.compile(r"\{([A-Za-z_]\w*)(:uuid)?\}")
# The workflow ids the services check (`core.workflow.check_id`); another path parameter is any
# segment (a session id that no session has is simply not found).
_WORKFLOW_ID = TypeAdapter(WorkflowId).json_schema()
_PATH_SCHEMAS: dict[str, dict[str, Any]] = {"task_id": _WORKFLOW_ID, "subtask_id": _WORKFLOW_ID,
                                            "plan_id": _WORKFLOW_ID, "key": _WORKFLOW_ID, "user_id": USER_ID_SCHEMA}
_UUID = {"type": "string", "format": "uuid"}
# A rule across a query model's fields: the model becomes one parameter, an object exploded into
# the query string (`style: form`), so that its schema can carry the rule.
_ACROSS_FIELDS = ("oneOf", "anyOf", "allOf", "not", "if", "dependentRequired", "dependentSchemas")
_IF_MATCH = {
    "number": {"name": "If-Match", "in": "header", "required": False,
               "description": "change only this version (`3`, `\"3\"` or `W/\"3\"`; `*`: any); 412 if it is another",
               "schema": {"type": "string", "pattern": if_match_pattern(VERSION_NUMBER)}},
    "bundle": {"name": "If-Match", "in": "header", "required": False,
               "description": "replace only this bundle version, as GET answered it (`builtin`, or `\"<16 hex>\"`; "
                              "`*`: no condition, though a `version` in the body still holds); 412 if another is in "
                              "force",
               "schema": {"type": "string", "pattern": if_match_pattern(BUNDLE_VERSION)}},
}


def openapi_document(routes: Sequence[Route]) -> dict[str, Any]:
    inputs = {m for r in routes for m in (r.body, r.query) if m is not None}
    outputs = {m for r in routes for m in (r.response, *(model for _, model in r.also)) if m is not None} | {ErrorOut}
    _, defs = models_json_schema(
        [(m, "validation") for m in inputs] + [(m, "serialization") for m in outputs],
        ref_template="#/components/schemas/{model}",
    )
    schemas = defs.get("$defs", {})
    paths: dict[str, Any] = {}
    for r in routes:
        op: dict[str, Any] = {"summary": r.summary, "operationId": f"{r.method.lower()}_{_slug(r.path)}"}
        params = _query_parameters(r.query, schemas) if r.query is not None else []
        for name, uuid in _PATH_PARAMETER.findall(r.path):
            schema = _UUID if uuid else _PATH_SCHEMAS.get(name, {"type": "string", "minLength": 1})
            params.append({"name": name, "in": "path", "required": True, "schema": schema})
        if r.if_match:
            params.append(_IF_MATCH[r.if_match])
        if params:
            op["parameters"] = params
        if r.body is not None:
            op["requestBody"] = {"required": True, "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{r.body.__name__}"}}}}
        ok: dict[str, Any] = {"description": "OK" if r.status != 204 else "No content"}
        if r.response is not None:
            ok["content"] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{r.response.__name__}"}}}
        elif r.status != 204:
            ok["content"] = {r.content_type: {"schema": {"type": "object" if r.content_type == "application/json"
                                                         else "string"}}}
        responses: dict[str, Any] = {str(r.status): ok}
        for status, model in r.also:
            responses[str(status)] = {"description": model.__doc__ or _ERRORS.get(str(status), "OK"),
                                      "content": {"application/json": {
                                          "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}
        if not r.public:
            for code, text in _ERRORS.items():
                responses[code] = {"description": text, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/ErrorOut"}}}}
            responses["429"]["headers"] = {"Retry-After": _RETRY_AFTER}
            op["security"] = [{"bearerAuth": []}, {"sigv4": []}]
        op["responses"] = responses
        paths.setdefault(r.path.replace(":uuid", ""), {})[r.method.lower()] = op
    for r in routes:  # query models are parameters, not bodies: no component of their own
        if r.query is not None and r.query not in {x.body for x in routes}:
            schemas.pop(r.query.__name__, None)
    return {
        "openapi": "3.1.0",
        "info": {"title": "memsvc", "version": "1", "description": "A memory service for LLM agents."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "sigv4": {"type": "apiKey", "in": "header", "name": "Authorization",
                          "description": "AWS Signature Version 4, service execute-api"},
            },
        },
    }


def _query_parameters(model: type[BaseModel], schemas: dict[str, Any]) -> list[dict[str, Any]]:
    """One parameter per field, with the field's own schema: repeated parameters (`explode`) for
    lists, one value otherwise. A model with a rule across its fields is one object parameter."""
    component = schemas[model.__name__]
    if any(k in component for k in _ACROSS_FIELDS):
        # A parameter no field names is refused (`router.query_fields`): additionalProperties false.
        schema = {k: v for k, v in component.items() if k != "title"} | {"additionalProperties": False}
        return [{"name": model.__name__, "in": "query", "required": "oneOf" in schema or "required" in schema,
                 "style": "form", "explode": True, "schema": schema}]
    properties = component["properties"]
    required = set(component.get("required", ()))
    params = []
    for name, info in model.model_fields.items():
        wire = info.alias or name
        schema = dict(properties[wire])
        description = schema.pop("description", None)
        schema.pop("title", None)
        if schema.get("default", ...) is None:  # absent, not null: a query string has no null
            del schema["default"]
            schema.update(next(s for s in schema.pop("anyOf") if s.get("type") != "null"))
        param: dict[str, Any] = {"name": wire, "in": "query", "required": wire in required, "schema": schema}
        if description:
            param["description"] = description
        if query_kind(info.annotation) == "array":
            param.update(style="form", explode=True)
        params.append(param)
    return params


def _slug(path: str) -> str:
    return path.replace(":uuid", "").strip("/").replace("/", "_").replace("{", "").replace("}", "").replace(".", "_") or "root"
