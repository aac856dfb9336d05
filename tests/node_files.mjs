// Imported first by the Node runner of the page's source (page_source.mjs): the page
// fetches its runtime's binary and its graphs, and Node's fetch reads no file: URL, so this one does.
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

const fetchOnline = globalThis.fetch;
globalThis.fetch = async (url, init) => {
  const href = String(url instanceof Request ? url.url : url);
  if (href.startsWith("file:")) return new Response(await readFile(fileURLToPath(href)));
  return fetchOnline(url, init);
};
