// The legend under a chart: one row per run with the value under the cursor, smoothed and
// raw. With the cursor elsewhere it shows the last values of up to LAST_VALUES_RUNS runs; past
// that only the runs' names: a live point would change every value, and each changed text
// costs the page layout and paint on every update for numbers nobody reads twenty at a time.

import { h } from "../lib/dom.js";
import { fmtDuration, fmtNum, fmtStep, fmtTime } from "../lib/format.js";
import { nearest } from "./series.js";

/** Charts of at most this many runs show their last values while the cursor is elsewhere. */
const LAST_VALUES_RUNS = 4;

export class Legend {
  constructor() {
    this.el = h("div", { class: "legend" });
    this.rows = [];
    this.where = h("span", { class: "legend-where" });
    this.x = null; // the cursor's x value, or null
  }

  /** entries: [{run: {label, color}, xs, raw, smooth, series}]; axis: step|time|relative. */
  setEntries(entries, axis) {
    const runs = entries.map((e) => e.run.key).join("\n");
    const same = this.entries && runs === this.runs && axis === this.axis;
    this.entries = entries;
    this.axis = axis;
    this.runs = runs;
    if (same) {
      // Live updates keep the rows, and the cursor's place: only the values change.
      this.show(this.x);
      return;
    }
    this.rows = entries.map((entry) => {
      const value = h("span", { class: "legend-value" });
      const raw = h("span", { class: "legend-raw" });
      const row = h(
        "span",
        { class: "legend-row" },
        h("i", { class: "swatch", style: { background: entry.run.color } }),
        h("span", { class: "legend-label", text: entry.run.label }),
        value,
        raw,
      );
      return { row, value, raw };
    });
    this.el.replaceChildren(this.where, ...this.rows.map((r) => r.row));
    this.show(this.x);
  }

  /** x: the cursor's x value, or null for the last values (see LAST_VALUES_RUNS). */
  show(x) {
    this.x = x;
    if (!this.entries) return;
    const hidden = x == null && this.entries.length > LAST_VALUES_RUNS;
    let where = hidden ? "values under the cursor" : null;
    this.entries.forEach((entry, i) => {
      const { value, raw } = this.rows[i];
      if (hidden) {
        setText(value, "");
        setText(raw, "");
        return;
      }
      const n = entry.xs.length;
      const index = n === 0 ? -1 : x == null ? n - 1 : nearest(entry.xs, x);
      if (index < 0) {
        setText(value, "no data");
        setText(raw, "");
        return;
      }
      const shown = entry.smooth ? entry.smooth[index] : entry.raw[index];
      setText(value, fmtNum(shown));
      setText(raw, entry.smooth ? `raw ${fmtNum(entry.raw[index])}` : "");
      if (where === null) where = this.describe(entry, index);
    });
    setText(this.where, where ?? "");
  }

  describe(entry, index) {
    const { series } = entry;
    const a = series.stepMin[index];
    const b = series.stepMax[index];
    const steps = a === b ? `step ${fmtStep(a)}` : `steps ${fmtStep(a)}–${fmtStep(b)}`;
    if (this.axis === "time") return `${fmtTime(series.time[index])} · ${steps}`;
    if (this.axis === "relative") return `+${fmtDuration(entry.xs[index])} · ${steps}`;
    return steps;
  }
}

/**
 * Text set only when it differs (every write makes the browser lay the legend out), and by
 * changing the element's text node rather than replacing it.
 */
function setText(el, text) {
  const node = el.firstChild;
  if (node?.nodeType === Node.TEXT_NODE && !node.nextSibling) {
    if (node.data !== text) node.data = text;
  } else if (el.textContent !== text) {
    el.textContent = text;
  }
}
