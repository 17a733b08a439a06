/**
 * The graph explorer's data: what /v1/graph/neighbours, /v1/graph/related and /v1/graph/path answer
 * (docs/graph.md), merged into one set of entities and edges. `neighbours` names an entity's
 * relations, each with the entity at its other end and the memory that justifies it; `related`
 * names the memories that name an entity; `path` names the relations between two entities. The
 * explorer asks the centre's neighbours, then their neighbours for depth 2.
 */
/** Entities one exploration holds, as many as the drawing shows. */
const MAX_ENTITIES = 100;
/** Entities whose neighbours are asked per exploration, so the page stays bounded whatever the graph holds. */
const MAX_EXPANDED = 40;
/** Pages of one entity's neighbours read at most (a page may be short and still have a next one). */
const MAX_PAGES = 5;
const PARALLEL_QUERIES = 4;
function edgeKey(edge) {
    return `${edge.source}\u0000${edge.type}\u0000${edge.target}`;
}
export function emptyModel(centre) {
    return { centre, entities: new Map([[centre.id, centre]]), edges: new Map(), memoriesOf: new Map(), truncated: false, unexplored: 0 };
}
/** Adds a path's entities and relations; answers the keys of the edges on it. */
export function mergePath(model, path) {
    const onPath = [];
    if (path.truncated)
        model.truncated = true;
    if (!path.found)
        return onPath;
    for (const entity of path.entities)
        if (!model.entities.has(entity.id))
            model.entities.set(entity.id, entity);
    for (const step of path.steps) {
        for (const entity of [step.source, step.target])
            if (!model.entities.has(entity.id))
                model.entities.set(entity.id, entity);
        for (const edge of step.edges) {
            onPath.push(addEdge(model, edge));
        }
    }
    return onPath;
}
/**
 * Adds the neighbours of `from` (an entity of the model) and the relations to them; an entity past
 * MAX_ENTITIES is left out with its relations. Answers the entities that were new.
 */
export function mergeNeighbours(model, from, neighbours) {
    const added = [];
    for (const n of neighbours) {
        if (!model.entities.has(n.entity.id)) {
            if (model.entities.size >= MAX_ENTITIES) {
                model.truncated = true;
                continue;
            }
            model.entities.set(n.entity.id, n.entity);
            added.push(n.entity);
        }
        const [source, target] = n.direction === "out" ? [from, n.entity.id] : [n.entity.id, from];
        addEdge(model, { source, type: n.relation, target, namespace: n.namespace, memory: n.memory, valid_from: n.valid_from, valid_to: n.valid_to });
    }
    return added;
}
function addEdge(model, edge) {
    const key = edgeKey(edge);
    let group = model.edges.get(key);
    if (!group) {
        group = { key, source: edge.source, type: edge.type, target: edge.target, relations: [] };
        model.edges.set(key, group);
    }
    if (!group.relations.some((r) => sameRelation(r, edge)))
        group.relations.push(edge);
    return key;
}
function sameRelation(a, b) {
    return a.namespace.join("\u0000") === b.namespace.join("\u0000") && a.memory?.id === b.memory?.id;
}
/**
 * The neighbourhood of `centre` within `depth` relations: its neighbours, then theirs, at most
 * MAX_EXPANDED entities asked and MAX_ENTITIES kept; and the memories that name the centre.
 */
export async function explore(api, prefix, centre, depth) {
    const model = emptyModel(centre);
    const expand = async () => {
        let frontier = [centre];
        let expanded = 0;
        for (let level = 1; level <= depth && frontier.length; level += 1) {
            const asked = frontier.slice(0, MAX_EXPANDED - expanded);
            expanded += asked.length;
            model.unexplored += frontier.length - asked.length;
            const answers = await inParallel(asked, PARALLEL_QUERIES, (entity) => neighboursOf(api, prefix, entity));
            frontier = asked.flatMap((entity, at) => {
                if (answers[at].more)
                    model.truncated = true;
                return mergeNeighbours(model, entity.id, answers[at].edges);
            });
        }
    };
    const [related] = await Promise.all([
        api.post("/v1/graph/related", { namespace_prefix: prefix, from: { entity: centre.name }, max_hops: 1, limit: 100 }),
        expand(),
    ]);
    if (related.truncated)
        model.truncated = true;
    model.memoriesOf.set(centre.id, related.memories);
    return model;
}
/** An entity's relations, following next_cursor for at most MAX_PAGES pages; `more`: some were left. */
async function neighboursOf(api, prefix, entity) {
    const edges = [];
    let cursor = null;
    for (let page = 0; page < MAX_PAGES; page += 1) {
        const answer = await api.post("/v1/graph/neighbours", {
            namespace_prefix: prefix, entity: { entity: entity.name }, limit: 100, ...(cursor ? { cursor } : {}),
        });
        edges.push(...answer.edges);
        cursor = answer.next_cursor;
        if (!cursor)
            return { edges, more: false };
    }
    return { edges, more: true };
}
/** `work` over `items`, at most `width` at a time; the answers in the items' order. */
export async function inParallel(items, width, work) {
    const results = new Array(items.length);
    let next = 0;
    const worker = async () => {
        while (next < items.length) {
            const index = next;
            next += 1;
            results[index] = await work(items[index]);
        }
    };
    await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
    return results;
}
