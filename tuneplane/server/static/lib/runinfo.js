// How a run's status, transport health and config read on every page.

import { flattenConfig, valueText } from "./config.js";
import { h } from "./dom.js";
import { fmtInt } from "./format.js";

/** Why a status that no run reported reads as it does. */
const STATUS_TITLES = {
  unknown: "Logged by a Trackio client, which never says when a run ends: it may still be logging, or it ended",
};

/** running / succeeded / failed / cancelled, unknown (a Trackio client's run), or "—" when the
 * run never reported one. */
export function statusBadge(run) {
  if (!run.status) {
    return h("span", {
      class: "status none",
      title: "No status reported (Arena workers send metrics and alerts only)",
      text: "—",
    });
  }
  const exit = run.exit_code != null && run.status !== "running" ? ` (exit ${run.exit_code})` : "";
  return h("span", { class: `status ${run.status}`, title: STATUS_TITLES[run.status], text: `${run.status}${exit}` });
}

const ENDED = new Set(["succeeded", "failed", "cancelled"]);

/**
 * ok / lossy / unknown with the counters or the reason as a tooltip. A finished run's is
 * its last heartbeat's (the server keeps it), said as such.
 */
export function healthBadge(run) {
  const t = run.transport ?? { state: "unknown" };
  const counters = `sent ${fmtInt(t.sent)}, dropped ${fmtInt(t.dropped)}, failed sends ${fmtInt(
    t.failed_sends,
  )}, queued ${fmtInt(t.queue_size)} of ${fmtInt(t.queue_capacity)}`;
  const detail =
    t.state === "unknown"
      ? t.reason ?? "no heartbeat received"
      : ENDED.has(run.status)
        ? `at the run's end: ${counters}`
        : counters;
  return h("span", { class: `health ${t.state}`, title: detail, text: t.state });
}

/** Config as key=value chips (all text), nested keys flattened (see flattenConfig). */
export function configChips(config, limit = Infinity) {
  return chipsOf(flattenConfig(config), limit);
}

/** [[key, value]] rows as chips, the first `limit` of them. */
export function chipsOf(items, limit = Infinity) {
  if (!items.length) return h("span", { class: "muted", text: "no config" });
  const shown = items.slice(0, limit).map(([key, value]) =>
    h(
      "span",
      { class: "chip", title: `${key} = ${valueText(value)}` },
      h("span", { class: "chip-key", text: key }),
      h("span", { class: "chip-value", text: valueText(value) }),
    ),
  );
  if (items.length > limit) shown.push(h("span", { class: "muted", text: `+${items.length - limit}` }));
  return h("span", { class: "chips" }, shown);
}

/** Words a text filter matches a run by. */
export function runSearchText(run) {
  const config = flattenConfig(run.config).map(([k, v]) => `${k}=${valueText(v)}`);
  return [run.run, run.status ?? "", run.transport?.state ?? "", ...config].join(" ").toLowerCase();
}
