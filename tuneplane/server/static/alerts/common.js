// What the alert-rules page's parts share: a line that shows the server's refusal as text,
// a guarded action, an inline confirmation and the API paths.

import * as api from "../lib/api.js";
import { h } from "../lib/dom.js";

export const rulesPath = (project) => `${api.projectPath(project)}/alert-rules`;
export const webhooksPath = (project) => `${api.projectPath(project)}/webhooks`;

/** A line that shows a refusal as text; cleared by the next attempt. */
export function errorLine() {
  const el = h("p", { class: "form-error", role: "alert", hidden: true });
  return {
    el,
    clear: () => {
      el.hidden = true;
      el.textContent = "";
    },
    show: (failure) => {
      el.textContent = String(failure?.message ?? failure);
      el.hidden = false;
    },
  };
}

/** Run `action`; a refusal goes to `error` and answers false; `after` (a reload) runs either way. */
export async function attempt(error, action, after = null) {
  error.clear();
  let ok = true;
  try {
    await action();
  } catch (failure) {
    error.show(failure);
    ok = false;
  } finally {
    if (after) await after().catch((failure) => error.show(failure));
  }
  return ok;
}

/**
 * An inline "Delete …?" box (no window.confirm: it would block the page, and a dismissed
 * dialog is easy to miss). `open()` shows it; confirming runs `action`.
 */
export function confirmBox(question, label, action) {
  const el = h("div", { class: "notice confirm", hidden: true });
  el.append(
    h("p", { text: question }),
    h("button", { type: "button", class: "button danger", text: label, onclick: () => {
      el.hidden = true;
      action();
    } }),
    " ",
    h("button", { type: "button", text: "Cancel", onclick: () => {
      el.hidden = true;
    } }),
  );
  return { el, open: () => { el.hidden = false; } };
}

export function select(name, options, value, props = {}) {
  return h(
    "select",
    { name, ...props },
    options.map(([optionValue, text]) => h("option", { value: optionValue, text, selected: optionValue === value })),
  );
}
