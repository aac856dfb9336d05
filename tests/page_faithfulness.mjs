// Node runner for the page's faithfulness answer (vit_demo/app/assets/page/source.js: pageSource(...).faithfulness, the
// model and relevance graphs run by the page's own onnxruntime-web, WebAssembly, one thread) and for its verdict in
// words (assets/page/faithfulness.js: verdictText), for tests/test_page_faithfulness.py and docs/benchmarks.md.
// Usage: node tests/page_faithfulness.mjs IN.json OUT.json
// IN: {model: a tab's model as vit_demo/app/page_model.py describes it, its graphs' addresses file: URLs,
//      requests: [{image}] as the view asks, verdicts: [answers whose curves, noise, verdict and label are given]}
// OUT: {answers: [the page's answer to each request], texts: [verdictText of each verdict's answer]}.
import "./node_files.mjs"; // fetch reads file: URLs, as the page reads its graphs
import { readFile, writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";


const { pageSource } = await import("../vit_demo/app/assets/page/source.js");
const { verdict, verdictText } = await import("../vit_demo/app/assets/page/faithfulness.js");
const { model, requests = [], verdicts = [] } = JSON.parse(await readFile(process.argv[2], "utf8"));
const source = pageSource(model, pathToFileURL(process.cwd() + "/").href);
const answers = [];
for (const request of requests) answers.push(await source.faithfulness(request));
// The verdict from the curves given, by the page's rules (its leaders and flatness), then in words.
const texts = verdicts.map((given) => {
  const found = verdict(given.curves, given.noise, model.faithfulness.flat);
  return { verdict: found, text: verdictText({ ...given, verdict: found }, model.texts) };
});
await writeFile(process.argv[3], JSON.stringify({ answers, texts }));
