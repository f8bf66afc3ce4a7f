// A run's display name, group, tags and note (shown in its header, edited by editors), its
// attempts' own configs beside its config, and deleting runs and projects (owners, after
// typing the name). Everything people wrote is shown as text.

import * as api from "../lib/api.js";
import { h } from "../lib/dom.js";
import { address } from "../lib/root.js";
import { configChips } from "../lib/runinfo.js";

const csrf = async () => (await api.session()).csrf_token ?? null;

/** Group, tags, note and the attempts' differing configs, for the run's header. */
export function runMeta(run, attemptConfigs = []) {
  const tags = (run.tags ?? []).map((tag) => h("span", { class: "tag", text: tag }));
  return h(
    "div",
    { class: "run-meta" },
    run.display_name ? h("div", { class: "muted run-id" }, "ID ", h("code", { text: run.run })) : null,
    run.group || tags.length
      ? h(
          "div",
          { class: "meta-line" },
          run.group ? h("span", { class: "group" }, "group ", h("b", { text: run.group })) : null,
          tags.length ? h("span", { class: "tags" }, tags) : null,
        )
      : null,
    run.note ? h("p", { class: "note", text: run.note }) : null,
    attemptConfigs?.length
      ? h(
          "div",
          { class: "attempt-configs" },
          h("div", { class: "muted", text: "Attempts whose own config differs from the run's:" }),
          attemptConfigs.map((a) =>
            h("div", { class: "attempt-config", dataset: { attempt: a.attempt } }, h("span", { class: "muted", text: `attempt ${a.attempt} ` }), configChips(a.config)),
          ),
        )
      : null,
  );
}

function field(label, input) {
  return h("label", { class: "field" }, h("span", { text: label }), input);
}

/** The edit form and the delete confirmation of one run. `onSaved(run)` gets the answer. */
export function managePanel(ref, you, onSaved) {
  const el = h("div", { class: "panel manage-panel", hidden: true });
  const message = h("p", { class: "notice error", hidden: true });
  const fail = (error) => {
    message.textContent = error.message;
    message.hidden = false;
  };
  const edit = (run) => {
    const name = h("input", { name: "display_name", value: run.display_name ?? "", placeholder: run.run });
    const group = h("input", { name: "group", value: run.group ?? "" });
    const tags = h("input", { name: "tags", value: (run.tags ?? []).join(", "), placeholder: "comma, separated" });
    const note = h("textarea", { name: "note", rows: 3 });
    note.value = run.note ?? "";
    const save = async (event) => {
      event.preventDefault();
      message.hidden = true;
      const body = {
        display_name: name.value,
        group: group.value.trim(),
        tags: tags.value.split(",").map((t) => t.trim()).filter(Boolean),
        note: note.value,
      };
      try {
        onSaved(await api.sendJSON("PATCH", api.runPath(ref.project, ref.run), body, { csrf: await csrf() }));
        el.hidden = true;
      } catch (error) {
        fail(error);
      }
    };
    return h(
      "form",
      { class: "edit-run", onsubmit: save },
      field("Display name", name),
      field("Group", group),
      field("Tags", tags),
      field("Note", note),
      h("button", { type: "submit", class: "button", text: "Save" }),
    );
  };
  return {
    el,
    edit: you?.write
      ? (run) => {
          el.replaceChildren(edit(run), message);
          el.hidden = !el.hidden;
        }
      : null,
    remove: you?.manage
      ? () => {
          el.replaceChildren(
            confirmDelete(`run ${ref.run}`, ref.run, async () => {
              await api.sendJSON("DELETE", api.runPath(ref.project, ref.run), null, { csrf: await csrf() });
              location.assign(address(api.page.project(ref.project)));
            }),
          );
          el.hidden = false;
        }
      : null,
  };
}

/** A confirmation that asks for `name` to be typed before `action` runs. */
export function confirmDelete(what, name, action) {
  const typed = h("input", { class: "confirm-name", "aria-label": `type ${name} to confirm` });
  const go = h("button", { type: "button", class: "button danger", text: "Delete", disabled: true });
  const error = h("p", { class: "notice error", hidden: true });
  typed.addEventListener("input", () => {
    go.disabled = typed.value !== name;
  });
  go.addEventListener("click", async () => {
    go.disabled = true;
    try {
      await action();
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
    }
  });
  return h(
    "div",
    { class: "notice confirm delete-confirm" },
    h("p", {}, `Delete ${what} and all its data? This cannot be undone. Type `, h("code", { text: name }), " to confirm."),
    typed,
    go,
    error,
  );
}
