// One page of a trajectory's messages: role, text, reasoning, tool calls with their
// arguments, tool results, tokens and timing. Everything the producer wrote is text.

import { h } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";

const fmtMs = (ms) => (ms >= 1000 ? `${Number((ms / 1000).toPrecision(3))} s` : `${Number(ms.toPrecision(3))} ms`);

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
    h("div", { class: "tool-call-head" }, h("span", { class: "tool-name", text: call.name }), h("span", { class: "muted tool-call-id", text: `call ${call.id}` })),
    h("pre", { class: "tool-arguments", "aria-label": `arguments of ${call.name}`, text: argumentsText(call.arguments) }),
  );
}

/** A message; `number` counts from 1 over the whole trajectory. */
export function message(m, number) {
  const isResult = m.role === "tool";
  return h(
    "li",
    { class: `message role-${m.role}`, dataset: { index: String(number - 1) } },
    h(
      "div",
      { class: "message-head" },
      h("span", { class: "message-number muted", text: `#${number}` }),
      h("span", { class: "message-role", text: isResult ? "tool result" : m.role }),
      isResult && m.tool_name ? h("span", { class: "tool-name", text: m.tool_name }) : null,
      isResult && m.tool_call_id ? h("span", { class: "muted tool-call-id", text: `for call ${m.tool_call_id}` }) : null,
      h("span", { class: "spacer" }),
      tokens(m.tokens),
      m.ms != null ? h("span", { class: "message-ms", text: fmtMs(m.ms) }) : null,
    ),
    m.reasoning ? h("details", { class: "reasoning" }, h("summary", { text: "reasoning" }), h("pre", { class: "message-text", text: m.reasoning })) : null,
    m.content ? h("pre", { class: `message-text${isResult ? " tool-result" : ""}`, text: m.content }) : h("p", { class: "muted message-empty", text: "(no text)" }),
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
