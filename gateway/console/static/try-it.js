// Try-it page: a form per function built from its input spec (a file for
// UINT8/BYTES inputs, a JSON editor for tensors), sent to POST /fn/<name> as
// multipart exactly as any client would. Shows each output's shape, length
// and first values (for a rows reply, each list's length and first rows),
// the call's time and payload-transfer headers, and, when the result holds
// `lines` with `box`es (an OCR result), draws them over the uploaded image.
// A streaming function (its reply is text/event-stream) is shown as it
// arrives: each response in a list, the OCR boxes drawn line by line.
(() => {
  'use strict';
  const { api, el, errorText, fmtTensor, pages } = window.tgw;
  let functions = [];

  const isFile = (t) => t.datatype === 'UINT8' || t.datatype === 'BYTES';
  const count = (shape) => shape.reduce((n, d) => n * (d < 0 ? 1 : d), 1);

  /** A zero tensor of the spec's shape (free dims as 1), nested like the shape; [] when huge. */
  function example(t) {
    const shape = t.shape.map((d) => (d < 0 ? 1 : d));
    if (count(shape) > 4096) return [];
    const build = (i) => (i === shape.length ? 0 : Array.from({ length: shape[i] }, () => build(i + 1)));
    return shape.length ? build(0) : 0;
  }

  function buildForm(f) {
    const box = document.getElementById('try-inputs');
    const fields = f.inputs.map((t) => {
      const id = `in-${t.name}`;
      const hint = el('span', { class: 'hint', id: `${id}-hint`, text: `${t.datatype} [${t.shape.join(', ')}] → ${t.tensor}` });
      if (isFile(t)) {
        return el(
          'div',
          { class: 'field' },
          el('label', { for: id, text: `${t.name} (file)` }),
          el('input', {
            id,
            name: t.name,
            type: 'file',
            required: true,
            'aria-describedby': `${id}-hint`,
            accept: t.datatype === 'UINT8' ? 'image/*,application/octet-stream' : null,
          }),
          hint,
        );
      }
      const ta = el('textarea', { id, name: t.name, required: true, spellcheck: 'false', 'aria-describedby': `${id}-hint` });
      ta.value = JSON.stringify(example(t));
      return el('div', { class: 'field' }, el('label', { for: id, text: `${t.name} (JSON)` }), ta, hint);
    });
    const key = f.auth
      ? [
          el(
            'div',
            { class: 'field' },
            el('label', { for: 'try-key', text: 'API key' }),
            el('input', { id: 'try-key', type: 'password', autocomplete: 'off', 'aria-describedby': 'try-key-hint' }),
            el('span', {
              class: 'hint',
              id: 'try-key-hint',
              text: `sent as X-API-Key; accepted keys come from ${f.auth.apiKeyEnv.join(', ')}`,
            }),
          ),
        ]
      : [];
    box.replaceChildren(
      el('p', { class: 'note' }, f.description || `Calls ${f.target.model}.`),
      el('p', { class: 'note' }, `Outputs: ${f.outputs.map(fmtTensor).join('; ')}`),
      ...fields,
      ...key,
    );
  }

  /** Every {lines: [{box}]} list in a result (JSON strings inside BYTES outputs included). */
  function findLines(v, out = [], depth = 0) {
    if (depth > 6 || v === null || v === undefined) return out;
    if (typeof v === 'string') {
      if (v.length < 1e6 && /^\s*[[{]/.test(v)) {
        try {
          findLines(JSON.parse(v), out, depth + 1);
        } catch {
          /* plain text */
        }
      }
      return out;
    }
    if (Array.isArray(v)) {
      for (const x of v.slice(0, 1000)) findLines(x, out, depth + 1);
      return out;
    }
    if (typeof v === 'object') {
      if (Array.isArray(v.lines) && v.lines.some((l) => l && Array.isArray(l.box)))
        out.push(...v.lines.filter((l) => l && Array.isArray(l.box)));
      else for (const x of Object.values(v)) findLines(x, out, depth + 1);
    }
    return out;
  }

  /** A box as polygon points: [[x,y],...] as is; [x0,y0,x1,y1] as a rectangle. */
  function polygon(box) {
    if (Array.isArray(box[0])) return box.map((p) => `${p[0]},${p[1]}`).join(' ');
    const [x0, y0, x1, y1] = box;
    return `${x0},${y0} ${x1},${y0} ${x1},${y1} ${x0},${y1}`;
  }

  function drawLines(file, lines) {
    const wrap = document.getElementById('try-overlay');
    if (!file || !lines.length) {
      wrap.hidden = true;
      wrap.replaceChildren();
      return;
    }
    const img = el('img', { alt: `uploaded image with ${lines.length} recognised line(s) outlined` });
    img.onload = () => {
      const NS = 'http://www.w3.org/2000/svg';
      const svg = document.createElementNS(NS, 'svg');
      svg.setAttribute('viewBox', `0 0 ${img.naturalWidth} ${img.naturalHeight}`);
      svg.setAttribute('aria-hidden', 'true');
      for (const l of lines) {
        const p = document.createElementNS(NS, 'polygon');
        p.setAttribute('points', polygon(l.box));
        p.setAttribute('fill', 'rgba(11,92,173,0.12)');
        p.setAttribute('stroke', '#d9480f');
        p.setAttribute('stroke-width', String(Math.max(2, img.naturalWidth / 300)));
        const title = document.createElementNS(NS, 'title');
        title.textContent = l.text ?? '';
        p.append(title);
        svg.append(p);
      }
      frame.append(svg);
    };
    img.src = URL.createObjectURL(file);
    const texts = el('ol', { class: 'lines', 'aria-label': 'Recognised lines' }, ...lines.map((l) => el('li', { text: l.text ?? '' })));
    const frame = el('div', { class: 'frame' }, img);
    wrap.replaceChildren(frame, texts);
    wrap.hidden = false;
  }

  /** A rows reply ({key: [{field: value}]}, e.g. OCR lines): each list's length and first rows. */
  function showRows(body) {
    return Object.entries(body || {})
      .filter(([, v]) => Array.isArray(v))
      .map(([name, rows]) =>
        el(
          'section',
          { class: 'panel', 'data-output': name },
          el('h3', {}, el('code', { text: name })),
          el(
            'dl',
            { class: 'facts' },
            el('dt', { text: 'Rows' }),
            el('dd', { 'data-length': rows.length, text: String(rows.length) }),
            el('dt', { text: `First ${Math.min(rows.length, 3)} rows` }),
            el('dd', { class: 'values', text: JSON.stringify(rows.slice(0, 3)) }),
          ),
        ),
      );
  }

  function showOutputs(body) {
    if (body && !body.outputs) return showRows(body);
    const outs = (body && body.outputs) || {};
    return Object.entries(outs).map(([name, o]) => {
      const data = Array.isArray(o.data) ? o.data : [o.data];
      const first = data.slice(0, 8).map((x) => (typeof x === 'number' ? Number(x.toPrecision(6)) : x));
      return el(
        'section',
        { class: 'panel', 'data-output': name },
        el('h3', {}, el('code', { text: name })),
        el(
          'dl',
          { class: 'facts' },
          el('dt', { text: 'Type and shape' }),
          el('dd', { text: `${o.datatype} [${(o.shape || []).join(', ')}]` }),
          el('dt', { text: 'Length' }),
          el('dd', { 'data-length': data.length, text: String(data.length) }),
          el('dt', { text: `First ${first.length} values` }),
          el('dd', { class: 'values', text: JSON.stringify(first) }),
        ),
      );
    });
  }

  async function submit(ev) {
    ev.preventDefault();
    const f = functions.find((x) => x.name === document.getElementById('try-fn').value);
    if (!f) return;
    const form = new FormData();
    let image = null;
    for (const t of f.inputs) {
      const input = document.getElementById(`in-${t.name}`);
      if (isFile(t)) {
        const file = input.files[0];
        form.append(t.name, file, file.name);
        if (!image && /^image\//.test(file.type)) image = file;
      } else form.append(t.name, input.value);
    }
    const headers = {};
    const key = document.getElementById('try-key');
    if (key && key.value) headers['X-API-Key'] = key.value;
    const button = ev.target.querySelector('button');
    const section = document.getElementById('try-result');
    const meta = document.getElementById('try-meta');
    const outputs = document.getElementById('try-outputs');
    button.disabled = true;
    const t0 = performance.now();
    let res, body, error;
    try {
      // A streaming function answers events when asked; any other answers JSON as before.
      headers.Accept = 'text/event-stream, application/json;q=0.9';
      const path = `/fn/${encodeURIComponent(f.name)}`;
      const raw = await fetch(path, { method: 'POST', body: form, headers });
      if (raw.ok && /^text\/event-stream/.test(raw.headers.get('content-type') || '')) {
        button.disabled = false;
        return showStream(raw, image, t0);
      }
      const text = await raw.text();
      res = raw;
      body = text;
      try {
        body = text ? JSON.parse(text) : null;
      } catch {
        /* not JSON: keep the text */
      }
      if (!raw.ok) throw Object.assign(new Error(errorText(body, raw.status)), { status: raw.status, body });
    } catch (e) {
      error = e;
      body = e.body;
    } finally {
      button.disabled = false;
    }
    const ms = performance.now() - t0;
    const status = res ? res.status : error.status;
    const rows = [
      el('dt', { text: 'Status' }),
      el('dd', {}, el('span', { class: error ? 'bad' : 'ok', id: 'try-status', text: String(status) })),
      el('dt', { text: 'Time (browser)' }),
      el('dd', { text: `${ms.toFixed(1)} ms` }),
    ];
    const hdrs = res ? res.headers : null;
    for (const h of ['x-payload-transfer', 'server-timing', 'x-request-id']) {
      const v = hdrs ? hdrs.get(h) : null;
      if (v) rows.push(el('dt', {}, el('code', { text: h })), el('dd', { 'data-header': h, text: v }));
    }
    meta.replaceChildren(...rows);
    outputs.replaceChildren(
      ...(error ? [el('p', { class: 'error', role: 'alert', id: 'try-error', text: error.message })] : showOutputs(body)),
    );
    drawLines(image, error ? [] : findLines(body));
    section.hidden = false;
  }

  /** Each `data:` block of SSE text as {event, data}; returns the unparsed rest. */
  function sseBlocks(text, onEvent) {
    let i;
    while ((i = text.indexOf('\n\n')) >= 0) {
      const lines = text.slice(0, i).split('\n');
      text = text.slice(i + 2);
      const event = lines[0].startsWith('event: ') ? lines.shift().slice(7) : 'message';
      const data = lines
        .filter((l) => l.startsWith('data: '))
        .map((l) => l.slice(6))
        .join('\n');
      try {
        onEvent(event, JSON.parse(data));
      } catch {
        onEvent(event, data);
      }
    }
    return text;
  }

  /**
   * A streaming function's reply, shown as it arrives: one list item per
   * response (its time since the call), error events in red, the OCR overlay
   * redrawn with every line so far, and the end event's count.
   */
  async function showStream(res, image, t0) {
    const meta = document.getElementById('try-meta');
    const outputs = document.getElementById('try-outputs');
    const list = el('ol', { id: 'try-stream', class: 'lines', 'aria-label': 'Responses as they arrive' });
    const state = el('p', { id: 'try-stream-state', class: 'note', role: 'status', text: 'streaming…' });
    meta.replaceChildren(
      el('dt', { text: 'Status' }),
      el('dd', {}, el('span', { class: 'ok', id: 'try-status', text: String(res.status) })),
      el('dt', { text: 'Reply' }),
      el('dd', { text: 'server-sent events, one per response' }),
    );
    outputs.replaceChildren(state, list);
    document.getElementById('try-result').hidden = false;
    const lines = [];
    const onEvent = (event, data) => {
      const at = performance.now() - t0;
      if (event === 'end') {
        state.textContent = `end: ${data.responses} response(s) in ${at.toFixed(0)} ms`;
        return;
      }
      if (event === 'error') {
        list.append(el('li', { class: 'error', 'data-at': at.toFixed(0), text: (data.error && data.error.message) || String(data) }));
        return;
      }
      const got = findLines(data);
      lines.push(...got);
      const text = got.length ? got.map((l) => l.text).join(' | ') : JSON.stringify(data).slice(0, 300);
      list.append(el('li', { 'data-at': at.toFixed(0), text }));
      if (got.length) drawLines(image, lines);
    };
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest = sseBlocks(rest + dec.decode(value, { stream: true }), onEvent);
    }
    if (!/^end/.test(state.textContent)) state.textContent = 'the stream closed before its end event';
  }

  pages.try = async function start() {
    const select = document.getElementById('try-fn');
    try {
      ({
        body: { functions },
      } = await api('/console/api/overview'));
    } catch (e) {
      window.tgw.showError(e.message);
      if (/CONSOLE_TOKEN/.test(e.code || '')) window.tgw.afterToken(start);
      return;
    }
    select.replaceChildren(...functions.map((f) => el('option', { value: f.name, text: f.name })));
    const wanted = decodeURIComponent(location.hash.slice(1));
    if (functions.some((f) => f.name === wanted)) select.value = wanted;
    const pick = () => {
      const f = functions.find((x) => x.name === select.value);
      if (f) {
        buildForm(f);
        history.replaceState(null, '', `#${encodeURIComponent(f.name)}`);
      }
    };
    select.addEventListener('change', pick);
    window.addEventListener('hashchange', () => {
      const name = decodeURIComponent(location.hash.slice(1));
      if (name !== select.value && functions.some((f) => f.name === name)) {
        select.value = name;
        pick();
      }
    });
    document.getElementById('try-pick').addEventListener('submit', (e) => e.preventDefault());
    document.getElementById('try-form').addEventListener('submit', submit);
    pick();
  };
})();
