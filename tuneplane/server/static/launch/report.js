// A readiness report as the launch form shows it: each check passed, failed or not checked
// with its reason, what is never checked, and the fingerprint a submission would record.
// A failed check request is shown as exactly that: nothing in it reads as a pass.

import { h } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";

const STATUS_WORDS = { passed: "passed", failed: "failed", not_checked: "not checked" };

/** The report of a preview the server answered. */
export function reportView(report) {
  const failed = report.checks.filter((c) => c.status === "failed").length;
  return h(
    "section",
    { class: `report ${report.ready ? "ready" : "not-ready"}`, "aria-label": "readiness report", dataset: { ready: String(report.ready) } },
    h("h2", { class: "report-title", text: report.ready ? "Ready to submit" : `Not ready: ${failed} check${failed === 1 ? "" : "s"} failed` }),
    h("p", {
      class: "muted",
      text: `Checked ${fmtTime(report.checked_at)}. Advice for that moment: submitting checks everything again.`,
    }),
    h(
      "ul",
      { class: "checks" },
      report.checks.map((check) =>
        h(
          "li",
          { class: `check ${check.status}`, dataset: { check: check.name, status: check.status } },
          h("span", { class: `check-status ${check.status}`, text: STATUS_WORDS[check.status] ?? check.status }),
          h("span", { class: "check-title", text: check.title ?? check.name }),
          h("span", { class: "check-reason", text: check.reason }),
        ),
      ),
    ),
    notChecked(report.not_checked ?? []),
    report.fingerprint
      ? h(
          "p",
          { class: "fingerprint muted" },
          "Input fingerprint ",
          h("code", { text: report.fingerprint.sha256 }),
          h("span", { text: `: ${report.fingerprint.covers}.` }),
        )
      : null,
  );
}

/** What a preview never checks, whatever it says of the rest. */
function notChecked(items) {
  return h(
    "section",
    { class: "not-checked", "aria-label": "Not checked" },
    h("h3", { text: "Not checked" }),
    h("p", { class: "muted", text: "A preview never looks at these, so a passing report promises nothing about them:" }),
    h("ul", {}, items.map((item) => h("li", { dataset: { name: item.name }, text: item.reason }))),
  );
}

/** A preview that got no report: the request failed, and nothing was checked. */
export function failedRequestView(reason) {
  return h(
    "section",
    { class: "report request-failed", "aria-label": "readiness report", role: "alert" },
    h("h2", { class: "report-title", text: "Check request failed" }),
    h("p", { class: "check-reason", text: `No check was made: ${reason}. This is not a passing report; check readiness again.` }),
  );
}
