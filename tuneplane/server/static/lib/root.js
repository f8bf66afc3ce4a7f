// Where the dashboard is served: at a host's root, or under the prefix a reverse proxy
// publishes it at (`tuneplane serve --root-path /prefix`), which the shell names in
// <meta name="tuneplane-root">. The dashboard writes its own addresses without the prefix
// ("/projects/p", "/api/v1/…"); these two functions are the one place that adds it (for
// links, requests, streams and navigation) and takes it off (for the page's own path).

const meta = document.querySelector('meta[name="tuneplane-root"]');
export const ROOT = meta?.getAttribute("content") ?? "";

/** "/projects/p" -> "/prefix/projects/p"; a query or fragment alone ("?x=1", "#a") as is. */
export const address = (path) => (String(path).startsWith("/") ? `${ROOT}${path}` : String(path));

/** The page's own path without the prefix: "/prefix/projects/p" -> "/projects/p". */
export function here() {
  const path = location.pathname;
  if (!ROOT || !path.startsWith(ROOT)) return path;
  return path.slice(ROOT.length) || "/";
}
