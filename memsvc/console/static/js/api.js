/**
 * The console's only way to the service: the public HTTP API, as any client calls it, with the
 * signed-in user's bearer token. Errors arrive as the service's envelope and stay that way.
 */
export class ApiError extends Error {
    status;
    envelope;
    constructor(status, envelope) {
        super(envelope.message);
        this.status = status;
        this.envelope = envelope;
    }
}
export class Api {
    base;
    token;
    /** Called when the service refuses the token (a 401: it expired, or was revoked). */
    onUnauthorized = () => undefined;
    constructor(base, token) {
        this.base = base;
        this.token = token;
    }
    get(path, query) {
        return this.call("GET", path, { query });
    }
    post(path, body, query) {
        return this.call("POST", path, { body, query });
    }
    put(path, body, query) {
        return this.call("PUT", path, { body, query });
    }
    /** A response that is not JSON (`/metrics`): its text. */
    async text(path) {
        const response = await fetch(this.base + path, { headers: this.headers(false) });
        if (!response.ok)
            throw await this.refused(response);
        return response.text();
    }
    async call(method, path, options = {}) {
        const response = await fetch(this.base + path + queryString(options.query), {
            method,
            headers: this.headers(options.body !== undefined),
            body: options.body === undefined ? undefined : JSON.stringify(options.body),
            credentials: "omit",
            cache: "no-store",
        });
        if (!response.ok)
            throw await this.refused(response);
        if (response.status === 204)
            return undefined;
        return (await response.json());
    }
    async refused(response) {
        const error = await toError(response);
        if (error.status === 401)
            this.onUnauthorized(error);
        return error;
    }
    headers(json) {
        const headers = { accept: "application/json" };
        const token = this.token();
        if (token)
            headers.authorization = `Bearer ${token}`;
        if (json)
            headers["content-type"] = "application/json";
        return headers;
    }
}
/** `{ns: ["user","alice"], limit: 10}` -> `?ns=user&ns=alice&limit=10` (repeated keys for lists, as the API reads them). */
function queryString(query) {
    if (!query)
        return "";
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) {
        if (value === undefined || value === null || value === "")
            continue;
        if (Array.isArray(value))
            for (const v of value)
                params.append(key, v);
        else
            params.append(key, String(value));
    }
    const text = params.toString();
    return text ? `?${text}` : "";
}
async function toError(response) {
    try {
        const body = await response.json();
        if (body && typeof body.error === "object")
            return new ApiError(response.status, body.error);
    }
    catch {
        // not the envelope: say what we know
    }
    return new ApiError(response.status, { code: `HTTP_${response.status}`, message: response.statusText || "request failed", retryable: false, details: {} });
}
/**
 * A namespace typed by a person: `user/alice/notes`, or a JSON array of segments when a segment
 * holds a `/` (`["user", "a/b"]`). Empty text is the empty prefix. Throws an Error to show.
 */
export function parseNamespace(text) {
    const trimmed = text.trim();
    if (!trimmed.startsWith("["))
        return trimmed.split("/").map((s) => s.trim()).filter(Boolean);
    let parsed;
    try {
        parsed = JSON.parse(trimmed);
    }
    catch {
        throw new Error("The namespace is not a JSON array of strings.");
    }
    if (!Array.isArray(parsed) || !parsed.every((s) => typeof s === "string")) {
        throw new Error("The namespace is not a JSON array of strings.");
    }
    return parsed;
}
/** A namespace as a person reads it: segments joined by `/`. */
export function formatNamespace(namespace) {
    return namespace.join("/");
}
/** The route of one memory's page: `#/memory?ns=<JSON array>&key=<key>`. */
export function memoryHref(namespace, key) {
    return `#/memory?${new URLSearchParams({ ns: JSON.stringify(namespace), key })}`;
}
/** The filter textarea: empty, or a JSON object. Checked here so a typo never reaches the API. */
export function parseFilter(text) {
    if (!text.trim())
        return undefined;
    let parsed;
    try {
        parsed = JSON.parse(text);
    }
    catch {
        throw new Error("The filter is not valid JSON.");
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
        throw new Error("The filter must be a JSON object, e.g. {\"lang\": \"python\"}.");
    }
    return parsed;
}
/** An error as the page shows it: the API's code and message in the service's words, or ours. */
export function errorText(error) {
    if (error instanceof ApiError)
        return `${error.envelope.code}: ${error.message}`;
    if (error instanceof TypeError)
        return "The service did not answer.";
    if (error instanceof Error)
        return error.message;
    return "Something went wrong.";
}
