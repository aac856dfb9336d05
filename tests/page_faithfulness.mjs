// Node runner for the page's faithfulness answer (vit_demo/assets/page/source.js: pageSource(...).faithfulness, the
// model and relevance graphs run by the page's own onnxruntime-web, WebAssembly, one thread) and for its verdict in
// words (assets/page/faithfulness.js: verdictText), for tests/test_page_faithfulness.py and docs/benchmarks.md.
// Usage: node tests/page_faithfulness.mjs IN.json OUT.json
// IN: {model: a tab's model as vit_demo/ui/page_model.py describes it, its graphs' addresses file: URLs,
//      requests: [{image}] as the view asks, verdicts: [answers whose curves, noise, verdict and label are given]}
// OUT: {answers: [the page's answer to each request], texts: [verdictText of each verdict's answer]}.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath, pathToFileURL } from "node:url";

// The page fetches its runtime's binary and its graphs; Node's fetch reads no file: URL, so this one does.
const fetchOnline = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  const href = String(url instanceof Request ? url.url : url);
  if (href.startsWith("file:")) return new Response(await readFile(fileURLToPath(href)));
  return fetchOnline(url, init);
};

const { pageSource } = await import("../vit_demo/assets/page/source.js");
const { verdict, verdictText } = await import("../vit_demo/assets/page/faithfulness.js");
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
