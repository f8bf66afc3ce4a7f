// A project's launched jobs, newest first, on its launch page: each run linked, with the
// engine's state beside its attempt's own status.

import * as api from "../lib/api.js";
import { h } from "../lib/dom.js";
import { fmtAgo, fmtTime } from "../lib/format.js";
import { jobs } from "./api.js";

/** The jobs table, or a line saying why there is none; null when they cannot be read. */
export async function jobsTable(project) {
  let listed;
  try {
    listed = await jobs(project);
  } catch {
    return null; // the recipes stand on their own
  }
  if (!listed.length) return h("p", { class: "muted", text: "No job launched in this project yet." });
  return h(
    "table",
    { class: "table launched-jobs" },
    h("thead", {}, h("tr", {}, ["job", "run", "recipe", "engine", "state", "attempt", "submitted"].map((label) => h("th", { text: label })))),
    h(
      "tbody",
      {},
      listed.map((job) =>
        h(
          "tr",
          { dataset: { job: job.id, state: job.state } },
          h("td", { class: "num", text: String(job.id) }),
          h("td", {}, h("a", { href: api.page.run(project, job.run), text: job.run })),
          h("td", { text: job.recipe }),
          h("td", { text: job.engine }),
          h("td", {}, h("span", { class: `status job-state ${job.state}`, title: job.reason, text: job.state })),
          h("td", {}, h("span", { class: `status attempt-status ${job.attempt_status ?? "none"}`, text: job.attempt_status ?? "—" })),
          h("td", { title: fmtTime(job.created_at), text: fmtAgo(job.created_at) }),
        ),
      ),
    ),
  );
}
