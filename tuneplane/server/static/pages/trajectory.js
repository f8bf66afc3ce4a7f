// "/projects/<p>/runs/<r>/trajectory?…": one execution's trajectory, a trial attempt of an
// evaluation round or a training rollout. What it is, what became of its text (each state
// in its own words, never as a failure), a link to copy, and its messages a page at a time.
// It follows the run's live stream: a trajectory that arrives or goes is shown at once.

import * as api from "../lib/api.js";
import * as evalApi from "../evaluation/api.js";
import { statusBadge } from "../evaluation/figures.js";
import { copyField } from "../lib/clipboard.js";
import { crumbs, empty, h, mount, serial } from "../lib/dom.js";
import { fmtInt, fmtTime } from "../lib/format.js";
import { watchRuns } from "../lib/live.js";
import { signInHint } from "../lib/missing.js";
import { address } from "../lib/root.js";
import { pageHref } from "../trajectories/api.js";
import { MessagesReader } from "../trajectories/reader.js";
import { addressed, findRows } from "../trajectories/resolve.js";
import { categoryLabel, policyText, rewardText } from "../trajectories/rollout.js";
import { notesList, textNotes } from "../trajectories/text.js";
import { totalsFacts } from "../trajectories/totals.js";

const fact = (label, ...value) => h("div", { class: "fact" }, h("dt", { text: label }), h("dd", {}, ...value));

export async function trajectoryPage(project, run) {
  const ref = { project, run, key: `${project}/${run}` };
  crumbs([[project, api.page.project(project)], [run, api.page.run(project, run)], ["trajectory", null]]);
  const wanted = addressed();
  let runAnswer;
  try {
    runAnswer = await api.run(project, run);
  } catch (error) {
    if (error.status !== 404) throw error;
    mount(empty(`No run named “${run}” in project “${project}”.`, await signInHint()));
    return;
  }
  if (wanted.missing.length) {
    mount(empty("This address names no execution.", `It lacks ${wanted.missing.join(", ")}: open a trajectory from the run's Validation tab or its training rollouts.`));
    return;
  }
  const view = new TrajectoryView(ref, wanted, runAnswer.you?.trajectory_bodies === true);
  const liveState = h("span", { class: "live-state", text: "connecting…" });
  mount(h("div", { class: "live-line" }, liveState), view.el);
  await view.refresh();
  let last = runAnswer;
  watchRuns([ref], {
    onRun: (_, next) => {
      const moved = next.last_observation_id !== last.last_observation_id || next.updated_at !== last.updated_at;
      last = next;
      if (moved) view.refresh();
    },
    onState: (state) => {
      liveState.textContent = state === "reconnecting" ? "reconnecting…" : "live";
      liveState.className = `live-state ${state}`;
    },
  });
}

class TrajectoryView {
  constructor(ref, wanted, mayRead) {
    this.ref = ref;
    this.wanted = wanted;
    this.mayRead = mayRead;
    this.shown = undefined; // the signature of the row the reader shows
    this.head = h("div", { class: "run-head trajectory-head" });
    // The body's totals, from its first read (the index row does not have them).
    this.totals = h("dl", { class: "facts trajectory-totals", hidden: true });
    this.notes = h("div");
    this.body = h("div");
    this.el = h("div", { class: "trajectory" }, this.head, this.totals, this.notes, this.body);
    this.refresh = serial(() => this.load());
  }

  async load() {
    let rows;
    try {
      rows = await findRows(this.ref, this.wanted);
    } catch (error) {
      this.notes.replaceChildren(h("p", { class: "notice", text: `Could not read the trajectory index: ${error.message}` }));
      return;
    }
    if (rows.length > 1) return this.choose(rows);
    const row = rows[0] ?? null;
    this.head.replaceChildren(...(await this.headParts(row)));
    this.notes.replaceChildren(notesList(textNotes(row)) ?? "");
    const signature = row && `${row.id}|${row.body.state}`;
    if (signature === this.shown) return;
    this.shown = signature;
    this.body.replaceChildren();
    this.totals.replaceChildren();
    this.totals.hidden = true;
    if (row?.body.state !== "stored") return;
    const reader = new MessagesReader(this.ref, row, this.mayRead, (answer) => {
      this.totals.replaceChildren(...totalsFacts(answer.totals, row));
      this.totals.hidden = false;
    });
    this.body.append(reader.el);
    await reader.start();
  }

  /** No execution attempt named, and several have this execution: link each. */
  choose(rows) {
    this.shown = undefined;
    this.body.replaceChildren();
    this.notes.replaceChildren();
    this.head.replaceChildren(
      h("h1", { text: "Which execution attempt?" }),
      h("p", { text: "Each execution attempt of the run has its own trajectory here:" }),
      h("ul", {}, rows.map((row) => h("li", {}, h("a", { href: pageHref(this.ref.project, this.ref.run, row), text: `execution attempt ${row.attempt}` })))),
    );
  }

  async headParts(row) {
    const named = row ?? { scope: this.wanted.scope, ...this.wanted.named };
    const training = named.scope === "training";
    const title = training
      ? `Rollout ${named.trajectory_id} at step ${fmtInt(named.step)}`
      : `Trial ${named.trial_id}, trial attempt ${named.trial_attempt}`;
    const facts = training ? rolloutFacts(named, row) : [fact("round", named.round_id), fact("outcome", await this.outcome(named))];
    return [
      h("div", { class: "title-line" }, h("h1", { text: title })),
      h(
        "dl",
        { class: "facts" },
        fact("execution attempt", named.attempt == null ? "—" : String(named.attempt)),
        ...facts,
        row ? fact("messages kept", `${fmtInt(row.message_count)} of ${fmtInt(row.total_messages)}`) : null,
        row ? fact("capture", row.capture_policy) : null,
        row ? fact("received", fmtTime(row.received_at)) : null,
      ),
      this.linkLine(named),
    ];
  }

  /** The trial attempt's outcome from the evaluation API: text or no text, it is the same. */
  async outcome(named) {
    try {
      const history = await evalApi.trialHistory(this.ref.project, this.ref.run, named.round_id, named.trial_id, named.attempt);
      const found = history.attempts.find((a) => a.trial_attempt === named.trial_attempt);
      return found ? statusBadge(found.status) : h("span", { class: "muted", text: "not reported" });
    } catch (error) {
      return h("span", { class: "muted", text: error.status === 404 ? "not reported" : "unknown" });
    }
  }

  linkLine(named) {
    const input = h("input", { class: "key-value share-url trajectory-link", readonly: true, "aria-label": "link to this execution" });
    input.value = location.origin + address(pageHref(this.ref.project, this.ref.run, named));
    const note = h("span", { class: "muted copy-note", role: "status" });
    return h("div", { class: "copy-line" }, input, h("button", { type: "button", text: "Copy link", onclick: () => copyField(input, note) }), " ", note);
  }
}

function rolloutFacts(named, row) {
  if (!row) return [];
  return [
    fact("category", h("span", { class: `category ${row.category}`, text: categoryLabel(row.category) })),
    fact("reward", h("span", { class: "reward", text: rewardText(row) })),
    fact("collection policy", h("span", { class: "policy", text: policyText(row.collection_policy) })),
    fact("consumption policy", h("span", { class: "policy", text: policyText(row.consumption_policy) })),
  ];
}
