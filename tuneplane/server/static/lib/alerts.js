// An alert as a card: level, title and text as plain text, with an anchor #alert-<alert_id>.

import { page } from "./api.js";
import { h } from "./dom.js";
import { fmtAgo, fmtInt, fmtTime } from "./format.js";

export const LEVELS = ["info", "warn", "error"];

export const alertAnchor = (alert) => `alert-${alert.alert_id}`;

/** alert: as GET …/alerts answers, plus {project, run}; withId: give it the anchor id. */
export function alertCard(alert, { withId = true, showRun = true, href = null } = {}) {
  const anchor = alertAnchor(alert);
  const meta = [];
  if (showRun) {
    meta.push(h("span", {}, "run ", h("a", { href: page.run(alert.project, alert.run), text: alert.run })));
  }
  if (alert.step != null) meta.push(`step ${fmtInt(alert.step)}`);
  meta.push(h("span", { title: fmtTime(alert.received_at), text: fmtAgo(alert.received_at) }));
  meta.push(h("span", { class: "muted", text: `id ${alert.alert_id}` }));
  const joined = meta.flatMap((part, i) => (i ? [" · ", part] : [part]));
  return h(
    "article",
    { class: `alert level-${alert.level}`, id: withId ? anchor : null, dataset: { level: alert.level } },
    h(
      "header",
      {},
      h("span", { class: `level ${alert.level}`, text: alert.level }),
      h("h2", { class: "alert-title", text: alert.title }),
      h("a", { class: "anchor", href: href ?? `#${anchor}`, title: "link to this alert", text: "#" }),
    ),
    alert.text ? h("p", { class: "alert-text", text: alert.text }) : null,
    h("footer", {}, joined),
  );
}
