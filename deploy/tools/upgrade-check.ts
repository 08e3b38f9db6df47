// "A second render changes nothing": the chart rendered as `helm install`
// renders it (no cluster: the engine admin key is generated), the objects
// it made put in the API stand-in as a real install leaves them, then
// rendered again as `helm upgrade` renders it (lookup sees them). Every
// object must come out the same, the generated key and the pods' checksum
// of it included: an upgrade neither rotates the key nor rolls the pods.
import { isDeepStrictEqual } from 'node:util';
import { firstDifference } from './chart-checks.ts';
import { helmTemplate, type HelmOptions } from './helm-render.ts';
import type { HelmMajor } from './helm-tools.ts';
import { asStored, helmTemplateAgainst, KubeApiStandIn } from './kube-api-stand-in.ts';

/** Problems (empty when the upgrade render equals the install render), for Helm `major` and the values of `o`. */
export async function upgradeDifferences(major: HelmMajor, chartDir: string, o: HelmOptions = {}): Promise<string[]> {
  const release = o.release ?? 'tritonish';
  const installed = helmTemplate(major, chartDir, { ...o, release }).map((r) => r.object);
  const api = await KubeApiStandIn.start(installed.map((x) => asStored(x, release)));
  try {
    const upgraded = (await helmTemplateAgainst(major, chartDir, api, { ...o, release })).map((r) => r.object);
    if (isDeepStrictEqual(installed, upgraded)) return [];
    return [`helm ${major}: the upgrade render differs from the install render: ${firstDifference(installed, upgraded)}`];
  } finally {
    await api.close();
  }
}
