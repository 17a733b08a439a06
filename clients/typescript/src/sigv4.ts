/**
 * SigV4 for API Gateway's IAM authorizer (service `execute-api`), as an optional signer:
 *
 *   import { MemsvcClient } from "memsvc-client";
 *   import { sigv4Signer } from "memsvc-client/sigv4";
 *   const client = new MemsvcClient({ url, signer: await sigv4Signer({ url }) });
 *
 * Signs with `@smithy/signature-v4` and `@aws-crypto/sha256-js`; without `credentials`, the AWS
 * SDK's default chain (`@aws-sdk/credential-provider-node`: environment, shared config and SSO,
 * web identity, container or instance role), loaded only then. The signature covers the method,
 * the exact URL (path and query as sent), the body bytes and the headers `host`,
 * `content-type` and every `x-*` header (so `X-Tenant-Id` cannot be swapped), as the Python
 * client's `AwsSigV4Auth` does.
 */

import { Sha256 } from "@aws-crypto/sha256-js";
import { SignatureV4 } from "@smithy/signature-v4";
import type { RequestSigner, SignableRequest } from "./http.js";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

export type AwsCredentialsProvider = () => Promise<AwsCredentials>;

export interface SigV4Options {
  /** The region; default: the one in an `execute-api.<region>.amazonaws.com` URL, then `AWS_REGION`. */
  region?: string;
  /** The service URL, to read the region from. */
  url?: string;
  /** Fixed credentials or a provider; default: the AWS SDK's default provider chain. */
  credentials?: AwsCredentials | AwsCredentialsProvider;
  /** Default `execute-api`. */
  service?: string;
  /** The signing time (tests). */
  now?: () => Date;
}

const EXECUTE_API_HOST = /\.execute-api\.([a-z0-9-]+)\.(?:vpce\.)?amazonaws\.com(?:\.cn)?$/;

/** `eu-west-1` for `https://<id>.execute-api.eu-west-1.amazonaws.com/...`, else undefined. */
export function awsRegionFromUrl(url: string): string | undefined {
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
  return EXECUTE_API_HOST.exec(host)?.[1];
}

function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env?.[name] || undefined;
}

/** A `RequestSigner` that signs every request (and every retry) with SigV4. */
export async function sigv4Signer(options: SigV4Options = {}): Promise<RequestSigner> {
  const region = options.region ?? (options.url ? awsRegionFromUrl(options.url) : undefined) ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION");
  if (!region) throw new TypeError("SigV4 needs a region: pass { region } (the URL does not name one)");
  let credentials = options.credentials;
  if (credentials === undefined) {
    const { defaultProvider } = await import("@aws-sdk/credential-provider-node");
    credentials = defaultProvider() as AwsCredentialsProvider;
  }
  const signer = new SignatureV4({
    credentials,
    region,
    service: options.service ?? "execute-api",
    sha256: Sha256,
    applyChecksum: false, // API Gateway needs no x-amz-content-sha256 (botocore sends none either)
  });
  const now = options.now;
  return {
    async sign(request: SignableRequest): Promise<Record<string, string>> {
      const url = new URL(request.url);
      const query: Record<string, string | string[]> = {};
      for (const [name, value] of url.searchParams) {
        const had = query[name];
        query[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
      }
      const headers: Record<string, string> = { host: url.host };
      for (const [name, value] of Object.entries(request.headers)) {
        const n = name.toLowerCase();
        if ((n === "content-type" || n.startsWith("x-")) && !n.startsWith("x-amz-")) headers[n] = value;
      }
      const signed = await signer.sign(
        {
          method: request.method,
          protocol: url.protocol,
          hostname: url.hostname,
          port: url.port ? Number(url.port) : undefined,
          path: url.pathname,
          query,
          headers,
          body: request.body,
        },
        now ? { signingDate: now() } : undefined,
      );
      const out: Record<string, string> = {};
      for (const [name, value] of Object.entries(signed.headers)) {
        const n = name.toLowerCase();
        if (n === "authorization" || n.startsWith("x-amz-")) out[n] = String(value);
      }
      return out;
    },
  };
}
