// The legend under a chart: one row per run. Under the cursor, each run's value there: a
// point's value, or the mean of the bucket of points drawn there, said as such ("mean of
// steps 990–1,002"). With the cursor elsewhere, each run's last reported value (from the
// metric's summary, which live updates keep current), never a bucket's mean. Past
// LAST_VALUES_RUNS runs only the runs' names then: a live point would change every value, and
// each changed text costs the page layout and paint on every update for numbers nobody reads
// twenty at a time. A group's row says which band is drawn, how many of its runs have a
// point under the cursor (and how many reported NaN/inf there instead), and has the button
// that shows or hides its runs.

import { h } from "../lib/dom.js";
import { fmtDuration, fmtInt, fmtNum, fmtTime } from "../lib/format.js";
import { xMetric } from "../lib/url.js";
import { BAND_LABELS } from "./groups.js";
import { nearest } from "./series.js";

/** Charts of at most this many runs show their last values while the cursor is elsewhere. */
const LAST_VALUES_RUNS = 4;

/** A last report that was not a number, as the NaN/inf badge names it. */
const KINDS = { nan: "NaN", inf: "+inf", "-inf": "-inf" };

export class Legend {
  /**
   * onExpand(group key): show or hide that group's runs.
   * @param {(key: string) => void} [onExpand]
   */
  constructor(onExpand = () => {}) {
    this.onExpand = onExpand;
    this.el = h("div", { class: "legend" });
    this.rows = [];
    this.where = h("span", { class: "legend-where" });
    this.x = null; // the cursor's x value, or null
    this.zoomed = false;
  }

  /**
   * entries: [{run: {label, color}, xs, raw, smooth, series, last}], last being the run's last
   * report ({step, value} or {step, kind} for NaN/inf) or null; axis: step|time|relative;
   * zoomed: the drawn series ends where the zoom does, not at the run's last point.
   */
  setEntries(entries, axis, zoomed = false) {
    const runs = entries.map(({ run }) => (run.aggregate ? `${run.key} ${run.aggregate.band} ${run.aggregate.runs} ${run.aggregate.expanded}` : run.key)).join("\n");
    const same = this.entries && runs === this.runs && axis === this.axis;
    this.entries = entries;
    this.axis = axis;
    this.runs = runs;
    this.zoomed = zoomed;
    if (same) {
      // Live updates keep the rows, and the cursor's place: only the values change.
      this.show(this.x);
      return;
    }
    this.rows = entries.map((entry) => {
      const value = h("span", { class: "legend-value" });
      const raw = h("span", { class: "legend-raw" });
      const group = entry.run.aggregate;
      const row = h(
        "span",
        { class: group ? "legend-row group-row" : entry.run.member ? "legend-row member-row" : "legend-row" },
        h("i", { class: group ? "swatch group-swatch" : "swatch", style: { background: entry.run.color } }),
        h("span", { class: "legend-label", text: entry.run.label }),
        group ? h("span", { class: "legend-band muted", text: BAND_LABELS[group.band] }) : null,
        group ? this.expandButton(group) : null,
        value,
        raw,
      );
      return { row, value, raw };
    });
    this.el.replaceChildren(this.where, ...this.rows.map((r) => r.row));
    this.show(this.x);
  }

  expandButton(group) {
    const runs = `${group.runs} run${group.runs === 1 ? "" : "s"}`;
    return h("button", {
      type: "button",
      class: "expand-group",
      "aria-expanded": String(group.expanded),
      text: group.expanded ? `hide its ${runs}` : `show its ${runs}`,
      onclick: () => this.onExpand(group.key),
    });
  }

  /** x: the cursor's x value, or null for the last values (see LAST_VALUES_RUNS). */
  show(x) {
    this.x = x;
    if (!this.entries) return;
    const hidden = x == null && this.entries.length > LAST_VALUES_RUNS;
    // The first run's place is said above the rows; another run's, beside its value when
    // it differs (runs are bucketed, and report, each on their own steps).
    let where = null;
    let steps = null;
    this.entries.forEach((entry, i) => {
      const { value, raw } = this.rows[i];
      const shown = hidden ? null : x == null ? lastShown(entry, this.zoomed) : pointShown(entry, x, this.axis);
      if (!shown) {
        setText(value, hidden ? "" : "no data");
        setText(raw, "");
        return;
      }
      if (where === null) [where, steps] = [shown.where, shown.steps];
      const notes = shown.steps === steps ? shown.notes : [...shown.notes, shown.steps];
      setText(value, shown.value);
      setText(raw, notes.join(" · "));
    });
    if (hidden) where = "values under the cursor";
    else if (x == null && where !== null) where = `last reported · ${where}`;
    setText(this.where, where ?? "");
  }
}

/** A run's last report: its value, and the smoothed line's end where the line ends there. */
function lastShown(entry, zoomed) {
  const { last } = entry;
  if (!last) return null;
  const steps = `step ${fmtInt(last.step)}`;
  const notes = [];
  const n = entry.xs.length;
  if (entry.smooth && n && !zoomed) notes.push(`smoothed ${fmtNum(entry.smooth[n - 1])}`);
  const value = last.kind ? (KINDS[last.kind] ?? last.kind) : fmtNum(last.value);
  return { value, notes, where: steps, steps };
}

/** What is drawn nearest the cursor: a point, or a bucket's mean, said as a mean. */
function pointShown(entry, x, axis) {
  const index = entry.xs.length ? nearest(entry.xs, x) : -1;
  if (index < 0) return null;
  const { series } = entry;
  const [a, b, count] = [series.stepMin[index], series.stepMax[index], series.count[index]];
  let steps = a === b ? `step ${fmtInt(a)}` : `steps ${fmtInt(a)}–${fmtInt(b)}`;
  if (entry.run.aggregate) return groupShown(entry, index, placeOf(entry, index, axis, steps), steps);
  if (count > 1) steps = a === b ? `mean of ${fmtInt(count)} points at step ${fmtInt(a)}` : `mean of ${steps}`;
  const where = placeOf(entry, index, axis, steps);
  const shown = entry.smooth ? entry.smooth[index] : entry.raw[index];
  const notes = entry.smooth ? [`raw ${fmtNum(entry.raw[index])}`] : [];
  return { value: fmtNum(shown), notes, where, steps };
}

/** Where a bucket is on the x axis, and its steps. */
function placeOf(entry, index, axis, steps) {
  if (axis === "time") return `${fmtTime(entry.series.time[index])} · ${steps}`;
  if (axis === "relative") return `+${fmtDuration(entry.xs[index])} · ${steps}`;
  const over = xMetric(axis);
  return over ? `${over} ${fmtNum(entry.xs[index])} · ${steps}` : steps;
}

/** A group's mean under the cursor, with its band and how many of its runs are there. */
function groupShown(entry, index, where, steps) {
  const { series, run } = entry;
  const band =
    run.aggregate.band === "std"
      ? `± ${fmtNum(series.max[index] - series.mean[index])}`
      : `${fmtNum(series.min[index])} – ${fmtNum(series.max[index])}`;
  const mean = entry.smooth ? entry.smooth[index] : entry.raw[index];
  // Runs whose value was NaN or ±inf in these steps: left out of the mean, said beside it.
  const [a, b] = [series.stepMin[index], series.stepMax[index]];
  const bad = new Set((entry.invalid ?? []).filter((s) => s.step >= a && s.step <= b).flatMap((s) => s.runs ?? []));
  const valid = `mean of ${series.n[index]} of ${run.aggregate.runs} runs`;
  const notes = [bad.size ? `${valid} (${bad.size} NaN/inf here)` : valid, band];
  if (entry.smooth) notes.push(`raw ${fmtNum(entry.raw[index])}`);
  return { value: fmtNum(mean), notes, where, steps };
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
