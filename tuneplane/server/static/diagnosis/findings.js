// One diagnosis as the run page shows it: its own state (never to be read as the run's),
// each rule finding with the log lines and metric points it rests on, and, apart from them
// and labelled as such, a language model's written explanation when one was made.

import { page } from "../lib/api.js";
import { h } from "../lib/dom.js";
import { fmtNum, fmtTime } from "../lib/format.js";

const TRIGGERS = {
  failed: "when the attempt failed",
  lost: "when the attempt's heartbeat stopped",
  rerun: "again on request",
};
const SHORT_TRIGGERS = { failed: "attempt failed", lost: "heartbeat lost", rerun: "re-run" };
const CONFIDENCE = {
  certain: "certain: the output says so in as many words",
  likely: "likely: the usual meaning of what the output shows",
  possible: "possible: one explanation among others",
};

/** "attempt 2 · re-run · 2026-01-05 10:56:03 · done": a diagnosis in the picker. */
export function diagnosisLabel(diagnosis) {
  const trigger = SHORT_TRIGGERS[diagnosis.trigger] ?? diagnosis.trigger;
  return `attempt ${diagnosis.attempt} · ${trigger} · ${fmtTime(diagnosis.created_at)} · ${diagnosis.state}`;
}

/**
 * The body of a diagnosis. `run` is the run as the page knows it now; `onLine(attempt,
 * citation)`, when given, shows a cited line in the log view; `rerun`, when given, is the
 * address of the Re-run form each next action offers.
 */
export function diagnosisBody(diagnosis, ref, run, onLine = null, rerun = null) {
  const later = run?.attempt != null && run.attempt !== diagnosis.attempt;
  return h(
    "div",
    { class: "diagnosis-body", dataset: { id: diagnosis.id, state: diagnosis.state } },
    h("p", {
      class: "diagnosis-meta muted",
      text:
        `Attempt ${diagnosis.attempt}, diagnosed ${TRIGGERS[diagnosis.trigger] ?? diagnosis.trigger}, ` +
        `${fmtTime(diagnosis.created_at)}` +
        (later ? ` (the run is now on attempt ${run.attempt})` : ""),
    }),
    stateLine(diagnosis),
    cutLine(diagnosis),
    diagnosis.findings?.length
      ? h(
          "ol",
          { class: "findings" },
          diagnosis.findings.map((finding) => findingItem(finding, diagnosis.attempt, ref, onLine, rerun)),
        )
      : null,
    explanationBlock(diagnosis.explanation),
  );
}

function stateLine(diagnosis) {
  if (diagnosis.state === "running") {
    return h("p", { class: "diagnosis-state running", text: "running…" });
  }
  if (diagnosis.state === "failed") {
    return h(
      "p",
      { class: "diagnosis-state failed" },
      "The diagnosis itself failed: ",
      h("span", { class: "diagnosis-error", text: diagnosis.error ?? "no reason was recorded" }),
      ". This is not the run's failure: the run's status is what the job reported.",
    );
  }
  const count = diagnosis.findings?.length ?? 0;
  return h("p", {
    class: "diagnosis-state done",
    text: count
      ? `done: ${count} finding${count === 1 ? "" : "s"} of the rules, the surest first`
      : "done: no rule recognised this failure; the logs may still say what happened.",
  });
}

/** When the findings rest on less than the whole log: how much of it was read. */
function cutLine(diagnosis) {
  const log = diagnosis.log;
  if (!diagnosis.log_cut || !log) return null;
  const said = [];
  if (log.unread > 0) {
    said.push(
      `the log holds ${fmtCount(log.lines)} lines and the last ${fmtCount(log.read)} were read ` +
        `(${fmtCount(log.unread)} not read${log.stopped ? `: ${log.stopped}` : ""})`,
    );
  }
  if (log.missing > 0) said.push(`${fmtCount(log.missing)} lines the job printed never reached the server`);
  return h("p", {
    class: "diagnosis-cut",
    role: "note",
    text: `The evidence was cut: ${said.join("; ")}. The findings rest on what was read.`,
  });
}

const fmtCount = (n) => Number(n).toLocaleString("en-US");

function findingItem(finding, attempt, ref, onLine, rerun) {
  return h(
    "li",
    { class: `finding confidence-${finding.confidence}`, dataset: { code: finding.code } },
    h(
      "div",
      { class: "finding-head" },
      h("h3", { class: "finding-title", text: finding.title }),
      h("span", {
        class: `confidence ${finding.confidence}`,
        title: CONFIDENCE[finding.confidence] ?? "",
        text: finding.confidence,
      }),
      h("code", { class: "finding-code", text: finding.code }),
    ),
    h("p", { class: "finding-detail", text: finding.detail }),
    h(
      "p",
      { class: "finding-next" },
      h("span", { class: "finding-label", text: "Next: " }),
      finding.next_action,
      rerun ? [" ", h("a", { class: "finding-rerun", href: rerun, text: "Re-run with changes…" })] : null,
    ),
    finding.citations?.length
      ? h(
          "ul",
          { class: "citations", "aria-label": "what it rests on" },
          finding.citations.map((c) => (c.kind === "metric" ? metricCitation(c, ref) : logCitation(c, attempt, onLine))),
        )
      : null,
  );
}

function logCitation(citation, attempt, onLine) {
  return h(
    "li",
    { class: "citation citation-log", dataset: { line: citation.line } },
    onLine
      ? h("a", {
          class: "citation-link",
          href: "?tab=logs",
          title: "show this line in the logs",
          text: "in the log",
          onclick: (event) => {
            event.preventDefault();
            onLine(attempt, citation);
          },
        })
      : h("span", { class: "citation-link muted", text: "log line" }),
    h("code", { class: "citation-text", text: citation.text ?? "" }),
  );
}

function metricCitation(citation, ref) {
  const value = citation.value == null ? "NaN/inf" : fmtNum(citation.value);
  return h(
    "li",
    { class: "citation citation-metric", dataset: { series: citation.series, step: citation.step } },
    h("a", {
      class: "citation-series",
      href: page.run(ref.project, ref.run, `?${new URLSearchParams({ metric: citation.series })}`),
      title: "chart this metric",
      text: citation.series,
    }),
    h("span", { class: "citation-step", text: `step ${citation.step}` }),
    h("span", {
      class: `citation-value${citation.value == null ? " invalid" : ""}`,
      title: citation.value == null ? "not a finite number" : String(citation.value),
      text: value,
    }),
  );
}

/** A written explanation: {state: running|done|failed, model, text, error} (or its text). */
function explanationBlock(explanation) {
  if (explanation == null) return null;
  const written = typeof explanation === "string" ? { state: "done", text: explanation } : explanation;
  const said = {
    running: h("p", { class: "explanation-state running", text: "being written…" }),
    failed: h("p", { class: "explanation-state failed", text: `No explanation: ${written.error ?? "the model did not answer"}` }),
  };
  return h(
    "section",
    { class: "explanation", "aria-label": "written explanation", dataset: { state: written.state ?? "done" } },
    h("h3", { class: "explanation-title", text: "Written explanation by a language model" }),
    h("p", {
      class: "muted",
      text:
        `${written.model ? `${written.model}, ` : ""}from the same evidence. ` +
        "It is not one of the rule findings above and may be wrong.",
    }),
    said[written.state] ?? null,
    written.text ? h("p", { class: "explanation-text", text: written.text }) : null,
  );
}
