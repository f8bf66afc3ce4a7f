"""Page helpers in a real browser: morph() updates a live element in place; a chart's arrays
follow live points."""

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
    const kept = morph(row, make("lossy", "sent 12, dropped 3", "step 2"));
    const same = kept === row && row.cells[0] === cell && row.cells[1].firstChild === text;
    const shape = h("tr", {}, h("td", { text: "one cell" }));
    // Another shape: replaced, not patched; the node answered is the one now on the page.
    const answered = morph(row, shape) === shape;
    return {
        same,
        answered,
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
        "answered": True,
        "className": "health lossy",
        "title": "sent 12, dropped 3",
        "text": "lossy / step 2",
        "replaced": True,
    }
    assert page.evaluate(DROPPED) is False


LIVE_PARTS = """async () => {
    const { Chart } = await import("/static/charts/chart.js");
    const { Series, pointBucket } = await import("/static/charts/series.js");
    let seed = 11;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const views = [
        { x: "step", smooth: 0, log: false },
        { x: "time", smooth: 0.6, log: true },
        { x: "relative", smooth: 0.9, log: false },
        { x: "step", smooth: 0.6, log: true },
    ];
    const shown = (p) => JSON.stringify([p.xs, p.lines, p.band, p.smoothed, p.y]);
    const handlers = { onSelect() {}, onReset() {} };
    const problems = [];
    let reused = 0;
    for (const view of views) {
        // Buckets of 10 steps, values around zero (gaps on a log scale), one late time.
        const buckets = [];
        for (let b = 0; b < 40; b++) {
            const values = Array.from({ length: 10 }, () => random() * 4 - 1);
            buckets.push({
                step_min: b * 10, step_max: b * 10 + 9, count: 10,
                min: Math.min(...values), max: Math.max(...values),
                mean: values.reduce((a, v) => a + v) / 10, last: values[9],
                time: 1000 + b * 10 - (b === 20 ? 30 : 0),
            });
        }
        const series = Series.from({ buckets });
        const chart = new Chart("m", handlers);
        const first = chart.part({ series, t0: 990 }, view);
        for (let k = 1; k <= 60; k++) {
            // One point at a time: most fold into the last bucket, some start a new one.
            const step = 399 + k;
            const point = pointBucket([step, random() * 4 - 1, 1000 + step]);
            series.append({ buckets: [point] }, { merge: true });
            const live = shown(chart.part({ series, t0: 990 }, view));
            if (chart.part({ series, t0: 990 }, view) === first) reused += 1;
            const fresh = shown(new Chart("m", handlers).part({ series, t0: 990 }, view));
            if (live !== fresh) problems.push({ view, k, live, fresh });
        }
    }
    return { problems: problems.slice(0, 2), reused };
}"""


def test_a_live_point_updates_a_charts_arrays_as_a_fresh_load_would(page: Page) -> None:
    page.goto("/")
    result = page.evaluate(LIVE_PARTS)
    assert result["problems"] == []
    # The arrays were brought up to date in place, not made again.
    assert result["reused"] == 4 * 60


GROWN_TABLE = """async () => {
    const { update } = await import("/static/charts/paint.js");
    let seed = 5;
    const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    // A table as live points change it: its last row changes, or rows are added after it.
    const expected = [[], [], []];
    const held = new Map();
    const problems = [];
    let length = 0;
    for (let k = 0; k < 200; k++) {
        const from = Math.max(0, length - 1);
        if (!length || random() < 0.6) length += random() < 0.2 ? 4 : 1;
        for (const column of expected) {
            for (let i = from; i < length; i++) column[i] = random() < 0.1 ? NaN : random();
        }
        const columns = expected.map((column) => Float64Array.from(column.slice(from, length)));
        const updates = [{ table: 7, length, from, columns }];
        update(held, { updates, bands: [], lines: [{ table: 7 }] });
        const table = held.get(7);
        const same = table.length === length && expected.every((column, c) =>
            column.every((v, i) => Object.is(v, table.columns[c][i])));
        if (!same) problems.push(k);
    }
    update(held, { updates: [], bands: [], lines: [] });
    return { problems, length, forgotten: !held.has(7) };
}"""


def test_the_drawn_tables_take_only_the_changed_rows_and_grow(page: Page) -> None:
    page.goto("/")
    result = page.evaluate(GROWN_TABLE)
    assert result["problems"] == []
    assert result["length"] > 100
    # A table no frame draws any more is forgotten.
    assert result["forgotten"] is True
