"""Signs requests with the Python client's AwsSigV4Auth (botocore) at a fixed time and prints
the signature headers: the reference test/sigv4.test.ts compares the TypeScript signer with.
Input (argv[1], JSON): a list of {method, url, headers, body, date (ISO, UTC), region, keys};
output: a list of the signature headers, in order."""

import datetime
import json
import sys
from unittest import mock

import httpx
from botocore.credentials import Credentials

from memsvc_client.store import AwsSigV4Auth


def sign(spec: dict) -> dict:
    creds = Credentials(spec["access_key"], spec["secret_key"], spec.get("session_token"))
    when = datetime.datetime.fromisoformat(spec["date"].replace("Z", "+00:00"))
    request = httpx.Request(spec["method"], spec["url"], headers=spec["headers"],
                            content=spec["body"].encode() if spec["body"] is not None else None)
    with mock.patch("botocore.auth.get_current_datetime", return_value=when):
        AwsSigV4Auth(creds, spec["region"]).sign(request)
    return {k: v for k, v in request.headers.items() if k in ("authorization", "x-amz-date", "x-amz-security-token")}


print(json.dumps([sign(spec) for spec in json.loads(sys.argv[1])]))
