// The README's quick start: run it with MEMORY_SERVICE_URL and MEMORY_SERVICE_TOKEN set.
//   node examples/quickstart.mjs
import { MemsvcClient, NotFoundError } from "memsvc-client";
import { MemsvcStore } from "memsvc-client/store";

const client = new MemsvcClient(); // MEMORY_SERVICE_URL + MEMORY_SERVICE_TOKEN

// Typed memories: remember consolidates, recall ranks across layers within a token budget.
const { action } = await client.remember("I prefer window seats on long flights", { type: "preference" });
const { memories } = await client.recall("seat preference on flights", { token_budget: 200 });
console.log(action, "->", memories.map((m) => m.content));

// LangGraph.js's BaseStore over the same service (and the same transport).
const store = new MemsvcStore({ client });
await store.put(["user", "alice", "notes"], "tea", { text: "Alice drinks green tea every morning" });
const [hit] = await store.search(["user", "alice"], { query: "what does alice drink?" });
console.log(hit.key, hit.value.text, hit.score.toFixed(2));

// Errors carry the service's envelope.
try {
  await client.get(["user", "alice", "notes"], "coffee");
} catch (e) {
  if (!(e instanceof NotFoundError)) throw e;
  console.log(e.code, e.status, e.requestId);
}
