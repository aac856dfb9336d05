// A live view (vit_demo/live_view.py): draws one layer and head of [CLS] attention from the numbers the server
// sent once per image, so that changing the layer or the head costs no request. It follows render.overlay step
// for step: the input upsampled (nearest for digits, bicubic for photos), the map upsampled bicubic as torch's
// F.interpolate does it (align_corners=False, A = -0.75, edges clamped), coloured through the server's lookup
// table, and blended as PIL's Image.blend does (truncated). __PREFIX__ is the tab's prefix (digit, photo).
const PREFIX = "__PREFIX__";
let state = null; // the decoded numbers of the image in hand, and its upsampled input; null: no image

function decode(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

const A = -0.75; // torch's bicubic coefficient
const near = (x) => ((A + 2) * x - (A + 3)) * x * x + 1; // |x| <= 1
const far = (x) => ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; // 1 < |x| < 2

function resizeMatrix(n, size, smooth) {
  // (size, n), row-major: output sample i as a weighted sum of the n inputs.
  const matrix = new Float64Array(size * n);
  const scale = n / size;
  for (let i = 0; i < size; i++) {
    if (!smooth) {
      matrix[i * n + Math.min(Math.floor(i * scale), n - 1)] = 1;
      continue;
    }
    const source = scale * (i + 0.5) - 0.5;
    const first = Math.floor(source);
    const t = source - first;
    const weights = [far(t + 1), near(t), near(1 - t), far(2 - t)];
    for (let k = 0; k < 4; k++) matrix[i * n + Math.min(Math.max(first - 1 + k, 0), n - 1)] += weights[k];
  }
  return matrix;
}

function upsample(values, h, w, size, smooth) {
  // (h, w) -> (size, size): rows @ values @ cols^T, as render._upsample.
  const rows = resizeMatrix(h, size, smooth), cols = resizeMatrix(w, size, smooth);
  const half = new Float64Array(size * w);
  for (let i = 0; i < size; i++)
    for (let j = 0; j < h; j++) {
      const r = rows[i * h + j];
      if (r !== 0) for (let k = 0; k < w; k++) half[i * w + k] += r * values[j * w + k];
    }
  const out = new Float64Array(size * size);
  for (let i = 0; i < size; i++)
    for (let x = 0; x < size; x++) {
      let sum = 0;
      for (let k = 0; k < w; k++) sum += half[i * w + k] * cols[x * w + k];
      out[i * size + x] = sum;
    }
  return out;
}

function prepare(text) {
  const numbers = JSON.parse(text);
  const image = decode(numbers.image), pixels = numbers.height * numbers.width, size = numbers.size;
  const base = new Uint8ClampedArray(size * size * 3);
  for (let c = 0; c < 3; c++) {
    const channel = new Float64Array(pixels);
    for (let p = 0; p < pixels; p++) channel[p] = image[p * numbers.channels + (numbers.channels === 1 ? 0 : c)];
    const up = upsample(channel, numbers.height, numbers.width, size, numbers.smooth);
    for (let p = 0; p < size * size; p++) base[p * 3 + c] = Math.round(Math.min(Math.max(up[p], 0), 255));
  }
  return { numbers, base, maps: decode(numbers.maps), colormap: decode(numbers.colormap) };
}

function chosen(layer, head) {
  // The layer (0-based) and the map's column (the heads, then their mean) asked for, or the page's controls'.
  const { layers, heads } = state.numbers;
  layer ??= Number(document.querySelector(`#${PREFIX}-layer input[type=number]`)?.value ?? layers);
  head ??= document.querySelector(`#${PREFIX}-head input:checked`)?.value ?? "mean";
  const column = head === "mean" ? heads : Math.min(Math.max(Number(String(head).split(" ").pop()) - 1, 0), heads - 1);
  return [Math.min(Math.max(Math.round(layer), 1), layers) - 1, column];
}

function draw(layer, head) {
  const canvas = element.querySelector("canvas.vd-live-canvas");
  if (!canvas) return;
  const context = canvas.getContext("2d");
  if (!state) {
    context.clearRect(0, 0, canvas.width, canvas.height);
    canvas.dataset.drawn = "";
    return;
  }
  const { numbers, base, maps, colormap } = state;
  const [l, column] = chosen(layer, head);
  const g = numbers.grid, size = numbers.size, offset = (l * (numbers.heads + 1) + column) * g * g;
  const heat = upsample(Float64Array.from(maps.subarray(offset, offset + g * g)), g, g, size, true);
  const picture = context.createImageData(size, size);
  for (let p = 0; p < size * size; p++) {
    const level = Math.trunc(Math.min(Math.max(heat[p], 0), 255));
    for (let c = 0; c < 3; c++) {
      const under = base[p * 3 + c];
      picture.data[p * 4 + c] = Math.trunc(under + numbers.alpha * (colormap[level * 3 + c] - under));
    }
    picture.data[p * 4 + 3] = 255;
  }
  context.putImageData(picture, 0, 0);
  canvas.dataset.drawn = `${l + 1}/${column === numbers.heads ? "mean" : column + 1}`; // for tests: what it shows
}

function update() {
  state = props.value ? prepare(props.value) : null;
  draw();
}

// The page's handle on this view: redraw it (the layer and head controls' events), and read its numbers (tests).
(window.vdLive ??= {})[PREFIX] = { draw, numbers: () => props.value };
watch("value", update);
update();
