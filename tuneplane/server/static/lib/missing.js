// What a page shows when what its address names is not there. A private project looks
// exactly like a missing one to whoever may not see it (its reads answer 404), so a caller
// who is not signed in is offered to sign in.

import { runs, session } from "./api.js";
import { empty, h, mount } from "./dom.js";
import { here } from "./root.js";

/**
 * Beside a "no such project" message: a sign-in link for a caller who is not signed in,
 * else null.
 * @returns {Promise<HTMLElement | null>}
 */
export async function signInHint() {
  try {
    if ((await session()).signed_in) return null;
  } catch {
    return null;
  }
  const next = encodeURIComponent(here() + location.search);
  return h(
    "p",
    {},
    "A private project shows only to its members: ",
    h("a", { href: `/sign-in?next=${next}`, text: "sign in" }),
    " to see yours.",
  );
}

/**
 * The page of a project that does not exist (or not for this caller), with a link to the
 * list of projects (`allHref`: the projects' list this page belongs to).
 * @param {string} project
 * @param {string} [allHref]
 */
export async function noProjectPage(project, allHref = "/") {
  mount(empty(`No project named “${project}”.`, h("a", { href: allHref, text: "All projects" }), await signInHint()));
}

/**
 * A project's runs (GET …/projects/{project}/runs), or null once the page of a missing
 * project is shown (the read answered 404; any other failure is thrown).
 * @param {string} project
 * @param {string} [allHref] see noProjectPage
 */
export async function runsOrMissing(project, allHref = "/") {
  try {
    return await runs(project);
  } catch (error) {
    if (error.status !== 404) throw error;
    await noProjectPage(project, allHref);
    return null;
  }
}
