// The model in the page: graphs exported from the PyTorch model itself (vit_demo/onnx/export.py: the model's, with
// inputs image, heads_off, mean_ablation and outputs logits divided by the temperature, attention, lens, features;
// the relevance graph, with its gradients traced in; the two patching graphs, vit_demo/onnx/patching.py), run by
// onnxruntime-web's WebAssembly backend (vendored: ../vendor/onnxruntime-web, never a CDN). One session per graph,
// made on first use.
import * as ort from "../vendor/onnxruntime-web/ort.wasm.bundle.min.mjs";

// Threads need a cross-origin isolated page (COOP/COEP headers); elsewhere one thread, without trying a worker.
ort.env.wasm.numThreads = globalThis.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency || 1) : 1;

const sessions = new Map(); // graph address -> Promise of its InferenceSession
// The runtime's WebAssembly binary travels gzipped (3.7 MB, not 14.2) and is unpacked here, whatever the server.
const WASM = new URL("../vendor/onnxruntime-web/ort-wasm-simd-threaded.wasm.gz", import.meta.url);
let runtime = null; // Promise: the binary unpacked and handed to onnxruntime-web, once

async function unpack(answer) {
  // The runtime's binary from its gzipped file; a host that sent it with Content-Encoding: gzip has had the browser
  // unpack it already (it then starts with WebAssembly's "\0asm", not gzip's 1f 8b).
  if (!answer.ok) throw new Error(`the model's runtime did not load (${answer.status} ${answer.statusText})`);
  const bytes = await answer.arrayBuffer(), head = new Uint8Array(bytes, 0, 2);
  if (head[0] !== 0x1f || head[1] !== 0x8b) return bytes;
  return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
}

function loadRuntime() {
  runtime ??= fetch(WASM)
    .then(unpack)
    .then((binary) => { ort.env.wasm.wasmBinary = binary; })
    .catch((error) => { runtime = null; throw error; }); // the next use tries again
  return runtime;
}

export function available() {
  // Whether this browser can run the model: WebAssembly (with SIMD, which the vendored build needs; every browser
  // that has DecompressionStream has it too).
  return typeof WebAssembly === "object" && typeof DecompressionStream === "function";
}

export function session(url) {
  // The graph at ``url``, loaded once (a failed load is forgotten, so the next use tries again).
  if (!sessions.has(url)) {
    const made = loadRuntime().then(() =>
      ort.InferenceSession.create(url, { executionProviders: ["wasm"], graphOptimizationLevel: "all" }));
    made.catch(() => sessions.delete(url));
    sessions.set(url, made);
  }
  return sessions.get(url);
}

export function inputTensor(images, model) {
  // 8-bit images (each H x W x C, as preprocessing leaves them) -> the graph's image, float32 (B, C, H, W) in [0, 1].
  const { height: H, width: W, channels: C } = model, size = H * W * C;
  const data = new Float32Array(images.length * size);
  images.forEach((pixels, b) => {
    for (let c = 0; c < C; c++)
      for (let p = 0; p < H * W; p++) data[b * size + c * H * W + p] = pixels[p * C + c] / 255;
  });
  return new ort.Tensor("float32", data, [images.length, C, H, W]);
}

function knockout(model, off, mode) {
  // The graphs' heads_off (L, H) and mean_ablation (1,) for the heads ``off`` (layer * heads + head).
  const headsOff = new Float32Array(model.layers * model.heads);
  for (const index of off) headsOff[index] = 1;
  return {
    heads_off: new ort.Tensor("float32", headsOff, [model.layers, model.heads]),
    mean_ablation: new ort.Tensor("float32", Float32Array.of(mode === "mean" ? 1 : 0), [1]),
  };
}

export async function relevance(url, model, pixels, target, { off = [], mode = "mean" } = {}) {
  // One image's class-specific relevance for class index ``target`` through the relevance graph at ``url``, with
  // the heads ``off``: {logits (K) calibrated, relevance (g * g)}.
  const graph = await session(url), K = model.classes.length;
  const onehot = new Float32Array(K);
  onehot[target] = 1;
  const out = await graph.run({ image: inputTensor([pixels], model), ...knockout(model, off, mode),
                                target: new ort.Tensor("float32", onehot, [1, K]) });
  return { logits: out.logits.data, relevance: out.relevance.data };
}

export async function patching(url, model, clean, corrupt, classes) {
  // Two images' activation patching through the patching graph at ``url`` (vit_demo/onnx/patching.py: the heads' or
  // the residual stream's), ``classes`` [clean, corrupt] the two class indices compared: {logitDiff: the raw logit
  // difference of the clean and of the corrupt run (2), cleanIntoCorrupt and corruptIntoClean: (L, H) or (L, T)}.
  const graph = await session(url), K = model.classes.length;
  const onehot = new Float32Array(2 * K);
  onehot[classes[0]] = 1;
  onehot[K + classes[1]] = 1;
  const out = await graph.run({ clean: inputTensor([clean], model), corrupt: inputTensor([corrupt], model),
                                classes: new ort.Tensor("float32", onehot, [2, K]) });
  return { logitDiff: out.logit_diff.data, cleanIntoCorrupt: out.clean_into_corrupt.data,
           corruptIntoClean: out.corrupt_into_clean.data };
}

export async function run(url, model, images, { off = [], mode = "mean" } = {}) {
  // ``images`` through the graph at ``url`` with the heads ``off`` (layer * heads + head) replaced by their mean
  // (mode "mean") or by zeros: per image, its calibrated logits (K), attention (L, H, T, T), lens (L, T, K) and [CLS]
  // features (L, D; the unfamiliar rule's, numbers.js).
  const graph = await session(url);
  const { layers: L, heads: H, tokens: T, classes } = model, K = classes.length;
  const out = await graph.run({ image: inputTensor(images, model), ...knockout(model, off, mode) });
  const slice = (tensor, b, size) => tensor.data.subarray(b * size, (b + 1) * size);
  return images.map((_, b) => ({
    logits: slice(out.logits, b, K),
    attention: slice(out.attention, b, L * H * T * T),
    lens: slice(out.lens, b, L * T * K),
    features: slice(out.features, b, out.features.data.length / images.length),
  }));
}

export async function logits(url, model, data, count) {
  // ``count`` images already in the graph's layout, float32 (B, C, H, W) in [0, 1] (faithfulness.js: a photo's
  // blanked patches hold its mean colour, which no 8-bit image has), through the graph at ``url`` with every head on:
  // their calibrated logits, (B, K) flat. Only the logits are fetched.
  const graph = await session(url), { height: H, width: W, channels: C } = model;
  const image = new ort.Tensor("float32", data, [count, C, H, W]);
  const out = await graph.run({ image, ...knockout(model, [], "mean") }, ["logits"]);
  return out.logits.data;
}
