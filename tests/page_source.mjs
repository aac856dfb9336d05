// Node runner for a tab's source as the page uses it (vit_demo/page/assets/page/source.js: pageSource, its graphs run by
// the page's own onnxruntime-web, WebAssembly, one thread), for the tests that hold the page's numbers to Python's
// (tests/conftest.py: page_source) and for the benchmarks.
// Usage: node tests/page_source.mjs IN.json OUT.json
// IN: {model: a tab's model as vit_demo/page/description.py describes it, its folder a file: URL,
//      calls: [{method: a source's method ("stroke", "query", "knockout", "lens", "relevance", "snapshot",
//               "patching", "faithfulness", "example"), request}], repeat: how many times each is asked (default 1),
//      verdicts: [answers whose curves, noise and label are given: their verdict by the page's rules, in words]}
// OUT: {answers: [the last answer to each call], ms: [each call's milliseconds, every time], texts: [verdicts]}.
import "./node_files.mjs"; // fetch reads file: URLs, as the page reads its graphs
import { readFile, writeFile } from "node:fs/promises";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";


const { pageSource } = await import("../vit_demo/page/assets/page/source.js");
const { verdict, verdictText } = await import("../vit_demo/page/assets/page/faithfulness.js");
const { model, calls = [], repeat = 1, verdicts = [] } = JSON.parse(await readFile(process.argv[2], "utf8"));
const source = pageSource(model, pathToFileURL(process.cwd() + "/").href);
const answers = [], ms = [];
for (const { method, request } of calls) {
  const times = [];
  let answer;
  for (let i = 0; i < repeat; i++) {
    const start = performance.now();
    answer = await source[method](request);
    times.push(performance.now() - start);
  }
  answers.push(answer);
  ms.push(times);
}
const texts = verdicts.map((given) => {
  const found = verdict(given.curves, given.noise, model.faithfulness.flat);
  return { verdict: found, text: verdictText({ ...given, verdict: found }, model.texts) };
});
await writeFile(process.argv[3], JSON.stringify({ answers, ms, texts }));
