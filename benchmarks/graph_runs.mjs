// Node runner for benchmarks/import_cost.py: one graph in the page's own onnxruntime-web (the vendored build,
// WebAssembly, one thread, opened as model.js opens it), each set of outputs fetched in turn, round after round.
// Usage: node benchmarks/graph_runs.mjs IN.json OUT.json
// IN: {graph: its file, data: the file of weights it reads (ONNX external data) or null, feeds: {name: {shape, data:
//      base64 of float32}}, fetches: [output names, or null for every output], repeat: rounds, warm: whether an
//      untimed round comes first (default true)}
// OUT: {load_ms: opening the graph, ms: [for each fetch, its milliseconds in each round]}
import { readFile, writeFile } from "node:fs/promises";
import { basename } from "node:path";
import { performance } from "node:perf_hooks";
import { gunzipSync } from "node:zlib";

const vendor = new URL("../vit_demo/page/assets/vendor/onnxruntime-web/", import.meta.url);
const ort = await import(new URL("ort.wasm.bundle.min.mjs", vendor).href);
ort.env.wasm.numThreads = 1;
ort.env.wasm.wasmBinary = gunzipSync(await readFile(new URL("ort-wasm-simd-threaded.wasm.gz", vendor)));

const { graph, data, feeds, fetches, repeat, warm = true } = JSON.parse(await readFile(process.argv[2], "utf8"));
const options = { executionProviders: ["wasm"], graphOptimizationLevel: "all" };
if (data) options.externalData = [{ path: basename(data), data: new Uint8Array(await readFile(data)) }];
const tensors = Object.fromEntries(Object.entries(feeds).map(([name, { shape, data: text }]) => {
  const bytes = Buffer.from(text, "base64");
  return [name, new ort.Tensor("float32", new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4), shape)];
}));
let start = performance.now();
const session = await ort.InferenceSession.create(new Uint8Array(await readFile(graph)), options);
const load_ms = performance.now() - start;
const wanted = fetches.map((names) => names ?? session.outputNames);
if (warm) for (const names of wanted) await session.run(tensors, names);
const ms = wanted.map(() => []);
for (let round = 0; round < repeat; round++) {
  for (const [i, names] of wanted.entries()) {
    start = performance.now();
    await session.run(tensors, names);
    ms[i].push(performance.now() - start);
  }
}
await writeFile(process.argv[3], JSON.stringify({ load_ms, ms }));
