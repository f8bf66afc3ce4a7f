// The view lives in the address, so a shared link reproduces it:
//   ?x=time&smooth=0.6&log=1&metric=reward&metric=train/loss&filter=kl&zoom=1200,1850&tab=logs
// (zoom is the dragged x range, in the units of the x axis; x=metric:train/epoch charts every
// metric over another one, paired by step by the server; groups=1 charts the runs of each
// group as one mean line with a band, band=std its ±std rather than its min–max, and
// expand=<group> shows that group's runs too)
// (the Validation tab adds round=, status= and trial= of its own, the Training rollouts tab
// category=, step= and after=; they are kept as they are)
// Defaults are left out, and changing the view replaces the history entry.

import { here } from "./root.js";

export const X_AXES = ["step", "time", "relative"];
export const X_LABELS = { step: "step", time: "wall time", relative: "relative time" };
const METRIC_AXIS = "metric:";

/** The metric an x axis "metric:<name>" charts over, else null. */
export function xMetric(x) {
  return x?.startsWith(METRIC_AXIS) && x.length > METRIC_AXIS.length ? x.slice(METRIC_AXIS.length) : null;
}

/** The x axis over a metric. */
export const metricAxis = (name) => `${METRIC_AXIS}${name}`;

export const TABS = ["charts", "validation", "rollouts", "events", "logs"];
export const BANDS = ["minmax", "std"];
const DEFAULTS = {
  x: "step",
  smooth: 0,
  log: false,
  metrics: [],
  filter: "",
  zoom: null,
  tab: "charts",
  groups: false,
  band: "minmax",
  expand: [],
};

/** @typedef {ReturnType<typeof readView>} View */

export function readView(search = location.search) {
  const q = new URLSearchParams(search);
  const smooth = Number.parseFloat(q.get("smooth"));
  return {
    x: X_AXES.includes(q.get("x")) || xMetric(q.get("x")) ? q.get("x") : DEFAULTS.x,
    smooth: Number.isFinite(smooth) ? Math.min(0.99, Math.max(0, smooth)) : DEFAULTS.smooth,
    log: q.get("log") === "1",
    metrics: q.getAll("metric"),
    filter: q.get("filter") ?? "",
    zoom: parseZoom(q.get("zoom")),
    tab: TABS.includes(q.get("tab")) ? q.get("tab") : DEFAULTS.tab,
    groups: q.get("groups") === "1",
    band: BANDS.includes(q.get("band")) ? q.get("band") : DEFAULTS.band,
    expand: q.getAll("expand"),
  };
}

/** The query string for a view, keeping every other parameter (project, runs) as it is. */
export function viewSearch(view, search = location.search) {
  const q = new URLSearchParams(search);
  for (const key of ["x", "smooth", "log", "metric", "filter", "zoom", "tab", "groups", "band", "expand"]) q.delete(key);
  if (view.x !== DEFAULTS.x) q.set("x", view.x);
  if (view.smooth > 0) q.set("smooth", String(view.smooth));
  if (view.log) q.set("log", "1");
  for (const metric of view.metrics) q.append("metric", metric);
  if (view.filter) q.set("filter", view.filter);
  if (view.zoom) q.set("zoom", view.zoom.join(","));
  if (view.tab !== DEFAULTS.tab) q.set("tab", view.tab);
  if (view.groups) q.set("groups", "1");
  if (view.band !== DEFAULTS.band) q.set("band", view.band);
  for (const group of view.expand) q.append("expand", group);
  const text = q.toString();
  return text ? `?${text}` : "";
}

/** "lo,hi" -> [lo, hi] when both are finite and lo < hi, else null. */
function parseZoom(value) {
  const parts = (value ?? "").split(",");
  if (parts.length !== 2 || parts.some((part) => !part.trim())) return null;
  const [lo, hi] = parts.map(Number);
  return Number.isFinite(lo) && Number.isFinite(hi) && lo < hi ? [lo, hi] : null;
}

/**
 * A dragged x range rounded to about a ten-thousandth of its width, so the address stays
 * short and a shared link draws exactly the range the page shows.
 */
export function roundZoom(lo, hi) {
  const digits = Math.max(0, -Math.floor(Math.log10((hi - lo) / 1e4)));
  const round = (v) => Number(v.toFixed(Math.min(digits, 12)));
  const range = [round(lo), round(hi)];
  return range[0] < range[1] ? range : [lo, hi];
}

export function writeView(view) {
  const search = viewSearch(view);
  if (search !== location.search) {
    history.replaceState(null, "", `${location.pathname}${search}${location.hash}`);
  }
}

/** One query parameter replaced (null removes it), as a local link (without the prefix). */
export function withParam(key, value, search = location.search) {
  const q = new URLSearchParams(search);
  if (value == null || value === "") q.delete(key);
  else q.set(key, value);
  const text = q.toString();
  return `${here()}${text ? `?${text}` : ""}`;
}

/** "a,b" -> ["a", "b"], dropping empties and repeats. */
export function listParam(value) {
  return [...new Set((value ?? "").split(",").map((s) => s.trim()).filter(Boolean))];
}

/** Replace some query parameters in place (null removes one), keeping the others. */
export function replaceParams(changes) {
  const q = new URLSearchParams(location.search);
  for (const [key, value] of Object.entries(changes)) {
    if (value == null || value === "") q.delete(key);
    else q.set(key, value);
  }
  const text = q.toString();
  const search = text ? `?${text}` : "";
  if (search !== location.search) history.replaceState(null, "", `${location.pathname}${search}${location.hash}`);
}
