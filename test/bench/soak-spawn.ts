// A soak child: `node --import tsx --import soak-probe.ts <script>` with the
// probe writing its memory figures to `probeFile` (see soak-probe.mjs).
import path from 'node:path';
import { ROOT, spawnTs, type Child } from './processes.ts';

export function spawnProbed(name: string, script: string, args: string[], probeFile: string, env: Record<string, string> = {}): Child {
  const probe = path.join(ROOT, 'test/bench/soak-probe.mjs');
  return spawnTs(name, script, args, {
    ...env,
    SOAK_PROBE_FILE: probeFile,
    SOAK_PROBE_MS: '5000',
    NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${probe}`.trim(),
  });
}
