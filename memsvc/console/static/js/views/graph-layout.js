/**
 * A small deterministic layout for the graph explorer: the centre entity in the middle, every other
 * entity on the ring of its distance (edges walked in either direction), each ring ordered by the
 * angle of its nearest parent so that branches stay together. Same input, same picture. Pure.
 */
/** Breadth-first distances from `centre` over `edges` in either direction; O(nodes + edges). */
export function distances(centre, nodes, edges) {
    const neighbours = new Map();
    for (const node of nodes)
        neighbours.set(node, []);
    for (const edge of edges) {
        neighbours.get(edge.source)?.push(edge.target);
        neighbours.get(edge.target)?.push(edge.source);
    }
    const distance = new Map();
    if (!neighbours.has(centre))
        return distance;
    distance.set(centre, 0);
    const queue = [centre];
    for (let head = 0; head < queue.length; head += 1) {
        const node = queue[head];
        for (const next of neighbours.get(node) ?? []) {
            if (distance.has(next))
                continue;
            distance.set(next, (distance.get(node) ?? 0) + 1);
            queue.push(next);
        }
    }
    return distance;
}
/**
 * Positions for `nodes` (ids; their order breaks ties, so pass them sorted the way labels should
 * read) inside `width` x `height`, the centre in the middle: a radial tree, each entity in a wedge
 * of its parent's (sized by the leaves below it), so that the tree's edges never cross.
 */
export function radialLayout(centre, nodes, edges, options) {
    const distance = distances(centre, nodes, edges);
    const unreachable = Math.max(0, ...distance.values()) + 1;
    for (const node of nodes)
        if (!distance.has(node))
            distance.set(node, unreachable);
    const order = new Map(nodes.map((node, index) => [node, index]));
    const byOrder = (a, b) => order.get(a) - order.get(b);
    const ranked = [...nodes].sort((a, b) => (distance.get(a) - distance.get(b)) || byOrder(a, b));
    const kept = ranked.slice(0, Math.max(0, options.maxNodes));
    const keptSet = new Set(kept);
    const positions = new Map();
    if (!keptSet.has(centre))
        return { positions, distance, kept, dropped: nodes.length - kept.length };
    // Each entity's parent: its first neighbour one ring in; an unconnected one hangs off the centre.
    const parent = new Map();
    for (const edge of edges) {
        if (!keptSet.has(edge.source) || !keptSet.has(edge.target))
            continue;
        for (const [child, candidate] of [[edge.target, edge.source], [edge.source, edge.target]]) {
            if (distance.get(candidate) !== distance.get(child) - 1)
                continue;
            const known = parent.get(child);
            if (known === undefined || byOrder(candidate, known) < 0)
                parent.set(child, candidate);
        }
    }
    const children = new Map(kept.map((node) => [node, []]));
    for (const node of kept) {
        if (node === centre)
            continue;
        children.get(parent.get(node) ?? centre).push(node);
    }
    for (const list of children.values())
        list.sort(byOrder);
    const leaves = new Map();
    for (const node of [...kept].reverse()) {
        leaves.set(node, Math.max(1, children.get(node).reduce((sum, child) => sum + leaves.get(child), 0)));
    }
    const rings = [...new Set(kept.map((node) => distance.get(node)))].sort((a, b) => a - b);
    const ringIndex = new Map(rings.map((ring, index) => [ring, index]));
    const step = (Math.min(options.width, options.height) / 2 - 40) / Math.max(1, rings.length - 1);
    const cx = options.width / 2;
    const cy = options.height / 2;
    positions.set(centre, { x: cx, y: cy });
    const place = (node, from, span) => {
        let start = from;
        for (const child of children.get(node)) {
            const share = (span * leaves.get(child)) / leaves.get(node);
            const theta = start + share / 2;
            const radius = step * ringIndex.get(distance.get(child));
            positions.set(child, { x: round(cx + radius * Math.cos(theta)), y: round(cy + radius * Math.sin(theta)) });
            place(child, start, share);
            start += share;
        }
    };
    place(centre, -Math.PI / 2 - Math.PI / Math.max(1, children.get(centre).length), 2 * Math.PI);
    return { positions, distance, kept, dropped: nodes.length - kept.length };
}
function round(value) {
    return Math.round(value * 10) / 10;
}
