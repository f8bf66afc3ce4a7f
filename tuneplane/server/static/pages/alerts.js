// "/projects/<project>/alerts": the project's server-side alert rules (docs/alerts.md) and
// its webhooks. Everyone who reads the project reads its rules; editors and owners change
// them and manage the webhooks. The page asks the API and shows what it answers.

import { rulesSection } from "../alerts/rules.js";
import { webhooksPath } from "../alerts/common.js";
import { webhooksSection } from "../alerts/webhooks.js";
import * as api from "../lib/api.js";
import { crumbs, h, mount } from "../lib/dom.js";
import { runsOrMissing } from "../lib/missing.js";

const enc = encodeURIComponent;
/** The page's own address. */
export const alertsHref = (project) => `/projects/${enc(project)}/alerts`;

/**
 * The webhooks, or null when the caller may not change the project: the run list's `you`
 * says so when the project has runs; without runs, the webhook list (editors only) is asked
 * and a refusal means a reader.
 */
async function webhooksIfEditor(project, you) {
  if (you && !you.write) return null;
  try {
    return (await api.getJSON(webhooksPath(project))).webhooks;
  } catch (error) {
    if ([401, 403].includes(error.status)) return null;
    throw error;
  }
}

export async function alertsPage(project) {
  crumbs([[project, api.page.project(project)], ["alerts", null]]);
  const runs = await runsOrMissing(project);
  if (!runs) return;
  const me = await api.session();
  const hooks = await webhooksIfEditor(project, runs[0]?.you ?? null);
  const editable = hooks !== null;
  const csrf = me.csrf_token ?? null;
  const names = runs.map((run) => run.run);
  const parts = [
    h("div", { class: "title-line" }, h("h1", { text: `Alerts of ${project}` })),
    h(
      "p",
      { class: "muted" },
      "The server watches this project's runs with these rules and raises an alert on a run when one starts to hold, and an info alert when it resolves. ",
      h("a", { href: api.page.reports(project), text: "The alerts raised" }),
      ".",
    ),
    await rulesSection(project, names, { editable, csrf }),
  ];
  if (editable) parts.push(webhooksSection(project, hooks, csrf));
  mount(...parts);
}
