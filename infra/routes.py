"""The service's routes, read from the route table itself, so API Gateway declares exactly what the
Lambda serves (a new route in `memsvc.api.routes` appears in both APIs on the next synth)."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ServiceRoute", "service_routes", "PUBLIC_ROUTES"]

# The only route API Gateway lets through without a token or a signature. `/openapi.json` is
# public in `memsvc serve` but not here: on AWS every other route needs the caller's identity.
PUBLIC_ROUTES = frozenset({("GET", "/health")})


@dataclass(frozen=True)
class ServiceRoute:
    method: str
    path: str  # API Gateway form: `{id:uuid}` becomes `{id}`

    @property
    def public(self) -> bool:
        return (self.method, self.path) in PUBLIC_ROUTES

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"


def service_routes() -> tuple[ServiceRoute, ...]:
    from memsvc.api.routes import ROUTES

    routes = tuple(ServiceRoute(r.method, re.sub(r"\{(\w+):\w+\}", r"{\1}", r.path)) for r in ROUTES)
    missing = PUBLIC_ROUTES - {(r.method, r.path) for r in routes}
    if missing:
        raise ValueError(f"public routes the router does not serve: {sorted(missing)}")
    return routes
