#!/usr/bin/env bash
# Refresh the copy of onnxruntime-web that the page runs the models with (vit_demo/app/assets/vendor/onnxruntime-web/).
# Developers only: the files are committed, so a user never needs npm. Usage: scripts/vendor_onnxruntime_web.sh [VERSION]
# It takes the WebAssembly build alone: the ES module with its loader bundled in, and the SIMD + threads .wasm (it
# runs on one thread where the page is not cross-origin isolated). WebGPU's build (twice the size) is left out.
set -euo pipefail
version="${1:-1.30.0}"
repo="$(cd "$(dirname "$0")/.." && pwd)"
out="$repo/vit_demo/app/assets/vendor/onnxruntime-web"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "onnxruntime-web@$version" >/dev/null && tar xzf "onnxruntime-web-$version.tgz")
rm -rf "$out" && mkdir -p "$out"
cp "$work/package/dist/ort.wasm.bundle.min.mjs" "$out/"
# The WebAssembly binary gzipped (14.2 MB -> 3.7 MB): the page unpacks it itself (DecompressionStream), so it travels
# small whether or not the server compresses (Gradio's file route and python -m http.server do not).
gzip -9 -n -c "$work/package/dist/ort-wasm-simd-threaded.wasm" > "$out/ort-wasm-simd-threaded.wasm.gz"
wasm_sha="$(sha256sum "$work/package/dist/ort-wasm-simd-threaded.wasm" | cut -d' ' -f1)"
tarball_sha="$(sha256sum "$work/onnxruntime-web-$version.tgz" | cut -d' ' -f1)"
cat > "$out/README.md" <<NOTE
# onnxruntime-web $version (MIT licence, Microsoft Corporation)

Copied from the npm package \`onnxruntime-web@$version\` (tarball sha256 \`$tarball_sha\`) by
\`scripts/vendor_onnxruntime_web.sh\`: \`dist/ort.wasm.bundle.min.mjs\` unchanged, and \`dist/ort-wasm-simd-threaded.wasm\`
gzipped (\`gzip -9 -n\`; unpacked, its sha256 is \`$wasm_sha\`). \`SHA256SUMS\` lists the unpacked
files; a test checks them. Source: https://github.com/microsoft/onnxruntime (js/web).
NOTE
(cd "$out" && sha256sum ort.wasm.bundle.min.mjs > SHA256SUMS && echo "$wasm_sha  ort-wasm-simd-threaded.wasm" >> SHA256SUMS)
echo "onnxruntime-web $version -> $out"; cat "$out/SHA256SUMS"
