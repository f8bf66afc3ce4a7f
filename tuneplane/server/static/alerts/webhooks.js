// A project's webhooks (editors and owners only: a webhook URL is often a credential, as
// Slack's are): the list, an add form whose answer's signing secret is shown this once,
// delete after a confirmation, and each webhook's delivery log.

import * as api from "../lib/api.js";
import { copyField } from "../lib/clipboard.js";
import { h } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { attempt, confirmBox, errorLine, select } from "../lib/forms.js";
import { webhooksPath } from "./common.js";

const DELIVERY_COLUMNS = ["event", "alert", "state", "tries", "last status", "last error", "created", "finished"];

async function deliveriesTable(project, hook) {
  const { deliveries } = await api.getJSON(`${webhooksPath(project)}/${hook.id}/deliveries`);
  if (!deliveries.length) return h("p", { class: "muted deliveries-empty", text: "Nothing sent yet: a delivery is queued for each alert a rule raises." });
  return h(
    "table",
    { class: "table deliveries" },
    h("thead", {}, h("tr", {}, DELIVERY_COLUMNS.map((text) => h("th", { text })))),
    h(
      "tbody",
      {},
      deliveries.map((d) =>
        h(
          "tr",
          { dataset: { state: d.state } },
          h("td", { text: d.event }),
          h("td", { text: d.alert_id }),
          h("td", {}, h("span", { class: `delivery-state ${d.state}`, text: d.state })),
          h("td", { class: "num", text: d.attempts }),
          h("td", { class: "num", text: d.last_status ?? "—" }),
          h("td", { class: "muted", text: d.last_error ?? "" }),
          h("td", { text: fmtTime(d.created_at) }),
          h("td", { text: d.finished_at == null ? (d.next_at ? `next try ${fmtTime(d.next_at)}` : "—") : fmtTime(d.finished_at) }),
        ),
      ),
    ),
  );
}

function hookRow(project, hook, ctx) {
  const detail = h("tr", { class: "webhook-detail", hidden: true }, h("td", { colspan: 5 }));
  const open = (content) => {
    detail.firstChild.replaceChildren(content);
    detail.hidden = false;
  };
  const remove = confirmBox(`Delete the webhook “${hook.name}” and its delivery log?`, "Delete", () =>
    attempt(ctx.error, () => api.sendJSON("DELETE", `${webhooksPath(project)}/${hook.id}`, null, { csrf: ctx.csrf }), ctx.reload));
  const row = h(
    "tr",
    { class: "webhook", dataset: { webhook: hook.id } },
    h("td", { text: hook.name }),
    h("td", {}, h("code", { class: "webhook-url", text: hook.url })),
    h("td", { text: hook.format }),
    h("td", { text: fmtTime(hook.created_at) }),
    h(
      "td",
      {},
      h("button", { type: "button", class: "link", text: "deliveries", "aria-label": `deliveries of ${hook.name}`, onclick: () =>
        attempt(ctx.error, async () => open(await deliveriesTable(project, hook))) }),
      " ",
      h("button", { type: "button", class: "link", text: "delete", "aria-label": `delete webhook ${hook.name}`, onclick: () => {
        open(remove.el);
        remove.open();
      } }),
    ),
  );
  return [row, detail];
}

/** The webhook just made, with its secret: the server never shows it again. */
function shownSecret(made) {
  const value = h("input", { class: "key-value webhook-secret", readonly: true, value: made.secret, "aria-label": "webhook secret" });
  const note = h("span", { class: "muted" });
  return h(
    "div",
    { class: "key-shown secret-shown" },
    h("p", { text: `The signing secret of “${made.name}”. Copy it now: it is shown once. Check each body's X-Tuneplane-Signature with it.` }),
    value,
    h("button", { type: "button", text: "Copy", onclick: () => copyField(value, note) }),
    " ",
    note,
  );
}

function webhookForm(project, csrf, shown, reload) {
  const error = errorLine();
  const url = h("input", { name: "url", type: "text", "aria-label": "webhook URL", placeholder: "https://hooks.slack.com/services/…", autocomplete: "off" });
  const format = select("format", [["json", "json"], ["slack", "slack ({\"text\": …})"]], "json", { "aria-label": "format" });
  const name = h("input", { name: "name", "aria-label": "webhook name", placeholder: "webhook", autocomplete: "off" });
  const button = h("button", { type: "submit", class: "primary", text: "Add webhook" });
  const form = h("form", { class: "inline-form webhook-form" }, url, format, name, button);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = { url: url.value.trim(), format: format.value };
    if (name.value.trim()) body.name = name.value.trim();
    button.disabled = true;
    attempt(error, async () => {
      const made = await api.sendJSON("POST", webhooksPath(project), body, { csrf });
      shown.replaceChildren(shownSecret(made));
      form.reset();
    }, async () => {
      button.disabled = false;
      await reload();
    });
  });
  return h("div", { class: "webhook-create" }, h("h3", { text: "Add a webhook" }), form, error.el);
}

/** The webhooks section, from the list already read (its GET is also the editor check). */
export function webhooksSection(project, initial, csrf) {
  const error = errorLine();
  const rows = h("tbody");
  const shown = h("div");
  const ctx = { csrf, error, reload: null };
  const render = (hooks) => {
    rows.replaceChildren(...hooks.flatMap((hook) => hookRow(project, hook, ctx)));
    if (!hooks.length) rows.append(h("tr", {}, h("td", { colspan: 5, class: "empty-cell", text: "No webhooks." })));
  };
  ctx.reload = async () => render((await api.getJSON(webhooksPath(project))).webhooks);
  render(initial);
  return h(
    "section",
    { class: "alerts-section webhooks" },
    h("h2", { text: "Webhooks" }),
    h("p", { class: "muted", text: "Each webhook receives every alert the rules raise, opened and resolved, as JSON or as a Slack message." }),
    h("table", { class: "table webhooks" }, h("thead", {}, h("tr", {}, ["name", "URL", "format", "created", ""].map((text) => h("th", { text })))), rows),
    error.el,
    webhookForm(project, csrf, shown, ctx.reload),
    shown,
  );
}
