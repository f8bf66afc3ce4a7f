// "/": every project, with its run count and last update; the table refreshes itself
// every few seconds, as the runs table does.

import * as api from "../lib/api.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { fmtAgo, fmtInt, fmtTime } from "../lib/format.js";
import { REFRESH_MS } from "./runs.js";

// Trackio's dashboard addresses (/?project=…&runs=…) are sent on by the server
// (server/pages.py's trackio_target), which maps their names to IDs.
export async function projectsPage() {
  crumbs([]);
  const body = h("tbody");
  let shown = null; // whether the table (true) or the empty message (false) is mounted
  const render = (projects) => {
    if (!projects.length) {
      if (shown !== false) mount(noProjects());
    } else {
      if (shown !== true) mount(h("h1", { text: "Projects" }), table(body));
      body.replaceChildren(...projects.map(row));
    }
    shown = projects.length > 0;
  };
  render(await api.projects());
  // Every address loads the page anew: this runs for as long as the page is open.
  setInterval(async () => {
    if (document.hidden) return;
    try {
      render(await api.projects());
    } catch {
      // keep the last table; the next tick tries again
    }
  }, REFRESH_MS);
}

function noProjects() {
  return empty(
    "No projects yet.",
    "A project appears with its first run: send a batch to POST /ingest (Arena workers) or start one with `tuneplane run`.",
    h("p", {}, h("a", { href: "/docs", text: "API reference" })),
  );
}

function table(body) {
  return h(
    "table",
    { class: "table projects" },
    h(
      "thead",
      {},
      h("tr", {}, h("th", { text: "project" }), h("th", { class: "num", text: "runs" }),
        h("th", { text: "last update" }), h("th", { text: "reports" })),
    ),
    body,
  );
}

function row(p) {
  return h(
    "tr",
    { dataset: { project: p.project } },
    h(
      "td",
      {},
      h("a", { href: api.page.project(p.project), text: p.display_name || p.project, title: p.project }),
      p.display_name ? h("code", { class: "muted project-id", text: p.project }) : null,
    ),
    h("td", { class: "num", text: fmtInt(p.run_count) }),
    h("td", { title: fmtTime(p.updated_at), text: fmtAgo(p.updated_at) }),
    h("td", {}, h("a", { href: api.page.reports(p.project), text: "alerts" })),
  );
}
