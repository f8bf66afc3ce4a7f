// A run's registered exports on its page (tuneplane.register_export): step, format, digest
// and how it was made, and where the export lies. Shown only when the run has one; read
// again when the run's status or attempt changes (exports arrive while it runs).

import * as api from "../lib/api.js";
import { h, serial } from "../lib/dom.js";

const METHODS = {
  "sha256-files-v1": "SHA-256 over the directory's file names and bytes",
  given: "given by the run, not computed here",
  none: "no digest: a URI that was not read",
};

export class ExportsPanel {
  /** `ref`: {project, run}. */
  constructor(ref) {
    this.ref = ref;
    this.seen = null;
    this.el = h("section", { class: "exports-panel", "aria-label": "Exports", hidden: true });
    this.load = serial(() => this.fetch());
  }

  /** The run as the page has it now. */
  follow(run) {
    const key = `${run.status}|${run.attempt}`;
    if (key === this.seen) return;
    this.seen = key;
    this.load();
  }

  async fetch() {
    let exports;
    try {
      exports = await api.getJSON(`${api.runPath(this.ref.project, this.ref.run)}/exports`);
    } catch (error) {
      this.el.replaceChildren(h("p", { class: "form-error", text: `Exports could not be read: ${error.message}` }));
      this.el.hidden = false;
      return;
    }
    this.el.hidden = !exports.length;
    this.el.replaceChildren(h("h2", { class: "section-title", text: `Exports (${exports.length})` }), exportsTable(exports));
  }
}

function exportsTable(exports) {
  const head = h("tr", {}, ["Step", "Format", "Digest", "Path or URI"].map((text) => h("th", { text })));
  const rows = exports.map((e) =>
    h(
      "tr",
      { class: "export-row", dataset: { export: e.export_id } },
      h("td", { class: "num", text: e.step ?? "—" }),
      h("td", { text: e.format }),
      h("td", { title: METHODS[e.digest_method] ?? e.digest_method }, e.digest ? h("code", { class: "export-digest", text: e.digest }) : h("span", { class: "muted", text: "none" })),
      h("td", {}, h("code", { class: "export-uri", text: e.uri }), e.files != null ? h("span", { class: "muted", text: ` ${e.files} files` }) : null),
    ),
  );
  return h("table", { class: "table exports" }, h("thead", {}, head), h("tbody", {}, rows));
}
