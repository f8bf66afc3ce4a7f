// The messages of one trajectory, a page at a time from the server (?offset=&limit=); the
// page's offset is kept in the address. Bodies need the content permission: without it
// (or when the server answers 401/403) the reader says so in a sentence, not as an error.
// A finder above the pages searches the whole body and jumps to a message on any page.

import * as api from "./api.js";
import { debug } from "../lib/debug.js";
import { h } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";
import { replaceParams } from "../lib/url.js";
import { clearHighlights, Finder, highlight } from "./finder.js";
import { message, pageTotals, setOpen, stampSeconds } from "./messages.js";
import { NO_CONTENT_PERMISSION } from "./text.js";

export const PAGE_SIZE = 25;

debug.trajectory = { id: null, state: null, offset: null, shown: [], loads: 0, current: null, marks: 0 };

const wantedOffset = () => {
  const value = Number.parseInt(new URLSearchParams(location.search).get("offset") ?? "", 10);
  return Number.isInteger(value) && value > 0 ? Math.floor(value / PAGE_SIZE) * PAGE_SIZE : 0;
};

export class MessagesReader {
  /**
   * `row`: the index row; `mayRead`: the run answer's `you.trajectory_bodies`;
   * `onRead(answer)` is told each page's answer (its totals are the whole body's).
   * @param {(answer: any) => void} [onRead]
   */
  constructor(ref, row, mayRead, onRead = () => {}) {
    this.ref = ref;
    this.row = row;
    this.mayRead = mayRead;
    this.onRead = onRead;
    this.offset = wantedOffset();
    this.failedAt = null;
    this.firstStamp = null; // seconds of the body's first timestamp
    this.restored = false; // the address's search is run once, after the first page
    this.finder = new Finder(ref, row, this);
    this.list = h("ol", { class: "messages" });
    this.where = h("span", { class: "page-where muted" });
    this.totals = h("span", { class: "page-totals muted" });
    this.prev = h("button", { type: "button", class: "page-prev", text: "← previous", onclick: () => this.turn(-1) });
    this.next = h("button", { type: "button", class: "page-next", text: "next →", onclick: () => this.turn(1) });
    this.pager = h("div", { class: "pager" }, this.prev, this.where, this.next, this.totals);
    this.el = h("section", { class: "trajectory-messages", "aria-label": "messages" });
  }

  start() {
    Object.assign(debug.trajectory, { id: this.row.id, state: this.row.body.state });
    if (!this.mayRead) return this.refuse();
    return this.load();
  }

  refuse() {
    replaceParams({ offset: null });
    this.el.replaceChildren(h("p", { class: "notice no-permission", text: NO_CONTENT_PERMISSION }));
    debug.trajectory.state = "no-permission";
  }

  turn(by) {
    const offset = this.offset + by * PAGE_SIZE;
    if (offset < 0 || (by > 0 && this.next.disabled)) return null;
    this.offset = offset;
    return this.load();
  }

  /** Show message `index` (from 0), loading its page when another is shown: it is
   * scrolled to, opened where a match or the failure is, and marked current. */
  async goTo(index, why) {
    const offset = Math.floor(index / PAGE_SIZE) * PAGE_SIZE;
    if (offset !== this.offset || !this.list.isConnected) {
      this.offset = offset;
      await this.load();
    }
    const item = this.list.querySelector(`.message[data-index="${index}"]`);
    if (!(item instanceof HTMLElement)) return;
    for (const old of this.list.querySelectorAll(".message.current")) old.classList.remove("current", "current-hit", "current-failed");
    item.classList.add("current", `current-${why}`);
    // What holds a match (or the failing result's output) is opened, so it can be read.
    const opened = why === "hit" ? [...item.querySelectorAll("mark.search-hit")].map((m) => m.closest(".collapsible, details")) : [...item.querySelectorAll(":scope > .collapsible")];
    for (const wrap of opened) {
      if (wrap instanceof HTMLDetailsElement) wrap.open = true;
      else if (wrap instanceof HTMLElement) setOpen(wrap, true);
    }
    item.scrollIntoView({ block: "start" });
    debug.trajectory.current = index;
  }

  /** The finder's query changed: mark it again on the page shown. */
  marksChanged() {
    clearHighlights(this.list);
    debug.trajectory.marks = highlight(this.list, this.finder.query.trim() ? this.finder.query : "");
    for (const item of this.list.querySelectorAll(".message")) {
      item.classList.toggle("search-match", item instanceof HTMLElement && this.finder.hits.includes(Number(item.dataset.index)));
    }
  }

  async load() {
    let answer;
    try {
      answer = await api.body(this.ref.project, this.ref.run, this.row.id, this.offset, PAGE_SIZE);
    } catch (error) {
      if (error.status === 401 || error.status === 403) return this.refuse();
      this.el.replaceChildren(h("p", { class: "notice", text: `Could not load the messages: ${error.message}` }));
      return;
    }
    debug.trajectory.loads += 1;
    if (answer.messages == null) {
      // The body went (expired, deleted) between the index read and this one.
      this.el.replaceChildren();
      debug.trajectory.state = answer.body.state;
      return answer;
    }
    if (!answer.messages.length && this.offset > 0) {
      this.offset = 0;
      return this.load();
    }
    const first = !this.restored;
    this.restored = true;
    this.firstStamp = stampSeconds(answer.totals?.time?.first);
    this.failedAt = answer.first_failed_tool_call?.message ?? null;
    this.finder.setFailed(answer.first_failed_tool_call ?? null);
    this.onRead(answer);
    this.render(answer);
    if (first) await this.finder.restore(new URLSearchParams(location.search).get("q"));
  }

  render(answer) {
    const { messages, offset } = answer;
    replaceParams({ offset: offset || null });
    this.list.replaceChildren(...messages.map((m, i) => message(m, offset + i + 1, this.firstStamp)));
    const failed = this.list.querySelector(`.message[data-index="${this.failedAt}"]`);
    if (failed) failed.classList.add("first-failed-tool-call");
    this.marksChanged();
    this.list.start = offset + 1;
    const kept = this.row.message_count;
    this.where.textContent = messages.length
      ? `messages ${fmtInt(offset + 1)}–${fmtInt(offset + messages.length)} of ${fmtInt(kept)} kept`
      : "no messages";
    this.totals.textContent = messages.length ? pageTotals(messages) : "";
    this.prev.disabled = offset === 0;
    this.next.disabled = answer.next_offset == null;
    this.pager.hidden = kept <= PAGE_SIZE;
    this.el.replaceChildren(h("h2", { class: "section-title", text: "Messages" }), this.finder.el, this.pager, this.list);
    Object.assign(debug.trajectory, { state: "stored", offset, shown: messages.map((_, i) => offset + i) });
  }
}
