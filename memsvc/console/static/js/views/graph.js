import { parseNamespace } from "../api.js";
import { Latest } from "../latest.js";
import { field, h, notice, replace, svg } from "../dom.js";
import { button, errorNotice, memoryLink, table } from "./c2-ui.js";
import { radialLayout } from "./graph-layout.js";
import { emptyModel, explore, mergePath } from "./graph-model.js";
/** Entities drawn at most; the nearest are kept and the page says how many were left out. */
const MAX_NODES = 100;
const WIDTH = 800;
const HEIGHT = 520;
const NODE_RADIUS = 16;
export const graphView = {
    path: "graph",
    title: "Graph",
    inMenu: true,
    render(root, ctx) {
        new GraphExplorer(root, ctx).start();
    },
};
class GraphExplorer {
    root;
    ctx;
    prefixInput = h("input", { type: "text", placeholder: "user/alice (empty: your own)", autocomplete: "off" });
    namesInput = h("input", { type: "text", placeholder: "Alice, Project A", autocomplete: "off", required: true });
    depthSelect = h("select", {}, h("option", { value: "1" }, "1 relation"), h("option", { value: "2", selected: true }, "2 relations"));
    pathFrom = h("input", { type: "text", autocomplete: "off" });
    pathTo = h("input", { type: "text", autocomplete: "off" });
    found = h("div", { "aria-live": "polite" });
    status = h("div", { "aria-live": "polite" });
    canvas = h("div", { class: "c2-graph" });
    detail = h("div", { class: "card c2-detail", "aria-live": "polite", "data-testid": "graph-detail" });
    edgeTable = h("div");
    model = null;
    highlighted = new Set();
    selection = null;
    /** Exploring and finding a path both redraw the graph: only the one asked last may. */
    drawing = new Latest();
    constructor(root, ctx) {
        this.root = root;
        this.ctx = ctx;
    }
    start() {
        const findForm = h("form", { class: "card", "aria-label": "Find entities", onsubmit: (event) => { event.preventDefault(); void this.find(); } }, h("div", { class: "row" }, field("Entity names (comma separated)", this.namesInput, "Explore one of the entities found to draw its relations and, at depth 2, theirs."), field("Namespace prefix", this.prefixInput, "Segments separated by /, or a JSON array"), field("Depth", this.depthSelect)), h("button", { type: "submit" }, "Find entities"));
        const pathForm = h("form", { class: "card", "aria-label": "Path between two entities", onsubmit: (event) => { event.preventDefault(); void this.findPath(); } }, h("div", { class: "row" }, field("Path from", this.pathFrom), field("Path to", this.pathTo)), h("button", { type: "submit" }, "Find path"));
        this.root.append(findForm, this.found, pathForm, this.status, this.canvas, this.detail, this.edgeTable);
        this.detail.hidden = true;
        const entity = this.ctx.params.get("entity");
        if (entity) {
            this.namesInput.value = entity;
            void this.find(true);
        }
    }
    prefix() {
        return parseNamespace(this.prefixInput.value);
    }
    async find(exploreFirst = false) {
        const names = this.namesInput.value.split(",").map((n) => n.trim()).filter(Boolean).slice(0, 50);
        if (!names.length) {
            replace(this.found, notice("Type at least one entity name.", "error"));
            return;
        }
        try {
            const answer = await this.ctx.api.post("/v1/graph/entities/find", { namespace_prefix: this.prefix(), names });
            if (!answer.entities.length) {
                replace(this.found, notice("No entity of these names under this prefix."));
                return;
            }
            replace(this.found, table("Entities found", ["Name", "Type", "Namespaces", ""], answer.entities.map((entity) => [
                entity.name, entity.type, entity.namespaces.map((ns) => ns.join(" / ")).join("; "),
                button(`Explore ${entity.name}`, () => void this.explore(entity)),
            ]), { "data-testid": "graph-found" }));
            if (exploreFirst)
                await this.explore(answer.entities[0]);
        }
        catch (error) {
            replace(this.found, errorNotice(error));
        }
    }
    async explore(centre) {
        const isLatest = this.drawing.begin();
        replace(this.status, notice(`Exploring around ${centre.name}…`));
        try {
            const model = await explore(this.ctx.api, this.prefix(), centre, Number(this.depthSelect.value));
            if (!isLatest())
                return;
            this.model = model;
            this.highlighted = new Set();
            this.selection = { kind: "entity", id: centre.id };
            if (!this.pathFrom.value)
                this.pathFrom.value = centre.name;
            replace(this.status);
            this.draw();
        }
        catch (error) {
            if (isLatest())
                replace(this.status, errorNotice(error));
        }
    }
    async findPath() {
        const from = this.pathFrom.value.trim();
        const to = this.pathTo.value.trim();
        if (!from || !to) {
            replace(this.status, notice("Name both ends of the path.", "error"));
            return;
        }
        const isLatest = this.drawing.begin();
        try {
            const path = await this.ctx.api.post("/v1/graph/path", {
                namespace_prefix: this.prefix(), from: { entity: from }, to: { entity: to }, max_hops: 6,
            });
            if (!isLatest())
                return;
            if (!path.found) {
                replace(this.status, notice(path.truncated
                    ? `No path from ${from} to ${to} within the traversal's limits; a longer one may exist.`
                    : `No path from ${from} to ${to} within 6 relations.`));
                return;
            }
            if (!this.model || !path.entities.some((e) => e.id === this.model?.centre.id)) {
                this.model = emptyModel(path.entities[0]);
            }
            const onPath = mergePath(this.model, path);
            this.highlighted = new Set([...onPath, ...path.entities.map((e) => e.id)]);
            this.selection = onPath.length ? { kind: "edge", key: onPath[0] } : null;
            replace(this.status, h("p", { class: "notice info", role: "status", "data-testid": "graph-path" }, `Path (${path.hops} relation${path.hops === 1 ? "" : "s"}): `, pathText(path)));
            this.draw();
        }
        catch (error) {
            if (isLatest())
                replace(this.status, errorNotice(error));
        }
    }
    draw() {
        const model = this.model;
        if (!model)
            return;
        const ids = [...model.entities.values()].sort((a, b) => a.name.localeCompare(b.name)).map((e) => e.id);
        const groups = [...model.edges.values()];
        const layout = radialLayout(model.centre.id, ids, groups, { width: WIDTH, height: HEIGHT, maxNodes: MAX_NODES });
        const drawn = groups.filter((g) => layout.positions.has(g.source) && layout.positions.has(g.target));
        const edgeLayer = svg("g", { class: "c2-edges" });
        for (const group of drawn)
            edgeLayer.append(this.drawEdge(model, group, layout.positions.get(group.source), layout.positions.get(group.target)));
        const nodeLayer = svg("g", { class: "c2-nodes" });
        for (const id of layout.kept) {
            nodeLayer.append(this.drawEntity(model.entities.get(id), layout.positions.get(id), layout.distance.get(id), id === model.centre.id));
        }
        const picture = svg("svg", {
            class: "graph-canvas", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "group", "data-testid": "graph-svg",
            "aria-label": `Graph around ${model.centre.name}: ${layout.kept.length} entities, ${drawn.length} edges`,
        }, svg("defs", {}, svg("marker", { id: "c2-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "c2-arrowhead" }))), edgeLayer, nodeLayer);
        const notes = [];
        if (layout.dropped)
            notes.push(notice(`Showing the nearest ${layout.kept.length} of ${layout.kept.length + layout.dropped} entities.`));
        if (model.unexplored)
            notes.push(notice(`The relations of ${model.unexplored} entities within this depth were not asked; explore from one of them to see its relations.`));
        if (model.truncated)
            notes.push(notice("A traversal limit was reached: more may be related than is drawn."));
        if (!drawn.length)
            notes.push(notice(`No relations of ${model.centre.name} found within this depth.`));
        replace(this.canvas, notes, picture, h("p", { class: "hint" }, "Select an entity to centre the graph on it; select an edge to see the memories behind it."));
        this.drawTable(model, drawn);
        this.showSelection();
    }
    drawEdge(model, group, from, to) {
        const dx = to.x - from.x;
        const dy = to.y - from.y;
        const length = Math.hypot(dx, dy) || 1;
        const start = { x: from.x + (dx / length) * NODE_RADIUS, y: from.y + (dy / length) * NODE_RADIUS };
        const end = { x: to.x - (dx / length) * (NODE_RADIUS + 2), y: to.y - (dy / length) * (NODE_RADIUS + 2) };
        const label = edgeLabel(model, group);
        const selected = this.selection?.kind === "edge" && this.selection.key === group.key;
        const classes = ["c2-edge", this.highlighted.has(group.key) ? "c2-on-path" : "", selected ? "c2-selected" : ""].filter(Boolean).join(" ");
        const el = svg("g", { class: classes, tabindex: 0, role: "button", "aria-label": label, "aria-pressed": String(selected), "data-edge": group.key }, svg("title", {}, label), svg("line", { x1: start.x, y1: start.y, x2: end.x, y2: end.y, class: "c2-edge-hit" }), svg("line", { x1: start.x, y1: start.y, x2: end.x, y2: end.y, "marker-end": "url(#c2-arrow)" }), svg("text", { x: (start.x + end.x) / 2 - (dy / length) * 10, y: (start.y + end.y) / 2 + (dx / length) * 10 + 3,
            "text-anchor": "middle", class: "c2-edge-label" }, group.type));
        activate(el, () => { this.selection = { kind: "edge", key: group.key }; this.draw(); focusAfterDraw(this.canvas, `[data-edge="${CSS.escape(group.key)}"]`); });
        return el;
    }
    drawEntity(entity, at, distance, isCentre) {
        const label = `${entity.name} (${entity.type})${isCentre ? ", the centre" : `, ${distance} relation${distance === 1 ? "" : "s"} away`}`;
        const classes = ["c2-node", isCentre ? "c2-centre" : "", this.highlighted.has(entity.id) ? "c2-on-path" : ""].filter(Boolean).join(" ");
        const el = svg("g", { class: classes, tabindex: 0, role: "button", "aria-label": label, "data-entity": entity.id }, svg("title", {}, label), svg("circle", { cx: at.x, cy: at.y, r: NODE_RADIUS }), svg("text", { x: at.x, y: at.y + NODE_RADIUS + 14, "text-anchor": "middle" }, truncate(entity.name, 28)));
        activate(el, () => {
            if (isCentre) {
                this.selection = { kind: "entity", id: entity.id };
                this.showSelection();
            }
            else {
                void this.explore(entity).then(() => focusAfterDraw(this.canvas, `[data-entity="${CSS.escape(entity.id)}"]`));
            }
        });
        return el;
    }
    drawTable(model, groups) {
        const name = (id) => model.entities.get(id)?.name ?? id;
        replace(this.edgeTable, h("h2", {}, "Edges"), groups.length ? table(`Relations drawn around ${model.centre.name}`, ["From", "Relation", "To", "Memories behind it"], groups.map((group) => [name(group.source), group.type, name(group.target), memoriesCell(group)]), { "data-testid": "graph-edges" }) : h("p", { class: "muted" }, "None."));
    }
    showSelection() {
        const model = this.model;
        const selection = this.selection;
        if (!model || !selection) {
            this.detail.hidden = true;
            return;
        }
        this.detail.hidden = false;
        if (selection.kind === "edge") {
            const group = model.edges.get(selection.key);
            if (!group)
                return;
            replace(this.detail, h("h2", {}, edgeLabel(model, group)), memoriesCell(group));
            return;
        }
        const entity = model.entities.get(selection.id);
        if (!entity)
            return;
        const memories = model.memoriesOf.get(entity.id) ?? [];
        replace(this.detail, h("h2", {}, `${entity.name} (${entity.type})`), h("p", {}, `Named in: ${entity.namespaces.map((ns) => ns.join(" / ")).join("; ") || "—"}${entity.explicit ? " · written explicitly" : ""}`), h("h3", {}, "Memories that name it"), memories.length
            ? h("ul", {}, memories.map((m) => h("li", {}, memoryLink(m.namespace, m.key))))
            : h("p", { class: "muted" }, "None found."));
    }
}
function edgeLabel(model, group) {
    const name = (id) => model.entities.get(id)?.name ?? id;
    return `${name(group.source)} ${group.type} ${name(group.target)}`;
}
function memoriesCell(group) {
    return h("ul", { class: "c2-memories" }, group.relations.map((relation) => h("li", {}, relation.memory ? memoryLink(relation.memory.namespace, relation.memory.key) : `written explicitly in ${relation.namespace.join(" / ")}`, relation.valid_from || relation.valid_to
        ? h("span", { class: "muted" }, ` (valid ${relation.valid_from ?? "…"} to ${relation.valid_to ?? "now"})`) : null)));
}
function pathText(path) {
    const parts = [path.entities[0]?.name ?? ""];
    for (const step of path.steps) {
        const relations = [...new Set(step.edges.map((e) => (e.source === step.source.id ? `—${e.type}→` : `←${e.type}—`)))];
        parts.push(` ${relations.join(" ")} ${step.target.name}`);
    }
    return parts.join("");
}
/** Click, Enter or Space runs `action`, so SVG buttons work from the keyboard as real ones do. */
function activate(el, action) {
    el.addEventListener("click", action);
    el.addEventListener("keydown", (event) => {
        const key = event.key;
        if (key === "Enter" || key === " ") {
            event.preventDefault();
            action();
        }
    });
}
function focusAfterDraw(container, selector) {
    const target = container.querySelector(selector);
    if (target instanceof SVGElement)
        target.focus();
}
function truncate(text, max) {
    return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
