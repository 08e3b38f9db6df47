// The built-in backends, registered by name.
import { registerBackend } from '../api/backend.ts';
import { onnxruntimeBackend } from './onnxruntime/onnxruntime-backend.ts';
import { jsBackend } from './js/js-backend.ts';
import { ensembleBackend } from './ensemble/ensemble-backend.ts';
import { pythonBackend } from './python/python-backend.ts';

let done = false;
/** Register onnxruntime, js and ensemble (idempotent). */
export function registerBuiltinBackends(): void {
  if (done) return;
  done = true;
  registerBackend(onnxruntimeBackend);
  registerBackend(jsBackend);
  registerBackend(ensembleBackend);
  registerBackend(pythonBackend);
}
