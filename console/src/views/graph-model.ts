/**
 * The graph explorer's data: what /v1/graph/related and /v1/graph/path answer (docs/graph.md),
 * merged into one set of entities and edges. `related` names the memories near an entity and the
 * nearest entity each names (`via`); `path` names the relations between two entities, each with the
 * memory that justifies it. The explorer asks `related`, then a path to each entity it found.
 */

import type { Api } from "../api.js";

export interface GraphEntity {
  id: string;
  name: string;
  type: string;
  namespaces: string[][];
  explicit: boolean;
}

export interface JustifyingMemory {
  namespace: string[];
  key: string;
  id: string;
}

export interface GraphEdge {
  source: string;
  type: string;
  target: string;
  namespace: string[];
  memory: JustifyingMemory | null;
  valid_from?: string | null;
  valid_to?: string | null;
}

export interface PathStep {
  source: GraphEntity;
  target: GraphEntity;
  edges: GraphEdge[];
}

export interface PathAnswer {
  found: boolean;
  hops: number;
  entities: GraphEntity[];
  steps: PathStep[];
  truncated: boolean;
}

export interface RelatedMemory {
  id: string;
  namespace: string[];
  key: string;
  hops: number;
  via: GraphEntity;
}

export interface RelatedAnswer {
  memories: RelatedMemory[];
  depth: number;
  truncated: boolean;
}

/** One drawn edge: every relation of one type from one entity to another, with each one's memory. */
export interface EdgeGroup {
  key: string;
  source: string;
  type: string;
  target: string;
  relations: GraphEdge[];
}

export interface GraphModel {
  centre: GraphEntity;
  entities: Map<string, GraphEntity>;
  edges: Map<string, EdgeGroup>;
  /** Memories whose nearest entity (from the centre) is this one. */
  memoriesOf: Map<string, RelatedMemory[]>;
  /** A traversal limit cut an answer: there may be more. */
  truncated: boolean;
  /** Entities whose path was not asked, for the cap on path queries. */
  unexplored: number;
}

/** Paths asked per exploration: each is one query, so the page stays bounded whatever `related` answers. */
const MAX_PATH_QUERIES = 40;
const PARALLEL_QUERIES = 4;

function edgeKey(edge: { source: string; type: string; target: string }): string {
  return `${edge.source}\u0000${edge.type}\u0000${edge.target}`;
}

export function emptyModel(centre: GraphEntity): GraphModel {
  return { centre, entities: new Map([[centre.id, centre]]), edges: new Map(), memoriesOf: new Map(), truncated: false, unexplored: 0 };
}

/** Adds a path's entities and relations; answers the keys of the edges on it. */
export function mergePath(model: GraphModel, path: PathAnswer): string[] {
  const onPath: string[] = [];
  if (path.truncated) model.truncated = true;
  if (!path.found) return onPath;
  for (const entity of path.entities) if (!model.entities.has(entity.id)) model.entities.set(entity.id, entity);
  for (const step of path.steps) {
    for (const entity of [step.source, step.target]) if (!model.entities.has(entity.id)) model.entities.set(entity.id, entity);
    for (const edge of step.edges) {
      const key = edgeKey(edge);
      let group = model.edges.get(key);
      if (!group) {
        group = { key, source: edge.source, type: edge.type, target: edge.target, relations: [] };
        model.edges.set(key, group);
      }
      if (!group.relations.some((r) => sameRelation(r, edge))) group.relations.push(edge);
      onPath.push(key);
    }
  }
  return onPath;
}

function sameRelation(a: GraphEdge, b: GraphEdge): boolean {
  return a.namespace.join("\u0000") === b.namespace.join("\u0000") && a.memory?.id === b.memory?.id;
}

/**
 * The neighbourhood of `centre` within `depth` relations: the memories `related` finds, the
 * entities they reach it through, and a path to each of those and to `alsoTry` (entities the user
 * found by name), at most MAX_PATH_QUERIES of them.
 */
export async function explore(api: Api, prefix: string[], centre: GraphEntity, depth: number,
                              alsoTry: GraphEntity[]): Promise<GraphModel> {
  const model = emptyModel(centre);
  const related = await api.post<RelatedAnswer>("/v1/graph/related", {
    namespace_prefix: prefix, from: { entity: centre.name }, max_hops: depth + 1, limit: 100,
  });
  model.truncated = related.truncated;
  const targets = new Map<string, GraphEntity>();
  for (const memory of related.memories) {
    const list = model.memoriesOf.get(memory.via.id) ?? [];
    list.push(memory);
    model.memoriesOf.set(memory.via.id, list);
    if (memory.via.id !== centre.id) targets.set(memory.via.id, memory.via);
  }
  for (const entity of alsoTry) if (entity.id !== centre.id) targets.set(entity.id, entity);
  const asked = [...targets.values()].slice(0, MAX_PATH_QUERIES);
  model.unexplored = targets.size - asked.length;
  const answers = await inParallel(asked, PARALLEL_QUERIES, (target) => api.post<PathAnswer>("/v1/graph/path", {
    namespace_prefix: prefix, from: { entity: centre.name }, to: { entity: target.name }, max_hops: depth,
  }));
  for (const answer of answers) mergePath(model, answer);
  return model;
}

/** `work` over `items`, at most `width` at a time; the answers in the items' order. */
export async function inParallel<T, R>(items: T[], width: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next;
      next += 1;
      results[index] = await work(items[index]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return results;
}
