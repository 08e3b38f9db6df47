// Node/V8 flags the engine process is started with (`npm start`,
// `npm run engine`, the image's `tritonserver`, the bench). Kept in one list;
// package.json and deploy/docker/tritonserver spell it out, and
// test/unit/node-flags.test.ts keeps them in step.
//
// --initial-old-space-size=128: V8 sizes the old generation's allocation
// limit from the live heap after each full GC (the engine's is ~16 MB, so a
// limit of ~40 MB). Once the young generation has grown under load (after a
// burst of inline encoder requests, say), that leaves less room than the
// young generation's capacity and V8 starts incremental marking on almost
// every allocation step, a full mark-compact every few large requests. A
// configured initial size keeps the limit from shrinking to the live heap; it
// reserves nothing. The measurements (full mark-compacts, engine CPU per
// request and resident memory with and without it) are in docs/benchmarks.md,
// "Request-path CPU per inference".
export const ENGINE_NODE_FLAGS = ['--initial-old-space-size=128'];
