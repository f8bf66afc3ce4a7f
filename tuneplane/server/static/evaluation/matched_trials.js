// The trials behind one transition count of the matched view (?transition=…), a page at a
// time from the server by trial ID; a trial opens both its trajectories side by side
// (?trial=…). The address keeps what is open, so a link reopens it.

import { debug } from "../lib/debug.js";
import { h } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";
import { replaceParams } from "../lib/url.js";
import * as evalApi from "./api.js";
import { outcomeCell, pairRefused, sideBySide, sideHref } from "./side_by_side.js";

export const PAGE_SIZE = 50;

debug.matchedTrials = { transition: null, shown: [], pair: null };

function textLink(side, trialId, outcome) {
  if (outcome?.trajectory == null) return h("span", { class: "muted", text: "no text" });
  return h("a", { class: "trajectory-open", href: sideHref(side, trialId, outcome), text: "text" });
}

export class TransitionTrials {
  /** `sides`: the API's {left, left_attempt, right, right_attempt}; `labels`: transition -> words. */
  constructor(sides, labels) {
    this.sides = sides;
    this.labels = labels;
    this.transition = null;
    this.count = 0;
    // The `after` of each page shown so far: the first page's is null.
    this.afters = [null];
    this.el = h("section", { class: "transition-trials", "aria-label": "trials of a transition" });
    this.pair = h("section", { class: "pair-view", "aria-label": "one trial side by side" });
  }

  async open(transition, count) {
    Object.assign(this, { transition, count, afters: [null] });
    replaceParams({ transition, trial: null });
    this.pair.replaceChildren();
    await this.load();
  }

  async turn(by) {
    if (by > 0) this.afters.push(this.next);
    else if (this.afters.length > 1) this.afters.pop();
    await this.load();
  }

  async load() {
    const after = this.afters[this.afters.length - 1];
    let answer;
    try {
      answer = await evalApi.matchedTrials(this.sides, this.transition, after, PAGE_SIZE);
    } catch (error) {
      if (!error.status || error.status >= 500) throw error;
      this.el.replaceChildren(h("p", { class: "notice", text: `Could not list the trials: ${error.message}` }));
      return;
    }
    this.next = answer.next;
    this.render(answer);
  }

  render(answer) {
    const first = (this.afters.length - 1) * PAGE_SIZE;
    const where = answer.trials.length ? `trials ${fmtInt(first + 1)}–${fmtInt(first + answer.trials.length)} of ${fmtInt(this.count)}` : "no trials";
    const pager = h(
      "div",
      { class: "pager" },
      h("button", { type: "button", class: "page-prev", text: "← previous", disabled: this.afters.length === 1, onclick: () => this.turn(-1) }),
      h("span", { class: "page-where muted", text: where }),
      h("button", { type: "button", class: "page-next", text: "next →", disabled: answer.next == null, onclick: () => this.turn(1) }),
    );
    const rows = answer.trials.map((t) =>
      h(
        "tr",
        { dataset: { trial: t.trial_id } },
        h("td", {}, h("button", { type: "button", class: "link trial-open", text: t.trial_id, onclick: () => this.openTrial(t.trial_id) })),
        h("td", { class: "task", text: t.task }),
        h("td", { class: "num", text: t.repeat == null ? "—" : String(t.repeat) }),
        h("td", { class: "side-outcome left" }, outcomeCell(t.left)),
        h("td", { class: "side-outcome right" }, outcomeCell(t.right)),
        h("td", { class: "texts" }, textLink(answer.left, t.trial_id, t.left), " · ", textLink(answer.right, t.trial_id, t.right)),
      ),
    );
    this.el.replaceChildren(
      h("h2", { class: "section-title", text: `Trials: ${this.labels[this.transition] ?? this.transition}` }),
      pager,
      h(
        "div",
        { class: "matched-trials-list" },
        h(
          "table",
          { class: "table matched-trials" },
          h("thead", {}, h("tr", {}, ["trial", "task", "repeat", "left", "right", "text (left · right)"].map((c) => h("th", { text: c })))),
          h("tbody", {}, rows),
        ),
      ),
    );
    Object.assign(debug.matchedTrials, { transition: this.transition, shown: answer.trials.map((t) => t.trial_id) });
  }

  async openTrial(trial) {
    replaceParams({ trial });
    for (const row of this.el.querySelectorAll("tr[data-trial]")) {
      if (row instanceof HTMLElement) row.classList.toggle("selected", row.dataset.trial === trial);
    }
    this.pair.replaceChildren(h("p", { class: "muted", text: "Loading both trajectories…" }));
    let answer;
    try {
      answer = await evalApi.matchedTrial(this.sides, trial);
    } catch (error) {
      if (error.status === 401 || error.status === 403) {
        this.pair.replaceChildren(pairRefused());
        return;
      }
      if (!error.status || error.status >= 500) throw error;
      this.pair.replaceChildren(h("p", { class: "notice", text: error.message }));
      return;
    }
    this.pair.replaceChildren(sideBySide(answer));
    // Below a page of 50 trials: bring the two trajectories into view.
    this.pair.scrollIntoView({ block: "start" });
    debug.matchedTrials.pair = { trial, divergence: answer.first_divergence };
  }
}
