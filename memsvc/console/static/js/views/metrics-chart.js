/** SVG line charts for the metrics view, each with a table of the same numbers beside it. */
import { h, svg } from "../dom.js";
const WIDTH = 600;
const HEIGHT = 160;
const PAD = 8;
/** Lines drawn per chart; the busiest are kept and the table still lists every series. */
const MAX_LINES = 6;
/** A chart of `series` over `points` scrapes: a line each (the busiest MAX_LINES), a legend, and a table. */
export function lineChart(title, unit, points, series) {
    const peak = (s) => Math.max(0, ...s.values.filter((v) => v !== null));
    const ranked = [...series].sort((a, b) => peak(b) - peak(a) || a.name.localeCompare(b.name));
    const drawn = ranked.slice(0, MAX_LINES);
    const top = Math.max(...drawn.map(peak), 0) || 1;
    const x = (i) => PAD + ((WIDTH - 2 * PAD) * i) / Math.max(points - 1, 1);
    const y = (v) => HEIGHT - PAD - ((HEIGHT - 2 * PAD) * v) / top;
    const lines = drawn.map((s, index) => {
        const coordinates = s.values.flatMap((v, i) => (v === null ? [] : [`${x(i).toFixed(1)},${y(v).toFixed(1)}`]));
        // A value with no neighbour draws no line: a dot shows it.
        const dots = s.values.flatMap((v, i) => (v !== null && (s.values[i - 1] ?? null) === null && (s.values[i + 1] ?? null) === null
            ? [svg("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 3, class: `c2-s${index}` })] : []));
        return svg("g", {}, svg("polyline", { points: coordinates.join(" "), class: `c2-s${index}`, "data-series": s.name }), dots);
    });
    const last = (s) => {
        const known = s.values.filter((v) => v !== null);
        return known.length ? format(known[known.length - 1]) : "—";
    };
    return h("figure", { class: "card c2-chart", "data-chart": title }, h("figcaption", {}, h("strong", {}, title), h("span", { class: "muted" }, ` (${unit}; top of the chart ${format(top)})`)), svg("svg", { class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: "none", role: "img",
        "aria-label": `${title}: ${drawn.map((s) => `${s.name} ${last(s)}`).join(", ") || "no data yet"}` }, svg("line", { x1: PAD, y1: HEIGHT - PAD, x2: WIDTH - PAD, y2: HEIGHT - PAD, class: "c2-axis" }), lines), h("ul", { class: "c2-legend" }, drawn.map((s, index) => h("li", {}, h("span", { class: `c2-swatch c2-s${index}`, "aria-hidden": "true" }), s.name))), h("details", {}, h("summary", {}, "Table"), h("table", {}, h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Series"), h("th", { scope: "col", class: "num" }, `Latest (${unit})`), h("th", { scope: "col", class: "num" }, `Highest (${unit})`))), h("tbody", {}, ranked.map((s) => h("tr", {}, h("td", {}, s.name), h("td", { class: "num" }, last(s)), h("td", { class: "num" }, format(peak(s)))))))));
}
function format(value) {
    if (value === 0)
        return "0";
    if (Math.abs(value) >= 100)
        return value.toFixed(0);
    if (Math.abs(value) >= 1)
        return value.toFixed(2);
    return value.toPrecision(2);
}
