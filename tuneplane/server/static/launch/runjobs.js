// A launched run's page: the recipe it came from, the run it re-ran (its parent), Re-run
// for its editors, and its jobs with the engine's state of each beside the attempt's own
// status, and Cancel for a job still pending or running.

import * as api from "../lib/api.js";
import { h, serial } from "../lib/dom.js";
import { fmtAgo, fmtTime } from "../lib/format.js";
import { cancelJob, jobs, launchPage } from "./api.js";

/** The run config's key holding the check record of the launch that made the run. */
export const CHECK_RECORD_KEY = "tuneplane_launch";
const ACTIVE = new Set(["pending", "running"]);
/** How often jobs still pending or running are asked about. */
const POLL_MS = 2000;

/** The check record of a launched run, or null for a run no launch made. */
export const launchRecord = (run) => {
  const record = run?.config?.[CHECK_RECORD_KEY];
  return record && typeof record === "object" && typeof record.recipe === "string" ? record : null;
};

/** The address of the form that re-runs `run`, or null when no recipe made it. */
export const rerunHref = (run) => {
  const record = launchRecord(run);
  return record ? launchPage.form(run.project, record.recipe, run.run) : null;
};

export class LaunchPanel {
  /** `run`: a launched run (see launchRecord); `you`: what the caller may do with it. */
  constructor(ref, run, you) {
    this.ref = ref;
    this.record = launchRecord(run);
    this.canWrite = Boolean(you?.write);
    this.jobs = [];
    this.error = null;
    this.seen = null;
    this.timer = null;
    this.list = h("div", { class: "jobs" });
    this.el = h("section", { class: "launch-panel", "aria-label": "Launch" }, this.origin(run), this.list);
    this.load = serial(() => this.fetch());
  }

  origin(run) {
    const parent = this.record.parent;
    return h(
      "div",
      { class: "launch-origin" },
      h("span", {}, "Launched from recipe ", h("b", { class: "launch-recipe", text: this.record.recipe }), ` on ${this.record.engine}`),
      parent
        ? h("span", { class: "parent-link" }, " · re-run of ", h("a", { href: api.page.run(this.ref.project, parent), text: parent }))
        : null,
      h("span", { class: "spacer" }),
      this.canWrite ? h("a", { class: "button secondary rerun-button", href: rerunHref(run), text: "Re-run" }) : null,
    );
  }

  /** The run as the page has it now: a new status or attempt asks for the jobs again. */
  follow(run) {
    const key = `${run.status}|${run.attempt}`;
    if (key === this.seen) return;
    this.seen = key;
    this.load();
  }

  async fetch() {
    try {
      this.jobs = await jobs(this.ref.project, this.ref.run);
      this.error = null;
    } catch (error) {
      this.error = `The jobs could not be read: ${error.message}`;
    }
    this.render();
    clearTimeout(this.timer);
    if (this.error || this.jobs.some((job) => ACTIVE.has(job.state))) {
      this.timer = setTimeout(() => document.body.contains(this.el) && this.load(), POLL_MS);
    }
  }

  render() {
    this.list.replaceChildren(
      ...this.jobs.map((job) => this.jobLine(job)),
      this.error ? h("p", { class: "form-error", text: this.error }) : "",
    );
  }

  jobLine(job) {
    const problem = h("span", { class: "form-error" });
    const cancel = async (event) => {
      event.currentTarget.disabled = true;
      try {
        await cancelJob(this.ref.project, job.id);
      } catch (error) {
        problem.textContent = `Not cancelled: ${error.message}`;
      }
      this.load();
    };
    return h(
      "div",
      { class: "job", dataset: { job: job.id, state: job.state } },
      h("span", { class: "muted", text: `job ${job.id} on ${job.engine}${job.engine_id ? ` (${job.engine_id})` : ""}` }),
      h("span", { class: "job-engine" }, "engine: ", h("span", { class: `status job-state ${job.state}`, title: job.reason, text: job.state })),
      job.reason && job.reason !== job.state ? h("span", { class: "muted job-reason", text: job.reason }) : null,
      h(
        "span",
        { class: "job-attempt" },
        `attempt ${job.attempt}: `,
        h("span", { class: `status attempt-status ${job.attempt_status ?? "none"}`, text: job.attempt_status ?? "no status yet" }),
      ),
      h("span", {
        class: "muted",
        title: fmtTime(job.ended_at ?? job.started_at ?? job.created_at),
        text: job.ended_at ? `ended ${fmtAgo(job.ended_at)}` : job.started_at ? `started ${fmtAgo(job.started_at)}` : `submitted ${fmtAgo(job.created_at)}`,
      }),
      this.canWrite && ACTIVE.has(job.state) ? h("button", { type: "button", class: "cancel-job", text: "Cancel", onclick: cancel }) : null,
      problem,
    );
  }
}
