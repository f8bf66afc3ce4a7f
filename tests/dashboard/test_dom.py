"""The page-building helpers in a real browser: morph() updates a live element in place."""

from __future__ import annotations

from playwright.sync_api import Page

MORPH = """async () => {
    const { h, morph } = await import("/static/lib/dom.js");
    const make = (state, title, step) => h(
        "tr", {},
        h("td", { class: `health ${state}`, title, text: state }),
        h("td", { text: step }),
    );
    const row = make("ok", "sent 10", "step 1");
    const body = h("tbody", {}, row);
    const [cell, text] = [row.cells[0], row.cells[1].firstChild];
    morph(row, make("lossy", "sent 12, dropped 3", "step 2"));
    const same = row.cells[0] === cell && row.cells[1].firstChild === text;
    const shape = h("tr", {}, h("td", { text: "one cell" }));
    morph(row, shape); // another shape: replaced, not patched
    return {
        same,
        className: cell.className,
        title: cell.title,
        text: cell.textContent + " / " + text.data,
        replaced: body.firstChild === shape,
    };
}"""

DROPPED = """async () => {
    const { h, morph } = await import("/static/lib/dom.js");
    const el = h("span", { class: "badge", title: "old" }, "x");
    morph(el, h("span", { class: "badge" }, "x"));
    return el.hasAttribute("title");
}"""


def test_morph_changes_attributes_and_text_in_place(page: Page) -> None:
    page.goto("/")
    assert page.evaluate(MORPH) == {
        "same": True,
        "className": "health lossy",
        "title": "sent 12, dropped 3",
        "text": "lossy / step 2",
        "replaced": True,
    }
    assert page.evaluate(DROPPED) is False
