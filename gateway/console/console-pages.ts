// Server-rendered page shells of the console (hono/html escapes every
// interpolation). Each page is static markup with labelled regions; the
// client script (static/console.js and friends) fills them from
// /console/api/* and refreshes them every few seconds. No data is rendered
// here, so the shells need no token even when GATEWAY_CONSOLE_TOKEN is set;
// without one, each page says that it answers this machine only.
import { html, raw } from 'hono/html';
import type { HtmlEscapedString } from 'hono/utils/html';
import { assetUrl, type Asset } from './console-assets.ts';

export const PAGES = [
  { path: '/console', id: 'overview', title: 'Overview' },
  { path: '/console/live', id: 'live', title: 'Live' },
  { path: '/console/try', id: 'try', title: 'Try it' },
  { path: '/console/deploys', id: 'deploys', title: 'Deploys' },
  { path: '/console/jobs', id: 'jobs', title: 'Jobs' },
] as const;

export type PageId = (typeof PAGES)[number]['id'];

type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

/** How the console is guarded, for the note at the top of each page. */
export interface PageAccess {
  /** No GATEWAY_CONSOLE_TOKEN: the console answers loopback clients only. */
  localOnly: boolean;
}

const localOnlyNote = html`<p id="console-access" class="note" role="note">No console token is set (GATEWAY_CONSOLE_TOKEN), so this console answers requests from this machine only (loopback). Set a token to open it to other hosts; the API then needs it.</p>`;

function layout(assets: Map<string, Asset>, page: PageId, body: Html, scripts: string[], access: PageAccess): Html {
  const title = PAGES.find((p) => p.id === page)!.title;
  const nav = PAGES.map((p) => html`<li><a href="${p.path}"${p.id === page ? raw(' aria-current="page"') : ''}>${p.title}</a></li>`);
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · tritonish console</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assetUrl(assets, 'console.css')}">
${page === 'live' ? html`<link rel="stylesheet" href="${assetUrl(assets, 'uplot.css')}">` : ''}
</head>
<body data-page="${page}">
<a class="skip" href="#main">Skip to content</a>
<header>
  <span class="brand">tritonish console</span>
  <nav aria-label="Console pages"><ul>${nav}</ul></nav>
</header>
<form id="console-token" class="panel" hidden>
  <label for="console-token-input">This gateway needs a console token (GATEWAY_CONSOLE_TOKEN) to show its state</label>
  <input id="console-token-input" type="password" autocomplete="off" required>
  <button type="submit">Show</button>
  <p class="note">Kept in this page's memory only; reloading the page forgets it.</p>
</form>
<main id="main" tabindex="-1">
<h1>${title}</h1>
${access.localOnly ? localOnlyNote : ''}
<p id="page-error" class="error" role="alert" hidden></p>
${body}
</main>
${scripts.map((s) => html`<script src="${assetUrl(assets, s)}" defer></script>`)}
</body>
</html>`;
}

const overview = html`
<section aria-labelledby="engine-h">
  <h2 id="engine-h">Engine</h2>
  <dl id="engine" class="facts" aria-live="polite"><dt>State</dt><dd>loading…</dd></dl>
</section>
<section aria-labelledby="models-h">
  <h2 id="models-h">Models</h2>
  <div class="scroll"><table id="models" class="cards">
    <caption class="sr-only">Every model in the engine's repository</caption>
    <thead><tr><th scope="col">Model</th><th scope="col">Version</th><th scope="col">State</th><th scope="col">Platform</th><th scope="col">Instances</th><th scope="col">Batching</th><th scope="col">Memory</th><th scope="col">Cold loads</th><th scope="col">Last cold load</th><th scope="col">Evictions</th></tr></thead>
    <tbody></tbody>
  </table></div>
</section>
<section aria-labelledby="functions-h">
  <h2 id="functions-h">Functions</h2>
  <div class="scroll"><table id="functions" class="cards">
    <caption class="sr-only">Functions served under /fn</caption>
    <thead><tr><th scope="col">Function</th><th scope="col">Target</th><th scope="col">Inputs</th><th scope="col">Outputs</th><th scope="col">Auth</th></tr></thead>
    <tbody></tbody>
  </table></div>
</section>`;

const live = html`
<p class="note">Rates and means over each sampling interval, from the engine's statistics and the gateway's metrics; new points arrive every few seconds. The table under each chart names its lines and gives their latest values.</p>
<div id="charts" class="charts">
${[
  ['rps', 'Requests per second, per model'],
  ['latency', 'Latency per function, p50 and p95 (ms)'],
  ['queue', 'Mean queue time per model (ms)'],
  ['batch', 'Mean batch size per model'],
  ['bytes', 'Bytes per second through the gateway, staged (shm) vs inline'],
].map(
  ([id, title]) => html`<figure class="chart panel" id="chart-${id}" data-points="0" aria-labelledby="chart-${id}-t">
  <figcaption id="chart-${id}-t">${title}</figcaption>
  <div class="plot" aria-hidden="true"></div>
  <table class="latest"><caption class="sr-only">Latest values: ${title}</caption><tbody></tbody></table>
</figure>`,
)}
</div>`;

const tryIt = html`
<form id="try-pick" class="panel">
  <label for="try-fn">Function</label>
  <select id="try-fn" name="fn"></select>
</form>
<form id="try-form" class="panel" aria-describedby="try-help">
  <p id="try-help" class="note">Image and bytes inputs take a file; tensor inputs take JSON (a flat or nested array of numbers).</p>
  <div id="try-inputs"></div>
  <button type="submit">Call</button>
</form>
<section id="try-result" aria-labelledby="try-result-h" aria-live="polite" hidden>
  <h2 id="try-result-h">Result</h2>
  <dl id="try-meta" class="facts"></dl>
  <div id="try-overlay" class="overlay" hidden></div>
  <div id="try-outputs"></div>
</section>`;

const deploys = html`
<section aria-labelledby="active-h">
  <h2 id="active-h">Active bundle</h2>
  <dl id="deploy-active" class="facts"><dt>Version</dt><dd>loading…</dd></dl>
</section>
<section aria-labelledby="history-h">
  <h2 id="history-h">History</h2>
  <p class="note">The activation stack, newest first: a deploy pushes a version, a rollback takes the active one off and re-activates the one below it.</p>
  <ol id="deploy-history" class="history"></ol>
</section>
<form id="rollback" class="panel">
  <label for="admin-token">Admin token (GATEWAY_ADMIN_TOKEN)</label>
  <input id="admin-token" type="password" autocomplete="off" required>
  <button type="submit">Roll back</button>
  <p class="note">Kept in this page's memory only and sent as Authorization: Bearer with the rollback.</p>
  <p id="rollback-status" role="status"></p>
</form>
<section aria-labelledby="rollouts-h">
  <h2 id="rollouts-h">Rollouts</h2>
  <p class="note">Canary and shadow rollouts (POST /admin/rollouts): the canary's share now, each step's calls, errors and p95 on both sides, and the gates' decision.</p>
  <div id="rollouts"><p>loading…</p></div>
</section>
<section aria-labelledby="plans-h">
  <h2 id="plans-h">Usage plans</h2>
  <p class="note">Plans per API key (by key id: 16 hex digits of the key's SHA-256) and the calls counted this period.</p>
  <div class="scroll"><table id="plans" class="cards">
    <caption class="sr-only">Usage plans</caption>
    <thead><tr><th scope="col">Key id</th><th scope="col">Plan</th><th scope="col">Rate</th><th scope="col">Quota</th><th scope="col">Used</th></tr></thead>
    <tbody></tbody>
  </table></div>
</section>`;

const jobs = html`
<p class="note">Recent asynchronous calls (Prefer: respond-async or X-Callback-Url), newest first: ids and states only, never results. Reading a job (GET /jobs/&lt;id&gt;) of a function with an API key needs the key its call was made with.</p>
<div class="scroll"><table id="jobs" class="cards">
  <caption class="sr-only">Recent async jobs</caption>
  <thead><tr><th scope="col">Job</th><th scope="col">Function</th><th scope="col">Status</th><th scope="col">HTTP</th><th scope="col">Callback attempts</th><th scope="col">Last error</th><th scope="col">Updated</th></tr></thead>
  <tbody></tbody>
</table></div>`;

/** The HTML of one console page. */
export function renderPage(assets: Map<string, Asset>, page: PageId, access: PageAccess = { localOnly: false }): Html {
  switch (page) {
    case 'overview':
      return layout(assets, page, overview, ['console.js'], access);
    case 'live':
      return layout(assets, page, live, ['uplot.js', 'console.js', 'charts.js'], access);
    case 'try':
      return layout(assets, page, tryIt, ['console.js', 'try-it.js'], access);
    case 'deploys':
      return layout(assets, page, deploys, ['console.js', 'rollouts.js'], access);
    case 'jobs':
      return layout(assets, page, jobs, ['console.js'], access);
  }
}
