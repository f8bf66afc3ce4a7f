// A trajectory's token and time totals for its page's header, from the body's read
// (`totals`, docs/trajectories.md): the producer's own totals for the whole conversation
// when it gave them (ATIF's final_metrics), else the sums over the messages kept, each
// said; the time from the first to the last message timestamp, else the messages' ms.

import { h } from "../lib/dom.js";
import { fmtDuration, fmtInt, fmtTime } from "../lib/format.js";
import { fmtMs, stampSeconds } from "./messages.js";

const fact = (label, value, why) =>
  h("div", { class: `fact total-${label.split(" ")[0]}` }, h("dt", { text: label }), h("dd", {}, h("span", { class: "total-value", text: value }), why ? h("span", { class: "muted total-why", text: ` (${why})` }) : null));

function tokenText(counts) {
  const parts = ["input", "output", "cached"].filter((k) => counts[k] != null).map((k) => `${fmtInt(counts[k])} ${k}`);
  return parts.join(", ");
}

function tokens(totals, row) {
  const declared = totals.declared;
  if (declared && tokenText(declared)) return fact("tokens", tokenText(declared), "the producer's totals for the whole conversation");
  const summed = tokenText(totals.messages);
  if (summed) return fact("tokens", summed, `summed over the ${fmtInt(row.message_count)} messages kept`);
  return fact("tokens", "not reported", null);
}

function time(totals) {
  const span = totals.time;
  if (span.seconds != null) {
    const from = stampSeconds(span.first);
    const to = stampSeconds(span.last);
    return fact("time", fmtDuration(span.seconds), `from the first to the last timestamp, ${fmtTime(from)} to ${fmtTime(to)}, ${fmtInt(span.stamped_messages)} messages stamped`);
  }
  if (totals.messages.ms != null) return fact("time", fmtMs(totals.messages.ms), "summed over the messages' reported times");
  return fact("time", "not reported", "no message has a timestamp or a time");
}

/** The header's facts: tokens, cost when given, and time. */
export function totalsFacts(totals, row) {
  if (!totals) return [];
  const cost = totals.declared?.cost_usd;
  return [tokens(totals, row), cost != null ? fact("cost", `$${Number(cost.toPrecision(4))}`, "the producer's total") : null, time(totals)];
}
