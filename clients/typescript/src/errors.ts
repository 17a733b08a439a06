/**
 * Errors: every failure is a `MemsvcError` carrying the service's error envelope
 * (`{"error": {"code", "message", "retryable", "details"}}`), the HTTP status and the request id.
 * Subclasses name the common cases, as the Python client's do.
 */

/** The service's error body, as sent. */
export interface ErrorEnvelope {
  error: {
    code: string;
    message: string;
    retryable?: boolean;
    details?: Record<string, unknown>;
  };
}

export interface MemsvcErrorInit {
  status?: number | null;
  details?: Record<string, unknown>;
  retryable?: boolean;
  retryAfter?: number | null;
  requestId?: string | null;
  envelope?: ErrorEnvelope | null;
  cause?: unknown;
}

/** An error answer from memsvc, or no answer at all (`status` null, code `UNAVAILABLE`). */
export class MemsvcError extends Error {
  /** The API's error code: `INVALID_ARGUMENT`, `NOT_FOUND`, `RATE_LIMITED`, ... */
  readonly code: string;
  /** The HTTP status, or null when the request never got a response. */
  readonly status: number | null;
  readonly details: Record<string, unknown>;
  /** Whether sending the same request again may succeed (the envelope's flag, or 429/502/503/504). */
  readonly retryable: boolean;
  /** Seconds the service asked to wait (`Retry-After`), when it did. */
  readonly retryAfter: number | null;
  /** The service's `x-request-id` for this answer (quote it in a bug report). */
  readonly requestId: string | null;
  /** The error body exactly as the service sent it (null when it sent none). */
  readonly envelope: ErrorEnvelope | null;

  constructor(code: string, message: string, init: MemsvcErrorInit = {}) {
    const status = init.status ?? null;
    super(`${code}: ${message}${status !== null ? ` (HTTP ${status})` : ""}`, init.cause !== undefined ? { cause: init.cause } : undefined);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.details = init.details ?? {};
    this.retryable = init.retryable ?? false;
    this.retryAfter = init.retryAfter ?? null;
    this.requestId = init.requestId ?? null;
    this.envelope = init.envelope ?? null;
    // `message` holds the service's message alone; `toString()` keeps the code and status.
    Object.defineProperty(this, "message", { value: message, enumerable: false, writable: true, configurable: true });
  }

  override toString(): string {
    return `${this.name}: ${this.code}: ${this.message}${this.status !== null ? ` (HTTP ${this.status})` : ""}`;
  }
}

/** 400 INVALID_ARGUMENT (and other 400 codes) or 413 CONTENT_TOO_LONG: the request itself is wrong. */
export class InvalidArgumentError extends MemsvcError {}
/** 401 UNAUTHORIZED or 403 FORBIDDEN. */
export class AuthError extends MemsvcError {}
/** 404 NOT_FOUND. */
export class NotFoundError extends MemsvcError {}
/** 409 CONFLICT: the id is taken. */
export class ConflictError extends MemsvcError {}
/** 412 PRECONDITION_FAILED: the object is no longer at the version `ifMatch` named. */
export class PreconditionFailedError extends MemsvcError {}
/** A retryable failure that outlived the retries: 429, 502/503/504, `retryable: true`, or no response. */
export class TransientError extends MemsvcError {}

export const RETRY_STATUS: ReadonlySet<number> = new Set([429, 502, 503, 504]);

const CODE_OF_STATUS: Record<number, string> = {
  400: "INVALID_ARGUMENT",
  401: "UNAUTHORIZED",
  403: "FORBIDDEN",
  404: "NOT_FOUND",
  405: "METHOD_NOT_ALLOWED",
  409: "CONFLICT",
  412: "PRECONDITION_FAILED",
  413: "CONTENT_TOO_LONG",
  429: "RATE_LIMITED",
};

/** Seconds from a `Retry-After` header (delta-seconds or an HTTP date); null when absent or unreadable. */
export function parseRetryAfter(raw: string | null | undefined, now: () => number = Date.now): number | null {
  if (!raw) return null;
  const trimmed = raw.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.max(0, Number(trimmed));
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return null;
  return Math.max(0, (at - now()) / 1000);
}

/** The typed error for an HTTP answer that is not a success. `text` is the raw body. */
export function errorFromResponse(status: number, statusText: string, headers: Headers, text: string): MemsvcError {
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  const requestId = headers.get("x-request-id");
  const retryAfter = parseRetryAfter(headers.get("retry-after"));
  const err = isObject(body) && isObject(body.error) ? body.error : null;
  let code: string;
  let message: string;
  let details: Record<string, unknown> = {};
  let retryable: boolean;
  let envelope: ErrorEnvelope | null = null;
  if (err) {
    code = typeof err.code === "string" && err.code ? err.code : `HTTP_${status}`;
    message = typeof err.message === "string" && err.message ? err.message : statusText;
    details = isObject(err.details) ? err.details : {};
    retryable = err.retryable === true || RETRY_STATUS.has(status);
    envelope = body as ErrorEnvelope;
  } else {
    // e.g. API Gateway's own {"message": "Forbidden"}
    code = CODE_OF_STATUS[status] ?? `HTTP_${status}`;
    message = (isObject(body) && typeof body.message === "string" ? body.message : "") || text.slice(0, 200) || statusText;
    retryable = RETRY_STATUS.has(status);
  }
  const init: MemsvcErrorInit = { status, details, retryable, retryAfter, requestId, envelope };
  if (status === 400 || status === 413) return new InvalidArgumentError(code, message, init);
  if (status === 401 || status === 403) return new AuthError(code, message, init);
  if (status === 404) return new NotFoundError(code, message, init);
  if (status === 409) return new ConflictError(code, message, init);
  if (status === 412) return new PreconditionFailedError(code, message, init);
  if (retryable) return new TransientError(code, message, init);
  return new MemsvcError(code, message, init);
}

/** No answer at all (connection refused, reset, timed out): retryable, code `UNAVAILABLE`. */
export function transportError(cause: unknown): TransientError {
  const what = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
  return new TransientError("UNAVAILABLE", what, { retryable: true, cause });
}

function isObject(v: unknown): v is Record<string, any> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
