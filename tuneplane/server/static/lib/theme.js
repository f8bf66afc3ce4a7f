// Light or dark: the system's preference (prefers-color-scheme) unless the reader chose one
// with the top bar's button, which is remembered in this browser. Every colour of the page
// is a CSS variable with a light and a dark value (app.css); the chosen theme is the root's
// data-theme, which sets its color-scheme. The charts, drawn on canvases, read theirs from
// the same variables and are drawn again when the theme changes.

import { h } from "./dom.js";

const KEY = "tuneplane.theme";
const THEMES = ["light", "dark"];
/** The event on window when the theme shown changes (detail: "light" or "dark"). */
export const THEME_EVENT = "tuneplane:theme";
const system = window.matchMedia("(prefers-color-scheme: dark)");

/** The theme chosen in this browser, or null to follow the system. */
function chosen() {
  try {
    const value = localStorage.getItem(KEY);
    return THEMES.includes(value) ? value : null;
  } catch {
    return null; // storage refused (a sandboxed frame): follow the system
  }
}

/** The theme shown now: "light" or "dark". */
export function theme() {
  return document.documentElement.dataset.theme ?? (system.matches ? "dark" : "light");
}

function show(next) {
  if (next) document.documentElement.dataset.theme = next;
  else delete document.documentElement.dataset.theme;
  window.dispatchEvent(new CustomEvent(THEME_EVENT, { detail: theme() }));
}

/** Show the remembered theme, follow the system's, and answer the top bar's switch. */
export function themeToggle() {
  show(chosen());
  const button = h("button", { type: "button", class: "theme-toggle" });
  const label = () => {
    const other = theme() === "dark" ? "light" : "dark";
    button.textContent = other;
    button.title = `Switch to the ${other} theme`;
    button.setAttribute("aria-label", `switch to the ${other} theme`);
  };
  button.addEventListener("click", () => {
    const next = theme() === "dark" ? "light" : "dark";
    try {
      localStorage.setItem(KEY, next);
    } catch {
      // not remembered: this page switches all the same
    }
    show(next);
  });
  system.addEventListener("change", () => chosen() ?? show(null));
  window.addEventListener(THEME_EVENT, label);
  label();
  return button;
}

let probe = null;

/** A CSS variable's colour as the theme shown resolves it (rgb(…)), for a canvas. */
export function resolve(name) {
  if (!probe) {
    probe = h("span", { hidden: true, "aria-hidden": "true" });
    document.body.append(probe);
  }
  probe.style.color = `var(${name})`;
  return getComputedStyle(probe).color;
}

/** The charts' colours in the theme shown now. */
export function chartColors() {
  return {
    axis: resolve("--chart-axis"),
    grid: resolve("--chart-grid"),
    ticks: resolve("--chart-ticks"),
    background: resolve("--panel"),
    text: resolve("--fg"),
  };
}
