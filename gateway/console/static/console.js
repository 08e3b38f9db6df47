// tritonish console: shared helpers (API calls with the console token, error
// text from the gateway's catalog, DOM building without innerHTML) and the
// Overview, Deploys and Jobs pages. charts.js and try-it.js add their pages
// to tgw.pages. Tokens live in this page's memory only.
(() => {
  'use strict';
  const state = { consoleToken: null, waiting: [] };

  /** Build an element; children are nodes or text (never parsed as HTML). */
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
    return e;
  }

  /** A catalog error in words: its message, then its code and HTTP status. */
  function errorText(body, status) {
    const e = body && body.error;
    if (e && e.message) return `${e.message} (${e.code}, HTTP ${status})`;
    if (typeof body === 'string' && body) return `HTTP ${status}: ${body.slice(0, 300)}`;
    return `HTTP ${status}`;
  }

  /** fetch + JSON; throws an Error whose message is the catalog text. */
  async function api(path, opts = {}) {
    const headers = new Headers(opts.headers || {});
    if (state.consoleToken && path.startsWith('/console/api/')) headers.set('X-Console-Token', state.consoleToken);
    const res = await fetch(path, { ...opts, headers });
    const text = await res.text();
    let body = text;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      /* not JSON: keep the text */
    }
    if (!res.ok) {
      const err = new Error(errorText(body, res.status));
      Object.assign(err, { status: res.status, code: body && body.error && body.error.code, body });
      if (err.code === 'CONSOLE_TOKEN_MISSING' || err.code === 'CONSOLE_TOKEN_INVALID') askToken(err.message);
      throw err;
    }
    return { res, body };
  }

  function askToken(message) {
    const form = document.getElementById('console-token');
    if (!form || !form.hidden) return;
    form.hidden = false;
    showError(message);
    document.getElementById('console-token-input').focus();
  }

  function showError(message) {
    const p = document.getElementById('page-error');
    if (!p) return;
    p.textContent = message || '';
    p.hidden = !message;
  }

  /** Run fn now and every ms while the page is visible; errors go to the page's alert. */
  function every(ms, fn) {
    const run = async () => {
      if (document.hidden) return;
      try {
        await fn();
        if (!document.getElementById('console-token')?.hidden) return;
        showError('');
      } catch (e) {
        showError(e.message);
      }
    };
    state.waiting.push(run);
    run();
    return setInterval(run, ms);
  }

  const fmtBytes = (n) => {
    if (n === null || n === undefined) return '—';
    const u = ['B', 'KiB', 'MiB', 'GiB'];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) {
      n /= 1024;
      i++;
    }
    return `${n.toFixed(i ? 1 : 0)} ${u[i]}`;
  };
  /** Label each body cell with its column's header (phone width shows rows as labelled cards). */
  function labelCells(table) {
    const heads = [...table.querySelectorAll('thead th')].map((h) => h.textContent);
    for (const tr of table.querySelectorAll('tbody tr')) {
      let i = 0;
      for (const cell of tr.children) {
        if (cell.tagName === 'TD' && i > 0 && heads[i] && !cell.hasAttribute('colspan')) cell.dataset.label = heads[i];
        i += Number(cell.getAttribute('colspan') || 1);
      }
    }
  }
  const fmtTensor = (t) => `${t.name}: ${t.datatype} [${t.shape.join(', ')}]`;
  const stateClass = (s) => (s === 'READY' ? 'ok' : s === 'LOADING' || s === 'UNLOADING' ? 'warn' : 'bad');

  // ---- Overview ----
  function batching(cfg) {
    if (!cfg) return '—';
    if (cfg.ensembleSteps) return `ensemble: ${cfg.ensembleSteps.join(' → ')}`;
    const parts = [cfg.maxBatchSize > 0 ? `max batch ${cfg.maxBatchSize}` : 'no batch dimension'];
    if (cfg.dynamicBatching) {
      const pref = cfg.dynamicBatching.preferred.length ? `preferred ${cfg.dynamicBatching.preferred.join(', ')}` : 'no preferred sizes';
      parts.push(`dynamic: ${pref}, delay ${cfg.dynamicBatching.maxQueueDelayUs} µs`);
    } else if (cfg.maxBatchSize > 0) parts.push('dynamic batching off');
    return parts.join('; ');
  }

  async function overview() {
    const { body } = await api('/console/api/overview');
    const e = body.engine;
    document.getElementById('engine').replaceChildren(
      el('dt', { text: 'State' }),
      el(
        'dd',
        {},
        el('span', { class: e.ready ? 'ok' : 'bad', text: e.ready ? 'Ready' : 'Not ready' }),
        e.error ? el('span', { class: 'reason', text: e.error }) : null,
      ),
      el('dt', { text: 'Address (gRPC)' }),
      el('dd', {}, el('code', { text: e.address })),
      ...(e.loadsError ? [el('dt', { text: 'Cold loads' }), el('dd', {}, el('span', { class: 'reason', text: e.loadsError }))] : []),
      el('dt', { text: 'Staging (shm)' }),
      el(
        'dd',
        {},
        body.staging
          ? el('span', {
              class: body.staging.shmExhausted ? 'bad' : body.staging.staging ? 'ok' : 'reason',
              text: body.staging.shmExhausted ? 'Shared memory exhausted' : body.staging.staging ? 'On' : 'Off',
            })
          : el('span', { class: 'reason', text: 'off (shm disabled)' }),
        body.staging?.reason ? el('span', { class: 'reason', text: body.staging.reason }) : null,
      ),
      el('dt', { text: 'Function bundle' }),
      el('dd', {}, el('code', { text: body.bundleVersion || '—' })),
      el('dt', { text: 'Models' }),
      el('dd', { text: `${body.models.filter((m) => m.state === 'READY').length} ready of ${body.models.length}` }),
    );
    document.querySelector('#models tbody').replaceChildren(
      ...body.models.map((m) =>
        el(
          'tr',
          { 'data-model': m.name },
          el('th', { scope: 'row' }, el('code', { text: m.name })),
          el('td', { text: m.version || '—' }),
          el(
            'td',
            {},
            el('span', { class: stateClass(m.state), text: m.state }),
            m.reason ? el('span', { class: 'reason', text: m.reason }) : null,
          ),
          el('td', { text: m.config ? m.config.platform : '—' }),
          el('td', {
            text: m.config && m.config.instances.length ? m.config.instances.map((g) => `${g.count} × ${g.kind}`).join(', ') : '—',
          }),
          el('td', { text: batching(m.config) }),
          el('td', { text: fmtBytes(m.memoryBytes) }),
          el('td', { 'data-label': 'Cold loads', text: m.coldLoads === null ? '—' : String(m.coldLoads) }),
          el('td', { 'data-label': 'Last cold load', text: m.lastColdLoadMs === null || !m.coldLoads ? '—' : `${m.lastColdLoadMs} ms` }),
          el('td', { 'data-label': 'Evictions', text: m.evictions === null ? '—' : String(m.evictions) }),
        ),
      ),
    );
    const rows = body.functions.map((f) =>
      el(
        'tr',
        { 'data-function': f.name },
        el(
          'th',
          { scope: 'row' },
          el('a', { href: `/console/try#${encodeURIComponent(f.name)}` }, el('code', { text: f.name })),
          f.description ? el('span', { class: 'reason', text: f.description }) : null,
        ),
        el(
          'td',
          {},
          el('code', { text: f.target.model }),
          f.target.version ? ` v${f.target.version}` : '',
          el('span', { class: 'reason', text: f.implicit ? 'ensemble served as is' : f.target.platform }),
        ),
        el('td', {}, ...f.inputs.map((t) => el('div', {}, el('code', { text: fmtTensor(t) })))),
        el('td', {}, ...f.outputs.map((t) => el('div', {}, el('code', { text: fmtTensor(t) })))),
        el('td', { text: f.auth ? `API key (${f.auth.apiKeyEnv.join(', ')})` : 'none' }),
      ),
    );
    const down = body.unavailable.map((u) =>
      el(
        'tr',
        { 'data-function': u.name },
        el('th', { scope: 'row' }, el('code', { text: u.name })),
        el('td', { colspan: 4 }, el('span', { class: 'bad', text: 'Unavailable' }), el('span', { class: 'reason', text: u.reason })),
      ),
    );
    document.querySelector('#functions tbody').replaceChildren(...rows, ...down);
    labelCells(document.getElementById('models'));
    labelCells(document.getElementById('functions'));
  }

  // ---- Deploys ----
  async function deploys() {
    const { body } = await api('/console/api/deploys');
    const active = document.getElementById('deploy-active');
    if (!body.enabled) {
      active.replaceChildren(el('dt', { text: 'Deploys' }), el('dd', { text: 'not enabled on this gateway' }));
      return;
    }
    const a = body.active;
    active.replaceChildren(
      el('dt', { text: 'Version' }),
      el('dd', {}, el('code', { id: 'active-version', text: a ? a.version : '—' })),
      el('dt', { text: 'Functions' }),
      el(
        'dd',
        {},
        a && a.functions.length
          ? el(
              'ul',
              { class: 'plain' },
              ...a.functions.map((f) => el('li', {}, el('code', { text: f.name }), ' → ', el('code', { text: f.model }))),
            )
          : 'none',
      ),
    );
    document
      .getElementById('deploy-history')
      .replaceChildren(
        ...body.history.map((v, i) =>
          el(
            'li',
            { class: i === 0 ? 'active' : null },
            el('code', { text: v }),
            i === 0 ? el('span', { class: 'tag', text: 'active' }) : i === 1 ? el('span', { class: 'tag', text: 'rollback target' }) : null,
          ),
        ),
      );
  }

  function wireRollback() {
    const form = document.getElementById('rollback');
    const status = document.getElementById('rollback-status');
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const token = document.getElementById('admin-token').value.trim();
      const button = form.querySelector('button');
      button.disabled = true;
      status.className = '';
      status.textContent = 'Rolling back…';
      try {
        const { body } = await api('/admin/functions/rollback', { method: 'POST', headers: { Authorization: `Bearer ${token}` } });
        status.className = 'ok';
        status.textContent = `Rolled back: version ${body.version} is active.`;
        await deploys();
      } catch (e) {
        status.className = 'error';
        status.textContent = e.message;
      } finally {
        button.disabled = false;
      }
    });
  }

  // ---- Jobs ----
  async function jobs() {
    const { body } = await api('/console/api/jobs');
    const tbody = document.querySelector('#jobs tbody');
    if (!body.jobs.length) {
      tbody.replaceChildren(
        el(
          'tr',
          {},
          el('td', {
            colspan: 7,
            text: body.kind ? `No recent jobs (${body.kind} queue).` : 'Async jobs are not enabled on this gateway.',
          }),
        ),
      );
      return;
    }
    tbody.replaceChildren(
      ...body.jobs.map((j) =>
        el(
          'tr',
          { 'data-job': j.id },
          el('th', { scope: 'row' }, el('code', { text: j.id })),
          el('td', {}, el('code', { text: j.function })),
          el(
            'td',
            {},
            el('span', {
              class:
                j.status === 'dead' || j.status === 'failed' ? 'bad' : j.status === 'delivered' || j.status === 'succeeded' ? 'ok' : 'warn',
              text: j.status,
            }),
          ),
          el('td', { text: j.httpStatus ?? '—' }),
          el('td', { text: j.callback ? `${j.callback.attempts} of ${j.callback.maxAttempts}` : 'no callback' }),
          el('td', { text: j.lastError || '—' }),
          el('td', {}, el('time', { datetime: j.updatedAt, text: new Date(j.updatedAt).toLocaleTimeString() })),
        ),
      ),
    );
    labelCells(document.getElementById('jobs'));
  }

  const pages = {
    overview: () => every(5000, overview),
    deploys: () => {
      wireRollback();
      every(5000, deploys);
    },
    jobs: () => every(3000, jobs),
  };

  /** Run fn again once a console token has been entered (a one-shot load that met CONSOLE_TOKEN_*). */
  const afterToken = (fn) => state.waiting.push(fn);

  window.tgw = { api, el, errorText, showError, every, afterToken, fmtBytes, fmtTensor, labelCells, pages };

  document.addEventListener('DOMContentLoaded', () => {
    document.getElementById('console-token').addEventListener('submit', (ev) => {
      ev.preventDefault();
      state.consoleToken = document.getElementById('console-token-input').value.trim();
      ev.target.hidden = true;
      showError('');
      for (const run of state.waiting) run();
    });
    const start = pages[document.body.dataset.page];
    if (start) start();
  });
})();
