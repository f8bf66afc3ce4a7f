// The form that adds a rule (a kind selector, then only that kind's fields) or changes one
// (its kind stays: the API refuses a new kind). The server checks every field; what it
// refuses is shown beside the form as its message, which names the field.

import * as api from "../lib/api.js";
import { h } from "../lib/dom.js";
import { attempt, errorLine, select } from "../lib/forms.js";
import { rulesPath } from "./common.js";
import { FIELDS, KIND_LABELS, KINDS, LEVELS, defaultLevel } from "./describe.js";

const NUMBERS = ["value", "percent", "window", "seconds", "points", "baseline.attempt"];
const TEXTS = { metric: "reward, *loss*, eval/*", "baseline.run": "run", "baseline.round_id": "round ID", round_id: "every round" };
const CHOICES = {
  op: [["below", "below"], ["above", "above"]],
  direction: [["either", "either way"], ["up", "up"], ["down", "down"]],
};
const LABELS = {
  metric: "metric (glob pattern)",
  op: "op",
  value: "value",
  percent: "percent",
  window: "window (steps)",
  direction: "direction",
  seconds: "seconds",
  points: "points (percentage points)",
  "baseline.run": "baseline run",
  "baseline.round_id": "baseline round",
  "baseline.attempt": "baseline attempt (optional)",
  round_id: "judged round (optional)",
};

function stored(rule, name) {
  if (!rule) return null;
  if (name.startsWith("baseline.")) return rule.baseline?.[name.slice(9)] ?? null;
  return rule[name] ?? null;
}

function input(name, rule) {
  const value = stored(rule, name);
  const props = { name, "aria-label": name };
  if (CHOICES[name]) return select(name, CHOICES[name], value ?? CHOICES[name][0][0], props);
  if (NUMBERS.includes(name)) {
    const step = name === "window" || name === "baseline.attempt" ? "1" : "any";
    return h("input", { ...props, type: "number", step, value: value == null ? null : String(value) });
  }
  return h("input", { ...props, type: "text", autocomplete: "off", placeholder: TEXTS[name] ?? null, value });
}

const field = (label, control, name = null) =>
  h("label", { class: "form-field", dataset: name ? { field: name } : {} }, h("span", { text: label }), control);

/** The body of the form's fields: an empty field is null (the PATCH drops it; the POST omits it). */
function readBody(kind, controls) {
  const read = (name) => {
    const el = controls[name];
    if (NUMBERS.includes(name)) return el.value.trim() === "" ? null : Number(el.value);
    if (name === "metric") return el.value; // empty is the server's to refuse, by name
    return el.value.trim() === "" ? null : el.value.trim();
  };
  const body = { kind };
  for (const name of FIELDS[kind]) {
    if (!name.startsWith("baseline.")) body[name] = read(name);
  }
  if (kind === "eval_drop") {
    body.baseline = { run: read("baseline.run"), round_id: read("baseline.round_id") };
    if (read("baseline.attempt") != null) body.baseline.attempt = read("baseline.attempt");
  }
  return body;
}

/**
 * A rule form: `rule` null adds one (POST), else changes that rule (PATCH). `runs` are the
 * project's run names for the run picker; `onSaved()` reloads the list.
 */
export function ruleForm(project, runs, csrf, { rule = null, onSaved, onCancel = null }) {
  const error = errorLine();
  const kind = select("kind", KINDS.map((k) => [k, KIND_LABELS[k]]), rule?.kind ?? "threshold", {
    "aria-label": "kind",
    disabled: rule != null,
  });
  const name = h("input", { name: "name", "aria-label": "name", autocomplete: "off", placeholder: "default: kind and metric", value: rule?.name ?? null });
  const level = select("level", LEVELS.map((l) => [l, l]), rule?.level ?? defaultLevel(kind.value), { "aria-label": "level" });
  const runNames = rule?.run && !runs.includes(rule.run) ? [rule.run, ...runs] : runs;
  const run = select("run", [["", "all runs"], ...runNames.map((r) => [r, r])], rule?.run ?? "", { "aria-label": "run" });
  const controls = Object.fromEntries(Object.keys(LABELS).map((n) => [n, input(n, rule)]));
  const fields = Object.entries(controls).map(([n, control]) => field(LABELS[n], control, n));
  const show = () => {
    for (const el of fields) el.hidden = !FIELDS[kind.value].includes(el.dataset.field);
    controls.seconds.placeholder = kind.value === "heartbeat" ? "30" : "";
  };
  kind.addEventListener("change", () => {
    level.value = defaultLevel(kind.value);
    show();
  });
  show();
  const button = h("button", { type: "submit", class: "primary", text: rule ? "Save" : "Add rule" });
  const form = h(
    "form",
    { class: `inline-form rule-form ${rule ? "rule-edit" : "rule-add"}`, dataset: rule ? { rule: rule.id } : {} },
    field("kind", kind),
    field("name", name),
    fields,
    field("level", level),
    field("run", run),
    button,
    onCancel ? h("button", { type: "button", text: "Cancel", onclick: onCancel }) : null,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { ...readBody(kind.value, controls), name: name.value.trim() || null, level: level.value, run: run.value || null };
    button.disabled = true;
    const saved = await attempt(error, async () => {
      if (rule) {
        delete body.kind;
        await api.sendJSON("PATCH", `${rulesPath(project)}/${rule.id}`, body, { csrf });
      } else {
        const sent = Object.fromEntries(Object.entries(body).filter(([, v]) => v != null));
        await api.sendJSON("POST", rulesPath(project), sent, { csrf });
      }
    });
    button.disabled = false;
    if (saved) {
      if (!rule) form.reset();
      if (!rule) show();
      await onSaved();
    }
  });
  return h("div", { class: "rule-form-box" }, form, error.el);
}
