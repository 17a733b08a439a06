"""A policy upload that names the version it replaces (the body's `version`, or `If-Match`) lands
only while that version is in force, on both backends: the write itself is conditional
(`TenantConfigStore.swap_config`), so an upload that lands in between wins; and a retry of an
upload that landed changes nothing."""

from __future__ import annotations

import pytest

from memsvc.core.errors import PreconditionFailed
from memsvc.core.policy import BUILTIN_VERSION, default_bundle
from memsvc.service.admin import PolicyBundle
from memsvc.service.tenant_config import PolicyRegistry
from tests.conftest import admin

UPLOADER = admin().policy_context()


def _edited(note: str) -> dict[str, str]:
    bundle = default_bundle()
    bundle["authz.rego"] += f"\n# {note}\n"
    return bundle


class _UploadBetween:
    """The backend's config store, where another admin's upload lands right after this registry
    first reads the bundle in force (a race lost, made to happen every time)."""

    def __init__(self, store, other_upload):
        self._store, self._other_upload, self.swaps = store, other_upload, 0

    def get_config(self, tenant, name):
        doc = self._store.get_config(tenant, name)
        if self._other_upload is not None:
            upload, self._other_upload = self._other_upload, None
            upload()
        return doc

    def put_config(self, tenant, name, doc):
        raise AssertionError("a versioned upload writes only on the version it read")

    def swap_config(self, tenant, name, doc, *, expected):
        self.swaps += 1
        return self._store.swap_config(tenant, name, doc, expected=expected)


def _in_force(backend, tenant: str = "acme") -> str:
    return PolicyRegistry(backend.store).get(tenant).bundle.version


def test_an_upload_replacing_the_version_in_force_lands(backend):
    first = PolicyRegistry(backend.store).replace("acme", _edited("one"), UPLOADER, replacing=BUILTIN_VERSION)
    second = PolicyRegistry(backend.store).replace("acme", _edited("two"), UPLOADER, replacing=first.bundle.version)
    assert _in_force(backend) == second.bundle.version not in (first.bundle.version, BUILTIN_VERSION)


def test_an_upload_replacing_an_older_version_changes_nothing(backend):
    first = PolicyRegistry(backend.store).replace("acme", _edited("one"), UPLOADER)
    for dry_run in (True, False):
        with pytest.raises(PreconditionFailed) as raised:
            backend.admin.put_policies(admin(), PolicyBundle(policies=_edited("two"), version=BUILTIN_VERSION),
                                       dry_run=dry_run)
        assert raised.value.details == {"expected_version": BUILTIN_VERSION, "current_version": first.bundle.version}
        assert _in_force(backend) == first.bundle.version


def test_an_upload_that_lost_a_race_changes_nothing(backend):
    theirs: list[str] = []
    racing = _UploadBetween(backend.store, lambda: theirs.append(
        PolicyRegistry(backend.store).replace("acme", _edited("theirs"), UPLOADER).bundle.version))
    with pytest.raises(PreconditionFailed) as raised:
        PolicyRegistry(racing).replace("acme", _edited("mine"), UPLOADER, replacing=BUILTIN_VERSION)
    assert raised.value.details["current_version"] == theirs[0] == _in_force(backend)


def test_a_retried_upload_whose_first_attempt_landed_answers_it_and_changes_nothing(backend):
    first = backend.admin.put_policies(admin(), PolicyBundle(policies=_edited("one"), version=BUILTIN_VERSION))
    counting = _UploadBetween(backend.store, None)
    for dry_run in (True, False):
        again = PolicyRegistry(counting).check_replacing("acme", _edited("one"), UPLOADER, BUILTIN_VERSION) \
            if dry_run else PolicyRegistry(counting).replace("acme", _edited("one"), UPLOADER, replacing=BUILTIN_VERSION)
        assert again.bundle.version == first.bundle.version == _in_force(backend)
    assert counting.swaps == 0  # nothing written again
    with pytest.raises(PreconditionFailed):  # another bundle over the same old version is still refused
        backend.admin.put_policies(admin(), PolicyBundle(policies=_edited("two"), version=BUILTIN_VERSION))


def test_the_header_and_the_body_name_one_version(backend):
    first = PolicyRegistry(backend.store).replace("acme", _edited("one"), UPLOADER)
    stale = PolicyBundle(policies=_edited("two"))
    with pytest.raises(PreconditionFailed):
        backend.admin.put_policies(admin(), stale, if_match=f'"{BUILTIN_VERSION}"')
    landed = backend.admin.put_policies(admin(), stale, if_match=f'W/"{first.bundle.version}"')
    assert _in_force(backend) == landed.bundle.version
    assert backend.admin.put_policies(admin(), PolicyBundle(policies=_edited("three")), if_match="*").bundle.version \
        == _in_force(backend)


def test_another_tenants_version_is_its_own(backend):
    acme = PolicyRegistry(backend.store).replace("acme", _edited("acme"), UPLOADER)
    with pytest.raises(PreconditionFailed):
        backend.admin.put_policies(admin("globex"), PolicyBundle(policies=_edited("globex"), version=acme.bundle.version))
    assert _in_force(backend, "globex") == BUILTIN_VERSION
    globex = backend.admin.put_policies(admin("globex"), PolicyBundle(policies=_edited("globex"), version=BUILTIN_VERSION))
    assert (_in_force(backend, "globex"), _in_force(backend)) == (globex.bundle.version, acme.bundle.version)
