// A view the page draws itself (vit_demo/live_view.py), so that choosing what it shows costs no request. It
// follows render.overlay step for step: the input upsampled (nearest for digits, bicubic for photos), the map
// upsampled bicubic as torch's F.interpolate does it (align_corners=False, A = -0.75, edges clamped), coloured
// through the server's lookup table, and blended as PIL's Image.blend does (truncated).
// __PREFIX__: the tab (digit, photo). __VIEW__: "selected", the large view, whose value is the image's numbers
// (the input, every layer's [CLS] maps) and whose layer and head come from the tab's controls; "map", a single
// map (its own value) drawn over the same input (rollout, relevance); or "grid", a tile per layer and head over
// the frame render.attention_grid draws (the canvas' background), from the image's maps (value "") or from
// another model's (a training snapshot's: its value).
const PREFIX = "__PREFIX__";
const VIEW = "__VIEW__";
const live = ((window.vdLive ??= {})[PREFIX] ??= { state: null, views: [] }); // the tab's numbers, shared

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
  // The image's numbers, decoded; its input is upsampled once per size asked for (base).
  const numbers = JSON.parse(text);
  return { numbers, image: decode(numbers.image), maps: decode(numbers.maps), colormap: decode(numbers.colormap),
           bases: {} };
}

function base(size) {
  // The tab's input as a (size, size, 3) picture, as render.base_picture makes it.
  const { numbers, image, bases } = live.state;
  if (bases[size]) return bases[size];
  const pixels = numbers.height * numbers.width, picture = new Uint8ClampedArray(size * size * 3);
  for (let c = 0; c < 3; c++) {
    const channel = new Float64Array(pixels);
    for (let p = 0; p < pixels; p++) channel[p] = image[p * numbers.channels + (numbers.channels === 1 ? 0 : c)];
    const up = upsample(channel, numbers.height, numbers.width, size, numbers.smooth);
    for (let p = 0; p < size * size; p++) picture[p * 3 + c] = Math.round(Math.min(Math.max(up[p], 0), 255));
  }
  return (bases[size] = picture);
}

function overlay(context, map, grid, size, x, y) {
  // One (grid, grid) map of levels 0..255 over the tab's input, size pixels a side, at (x, y) of the canvas.
  const { numbers, colormap } = live.state;
  const under = base(size);
  const heat = upsample(Float64Array.from(map), grid, grid, size, true);
  const picture = context.createImageData(size, size);
  for (let p = 0; p < size * size; p++) {
    const level = Math.trunc(Math.min(Math.max(heat[p], 0), 255));
    for (let c = 0; c < 3; c++) {
      const below = under[p * 3 + c];
      picture.data[p * 4 + c] = Math.trunc(below + numbers.alpha * (colormap[level * 3 + c] - below));
    }
    picture.data[p * 4 + 3] = 255;
  }
  context.putImageData(picture, x, y);
}

function canvasFor(label) {
  // This view's canvas, cleared; null (and the canvas left empty) when there is nothing to draw.
  const canvas = element.querySelector("canvas.vd-live-canvas");
  if (!canvas) return null;
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  canvas.dataset.drawn = live.state && label ? label : ""; // what it shows, for tests
  return live.state && label ? context : null;
}

function paint(map, grid, label) {
  // One map over the tab's input, filling this view's canvas; map null: an empty canvas.
  const context = canvasFor(map && label);
  if (context) overlay(context, map, grid, live.state.numbers.size, 0, 0);
}

function chosen(layer, head) {
  // The layer (0-based) and the map's column (the heads, then their mean) asked for, or the tab's controls'.
  const { layers, heads } = live.state.numbers;
  layer ??= Number(document.querySelector(`#${PREFIX}-layer input[type=number]`)?.value ?? layers);
  head ??= document.querySelector(`#${PREFIX}-head input:checked`)?.value ?? "mean";
  const column = head === "mean" ? heads : Math.min(Math.max(Number(String(head).split(" ").pop()) - 1, 0), heads - 1);
  return [Math.min(Math.max(Math.round(layer), 1), layers) - 1, column];
}

function drawSelected(layer, head) {
  if (!live.state) return paint(null);
  const { numbers, maps } = live.state;
  const [l, column] = chosen(layer, head);
  const g = numbers.grid, offset = (l * (numbers.heads + 1) + column) * g * g;
  paint(maps.subarray(offset, offset + g * g), g, `${l + 1}/${column === numbers.heads ? "mean" : column + 1}`);
}

if (VIEW === "selected") {
  // The page's handle on the tab: redraw the large view (the layer and head controls' events), read the numbers.
  live.draw = drawSelected;
  live.numbers = () => props.value;
  watch("value", () => {
    live.state = props.value ? prepare(props.value) : null;
    drawSelected();
    for (const redraw of live.views) redraw(); // the other views lie over the same input
  });
  live.state = props.value ? prepare(props.value) : null;
  drawSelected();
} else if (VIEW === "grid") {
  let own = null; // another model's maps (L, H + 1, g, g), or null: the image's own
  const drawGrid = () => {
    const canvas = element.querySelector("canvas.vd-live-canvas");
    const context = canvasFor("grid");
    if (!context) return;
    const { numbers } = live.state, g = numbers.grid, thumb = Number(canvas.dataset.thumb);
    const maps = own ?? live.state.maps;
    JSON.parse(canvas.dataset.origins).forEach(([x, y], tile) =>
      overlay(context, maps.subarray(tile * g * g, (tile + 1) * g * g), g, thumb, x, y));
  };
  const read = () => {
    own = props.value ? decode(JSON.parse(props.value).maps) : null;
  };
  live.views.push(drawGrid);
  watch("value", () => {
    read();
    drawGrid();
  });
  read();
  drawGrid();
} else {
  let own = null; // this view's map: { grid, levels }
  const drawMap = () => {
    own ? paint(own.levels, own.grid, "map") : paint(null);
    const canvas = element.querySelector("canvas.vd-live-canvas");
    if (canvas) canvas.dataset.numbers = props.value ?? ""; // what it was drawn from, for tests (some 100 bytes)
  };
  const read = () => {
    const numbers = props.value ? JSON.parse(props.value) : null;
    own = numbers && { grid: numbers.grid, levels: decode(numbers.map) };
  };
  live.views.push(drawMap);
  watch("value", () => {
    read();
    drawMap();
  });
  read();
  drawMap();
}
