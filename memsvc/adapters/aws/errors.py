"""AWS failures as the service's errors: one mapping for every AWS adapter.

An adapter calls AWS through a client built by `memsvc.adapters.aws.clients`, whose botocore
retry mode has already retried throttling, 5xx and connection failures. What still fails is
mapped here once, whatever the service:

- throttling (botocore's own list of throttling codes, or a 429) -> `RateLimited` (retryable);
- a request AWS refuses as invalid (`ValidationException` and kin) -> `InvalidArgument`: sending
  it again cannot succeed;
- a ciphertext that does not open under this key or context (KMS) -> `ProviderError`, not
  retryable: no retry changes the bytes;
- anything else (access denied, a missing resource, 5xx after retries, the connection) ->
  `ProviderError`, retryable: an operator's fix or time will make the same request succeed.

AWS's error message is left out of the error and the log: it can quote keys, metadata and ARNs.
The code and the operation are enough to diagnose.
"""

from __future__ import annotations

import logging

from botocore.exceptions import BotoCoreError, ClientError

from memsvc.core.errors import InvalidArgument, MemsvcError, ProviderError, RateLimited

__all__ = ["THROTTLING_CODES", "aws_error", "error_code", "lost_race"]

log = logging.getLogger(__name__)

# The codes botocore's standard and adaptive modes retry as throttling (botocore/retries/standard.py).
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException", "TooManyRequestsException",
    "ProvisionedThroughputExceededException", "TransactionInProgressException", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete",
    "EC2ThrottledException",
})
_INVALID = frozenset({"ValidationException", "ValidationError", "InvalidParameterException",
                      "InvalidParameterValue", "InvalidRequestException", "SerializationException"})
_NEVER_OPENS = frozenset({"InvalidCiphertextException", "IncorrectKeyException"})
# A transaction's per-item cancellation reasons that mean another writer got there first;
# "None" is an item that was fine. Throttling reasons are not a race.
_RACE_REASONS = frozenset({"None", "ConditionalCheckFailed", "TransactionConflict"})
_THROTTLED_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"})


def error_code(exc: BaseException) -> str:
    """The AWS error code of a `ClientError`, else the exception's class name."""
    if isinstance(exc, ClientError):
        return exc.response.get("Error", {}).get("Code") or "Unknown"
    return type(exc).__name__


def _cancellation_reasons(exc: ClientError) -> set[str]:
    return {reason.get("Code") or "None" for reason in exc.response.get("CancellationReasons") or []}


def lost_race(exc: ClientError | BotoCoreError) -> bool:
    """Whether a conditional write failed because another writer got there first (its condition
    failed, or a concurrent transaction held one of its items): reading again and retrying is the
    answer. A transaction cancelled for any other reason (throttling, validation) did not."""
    code = error_code(exc)
    if code == "ConditionalCheckFailedException":
        return True
    if code != "TransactionCanceledException" or not isinstance(exc, ClientError):
        return False
    reasons = _cancellation_reasons(exc)
    return reasons <= _RACE_REASONS and reasons != {"None"}


def aws_error(exc: ClientError | BotoCoreError, *, service: str, operation: str) -> MemsvcError:
    """The service's error for a failed AWS call (see the module docstring)."""
    code = error_code(exc)
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) if isinstance(exc, ClientError) else 0
    details = {"provider": service, "operation": operation, "aws_error_code": code}
    log.warning("%s %s failed: %s", service, operation, code)
    throttled_transaction = code == "TransactionCanceledException" and isinstance(exc, ClientError) and bool(
        _cancellation_reasons(exc) & _THROTTLED_REASONS)
    if code in THROTTLING_CODES or status == 429 or throttled_transaction:
        return RateLimited(f"{service} is throttling requests; try again shortly", retry_after_seconds=1,
                           details=details)
    if code in _INVALID:
        return InvalidArgument(f"{service} refused the request as invalid ({code})", details=details)
    error = ProviderError(f"{service} {operation} failed ({code})", details=details)
    if code in _NEVER_OPENS:
        error.retryable = False
    return error
