// The Validation tab: per evaluation round, the counts of successes, model failures,
// execution errors, unscored and not yet reported trials; success rate and scoring coverage
// with their Wilson 95% intervals, or the reason there is none. A run that never sent an
// outcome event is "unknown", never 0%. "Inspect trial results" opens one round's trials.

import * as api from "../lib/api.js";
import { debug } from "../lib/debug.js";
import { empty, h, serial } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";
import { replaceParams } from "../lib/url.js";
import { countFigure, rateFigure, roundSpec, STATUSES } from "./figures.js";
import { TrialInspector } from "./trials.js";

debug.validation = { state: null, rounds: 0, loads: 0 };

export class ValidationView {
  constructor(ref) {
    this.ref = ref;
    this.rounds = [];
    this.inspector = null;
    this.summary = h("div", { class: "rounds" }, h("p", { class: "muted", text: "Loading the evaluation…" }));
    this.inspectorSlot = h("div");
    this.el = h("div", { class: "validation" }, this.summary, this.inspectorSlot);
    this.refresh = serial(() => this.load());
  }

  start() {
    this.refresh();
  }

  async load() {
    let answer;
    try {
      answer = await api.evaluation(this.ref.project, this.ref.run);
    } catch (error) {
      this.summary.replaceChildren(h("p", { class: "notice", text: `Could not load the evaluation: ${error.message}` }));
      return;
    }
    this.rounds = answer.rounds;
    Object.assign(debug.validation, { state: answer.state, rounds: answer.rounds.length });
    debug.validation.loads += 1;
    if (answer.state === "unknown") {
      this.summary.replaceChildren(
        empty(
          "Evaluation outcomes: unknown.",
          "This run has never sent an outcome event (a population declaration or a trial result), so its successes, failures and coverage are unknown, not zero.",
          "Rounds appear here as soon as the first outcome arrives (docs/evaluation.md says how to send them).",
        ),
      );
      this.closeInspector(false);
      return;
    }
    this.summary.replaceChildren(
      h("h2", { class: "section-title", text: `Evaluation rounds (${answer.rounds.length})` }),
      this.table(answer.rounds),
    );
    const wanted = new URLSearchParams(location.search).get("round");
    const round = answer.rounds.find((r) => r.round_id === wanted);
    if (!round) {
      this.closeInspector(wanted != null);
    } else if (this.inspector?.round.round_id === round.round_id) {
      await this.inspector.update(round);
    } else {
      this.openInspector(round);
    }
  }

  table(rounds) {
    const head = [
      "round",
      "task",
      "expected",
      ...STATUSES.map(([, many]) => many),
      "not yet reported",
      "success rate",
      "scoring coverage",
      "",
    ];
    return h(
      "table",
      { class: "table rounds-table" },
      h("thead", {}, h("tr", {}, head.map((label) => h("th", { text: label })))),
      h(
        "tbody",
        {},
        rounds.map((round) =>
          h(
            "tr",
            { dataset: { round: round.round_id }, class: this.inspector?.round.round_id === round.round_id ? "selected" : null },
            h("td", { class: "round-id", text: round.round_id }),
            h("td", { text: round.task?.name ? [round.task.name, round.task.version].filter(Boolean).join(" ") : "—" }),
            h("td", { class: "num col-expected", text: round.declared ? fmtInt(round.expected) : "not declared" }),
            STATUSES.map(([status]) => h("td", { class: `num col-${status}`, text: fmtInt(round.counts[status]) })),
            h("td", { class: "num col-not-reported" }, countFigure(round.not_yet_reported)),
            h("td", { class: "col-rate" }, rateFigure(round.success_rate)),
            h("td", { class: "col-coverage" }, rateFigure(round.scoring_coverage)),
            h(
              "td",
              {},
              h(
                "div",
                { class: "round-actions" },
                h("button", { type: "button", text: "Inspect trial results", onclick: () => this.select(round) }),
                h("a", {
                  href: api.page.matched(roundSpec(this.ref.project, this.ref.run, round.round_id)),
                  text: "compare with…",
                }),
              ),
            ),
          ),
        ),
      ),
    );
  }

  select(round) {
    replaceParams({ round: round.round_id, status: null, trial: null });
    this.openInspector(round);
    for (const row of this.summary.querySelectorAll("tr[data-round]")) {
      row.classList.toggle("selected", row.dataset.round === round.round_id);
    }
  }

  openInspector(round) {
    this.inspector = new TrialInspector(this.ref, round, () => this.closeInspector(false));
    this.inspectorSlot.replaceChildren(this.inspector.el);
    this.inspector.start();
  }

  /** Close the round's trials; say so when the address named a round this run lacks. */
  closeInspector(unknownRound) {
    this.inspector = null;
    const round = new URLSearchParams(location.search).get("round");
    this.inspectorSlot.replaceChildren(
      unknownRound ? h("p", { class: "notice", text: `This run has no round named “${round}”.` }) : "",
    );
    if (!unknownRound) replaceParams({ round: null, status: null, trial: null });
    for (const row of this.summary.querySelectorAll("tr.selected")) row.classList.remove("selected");
  }
}
