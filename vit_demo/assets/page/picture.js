// The live views' pictures, drawn as render.overlay draws them on the server: the input upsampled (nearest for digits,
// bicubic for photos), the map upsampled bicubic as torch's F.interpolate does it (align_corners=False, A = -0.75,
// edges clamped), coloured through the server's lookup table and blended as PIL's Image.blend does (truncated).
// Made for speed: a stroke redraws some 100 of these, 1.3 million pixels, within a frame. Each output pixel is four
// taps of a row already resized vertically, and the colour and the blend are one table lookup per channel.

export function decode(text) {
  // base64 -> bytes.
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

const A = -0.75; // torch's bicubic coefficient
const near = (x) => ((A + 2) * x - (A + 3)) * x * x + 1; // |x| <= 1
const far = (x) => ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; // 1 < |x| < 2
const tapsMade = new Map(); // "n/size/smooth" -> the taps, made once

function taps(n, size, smooth) {
  // Output i of a resize from n to size samples as four weighted inputs: {index, weight}, (size * 4) each; an edge's
  // clamped taps repeat an index (their weights add, as in the dense resize matrix). Nearest: one tap of weight 1.
  const id = `${n}/${size}/${smooth}`;
  if (tapsMade.has(id)) return tapsMade.get(id);
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
  const made = { index, weight };
  tapsMade.set(id, made);
  return made;
}

function resizeRows(values, h, w, size, smooth) {
  // (h, w) -> (size, w): each output row four weighted input rows.
  const { index, weight } = taps(h, size, smooth), out = new Float32Array(size * w);
  for (let i = 0; i < size; i++) {
    const t = i * 4, o = i * w;
    const r0 = index[t] * w, r1 = index[t + 1] * w, r2 = index[t + 2] * w, r3 = index[t + 3] * w;
    const w0 = weight[t], w1 = weight[t + 1], w2 = weight[t + 2], w3 = weight[t + 3];
    for (let k = 0; k < w; k++)
      out[o + k] = w0 * values[r0 + k] + w1 * values[r1 + k] + w2 * values[r2 + k] + w3 * values[r3 + k];
  }
  return out;
}

function base(state, size) {
  // The tab's input as a (size, size, 3) picture, as render.base_picture makes it; kept with the image's numbers.
  const { numbers, image } = state, bases = (state.bases ??= {});
  if (bases[size]) return bases[size];
  const { height: h, width: w, channels } = numbers, picture = new Uint8Array(size * size * 3);
  const { index, weight } = taps(w, size, numbers.smooth), channel = new Float32Array(h * w);
  for (let c = 0; c < 3; c++) {
    for (let p = 0; p < h * w; p++) channel[p] = image[p * channels + (channels === 1 ? 0 : c)];
    const rows = resizeRows(channel, h, w, size, numbers.smooth);
    for (let i = 0, p = 0; i < size; i++)
      for (let x = 0, t = 0; x < size; x++, t += 4, p++) {
        const r = i * w, v = rows[r + index[t]] * weight[t] + rows[r + index[t + 1]] * weight[t + 1] +
          rows[r + index[t + 2]] * weight[t + 2] + rows[r + index[t + 3]] * weight[t + 3];
        picture[p * 3 + c] = Math.round(Math.min(Math.max(v, 0), 255));
      }
  }
  return (bases[size] = picture);
}

function blendTables(state) {
  // Per channel, (256 levels, 256 inputs) -> the blended byte: Math.trunc(below + alpha * (colour - below)), PIL's.
  if (state.blend) return state.blend;
  const { colormap, numbers } = state, alpha = numbers.alpha;
  state.blend = [0, 1, 2].map((c) => {
    const table = new Uint8Array(256 * 256);
    for (let level = 0; level < 256; level++)
      for (let below = 0; below < 256; below++)
        table[(level << 8) | below] = Math.trunc(below + alpha * (colormap[level * 3 + c] - below));
    return table;
  });
  return state.blend;
}

const scratch = new Map(); // size -> an ImageData to fill and put (putImageData copies it)

export function overlay(context, state, map, grid, size, x, y) {
  // One (grid, grid) map of levels 0..255 over the tab's input, size pixels a side, at (x, y) of the canvas;
  // map null: the input alone.
  const under = base(state, size);
  if (!scratch.has(size)) scratch.set(size, context.createImageData(size, size));
  const picture = scratch.get(size), out = new Uint32Array(picture.data.buffer); // RGBA bytes, little-endian words
  if (!map) {
    for (let p = 0; p < size * size; p++)
      out[p] = 0xff000000 | (under[p * 3 + 2] << 16) | (under[p * 3 + 1] << 8) | under[p * 3];
    return context.putImageData(picture, x, y);
  }
  const rows = resizeRows(map, grid, grid, size, true), { index, weight } = taps(grid, size, true); // (size, grid)
  const [red, green, blue] = blendTables(state);
  for (let i = 0, p = 0; i < size; i++) {
    const r = i * grid;
    for (let x = 0, t = 0; x < size; x++, t += 4, p++) {
      const heat = rows[r + index[t]] * weight[t] + rows[r + index[t + 1]] * weight[t + 1] +
        rows[r + index[t + 2]] * weight[t + 2] + rows[r + index[t + 3]] * weight[t + 3];
      const level = (heat <= 0 ? 0 : heat >= 255 ? 255 : heat | 0) << 8, q = p * 3;
      out[p] = 0xff000000 | (blue[level | under[q + 2]] << 16) | (green[level | under[q + 1]] << 8) | red[level | under[q]];
    }
  }
  context.putImageData(picture, x, y);
}

export function drawTiles(canvas, context, state, maps) {
  // A tile per layer and head (and each layer's mean), at the origins render.attention_grid_layout gave.
  const g = state.numbers.grid, thumb = Number(canvas.dataset.thumb);
  (canvas.origins ??= JSON.parse(canvas.dataset.origins)).forEach(([x, y], tile) =>
    overlay(context, state, maps.subarray(tile * g * g, (tile + 1) * g * g), g, thumb, x, y));
}

export function greyOff(canvas, context, heads, off) {
  // Over a grid of tiles (drawTiles), the heads switched off (layer * heads + head) greyed and marked "off".
  const thumb = Number(canvas.dataset.thumb), origins = (canvas.origins ??= JSON.parse(canvas.dataset.origins));
  context.font = "bold 20px sans-serif";
  context.textAlign = "center";
  context.textBaseline = "middle";
  for (const index of off) {
    const [x, y] = origins[Math.floor(index / heads) * (heads + 1) + (index % heads)];
    context.fillStyle = "rgba(90, 90, 90, 0.72)";
    context.fillRect(x, y, thumb, thumb);
    context.fillStyle = "#fff";
    context.fillText("off", x + thumb / 2, y + thumb / 2);
  }
}
