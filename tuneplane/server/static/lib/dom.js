// Building the page from data. User text (run names, config values, alert titles, log lines)
// only ever becomes a Text node or an attribute value: nothing here parses HTML.

import { address } from "./root.js";

const SAFE_URL = /^(\/(?!\/)|\?|#)/;

/**
 * Children of an element (see h): text, nodes, nested lists; null, undefined and false are
 * skipped.
 * @typedef {string | number | Node | null | undefined | false | Child[]} Child
 */

/**
 * h("a", {href: "/x", class: "run"}, "text", child) -> an element.
 * Children may be strings (as text), nodes, arrays, or null/false (skipped).
 * @param {string} tag
 * @param {Record<string, any>} [props]
 * @param {...Child} children
 * @returns {any} the element (any: callers use the properties of its kind, an input's value)
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value == null || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key === "style") Object.assign(el.style, value);
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "href" || key === "src") el.setAttribute(key, safeUrl(value));
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  add(el, children);
  return el;
}

/**
 * Append children (see h) to an element.
 * @template {Element} E
 * @param {E} el
 * @param {...any} children see h
 * @returns {E}
 */
export function add(el, ...children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/**
 * Same-origin links only: the dashboard never links to a URL taken from user data. A path
 * ("/projects/p") gets the server's prefix (lib/root.js).
 */
export function safeUrl(url) {
  const text = String(url);
  if (!SAFE_URL.test(text)) throw new Error(`refusing a link that is not local: ${text}`);
  return address(text);
}

/**
 * Make `el` show what `fresh` (a newly built version of it) shows, touching only what
 * differs: changed text and attributes are set in place, a subtree of another shape is
 * replaced. A live header redrawn on every update then costs the browser little layout and
 * paint. Listeners stay those of `el`. Answers the node now in its place (`fresh` when it
 * replaced `el`): a caller that keeps a reference must take it, or it goes on changing a
 * node that is no longer on the page. An element marked data-keep (the same on both) is left
 * as it is, children and all.
 */
export function morph(el, fresh) {
  // What the page keeps as it is (data-keep): filled once, and changed by the reader only.
  if (el.dataset?.keep && el.dataset.keep === fresh.dataset?.keep) return el;
  if (el.nodeType !== fresh.nodeType || el.nodeName !== fresh.nodeName) {
    el.replaceWith(fresh);
    return fresh;
  }
  if (el.nodeType === Node.TEXT_NODE) {
    if (el.data !== fresh.data) el.data = fresh.data;
    return el;
  }
  if (el.childNodes.length !== fresh.childNodes.length) {
    el.replaceWith(fresh);
    return fresh;
  }
  morphAttributes(el, fresh);
  const children = [...fresh.childNodes];
  [...el.childNodes].forEach((child, i) => morph(child, children[i]));
  return el;
}

function morphAttributes(el, fresh) {
  for (const { name, value } of fresh.attributes) if (el.getAttribute(name) !== value) el.setAttribute(name, value);
  if (el.attributes.length === fresh.attributes.length) return;
  for (const { name } of [...el.attributes]) if (!fresh.hasAttribute(name)) el.removeAttribute(name);
}

/**
 * A message that says what is missing, never a blank page.
 * @param {string} title
 * @param {...(string | Node | null)} detail paragraphs (text) or nodes
 */
export function empty(title, ...detail) {
  return h("div", { class: "empty" }, h("p", { class: "empty-title", text: title }), ...detail.map(
    (d) => (d instanceof Node ? d : h("p", { text: d })),
  ));
}

/**
 * Replace the content of the page's main element.
 * @param {...Child} children
 */
export function mount(...children) {
  const main = document.getElementById("main");
  main.replaceChildren();
  add(main, children);
  return main;
}

/** The breadcrumbs in the top bar: [[label, href|null], ...]. */
export function crumbs(items) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren();
  items.forEach(([label, href], i) => {
    if (i > 0) nav.append(h("span", { class: "sep", text: "/" }));
    nav.append(href ? h("a", { href }, label) : h("span", { class: "here" }, label));
  });
  document.title = items.length ? `${items[items.length - 1][0]} · tuneplane` : "tuneplane";
}

/** Run fn at most once per animation frame, with the latest arguments. */
export function perFrame(fn) {
  let pending = null;
  return (...args) => {
    const first = pending === null;
    pending = args;
    if (first) {
      requestAnimationFrame(() => {
        const latest = pending;
        pending = null;
        fn(...latest);
      });
    }
  };
}

/** Call fn after the calls stop for `ms` milliseconds. */
export function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/**
 * One run of an async fn at a time: a call while it runs asks for one more run after it,
 * so a burst of changes costs at most two fetches and the last one sees the latest state.
 */
export function serial(fn) {
  let running = false;
  let again = false;
  const run = async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      await fn();
    } finally {
      running = false;
      if (again) {
        again = false;
        run();
      }
    }
  };
  return run;
}
