// Node runner for tests/test_page_numbers.py: the page's numbers (vit_demo/page/assets/page/numbers.js) for attention
// rows and pixels that Python wrote, so that the test can hold them against Python's (interpret/explain.py).
// Usage: node tests/page_numbers.mjs IN.json OUT.json, IN: [{rows: base64 float32 (L, H, T), [CLS]'s rows as the graph
// gives them (cls_attention), layers, heads, tokens}], OUT: [{maps: base64 (L, H + 1, g, g) levels, as the views draw
// them (picture.js: levels)}]. A case with a ``rule`` (the unfamiliar rule as config.json keeps it), ``calibrated`` (base64 float32 (K)),
// ``features`` (base64 float32 (L, D)) and ``temperature`` gets {familiarity, unfamiliar} instead; one with ``qkv``
// (base64 float32 (L, 3, H, T, Dh)), ``layer``, ``head`` and ``token`` gets attentionSteps' {scores, weights, output}.
import { readFileSync, writeFileSync } from "node:fs";
import { attentionSteps, familiarity, gridMaps, unfamiliar } from "../vit_demo/page/assets/page/numbers.js";
import { levels } from "../vit_demo/page/assets/page/picture.js";

const bytes = (text) => Uint8Array.from(Buffer.from(text, "base64"));
const floats = (text) => {
  const raw = bytes(text);
  return new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
};
const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = cases.map(({ rows, layers, heads, tokens, rule, calibrated, features, temperature, qkv, ...at }) => {
  if (qkv) {
    const { scores, weights, output } = attentionSteps(floats(qkv), { layers, heads, tokens }, at.layer, at.head, at.token);
    return { scores: Array.from(scores), weights: Array.from(weights), output: Array.from(output) };
  }
  if (rule) {
    const [z, f] = [floats(calibrated), floats(features)];
    return { familiarity: familiarity(z, temperature, rule, f), unfamiliar: unfamiliar(z, temperature, rule, f) };
  }
  const maps = gridMaps(floats(rows), { layers, heads, tokens, prefix: 1 }); // (the shipped models' prefix)
  const drawn = new Uint8Array(maps.length), g2 = tokens - 1;
  for (let at = 0; at < maps.length; at += g2) drawn.set(levels(maps.subarray(at, at + g2)), at);
  return { maps: Buffer.from(drawn).toString("base64") };
});
writeFileSync(process.argv[3], JSON.stringify(out));
