#!/usr/bin/env bash
# Refresh the copy of onnxruntime-web that the page runs the models with (vit_demo/page/assets/vendor/onnxruntime-web/).
# Developers only: the files are committed, so a user never needs npm. Usage: scripts/vendor_onnxruntime_web.sh [VERSION]
# It takes two builds, each an ES module with its loader bundled in and its SIMD + threads .wasm (run on one thread
# where the page is not cross-origin isolated): the WebAssembly one, which every tab runs with, and the WebGPU one
# (its .wasm twice the size), which the page loads only for a large model where the browser offers a GPU (model.js).
set -euo pipefail
version="${1:-1.30.0}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$repo/vit_demo/page/assets/vendor/onnxruntime-web"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "onnxruntime-web@$version" >/dev/null && tar xzf "onnxruntime-web-$version.tgz")
rm -rf "$out" && mkdir -p "$out"
dist="$work/package/dist"
cp "$dist/ort.wasm.bundle.min.mjs" "$dist/ort.webgpu.bundle.min.mjs" "$out/"
(cd "$out" && sha256sum ort.wasm.bundle.min.mjs ort.webgpu.bundle.min.mjs > SHA256SUMS)
# The WebAssembly binaries gzipped (14.2 MB -> 3.7 MB; WebGPU's 26.8 MB -> 6.6 MB): the page unpacks them itself
# (DecompressionStream), so they travel small whether or not the server compresses (Gradio's file route and
# python -m http.server do not).
for wasm in ort-wasm-simd-threaded.wasm ort-wasm-simd-threaded.asyncify.wasm; do
  gzip -9 -n -c "$dist/$wasm" > "$out/$wasm.gz"
  (cd "$dist" && sha256sum "$wasm") >> "$out/SHA256SUMS"
done
tarball_sha="$(sha256sum "$work/onnxruntime-web-$version.tgz" | cut -d' ' -f1)"
cat > "$out/README.md" <<NOTE
# onnxruntime-web $version (MIT licence, Microsoft Corporation)

Copied from the npm package \`onnxruntime-web@$version\` (tarball sha256 \`$tarball_sha\`) by
\`scripts/vendor_onnxruntime_web.sh\`: \`dist/ort.wasm.bundle.min.mjs\` and \`dist/ort.webgpu.bundle.min.mjs\` unchanged,
and their WebAssembly binaries \`dist/ort-wasm-simd-threaded.wasm\` and \`dist/ort-wasm-simd-threaded.asyncify.wasm\`
gzipped (\`gzip -9 -n\`). \`SHA256SUMS\` lists the unpacked files; a test checks them. Source:
https://github.com/microsoft/onnxruntime (js/web).
NOTE
echo "onnxruntime-web $version -> $out"; cat "$out/SHA256SUMS"
