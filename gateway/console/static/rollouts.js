// Deploys page, second half: rollouts in progress and finished (share, each
// step's numbers on both sides, the decision and why) and the usage plans
// with their usage. Polls /console/api/rollouts and /console/api/plans.
(() => {
  'use strict';
  const { api, el, every, labelCells, pages } = window.tgw;

  const side = (n) => (n && n.calls ? `${n.calls} calls, ${n.errors} errors, p95 ${n.p95Ms} ms` : 'no calls yet');

  function rolloutCard(r) {
    const steps = r.steps.map((s, i) =>
      el(
        'tr',
        { 'data-step': i },
        el('th', { scope: 'row', text: `${s.share} %` }),
        el('td', { class: 'stable', text: side(s.stable) }),
        el('td', { class: 'canary', text: side(s.canary) }),
        el(
          'td',
          {},
          el('span', {
            class: s.decision === 'rolled_back' || s.decision === 'aborted' ? 'bad' : s.decision ? 'ok' : 'warn',
            text: s.decision || 'running',
          }),
        ),
        el('td', { class: 'reason', text: s.reason || '—' }),
      ),
    );
    const share = r.state === 'running' && r.spec.steps ? `${r.spec.steps[r.step].share} %` : '—';
    const table = el(
      'table',
      { class: 'cards' },
      el('caption', { class: 'sr-only', text: `Steps of rollout ${r.id}` }),
      el('thead', {}, el('tr', {}, ...['Share', 'Stable', 'Canary', 'Decision', 'Why'].map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, ...steps),
    );
    const target = r.spec.next ? `${r.spec.next.target.model}${r.spec.next.target.version ? ` v${r.spec.next.target.version}` : ''}` : '—';
    const facts = el(
      'dl',
      { class: 'facts' },
      el('dt', { text: 'Function' }),
      el('dd', {}, el('code', { text: r.function })),
      el('dt', { text: 'Next target' }),
      el('dd', {}, el('code', { text: target })),
      el('dt', { text: 'State' }),
      el('dd', { class: 'state', text: r.state }),
      el('dt', { text: 'Canary share' }),
      el('dd', { class: 'share', text: share }),
      ...(r.shadow
        ? [
            el('dt', { text: 'Shadow' }),
            el('dd', {
              class: 'shadow',
              text: `${r.spec.shadow.target.model}: ${side(r.shadow)}, mean max difference ${r.shadow.maxAbsDiff}, ${r.shadow.mismatches} mismatches`,
            }),
          ]
        : []),
    );
    const card = el(
      'article',
      { class: 'panel rollout', 'data-rollout': r.id, 'data-state': r.state },
      el('h3', {}, el('code', { text: r.id })),
      facts,
      el('div', { class: 'scroll' }, table),
    );
    labelCells(table);
    return card;
  }

  async function rollouts() {
    const { body } = await api('/console/api/rollouts');
    const all = [...body.active, ...body.done];
    document.getElementById('rollouts').replaceChildren(...(all.length ? all.map(rolloutCard) : [el('p', { text: 'No rollouts yet.' })]));
  }

  async function plans() {
    const { body } = await api('/console/api/plans');
    const tbody = document.querySelector('#plans tbody');
    if (!body.plans.length) {
      tbody.replaceChildren(el('tr', {}, el('td', { colspan: 5, text: `No usage plans (${body.kind} store).` })));
      return;
    }
    tbody.replaceChildren(
      ...body.plans.map((p) =>
        el(
          'tr',
          { 'data-key': p.keyId },
          el('th', { scope: 'row' }, el('code', { text: p.keyId })),
          el('td', { text: p.plan.name }),
          el('td', { text: `${p.plan.rps}/s, burst ${p.plan.burst}` }),
          el('td', { text: p.plan.quota ? `${p.plan.quota.limit} a ${p.plan.quota.period}` : 'none' }),
          el('td', { class: 'used', text: `${p.usage.used} (${p.usage.period})` }),
        ),
      ),
    );
    labelCells(document.getElementById('plans'));
  }

  const before = pages.deploys;
  pages.deploys = () => {
    before();
    every(1000, rollouts);
    every(3000, plans);
  };
})();
