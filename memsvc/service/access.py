"""Who may do what where: a tenant's policies and settings, applied to one caller.

Every use case checks in the same order: validate (400) -> authorize (403) -> act (404 ...),
so bad input never reveals whether something exists and never changes anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memsvc.core.errors import Forbidden, PolicyViolation
from memsvc.core.filters import Filter, parse_filter
from memsvc.core.models import Caller
from memsvc.core.namespaces import validate_namespace
from memsvc.core.policy import CompiledPolicies
from memsvc.service.tenant_config import PolicyRegistry, SettingsRegistry, TenantSettings

__all__ = ["Access"]


class Access:
    def __init__(self, policies: PolicyRegistry, settings: SettingsRegistry) -> None:
        self.policies = policies
        self.settings = settings

    def settings_of(self, caller: Caller) -> TenantSettings:
        return self.settings.get(caller.tenant_id)

    def namespace_to_write(self, caller: Caller, namespace: Sequence[str]) -> tuple[str, ...]:
        """A namespace a write may create: at most the tenant's `max_depth` segments."""
        return validate_namespace(namespace, max_depth=self.settings_of(caller).max_depth)

    def namespace_to_read(self, caller: Caller, namespace: Sequence[str], *,
                          allow_empty: bool = False) -> tuple[str, ...]:
        """A namespace (or prefix) to read, delete or search. `max_depth` limits what writes may
        create, not what can be reached: up to the deepest `max_depth` the tenant ever had, so
        items written before an admin lowered it stay readable and deletable by key."""
        return validate_namespace(namespace, max_depth=self.settings_of(caller).reachable_depth,
                                  allow_empty=allow_empty)

    def authorize(self, caller: Caller, op: str, namespace: Sequence[str], key: str | None) -> CompiledPolicies:
        policies = self.policies.get(caller.tenant_id)
        if not policies.allow(op, list(namespace), key, caller.policy_context()):
            raise Forbidden(f"not allowed to {op} here")
        return policies

    def govern(self, caller: Caller, namespace: Sequence[str], key: str, value: dict[str, Any],
               attributes: dict[str, Any] | None) -> None:
        """Raise `PolicyViolation` when the tenant's governance policy refuses this value
        (API-AGENT.md "Governance and limits"). Every write of a value calls it, after
        `authorize`: a caller who may not write here learns nothing about the policy."""
        policies = self.policies.get(caller.tenant_id)
        violations = policies.violations(namespace, key, value, attributes, caller.policy_context())
        if violations:
            violations.sort(key=lambda v: (v["policy"], v["message"]))
            names = sorted({v["policy"] for v in violations})
            reasons = "; ".join(v["message"] for v in violations)
            raise PolicyViolation(f"refused by the tenant's governance policy {', '.join(names)}: {reasons}",
                                  details={"policies": names, "violations": violations})

    def admin(self, caller: Caller) -> CompiledPolicies:
        return self.authorize(caller, "admin", (), None)

    def scope(self, caller: Caller, op: str, prefix: tuple[str, ...],
              filter_json: dict[str, Any]) -> tuple[tuple[str, ...], Filter]:
        """Apply the filter-injection policy (a non-admin is narrowed to their own subtree), then
        authorize the narrowed scope. Returns the scope and the injected attribute filter."""
        policies = self.policies.get(caller.tenant_id)
        scope, attribute_filter = policies.inject_search(op, list(prefix), filter_json, caller.policy_context())
        scope = tuple(scope)
        self.authorize(caller, op, scope, None)
        return scope, parse_filter(attribute_filter or {})
