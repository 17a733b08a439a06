"""Tenant settings: what an update stores, and the recalibration of issue 23."""

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


def test_a_chosen_value_round_trips_even_the_old_default():
    store = ConfigStore()
    SettingsRegistry(store).update("t1", SettingsPatch(recall_min_match=0.25))
    assert SettingsRegistry(store).get("t1").recall_min_match == 0.25  # a new registry: read from the store


def test_an_update_stores_every_setting_so_checks_across_fields_hold_after_the_defaults_move():
    store = ConfigStore()
    SettingsRegistry(store).update("t1", SettingsPatch(decay_rate_per_day=0.05))
    stored = store.docs[("t1", "settings")]
    assert stored["decay_rate_per_day"] == 0.05 and set(TenantSettings.model_fields) <= set(stored)
    later = SettingsRegistry(store, defaults={"recall_min_match": 0.12})
    assert later.get("t1").recall_min_match == TenantSettings().recall_min_match  # as stored


def test_a_document_stored_before_issue_23_follows_the_recalibrated_recall_min_match():
    store = ConfigStore()
    legacy = TenantSettings().model_dump() | {"recall_min_match": 0.25}
    store.put_config("t1", "settings", legacy)
    assert SettingsRegistry(store).get("t1").recall_min_match == TenantSettings().recall_min_match != 0.25
    store.put_config("t2", "settings", legacy | {"recall_min_match": 0.3})  # chosen: kept
    assert SettingsRegistry(store).get("t2").recall_min_match == 0.3
