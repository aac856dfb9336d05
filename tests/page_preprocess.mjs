// Runs the page's preprocessing (vit_demo/page/assets/page/preprocess.js) on a batch of images in one Node process, for
// tests/test_page_preprocess.py, which compares the outputs with Python's.
//
//   node tests/page_preprocess.mjs INPUT OUTPUT   the batch in INPUT -> the answers in OUTPUT; timings on stdout
//   node tests/page_preprocess.mjs --benchmark    how long a 112x112 drawing and a 1000x700 photo take (every way)
//
// INPUT, one record after another: kind (uint8: 0 drawing, 1 photo, 2 photo for an imported model), width, height
// (uint32, little-endian); for kind 2 its preprocessResized options: size, resize, resize width (uint32: 0 when
// resize is the shorter side, else resize is the height), interpolation (uint8: 0 nearest, 1 bilinear, 2 bicubic)
// and library (uint8: 0 pil, 1 torchvision); then the pixels: width * height bytes of grey for a drawing, width * height * 4 bytes of RGBA for a photo.
// OUTPUT, one record per input, in order: status (uint8: 0 done, 1 NothingDrawn, 2 InputError, 3 any other error),
// length (uint32, little-endian), then the 8-bit pixels (28 * 28, or size * size * 3 in HWC) or the error's message.
import { readFileSync, writeFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

import { preprocessDrawing } from "../vit_demo/page/assets/page/drawing.js";
import {
  InputError, NothingDrawn, preprocessPhoto, preprocessResized,
} from "../vit_demo/page/assets/page/preprocess.js";

const DRAWING = 0, PHOTO = 1, RESIZED = 2, INTERPOLATIONS = ["nearest", "bilinear", "bicubic"];
const LIBRARIES = ["pil", "torchvision"];

function answer(kind, pixels, width, height, options) {
  // [status, payload bytes]
  try {
    const out = kind === DRAWING ? preprocessDrawing(pixels, width, height)
      : kind === PHOTO ? preprocessPhoto(pixels, width, height) : preprocessResized(pixels, width, height, options);
    return [0, out];
  } catch (error) {
    const status = error instanceof NothingDrawn ? 1 : error instanceof InputError ? 2 : 3;
    return [status, new TextEncoder().encode(String(error.message))];
  }
}

function runBatch(inputPath, outputPath) {
  const input = readFileSync(inputPath);
  const view = new DataView(input.buffer, input.byteOffset, input.byteLength);
  const parts = [];
  const ms = { [DRAWING]: [], [PHOTO]: [], [RESIZED]: [] };
  for (let at = 0; at < input.length;) {
    const kind = view.getUint8(at), width = view.getUint32(at + 1, true), height = view.getUint32(at + 5, true);
    let options;
    at += 9;
    if (kind === RESIZED) {
      const resize = view.getUint32(at + 4, true), resizeWidth = view.getUint32(at + 8, true);
      options = { size: view.getUint32(at, true), resize: resizeWidth ? [resize, resizeWidth] : resize,
                  interpolation: INTERPOLATIONS[view.getUint8(at + 12)], library: LIBRARIES[view.getUint8(at + 13)] };
      at += 14;
    }
    const size = width * height * (kind === DRAWING ? 1 : 4);
    const pixels = new Uint8Array(input.buffer, input.byteOffset + at, size);
    at += size;
    const started = performance.now();
    const [status, payload] = answer(kind, pixels, width, height, options);
    ms[kind].push(performance.now() - started);
    const head = new Uint8Array(5);
    new DataView(head.buffer).setUint8(0, status);
    new DataView(head.buffer).setUint32(1, payload.length, true);
    parts.push(head, payload);
  }
  writeFileSync(outputPath, Buffer.concat(parts));
  const total = (list) => list.reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({ drawings: ms[DRAWING].length, drawing_ms: total(ms[DRAWING]),
                               photos: ms[PHOTO].length, photo_ms: total(ms[PHOTO]),
                               resized: ms[RESIZED].length, resized_ms: total(ms[RESIZED]) }));
}

function median(fn, repeat) {
  // Median wall time of fn() in milliseconds, after a few warm-up calls.
  for (let i = 0; i < 3; i++) fn();
  const times = [];
  for (let i = 0; i < repeat; i++) {
    const started = performance.now();
    fn();
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[repeat >> 1];
}

function benchmark() {
  // A digit-like ring drawn with the middle pen (18 px on 336, 6 on 112) and a 1000x700 photo of smooth colour
  // with noise: what the page hands preprocessing for a stroke and for an upload (for the shipped CIFAR-10 model,
  // and for an imported timm ViT and a Hugging Face one at 224).
  const side = 112, drawing = new Uint8Array(side * side);
  for (let y = 0; y < side; y++) {
    for (let x = 0; x < side; x++) {
      const r = Math.hypot((x - 56) / 0.7, y - 56);
      drawing[y * side + x] = Math.round(255 * Math.min(1, Math.max(0, 3.5 - Math.abs(r - 35))));
    }
  }
  const width = 1000, height = 700, photo = new Uint8Array(width * height * 4);
  let seed = 1;
  const noise = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) * 40;
  for (let p = 0; p < width * height; p++) {
    const x = p % width, y = Math.floor(p / width);
    photo[p * 4] = Math.min(255, (x / width) * 200 + noise());
    photo[p * 4 + 1] = Math.min(255, (y / height) * 200 + noise());
    photo[p * 4 + 2] = Math.min(255, 100 + noise());
    photo[p * 4 + 3] = 255;
  }
  const drawingMs = median(() => preprocessDrawing(drawing, side, side), 50);
  const photoMs = median(() => preprocessPhoto(photo, width, height), 15);
  const timm = { size: 224, resize: 248, interpolation: "bicubic", library: "pil" }; // timm's ViTs' eval transform
  const resizedMs = median(() => preprocessResized(photo, width, height, timm), 15);
  // ViTImageProcessor's defaults: 224x224, bilinear, resized by torchvision (transformers 5)
  const hf = { size: 224, resize: [224, 224], interpolation: "bilinear", library: "torchvision" };
  const torchvisionMs = median(() => preprocessResized(photo, width, height, hf), 15);
  console.log(`Node ${process.version}: preprocessDrawing (112x112) ${drawingMs.toFixed(2)} ms, ` +
              `preprocessPhoto (1000x700) ${photoMs.toFixed(1)} ms, ` +
              `preprocessResized (1000x700 -> 248, 224 bicubic, PIL) ${resizedMs.toFixed(1)} ms, ` +
              `(1000x700 -> 224x224 bilinear, torchvision) ${torchvisionMs.toFixed(1)} ms (medians)`);
}

if (process.argv[2] === "--benchmark") benchmark();
else if (process.argv.length === 4) runBatch(process.argv[2], process.argv[3]);
else {
  console.error("usage: node tests/page_preprocess.mjs INPUT OUTPUT | --benchmark");
  process.exit(2);
}
