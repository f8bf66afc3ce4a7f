// The run page's "Training rollouts" tab: the rollouts producers kept, filtered on the
// server by diagnostic category and step (…/trajectories?scope=training&category=&step=),
// a page at a time (`next`). They are chosen samples: the tab says so and gives no rate.
// The address keeps the filters and the page (?tab=rollouts&category=&step=&after=).

import * as api from "./api.js";
import { debug } from "../lib/debug.js";
import { h, serial } from "../lib/dom.js";
import { fmtInt } from "../lib/format.js";
import { replaceParams } from "../lib/url.js";
import { BIASED_SAMPLES, CATEGORIES, CATEGORY_LABEL, categoryLabel, policyText, rewardText } from "./rollout.js";
import { textCell } from "./text.js";

export const PAGE_SIZE = 50;
const COLUMNS = ["step", "rollout", "execution attempt", "category", "reward", "collection policy", "consumption policy", "messages", "text"];

debug.rollouts = { loads: 0, shown: [], category: null, step: null };

const count = (text) => (text != null && /^\d+$/.test(text) ? Number(text) : null);

export class RolloutsView {
  constructor(ref) {
    this.ref = ref;
    const q = new URLSearchParams(location.search);
    this.category = CATEGORY_LABEL[q.get("category")] ? q.get("category") : null;
    this.step = count(q.get("step"));
    // afters[i] is the cursor of page i; a link to a later page goes back to the first.
    this.afters = count(q.get("after")) == null ? [null] : [null, count(q.get("after"))];
    this.next = null;
    this.categories = h("nav", { class: "outcome-filters category-filters", "aria-label": "diagnostic category" });
    this.steps = h("select", { name: "rollout-step", "aria-label": "step" });
    this.steps.addEventListener("change", () => this.filter({ step: count(this.steps.value) }));
    this.rows = h("tbody");
    this.where = h("span", { class: "page-where muted" });
    this.prev = h("button", { type: "button", class: "page-prev", text: "← previous", onclick: () => this.turn(-1) });
    this.nextButton = h("button", { type: "button", class: "page-next", text: "next →", onclick: () => this.turn(1) });
    this.el = h(
      "div",
      { class: "rollouts" },
      h("h2", { class: "section-title", text: "Training rollouts" }),
      h("p", { class: "notice biased-samples", text: BIASED_SAMPLES }),
      h("div", { class: "toolbar" }, this.categories, h("label", { class: "control" }, h("span", { class: "control-label", text: "step" }), this.steps)),
      h("table", { class: "table rollouts-table" }, h("thead", {}, h("tr", {}, COLUMNS.map((label) => h("th", { text: label })))), this.rows),
      h("div", { class: "pager" }, this.prev, this.where, this.nextButton),
    );
    this.refresh = serial(() => this.load());
  }

  start() {
    this.renderCategories();
    return this.refresh();
  }

  renderCategories() {
    const choices = [[null, "all categories"], ...CATEGORIES];
    this.categories.replaceChildren(
      ...choices.map(([category, label]) =>
        h("button", {
          type: "button",
          class: `outcome-filter category-filter ${category ?? "all"}`,
          "aria-pressed": String(category === this.category),
          dataset: { category: category ?? "all" },
          text: label,
          onclick: () => this.filter({ category }),
        }),
      ),
    );
  }

  filter(change) {
    Object.assign(this, change);
    this.afters = [null];
    this.renderCategories();
    return this.refresh();
  }

  turn(by) {
    if (by > 0 && this.next != null) this.afters.push(this.next);
    else if (by < 0 && this.afters.length > 1) this.afters.pop();
    else return null;
    return this.refresh();
  }

  async load() {
    const after = this.afters[this.afters.length - 1];
    replaceParams({ category: this.category, step: this.step, after });
    let answer;
    try {
      answer = await api.index(this.ref.project, this.ref.run, { scope: "training", category: this.category, step: this.step, after, limit: PAGE_SIZE });
    } catch (error) {
      this.rows.replaceChildren(this.message(`Could not load the rollouts: ${error.message}`));
      return;
    }
    if (!answer.items.length && this.afters.length > 1) {
      this.afters.pop();
      return this.load();
    }
    this.next = answer.next;
    if (answer.steps != null) this.renderSteps(answer.steps); // the first page carries them
    this.renderPage(answer);
  }

  renderSteps(steps) {
    const known = this.step == null || steps.includes(this.step) ? steps : [this.step, ...steps];
    const options = [h("option", { value: "", text: "all steps", selected: this.step == null })];
    for (const step of known) options.push(h("option", { value: String(step), text: fmtInt(step), selected: step === this.step }));
    this.steps.replaceChildren(...options);
  }

  message(text) {
    return h("tr", {}, h("td", { class: "empty-cell", colspan: String(COLUMNS.length), text }));
  }

  renderPage(answer) {
    const items = answer.items;
    const first = (this.afters.length - 1) * PAGE_SIZE;
    const what = [this.category ? categoryLabel(this.category) : null, this.step == null ? null : `step ${fmtInt(this.step)}`].filter(Boolean).join(", ");
    this.rows.replaceChildren(...(items.length ? items.map((row) => this.row(row)) : [this.message(`No rollouts kept${what ? ` for ${what}` : ""} yet.`)]));
    const total = `${fmtInt(answer.total)}${answer.total_is_lower_bound ? "+" : ""}`;
    this.where.textContent = items.length ? `rollouts ${fmtInt(first + 1)}–${fmtInt(first + items.length)} of ${total} kept${what ? ` (${what})` : ""}` : "";
    this.prev.disabled = this.afters.length === 1;
    this.nextButton.disabled = answer.next == null;
    debug.rollouts.loads += 1;
    Object.assign(debug.rollouts, { shown: items.map((r) => r.trajectory_id), category: this.category, step: this.step });
  }

  row(row) {
    return h(
      "tr",
      { dataset: { rollout: row.trajectory_id, step: String(row.step) } },
      h("td", { class: "num", text: fmtInt(row.step) }),
      h("td", {}, h("a", { class: "rollout-link", href: api.pageHref(this.ref.project, this.ref.run, row), text: row.trajectory_id })),
      h("td", { class: "num", text: String(row.attempt) }),
      h("td", {}, h("span", { class: `category ${row.category}`, text: categoryLabel(row.category) })),
      h("td", { class: `num reward${row.reward_invalid ? " invalid" : ""}`, text: rewardText(row) }),
      h("td", { class: "policy", text: policyText(row.collection_policy) }),
      h("td", { class: "policy", text: policyText(row.consumption_policy) }),
      h("td", { class: "num", text: `${fmtInt(row.message_count)} of ${fmtInt(row.total_messages)}` }),
      h("td", {}, textCell(row)),
    );
  }
}
