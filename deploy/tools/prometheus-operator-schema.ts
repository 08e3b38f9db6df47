// The structural schema of the Prometheus operator's ServiceMonitor
// (monitoring.coreos.com/v1), written from the operator's documented API
// (ServiceMonitorSpec, Endpoint, NamespaceSelector; its Duration pattern).
// Like kserve-schema.ts it holds the fields the operator documents, not the
// whole CRD: TLS, auth and proxy settings are typed as open objects (their
// inner fields are not checked); anything not listed fails checkSchema().
import type { Schema } from './k8s-validate.ts';

const str: Schema = { type: 'string' };
const bool: Schema = { type: 'boolean' };
const count: Schema = { type: 'integer', minimum: 0 };
const open: Schema = { type: 'object', additionalProperties: true };
const strMap: Schema = { type: 'object', additionalProperties: str };
const list = (items: Schema): Schema => ({ type: 'array', items });

/** The operator's Duration: `30s`, `1m30s`, `0`, units y w d h m s ms in that order. */
export const PROMETHEUS_DURATION = '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$';
const duration: Schema = { type: 'string', pattern: PROMETHEUS_DURATION };

const relabelConfig: Schema = {
  type: 'object',
  properties: {
    sourceLabels: list(str),
    separator: str,
    targetLabel: str,
    regex: str,
    modulus: count,
    replacement: str,
    action: {
      type: 'string',
      enum: [
        'replace',
        'Replace',
        'keep',
        'Keep',
        'drop',
        'Drop',
        'hashmod',
        'HashMod',
        'labelmap',
        'LabelMap',
        'labeldrop',
        'LabelDrop',
        'labelkeep',
        'LabelKeep',
        'lowercase',
        'Lowercase',
        'uppercase',
        'Uppercase',
        'keepequal',
        'KeepEqual',
        'dropequal',
        'DropEqual',
      ],
    },
  },
};

const endpoint: Schema = {
  type: 'object',
  properties: {
    port: str,
    targetPort: { type: 'int-or-string' },
    path: str,
    scheme: { type: 'string', enum: ['http', 'https', 'HTTP', 'HTTPS'] },
    params: { type: 'object', additionalProperties: list(str) },
    interval: duration,
    scrapeTimeout: duration,
    tlsConfig: open,
    bearerTokenFile: str,
    bearerTokenSecret: { k8s: 'v1/SecretKeySelector' },
    authorization: open,
    honorLabels: bool,
    honorTimestamps: bool,
    trackTimestampsStaleness: bool,
    basicAuth: open,
    oauth2: open,
    metricRelabelings: list(relabelConfig),
    relabelings: list(relabelConfig),
    proxyUrl: str,
    noProxy: str,
    proxyFromEnvironment: bool,
    proxyConnectHeader: open,
    followRedirects: bool,
    enableHttp2: bool,
    filterRunning: bool,
  },
};

const serviceMonitorSpec: Schema = {
  type: 'object',
  required: ['selector'],
  properties: {
    jobLabel: str,
    targetLabels: list(str),
    podTargetLabels: list(str),
    endpoints: list(endpoint),
    selector: { k8s: 'meta/v1/LabelSelector' },
    selectorMechanism: { type: 'string', enum: ['RelabelConfig', 'RoleSelector'] },
    namespaceSelector: { type: 'object', properties: { any: bool, matchNames: list(str) } },
    sampleLimit: count,
    scrapeProtocols: list({
      type: 'string',
      enum: ['PrometheusProto', 'OpenMetricsText0.0.1', 'OpenMetricsText1.0.0', 'PrometheusText0.0.4', 'PrometheusText1.0.0'],
    }),
    targetLimit: count,
    labelLimit: count,
    labelNameLengthLimit: count,
    labelValueLengthLimit: count,
    keepDroppedTargets: count,
    attachMetadata: { type: 'object', properties: { node: bool } },
    scrapeClass: str,
    bodySizeLimit: str,
  },
};

/** Schemas by `apiVersion kind`. */
export const PROMETHEUS_OPERATOR_SCHEMAS: Record<string, Schema> = {
  'monitoring.coreos.com/v1 ServiceMonitor': {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      apiVersion: { type: 'string', enum: ['monitoring.coreos.com/v1'] },
      kind: { type: 'string', enum: ['ServiceMonitor'] },
      metadata: { type: 'object', required: ['name'], properties: { name: str, namespace: str, labels: strMap, annotations: strMap } },
      spec: serviceMonitorSpec,
    },
  },
};
