// The dashboard: one shell for every address; this module picks the page.

import { debug } from "./lib/debug.js";
import { empty, mount } from "./lib/dom.js";
import { here } from "./lib/root.js";
import { themeToggle } from "./lib/theme.js";
import { launchFormPage } from "./launch/form.js";
import { matchedLaunchPage } from "./launch/matched_launch.js";
import { recipesPage } from "./launch/recipes.js";
import { accessPage } from "./pages/access.js";
import { alertsPage } from "./pages/alerts.js";
import { accountPage, sharedPage, showSession, signInPage, welcomePage } from "./pages/account.js";
import { matchedPage } from "./pages/matched.js";
import { projectsPage } from "./pages/projects.js";
import { reportsPage } from "./pages/reports.js";
import { comparePage, runPage } from "./pages/run.js";
import { runsPage } from "./pages/runs.js";
import { trajectoryPage } from "./pages/trajectory.js";

/** @type {Array<[RegExp, (...parts: string[]) => Promise<void>]>} */
const ROUTES = [
  [/^\/$/, () => projectsPage()],
  [/^\/projects\/([^/]+)\/?$/, (project) => runsPage(project)],
  [/^\/projects\/([^/]+)\/access\/?$/, (project) => accessPage(project)],
  [/^\/projects\/([^/]+)\/alerts\/?$/, (project) => alertsPage(project)],
  [/^\/projects\/([^/]+)\/launch\/?$/, (project) => recipesPage(project)],
  [/^\/projects\/([^/]+)\/launch\/recipes\/([^/]+)\/?$/, (project, recipe) => launchFormPage(project, recipe)],
  [/^\/projects\/([^/]+)\/launch\/matched\/?$/, (project) => matchedLaunchPage(project)],
  [/^\/projects\/([^/]+)\/runs\/([^/]+)\/?$/, (project, run) => runPage(project, run)],
  [/^\/projects\/([^/]+)\/runs\/([^/]+)\/trajectory\/?$/, (project, run) => trajectoryPage(project, run)],
  [/^\/compare\/?$/, () => comparePage()],
  [/^\/reports\/?$/, () => reportsPage()],
  [/^\/matched\/?$/, () => matchedPage()],
  [/^\/sign-in\/?$/, () => signInPage()],
  [/^\/welcome\/?$/, () => welcomePage()],
  [/^\/shared\/?$/, () => sharedPage()],
  [/^\/account\/?$/, () => accountPage()],
];

async function route() {
  for (const [pattern, page] of ROUTES) {
    const match = here().match(pattern);
    if (match) {
      await page(...match.slice(1).map(decodeURIComponent));
      return;
    }
  }
  mount(empty("No such page.", "Start from the list of projects."));
}

document.querySelector(".top-links")?.append(themeToggle());
showSession();
route()
  .catch((error) => {
    console.error(error);
    mount(empty("Could not load this page.", String(error.message ?? error)));
  })
  .finally(() => {
    debug.loaded = true;
  });
