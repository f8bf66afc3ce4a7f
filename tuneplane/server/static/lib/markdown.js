// A small Markdown reader for what models write: paragraphs, headings, lists, quotes, rules,
// fenced code blocks, inline code, emphasis and links. It builds DOM nodes from the text and
// never parses HTML: a tag in the text stays text. Links go to http(s) addresses only, in
// a new tab without a handle on this page (rel="noopener noreferrer"); any other link is
// left as the text it was written as. Lines keep their breaks (CSS white-space), as models
// write them to be read.

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const BULLET = /^ {0,3}[-*+]\s+(.*)$/;
const NUMBERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BLANK = /^\s*$/;
// Inline: a code span, a link, strong (** or __), emphasis (* or _; not inside a word).
const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(([^()\s]+)\)|\*\*(?=\S)([\s\S]*?\S)\*\*|__(?=\S)([\s\S]*?\S)__(?!\w)|\*(?=[^\s*])([\s\S]*?[^\s*])\*|(?<!\w)_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/g;

function el(tag, className, ...children) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  node.append(...children);
  return node;
}

/** An http(s) link, or null for any other address (javascript:, data:, relative…). */
function link(text, href) {
  let url;
  try {
    url = new URL(href);
  } catch {
    return null;
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return null;
  const a = el("a", "md-link", ...inline(text));
  a.setAttribute("href", url.href);
  a.setAttribute("rel", "noopener noreferrer");
  a.setAttribute("target", "_blank");
  return a;
}

/** The inline nodes of one block's text. */
export function inline(text) {
  const nodes = [];
  let at = 0;
  for (const m of text.matchAll(INLINE)) {
    const made = m[1]
      ? el("code", "md-code-inline", m[2].length > 2 && m[2].startsWith(" ") && m[2].endsWith(" ") ? m[2].slice(1, -1) : m[2])
      : m[3]
        ? link(m[3], m[4])
        : m[5] || m[6]
          ? el("strong", null, ...inline(m[5] ?? m[6]))
          : el("em", null, ...inline(m[7] ?? m[8]));
    if (made == null) continue; // a refused link stays the text it is
    if (m.index > at) nodes.push(text.slice(at, m.index));
    nodes.push(made);
    at = m.index + m[0].length;
  }
  if (at < text.length) nodes.push(text.slice(at));
  return nodes;
}

function list(lines, start, ordered) {
  const pattern = ordered ? NUMBERED : BULLET;
  const items = [];
  let i = start;
  while (i < lines.length) {
    const m = pattern.exec(lines[i]);
    if (m) {
      items.push([ordered ? m[2] : m[1]]);
    } else if (!BLANK.test(lines[i]) && /^\s{2,}\S/.test(lines[i]) && items.length) {
      items[items.length - 1].push(lines[i].trim()); // an item's continued line
    } else {
      break;
    }
    i += 1;
  }
  const node = el(ordered ? "ol" : "ul", "md-list", ...items.map((item) => el("li", null, ...inline(item.join("\n")))));
  const first = ordered ? Number(NUMBERED.exec(lines[start])[1]) : 1;
  if (ordered && first !== 1) node.setAttribute("start", String(first));
  return [node, i];
}

function fenced(lines, start) {
  const [, fence, lang] = FENCE.exec(lines[start]);
  const body = [];
  let i = start + 1;
  while (i < lines.length && !(lines[i].trim().startsWith(fence[0].repeat(fence.length)) && lines[i].trim().replace(/[`~]/g, "") === "")) {
    body.push(lines[i]);
    i += 1;
  }
  const code = el("code", null, body.join("\n"));
  if (lang) code.dataset.lang = lang;
  const pre = el("pre", "md-code", code);
  return [pre, Math.min(i + 1, lines.length)];
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || BULLET.test(line) || NUMBERED.test(line) || QUOTE.test(line) || RULE.test(line);
}

/** One block starting at line `i`: [node, next line]. */
function block(lines, i) {
  const line = lines[i];
  if (FENCE.test(line)) return fenced(lines, i);
  if (RULE.test(line)) return [el("hr", "md-rule"), i + 1];
  const heading = HEADING.exec(line);
  if (heading) {
    // Headings in a message sit below the page's own (h1, h2): level 1 is an h3.
    const level = Math.min(heading[1].length + 2, 6);
    return [el(`h${level}`, `md-heading md-h${heading[1].length}`, ...inline(heading[2])), i + 1];
  }
  if (BULLET.test(line)) return list(lines, i, false);
  if (NUMBERED.test(line)) return list(lines, i, true);
  if (QUOTE.test(line)) {
    const quoted = [];
    let j = i;
    for (let m; j < lines.length && (m = QUOTE.exec(lines[j])); j += 1) quoted.push(m[1]);
    return [el("blockquote", "md-quote", ...render(quoted.join("\n"))), j];
  }
  const paragraph = [line];
  let j = i + 1;
  while (j < lines.length && !BLANK.test(lines[j]) && !startsBlock(lines[j])) paragraph.push(lines[j++]);
  return [el("p", "md-paragraph", ...inline(paragraph.join("\n"))), j];
}

/** The nodes of a Markdown text, in order. Nothing in `text` becomes markup but Markdown. */
export function render(text) {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  const nodes = [];
  let i = 0;
  while (i < lines.length) {
    if (BLANK.test(lines[i])) {
      i += 1;
      continue;
    }
    const [node, next] = block(lines, i);
    nodes.push(node);
    i = next;
  }
  return nodes;
}

/** The rendered text in a container (class `markdown`). */
export const markdown = (text, className = "") => el("div", `markdown ${className}`.trim(), ...render(text));
