"""Two admins changing different settings of one tenant at once both land, on both backends:
an update stores over the document it read, or reads and merges again (`SettingsRegistry.update`,
`TenantConfigStore.swap_config`)."""

from __future__ import annotations

from memsvc.core.models import Caller
from memsvc.service.tenant_config import SettingsPatch, SettingsRegistry
from tests.conftest import admin


class _WriterBetween:
    """The backend's config store, where another writer's update lands between this registry's
    first read of the settings and its write (a race lost, made to happen every time)."""

    def __init__(self, store, other_write):
        self._store, self._other_write, self.swaps = store, other_write, 0

    def get_config(self, tenant, name):
        doc = self._store.get_config(tenant, name)
        if self._other_write is not None:
            write, self._other_write = self._other_write, None
            write()
        return doc

    def swap_config(self, tenant, name, doc, *, expected):
        self.swaps += 1
        return self._store.swap_config(tenant, name, doc, expected=expected)


def test_an_update_that_lost_a_race_merges_again_and_loses_nothing(backend):
    other = SettingsRegistry(backend.store)
    racing = _WriterBetween(backend.store, lambda: other.update("acme", SettingsPatch(neighbors_k=7)))
    SettingsRegistry(racing).update("acme", SettingsPatch(profile_token_budget=333))
    got = backend.admin.get_settings(admin())
    assert (got.neighbors_k, got.profile_token_budget) == (7, 333)
    assert racing.swaps == 2  # the first write was refused: it would have put neighbors_k back


def test_a_server_whose_cache_is_stale_keeps_what_another_server_changed(backend):
    one, two = SettingsRegistry(backend.store), SettingsRegistry(backend.store)
    assert two.get("acme").neighbors_k != 7  # cached in `two` before `one` changes it
    one.update("acme", SettingsPatch(neighbors_k=7))
    two.update("acme", SettingsPatch(profile_token_budget=333))
    fresh = SettingsRegistry(backend.store).get("acme")
    assert (fresh.neighbors_k, fresh.profile_token_budget) == (7, 333)


def test_another_tenants_settings_are_untouched(backend):
    SettingsRegistry(backend.store).update("acme", SettingsPatch(neighbors_k=7))
    globex = backend.admin.get_settings(Caller(tenant_id="globex", user_id="root", roles=("admin",)))
    assert globex.neighbors_k != 7
