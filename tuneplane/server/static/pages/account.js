// Signing in and out, the first administrator's account, share links opened in a browser,
// and the signed-in user's API keys. Passwords go only into the request body.

import * as api from "../lib/api.js";
import { crumbs, empty, h, mount } from "../lib/dom.js";
import { fmtTime } from "../lib/format.js";
import { address, here } from "../lib/root.js";

/** Where to go after signing in: a local path only (never another site). */
function nextAddress() {
  const next = new URLSearchParams(location.search).get("next") ?? "/";
  return next.startsWith("/") && !next.startsWith("//") ? next : "/";
}

function field(label, props) {
  return h("label", { class: "form-field" }, h("span", { text: label }), h("input", { required: true, ...props }));
}

/** A form whose submit runs `action(values)`; its error is shown in the form, as text. */
function form(title, fields, submitText, action) {
  const error = h("p", { class: "form-error", role: "alert", hidden: true });
  const button = h("button", { type: "submit", class: "primary", text: submitText });
  const el = h("form", { class: "card form", novalidate: false }, h("h1", { text: title }), ...fields, error, button);
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    button.disabled = true;
    try {
      await action(Object.fromEntries(new FormData(el)));
    } catch (failure) {
      error.textContent = String(failure.message ?? failure);
      error.hidden = false;
    } finally {
      button.disabled = false;
    }
  });
  return el;
}

/** Why single sign-on sent the browser back here (`?sso=` from /sign-in/oidc/callback). */
const SSO_REFUSALS = {
  "not-allowed": (name) =>
    `Your ${name} account may not sign in here: neither its e-mail domain nor its organisations are on this server's allow-list. Ask an administrator.`,
  disabled: () => "This account is disabled. Ask an administrator to enable it.",
  state: () => "The sign-in could not be matched to this browser (it was started again in another tab?). Please try again.",
  expired: () => "The sign-in took too long, or was started in another browser. Please try again.",
  token: (name) => `${name}'s answer could not be verified. Please try again; if it happens again, tell an administrator.`,
  provider: (name, code) => `${name} did not sign you in${code ? ` (${code})` : ""}.`,
};

/** "Sign in with …" when the server has single sign-on, and why the last try failed. */
function singleSignOn(me) {
  if (!me.single_sign_on) return null;
  const params = new URLSearchParams(location.search);
  const reason = params.get("sso");
  const code = /^[a-z_]{1,64}$/.test(params.get("sso_error") ?? "") ? params.get("sso_error") : "";
  const explain = reason && (SSO_REFUSALS[reason] ?? (() => "Single sign-on did not sign you in. Please try again."));
  return h(
    "div",
    { class: "card form sso" },
    explain ? h("p", { class: "form-error", role: "alert", text: explain(me.single_sign_on, code) }) : null,
    h("a", { class: "button primary", href: `/sign-in/oidc?next=${encodeURIComponent(nextAddress())}`, text: `Sign in with ${me.single_sign_on}` }),
  );
}

export async function signInPage() {
  crumbs([["Sign in", null]]);
  const me = await api.session();
  if (me.first_admin_pending) {
    mount(
      singleSignOn(me),
      empty(
        "No account exists yet.",
        "Open the one-time link `tuneplane serve` printed to create the first administrator, or run `tuneplane user add LOGIN --admin` on the server.",
      ),
    );
    return;
  }
  mount(
    singleSignOn(me),
    form(
      "Sign in",
      [
        field("Login", { name: "login", autocomplete: "username", autofocus: true }),
        field("Password", { name: "password", type: "password", autocomplete: "current-password" }),
      ],
      "Sign in",
      async ({ login, password }) => {
        await api.sendJSON("POST", "/api/v1/session", { login, password });
        location.assign(address(nextAddress()));
      },
    ),
  );
}

export async function welcomePage() {
  crumbs([["Welcome", null]]);
  const token = location.hash.slice(1);
  // The token leaves the address bar (and so the history) at once.
  history.replaceState(null, "", location.pathname);
  const me = await api.session();
  if (!me.first_admin_pending || !token) {
    mount(empty("This link has been used.", h("a", { href: "/sign-in", text: "Sign in" })));
    return;
  }
  mount(
    form(
      "Create the first administrator",
      [
        field("Login", { name: "login", autocomplete: "username", autofocus: true }),
        field("Password (8 characters or more)", { name: "password", type: "password", autocomplete: "new-password", minlength: 8 }),
      ],
      "Create and sign in",
      async ({ login, password }) => {
        await api.sendJSON("POST", "/api/v1/setup", { token, login, password });
        location.assign(address("/"));
      },
    ),
  );
}

export async function sharedPage() {
  crumbs([["Shared run", null]]);
  const token = location.hash.slice(1);
  history.replaceState(null, "", location.pathname);
  try {
    const opened = await api.sendJSON("POST", "/api/v1/share-session", { token });
    location.replace(address(api.page.run(opened.project, opened.run)));
  } catch (failure) {
    mount(empty("This share link does not open anything.", String(failure.message ?? failure)));
  }
}

function keyRow(key, me, reload) {
  const revoke = key.revoked
    ? h("span", { class: "muted", text: "revoked" })
    : h("button", {
        type: "button",
        class: "link",
        text: "revoke",
        onclick: async () => {
          await api.sendJSON("DELETE", `/api/v1/keys/${key.id}`, null, { csrf: me.csrf_token });
          await reload();
        },
      });
  return h(
    "tr",
    { dataset: { key: key.id } },
    h("td", { text: key.name }),
    h("td", { text: key.scope === "write" ? "read and write" : "read" }),
    h("td", { text: fmtTime(key.created_at) }),
    h("td", {}, revoke),
  );
}

export async function accountPage() {
  crumbs([["Account", null]]);
  const me = await api.session();
  if (!me.signed_in) {
    location.replace(address(`/sign-in?next=${encodeURIComponent(here())}`));
    return;
  }
  const shown = h("div", { class: "key-shown", hidden: true });
  const rows = h("tbody");
  const reload = async () => {
    const keys = await api.getJSON("/api/v1/keys");
    rows.replaceChildren(...keys.map((key) => keyRow(key, me, reload)));
  };
  const create = form(
    "New API key",
    [
      field("Name", { name: "name", placeholder: "laptop", pattern: "[A-Za-z0-9_-]{1,128}" }),
      h(
        "label",
        { class: "form-field" },
        h("span", { text: "Scope" }),
        h("select", { name: "scope" }, h("option", { value: "write", text: "read and write" }), h("option", { value: "read", text: "read" })),
      ),
    ],
    "Create key",
    async ({ name, scope }) => {
      const made = await api.sendJSON("POST", "/api/v1/keys", { name, scope }, { csrf: me.csrf_token });
      shown.replaceChildren(
        h("p", { text: "Copy this key now: it is shown once. Use it as TUNEPLANE_API_KEY." }),
        h("code", { class: "key-value", text: made.key }),
      );
      shown.hidden = false;
      await reload();
    },
  );
  const signOut = h("button", {
    type: "button",
    text: "Sign out",
    onclick: async () => {
      await api.sendJSON("DELETE", "/api/v1/session", null, { csrf: me.csrf_token });
      location.assign(address("/"));
    },
  });
  mount(
    h("h1", { text: `Signed in as ${me.login}` }),
    signOut,
    h("h2", { text: "API keys" }),
    h(
      "table",
      { class: "keys" },
      h("thead", {}, h("tr", {}, ...["name", "scope", "created", ""].map((text) => h("th", { text })))),
      rows,
    ),
    shown,
    create,
  );
  await reload();
}

/** The top bar's corner: who is signed in, or a link to sign in. */
export async function showSession() {
  const corner = document.querySelector(".top-links");
  if (!corner) return;
  let me;
  try {
    me = await api.session();
  } catch {
    return; // the page itself says what went wrong
  }
  const next = encodeURIComponent(here() + location.search);
  corner.append(
    me.signed_in
      ? h("a", { href: "/account", class: "session", text: me.login })
      : h("a", { href: `/sign-in?next=${next}`, class: "session", text: "sign in" }),
  );
}
