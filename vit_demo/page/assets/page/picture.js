// The live views' pictures, drawn as render.overlay draws them on the server: the input upsampled (nearest for digits,
// bicubic for photos), the map scaled to levels 0..255 and upsampled bicubic as torch's F.interpolate does it
// (align_corners=False, A = -0.75, edges clamped), coloured through the server's lookup table and blended as it
// blends (render._blend_tables: the colour's share rising with the level, truncated).
// Made for speed: a stroke redraws some 100 of these, 1.3 million pixels, within a frame. Each output pixel is four
// taps of rows already resized across, and the colour and the blend one table lookup (a digit's) or three.
import { roundHalfEven } from "./arithmetic.js";

const A = -0.75; // torch's bicubic coefficient
const near = (x) => ((A + 2) * x - (A + 3)) * x * x + 1; // |x| <= 1
const far = (x) => ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; // 1 < |x| < 2
const made = {}; // what is made once a page, by its name and sizes: resize taps, buffers, ImageData
const once = (id, make) => (made[id] ??= make());

function taps(n, size, smooth) {
  // Output i of a resize from n to size samples as four weighted inputs: {index, weight}, (size * 4) each; an edge's
  // clamped taps repeat an index (their weights add, as in the dense resize matrix). Nearest: one tap of weight 1.
  return once(`taps/${n}/${size}/${smooth}`, () => {
    const index = new Int32Array(size * 4), weight = new Float32Array(size * 4), scale = n / size;
    const clamp = (j) => Math.min(Math.max(j, 0), n - 1);
    for (let i = 0; i < size; i++) {
      if (!smooth) {
        index.fill(clamp(Math.floor(i * scale)), i * 4, i * 4 + 4);
        weight[i * 4] = 1;
        continue;
      }
      const source = scale * (i + 0.5) - 0.5, first = Math.floor(source), t = source - first;
      const w = [far(t + 1), near(t), near(1 - t), far(2 - t)];
      for (let k = 0; k < 4; k++) (index[i * 4 + k] = clamp(first - 1 + k)), (weight[i * 4 + k] = w[k]);
    }
    return { index, weight };
  });
}

// An array reused by every map drawn (no garbage per tile).
const buffer = (name, length, Type = Float32Array) => once(`${name}/${length}`, () => new Type(length));

function resizeColumns(values, h, w, size, smooth) {
  // (h, w) -> (h, size): each output column four weighted input columns (a small pass: h is the map's grid).
  const { index, weight } = taps(w, size, smooth), out = buffer("columns", h * size);
  for (let j = 0; j < h; j++)
    for (let x = 0, t = 0; x < size; x++, t += 4) {
      const row = j * w;
      out[j * size + x] = values[row + index[t]] * weight[t] + values[row + index[t + 1]] * weight[t + 1] +
        values[row + index[t + 2]] * weight[t + 2] + values[row + index[t + 3]] * weight[t + 3];
    }
  return out;
}

function resize(values, h, w, size, smooth) {
  // (h, w) -> (size, size) floats: the columns resized (resizeColumns), then each output row four weighted rows of
  // them, the weights and rows fixed along the row; nearest (a digit's input), each output the one input it takes.
  // The result is a buffer the next resize of this size overwrites.
  const out = buffer("resized", size * size);
  if (!smooth) { // (the four taps' path gives the same values, at four times the work: a drawing's 336 x 336)
    const rows = taps(h, size, false).index, cols = taps(w, size, false).index;
    for (let i = 0, p = 0; i < size; i++)
      for (let x = 0; x < size; x++, p++) out[p] = values[rows[i * 4] * w + cols[x * 4]];
    return out;
  }
  const columns = resizeColumns(values, h, w, size, smooth), { index, weight } = taps(h, size, smooth);
  for (let i = 0, t = 0, p = 0; i < size; i++, t += 4) {
    const r0 = index[t] * size, r1 = index[t + 1] * size, r2 = index[t + 2] * size, r3 = index[t + 3] * size;
    const w0 = weight[t], w1 = weight[t + 1], w2 = weight[t + 2], w3 = weight[t + 3];
    for (let x = 0; x < size; x++, p++)
      out[p] = w0 * columns[r0 + x] + w1 * columns[r1 + x] + w2 * columns[r2 + x] + w3 * columns[r3 + x];
  }
  return out;
}

const byte = (v) => (v <= 0 ? 0 : v >= 255 ? 255 : Math.round(v));
const level = (v) => (v <= 0 ? 0 : v >= 255 ? 255 : v | 0); // truncated, as render.overlay's uint8 cast

function base(state, size) {
  // The tab's input at size x size, as render.base_picture makes it, kept with the image's numbers: its channels
  // ((size * size) bytes each: one for a grey input, a digit), and as RGBA words to put as they are.
  const bases = (state.bases ??= {});
  if (bases[size]) return bases[size];
  // (Plain loops: TypedArray.from with a function to call per pixel took 20 times as long for a 336 x 336 picture.)
  const { height: h, width: w, channels: C, smooth, image } = state.numbers, planes = [];
  const channel = new Float32Array(h * w);
  for (let c = 0; c < C; c++) {
    for (let p = 0; p < h * w; p++) channel[p] = image[p * C + c];
    const values = resize(channel, h, w, size, smooth), plane = new Uint8Array(size * size);
    for (let p = 0; p < size * size; p++) plane[p] = byte(values[p]);
    planes.push(plane);
  }
  const [r, g = r, b = r] = planes, words = new Uint32Array(size * size); // (grey: one plane for the three)
  for (let p = 0; p < size * size; p++) words[p] = 0xff000000 | (b[p] << 16) | (g[p] << 8) | r[p]; // little-endian RGBA
  return (bases[size] = { planes, words });
}

const blendsMade = new WeakMap(); // a model's colormap -> its tables, made once a page

function blendTables({ colormap, alpha: [low, high] }) {
  // (256 levels, 256 inputs) -> the blended byte per channel, as render._blend_tables makes it: the input plus the
  // level's share of the way to its colour (``colormap``: (256, 3) bytes; from alpha[0] at level 0 to alpha[1] at
  // 255), truncated; and for a grey input the whole RGBA word.
  if (!blendsMade.has(colormap)) {
    const channels = [0, 1, 2].map((c) => Uint8Array.from({ length: 256 * 256 }, (_, at) => { // level * 256 + input
      const level = at >> 8, below = at & 255, share = low + ((high - low) * level) / 255;
      return Math.trunc(below + share * (colormap[level * 3 + c] - below));
    }));
    const [r, g, b] = channels, grey = Uint32Array.from(r, (_, k) => 0xff000000 | (b[k] << 16) | (g[k] << 8) | r[k]);
    blendsMade.set(colormap, { channels, grey });
  }
  return blendsMade.get(colormap);
}

export function levels(map, top) {
  // What is drawn of a map: its values scaled so that ``top`` is 255 (none: its own maximum, in float32 as
  // render.overlays scales it) and rounded (halves to even) to bytes. -> a Uint8Array the next map overwrites
  const n = map.length, out = buffer("levels", n, Uint8Array);
  if (top) {
    for (let p = 0; p < n; p++) out[p] = roundHalfEven(map[p] * (255 / top));
    return out;
  }
  const peak = map.reduce((highest, v) => Math.max(highest, v), -Infinity);
  const scale = Math.fround(255 / Math.fround(Math.max(peak, 1e-12)));
  for (let p = 0; p < n; p++) out[p] = roundHalfEven(Math.fround(map[p] * scale));
  return out;
}

export function overlay(context, state, map, size, x = 0, y = 0, top = 0) {
  // One (g, g) map over the tab's input, size pixels a side, at (x, y) of the canvas, scaled to its own maximum (or
  // so that ``top`` is the hottest colour: levels); map null: the input alone.
  const under = base(state, size), grid = state.numbers.grid;
  const picture = once(`picture/${size}`, () => context.createImageData(size, size)); // (putImageData copies it)
  const out = new Uint32Array(picture.data.buffer);
  if (!map) out.set(under.words);
  else {
    const heat = resize(levels(map, top), grid, grid, size, true), pixels = size * size;
    const tables = blendTables(state.numbers);
    if (under.planes.length === 1) {
      const [grey] = under.planes, blended = tables.grey;
      for (let p = 0; p < pixels; p++) out[p] = blended[(level(heat[p]) << 8) | grey[p]];
    } else {
      const [r, g, b] = under.planes, [red, green, blue] = tables.channels;
      for (let p = 0; p < pixels; p++) {
        const at = level(heat[p]) << 8;
        out[p] = 0xff000000 | (blue[at | b[p]] << 16) | (green[at | g[p]] << 8) | red[at | r[p]];
      }
    }
  }
  context.putImageData(picture, x, y);
}

const tilesDrawn = new WeakMap(); // maps -> the canvas whose tiles show them, for another grid of them to copy

export function drawTiles(canvas, context, state, maps, off = null) {
  // A tile per layer and head (and each layer's mean), at the origins render.attention_grid_layout gave, the heads
  // switched off (``off``: layer * heads + head) greyed and marked "off". Maps another grid of the same layout shows
  // as they are (the training view's trained model: the [CLS] grid's) are copied from it (``showing``: its maps alone).
  const { grid: g, heads } = state.numbers, thumb = Number(canvas.dataset.thumb), drawn = tilesDrawn.get(maps);
  const origins = (canvas.origins ??= JSON.parse(canvas.dataset.origins));
  if (drawn && drawn !== canvas && drawn.showing === maps && drawn.width === canvas.width &&
      drawn.height === canvas.height && drawn.dataset.thumb === canvas.dataset.thumb)
    context.drawImage(drawn, 0, 0);
  else {
    origins.forEach(([x, y], tile) => overlay(context, state, maps.subarray(tile * g * g, (tile + 1) * g * g), thumb,
                                              x, y));
    tilesDrawn.set(maps, canvas);
  }
  canvas.showing = off ? null : maps;
  Object.assign(context, { font: "bold 20px sans-serif", textAlign: "center", textBaseline: "middle" });
  for (const index of off ?? []) {
    const [x, y] = origins[Math.floor(index / heads) * (heads + 1) + (index % heads)];
    context.fillStyle = "rgba(90, 90, 90, 0.72)";
    context.fillRect(x, y, thumb, thumb);
    context.fillStyle = "#fff";
    context.fillText("off", x + thumb / 2, y + thumb / 2);
  }
}
