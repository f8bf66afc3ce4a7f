// "/projects/<project>/access": who may see a project. Owners set its visibility and public
// logs and manage its members; owners and editors make and revoke share links. The page asks
// the API and shows what it answers: a part the caller may not use is left out, and every
// refusal (the last owner, an unknown login, a 403) is shown as the server's text.

import * as api from "../lib/api.js";
import { copyField } from "../lib/clipboard.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { attempt, confirmBox, errorLine, select } from "../lib/forms.js";
import { runsOrMissing } from "../lib/missing.js";
import { here } from "../lib/root.js";

const ROLES = ["owner", "editor", "viewer"];
const enc = encodeURIComponent;
const accessPath = (project) => `${api.projectPath(project)}/access`;
const memberPath = (project, login) => `${api.projectPath(project)}/members/${enc(login)}`;
/** The page's own address. */
export const accessHref = (project) => `/projects/${enc(project)}/access`;

export async function accessPage(project) {
  crumbs([[project, api.page.project(project)], ["access", null]]);
  const runs = await runsOrMissing(project);
  if (!runs) return;
  const me = await api.session();
  // What the caller may do, as the run list says; a project without runs does not say, so
  // the settings are asked for and a refusal means "not an owner".
  let you = runs[0]?.you ?? null;
  let settings = null;
  let refusal = null;
  if (you === null || you.manage) {
    try {
      settings = await api.getJSON(accessPath(project));
    } catch (error) {
      if (![401, 403].includes(error.status)) throw error;
      refusal = error.message;
    }
    you = { ...(you ?? { share: false }), manage: settings !== null };
  }
  if (!you.manage && !you.share) {
    mount(
      h("h1", { text: `Access to ${project}` }),
      empty(
        "Only the project's owners and editors manage its access.",
        refusal ?? "Owners set its visibility and members; owners and editors make share links.",
        me.signed_in ? h("a", { href: api.page.project(project), text: `Runs of ${project}` }) : h("a", { href: `/sign-in?next=${enc(here())}`, text: "Sign in" }),
      ),
    );
    return;
  }
  const csrf = me.csrf_token ?? null;
  const parts = [h("h1", { text: `Access to ${project}` })];
  if (settings) {
    parts.push(visibilitySection(project, settings, csrf), await membersSection(project, me, csrf));
  } else {
    parts.push(h("p", { class: "notice", text: "Only owners change the project's visibility and members; you may manage its share links." }));
  }
  if (you.share) parts.push(await sharesSection(project, runs, csrf));
  mount(...parts);
}

// --- visibility ---------------------------------------------------------------------------

function visibilitySection(project, initial, csrf) {
  let current = initial;
  const error = errorLine();
  const visibility = h("input", { type: "checkbox", name: "public", "aria-label": "public" });
  const publicLogs = h("input", { type: "checkbox", name: "public_logs", "aria-label": "public logs" });
  const state = h("p", { class: "access-state" });
  const show = () => {
    visibility.checked = current.visibility === "public";
    publicLogs.checked = current.public_logs;
    state.textContent =
      current.visibility === "public"
        ? "Public: anyone who can reach this server reads its runs, charts, config and alerts."
        : "Private: only its members (and share links to one run) see it; others are told it does not exist.";
  };
  const change = (body) =>
    attempt(error, async () => {
      current = await api.sendJSON("PATCH", accessPath(project), body, { csrf });
    }, async () => show());
  const makePublic = confirmBox(
    `Make ${project} public? Anyone who can reach this server will read its runs.`,
    "Make public",
    () => change({ visibility: "public" }),
    "primary",
  );
  visibility.addEventListener("change", () => {
    if (!visibility.checked) {
      change({ visibility: "private" });
      return;
    }
    // Making a project public is the one change here that cannot be taken back: what was
    // read while it was public has been read.
    visibility.checked = false;
    makePublic.open();
  });
  publicLogs.addEventListener("change", () => change({ public_logs: publicLogs.checked }));
  show();
  return h(
    "section",
    { class: "access-section visibility" },
    h("h2", { text: "Visibility" }),
    h("label", { class: "toggle" }, visibility, " Public"),
    makePublic.el,
    state,
    h("label", { class: "toggle" }, publicLogs, " Public logs: non-members who may read a run also read its stdout and stderr"),
    error.el,
  );
}

// --- members ------------------------------------------------------------------------------

async function membersSection(project, me, csrf) {
  const error = errorLine();
  const rows = h("tbody");
  const reload = async () => {
    const members = await api.getJSON(`${api.projectPath(project)}/members`);
    rows.replaceChildren(...members.map((member) => memberRow(project, member, me, csrf, error, reload)));
    if (!members.length) rows.append(h("tr", {}, h("td", { colspan: 4, class: "empty-cell", text: "No members." })));
  };
  const login = h("input", { name: "login", required: true, placeholder: "login", "aria-label": "login", autocomplete: "off" });
  const role = select("role", ROLES.map((r) => [r, r]), "viewer", { "aria-label": "role" });
  const add = h("form", { class: "inline-form add-member" }, login, role, h("button", { type: "submit", class: "primary", text: "Add member" }));
  add.addEventListener("submit", (event) => {
    event.preventDefault();
    attempt(error, async () => {
      await api.sendJSON("PUT", memberPath(project, login.value.trim()), { role: role.value, content: false }, { csrf });
      login.value = "";
    }, reload);
  });
  await reload();
  return h(
    "section",
    { class: "access-section members" },
    h("h2", { text: "Members" }),
    h(
      "table",
      { class: "table members" },
      h("thead", {}, h("tr", {}, ["login", "role", "content", ""].map((text) => h("th", { text })))),
      rows,
    ),
    h("p", { class: "muted", text: "Content lets a member read trajectory bodies, which are never public." }),
    add,
    error.el,
  );
}

function memberRow(project, member, me, csrf, error, reload) {
  const put = (body) =>
    attempt(error, () => api.sendJSON("PUT", memberPath(project, member.login), body, { csrf }), reload);
  const role = select("role", ROLES.map((r) => [r, r]), member.role, {
    "aria-label": `role of ${member.login}`,
    onchange: (event) => put({ role: event.target.value, content: member.content }),
  });
  const content = h("input", {
    type: "checkbox",
    "aria-label": `content permission of ${member.login}`,
    checked: member.content,
    onchange: (event) => put({ role: member.role, content: event.target.checked }),
  });
  const remove = h("button", {
    type: "button",
    class: "link",
    text: "remove",
    "aria-label": `remove ${member.login}`,
    onclick: () => attempt(error, () => api.sendJSON("DELETE", memberPath(project, member.login), null, { csrf }), reload),
  });
  const you = me.login === member.login ? h("span", { class: "muted", text: " (you)" }) : null;
  return h(
    "tr",
    { dataset: { login: member.login } },
    h("td", {}, h("span", { text: member.login }), you),
    h("td", {}, role),
    h("td", {}, content),
    h("td", {}, remove),
  );
}

// --- share links --------------------------------------------------------------------------

function linkState(link) {
  if (link.revoked) return "revoked";
  if (link.expires_at != null && link.expires_at * 1000 <= Date.now()) return "expired";
  return "active";
}

async function sharesSection(project, runs, csrf) {
  const error = errorLine();
  const rows = h("tbody");
  const reload = async () => {
    const links = await api.getJSON(`${api.projectPath(project)}/shares`);
    rows.replaceChildren(...links.slice().reverse().map((link) => shareRow(project, link, csrf, error, reload)));
    if (!links.length) rows.append(h("tr", {}, h("td", { colspan: 6, class: "empty-cell", text: "No share links yet." })));
  };
  await reload();
  const names = runs.map((run) => run.run).reverse();
  const create = runs.length
    ? shareForm(project, names, csrf, reload)
    : h("p", { class: "muted", text: "This project has no runs to share yet." });
  return h(
    "section",
    { class: "access-section shares" },
    h("h2", { text: "Share links" }),
    h("p", { class: "muted", text: "A share link opens one run, read-only, to whoever has it: what a public project shows, never trajectory bodies." }),
    h(
      "table",
      { class: "table shares" },
      h("thead", {}, h("tr", {}, ["run", "created by", "created", "expires", "state", ""].map((text) => h("th", { text })))),
      rows,
    ),
    error.el,
    create,
  );
}

function shareRow(project, link, csrf, error, reload) {
  const state = linkState(link);
  const revoke =
    state === "revoked"
      ? null
      : h("button", {
          type: "button",
          class: "link",
          text: "revoke",
          "aria-label": `revoke share link ${link.id}`,
          onclick: () =>
            attempt(error, () => api.sendJSON("DELETE", `${api.projectPath(project)}/shares/${link.id}`, null, { csrf }), reload),
        });
  return h(
    "tr",
    { dataset: { link: link.id, run: link.run } },
    h("td", {}, h("a", { href: api.page.run(project, link.run), text: link.run })),
    h("td", { text: link.created_by ?? "the administrator" }),
    h("td", { text: fmtTime(link.created_at) }),
    h("td", { text: link.expires_at == null ? "never" : fmtTime(link.expires_at) }),
    h("td", {}, h("span", { class: `link-state ${state}`, text: state })),
    h("td", {}, revoke),
  );
}

/** The link just made, shown once: the server keeps only its hash. */
function shownLink(made) {
  const value = h("input", { class: "key-value share-url", readonly: true, value: made.url, "aria-label": "share link" });
  const note = h("span", { class: "muted" });
  return h(
    "div",
    { class: "key-shown share-shown" },
    h("p", { text: `A link to ${made.run}${made.expires_at ? `, until ${fmtTime(made.expires_at)}` : ", until revoked"}. Copy it now: it is shown once.` }),
    value,
    h("button", { type: "button", text: "Copy", onclick: () => copyField(value, note) }),
    " ",
    note,
  );
}

/**
 * "Create share link": a run picker (or one run) and an optional expiry in days. `csrf` may
 * be a function that answers the token when the form is sent (the run page asks late).
 */
export function shareForm(project, names, csrf, onCreated = null) {
  const error = errorLine();
  const shown = h("div");
  const picker =
    names.length > 1
      ? h("label", { class: "form-field" }, h("span", { text: "Run" }), select("run", names.map((n) => [n, n]), names[0], { "aria-label": "run to share" }))
      : null;
  const days = h("input", { type: "number", name: "days", min: "1", step: "any", placeholder: "never", "aria-label": "expires in days" });
  const button = h("button", { type: "submit", class: "primary", text: "Create share link" });
  const form = h(
    "form",
    { class: "inline-form share-form" },
    picker,
    h("label", { class: "form-field" }, h("span", { text: "Expires in days (optional)" }), days),
    button,
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const run = picker ? picker.querySelector("select").value : names[0];
    const body = days.value.trim() === "" ? {} : { expires_in_days: Number(days.value) };
    button.disabled = true;
    attempt(error, async () => {
      const token = typeof csrf === "function" ? await csrf() : csrf;
      const made = await api.sendJSON("POST", `${api.runPath(project, run)}/shares`, body, { csrf: token });
      shown.replaceChildren(shownLink(made));
      days.value = "";
    }, async () => {
      button.disabled = false;
      if (onCreated) await onCreated();
    });
  });
  return h("div", { class: "share-create" }, h("h3", { text: "Create share link" }), form, error.el, shown);
}

/** The run page's "Share": a panel under the header, opened and closed by its button. */
export function sharePanel(project, run) {
  const el = h("div", { class: "panel share-panel", hidden: true });
  let made = false;
  const csrf = async () => (await api.session()).csrf_token ?? null;
  return {
    el,
    toggle: () => {
      if (!made) {
        el.append(
          shareForm(project, [run], csrf),
          h("p", { class: "muted" }, "All of this project's links: ", h("a", { href: accessHref(project), text: "access" }), "."),
        );
        made = true;
      }
      el.hidden = !el.hidden;
    },
  };
}
