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


JOIN = """async () => {
    const { joinAscending } = await import("/static/charts/series.js");
    const { default: uPlot } = await import("/static/vendor/uPlot.esm.js");
    let seed = 7;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const cases = [];
    for (let n = 0; n < 50; n++) {
        const tables = [];
        for (let t = 0; t < 1 + Math.floor(random() * 6); t++) {
            // Ascending xs with repeats (a time axis holds a late point's x), a few nulls.
            const xs = [];
            let x = Math.floor(random() * 5);
            for (let i = Math.floor(random() * 30); i > 0; i--) {
                xs.push(x);
                x += Math.floor(random() * 3);
            }
            const ys = () => xs.map(() => (random() < 0.1 ? null : random()));
            tables.push(random() < 0.5 ? [xs, ys()] : [xs, ys(), ys()]);
        }
        const mine = joinAscending(tables);
        const theirs = uPlot.join(tables);
        cases.push(JSON.stringify(mine, (k, v) => (v === undefined ? "undef" : v))
            === JSON.stringify(theirs, (k, v) => (v === undefined ? "undef" : v)));
    }
    return cases;
}"""


def test_the_join_of_ascending_tables_is_uplots_join(page: Page) -> None:
    page.goto("/")
    assert page.evaluate(JOIN) == [True] * 50
