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
// every allocation step: measured with 10 MiB inline gRPC requests after
// such a burst, 166–285 full mark-compacts per ~300 requests and 12.5–25 ms
// of engine CPU per request, against 14–17 and 8.5–8.6 ms with this flag
// (/proc CPU, --trace-gc, interleaved). A configured initial size keeps the
// limit from shrinking to the live heap; it reserves nothing (resident
// memory after the same loads: 400–430 MB either way).
export const ENGINE_NODE_FLAGS = ['--initial-old-space-size=128'];
