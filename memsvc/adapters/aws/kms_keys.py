"""The AWS key provider: per-tenant data keys from KMS, bound to the tenant by encryption context.

`GenerateDataKey` (AES_256) makes a tenant's data key; the service stores the wrapped copy and
`Decrypt` unwraps it. The tenant is the encryption context (`{"memsvc:tenant": tenant}`), which
KMS binds to the ciphertext and writes to CloudTrail: a wrapped key copied to another tenant does
not unwrap, and every unwrap is audited per tenant.

Nothing is cached here: `memsvc.service.sealing.Sealer` keeps the plaintext data key in memory
for a bounded time and calls `decrypt_data_key` only on a miss. Retries of throttling and
transient errors are botocore's (`memsvc.adapters.aws.clients`); what still fails afterwards is
mapped by `memsvc.adapters.aws.errors`, with messages that name no key material and no key id.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import aws_error
from memsvc.core.errors import ProviderError

__all__ = ["ENCRYPTION_CONTEXT_KEY", "KmsKeyProvider"]

ENCRYPTION_CONTEXT_KEY = "memsvc:tenant"
_DATA_KEY_BYTES = 32  # AES-256, what the sealing code expects


class KmsKeyProvider:
    """`KeyProvider` on AWS KMS.

    Args:
        client: a boto3 `kms` client.
        key_id: the symmetric CMK (key id, key ARN or alias). `Decrypt` passes it too, so a
            wrapped key made under any other CMK is refused rather than silently accepted.
    """

    def __init__(self, client: Any, key_id: str) -> None:
        if not key_id:
            raise ValueError("key_id is required")
        self._client = client
        self._key_id = key_id

    def generate_data_key(self, tenant: str) -> tuple[bytes, bytes]:
        try:
            response = self._client.generate_data_key(
                KeyId=self._key_id, KeySpec="AES_256", EncryptionContext=_context(tenant)
            )
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service="KMS", operation="GenerateDataKey") from None
        return _checked(response["Plaintext"]), response["CiphertextBlob"]

    def decrypt_data_key(self, tenant: str, wrapped: bytes) -> bytes:
        try:
            response = self._client.decrypt(
                CiphertextBlob=wrapped, KeyId=self._key_id, EncryptionContext=_context(tenant)
            )
        except (ClientError, BotoCoreError) as exc:
            raise aws_error(exc, service="KMS", operation="Decrypt") from None
        return _checked(response["Plaintext"])


def _context(tenant: str) -> dict[str, str]:
    return {ENCRYPTION_CONTEXT_KEY: tenant}


def _checked(plaintext: bytes) -> bytes:
    if len(plaintext) != _DATA_KEY_BYTES:
        raise ProviderError("the key service returned a data key of the wrong size")
    return plaintext
