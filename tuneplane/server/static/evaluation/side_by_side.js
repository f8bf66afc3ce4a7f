// One trial's two trajectories side by side (GET /api/v1/evaluation/matched/trials/{trial}):
// the left round's and the right round's current attempts, aligned by message index, with
// the first message where they differ and each side's first tool call whose result reads
// as failed marked. Everything the producers wrote is text.

import { h } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";
import { pageHref } from "../trajectories/api.js";
import { FAILURE_RULES } from "../trajectories/finder.js";
import { message } from "../trajectories/messages.js";
import { NO_CONTENT_PERMISSION, notesList, textNotes } from "../trajectories/text.js";
import { statusBadge } from "./figures.js";

/** The trajectory page of one side's trial (its current attempt). */
export function sideHref(side, trialId, outcome) {
  const row = { scope: "evaluation", attempt: side.execution_attempt, round_id: side.round_id, trial_id: trialId, trial_attempt: outcome.trial_attempt };
  return pageHref(side.project, side.run, row);
}

/** The outcome of one side in a few words: status, error type, reason code. */
export function outcomeCell(outcome) {
  if (outcome == null) return h("span", { class: "muted not-reported", text: "not reported" });
  return h(
    "span",
    { class: "pair-outcome" },
    statusBadge(outcome.status),
    outcome.error_type ? h("span", { class: "error-type", text: outcome.error_type }) : null,
    outcome.reason_code ? h("span", { class: "reason-code muted", title: outcome.reason ?? "", text: outcome.reason_code }) : null,
  );
}

function sideHead(name, side, trialId) {
  const outcome = side.outcome;
  const text = side.trajectory == null ? textNotes(null) : textNotes(side.trajectory);
  return h(
    "div",
    { class: `pair-side-head ${name}`, dataset: { side: name } },
    h("h3", {}, `${name === "left" ? "Left" : "Right"}: ${side.project}/${side.run} · execution attempt ${side.execution_attempt}`),
    h(
      "p",
      { class: "pair-facts" },
      outcomeCell(outcome),
      outcome ? h("span", { class: "muted", text: `trial attempt ${outcome.trial_attempt} of ${fmtInt(outcome.attempts)}` }) : null,
      outcome ? h("a", { class: "trajectory-open", href: sideHref(side, trialId, outcome), text: "open its trajectory" }) : null,
    ),
    outcome == null ? h("p", { class: "muted", text: "This round has no outcome for the trial." }) : side.messages == null ? notesList(text) : null,
    failedNote(side.first_failed_tool_call),
  );
}

function failedNote(failed) {
  if (failed == null) return h("p", { class: "failed-call-note muted", text: "No tool result reads as failed." });
  const call = failed.tool_name ? `${failed.tool_name}${failed.call_id ? ` (call ${failed.call_id})` : ""}` : "a tool call";
  return h(
    "p",
    { class: "failed-call-note", dataset: { message: String(failed.message) } },
    h("a", { href: `#pair-${failed.message}`, text: `First failed tool call: ${call}, result #${failed.message + 1}` }),
    h("span", { class: "muted", text: ` (${FAILURE_RULES[failed.rule] ?? failed.rule})` }),
  );
}

function divergenceNote(answer) {
  if (!answer.compared) return h("p", { class: "divergence-note muted", text: "Not compared: one side has no messages to read." });
  if (answer.first_divergence == null) return h("p", { class: "divergence-note", text: "Both sides hold the same messages." });
  const at = answer.first_divergence;
  return h(
    "p",
    { class: "divergence-note" },
    h("a", { href: `#pair-${at}`, text: `First divergence at message #${at + 1}` }),
    h("span", { class: "muted", text: " (role, text, reasoning, tool names and arguments compared; tokens, timings and call IDs not)" }),
  );
}

/** A side's message in its cell, with its marks. */
function cell(side, index) {
  const m = side.messages?.[index];
  if (m == null) return h("div", { class: "pair-cell empty" });
  const item = message(m, index + 1);
  const failed = side.first_failed_tool_call;
  if (failed?.message === index) {
    item.classList.add("first-failed-tool-call");
    item.prepend(h("span", { class: "pair-mark failed", text: "first failed tool call" }));
  }
  if (failed?.call_message === index && failed.call_id != null) {
    for (const call of item.querySelectorAll(".tool-call")) {
      if (call instanceof HTMLElement && call.dataset.call === failed.call_id) call.classList.add("failed-call");
    }
  }
  return h("ol", { class: "messages pair-cell", start: index + 1 }, item);
}

/** The two trajectories, one row per message index. */
export function sideBySide(answer) {
  const { left, right } = answer;
  const rows = Math.max(left.messages?.length ?? 0, right.messages?.length ?? 0);
  const at = answer.first_divergence;
  const list = h("ol", { class: "pair-rows", "aria-label": "messages side by side" });
  for (let i = 0; i < rows; i += 1) {
    const diverged = at != null && i >= at;
    list.append(
      h(
        "li",
        { class: `pair-row${diverged ? " diverged" : ""}${i === at ? " first-divergence" : ""}`, id: `pair-${i}`, dataset: { index: String(i) } },
        i === at ? h("span", { class: "pair-mark divergence", text: "first divergence" }) : null,
        cell(left, i),
        cell(right, i),
      ),
    );
  }
  return h(
    "section",
    { class: "side-by-side", dataset: { trial: answer.trial_id } },
    h("h2", { class: "section-title", text: `Trial ${answer.trial_id}` }),
    h("p", { class: "muted pair-task", text: `task ${answer.task}${answer.repeat == null ? "" : ` · repeat ${answer.repeat}`} · aligned by ${answer.aligned_by}` }),
    divergenceNote(answer),
    h("div", { class: "pair-heads" }, sideHead("left", left, answer.trial_id), sideHead("right", right, answer.trial_id)),
    rows ? list : null,
  );
}

/** What a reader without the content permission on either project reads instead. */
export const pairRefused = () => h("p", { class: "notice no-permission", text: NO_CONTENT_PERMISSION });
