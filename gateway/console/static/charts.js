// Live page: polls /console/api/series every interval and draws five uPlot
// charts. A chart is rebuilt only when its set of series changes (a model or
// function appears); otherwise setData() adds the new points in place. Each
// figure's data-points attribute and its "latest values" table follow the
// data, so screen readers (and the browser tests) see what the chart shows.
(() => {
  'use strict';
  const { api, el, every, pages } = window.tgw;
  const PALETTE = ['#0b5cad', '#c2410c', '#15803d', '#7e22ce', '#b91c1c', '#0e7490', '#a16207', '#4338ca', '#be185d', '#334155'];
  const plots = {};
  let windowS = 180;

  const num = (v, digits = 2) => (v === null || v === undefined ? '—' : Number(v).toFixed(digits));
  const bytesAxis = (u, ticks) =>
    ticks.map((v) => (v >= 1048576 ? `${(v / 1048576).toFixed(1)}M` : v >= 1024 ? `${(v / 1024).toFixed(0)}K` : String(v)));
  const rate = (v) =>
    v === null || v === undefined
      ? '—'
      : v >= 1048576
        ? `${(v / 1048576).toFixed(2)} MiB/s`
        : v >= 1024
          ? `${(v / 1024).toFixed(1)} KiB/s`
          : `${v.toFixed(0)} B/s`;

  /** Series of one chart: [{label, values(point) → number|null}], from the names seen in the window. */
  function seriesFor(id, points) {
    const names = (key) => [...new Set(points.flatMap((p) => Object.keys(p[key])))].sort();
    switch (id) {
      case 'rps':
        return names('models').map((m) => ({ label: m, get: (p) => (p.models[m] ? p.models[m].rps : null), fmt: (v) => num(v) }));
      case 'latency':
        return names('functions').flatMap((f) => [
          { label: `${f} p50`, get: (p) => (p.functions[f] ? p.functions[f].p50Ms : null), fmt: (v) => num(v) },
          { label: `${f} p95`, get: (p) => (p.functions[f] ? p.functions[f].p95Ms : null), fmt: (v) => num(v), dash: [6, 4] },
        ]);
      case 'queue':
        return names('models').map((m) => ({ label: m, get: (p) => (p.models[m] ? p.models[m].queueMs : null), fmt: (v) => num(v, 3) }));
      case 'batch':
        return names('models').map((m) => ({ label: m, get: (p) => (p.models[m] ? p.models[m].batch : null), fmt: (v) => num(v) }));
      case 'bytes':
        return [
          { label: 'staged (shm)', get: (p) => p.bytes.stagedPerS, fmt: rate },
          { label: 'inline (gRPC)', get: (p) => p.bytes.inlinePerS, fmt: rate },
        ];
    }
    return [];
  }

  function sizeOf(fig) {
    const w = Math.max(260, fig.querySelector('.plot').clientWidth || fig.clientWidth - 32);
    return { width: w, height: w < 420 ? 200 : 240 };
  }

  function draw(fig, id, points) {
    const series = seriesFor(id, points);
    const data = [points.map((p) => p.t), ...series.map((s) => points.map((p) => s.get(p)))];
    const key = series.map((s) => s.label).join('|');
    let entry = plots[id];
    if (!entry || entry.key !== key) {
      if (entry) entry.plot.destroy();
      const opts = {
        ...sizeOf(fig),
        // A fixed window ending at the newest point, so the time axis reads like a monitor's.
        scales: {
          x: { time: true, range: (u, min, max) => [max - windowS, max] },
          y: { range: (u, min, max) => [0, max > 0 ? max * 1.1 : 1] },
        },
        series: [
          { label: 'time' },
          ...series.map((s, i) => ({ label: s.label, stroke: PALETTE[i % PALETTE.length], width: 2, dash: s.dash, spanGaps: false })),
        ],
        axes: [{}, { size: 60, values: id === 'bytes' ? bytesAxis : undefined }],
        legend: { show: false },
      };
      entry = plots[id] = { key, plot: new uPlot(opts, data, fig.querySelector('.plot')) };
    } else {
      entry.plot.setData(data);
    }
    fig.dataset.points = String(points.length);
    const rows = series.map((s, i) => {
      let last = null;
      for (let k = points.length - 1; k >= 0 && last === null; k--) last = s.get(points[k]);
      const swatch = el('span', { class: s.dash ? 'swatch dashed' : 'swatch', 'aria-hidden': 'true' });
      swatch.style.background = PALETTE[i % PALETTE.length];
      swatch.style.borderColor = PALETTE[i % PALETTE.length];
      return el('tr', {}, el('th', { scope: 'row' }, swatch, s.label), el('td', { 'data-series': s.label, text: s.fmt(last) }));
    });
    fig
      .querySelector('.latest tbody')
      .replaceChildren(...(rows.length ? rows : [el('tr', {}, el('td', { text: 'No data yet: call a function to see it here.' }))]));
  }

  let lastPoints = [];
  async function refresh() {
    const { body } = await api('/console/api/series');
    lastPoints = body.points;
    windowS = Math.max(30, ((body.intervalMs || 2000) * (body.keep || 90)) / 1000);
    for (const fig of document.querySelectorAll('figure.chart')) draw(fig, fig.id.replace('chart-', ''), lastPoints);
    return body.intervalMs;
  }

  pages.live = () => {
    // Poll at the sampler's pace (the first answer says it); never faster than 1 s.
    refresh().then(
      (ms) => every(Math.max(1000, ms || 2000), refresh),
      (e) => {
        window.tgw.showError(e.message);
        every(2000, refresh);
      },
    );
    let t;
    window.addEventListener('resize', () => {
      clearTimeout(t);
      t = setTimeout(() => {
        for (const fig of document.querySelectorAll('figure.chart')) plots[fig.id.replace('chart-', '')]?.plot.setSize(sizeOf(fig));
      }, 150);
    });
  };
})();
