/**
 * The console's only way to the service: the public HTTP API, as any client calls it, with the
 * signed-in user's bearer token. Errors arrive as the service's envelope and stay that way.
 */

export interface ErrorEnvelope {
  code: string;
  message: string;
  retryable: boolean;
  details: Record<string, unknown>;
}

export class ApiError extends Error {
  constructor(readonly status: number, readonly envelope: ErrorEnvelope) {
    super(envelope.message);
  }
}

export type Query = Record<string, string | number | boolean | string[] | undefined | null>;

export class Api {
  /** Called when the service refuses the token (a 401: it expired, or was revoked). */
  onUnauthorized: (error: ApiError) => void = () => undefined;

  constructor(private readonly base: string, private readonly token: () => string | null) {}

  get<T>(path: string, query?: Query): Promise<T> {
    return this.call<T>("GET", path, { query });
  }

  post<T>(path: string, body: unknown, query?: Query): Promise<T> {
    return this.call<T>("POST", path, { body, query });
  }

  put<T>(path: string, body: unknown, query?: Query): Promise<T> {
    return this.call<T>("PUT", path, { body, query });
  }

  /** A response that is not JSON (`/metrics`): its text. */
  async text(path: string): Promise<string> {
    const response = await fetch(this.base + path, { headers: this.headers(false) });
    if (!response.ok) throw await this.refused(response);
    return response.text();
  }

  async call<T>(method: string, path: string, options: { body?: unknown; query?: Query } = {}): Promise<T> {
    const response = await fetch(this.base + path + queryString(options.query), {
      method,
      headers: this.headers(options.body !== undefined),
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      credentials: "omit",
      cache: "no-store",
    });
    if (!response.ok) throw await this.refused(response);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  private async refused(response: Response): Promise<ApiError> {
    const error = await toError(response);
    if (error.status === 401) this.onUnauthorized(error);
    return error;
  }

  private headers(json: boolean): Record<string, string> {
    const headers: Record<string, string> = { accept: "application/json" };
    const token = this.token();
    if (token) headers.authorization = `Bearer ${token}`;
    if (json) headers["content-type"] = "application/json";
    return headers;
  }
}

/** `{ns: ["user","alice"], limit: 10}` -> `?ns=user&ns=alice&limit=10` (repeated keys for lists, as the API reads them). */
function queryString(query?: Query): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) for (const v of value) params.append(key, v);
    else params.append(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

async function toError(response: Response): Promise<ApiError> {
  try {
    const body = await response.json();
    if (body && typeof body.error === "object") return new ApiError(response.status, body.error as ErrorEnvelope);
  } catch {
    // not the envelope: say what we know
  }
  return new ApiError(response.status, { code: `HTTP_${response.status}`, message: response.statusText || "request failed", retryable: false, details: {} });
}

/**
 * A namespace typed by a person: `user/alice/notes`, or a JSON array of segments when a segment
 * holds a `/` (`["user", "a/b"]`). Empty text is the empty prefix. Throws an Error to show.
 */
export function parseNamespace(text: string): string[] {
  const trimmed = text.trim();
  if (!trimmed.startsWith("[")) return trimmed.split("/").map((s) => s.trim()).filter(Boolean);
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    throw new Error("The namespace is not a JSON array of strings.");
  }
  if (!Array.isArray(parsed) || !parsed.every((s) => typeof s === "string")) {
    throw new Error("The namespace is not a JSON array of strings.");
  }
  return parsed;
}

/** A namespace as a person reads it: segments joined by `/`. */
export function formatNamespace(namespace: string[]): string {
  return namespace.join("/");
}

/** The route of one memory's page: `#/memory?ns=<JSON array>&key=<key>`. */
export function memoryHref(namespace: string[], key: string): string {
  return `#/memory?${new URLSearchParams({ ns: JSON.stringify(namespace), key })}`;
}

/** The filter textarea: empty, or a JSON object. Checked here so a typo never reaches the API. */
export function parseFilter(text: string): Record<string, unknown> | undefined {
  if (!text.trim()) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error("The filter is not valid JSON.");
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new Error("The filter must be a JSON object, e.g. {\"lang\": \"python\"}.");
  }
  return parsed as Record<string, unknown>;
}

/** An error as the page shows it: the API's code and message in the service's words, or ours. */
export function errorText(error: unknown): string {
  if (error instanceof ApiError) return `${error.envelope.code}: ${error.message}`;
  if (error instanceof TypeError) return "The service did not answer.";
  if (error instanceof Error) return error.message;
  return "Something went wrong.";
}
