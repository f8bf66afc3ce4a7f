// What the dashboard's forms share: a line that shows the server's refusal as text, a guarded
// action, an inline confirmation and a <select> of choices.

import { h } from "./dom.js";

/**
 * @typedef {object} ErrorLine
 * @property {HTMLElement} el
 * @property {() => void} clear
 * @property {(failure: unknown) => void} show
 */

/**
 * A line that shows a refusal as text; cleared by the next attempt.
 * @returns {ErrorLine}
 */
export function errorLine() {
  const el = h("p", { class: "form-error", role: "alert", hidden: true });
  return {
    el,
    clear: () => {
      el.hidden = true;
      el.textContent = "";
    },
    show: (failure) => {
      el.textContent = String(/** @type {any} */ (failure)?.message ?? failure);
      el.hidden = false;
    },
  };
}

/**
 * Run `action`; a refusal goes to `error` and answers false; `after` (a reload) runs either way.
 * @param {ErrorLine} error
 * @param {() => Promise<unknown>} action
 * @param {(() => Promise<unknown>) | null} [after]
 * @returns {Promise<boolean>}
 */
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
 * @param {string} question
 * @param {string} label the confirming button's text
 * @param {() => void} action
 * @param {string} [buttonClass] "button danger" for what cannot be undone
 */
export function confirmBox(question, label, action, buttonClass = "button danger") {
  const el = h("div", { class: "notice confirm", hidden: true });
  el.append(
    h("p", { text: question }),
    h("button", { type: "button", class: buttonClass, text: label, onclick: () => {
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

/**
 * A <select> of [value, text] options with `value` chosen.
 * @param {string} name
 * @param {Array<[string, string]>} options
 * @param {string} value
 * @param {Record<string, unknown>} [props] more attributes (see h)
 * @returns {HTMLSelectElement}
 */
export function select(name, options, value, props = {}) {
  return /** @type {HTMLSelectElement} */ (
    h(
      "select",
      { name, ...props },
      options.map(([optionValue, text]) => h("option", { value: optionValue, text, selected: optionValue === value })),
    )
  );
}
