// A recipe's parameters as form fields, made from its JSON Schema (the keywords recipes may
// use, docs/launch.md): a choice for an enum, a number field with its range, a checkbox, a
// text field, JSON for lists and objects. What a field holds is read back as the value the
// API takes. The schema's rules are said beside the field as it is typed; the server's
// parameters check is the one that counts.

import { h } from "../lib/dom.js";

/** A field left empty is not sent: the server fills the schema's default in. */
const UNSET = Symbol("unset");

function kindOf(property) {
  if (Array.isArray(property.enum)) return "enum";
  const type = Array.isArray(property.type) ? property.type.find((t) => t !== "null") : property.type;
  if (type === "integer" || type === "number" || type === "boolean" || type === "string") return type;
  return "json";
}

/** The rules of a property in words: "integer, 1 to 64, required". */
function ruleText(property, required) {
  const said = [Array.isArray(property.enum) ? `one of ${property.enum.map((v) => JSON.stringify(v)).join(", ")}` : String(property.type ?? "any")];
  const low = property.minimum ?? property.exclusiveMinimum;
  const high = property.maximum ?? property.exclusiveMaximum;
  if (low != null || high != null) {
    const from = low == null ? "" : `${property.exclusiveMinimum != null ? "> " : "≥ "}${low}`;
    const to = high == null ? "" : `${property.exclusiveMaximum != null ? "< " : "≤ "}${high}`;
    said.push([from, to].filter(Boolean).join(" and "));
  }
  if (property.multipleOf != null) said.push(`a multiple of ${property.multipleOf}`);
  if (property.minLength != null || property.maxLength != null) {
    said.push(`${property.minLength ?? 0} to ${property.maxLength ?? "any number of"} characters`);
  }
  if (property.pattern != null) said.push(`matching ${property.pattern}`);
  if (required) said.push("required");
  if (property.default !== undefined) said.push(`default ${JSON.stringify(property.default)}`);
  return said.join(", ");
}

/** What breaks the property's rules, in words; null when nothing does. */
function problemOf(property, value) {
  if (Array.isArray(property.enum)) {
    return property.enum.some((v) => JSON.stringify(v) === JSON.stringify(value)) ? null : "not one of the choices";
  }
  if (typeof value === "number") {
    if (property.type === "integer" && !Number.isInteger(value)) return "must be a whole number";
    if (property.minimum != null && value < property.minimum) return `must be at least ${property.minimum}`;
    if (property.maximum != null && value > property.maximum) return `must be at most ${property.maximum}`;
    if (property.exclusiveMinimum != null && value <= property.exclusiveMinimum) return `must be more than ${property.exclusiveMinimum}`;
    if (property.exclusiveMaximum != null && value >= property.exclusiveMaximum) return `must be less than ${property.exclusiveMaximum}`;
    if (property.multipleOf != null && Math.abs(value / property.multipleOf - Math.round(value / property.multipleOf)) > 1e-9) {
      return `must be a multiple of ${property.multipleOf}`;
    }
  }
  if (typeof value === "string") {
    if (property.minLength != null && value.length < property.minLength) return `must have at least ${property.minLength} characters`;
    if (property.maxLength != null && value.length > property.maxLength) return `must have at most ${property.maxLength} characters`;
    if (property.pattern != null && !matches(property.pattern, value)) return `must match ${property.pattern}`;
  }
  return null;
}

function matches(pattern, value) {
  try {
    return new RegExp(pattern, "u").test(value);
  } catch {
    return true; // a pattern this browser cannot read: the server judges it
  }
}

/** The input of one property, and how to set and read it. */
function control(name, property, kind) {
  if (kind === "enum") {
    const select = h("select", { name }, h("option", { value: "", text: property.default !== undefined ? `(default: ${JSON.stringify(property.default)})` : "—" }),
      property.enum.map((v) => h("option", { value: JSON.stringify(v), text: typeof v === "string" ? v : JSON.stringify(v) })));
    return {
      input: select,
      set: (value) => { select.value = value === UNSET ? "" : JSON.stringify(value); },
      get: () => (select.value === "" ? UNSET : JSON.parse(select.value)),
    };
  }
  if (kind === "boolean") {
    const box = h("input", { type: "checkbox", name });
    return { input: box, set: (value) => { box.checked = value === true || (value === UNSET && property.default === true); }, get: () => box.checked };
  }
  if (kind === "integer" || kind === "number") {
    const step = property.multipleOf ?? (kind === "integer" ? 1 : "any");
    const input = h("input", { type: "number", name, step, min: property.minimum, max: property.maximum, placeholder: placeholder(property) });
    return {
      input,
      set: (value) => { input.value = value === UNSET ? "" : String(value); },
      get: () => {
        if (input.validity.badInput) throw new Error("not a number");
        return input.value.trim() === "" ? UNSET : Number(input.value);
      },
    };
  }
  if (kind === "string") {
    const input = h("input", { type: "text", name, maxlength: property.maxLength, placeholder: placeholder(property) });
    return { input, set: (value) => { input.value = value === UNSET ? "" : String(value); }, get: () => (input.value === "" ? UNSET : input.value) };
  }
  const area = h("textarea", { name, rows: 2, placeholder: placeholder(property) ?? "JSON" });
  return {
    input: area,
    set: (value) => { area.value = value === UNSET ? "" : JSON.stringify(value); },
    get: () => {
      if (area.value.trim() === "") return UNSET;
      try {
        return JSON.parse(area.value);
      } catch {
        throw new Error("not valid JSON");
      }
    },
  };
}

const placeholder = (property) => (property.default === undefined ? null : `default ${JSON.stringify(property.default)}`);

/**
 * The fields of a recipe's parameter schema, filled from `initial` ({name: value}).
 * read() answers {parameters, problems: {name: text}, unreadable: [name]}: parameters holds
 * what was given (an empty field is left to its default); a field that holds no value of
 * its type (text in a number field, broken JSON) is unreadable and cannot be sent.
 */
export function schemaFields(schema, initial = {}) {
  const properties = schema?.properties ?? {};
  const required = new Set(schema?.required ?? []);
  const fields = Object.entries(properties).map(([name, property]) => {
    const kind = kindOf(property);
    const made = control(name, property, kind);
    made.set(Object.hasOwn(initial, name) ? initial[name] : UNSET);
    const problem = h("span", { class: "field-problem", role: "alert" });
    const el = h(
      "label",
      { class: "field param", dataset: { param: name } },
      h("span", { class: "param-name" }, property.title ?? name, required.has(name) ? h("b", { class: "required", title: "required", text: " *" }) : null),
      made.input,
      h("span", { class: "muted param-rule", text: ruleText(property, required.has(name)) }),
      property.description ? h("span", { class: "muted param-help", text: property.description }) : null,
      problem,
    );
    return { name, property, made, problem, el };
  });
  const read = () => {
    const parameters = {};
    const problems = {};
    const unreadable = [];
    for (const { name, property, made, problem } of fields) {
      let said = null;
      try {
        const value = made.get();
        if (value === UNSET) said = required.has(name) && property.default === undefined ? "required" : null;
        else {
          parameters[name] = value;
          said = problemOf(property, value);
        }
      } catch (error) {
        said = error.message;
        unreadable.push(name);
      }
      problem.textContent = said ?? "";
      if (said) problems[name] = said;
    }
    // Parameters the schema does not list (a run's, when the recipe changed since) are kept.
    for (const [name, value] of Object.entries(initial)) if (!Object.hasOwn(properties, name)) parameters[name] = value;
    return { parameters, problems, unreadable };
  };
  /** The value each parameter has once the server fills the defaults in. */
  const effective = (parameters) => {
    const filled = {};
    for (const [name, property] of Object.entries(properties)) if (property.default !== undefined) filled[name] = property.default;
    return { ...filled, ...parameters };
  };
  return { el: h("div", { class: "params" }, fields.map((f) => f.el)), read, effective, count: fields.length };
}

/** "3 parameters (2 required): mode, lr, batch": a schema in one line. */
export function schemaSummary(schema) {
  const names = Object.keys(schema?.properties ?? {});
  if (!names.length) return "no parameters";
  const required = (schema.required ?? []).length;
  const head = `${names.length} parameter${names.length === 1 ? "" : "s"}${required ? ` (${required} required)` : ""}`;
  return `${head}: ${names.join(", ")}`;
}
