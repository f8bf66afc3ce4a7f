// The chart controls: x axis (the step, time, or another metric such as train/epoch),
// smoothing, log scale, groups drawn as one with their band, which metrics, and the zoom
// state. Every change becomes a new view,
// written to the address by the page.

import { debounce, h } from "../lib/dom.js";
import { fmtDuration, fmtNum, fmtStep, fmtTime } from "../lib/format.js";
import { BANDS, X_AXES, X_LABELS, metricAxis, xMetric } from "../lib/url.js";
import { groupMetrics } from "../charts/order.js";

export function chartControls(view, { onChange, onResetZoom }) {
  let current = { ...view };
  const now = () => current;
  const change = (patch) => {
    current = { ...current, ...patch };
    onChange(current);
  };
  const axis = axisControl(now, change);
  const picker = metricPicker(now, change);
  const groups = groupControl(now, change);

  const log = h("input", {
    type: "checkbox",
    name: "log",
    checked: current.log,
    onchange: (event) => change({ log: event.target.checked }),
  });

  const filter = h("input", {
    type: "search",
    class: "filter",
    name: "metric-filter",
    placeholder: "filter metrics",
    value: current.filter,
    "aria-label": "filter metrics",
  });
  filter.addEventListener("input", debounce(() => change({ filter: filter.value }), 150));

  const zoomText = h("span");
  const zoom = h(
    "span",
    { class: "zoom", hidden: true },
    zoomText,
    h("button", { type: "button", text: "reset zoom", onclick: () => onResetZoom() }),
  );

  const el = h(
    "div",
    { class: "controls" },
    axis.el,
    smoothControl(now, change),
    h("label", { class: "control" }, log, h("span", { text: "log scale" })),
    groups,
    filter,
    picker.el,
    zoom,
  );

  return {
    el,
    /** Shown when some run of the page has a group. */
    setGroups(any) {
      groups.hidden = !any;
    },
    setMetrics(names) {
      picker.setMetrics(names);
      axis.setMetrics(groupMetrics(names).flatMap((group) => group.metrics));
    },
    setZoom(range) {
      zoom.hidden = !range;
      if (!range) return;
      const fmt = xMetric(current.x)
        ? fmtNum
        : current.x === "step"
          ? fmtStep
          : current.x === "time"
            ? fmtTime
            : fmtDuration;
      zoomText.textContent = `zoomed to ${fmt(range[0])} – ${fmt(range[1])} (double-click a chart to reset)`;
    },
  };
}

/**
 * The x axis: step, wall time or relative time, or (the select beside them) a metric of the
 * runs. now(): the current view; change(patch) makes a new one.
 */
function axisControl(now, change) {
  const radios = h(
    "span",
    { class: "segmented", role: "radiogroup", "aria-label": "x axis" },
    X_AXES.map((x) =>
      h(
        "label",
        {},
        h("input", {
          type: "radio",
          name: "x-axis",
          value: x,
          checked: now().x === x,
          onchange: () => {
            overMetric.value = "";
            overMetric.classList.remove("chosen");
            change({ x });
          },
        }),
        h("span", { text: X_LABELS[x] }),
      ),
    ),
  );
  // Its options are the runs' metrics (see setMetrics).
  const overMetric = h("select", {
    name: "x-metric",
    "aria-label": "x axis metric",
    onchange: () => {
      const name = overMetric.value;
      for (const radio of radios.querySelectorAll("input")) radio.checked = !name && radio.value === "step";
      overMetric.classList.toggle("chosen", Boolean(name));
      change({ x: name ? metricAxis(name) : "step" });
    },
  });
  return {
    el: h("span", { class: "control" }, h("span", { class: "control-label", text: "x" }), radios, overMetric),
    setMetrics(names) {
      const over = xMetric(now().x);
      const listed = over && !names.includes(over) ? [over, ...names] : names;
      overMetric.replaceChildren(
        h("option", { value: "", text: "metric…" }),
        ...listed.map((name) => h("option", { value: name, text: name, selected: name === over })),
      );
      overMetric.value = over ?? "";
      overMetric.classList.toggle("chosen", Boolean(over));
    },
  };
}

/** Each group as one mean line with a band (min–max, or ± one standard deviation). */
function groupControl(now, change) {
  const band = h(
    "select",
    {
      name: "band",
      "aria-label": "group band",
      disabled: !now().groups,
      onchange: () => change({ band: band.value }),
    },
    BANDS.map((value) =>
      h("option", { value, text: value === "std" ? "± std band" : "min–max band", selected: now().band === value }),
    ),
  );
  const toggle = h("input", {
    type: "checkbox",
    name: "groups",
    checked: now().groups,
    onchange: (event) => {
      band.disabled = !event.target.checked;
      change({ groups: event.target.checked });
    },
  });
  return h(
    "span",
    { class: "control group-control", hidden: true },
    h("label", {}, toggle, h("span", { text: "groups as mean" })),
    band,
  );
}

function smoothControl(now, change) {
  const smoothValue = h("output", { class: "smooth-value", text: now().smooth.toFixed(2) });
  const smooth = h("input", {
    type: "range",
    min: 0,
    max: 0.99,
    step: 0.01,
    value: now().smooth,
    "aria-label": "smoothing",
    name: "smooth",
  });
  const applySmooth = debounce(() => change({ smooth: Number(smooth.value) }), 60);
  smooth.addEventListener("input", () => {
    smoothValue.textContent = Number(smooth.value).toFixed(2);
    applySmooth();
  });
  return h("label", { class: "control" }, h("span", { class: "control-label", text: "smoothing" }), smooth, smoothValue);
}

/** Which metrics are charted: every one, or those ticked, by group. */
function metricPicker(now, change) {
  const pickerLabel = h("span");
  const pickerList = h("div", { class: "picker-list" });
  let allNames = [];
  const render = () => {
    const { metrics: wanted } = now();
    const chosen = new Set(wanted.length ? wanted : allNames);
    pickerLabel.textContent = wanted.length
      ? `metrics: ${wanted.length} of ${allNames.length}`
      : `metrics: all ${allNames.length}`;
    const box = (name) =>
      h("input", {
        type: "checkbox",
        checked: chosen.has(name),
        onchange: (event) => {
          if (event.target.checked) chosen.add(name);
          else chosen.delete(name);
          const metrics = allNames.filter((n) => chosen.has(n));
          change({ metrics: metrics.length === allNames.length ? [] : metrics });
          render();
        },
      });
    pickerList.replaceChildren(
      ...groupMetrics(allNames).map(({ prefix, metrics }) =>
        h(
          "fieldset",
          {},
          h("legend", { text: prefix ? `${prefix}/` : "top level" }),
          metrics.map((name) => h("label", {}, box(name), h("span", { text: name }))),
        ),
      ),
    );
  };
  const showAll = () => {
    change({ metrics: [] });
    render();
  };
  const el = h(
    "details",
    { class: "picker" },
    h("summary", {}, pickerLabel),
    h("div", { class: "picker-actions" }, h("button", { type: "button", text: "show all", onclick: showAll })),
    pickerList,
  );
  return {
    el,
    setMetrics(names) {
      allNames = names;
      render();
    },
  };
}
