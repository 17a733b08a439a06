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

    def swap_config(self, tenant: str, name: str, doc: dict[str, Any], *, expected: dict[str, Any] | None) -> bool:
        if self.docs.get((tenant, name)) != expected:
            return False
        self.docs[(tenant, name)] = doc
        return True


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


MINILM = {"semantic_auto_update": 0.90, "semantic_check_low": 0.55, "episodic_auto_update": 0.92,
          "episodic_check_low": 0.60, "recall_min_match": 0.07, "recall_cut_gap": 0.1, "recall_cut_margin": 0.14}
E5 = {"semantic_auto_update": 0.97, "semantic_check_low": 0.80, "episodic_auto_update": 0.97,
      "episodic_check_low": 0.81, "recall_min_match": 0.2, "recall_cut_gap": 0.06, "recall_cut_margin": 0.1}


class TestModelCalibratedDefaultsFollowTheModel:
    """A tenant that saved any setting under one embedding model gets the next model's calibrated
    defaults after `memsvc reindex`, except the ones it chose."""

    def test_the_defaults_left_as_they_were_follow_the_new_model(self):
        store = ConfigStore()
        SettingsRegistry(store, defaults=MINILM).update("t1", SettingsPatch(decay_rate_per_day=0.05))
        after = SettingsRegistry(store, defaults=E5).get("t1")
        assert after.decay_rate_per_day == 0.05
        assert {k: getattr(after, k) for k in E5} == E5

    def test_a_chosen_threshold_stays_with_its_pair(self):
        store = ConfigStore()
        SettingsRegistry(store, defaults=E5).update("t1", SettingsPatch(semantic_check_low=0.95))
        after = SettingsRegistry(store, defaults=MINILM).get("t1")  # MiniLM's auto-update 0.90 < 0.95
        assert (after.semantic_check_low, after.semantic_auto_update) == (0.95, 0.97)
        assert after.recall_min_match == 0.07  # not chosen: the model's

    def test_a_document_stored_before_holds_the_minilm_era_values_as_defaults(self):
        store = ConfigStore()
        store.put_config("t1", "settings", TenantSettings().model_dump() | MINILM | {"format": 2, "decay_rate_per_day": 0.05})
        after = SettingsRegistry(store, defaults=E5).get("t1")
        assert {k: getattr(after, k) for k in E5} == E5 and after.decay_rate_per_day == 0.05
