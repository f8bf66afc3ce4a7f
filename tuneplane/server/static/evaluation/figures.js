// How evaluation figures read. A figure from the API is {value, numerator, denominator,
// wilson95} or {value: null, reason}: a missing number shows its reason, never a percentage.

import { h } from "../lib/dom.js";
import { fmtInt, fmtNum } from "../lib/format.js";

/** Trial statuses in the order the tab shows them, with the words people use. */
export const STATUSES = [
  ["success", "successes", "success"],
  ["failure", "model failures", "model failure"],
  ["infra_error", "execution errors", "execution error"],
  ["unscored", "unscored", "unscored"],
];
export const STATUS_ONE = Object.fromEntries(STATUSES.map(([status, , one]) => [status, one]));
export const STATUS_MANY = Object.fromEntries(STATUSES.map(([status, many]) => [status, many]));

export const fmtPct = (v) => `${(v * 100).toFixed(1)}%`;

const missing = (word, reason) =>
  h("span", { class: "figure missing" }, h("span", { class: "figure-none", text: word }), h("span", { class: "figure-reason", text: reason }));

/** A rate with its Wilson 95% interval and its fraction, or "no figure" and the reason. */
export function rateFigure(figure) {
  if (figure.value == null) return missing("no figure", figure.reason);
  const [low, high] = figure.wilson95;
  return h(
    "span",
    { class: "figure" },
    h("span", { class: "figure-value", text: fmtPct(figure.value) }),
    h("span", { class: "figure-ci", title: "Wilson score interval, 95%", text: `95% CI ${fmtPct(low)}–${fmtPct(high)}` }),
    h("span", { class: "figure-fraction", text: `${fmtInt(figure.numerator)} / ${fmtInt(figure.denominator)}` }),
  );
}

/** A mean (the mean reward: a sum over a count, no interval), or "no figure" and why. */
export function meanFigure(figure) {
  if (figure.value == null) return missing("no figure", figure.reason);
  return h(
    "span",
    { class: "figure" },
    h("span", { class: "figure-value", text: fmtNum(figure.value) }),
    h("span", { class: "figure-fraction", text: `mean of ${fmtInt(figure.denominator)} rewards` }),
  );
}

/** A count that may be unknown (not yet reported without a declared population). */
export function countFigure(figure) {
  if (figure.value == null) return missing("unknown", figure.reason);
  return h("span", { class: "figure-value", text: fmtInt(figure.value) });
}

export const statusBadge = (status) => h("span", { class: `outcome ${status}`, text: STATUS_ONE[status] ?? status });

/** "project/run/round" names one round for the matched view. */
export const roundSpec = (project, run, round) => `${project}/${run}/${round}`;
