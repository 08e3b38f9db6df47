// How many GPUs onnxruntime can use here: the NVIDIA GPUs the driver lists,
// but only when onnxruntime-node was installed with its CUDA execution
// provider (docs/deploy/gpu-hosts.md); otherwise 0, and KIND_GPU models are
// refused at load with a message saying so.
import fs from 'node:fs';
import * as ort from 'onnxruntime-node';

let cached: number | undefined;

/** GPUs usable by the onnxruntime backend (0 without a GPU or without the CUDA provider). */
export function usableGpuCount(): number {
  if (cached !== undefined) return cached;
  const cuda = ort.listSupportedBackends().some((b) => b.name === 'cuda');
  let visible = 0;
  try {
    visible = fs.readdirSync('/proc/driver/nvidia/gpus').length;
  } catch {
    // no NVIDIA driver here: no GPUs
    visible = 0;
  }
  cached = cuda ? visible : 0;
  return cached;
}
