// Node runner for a tab's source as the page uses it (vit_demo/page/assets/page/source.js: pageSource, its graphs run by
// the page's own onnxruntime-web, WebAssembly, one thread), for the tests that hold the page's numbers to Python's
// (tests/conftest.py: page_source) and for the benchmarks.
// Usage: node tests/page_source.mjs IN.json OUT.json
// IN: {model: a tab's model as vit_demo/page/description.py describes it, its folder a file: URL,
//      calls: [{method: a source's method ("stroke", "query", "knockout", "lens", "relevance", "snapshot",
//               "patching", "faithfulness", "example"), request}], repeat: how many times each is asked (default 1),
//      verdicts: [answers whose curves, noise and label are given: their verdict by the page's rules, in words]}
//      A request's images (image, clean, corrupt) and drawing come as base64, handed to the source as bytes.
// OUT: {answers: [the last answer to each call; {error} where it rejected], ms: [each call's milliseconds, every
//      time], texts: [verdicts]}, typed arrays as lists.
import "./node_files.mjs"; // fetch reads file: URLs, as the page reads its graphs
import { readFile, writeFile } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";


const { pageSource } = await import("../vit_demo/page/assets/page/source.js");
const { verdict, verdictText } = await import("../vit_demo/page/assets/page/faithfulness.js");
const { model, calls = [], repeat = 1, verdicts = [] } = JSON.parse(await readFile(process.argv[2], "utf8"));
const source = pageSource(model, pathToFileURL(process.cwd() + "/").href);
const BYTES = ["image", "clean", "corrupt", "drawing"]; // what the page hands its source as bytes: base64 here
const bytes = (request) => (request && typeof request === "object" ? Object.fromEntries(Object.entries(request).map(
  ([name, value]) => [name, BYTES.includes(name) && typeof value === "string" ?
    new Uint8Array(Buffer.from(value, "base64")) : value])) : request);
const answers = [], ms = [];
for (const call of calls) {
  const times = [], method = call.method, request = bytes(call.request);
  let answer;
  for (let i = 0; i < repeat; i++) {
    const start = performance.now();
    try {
      answer = await source[method](request);
    } catch (error) {
      answer = { error: String(error.message ?? error) };
    }
    times.push(performance.now() - start);
  }
  answers.push(answer);
  ms.push(times);
}
const texts = verdicts.map((given) => {
  const found = verdict(given.curves, given.noise, model.faithfulness.flat);
  return { verdict: found, text: verdictText({ ...given, verdict: found }, model.texts) };
});
await writeFile(process.argv[3], JSON.stringify({ answers, ms, texts },
                                               (key, v) => (ArrayBuffer.isView(v) ? Array.from(v) : v)));
