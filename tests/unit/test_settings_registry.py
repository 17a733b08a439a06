"""Tenant settings: a tenant stores only what it chose, and follows the defaults elsewhere."""

from __future__ import annotations

from typing import Any

from memsvc.service.tenant_config import SettingsPatch, SettingsRegistry, TenantSettings


class ConfigStore:
    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], dict[str, Any]] = {}

    def get_config(self, tenant: str, name: str) -> dict[str, Any] | None:
        return self.docs.get((tenant, name))

    def put_config(self, tenant: str, name: str, doc: dict[str, Any]) -> None:
        self.docs[(tenant, name)] = doc


def test_an_update_stores_only_what_differs_from_the_defaults():
    store = ConfigStore()
    SettingsRegistry(store).update("t1", SettingsPatch(decay_rate_per_day=0.05))
    assert store.docs[("t1", "settings")] == {"decay_rate_per_day": 0.05}


def test_a_tenant_follows_a_recalibrated_default_it_never_chose():
    store = ConfigStore()
    SettingsRegistry(store).update("t1", SettingsPatch(decay_rate_per_day=0.05))
    later = SettingsRegistry(store, defaults={"recall_min_match": 0.12})  # the deployment recalibrates
    assert later.get("t1").recall_min_match == 0.12
    assert later.get("t1").decay_rate_per_day == 0.05


def test_the_old_full_dump_of_recall_min_match_follows_the_new_default():
    store = ConfigStore()
    legacy = TenantSettings().model_dump() | {"recall_min_match": 0.25}  # written before issue 23
    store.put_config("t1", "settings", legacy)
    assert SettingsRegistry(store).get("t1").recall_min_match == TenantSettings().recall_min_match != 0.25
    store.put_config("t2", "settings", legacy | {"recall_min_match": 0.3})  # chosen: kept
    assert SettingsRegistry(store).get("t2").recall_min_match == 0.3
