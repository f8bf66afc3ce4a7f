// What became of a trajectory's text, in words. Each state reads differently, and none of
// them says anything of the outcome: missing text is never a failed trial.

import { h } from "../lib/dom.js";
import { fmtInt, fmtTime } from "../lib/format.js";

const day = (seconds) => fmtTime(seconds).slice(0, 10);

/**
 * The notes for an index row (null: no trajectory was indexed for the execution), each
 * {kind, short, text}: kind is a class, short a table cell's word, text the sentence.
 */
export function textNotes(row) {
  if (row == null) {
    return [{ kind: "not-retained", short: "no text retained", text: "No text retained: no trajectory was uploaded for this execution. Its outcome is unaffected." }];
  }
  const notes = [];
  const { state, since } = row.body;
  if (state === "not_retained") {
    notes.push({ kind: "not-retained", short: "no text retained", text: "No text retained: the round's text cap kept other trials' messages. The outcome and the counts are unaffected." });
  } else if (state === "expired") {
    notes.push({ kind: "expired", short: `expired on ${day(since)}`, text: `Text expired on ${fmtTime(since)}: bodies are kept for a limited time; the outcome and the counts stay.` });
  } else if (state === "deleted") {
    notes.push({ kind: "deleted", short: `deleted on ${day(since)}`, text: `Text deleted on ${fmtTime(since)} by an owner of the project; the outcome and the counts stay.` });
  }
  if (row.capture_policy === "sampled") {
    notes.push({ kind: "sampled", short: "sampled", text: "Sampled: the producer captured the text of only some executions, this one among them." });
  }
  // The index's `truncated` (fewer messages kept than the conversation had) is the one
  // source: `complete: false` alone only says the producer does not vouch for the whole
  // conversation (every import says so), and nothing was cut.
  if (row.truncated) {
    notes.push({
      kind: "truncated",
      short: `truncated (kept ${fmtInt(row.message_count)} of ${fmtInt(row.total_messages)})`,
      text: `Truncated (kept ${fmtInt(row.message_count)} of ${fmtInt(row.total_messages)} messages): the producer sent the first messages of a longer conversation.`,
    });
  }
  return notes;
}

/** The notes as a list of distinct lines (class `text-state <kind>`). */
export function notesList(notes) {
  if (!notes.length) return null;
  return h("ul", { class: "text-states" }, notes.map((n) => h("li", { class: `text-state ${n.kind}`, text: n.text })));
}

/** A table cell's words for a row's text. */
export function textCell(row) {
  const notes = textNotes(row);
  if (row && row.body.state === "stored") notes.unshift({ kind: "stored", short: `kept until ${day(row.body.expires_at)}` });
  return h("span", { class: "text-cell" }, notes.map((n) => h("span", { class: `text-state-short ${n.kind}`, text: n.short })));
}

/** What a viewer without the content permission reads instead of the messages. */
export const NO_CONTENT_PERMISSION =
  "Reading a trajectory's messages needs the content permission on this project; ask one of its owners for it. What is shown here (counts, state, timing) needs no permission.";
