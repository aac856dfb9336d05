// Node runner for the page's patching answer (vit_demo/app/assets/page/source.js: pageSource(...).patching, which runs
// the patching graphs with the page's own onnxruntime-web, WebAssembly, one thread), for tests/test_page_patching.py
// and benchmarks/page_patching.py.
// Usage: node tests/page_patching.mjs IN.json OUT.json
// IN: {model: a tab's model as vit_demo/app/page_model.py describes it, its graphs' addresses file: URLs,
//      requests: [{clean, corrupt, residual}] as the view asks, repeat: how many times each is asked (default 1)}
// OUT: [{answer: the last answer, ms: [each answer's own ms]}], one per request.
import "./node_files.mjs"; // fetch reads file: URLs, as the page reads its graphs
import { readFile, writeFile } from "node:fs/promises";
import { pathToFileURL } from "node:url";


const { pageSource } = await import("../vit_demo/app/assets/page/source.js");
const { model, requests, repeat = 1 } = JSON.parse(await readFile(process.argv[2], "utf8"));
const source = pageSource(model, pathToFileURL(process.cwd() + "/").href);
const out = [];
for (const request of requests) {
  const ms = [];
  let answer;
  for (let i = 0; i < repeat; i++) {
    answer = await source.patching(request);
    ms.push(answer.ms);
  }
  out.push({ answer, ms });
}
await writeFile(process.argv[3], JSON.stringify(out));
