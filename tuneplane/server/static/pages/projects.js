// "/": every project, with its run count and last update.

import * as api from "../lib/api.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { fmtAgo, fmtInt, fmtTime } from "../lib/format.js";

export async function projectsPage() {
  crumbs([]);
  const projects = await api.projects();
  if (!projects.length) {
    mount(
      empty(
        "No projects yet.",
        "A project appears with its first run: send a batch to POST /ingest (Arena workers) or start one with `tuneplane run`.",
        h("p", {}, h("a", { href: "/docs", text: "API reference" })),
      ),
    );
    return;
  }
  const rows = projects.map((p) =>
    h(
      "tr",
      {},
      h("td", {}, h("a", { href: api.page.project(p.project), text: p.project })),
      h("td", { class: "num", text: fmtInt(p.run_count) }),
      h("td", { title: fmtTime(p.updated_at), text: fmtAgo(p.updated_at) }),
      h("td", {}, h("a", { href: api.page.reports(p.project), text: "alerts" })),
    ),
  );
  mount(
    h("h1", { text: "Projects" }),
    h(
      "table",
      { class: "table projects" },
      h(
        "thead",
        {},
        h("tr", {}, h("th", { text: "project" }), h("th", { class: "num", text: "runs" }),
          h("th", { text: "last update" }), h("th", { text: "reports" })),
      ),
      h("tbody", {}, rows),
    ),
  );
}
