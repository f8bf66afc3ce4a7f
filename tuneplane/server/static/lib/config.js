// A run's config as people read it: nested mappings flattened to dotted keys
// (training_args.learning_rate), lists written on one line, and on the run page a table of
// every key with a filter. Keys and values are text, never HTML.

import { h } from "./dom.js";

/** Repeated list items from this many on are written once with a count. */
const RUN_LENGTH = 3;

/**
 * [[dotted key, value]] of a config, depth first in its order; a nested mapping's keys
 * become "outer.inner", an empty one is the value {}. A config that is not a mapping is one
 * row named "config".
 */
export function flattenConfig(config) {
  const rows = [];
  const walk = (value, key) => {
    if (isMapping(value) && Object.keys(value).length) {
      for (const [inner, item] of Object.entries(value)) walk(item, key ? `${key}.${inner}` : inner);
    } else {
      rows.push([key || "config", value]);
    }
  };
  if (config == null) return rows;
  walk(config, "");
  return rows;
}

const isMapping = (value) => value != null && typeof value === "object" && !Array.isArray(value);

/**
 * A value on one line: text as it is, numbers, booleans and null as JSON writes them, a list
 * in brackets with repeats counted (["full_attention" ×24]), a mapping inside a list as
 * compact JSON.
 */
export function valueText(value) {
  if (typeof value === "string") return value;
  if (typeof value === "number") return numberText(value);
  if (Array.isArray(value)) return listText(value);
  return JSON.stringify(value) ?? String(value);
}

/** 0.001, 64, 1e-6 (not 0.000001), 2.5e-5. */
function numberText(value) {
  const a = Math.abs(value);
  return a !== 0 && a < 1e-4 ? value.toExponential() : String(value);
}

function listText(list) {
  const parts = [];
  for (let i = 0; i < list.length; ) {
    const item = itemText(list[i]);
    let j = i + 1;
    while (j < list.length && itemText(list[j]) === item) j++;
    const repeats = j - i;
    if (repeats >= RUN_LENGTH) parts.push(`${item} ×${repeats}`);
    else for (let k = 0; k < repeats; k++) parts.push(item);
    i = j;
  }
  return `[${parts.join(", ")}]`;
}

/** A list's item: text quoted, numbers as valueText writes them, anything else as JSON. */
function itemText(item) {
  if (typeof item === "number") return numberText(item);
  return JSON.stringify(item) ?? "null";
}

/** Rows whose key or value holds `query` (any case). */
export function filterConfig(rows, query) {
  const q = query.trim().toLowerCase();
  if (!q) return rows;
  return rows.filter(([key, value]) => key.toLowerCase().includes(q) || valueText(value).toLowerCase().includes(q));
}

/**
 * The run page's config: a summary line (how many keys, the first few as chips while it is
 * closed) that opens onto every key in a table, with a filter over keys and values.
 * `preview(rows)`: the chips of the summary line. `title`: "config", or "summary" for the
 * final figures a run sent (run.summary), shown the same way.
 */
export function configTable(config, preview, title = "config") {
  const rows = flattenConfig(config);
  if (!rows.length) return h("span", { class: "muted", text: `no ${title}` });
  const body = h("tbody");
  const count = h("span", { class: "config-count muted" });
  const filter = h("input", {
    type: "search",
    class: "config-filter",
    name: "config-filter",
    placeholder: "filter keys and values",
    "aria-label": `filter ${title}`,
  });
  const render = () => {
    const shown = filterConfig(rows, filter.value);
    body.replaceChildren(
      ...shown.map(([key, value]) =>
        h("tr", {}, h("td", { class: "config-key", text: key }), h("td", { class: "config-value", text: valueText(value) })),
      ),
    );
    if (!shown.length) body.append(h("tr", {}, h("td", { class: "empty-cell", colspan: 2, text: "No key or value matches." })));
    count.textContent = shown.length === rows.length ? `${rows.length} keys` : `${shown.length} of ${rows.length} keys`;
  };
  filter.addEventListener("input", render);
  render();
  return h(
    "details",
    { class: `config-view ${title}-view` },
    h("summary", {}, h("span", { class: "config-title", text: title }), count, preview(rows)),
    h("div", { class: "config-body" }, filter, h("table", { class: "table config-table" }, body)),
  );
}
