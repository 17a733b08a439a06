"""The AWS client set (one client per service, each with its botocore retry mode) and the one
mapping of AWS failures to the service's errors."""

from __future__ import annotations

import dataclasses

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.retries.standard import ThrottledRetryableChecker

from memsvc.adapters.aws.clients import EXTRACTOR_RETRIES, JUDGE_READ_TIMEOUT_SECONDS, RETRIES, AwsClients
from memsvc.adapters.aws.errors import THROTTLING_CODES, aws_error
from memsvc.core.errors import InvalidArgument, ProviderError, RateLimited


def client_error(code: str, status: int, message: str = "quotes arn:aws:kms:secret") -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "Op")


def test_every_client_has_its_retry_mode(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    clients = AwsClients.create("us-east-1", embedding_concurrency=32)
    assert [f.name for f in dataclasses.fields(clients)] == [
        "dynamodb", "s3vectors", "kms", "events", "bedrock_runtime", "sqs", "judge_runtime", "extractor_runtime"]
    for field in dataclasses.fields(clients)[:-1]:
        client = getattr(clients, field.name)
        service = client.meta.service_model.service_name
        assert client.meta.config.retries == RETRIES[service], service
    assert {RETRIES[s]["mode"] for s in RETRIES} <= {"standard", "adaptive"}
    assert clients.bedrock_runtime.meta.config.max_pool_connections == 32
    # The same-fact judge waits briefly, then remember creates instead (memsvc.adapters.aws.bedrock_judge).
    assert clients.judge_runtime.meta.config.read_timeout == JUDGE_READ_TIMEOUT_SECONDS <= 5
    # Entity extraction runs in the indexer, off the request path: it waits out throttling.
    assert clients.extractor_runtime.meta.config.retries == EXTRACTOR_RETRIES
    assert EXTRACTOR_RETRIES["mode"] == "adaptive" and EXTRACTOR_RETRIES["total_max_attempts"] > 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        clients.kms = None  # type: ignore[misc]


def created_services(monkeypatch) -> list[str]:
    """The services of the clients boto3 creates from now on, in order."""
    created: list[str] = []
    create = boto3.session.Session.client

    def recording(self, service_name, *args, **kwargs):
        created.append(service_name)
        return create(self, service_name, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "client", recording)
    return created


def test_the_clients_few_requests_use_are_created_on_first_use(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    created = created_services(monkeypatch)
    clients = AwsClients.create("us-east-1", embedding_concurrency=4)
    assert created == ["dynamodb", "s3vectors", "kms", "bedrock-runtime"]
    assert clients.sqs.meta.service_model.service_name == "sqs"
    assert clients.sqs.meta.region_name == "us-east-1"
    assert created[4:] == ["sqs"]  # created once, then reused
    assert clients.events.meta.service_model.service_name == "events"
    assert clients.judge_runtime.meta.config.read_timeout == JUDGE_READ_TIMEOUT_SECONDS
    assert clients.extractor_runtime.meta.config.read_timeout != JUDGE_READ_TIMEOUT_SECONDS
    assert created[4:] == ["sqs", "events", "bedrock-runtime", "bedrock-runtime"]


def test_the_throttling_codes_are_the_ones_botocore_retries():
    assert THROTTLING_CODES == frozenset(ThrottledRetryableChecker._THROTTLED_ERROR_CODES)


@pytest.mark.parametrize(("code", "status", "kind", "retryable"), [
    ("ThrottlingException", 400, RateLimited, True),
    ("ProvisionedThroughputExceededException", 400, RateLimited, True),
    ("SomethingNew", 429, RateLimited, True),
    ("ValidationException", 400, InvalidArgument, False),
    ("AccessDeniedException", 403, ProviderError, True),
    ("ResourceNotFoundException", 404, ProviderError, True),
    ("InternalServerException", 500, ProviderError, True),
    ("InvalidCiphertextException", 400, ProviderError, False),
])
def test_one_mapping_for_every_adapter(code, status, kind, retryable):
    error = aws_error(client_error(code, status), service="KMS", operation="Decrypt")
    assert type(error) is kind and error.retryable is retryable
    assert error.details.items() >= {"provider": "KMS", "operation": "Decrypt", "aws_error_code": code}.items()
    assert "secret" not in error.message  # AWS's message can quote keys and ARNs: never passed on


def test_a_connection_failure_is_a_retryable_provider_error():
    error = aws_error(EndpointConnectionError(endpoint_url="https://x"), service="S3 Vectors", operation="QueryVectors")
    assert type(error) is ProviderError and error.retryable
    assert error.details["aws_error_code"] == "EndpointConnectionError"
