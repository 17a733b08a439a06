"""What seed 001's metrics record of one request (`memsvc.ports.OperationSample`).

Built from the route template, the caller's tenant id, the status and error code of the answer,
and for search and recall how many results each layer gave: never from the raw path, the query
string or what the body holds (namespaces, keys, values, queries), so no label carries them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from memsvc.core.layers import LAYER_NAMES, layer_of
from memsvc.ports import OperationSample

if TYPE_CHECKING:
    from memsvc.api.router import Handled, Response

__all__ = ["operation_sample", "UNMATCHED", "NO_TENANT", "ALL_LAYERS", "NO_LAYER"]

UNMATCHED = "UNMATCHED"  # the operation of a request no route matched
NO_TENANT = "-"  # not a tenant id (those start with a letter or digit): the caller is not known
ALL_LAYERS = "all"  # the layer label of a search's whole result count
NO_LAYER = "none"  # results in namespaces outside every layer
_SEARCHES = ("/search", "/recall")


def operation_sample(handled: Handled, response: Response, latency_ms: float) -> OperationSample:
    route = handled.route
    searched = route is not None and route.method == "POST" and route.path.endswith(_SEARCHES)
    return OperationSample(
        operation=f"{route.method} {route.path}" if route is not None else UNMATCHED,
        tenant=handled.caller.tenant_id if handled.caller is not None else NO_TENANT,
        status=response.status,
        code=_error_code(response.body) if response.status >= 400 else None,
        latency_ms=latency_ms,
        results=search_results(handled.body, handled.result) if searched and response.status < 400 else None,
    )


def search_results(body: Any, result: Any) -> dict[str, int]:
    """The answer's result count (`all`), and per searched layer how many of the results lie in it.

    Generic over the answer's model, so every search route is counted the same way: the results
    are its `items` (search) or `memories` (recall) list. The searched layers are the answer's
    `metadata.searched_layers` (recall), else the layer the body's `namespace_prefix` lies in,
    if it lies in one (a search under `["user", U]` spans several: only `all` is counted)."""
    items = _field(result, "items")
    if items is None:
        items = _field(result, "memories")
    items = list(items or ())
    by_layer = Counter(_layer_name(_field(item, "namespace")) for item in items)
    counts = {ALL_LAYERS: len(items)}
    for layer in _searched_layers(body, result):
        counts[layer] = by_layer[layer]
    return counts


def _searched_layers(body: Any, answer: Any) -> Iterable[str]:
    named = _field(_field(answer, "metadata"), "searched_layers")
    if isinstance(named, list):
        return [n for n in named if n in LAYER_NAMES]  # a fixed set, whatever the answer holds
    prefix = _field(body, "namespace_prefix")
    layer = layer_of(prefix) if isinstance(prefix, list | tuple) else None
    return [layer.name] if layer is not None else []


def _layer_name(namespace: Any) -> str:
    layer = layer_of(namespace) if isinstance(namespace, list | tuple) else None
    return layer.name if layer is not None else NO_LAYER


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _error_code(body: Any) -> str:
    """The answer's error code; `UNKNOWN` for anything that does not look like one, so a label
    never carries free text."""
    code = _field(_field(body, "error"), "code")
    return code if isinstance(code, str) and code.isupper() and len(code) <= 64 else "UNKNOWN"
