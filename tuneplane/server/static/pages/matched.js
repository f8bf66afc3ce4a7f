// Matched evaluation evidence (/matched?left=<project>/<run>/<round>&left_attempt=N&right=…):
// one round chosen explicitly on each side, a round being (run, execution attempt, round_id)
// (GET /api/v1/evaluation/matched). The transitions over trials present in both are always
// shown; the success-rate difference (a decimal and the exact fraction) only when the four
// protocol digests match and both rounds are completely scored, otherwise every condition
// that failed, by code and side. It is an observed difference; the exact McNemar test is
// given beside it. Each count opens its trials, and each trial both its trajectories side by
// side (evaluation/matched_trials.js); regressions (success → failure) are open at first.

import * as api from "../lib/api.js";
import * as evalApi from "../evaluation/api.js";
import { debug } from "../lib/debug.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { fmtInt, fmtTime } from "../lib/format.js";
import { address } from "../lib/root.js";
import { rateFigure } from "../evaluation/figures.js";
import { TransitionTrials } from "../evaluation/matched_trials.js";

const SIDES = [
  ["left", "Left (baseline)"],
  ["right", "Right (compared)"],
];

debug.matched = null;

/** "project/run/round" → {project, run, round}; project and run names have no "/". */
function parseSpec(spec) {
  const [project, run, ...rest] = (spec ?? "").split("/");
  const round = rest.join("/");
  return project && run && round ? { project, run, round } : { project: project || "", run: run || "", round: "" };
}

const specOf = ({ project, run, round }) => (project && run && round ? `${project}/${run}/${round}` : null);

/** An execution attempt from the address, or null for the latest with outcomes. */
function attemptOf(value) {
  const n = Number.parseInt(value ?? "", 10);
  return Number.isInteger(n) && n > 0 ? n : null;
}

export async function matchedPage() {
  debug.page = "matched";
  crumbs([["matched evaluation", null]]);
  const params = new URLSearchParams(location.search);
  const chosen = {
    left: { ...parseSpec(params.get("left")), attempt: attemptOf(params.get("left_attempt")) },
    right: { ...parseSpec(params.get("right")), attempt: attemptOf(params.get("right_attempt")) },
  };
  const projects = (await api.projects()).map((p) => p.project);

  const compare = h("button", { type: "button", class: "compare-go", text: "Compare these rounds" });
  const pickers = await Promise.all(SIDES.map(([side, label]) => sidePicker(side, label, chosen[side], projects, () => ready())));
  const ready = () => {
    compare.disabled = !(specOf(chosen.left) && specOf(chosen.right));
  };
  compare.addEventListener("click", () =>
    location.assign(address(evalApi.matchedPage(specOf(chosen.left), specOf(chosen.right), chosen.left.attempt, chosen.right.attempt))),
  );
  ready();

  const result = h("div", { class: "matched-result" });
  mount(
    h("h1", { text: "Matched evaluation evidence" }),
    h("p", {
      class: "muted",
      text: "Pick one evaluation round on each side. Trials are matched by trial ID; transitions count trials present in both rounds.",
    }),
    h("div", { class: "pickers" }, pickers, compare),
    result,
  );

  const left = params.get("left");
  const right = params.get("right");
  if (!left || !right) {
    result.append(
      empty(
        `No round chosen on the ${!left && !right ? "left or the right" : !left ? "left" : "right"}.`,
        "Choose a project, a run and a round on each side, then compare. The Validation tab of a run links here with its round on the left.",
      ),
    );
    return;
  }
  let answer;
  try {
    // The address's attempts, not the pickers' fallbacks: a missing attempt is said, not swapped.
    answer = await evalApi.matched(left, right, attemptOf(params.get("left_attempt")), attemptOf(params.get("right_attempt")));
  } catch (error) {
    if (!error.status || error.status >= 500) throw error;
    result.append(empty("These rounds cannot be compared.", error.message));
    return;
  }
  debug.matched = answer;
  // The attempts the answer read, so every list and trajectory opened is of the same rounds.
  const sides = { left, left_attempt: answer.left.execution_attempt, right, right_attempt: answer.right.execution_attempt };
  const trials = new TransitionTrials(sides, Object.fromEntries(TRANSITIONS));
  const open = (key) => trials.open(key, answer.transitions[key]);
  result.append(renderMatched(answer, { left, right }, open), trials.el, trials.pair);
  // Regressions first: without a transition in the address, success → failure is open.
  const named = params.get("transition");
  const wanted = TRANSITIONS.some(([key]) => key === named) ? named : answer.transitions.success_to_failure > 0 ? "success_to_failure" : null;
  if (wanted == null) return;
  const trial = params.get("trial");
  await open(wanted);
  if (trial) await trials.openTrial(trial);
}

async function sidePicker(side, label, chosen, projects, onChange) {
  const project = h("select", { name: `${side}-project`, "aria-label": `${side} project` });
  const run = h("select", { name: `${side}-run`, "aria-label": `${side} run` });
  const round = h("select", { name: `${side}-round`, "aria-label": `${side} round` });
  const attempt = h("select", { name: `${side}-attempt`, "aria-label": `${side} execution attempt` });
  const note = h("p", { class: "muted picker-note" });
  const options = (select, values, current, none) => {
    select.replaceChildren(
      h("option", { value: "", text: none }),
      ...values.map((value) => h("option", { value, text: value, selected: value === current })),
    );
    if (current && !values.includes(current)) select.value = "";
  };
  // A name from the address that does not exist is said, and the choice left open.
  const missing = (error) => {
    if (error.status !== 404) throw error;
    note.textContent = error.message;
    return [];
  };
  const loadRuns = async () => {
    const runs = chosen.project ? await api.runs(chosen.project).then((list) => list.map((r) => r.run), missing) : [];
    options(run, runs, chosen.run, chosen.project ? "choose a run" : "—");
    if (chosen.run && run.value !== chosen.run && runs.length) note.textContent = `No run named “${chosen.run}” in ${chosen.project}.`;
    chosen.run = run.value;
  };
  // The attempts with rounds, and the rounds of the chosen one (by default the latest).
  const loadRounds = async () => {
    let rounds = [];
    let attempts = [];
    if (chosen.project && chosen.run) {
      note.textContent = "";
      let answer = await evalApi.evaluation(chosen.project, chosen.run, chosen.attempt).catch((error) => {
        if (error.status !== 404 || chosen.attempt == null) return missing(error);
        note.textContent = error.message;
        return null;
      });
      if (answer === null) {
        chosen.attempt = null; // an attempt without rounds: offer the latest that has them
        answer = await evalApi.evaluation(chosen.project, chosen.run).catch(missing);
      }
      rounds = answer.rounds?.map((r) => r.round_id) ?? [];
      attempts = answer.execution_attempts ?? [];
      if (answer.state === "unknown") note.textContent = "This run has sent no evaluation outcome: its rounds are unknown.";
      if (chosen.attempt == null && answer.execution_attempt != null) chosen.attempt = answer.execution_attempt;
    }
    const latest = attempts[attempts.length - 1];
    attempt.replaceChildren(
      ...(attempts.length ? [] : [h("option", { value: "", text: "—" })]),
      ...attempts.map((n) => h("option", { value: String(n), text: `${n}${n === latest ? " (latest)" : ""}`, selected: n === chosen.attempt })),
    );
    attempt.disabled = attempts.length < 2;
    options(round, rounds, chosen.round, chosen.run ? "choose a round" : "—");
    if (chosen.round && round.value !== chosen.round && rounds.length && !note.textContent) {
      note.textContent = `No round named “${chosen.round}” in execution attempt ${chosen.attempt} of this run.`;
    }
    chosen.round = round.value;
  };
  options(project, projects, chosen.project, "choose a project");
  chosen.project = project.value;
  await loadRuns();
  await loadRounds();
  project.addEventListener("change", async () => {
    Object.assign(chosen, { project: project.value, run: "", round: "", attempt: null });
    await loadRuns();
    await loadRounds();
    onChange();
  });
  run.addEventListener("change", async () => {
    Object.assign(chosen, { run: run.value, round: "", attempt: null });
    await loadRounds();
    onChange();
  });
  attempt.addEventListener("change", async () => {
    // A round of another execution attempt is another round, even under the same name.
    chosen.attempt = attemptOf(attempt.value);
    await loadRounds();
    onChange();
  });
  round.addEventListener("change", () => {
    chosen.round = round.value;
    onChange();
  });
  return h(
    "fieldset",
    { class: `side-picker ${side}` },
    h("legend", { text: label }),
    h("label", { class: "control" }, h("span", { class: "control-label", text: "project" }), project),
    h("label", { class: "control" }, h("span", { class: "control-label", text: "run" }), run),
    h("label", { class: "control" }, h("span", { class: "control-label", text: "execution attempt" }), attempt),
    h("label", { class: "control" }, h("span", { class: "control-label", text: "round" }), round),
    note,
  );
}

function sideCard(side, label, spec, round) {
  const { project, run } = parseSpec(spec);
  const digests = Object.entries(round.digests ?? {}).filter(([, v]) => v);
  return h(
    "div",
    { class: `side-card ${side}` },
    h(
      "h3",
      {},
      `${label}: `,
      h("a", { href: api.page.run(project, run, `?tab=validation&attempt=${round.execution_attempt}`), text: `${project}/${run}` }),
      ` · execution attempt ${round.execution_attempt} · round ${round.round_id}`,
    ),
    h(
      "dl",
      { class: "facts" },
      h("div", { class: "fact checkpoint" }, h("dt", { text: "checkpoint" }), h("dd", { title: round.checkpoint?.digest ?? "", text: round.checkpoint?.name ?? "not recorded" })),
      h("div", { class: "fact" }, h("dt", { text: "expected" }), h("dd", { text: round.declared ? fmtInt(round.expected) : "not declared" })),
      h("div", { class: "fact" }, h("dt", { text: "reported" }), h("dd", { text: fmtInt(round.counts.reported) })),
      h("div", { class: "fact" }, h("dt", { text: "success rate" }), h("dd", {}, rateFigure(round.success_rate))),
      h("div", { class: "fact" }, h("dt", { text: "scoring coverage" }), h("dd", {}, rateFigure(round.scoring_coverage))),
    ),
    h(
      "p",
      { class: "muted digests" },
      digests.length
        ? digests.map(([name, value]) => h("span", { class: "digest", title: value, text: `${name} ${value.slice(0, 12)}… ` }))
        : "No protocol digests declared.",
    ),
  );
}

const TRANSITIONS = [
  ["failure_to_success", "failure → success"],
  ["success_to_failure", "success → failure"],
  ["success_to_success", "success → success"],
  ["failure_to_failure", "failure → failure"],
  // Not scored: an execution error or no verdict. Each direction apart, never a pass or a fail.
  ["scored_to_unscored", "scored → not scored"],
  ["unscored_to_scored", "not scored → scored"],
  ["unscored_both", "not scored on either side"],
  ["missing_left", "missing on the left (right only)"],
  ["missing_right", "missing on the right (left only)"],
];

/** A count that opens its trials (none to open at 0). */
function countCell(key, count, open) {
  if (!count) return h("td", { class: "num", text: fmtInt(count) });
  return h("td", { class: "num" }, h("button", { type: "button", class: "link transition-open", title: "list these trials", text: fmtInt(count), onclick: () => open(key) }));
}

const CHANGES = { added: "right only", removed: "left only", changed: "changed" };

/** The recorded protocol settings keys that differ, when the settings digests do; where a
 * side recorded none, or only a redacted value differs, that is said instead. */
function settingsKeys(keys) {
  if (!keys) return null;
  const note = keys.reason ? h("p", { class: "muted settings-note", text: `${keys.reason[0].toUpperCase()}${keys.reason.slice(1)}.` }) : null;
  if (!keys.differences.length) return h("div", { class: "settings-keys" }, note);
  const shown = keys.total > keys.differences.length ? ` (the first ${fmtInt(keys.differences.length)} of ${fmtInt(keys.total)})` : "";
  return h(
    "div",
    { class: "settings-keys" },
    h("h3", { text: `Settings keys that differ${shown}` }),
    h(
      "table",
      { class: "table settings-table" },
      h("thead", {}, h("tr", {}, ["key", "", "left", "right"].map((label) => h("th", { text: label })))),
      h(
        "tbody",
        {},
        keys.differences.map((d) =>
          h(
            "tr",
            { dataset: { path: d.path, change: d.change } },
            h("td", {}, h("code", { text: d.path })),
            h("td", { class: "muted", text: CHANGES[d.change] ?? d.change }),
            h("td", {}, d.left == null ? h("span", { class: "muted", text: "—" }) : h("code", { text: d.left })),
            h("td", {}, d.right == null ? h("span", { class: "muted", text: "—" }) : h("code", { text: d.right })),
          ),
        ),
      ),
    ),
    keys.redacted.length ? h("p", { class: "muted", text: `Redacted, not compared: ${keys.redacted.join(", ")}.` }) : null,
    note,
  );
}

function renderMatched(answer, specs, open) {
  const moves = answer.transitions;
  const diff = answer.difference;
  const points = (v) => `${v >= 0 ? "+" : "−"}${Math.abs(v * 100).toFixed(1)} percentage points`;
  // The rounds may still be reported to: what is shown is what the server had then.
  const asOf = `Outcomes as of ${fmtTime(Date.now() / 1000)}, when this page loaded: reload to include any reported since.`;
  return h(
    "div",
    {},
    h("p", { class: "muted as-of", text: asOf }),
    h("div", { class: "side-cards" }, sideCard("left", "Left", specs.left, answer.left), sideCard("right", "Right", specs.right, answer.right)),
    h("h2", { class: "section-title", text: "Trial transitions, left → right" }),
    h("p", { class: "muted", text: moves.label }),
    h(
      "table",
      { class: "table transitions-table" },
      h("tbody", {}, TRANSITIONS.map(([key, label]) => h("tr", { dataset: { transition: key } }, h("th", { text: label }), countCell(key, moves[key], open)))),
    ),
    h("h2", { class: "section-title", text: "Observed difference in success rate" }),
    diff.shown
      ? h(
          "div",
          { class: "difference shown" },
          h(
            "p",
            {},
            h("span", { class: "difference-value", text: points(diff.value) }),
            " (right − left), exactly ",
            h("span", { class: "difference-exact", text: `${diff.exact.numerator < 0 ? "−" : ""}${fmtInt(Math.abs(diff.exact.numerator))} / ${fmtInt(diff.exact.denominator)}` }),
          ),
          h("p", { class: "muted difference-label", text: `An ${diff.label}.` }),
          h(
            "p",
            { class: "mcnemar" },
            h("span", { text: `${diff.mcnemar_label[0].toUpperCase()}${diff.mcnemar_label.slice(1)}: ` }),
            h("strong", { text: diff.mcnemar_exact_p == null ? "no discordant pairs" : `p = ${diff.mcnemar_exact_p.toPrecision(3)}` }),
          ),
        )
      : h(
          "div",
          { class: "difference withheld" },
          h("p", { text: "No success-rate difference is shown, because:" }),
          h(
            "ul",
            { class: "reasons" },
            diff.conditions.map((c) => h("li", { dataset: { code: c.code, side: c.side }, title: c.code, text: c.reason })),
          ),
          settingsKeys(answer.settings_differences),
          h("p", {
            class: "muted",
            text: "A difference is shown only when the dataset, cohort, verifier and settings digests all match and both rounds are completely scored. The transitions above hold either way.",
          }),
        ),
  );
}
