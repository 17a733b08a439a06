/** The SigV4 signer: the same signature as the Python client's (botocore) for the same request,
 * and the signed headers on the wire through a MemsvcClient. */

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { dirname, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { MemsvcClient } from "memsvc-client";
import { awsRegionFromUrl, sigv4Signer } from "memsvc-client/sigv4";

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url)); // build-test/test
const PYTHON = process.env.MEMSVC_PYTHON ?? resolve(here, "../../../../.venv/bin/python");
const REFERENCE = resolve(here, "../../test/sigv4_reference.py");

const credentials = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", sessionToken: "session-token" };
const date = new Date("2026-11-27T12:34:56Z");
const URL_ = "https://abc123.execute-api.eu-west-1.amazonaws.com/prod";

type Case = [string, string, Record<string, string>, string | null];

/** The Python client's signatures for `cases`, in one Python process. */
async function botocore(cases: Case[]): Promise<Array<Record<string, string>>> {
  const specs = cases.map(([method, url, headers, body]) => ({
    method, url, headers, body, date: date.toISOString(), region: "eu-west-1",
    access_key: credentials.accessKeyId, secret_key: credentials.secretAccessKey, session_token: credentials.sessionToken,
  }));
  const { stdout } = await run(PYTHON, [REFERENCE, JSON.stringify(specs)]);
  return JSON.parse(stdout) as Array<Record<string, string>>;
}

describe("sigv4Signer", () => {
  it("reads the region from an execute-api URL", () => {
    assert.equal(awsRegionFromUrl(URL_), "eu-west-1");
    assert.equal(awsRegionFromUrl("https://x.execute-api.cn-north-1.amazonaws.com.cn/"), "cn-north-1");
    assert.equal(awsRegionFromUrl("http://127.0.0.1:8000"), undefined);
  });

  it("signs exactly as the Python client (botocore) does", async () => {
    const signer = await sigv4Signer({ url: URL_, credentials, now: () => date });
    const cases: Case[] = [
      ["GET", `${URL_}/v1/memories?ns=user&ns=a%20b&ns=x%2Fy&key=k%2B%C3%A9`, { accept: "application/json" }, null],
      ["PUT", `${URL_}/v1/memories`, { "content-type": "application/json", "x-tenant-id": "acme" }, '{"namespace":["user","é"],"key":"k","value":{"a":1}}'],
      ["DELETE", `${URL_}/v1/memory/working/%2E%2E%2Fp/a%2Fb`, {}, null],
      ["GET", `${URL_}/v1/memories/namespaces?prefix=b&prefix=a&limit=10`, {}, null],
    ];
    const reference = await botocore(cases);
    for (const [n, [method, url, headers, body]] of cases.entries()) {
      const ours = await signer.sign({ method, url, headers, body: body ?? undefined });
      const theirs = reference[n];
      assert.equal(ours["x-amz-date"], theirs["x-amz-date"], url);
      assert.equal(ours["x-amz-security-token"], theirs["x-amz-security-token"], url);
      assert.equal(ours.authorization, theirs.authorization, `${method} ${url}`);
    }
  });

  it("signs every request (and retry) a MemsvcClient sends", async () => {
    const sent: Headers[] = [];
    const fetch = (async (_url: string | URL | Request, init?: RequestInit) => {
      sent.push(new Headers(init?.headers));
      return new Response(sent.length === 1 ? '{"error":{"code":"PROVIDER_ERROR","message":"x","retryable":true}}' : "{}", { status: sent.length === 1 ? 503 : 200 });
    }) as typeof globalThis.fetch;
    const signer = await sigv4Signer({ url: URL_, credentials, now: () => date });
    const client = new MemsvcClient({ url: URL_, signer, fetch, tenantId: "acme", sleep: async () => {} });
    await client.put(["user", "a"], "k", { v: 1 });
    assert.equal(sent.length, 2);
    for (const h of sent) {
      assert.match(h.get("authorization") ?? "", /^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE\/20261127\/eu-west-1\/execute-api\/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token;x-tenant-id, Signature=[0-9a-f]{64}$/);
      assert.equal(h.get("x-amz-security-token"), "session-token");
    }
  });

  it("uses the AWS SDK's default credential chain when given no credentials", async () => {
    const saved = { ...process.env };
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: "AKIDENV", AWS_SECRET_ACCESS_KEY: "secret", AWS_REGION: "us-east-2" });
    delete process.env.AWS_SESSION_TOKEN;
    delete process.env.AWS_PROFILE;
    try {
      const signer = await sigv4Signer();
      const headers = await signer.sign({ method: "GET", url: "https://memsvc.example.com/v1/memory/plans", headers: {}, body: undefined });
      assert.match(headers.authorization, /Credential=AKIDENV\/\d{8}\/us-east-2\/execute-api\/aws4_request/);
    } finally {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    }
  });
});
