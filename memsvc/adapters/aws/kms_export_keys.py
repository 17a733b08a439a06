"""Content keys of exports sealed under a KMS key the caller names (`GenerateDataKey`, `Decrypt`).

The encryption context names the purpose (`{"memsvc:purpose": "export"}`), so a tenant's data key
wrapped under the same CMK never opens as an export's and the other way round. Only the keys the
deployment lists (`export_kms_key_arns` in infra/config.py, `MEMSVC_EXPORT_KMS_KEY_ARNS`) are used:
the API role is granted exactly those, and any other is refused before KMS is called (docs/data-ownership.md,
"Export and import").
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.adapters.aws.errors import aws_error, error_code
from memsvc.core.errors import InvalidArgument

__all__ = ["KmsExportKeys", "EXPORT_CONTEXT_KEY", "EXPORT_PURPOSE"]

EXPORT_CONTEXT_KEY = "memsvc:purpose"
EXPORT_PURPOSE = "export"
_CONTEXT = {EXPORT_CONTEXT_KEY: EXPORT_PURPOSE}
# What KMS answers when the named key cannot be used for this: the caller's mistake, not an outage.
_CALLER_ERRORS = {"NotFoundException", "DisabledException", "InvalidKeyUsageException", "AccessDeniedException",
                  "InvalidCiphertextException", "IncorrectKeyException", "KMSInvalidStateException",
                  "ValidationException"}


class KmsExportKeys:
    """`ExportKeys` on AWS KMS."""

    def __init__(self, client: Any, *, allowed: tuple[str, ...]) -> None:
        """`allowed`: the key ARNs the deployment lets exports use; a key is named by its ARN."""
        self._client = client
        self._allowed = allowed

    def _check(self, key_id: str) -> None:
        if key_id not in self._allowed:
            raise InvalidArgument("kms_key_id is not one of the KMS keys this deployment lets exports use (its "
                                  "export_kms_key_arns): name one of them by its ARN, or use a passphrase",
                                  details={"field": "kms_key_id", "allowed": list(self._allowed)})

    def generate(self, key_id: str, tenant: str) -> tuple[bytes, bytes]:
        self._check(key_id)
        try:
            response = self._client.generate_data_key(KeyId=key_id, KeySpec="AES_256", EncryptionContext=_CONTEXT)
        except (ClientError, BotoCoreError) as exc:
            raise _error(exc, "GenerateDataKey") from None
        return response["Plaintext"], response["CiphertextBlob"]

    def decrypt(self, key_id: str, tenant: str, wrapped: bytes) -> bytes:
        self._check(key_id)
        try:
            response = self._client.decrypt(CiphertextBlob=wrapped, KeyId=key_id, EncryptionContext=_CONTEXT)
        except (ClientError, BotoCoreError) as exc:
            raise _error(exc, "Decrypt") from None
        return response["Plaintext"]


def _error(exc: ClientError | BotoCoreError, operation: str) -> Exception:
    if isinstance(exc, ClientError) and error_code(exc) in _CALLER_ERRORS:
        return InvalidArgument("the KMS key cannot be used for this export: check its id and its key policy",
                               details={"field": "kms_key_id", "aws_error_code": error_code(exc)})
    return aws_error(exc, service="KMS", operation=operation)
