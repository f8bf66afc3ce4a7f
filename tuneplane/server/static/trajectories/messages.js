// One page of a trajectory's messages: role, model, time, text, reasoning, tool calls with
// their arguments, tool results, tokens and timing. Everything the producer wrote is text:
// a message's text is read as Markdown into DOM nodes (lib/markdown.js, no HTML), a tool's
// output is shown as it was written. A long text is collapsed, its size said.

import { h } from "../lib/dom.js";
import { fmtDuration, fmtInt, fmtTime } from "../lib/format.js";
import { markdown } from "../lib/markdown.js";

/** A text longer than this (characters or lines) is collapsed until it is asked for. */
export const COLLAPSE_CHARS = 2000;
export const COLLAPSE_LINES = 30;

const lineCount = (text) => {
  let lines = 1;
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines += 1;
  return lines;
};

/** Open or close a collapsed block (a `.collapsible`), saying what it holds. */
export function setOpen(wrap, open) {
  wrap.classList.toggle("collapsed", !open);
  const toggle = wrap.querySelector(":scope > .collapse-toggle");
  toggle.setAttribute("aria-expanded", String(open));
  toggle.textContent = `${open ? "Collapse" : "Show all of"} ${wrap.dataset.what} (${wrap.dataset.size})`;
}

/** `body` as it is, or collapsed when `text` is long, with a control that says its size. */
export function collapsible(body, text, what) {
  const lines = lineCount(text);
  if (text.length <= COLLAPSE_CHARS && lines <= COLLAPSE_LINES) return body;
  const size = `${fmtInt(text.length)} characters, ${fmtInt(lines)} lines`;
  const wrap = h("div", { class: "collapsible", dataset: { what, size } }, h("div", { class: "collapse-body" }, body));
  const toggle = h("button", { type: "button", class: "collapse-toggle", onclick: () => setOpen(wrap, wrap.classList.contains("collapsed")) });
  wrap.append(toggle);
  setOpen(wrap, false);
  return wrap;
}

/** Seconds since the epoch of a message's ISO timestamp (UTC when it names no offset). */
export function stampSeconds(text) {
  if (typeof text !== "string") return null;
  const trimmed = text.replace(/(\.\d{3})\d+/, "$1");
  const zoned = /(Z|[+-]\d{2}:\d{2})$/.test(trimmed) ? trimmed : `${trimmed}Z`;
  const ms = Date.parse(zoned);
  return Number.isFinite(ms) ? ms / 1000 : null;
}

/** When the message was written: local wall time, and how long after the first message. */
function when(stamp, start) {
  const at = stampSeconds(stamp);
  if (at == null) return null;
  const after = start == null ? "" : ` (+${fmtDuration(Math.max(0, at - start))})`;
  return h("time", { class: "message-time muted", datetime: stamp, title: `written ${stamp}` }, `${fmtTime(at)}${after}`);
}

export const fmtMs = (ms) => (ms >= 1000 ? `${Number((ms / 1000).toPrecision(3))} s` : `${Number(ms.toPrecision(3))} ms`);

/** Arguments as the producer sent them: a string as is, anything else as indented JSON. */
const argumentsText = (value) => (typeof value === "string" ? value : JSON.stringify(value ?? null, null, 2));

function tokens(counts) {
  if (!counts) return null;
  const parts = ["input", "output", "cached"].filter((k) => counts[k] != null).map((k) => `${fmtInt(counts[k])} ${k}`);
  return parts.length ? h("span", { class: "message-tokens", text: `tokens: ${parts.join(", ")}` }) : null;
}

function toolCall(call) {
  return h(
    "div",
    { class: "tool-call", dataset: { call: call.id } },
    h("div", { class: "tool-call-head" }, h("span", { class: "tool-name searchable", text: call.name }), h("span", { class: "muted tool-call-id", text: `call ${call.id}` })),
    argumentsBlock(call),
  );
}

function argumentsBlock(call) {
  const text = argumentsText(call.arguments);
  return collapsible(h("pre", { class: "tool-arguments searchable", "aria-label": `arguments of ${call.name}`, text }), text, "the arguments");
}

function contentBlock(m, isResult) {
  if (!m.content) return h("p", { class: "muted message-empty", text: "(no text)" });
  // A tool's output is shown as written; what a model or a person wrote is Markdown.
  const body = isResult ? h("pre", { class: "message-text tool-result searchable", text: m.content }) : markdown(m.content, "message-text searchable");
  return collapsible(body, m.content, isResult ? "the tool output" : "the message");
}

/** A message; `number` counts from 1 over the whole trajectory; `start` is the first
 * timestamp's seconds, when the trajectory has one (each time then says how long after). */
export function message(m, number, start = null) {
  const isResult = m.role === "tool";
  return h(
    "li",
    { class: `message role-${m.role}`, dataset: { index: String(number - 1) } },
    h(
      "div",
      { class: "message-head" },
      h("span", { class: "message-number muted", text: `#${number}` }),
      h("span", { class: "message-role", text: isResult ? "tool result" : m.role }),
      isResult && m.tool_name ? h("span", { class: "tool-name searchable", text: m.tool_name }) : null,
      isResult && m.tool_call_id ? h("span", { class: "muted tool-call-id", text: `for call ${m.tool_call_id}` }) : null,
      m.model ? h("span", { class: "message-model searchable", title: "model", text: m.model }) : null,
      h("span", { class: "spacer" }),
      when(m.timestamp, start),
      tokens(m.tokens),
      m.ms != null ? h("span", { class: "message-ms", text: fmtMs(m.ms) }) : null,
    ),
    m.reasoning ? h("details", { class: "reasoning" }, h("summary", { text: "reasoning" }), h("pre", { class: "message-text searchable", text: m.reasoning })) : null,
    contentBlock(m, isResult),
    m.tool_calls?.length ? h("div", { class: "tool-calls" }, m.tool_calls.map(toolCall)) : null,
  );
}

/** Totals of one page: tokens and time, so a page reads at a glance. */
export function pageTotals(messages) {
  let input = 0;
  let output = 0;
  let ms = 0;
  for (const m of messages) {
    input += m.tokens?.input ?? 0;
    output += m.tokens?.output ?? 0;
    ms += m.ms ?? 0;
  }
  return `on this page: ${fmtInt(input)} input and ${fmtInt(output)} output tokens, ${fmtMs(ms)} reported`;
}
