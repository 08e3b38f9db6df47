// The Helm template subset renderer (deploy/tools/helm-template.ts) and the
// values merge of render-chart.ts: each construct the chart uses, Helm's
// whitespace trimming and emptiness rules, and the errors for anything
// outside the subset.
import { describe, expect, it } from 'vitest';
import { renderTemplate, truthy, type RenderContext } from '../../deploy/tools/helm-template.ts';
import { mergeValues } from '../../deploy/tools/render-chart.ts';

const ctx = (Values: Record<string, unknown>): RenderContext => ({
  Values,
  Release: { Name: 'rel', Namespace: 'ns', Service: 'Helm' },
  Chart: { Name: 'chart', Version: '1.2.3', AppVersion: '0.9' },
});
const r = (src: string, values: Record<string, unknown> = {}) => renderTemplate(src, ctx(values), 't.yaml');

describe('helm template subset', () => {
  it('prints values, release and chart fields', () => {
    expect(r('a: {{ .Values.a.b }} {{ .Release.Name }} {{ .Release.Namespace }} {{ .Chart.Name }} {{ .Chart.Version }}', { a: { b: 7 } })).toBe('a: 7 rel ns chart 1.2.3');
  });

  it('quote, default (function and pipe forms), b64enc', () => {
    expect(r('{{ .Values.x | quote }}', { x: 8080 })).toBe('"8080"');
    expect(r('{{ .Values.x | quote }}', { x: 'say "hi"' })).toBe('"say \\"hi\\""');
    expect(r('{{ .Values.x | default "d" }}|{{ default "d" .Values.y }}|{{ .Values.z | default "d" }}', { x: '', y: 'set', z: 0 })).toBe('d|set|d');
    expect(r('{{ .Values.missing | default 5 }}')).toBe('5');
    expect(r('{{ .Values.s | b64enc }}', { s: 'tok' })).toBe(Buffer.from('tok').toString('base64'));
  });

  it('toYaml with nindent / indent renders nested values at the given depth', () => {
    const out = r('spec:\n  res:\n    {{- toYaml .Values.res | nindent 4 }}\nx: y', { res: { limits: { memory: '1Gi' }, list: ['a', 'b'] } });
    expect(out).toBe('spec:\n  res:\n    limits:\n      memory: 1Gi\n    list:\n      - a\n      - b\nx: y');
    expect(r('{{ .Values.m | toYaml | indent 2 }}', { m: { k: 'v' } })).toBe('  k: v');
    expect(r('{{ toYaml .Values.e }}', { e: {} })).toBe('{}');
  });

  it('if / else if / else / end with Helm emptiness and trim markers', () => {
    const t = 'a:\n{{- if .Values.x }}\n  x\n{{- else if .Values.y }}\n  y\n{{- else }}\n  none\n{{- end }}\nb';
    expect(r(t, { x: true })).toBe('a:\n  x\nb');
    expect(r(t, { x: false, y: ['1'] })).toBe('a:\n  y\nb');
    expect(r(t, { x: 0, y: [] })).toBe('a:\n  none\nb');
    expect(r('{{ if not .Values.x }}off{{ end }}', {})).toBe('off');
    expect(r('{{ if and .Values.a .Values.b }}both{{ else }}not{{ end }}', { a: 1, b: '' })).toBe('not');
    expect(r('{{ if or .Values.a .Values.b }}one{{ end }}', { a: 0, b: 'x' })).toBe('one');
    expect(r('{{ if eq .Values.k "v" }}eq{{ end }}{{ if ne .Values.k "v" }}ne{{ end }}', { k: 'v' })).toBe('eq');
    expect(r('x  {{- /* gone */ -}}  y')).toBe('xy');
    expect(r('[{{ .Values.a -}}   ]', { a: 1 })).toBe('[1]');
  });

  it('emptiness follows Helm: false, 0, "", nil, empty list and map', () => {
    for (const v of [false, 0, '', null, undefined, [], {}]) expect(truthy(v)).toBe(false);
    for (const v of [true, 1, 'a', [0], { a: 0 }]) expect(truthy(v)).toBe(true);
  });

  it('refuses what is outside the subset, naming file and line', () => {
    expect(() => r('ok\n{{ .Values.typo.path }}', { other: 1 })).toThrow(/t\.yaml:2: '\.Values\.typo\.path' has no value/);
    expect(() => r('{{ range .Values.l }}x{{ end }}')).toThrow(/t\.yaml:1: 'range' is outside the supported template subset/);
    expect(() => r('{{ include "x" . }}')).toThrow(/'include' is outside/);
    expect(() => r('{{ .Values.a | upper }}', { a: 'x' })).toThrow(/function 'upper' is outside/);
    expect(() => r('{{ if .Values.a }}x', { a: 1 })).toThrow(/'if' is never closed/);
    expect(() => r('x{{ end }}')).toThrow(/'end' without an open 'if'/);
    expect(() => r('{{ .Values.a')).toThrow(/unclosed '\{\{'/);
    expect(() => r('{{ required "set image.tag" .Values.image.tag }}', { image: {} })).toThrow(/t\.yaml:1: set image.tag/);
  });

  it('merges values as Helm does: maps merge, lists and scalars replace, null deletes', () => {
    const base = { a: { b: 1, c: [1, 2], d: 'x' }, e: 1 };
    expect(mergeValues(base, { a: { b: 2, c: [3] }, e: null, f: true })).toEqual({ a: { b: 2, c: [3], d: 'x' }, f: true });
    expect(base.a.b).toBe(1); // inputs untouched
  });
});
