// Light or dark: the system's preference (prefers-color-scheme) unless the reader chose one
// with the top bar's button, which is remembered in this browser. The page's colours are CSS
// variables of the chosen theme (app.css); the charts read theirs from the same variables.

const KEY = "tuneplane.theme";
const THEMES = ["light", "dark"];
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
  return chosen() ?? (system.matches ? "dark" : "light");
}

/** Show the current theme; each change calls onChange(theme). */
export function followTheme(onChange = () => {}) {
  const apply = () => {
    document.documentElement.dataset.theme = theme();
    onChange(theme());
    window.dispatchEvent(new CustomEvent("tuneplane:theme", { detail: theme() }));
  };
  document.documentElement.dataset.theme = theme();
  system.addEventListener("change", () => chosen() ?? apply());
  return {
    /** Switch to the other theme and remember it. */
    toggle() {
      const next = theme() === "dark" ? "light" : "dark";
      try {
        localStorage.setItem(KEY, next);
      } catch {
        // not remembered: the page still switches
        document.documentElement.dataset.theme = next;
        return;
      }
      apply();
    },
  };
}

/** The charts' axis, grid and tick colours and their text, in the theme shown now. */
export function chartColors() {
  const style = getComputedStyle(document.documentElement);
  const read = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
  return {
    axis: read("--chart-axis", "#555"),
    grid: read("--chart-grid", "#eee"),
    ticks: read("--chart-ticks", "#ddd"),
    background: read("--panel", "#fff"),
    text: read("--fg", "#222"),
  };
}
