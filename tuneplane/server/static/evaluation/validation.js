// The Validation tab: per evaluation round, the counts of successes, model failures,
// execution errors, unscored and not yet reported trials; success rate and scoring coverage
// with their Wilson 95% intervals, or the reason there is none. A run that never sent an
// outcome event is "unknown", never 0%. "Inspect trial results" opens one round's trials.
// A round is (run, execution attempt, round_id): the rounds shown are one execution
// attempt's, the latest that reported outcomes unless the address names one (?attempt=N).

import * as evalApi from "./api.js";
import { debug } from "../lib/debug.js";
import { empty, h, serial } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";
import { replaceParams } from "../lib/url.js";
import { countFigure, meanFigure, rateFigure, roundSpec, STATUSES } from "./figures.js";
import { TrialInspector } from "./trials.js";

debug.validation = { state: null, rounds: 0, loads: 0, attempt: null };

/** The execution attempt the address names, or null for the latest with outcomes. */
const wantedAttempt = () => {
  const value = Number.parseInt(new URLSearchParams(location.search).get("attempt") ?? "", 10);
  return Number.isInteger(value) && value > 0 ? value : null;
};

export class ValidationView {
  constructor(ref) {
    this.ref = ref;
    this.rounds = [];
    this.attempt = null;
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
    let refused = null;
    try {
      answer = await evalApi.evaluation(this.ref.project, this.ref.run, wantedAttempt());
    } catch (error) {
      if (error.status !== 404 || wantedAttempt() == null) {
        this.summary.replaceChildren(h("p", { class: "notice", text: `Could not load the evaluation: ${error.message}` }));
        return;
      }
      // The address names an attempt without rounds: say so, and offer those that have them.
      refused = error.message;
      answer = await evalApi.evaluation(this.ref.project, this.ref.run).catch(() => null);
      if (!answer) return;
      answer = { ...answer, state: answer.execution_attempts.length ? "refused" : "unknown", rounds: [] };
    }
    this.rounds = answer.rounds;
    this.attempt = answer.execution_attempt;
    Object.assign(debug.validation, { state: answer.state, rounds: answer.rounds.length, attempt: answer.execution_attempt });
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
    if (refused) {
      this.summary.replaceChildren(this.attemptPicker(answer, null), h("p", { class: "notice attempt-refused", text: refused }));
      this.closeInspector(false);
      return;
    }
    this.summary.replaceChildren(
      this.attemptPicker(answer, answer.execution_attempt),
      h("h2", { class: "section-title", text: `Evaluation rounds (${answer.rounds.length})` }),
      this.table(answer.rounds),
    );
    const wanted = new URLSearchParams(location.search).get("round");
    const round = answer.rounds.find((r) => r.round_id === wanted);
    if (!round) {
      this.closeInspector(wanted != null);
    } else if (this.inspector?.round.round_id === round.round_id && this.inspector.attempt === this.attempt) {
      await this.inspector.update(round);
    } else {
      this.openInspector(round);
    }
  }

  /** Which execution attempt's rounds are shown; a restart's rounds are its own. */
  attemptPicker(answer, current) {
    const attempts = answer.execution_attempts;
    const latest = attempts[attempts.length - 1];
    const select = h(
      "select",
      { name: "execution-attempt", "aria-label": "execution attempt" },
      current == null ? h("option", { value: "", text: "choose one", selected: true }) : null,
      attempts.map((n) => h("option", { value: String(n), text: `${n}${n === latest ? " (latest)" : ""}`, selected: n === current })),
    );
    select.addEventListener("change", () => {
      // Another execution's round of the same name is another round: start from its list.
      replaceParams({ attempt: select.value, status: null, trial: null });
      this.refresh();
    });
    return h(
      "div",
      { class: "attempt-picker" },
      h("label", { class: "control" }, h("span", { class: "control-label", text: "execution attempt" }), select),
      h("span", {
        class: "muted",
        text:
          attempts.length > 1
            ? `${attempts.length} execution attempts reported outcomes; each restart's rounds are its own, never merged.`
            : "One execution attempt reported outcomes.",
      }),
    );
  }

  table(rounds) {
    const head = [
      "round",
      "task",
      "expected",
      ...STATUSES.map(([, many]) => many),
      "not yet reported",
      "success rate (of scored)",
      "scoring coverage",
      "reward coverage",
      "mean reward",
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
            h(
              "td",
              { class: "round-id" },
              round.round_id,
              round.checkpoint?.name
                ? h("span", { class: "checkpoint", title: round.checkpoint.digest ? `digest ${round.checkpoint.digest}` : "", text: ` checkpoint ${round.checkpoint.name}` })
                : null,
              round.trajectories_not_stored > 0
                ? h("span", {
                    class: "unstored",
                    title: "The blob store refused these trajectories; their outcomes are counted. Sending them again stores them.",
                    text: ` ${fmtInt(round.trajectories_not_stored)} trajectories not stored`,
                  })
                : null,
            ),
            h("td", { text: round.task?.name ? [round.task.name, round.task.version].filter(Boolean).join(" ") : "—" }),
            h("td", { class: "num col-expected", text: round.declared ? fmtInt(round.expected) : "not declared" }),
            STATUSES.map(([status]) => h("td", { class: `num col-${status}`, text: fmtInt(round.counts[status]) })),
            h("td", { class: "num col-not-reported" }, countFigure(round.not_yet_reported)),
            h("td", { class: "col-rate" }, rateFigure(round.success_rate)),
            h("td", { class: "col-coverage" }, rateFigure(round.scoring_coverage)),
            h("td", { class: "col-reward-coverage" }, rateFigure(round.reward_coverage)),
            h("td", { class: "col-mean-reward" }, meanFigure(round.mean_reward)),
            h(
              "td",
              {},
              h(
                "div",
                { class: "round-actions" },
                h("button", { type: "button", text: "Inspect trial results", onclick: () => this.select(round) }),
                h("a", {
                  href: evalApi.matchedPage(roundSpec(this.ref.project, this.ref.run, round.round_id), null, this.attempt),
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
    this.inspector = new TrialInspector(this.ref, round, this.attempt, () => this.closeInspector(false));
    this.inspectorSlot.replaceChildren(this.inspector.el);
    this.inspector.start();
  }

  /** Close the round's trials; say so when the address named a round this run lacks. */
  closeInspector(unknownRound) {
    this.inspector = null;
    const round = new URLSearchParams(location.search).get("round");
    this.inspectorSlot.replaceChildren(
      unknownRound
        ? h("p", { class: "notice", text: `Execution attempt ${this.attempt} of this run has no round named “${round}”.` })
        : "",
    );
    if (!unknownRound) replaceParams({ round: null, status: null, trial: null });
    for (const row of this.summary.querySelectorAll("tr.selected")) row.classList.remove("selected");
  }
}
