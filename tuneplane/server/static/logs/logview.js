// The logs tab: the run's stdout/stderr live (…/logs/stream, resumed by the browser with
// Last-Event-ID after a drop), labelled by stream, searchable. Lines are text nodes only.

import { logStreamUrl } from "../lib/api.js";
import { debug } from "../lib/debug.js";
import { debounce, h, perFrame } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { address, here } from "../lib/root.js";
import { withParam } from "../lib/url.js";

/** The page keeps the newest lines; older ones stay readable through the API. */
export const MAX_LINES = 20000;
/** How long a line a diagnosis cites is waited for while the log streams in. */
const REVEAL_WAIT_MS = 5000;
const STREAMS = ["stdout", "stderr"];

export class LogView {
  /** `you` is what the caller may do with the run (the run object's `you`). */
  constructor(ref, you = null) {
    this.ref = ref;
    this.allowed = you?.logs ?? true;
    this.lines = [];
    this.dropped = 0;
    this.queue = [];
    this.lastCursor = 0;
    this.lastAttempt = null;
    this.source = null;
    this.query = new URLSearchParams(location.search).get("logq") ?? "";
    this.streams = new Set(STREAMS);

    this.search = h("input", {
      type: "search",
      class: "filter",
      name: "log-search",
      placeholder: "search log lines",
      value: this.query,
      "aria-label": "search log lines",
    });
    this.search.addEventListener(
      "input",
      debounce(() => {
        this.query = this.search.value;
        history.replaceState(null, "", address(withParam("logq", this.query)) + location.hash);
        this.applyFilter();
      }, 150),
    );
    const streamBoxes = STREAMS.map((stream) =>
      h(
        "label",
        { class: `control stream-${stream}` },
        h("input", {
          type: "checkbox",
          name: stream,
          checked: true,
          onchange: (event) => {
            if (event.target.checked) this.streams.add(stream);
            else this.streams.delete(stream);
            this.applyFilter();
          },
        }),
        h("span", { text: stream }),
      ),
    );
    this.follow = h("input", { type: "checkbox", name: "follow", checked: true });
    this.status = h("span", { class: "live-state", text: "connecting…" });
    this.count = h("span", { class: "muted" });
    this.notice = h("p", { class: "log-notice", hidden: true });
    this.revealNote = h("p", { class: "log-notice reveal-note", hidden: true });
    this.wanted = null;
    this.empty = h("p", {
      class: "empty log-empty",
      text: "No log lines yet. The output of `tuneplane run -- CMD` appears here as it is printed.",
    });
    this.list = h("div", { class: "log-lines", role: "log", "aria-live": "off" });
    this.el = h(
      "div",
      { class: "logs" },
      h(
        "div",
        { class: "toolbar" },
        this.search,
        ...streamBoxes,
        h("label", { class: "control" }, this.follow, h("span", { text: "follow" })),
        h("span", { class: "spacer" }),
        this.count,
        this.status,
      ),
      this.notice,
      this.revealNote,
      this.empty,
      this.list,
    );
    this.flush = perFrame(() => this.drain());
  }

  start() {
    if (!this.allowed) {
      this.status.textContent = "";
      this.empty.textContent = "";
      this.empty.append(
        "This project shows its logs to its members only. ",
        h("a", { href: `/sign-in?next=${encodeURIComponent(here() + location.search)}`, text: "Sign in" }),
        " to read them.",
      );
      return;
    }
    if (this.source) return;
    const url = `${logStreamUrl(this.ref.project, this.ref.run)}?after=${this.lastCursor}`;
    this.source = new EventSource(address(url));
    this.source.addEventListener("open", () => {
      this.status.textContent = "live";
      this.status.className = "live-state live";
    });
    this.source.addEventListener("line", (event) => {
      this.queue.push(JSON.parse(event.data));
      this.flush();
    });
    this.source.addEventListener("error", () => {
      this.status.textContent = "reconnecting…";
      this.status.className = "live-state reconnecting";
      if (this.source.readyState === EventSource.CLOSED) {
        this.source = null;
        setTimeout(() => this.start(), 3000);
      }
    });
  }

  stop() {
    this.source?.close();
    this.source = null;
  }

  drain() {
    const fresh = this.queue.filter((line) => line.cursor > this.lastCursor);
    this.queue = [];
    if (!fresh.length) return;
    const fragment = document.createDocumentFragment();
    for (const line of fresh) {
      if (line.attempt !== this.lastAttempt) {
        if (this.lastAttempt !== null) {
          fragment.append(h("div", { class: "log-attempt", text: `attempt ${line.attempt}` }));
        }
        this.lastAttempt = line.attempt;
      }
      const el = this.render(line);
      this.lines.push({ line, el });
      fragment.append(el);
      this.lastCursor = line.cursor;
    }
    this.list.append(fragment);
    this.trim();
    this.empty.hidden = this.lines.length > 0;
    this.count.textContent = `${this.lines.length + this.dropped} lines`;
    debug.logs.lines = this.lines.length + this.dropped;
    if (this.follow.checked) this.list.scrollTop = this.list.scrollHeight;
    if (this.wanted) this.seek();
  }

  /**
   * Show a line a diagnosis cites, once it is here: filters that hide it are cleared and
   * following stops. A citation names a line by its text (its first 500 characters) and its
   * place in the tail the diagnosis read, not by its number: the attempt's last line that
   * begins with that text is the one.
   */
  reveal(attempt, text) {
    if (!text) return;
    this.wanted = { attempt, text, until: Date.now() + REVEAL_WAIT_MS };
    this.revealNote.hidden = true;
    this.seek();
    if (this.wanted) setTimeout(() => this.seek(), REVEAL_WAIT_MS + 50);
  }

  seek() {
    const wanted = this.wanted;
    if (!wanted) return;
    const found = this.lines.findLast(
      ({ line }) => line.attempt === wanted.attempt && line.text.startsWith(wanted.text),
    );
    if (!found) {
      if (Date.now() < wanted.until) return;
      this.wanted = null;
      this.revealNote.hidden = false;
      this.revealNote.textContent = "The cited line is not among the lines shown here; the diagnosis quotes it.";
      return;
    }
    this.wanted = null;
    if (found.el.hidden) this.clearFilters();
    this.follow.checked = false;
    for (const el of this.list.querySelectorAll(".log-line.cited")) el.classList.remove("cited");
    found.el.classList.add("cited");
    found.el.scrollIntoView({ block: "center" });
  }

  /** Every line shown again: no search (the address follows, as when typed), both streams. */
  clearFilters() {
    this.query = "";
    this.search.value = "";
    this.search.dispatchEvent(new Event("input"));
    this.streams = new Set(STREAMS);
    for (const box of this.el.querySelectorAll(".toolbar input[type=checkbox]")) {
      if (STREAMS.includes(box.name)) box.checked = true;
    }
    this.applyFilter();
  }

  trim() {
    const extra = this.lines.length - MAX_LINES;
    if (extra <= 0) return;
    for (const { el } of this.lines.splice(0, extra)) el.remove();
    this.dropped += extra;
    this.notice.hidden = false;
    this.notice.textContent = `${this.dropped} earlier lines are not shown here; read them with GET …/logs?after=0.`;
  }

  render(line) {
    const text = h("span", { class: "ln-text" });
    const el = h(
      "div",
      {
        class: `log-line ${line.stream}`,
        title: `attempt ${line.attempt}, line ${line.seq}, ${fmtTime(line.time)}`,
      },
      h("span", { class: "ln-time", text: fmtTime(line.time).slice(11) }),
      h("span", { class: "ln-stream", text: line.stream }),
      text,
      line.data ? h("span", { class: "ln-binary", title: "not UTF-8: the original bytes are kept", text: "bytes" }) : null,
    );
    this.show(line, el, text);
    return el;
  }

  /** Hide lines that do not match; mark the matches. */
  show(line, el, text = el.querySelector(".ln-text")) {
    const query = this.query.toLowerCase();
    const hit = !query || line.text.toLowerCase().includes(query);
    el.hidden = !(hit && this.streams.has(line.stream));
    if (!query || !hit) {
      text.textContent = line.text;
      return;
    }
    const parts = [];
    const lower = line.text.toLowerCase();
    let at = 0;
    for (let found = lower.indexOf(query); found >= 0; found = lower.indexOf(query, at)) {
      parts.push(line.text.slice(at, found), h("mark", { text: line.text.slice(found, found + query.length) }));
      at = found + query.length;
    }
    parts.push(line.text.slice(at));
    text.replaceChildren(...parts.filter((p) => p !== ""));
  }

  applyFilter() {
    for (const { line, el } of this.lines) this.show(line, el);
    const shown = this.lines.reduce((n, { el }) => n + (el.hidden ? 0 : 1), 0);
    this.count.textContent = this.query || this.streams.size < STREAMS.length
      ? `${shown} of ${this.lines.length} lines`
      : `${this.lines.length + this.dropped} lines`;
  }
}
