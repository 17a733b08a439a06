/**
 * memsvc-client: the memsvc HTTP API for TypeScript (Node 20+ and browsers).
 *
 *   import { MemsvcClient } from "memsvc-client";
 *   const client = new MemsvcClient({ url: "http://127.0.0.1:8000", token });
 *
 * The LangGraph.js store is `memsvc-client/store` (needs `@langchain/langgraph-checkpoint`);
 * the SigV4 signer is `memsvc-client/sigv4` (needs the AWS SDK packages), so neither weighs on
 * a browser bundle that does not use it.
 */

export { MemsvcClient, type MemsvcClientOptions } from "./client.js";
export {
  Transport,
  bearerAuth,
  encodeRfc3986,
  pathSegment,
  type Call,
  type QueryParams,
  type RequestSigner,
  type SignableRequest,
  type Sleep,
  type TokenSource,
  type TransportOptions,
} from "./http.js";
export {
  AuthError,
  ConflictError,
  InvalidArgumentError,
  MemsvcError,
  NotFoundError,
  PreconditionFailedError,
  TransientError,
  errorFromResponse,
  parseRetryAfter,
  type ErrorEnvelope,
  type MemsvcErrorInit,
} from "./errors.js";
export type * from "./types.js";
