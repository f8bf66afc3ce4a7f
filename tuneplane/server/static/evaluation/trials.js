// "Inspect trial results" of one round: the current outcome of every reported trial, paged by
// the server (…/evaluation/{round}/trials, by trial id), filtered by status, and a trial's
// retry history (…/trials/{trial}, up to 100 attempts shown of however many). Every read
// names the round's execution attempt. Refreshed when outcomes arrive, so a retry that
// lands moves its trial from one filter to another. Each attempt of the history links to
// its trajectory, saying what became of its text (the trajectory index, one request).

import * as api from "./api.js";
import { debug } from "../lib/debug.js";
import { h } from "../lib/dom.js";
import { fmtInt, fmtNum, fmtTime } from "../lib/format.js";
import { replaceParams } from "../lib/url.js";
import { fmtPct, STATUS_MANY, STATUSES, statusBadge } from "./figures.js";
import { index as trajectoryIndex, pageHref } from "../trajectories/api.js";
import { textNotes } from "../trajectories/text.js";

export const PAGE_SIZE = 50;

debug.trials = { round: null, status: null, page: 0, shown: [], history: null };

const yesNo = (value) => (value ? "yes" : "no");

export class TrialInspector {
  constructor(ref, round, attempt, onClose) {
    this.ref = ref;
    this.round = round;
    this.attempt = attempt;
    const params = new URLSearchParams(location.search);
    this.status = STATUS_MANY[params.get("status")] ? params.get("status") : null;
    this.trial = params.get("trial");
    // afters[i] is the cursor of page i (null for the first page).
    this.afters = [null];
    this.next = null;

    this.title = h("h2", { class: "section-title" });
    this.protocol = h("p", { class: "muted protocol" });
    this.repeats = h("div", { class: "repeats", hidden: true });
    this.notRun = h("div", { class: "not-run", hidden: true });
    this.filters = h("nav", { class: "outcome-filters", "aria-label": "filter by status" });
    this.rows = h("tbody");
    this.table = h(
      "table",
      { class: "table trials-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["trial", "status", "eligible", "reward", "execution attempt", "trial attempt", "attempts reported"].map(
            (label) => h("th", { text: label }),
          ),
        ),
      ),
      this.rows,
    );
    this.prev = h("button", { type: "button", class: "page-prev", text: "← previous", onclick: () => this.turn(-1) });
    this.nextButton = h("button", { type: "button", class: "page-next", text: "next →", onclick: () => this.turn(1) });
    this.where = h("span", { class: "page-where muted" });
    this.history = h("div", { class: "history" });
    this.el = h(
      "section",
      { class: "inspector" },
      h(
        "header",
        { class: "inspector-head" },
        this.title,
        h("button", { type: "button", class: "secondary", text: "close", onclick: onClose }),
      ),
      this.protocol,
      this.notRun,
      this.repeats,
      this.filters,
      h("div", { class: "trials-body" }, h("div", { class: "trials-list" }, this.table, h("div", { class: "pager" }, this.prev, this.where, this.nextButton)), this.history),
    );
  }

  start() {
    this.renderHead();
    return Promise.all([this.loadPage(), this.trial ? this.loadHistory() : null, this.loadRound()]);
  }

  /** The round's own read: its planned trials never reported, and its repeats. */
  async loadRound() {
    const { project, run } = this.ref;
    let read = null;
    try {
      read = await api.round(project, run, this.round.round_id, this.attempt);
    } catch (error) {
      console.warn("the round read failed; its repeats and trials not reported are not shown", error);
    }
    this.showNotRun(read?.planned_not_reported ?? null, read?.not_yet_reported?.value ?? null);
    this.showRepeats(read?.repeats ?? null);
  }

  /** The planned trials without an outcome, by ID; where the declaration did not list them,
   * that is said beside their count. */
  showNotRun(notRun, count) {
    const ids = notRun?.trial_ids;
    this.notRun.hidden = !(ids?.length || (ids == null && notRun?.reason && count));
    if (this.notRun.hidden) return;
    if (ids == null) {
      this.notRun.replaceChildren(h("span", { class: "muted", text: `${fmtInt(count)} planned trials not reported: ${notRun.reason}.` }));
      return;
    }
    this.notRun.replaceChildren(
      h("span", { class: "not-run-label", text: `Planned, never reported (${fmtInt(ids.length)}): ` }),
      ...ids.flatMap((id, i) => [i ? ", " : null, h("code", { class: "not-run-id", text: id })]),
    );
  }

  /** pass@k and the clustered interval, when the round's tasks ran more than once. */
  showRepeats(repeats) {
    this.repeats.hidden = !repeats;
    if (!repeats) return;
    const passes = repeats.pass_at.map(({ k, value, tasks }) =>
      h("span", { class: "pass-at", dataset: { k: String(k) }, title: `mean over the ${fmtInt(tasks)} tasks run at least ${k} times`, text: `pass@${k} ${fmtPct(value)}` }),
    );
    const clustered = repeats.clustered_rate;
    this.repeats.replaceChildren(
      h("span", { class: "muted", text: `${fmtInt(repeats.tasks)} tasks, up to ${repeats.most_repeats} repeats (scored trials only): ` }),
      ...passes.flatMap((item, i) => (i ? [" · ", item] : [item])),
      clustered
        ? h("span", {
            class: "clustered",
            title: clustered.method,
            text: `; success rate ${fmtPct(clustered.value)}, 95% CI ${fmtPct(clustered.interval95[0])}–${fmtPct(clustered.interval95[1])} with each task's repeats as one cluster`,
          })
        : null,
    );
  }

  /** New counts for the round: redraw the filters and fetch the page and history again. */
  update(round) {
    this.round = round;
    return this.start();
  }

  renderHead() {
    const round = this.round;
    this.title.textContent = `Trial results of round ${round.round_id} (execution attempt ${this.attempt})`;
    const digests = Object.entries(round.digests ?? {}).filter(([, value]) => value);
    this.protocol.replaceChildren(
      round.declared
        ? `Population: ${fmtInt(round.expected)} trials declared${digests.length ? "; digests " : "."}`
        : "No population declared for this round: coverage and not-yet-reported are unknown.",
      ...digests.map(([name, value], i) =>
        h("span", { class: "digest", title: `${name} ${value}`, text: `${i ? ", " : ""}${name} ${value.slice(0, 12)}…` }),
      ),
    );
    const counts = round.counts;
    const choices = [[null, "all", counts.reported], ...STATUSES.map(([status, many]) => [status, many, counts[status]])];
    this.filters.replaceChildren(
      ...choices.map(([status, label, count]) =>
        h(
          "button",
          {
            type: "button",
            class: `outcome-filter ${status ?? "all"}`,
            "aria-pressed": String(status === this.status),
            dataset: { status: status ?? "all" },
            onclick: () => this.filter(status),
          },
          h("span", { text: label }),
          h("span", { class: "count", text: fmtInt(count) }),
        ),
      ),
    );
  }

  total() {
    return this.status ? this.round.counts[this.status] : this.round.counts.reported;
  }

  filter(status) {
    this.status = status;
    this.afters = [null];
    replaceParams({ status });
    this.renderHead();
    return this.loadPage();
  }

  turn(by) {
    if (by > 0 && this.next) this.afters.push(this.next);
    else if (by < 0 && this.afters.length > 1) this.afters.pop();
    else return null;
    return this.loadPage();
  }

  async loadPage() {
    const after = this.afters[this.afters.length - 1];
    let answer;
    try {
      answer = await api.trials(this.ref.project, this.ref.run, this.round.round_id, this.attempt, {
        status: this.status,
        after,
        limit: PAGE_SIZE,
      });
    } catch (error) {
      this.rows.replaceChildren(this.message(`Could not load the trials: ${error.message}`));
      return;
    }
    // A live change can empty a later page (its trials moved to another filter): step back.
    if (!answer.trials.length && this.afters.length > 1) {
      this.afters.pop();
      await this.loadPage();
      return;
    }
    this.next = answer.next;
    this.renderPage(answer.trials);
  }

  message(text) {
    return h("tr", {}, h("td", { class: "empty-cell", colspan: "7", text }));
  }

  renderPage(trials) {
    const page = this.afters.length - 1;
    const first = page * PAGE_SIZE;
    const label = this.status ? STATUS_MANY[this.status] : "reported trials";
    this.rows.replaceChildren(
      ...(trials.length
        ? trials.map((t) =>
            h(
              "tr",
              { dataset: { trial: t.trial_id }, class: t.trial_id === this.trial ? "selected" : null },
              h("td", {}, h("button", { type: "button", class: "link trial-link", text: t.trial_id, onclick: () => this.select(t.trial_id) })),
              h("td", {}, statusBadge(t.status)),
              h("td", { text: yesNo(t.eligible) }),
              h("td", { class: "num", text: fmtNum(t.reward) }),
              h("td", { class: "num", text: String(t.execution_attempt) }),
              h("td", { class: "num", text: String(t.trial_attempt) }),
              h("td", { class: "num", text: fmtInt(t.attempts) }),
            ),
          )
        : [this.message(`No ${label} in this round${this.status ? " at the moment" : " yet"}.`)]),
    );
    this.where.textContent = trials.length
      ? `${label} ${fmtInt(first + 1)}–${fmtInt(first + trials.length)} of ${fmtInt(this.total())}`
      : "";
    this.prev.disabled = page === 0;
    this.nextButton.disabled = !this.next;
    Object.assign(debug.trials, {
      round: this.round.round_id,
      status: this.status,
      page,
      shown: trials.map((t) => t.trial_id),
    });
  }

  select(trial) {
    this.trial = trial;
    replaceParams({ trial });
    for (const row of this.rows.querySelectorAll("tr[data-trial]")) {
      row.classList.toggle("selected", row.dataset.trial === trial);
    }
    return this.loadHistory();
  }

  /** trial_attempt -> index row of the trial's trajectories; null when the index failed. */
  async trajectories(trial) {
    try {
      const filters = { scope: "evaluation", attempt: this.attempt, round_id: this.round.round_id, trial_id: trial, limit: 100 };
      const answer = await trajectoryIndex(this.ref.project, this.ref.run, filters);
      return new Map(answer.items.map((row) => [row.trial_attempt, row]));
    } catch {
      return null;
    }
  }

  /** The attempt's trajectory page, named by what became of its text. */
  trajectoryLink(trial, a, texts) {
    const row = texts?.get(a.trial_attempt) ?? null;
    const named = { attempt: a.execution_attempt, round_id: this.round.round_id, trial_id: trial, trial_attempt: a.trial_attempt };
    const state = texts == null ? null : row?.body.state === "stored" ? "stored" : textNotes(row)[0];
    const text = state == null ? "trajectory" : state === "stored" ? "messages" : state.short;
    return h("a", {
      class: `trajectory-link-cell ${state?.kind ?? state ?? ""}`,
      href: pageHref(this.ref.project, this.ref.run, named),
      "aria-label": `trajectory of trial attempt ${a.trial_attempt}: ${text}`,
      text,
    });
  }

  async loadHistory() {
    const trial = this.trial;
    let answer;
    let texts;
    try {
      [answer, texts] = await Promise.all([
        api.trialHistory(this.ref.project, this.ref.run, this.round.round_id, trial, this.attempt),
        this.trajectories(trial),
      ]);
    } catch (error) {
      this.history.replaceChildren(
        h("p", { class: "notice", text: error.status === 404 ? `Trial “${trial}” has no reported attempt in this round.` : `Could not load the history: ${error.message}` }),
      );
      return;
    }
    if (trial !== this.trial) return; // another trial was chosen meanwhile
    const attempts = answer.attempts;
    const total = answer.total_attempts;
    debug.trials.history = { trial, attempts: attempts.length, total };
    this.history.replaceChildren(
      h("h3", { text: `Retry history of ${trial}` }),
      h("p", {
        class: "muted history-count",
        text:
          total > attempts.length
            ? `${fmtInt(total)} attempts reported; the newest ${fmtInt(attempts.length)} are shown, current first.`
            : `${fmtInt(total)} attempt${total === 1 ? "" : "s"}, current first: the highest attempt is the trial's outcome.`,
      }),
      h(
        "table",
        { class: "table history-table" },
        h(
          "thead",
          {},
          h("tr", {}, ["", "execution attempt", "trial attempt", "status", "eligible", "reward", "error type, reason", "received", "trajectory"].map((label) => h("th", { text: label }))),
        ),
        h(
          "tbody",
          {},
          attempts.map((a, i) =>
            h(
              "tr",
              { class: i === 0 ? "current" : null },
              h("td", { class: "muted", text: i === 0 ? "current" : "" }),
              h("td", { class: "num", text: String(a.execution_attempt) }),
              h("td", { class: "num", text: String(a.trial_attempt) }),
              h("td", {}, statusBadge(a.status)),
              h("td", { text: yesNo(a.eligible) }),
              h("td", { class: "num", text: fmtNum(a.reward) }),
              // Why an unscored or errored attempt has no verdict (its code on hover).
              h(
                "td",
                {},
                h("span", { class: "error-type", text: a.error_type ?? "—" }),
                a.reason ? h("div", { class: "trial-reason muted", title: a.reason_code, text: a.reason }) : null,
              ),
              h("td", { text: fmtTime(a.received_at) }),
              h("td", {}, this.trajectoryLink(trial, a, texts)),
            ),
          ),
        ),
      ),
    );
  }
}
