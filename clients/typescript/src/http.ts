/**
 * The HTTP layer every method goes through: the global `fetch`, one authentication (a bearer
 * token or a request signer such as SigV4), bounded retries with jittered exponential back-off
 * that honour the envelope's `retryable` and `Retry-After`, a per-request timeout, and a gate on
 * the number of requests in flight. No Node-only API: it runs in browsers as well.
 */

import { MemsvcError, errorFromResponse, transportError } from "./errors.js";

/** Query parameters in order; a name may repeat (`ns=a&ns=b`). */
export type QueryParams = ReadonlyArray<readonly [string, string]>;

/** One request, before authentication. */
export interface Call {
  method: "GET" | "PUT" | "POST" | "DELETE";
  path: string;
  query?: QueryParams;
  body?: unknown;
  headers?: Record<string, string>;
  /** How to read a success: JSON (default) or text (`/metrics`). */
  as?: "json" | "text";
  /** Non-2xx statuses whose body is an answer, not an error (`/health`'s 503). */
  okStatuses?: readonly number[];
}

/** What a signer sees: the exact method, URL, headers and body bytes that will be sent. */
export interface SignableRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** Authentication: returns the headers to add to a request (called again for every retry). */
export interface RequestSigner {
  sign(request: SignableRequest): Promise<Record<string, string>> | Record<string, string>;
}

export type TokenSource = string | (() => string | Promise<string>);

/** `Authorization: Bearer <token>`; `token` may be a function returning a fresh one per request. */
export function bearerAuth(token: TokenSource): RequestSigner {
  return {
    async sign() {
      const value = typeof token === "function" ? await token() : token;
      return { authorization: `Bearer ${value}` };
    },
  };
}

export type Sleep = (ms: number) => Promise<void>;

export interface TransportOptions {
  /** The service's base URL (with the API Gateway stage, if any). Default: `MEMORY_SERVICE_URL`. */
  url?: string;
  /** A bearer token, or a function returning one. Default: `MEMORY_SERVICE_TOKEN` (unless `signer` is given). */
  token?: TokenSource;
  /** Sign requests instead of a bearer token, e.g. `await sigv4Signer({ region })` from `memsvc-client/sigv4`. */
  signer?: RequestSigner;
  /** Sent as `X-Tenant-Id` (IAM callers pick their tenant this way). */
  tenantId?: string;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** Per request attempt. Default 30 000 ms. */
  timeoutMs?: number;
  /** Retries of a retryable failure (so at most `maxRetries + 1` attempts). Default 3. */
  maxRetries?: number;
  /** First back-off; doubles per retry, jittered in [ceiling/2, ceiling], up to `maxBackoffMs`. Default 250 ms. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** A `Retry-After` longer than this is not waited for: the error is raised. Default 60 000 ms. */
  maxRetryAfterMs?: number;
  /** Requests in flight at once, however many calls are made concurrently. Default 8. */
  maxConcurrency?: number;
  /** Injectable for tests and other runtimes. Default: the global `fetch`. */
  fetch?: typeof fetch;
  /** Injectable for tests: how to wait between attempts. */
  sleep?: Sleep;
  /** Injectable for tests: the jitter's source, in [0, 1). */
  random?: () => number;
}

const defaultSleep: Sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function env(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const value = proc?.env?.[name];
  return value ? value : undefined;
}

/** RFC 3986 encoding (what SigV4's canonical form uses): everything but `A-Za-z0-9-_.~`. */
export function encodeRfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** One path segment: an id holding `/`, `%` or anything else arrives as it is, and dots are
 * encoded too, so `.` and `..` are not relative references that URL normalisation removes. */
export function pathSegment(part: string): string {
  return encodeRfc3986(part).replace(/\./g, "%2E");
}

class Gate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active += 1;
    try {
      return await fn();
    } finally {
      this.active -= 1;
      this.waiting.shift()?.();
    }
  }
}

export class Transport {
  readonly url: string;
  private readonly signer: RequestSigner;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly fetchImpl: typeof fetch;
  private readonly sleep: Sleep;
  private readonly random: () => number;
  private readonly gate: Gate;

  constructor(options: TransportOptions = {}) {
    const url = options.url ?? env("MEMORY_SERVICE_URL");
    if (!url) throw new TypeError("no service URL: pass { url } or set MEMORY_SERVICE_URL");
    this.url = url.replace(/\/+$/, "");
    if (options.signer) {
      this.signer = options.signer;
    } else {
      const token = options.token ?? env("MEMORY_SERVICE_TOKEN");
      if (token === undefined) {
        throw new TypeError(
          "no credentials: pass { token } or set MEMORY_SERVICE_TOKEN, or pass { signer } (SigV4: memsvc-client/sigv4)",
        );
      }
      this.signer = bearerAuth(token);
    }
    this.headers = { accept: "application/json", ...lowerKeys(options.headers ?? {}) };
    if (options.tenantId) this.headers["x-tenant-id"] = options.tenantId;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = Math.max(0, options.maxRetries ?? 3);
    this.backoffMs = options.backoffMs ?? 250;
    this.maxBackoffMs = options.maxBackoffMs ?? 8_000;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? 60_000;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: this runtime has no global fetch; pass { fetch }");
    this.fetchImpl = f;
    this.sleep = options.sleep ?? defaultSleep;
    this.random = options.random ?? Math.random;
    this.gate = new Gate(Math.max(1, options.maxConcurrency ?? 8));
  }

  /** Milliseconds to wait before retry number `attempt + 1`, or null to give up. */
  retryDelay(error: MemsvcError, attempt: number): number | null {
    if (!error.retryable || attempt >= this.maxRetries) return null;
    if (error.retryAfter !== null) {
      const ms = error.retryAfter * 1000;
      return ms <= this.maxRetryAfterMs ? ms : null;
    }
    const ceiling = Math.min(this.maxBackoffMs, this.backoffMs * 2 ** attempt);
    return ceiling / 2 + this.random() * (ceiling / 2);
  }

  /** Send `call`, retrying what may be retried; the decoded answer (undefined for an empty body). */
  async request<T = unknown>(call: Call): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      let error: MemsvcError;
      try {
        return (await this.gate.run(() => this.once(call))) as T;
      } catch (e) {
        if (!(e instanceof MemsvcError)) throw e;
        error = e;
      }
      const delay = this.retryDelay(error, attempt);
      if (delay === null) throw error;
      await this.sleep(delay);
    }
  }

  private async once(call: Call): Promise<unknown> {
    let url = this.url + call.path;
    if (call.query && call.query.length) {
      url += "?" + call.query.map(([k, v]) => `${encodeRfc3986(k)}=${encodeRfc3986(v)}`).join("&");
    }
    const headers: Record<string, string> = { ...this.headers, ...lowerKeys(call.headers ?? {}) };
    let body: string | undefined;
    if (call.body !== undefined) {
      body = JSON.stringify(call.body);
      headers["content-type"] = "application/json";
    }
    if (call.as === "text") headers.accept = "text/plain, */*";
    Object.assign(headers, lowerKeys(await this.signer.sign({ method: call.method, url, headers: { ...headers }, body })));
    delete headers.host; // fetch sets it from the URL (and may not be given one)
    let response: Response;
    let text: string;
    try {
      response = await this.fetchImpl(url, {
        method: call.method,
        headers,
        body,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await response.text();
    } catch (e) {
      throw transportError(e);
    }
    if (!response.ok && !(call.okStatuses ?? []).includes(response.status)) {
      throw errorFromResponse(response.status, response.statusText, response.headers, text);
    }
    if (call.as === "text") return text;
    if (!text) return undefined;
    try {
      return JSON.parse(text);
    } catch (e) {
      throw new MemsvcError("INVALID_RESPONSE", `the answer is not JSON: ${text.slice(0, 200)}`, {
        status: response.status,
        requestId: response.headers.get("x-request-id"),
        cause: e,
      });
    }
  }
}

function lowerKeys(h: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) out[k.toLowerCase()] = v;
  return out;
}
