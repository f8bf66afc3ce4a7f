// The run page's Diagnosis panel: the run's latest failure diagnosis (or one picked from
// the earlier ones and other attempts), and "Run diagnosis again" for its editors. A run
// without a diagnosis shows nothing, unless it failed.

import { add, h, serial } from "../lib/dom.js";
import { diagnosisBody, diagnosisLabel } from "./findings.js";
import { listDiagnoses, rerunDiagnosis } from "./api.js";

// A diagnosis changes nothing the run object shows, so the run's stream says nothing when
// one finishes: while one is on its way (running, or due for a failed attempt) the list is
// asked for again, every second at first, for a little longer than the server gives a
// diagnosis and its written explanation (60 s and 120 s).
const POLL_MS = [1000, 4000];
const FAST_MS = 15_000;
const FOLLOW_MS = 200_000;

export class DiagnosisPanel {
  /** `you`: what the caller may do with the run (the run object's `you`). */
  /** `rerun`: the Re-run form's address, for editors of a run a recipe launched. */
  constructor(ref, you = null, { onLine = null, rerun = null } = {}) {
    this.ref = ref;
    // The diagnoses quote the logs: they are read by those who may read the logs.
    this.allowed = you?.logs ?? true;
    this.canRerun = Boolean(you?.write);
    this.onLine = onLine;
    this.rerunForm = rerun;
    this.run = null;
    this.diagnoses = [];
    this.picked = null;
    this.error = null;
    this.busy = false;
    this.seen = null;
    this.drawn = null;
    this.timer = null;
    this.pendingSince = null;
    this.el = h("section", { class: "diagnosis", "aria-label": "Diagnosis", hidden: true });
    this.load = serial(() => this.fetch());
  }

  /** The run as the page or its live stream has it now: a new status or attempt is read. */
  follow(run) {
    this.run = run;
    if (!this.allowed) return;
    const key = `${run.status}|${run.attempt}`;
    if (key === this.seen) return;
    this.seen = key;
    this.load();
  }

  async fetch() {
    try {
      this.diagnoses = await listDiagnoses(this.ref.project, this.ref.run);
      this.error = null;
    } catch (error) {
      this.error = `The diagnoses could not be read: ${error.message}`;
    }
    this.render();
    this.schedule();
  }

  /** A diagnosis is on its way: one (or its explanation) is running, or the run failed and
   * its attempt has none. */
  pending() {
    if (this.diagnoses.some((d) => d.state === "running" || d.explanation?.state === "running")) return true;
    return this.run?.status === "failed" && !this.diagnoses.some((d) => d.attempt === this.run.attempt);
  }

  schedule() {
    clearTimeout(this.timer);
    if (!this.pending()) {
      this.pendingSince = null;
      return;
    }
    this.pendingSince ??= Date.now();
    const waited = Date.now() - this.pendingSince;
    if (waited < FOLLOW_MS) this.timer = setTimeout(() => this.load(), POLL_MS[waited < FAST_MS ? 0 : 1]);
  }

  /** The diagnosis shown: the one picked while it is listed, else the newest. */
  shown() {
    return this.diagnoses.find((d) => d.id === this.picked) ?? this.diagnoses[0] ?? null;
  }

  render() {
    const shown = this.shown();
    const failed = this.run?.status === "failed";
    // Drawn again only when something changed: a poll must not reset the picker's focus.
    const drawn = JSON.stringify([this.diagnoses, shown?.id, this.error, this.busy, failed, this.run?.attempt]);
    if (drawn === this.drawn) return;
    this.drawn = drawn;
    this.el.hidden = !this.allowed || (!shown && !failed && !this.error);
    if (this.el.hidden) {
      this.el.replaceChildren();
      return;
    }
    this.el.replaceChildren();
    add(
      this.el,
      h(
        "div",
        { class: "diagnosis-head" },
        h("h2", { class: "diagnosis-title", text: "Diagnosis" }),
        this.picker(shown),
        h("span", { class: "spacer" }),
        this.rerunButton(shown),
      ),
      this.error ? h("p", { class: "form-error", text: this.error }) : null,
      shown
        ? diagnosisBody(shown, this.ref, this.run, this.onLine, this.rerunForm)
        : h("p", {
            class: "diagnosis-none muted",
            text: this.pending() ? "No diagnosis yet: one is on its way." : "No diagnosis yet.",
          }),
    );
  }

  picker(shown) {
    if (this.diagnoses.length < 2) return null;
    const select = h(
      "select",
      {
        class: "diagnosis-picker",
        name: "diagnosis",
        "aria-label": "diagnosis",
        onchange: () => {
          this.picked = Number(select.value);
          this.render();
        },
      },
      this.diagnoses.map((d) => h("option", { value: d.id, selected: d.id === shown.id, text: diagnosisLabel(d) })),
    );
    return h("label", { class: "control" }, h("span", { class: "muted", text: `${this.diagnoses.length} diagnoses` }), select);
  }

  rerunButton(shown) {
    if (!this.canRerun) return null;
    return h("button", {
      type: "button",
      class: "diagnosis-rerun",
      disabled: this.busy,
      title: shown ? `diagnose attempt ${shown.attempt} again, with the evidence as it is now` : "diagnose the latest attempt",
      text: this.busy ? "diagnosing…" : shown ? "Run diagnosis again" : "Run diagnosis",
      onclick: () => this.rerun(shown?.attempt ?? null),
    });
  }

  async rerun(attempt) {
    this.busy = true;
    this.error = null;
    this.render();
    try {
      const made = await rerunDiagnosis(this.ref.project, this.ref.run, attempt);
      this.picked = null;
      this.diagnoses = [made, ...this.diagnoses.filter((d) => d.id !== made.id)];
    } catch (error) {
      this.error = `The diagnosis could not be run again: ${error.message}`;
      return;
    } finally {
      this.busy = false;
      this.render();
    }
    this.load(); // the list as the server has it now (another may have come meanwhile)
  }
}
