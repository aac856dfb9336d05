// The forward pass, and where it runs: one choice, made here (``choose``). The page runs the graphs exported from the
// PyTorch model itself (vit_demo/onnx/export.py: the model's, its inputs and outputs below; the relevance graph, with
// its gradients traced in; the two patching graphs, vit_demo/onnx/patching.py) with onnxruntime-web (vendored:
// ../vendor/onnxruntime-web, never a CDN): its WebAssembly build, or for a large model (``gpu``) its WebGPU build
// where the browser offers a GPU; where it can't (no WebAssembly, ?model=server, a graph that does not load), the
// app's server runs the same graphs in PyTorch (vit_demo/app/forward.py) and answers with the same outputs. Either way
// the page gets the raw outputs, and computes every view's numbers from them (source.js).
import * as ort from "../vendor/onnxruntime-web/ort.wasm.bundle.min.mjs";
import { fromBase64 } from "./numbers.js";

export function remembered(make) {
  // make() once, its Promise kept for every later call; a failure is forgotten, so that the next call tries again.
  let made = null;
  return () => (made ??= make().catch((error) => { made = null; throw error; }));
}

async function unpack(answer) {
  // A runtime's binary from its gzipped file; a host that sent it with Content-Encoding: gzip has had the browser
  // unpack it already (it then starts with WebAssembly's "\0asm", not gzip's 1f 8b).
  if (!answer.ok) throw new Error(`the model's runtime did not load (${answer.status} ${answer.statusText})`);
  const bytes = await answer.arrayBuffer(), head = new Uint8Array(bytes, 0, 2);
  if (head[0] !== 0x1f || head[1] !== 0x8b) return bytes;
  return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).arrayBuffer();
}

function build(module, binary, providers, where) {
  // One build of onnxruntime-web: its module (a Promise), its WebAssembly binary (gzipped, unpacked here whatever the
  // server: 3.7 MB, not 14.2; WebGPU's 6.6, not 26.8), loaded once; the providers its sessions run on. (Its sessions
  // log errors alone: WebGPU's warns of every node it leaves to the CPU, as the shapes' arithmetic.)
  const load = remembered(async () => {
    const [found, bytes] = await Promise.all([module(), fetch(new URL(binary, import.meta.url)).then(unpack)]);
    // Threads need a cross-origin isolated page (COOP/COEP headers); elsewhere one thread, without trying a worker.
    found.env.wasm.numThreads = globalThis.crossOriginIsolated ? Math.min(4, navigator.hardwareConcurrency || 1) : 1;
    found.env.wasm.wasmBinary = bytes;
    return found;
  });
  return { load, providers, where, queue: oneAtATime() };
}

const VENDOR = "../vendor/onnxruntime-web/";
const RUNTIMES = { // the page's two, by the names ?runtime= takes
  wasm: build(async () => ort, `${VENDOR}ort-wasm-simd-threaded.wasm.gz`, ["wasm"], "in this page"),
  webgpu: build(() => import("../vendor/onnxruntime-web/ort.webgpu.bundle.min.mjs"),
    `${VENDOR}ort-wasm-simd-threaded.asyncify.wasm.gz`, ["webgpu"], "in this page (WebGPU)"),
};

async function gpuOffered() {
  // Whether the browser offers WebGPU on a GPU (not a fallback adapter, a CPU emulating one, slower than WebAssembly).
  try {
    const adapter = await navigator.gpu?.requestAdapter();
    return Boolean(adapter) && !(adapter.info?.isFallbackAdapter ?? adapter.isFallbackAdapter);
  } catch {
    return false;
  }
}

// Whether this browser can run the model: WebAssembly with SIMD (the vendored build's; every browser with a
// DecompressionStream has it).
export const available = () => typeof WebAssembly === "object" && typeof DecompressionStream === "function";

function forwardPass(open, where) {
  // A forward pass whose graphs ``open(name)`` opens (a Promise of {run(feeds, fetches)}, as an ort.InferenceSession
  // runs), each once (remembered); ``where``: "in this page" or "on the server", as the captions say it.
  const sessions = {}; // name -> its session, remembered
  const session = (name) => (sessions[name] ??= remembered(() => open(name)))();
  return { where, inPage: where !== "on the server", session };
}

function oneAtATime() {
  // A queue of calls, each started once those before it have ended (a failure too): ``queue(call)``, a Promise of its
  // answer. A build of onnxruntime-web does one thing at a time (two runs at once can read each other's outputs;
  // in WebGPU's, whose calls wait for the GPU, a session loading while another runs overwrites its memory).
  let last = Promise.resolve();
  return (call) => {
    const next = last.then(call);
    last = next.catch(() => {});
    return next;
  };
}

function inPage(folder, shared, { load, providers, where, queue }) {
  // The page's forward pass: the graphs of the weights folder at address ``folder`` (ending in "/"), in onnxruntime-web
  // (a build of RUNTIMES). ``shared``: {file, graphs}, the file of weights those graphs share (ONNX external data),
  // fetched once for all. Files are fetched outside the runtime's queue, so that a run waits for no download.
  const bytes = (name, what) => fetch(new URL(name, folder)).then((answer) => {
    if (!answer.ok) throw new Error(`the model's ${what} did not load (${answer.status})`);
    return answer.arrayBuffer().then((buffer) => new Uint8Array(buffer));
  });
  const weights = remembered(() => bytes(shared.file, "weights"));
  const sharedWeights = async (name) =>
    (shared?.graphs.includes(name) ? [{ path: shared.file, data: await weights() }] : []);
  return forwardPass(async (name) => {
    const [found, graph, externalData] = await Promise.all([load(), bytes(name, "graph"), sharedWeights(name)]);
    const session = await queue(() => found.InferenceSession.create(graph,
      { executionProviders: providers, graphOptimizationLevel: "all", externalData, logSeverityLevel: 3 }));
    return { run: (feeds, fetches) => queue(() => session.run(feeds, fetches)) };
  }, where);
}

function onServer(call) {
  // The server's forward pass: ``call`` is the app's server function (forward.py: forward), which takes a graph's
  // name, its feeds and the outputs wanted, and answers with the outputs: float32 tensors as {shape, data: base64}
  // on the wire alone (the page keeps typed arrays).
  const wire = (tensor) => {
    const bytes = new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return { shape: Array.from(tensor.dims), data: btoa(text) };
  };
  return forwardPass(async (graph) => ({
    async run(feeds, fetches) {
      const inputs = Object.fromEntries(Object.entries(feeds).map(([name, tensor]) => [name, wire(tensor)]));
      const reply = await call({ graph, inputs, outputs: fetches ?? null });
      if (!reply || reply.error) throw new Error(reply?.error ?? "the server did not answer");
      return Object.fromEntries(Object.entries(reply.outputs).map(([name, { shape, data }]) =>
        [name, { dims: shape, data: new Float32Array(fromBase64(data).buffer) }]));
    },
  }), "on the server");
}

export async function choose(folder, first, { server = null, forced = false, shared = null, gpu = false,
                                              runtime = null } = {}) {
  // Where a tab's forward pass runs: in the page, where the browser runs WebAssembly, nothing forces the server
  // (?model=server) and the graph ``first`` loads; else on the server, where there is one (the static page says why).
  // In the page: on WebGPU for a large model (``gpu``) where the browser offers a GPU, else (or where WebGPU's build
  // fails) WebAssembly; ``runtime`` ("wasm" or "webgpu", ?runtime=) forces one.
  if (!forced && available()) {
    const tried = Object.hasOwn(RUNTIMES, runtime) ? [runtime]
      : [...(gpu && (await gpuOffered()) ? ["webgpu"] : []), "wasm"];
    for (const name of tried) {
      const page = inPage(folder, shared, RUNTIMES[name]);
      try {
        await page.session(first);
        return page;
      } catch (error) {
        if (!server && name === tried.at(-1)) throw error;
        console.warn(`The model does not run with onnxruntime-web's ${name} build:`, error);
      }
    }
  }
  if (!server) throw new Error("this browser cannot run WebAssembly, which this page runs the model with");
  return onServer(server);
}

function inputTensor(images, model) {
  // 8-bit images (each H x W x C, as preprocessing leaves them) -> the graph's image, float32 (B, C, H, W) in [0, 1];
  // one in that layout already (Float32Array (C, H, W): faithfulness.js's, blanked with a mean colour) is taken as is.
  const { height: H, width: W, channels: C } = model, size = H * W * C;
  const data = new Float32Array(images.length * size);
  images.forEach((pixels, b) => {
    if (pixels instanceof Float32Array) return data.set(pixels, b * size);
    for (let c = 0; c < C; c++)
      for (let p = 0; p < H * W; p++) data[b * size + c * H * W + p] = pixels[p * C + c] / 255;
  });
  return new ort.Tensor("float32", data, [images.length, C, H, W]);
}

const oneHot = (model, classes) => { // the graphs' classes to explain or compare: a row each, 1 at the class' index
  const K = model.classes.length, rows = new Float32Array(classes.length * K);
  classes.forEach((c, i) => (rows[i * K + c] = 1));
  return new ort.Tensor("float32", rows, [classes.length, K]);
};

function knockout(model, off, mode) {
  // The graphs' heads_off (L, H) and mean_ablation (1,) for the heads ``off`` (layer * heads + head).
  const headsOff = new Float32Array(model.layers * model.heads);
  for (const index of off) headsOff[index] = 1;
  return { heads_off: new ort.Tensor("float32", headsOff, [model.layers, model.heads]),
           mean_ablation: new ort.Tensor("float32", Float32Array.of(mode === "mean" ? 1 : 0), [1]) };
}

export async function relevance(graph, model, pixels, target, { off = [], mode = "mean" } = {}) {
  // One image's class-specific relevance for class index ``target`` through the relevance graph (a session of the
  // forward pass, as the runs below take theirs), with the heads ``off``: {logits (K) calibrated, relevance (g * g)}.
  const out = await graph.run({ image: inputTensor([pixels], model), ...knockout(model, off, mode),
                                target: oneHot(model, [target]) });
  return { logits: out.logits.data, relevance: out.relevance.data };
}

export async function patching(graph, model, clean, corrupt, classes) {
  // Two images' activation patching through a patching graph (vit_demo/onnx/patching.py: the heads' or the
  // residual stream's), ``classes`` [clean, corrupt] the two class indices compared: {logitDiff: the raw logit
  // difference of the clean and of the corrupt run (2), cleanIntoCorrupt and corruptIntoClean: (L, H) or (L, T)}.
  const out = await graph.run({ clean: inputTensor([clean], model), corrupt: inputTensor([corrupt], model),
                                classes: oneHot(model, classes) });
  return { logitDiff: out.logit_diff.data, cleanIntoCorrupt: out.clean_into_corrupt.data,
           corruptIntoClean: out.corrupt_into_clean.data };
}

export async function run(graph, model, images, { off = [], mode = "mean", query = -1, outputs }) {
  // ``images`` (inputTensor's) through ``graph`` (the model's, a snapshot's, the lens') with the heads ``off``
  // (layer * heads + head) replaced by their mean (mode "mean") or by zeros: per image, the ``outputs`` asked for
  // of the graph's (export.py): calibrated logits (K), where [CLS] attends (cls_attention: L, H, T), rollout (g * g),
  // where patch ``query`` attends (query_attention: L, H, T; -1: the patch where rollout peaks), lens (L, T, K),
  // [CLS] features (L, D; the unfamiliar rule's, numbers.js), queries, keys and values (qkv: L, 3, H, T, Dh).
  const feeds = { image: inputTensor(images, model), ...knockout(model, off, mode),
                  query: new ort.Tensor("float32", Float32Array.of(query), [1]) };
  const out = await graph.run(feeds, outputs);
  return images.map((_, b) => Object.fromEntries(outputs.map((output) => {
    const size = out[output].data.length / images.length; // (every output has the batch first)
    return [output, out[output].data.subarray(b * size, (b + 1) * size)];
  })));
}
