// Finding one's way in a long trajectory: a search the server runs over every message
// (GET …/trajectories/{id}/search?q=), its matches highlighted on the page as text and
// visited in turn across the reader's pages, and a jump to the first tool call whose
// result reads as failed (the read's first_failed_tool_call, by a named rule). The search
// is kept in the address (&q=).

import { h } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";
import { replaceParams } from "../lib/url.js";
import * as api from "./api.js";

/** Why a tool result reads as failed, by the rule the server names. */
export const FAILURE_RULES = {
  marked: "the producer marked the result as an error",
  tool_error: "the tool reported an error (appended by the import)",
  traceback: "its text holds a Python traceback",
  error_line: "its text starts with error, exception or fatal",
  exit_code: "its text reports a nonzero exit code",
  command_not_found: "its text says a command was not found",
};

const escaped = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Remove the highlights under `root`, leaving its text as it was. */
export function clearHighlights(root) {
  for (const mark of root.querySelectorAll("mark.search-hit")) {
    const parent = mark.parentNode;
    mark.replaceWith(document.createTextNode(mark.textContent ?? ""));
    parent?.normalize();
  }
}

/** Wrap each occurrence of `query` (any case) in the searchable text under `root` in a
 * <mark>, splitting text nodes: nothing is parsed. Answers how many were marked. */
export function highlight(root, query) {
  clearHighlights(root);
  if (!query) return 0;
  const pattern = new RegExp(escaped(query), "gi");
  let marked = 0;
  for (const area of root.querySelectorAll(".searchable")) {
    const walker = document.createTreeWalker(area, NodeFilter.SHOW_TEXT);
    const texts = [];
    for (let node = walker.nextNode(); node; node = walker.nextNode()) texts.push(node);
    for (const node of texts) {
      const text = node.nodeValue ?? "";
      const pieces = [];
      let at = 0;
      for (const m of text.matchAll(pattern)) {
        if (m.index > at) pieces.push(document.createTextNode(text.slice(at, m.index)));
        pieces.push(h("mark", { class: "search-hit", text: m[0] }));
        at = m.index + m[0].length;
        marked += 1;
      }
      if (!pieces.length) continue;
      if (at < text.length) pieces.push(document.createTextNode(text.slice(at)));
      node.replaceWith(...pieces);
    }
  }
  return marked;
}

export class Finder {
  /** `reader` shows messages by index (goTo) and reads the page's highlights again. */
  constructor(ref, row, reader) {
    this.ref = ref;
    this.row = row;
    this.reader = reader;
    this.query = "";
    this.hits = []; // message indexes with a match, in order
    this.at = -1;
    this.input = h("input", { type: "search", class: "find-input", placeholder: "Search this trajectory", "aria-label": "search this trajectory", maxlength: 200 });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.step(event.shiftKey ? -1 : 1);
    });
    this.status = h("span", { class: "find-status muted", role: "status" });
    this.prev = h("button", { type: "button", class: "find-prev", text: "↑ previous", disabled: true, onclick: () => this.step(-1) });
    this.next = h("button", { type: "button", class: "find-next", text: "↓ next", disabled: true, onclick: () => this.step(1) });
    this.find = h("button", { type: "button", class: "find-go", text: "Find", onclick: () => this.search(this.input.value) });
    this.failed = h("button", { type: "button", class: "jump-failed" });
    this.failedWhy = h("span", { class: "jump-failed-why muted" });
    this.jump = h("div", { class: "jump-line", hidden: true }, this.failed, " ", this.failedWhy);
    this.el = h(
      "div",
      { class: "finder", role: "search" },
      h("form", { class: "find-form", onsubmit: (event) => (event.preventDefault(), this.step(1)) }, this.input, this.find, this.prev, this.next, this.status),
      this.jump,
    );
  }

  /** The read's first tool call whose result reads as failed; without one, no control
   * (a trajectory's page never speaks of failure where nothing reads as failed). */
  setFailed(failed) {
    this.jump.hidden = failed == null;
    if (failed == null) return;
    this.failed.onclick = () => this.reader.goTo(failed.message, "failed");
    this.failed.textContent = `Jump to the first failing tool call (#${fmtInt(failed.message + 1)})`;
    this.failedWhy.textContent = FAILURE_RULES[failed.rule] ?? failed.rule;
  }

  /** Enter with a new text searches; with the same, goes to the next match. */
  async step(by) {
    if (this.input.value !== this.query || !this.hits.length) return this.search(this.input.value);
    this.at = (this.at + by + this.hits.length) % this.hits.length;
    this.say();
    return this.reader.goTo(this.hits[this.at], "hit");
  }

  async search(text) {
    this.query = text;
    this.hits = [];
    this.at = -1;
    replaceParams({ q: text || null });
    if (!text.trim()) {
      this.say();
      return this.reader.marksChanged();
    }
    this.status.textContent = "searching…";
    let answer;
    try {
      answer = await api.search(this.ref.project, this.ref.run, this.row.id, text);
    } catch (error) {
      this.status.textContent = `Could not search: ${error.message}`;
      return null;
    }
    if (text !== this.query) return null; // a newer search went out meanwhile
    this.hits = answer.messages ?? [];
    this.occurrences = answer.occurrences ?? 0;
    this.reader.marksChanged();
    if (!this.hits.length) return this.say();
    // The first match at or after the page shown, so a search reads on from where one is.
    const after = this.hits.findIndex((index) => index >= this.reader.offset);
    this.at = after === -1 ? 0 : after;
    this.say();
    return this.reader.goTo(this.hits[this.at], "hit");
  }

  say() {
    const many = this.hits.length;
    this.prev.disabled = this.next.disabled = many < 2;
    if (!this.query.trim()) this.status.textContent = "";
    else if (!many) this.status.textContent = `no message holds “${this.query}”`;
    else this.status.textContent = `message ${fmtInt(this.at + 1)} of ${fmtInt(many)} with “${this.query}” (#${fmtInt(this.hits[this.at] + 1)}; ${fmtInt(this.occurrences)} in all)`;
  }

  /** The search the address names, run once the first page is shown. */
  restore(query) {
    if (!query) return null;
    this.input.value = query;
    return this.search(query);
  }
}
