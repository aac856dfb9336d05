// A view the page draws itself (vit_demo/live_view.py), so that choosing what it shows costs no request. It
// follows render.overlay step for step: the input upsampled (nearest for digits, bicubic for photos), the map
// upsampled bicubic as torch's F.interpolate does it (align_corners=False, A = -0.75, edges clamped), coloured
// through the server's lookup table, and blended as PIL's Image.blend does (truncated).
//
// __PREFIX__: the tab (digit, photo). __VIEW__, what this view draws:
//   "selected"  the large view; its value is the image's numbers (the prediction, the input, every layer's [CLS]
//               maps, and the answers for rollout, the class shown and the first query patch), which every other
//               view of the tab draws from, or a message in place of a prediction; an upload's event sets it, the
//               canvas hands it the answer to a drawing (receive); its layer and head come from the tab's controls;
//   "prediction" the top class large, the top three's probabilities as bars, the info line under them and the
//               notice above them (or the message, or the tab's prompt);
//   "patches"   the input cut into numbered patches (render.patch_grid), the query patch outlined; a click
//               chooses the query patch;
//   "input"     the input alone, as the model reads it;
//   "cls"       a tile per layer and head (render.attention_grid) of where [CLS] looks;
//   "query"     the same for where the query patch looks;
//   "training"  the same through the model at the training slider's snapshot (the last: the trained model);
//   "rollout"   one map over the input;
//   "relevance" the relevance of the class shown, likewise; while it is off screen (below the fold, or in talk mode)
//               the canvas does not ask for it with a drawing, and it asks the server itself once it comes into view;
//   "board", "lens", "patching": what each head does (assets/heads_view.js, which runs in this scope).
// With heads switched off (the board: live.knockout), every view shows the knocked-out model and says so: the
// prediction, the large view, the [CLS] grid, the rollout and the training view's trained model from the board's
// answer (the server function "knockout"); the query, relevance and lens views from answers asked for with the heads
// switched off, kept apart from the intact model's (``heldAs``). The training slider's earlier models keep every head:
// the board switches off the trained model's.
// What a view lacks (another patch, class or snapshot) it asks the server for once (the tab's server functions:
// they compute it from the pixels sent), and keeps with the image's key: a late answer for an earlier image is
// never drawn over a later one.
const PREFIX = "__PREFIX__";
const VIEW = "__VIEW__";
const live = ((window.vdLive ??= {})[PREFIX] ??= {
  state: null, // the image's numbers, decoded
  message: null, // what is said in place of a prediction, where there is no image (HTML)
  reading: null, // the prediction alone, while the pen is down (the views show the last drawing the pen left)
  views: [], // every view's redraw
  answers: {}, // image key -> kind ("query", "relevance", "snapshot") -> which -> the answer
  pending: {}, // "key/kind/which" -> true while asked; false once the server failed to answer
  ask: {}, // kind -> the server function that answers it
  patch: null, // the query patch
  choice: null, // the class picker's choice
  position: null, // the training slider's position
  onScreen: new Set(), // the views on screen now (or nearly): the relevance and lens views ask the server only then
  later: new Set(), // views off screen, to be redrawn once those on screen are (redrawAll)
  laterTimer: null,
  knockout: { off: [], mode: "mean" }, // the heads switched off (layer * heads + head, sorted) and how
  patching: { clean: null, corrupt: null, replies: {}, pending: {} }, // the two images kept for patching
});

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

const tapsMade = new Map(); // "n/size/smooth" -> taps: the resize matrix's nonzero entries, made once

function taps(n, size, smooth) {
  // resizeMatrix's nonzero entries, row by row in column order (what a dense product adds but for zeros):
  // {start (size + 1), index, weight}, output i drawing on index[start[i]..start[i + 1]).
  const id = `${n}/${size}/${smooth}`;
  if (tapsMade.has(id)) return tapsMade.get(id);
  const matrix = resizeMatrix(n, size, smooth), start = new Int32Array(size + 1), index = [], weight = [];
  for (let i = 0; i < size; i++) {
    for (let j = 0; j < n; j++) if (matrix[i * n + j] !== 0) (index.push(j), weight.push(matrix[i * n + j]));
    start[i + 1] = index.length;
  }
  const made = { start, index: Int32Array.from(index), weight: Float64Array.from(weight) };
  tapsMade.set(id, made);
  return made;
}

function upsample(values, h, w, size, smooth) {
  // (h, w) -> (size, size): rows @ values @ cols^T, as render._upsample, summing only the nonzero terms (the same
  // sums: a dense product adds zeros) -- a 28 x 28 digit to 336 x 336 in a twentieth of the work.
  const rows = taps(h, size, smooth), cols = taps(w, size, smooth);
  const half = new Float64Array(size * w);
  for (let i = 0; i < size; i++)
    for (let t = rows.start[i]; t < rows.start[i + 1]; t++) {
      const j = rows.index[t], r = rows.weight[t];
      for (let k = 0; k < w; k++) half[i * w + k] += r * values[j * w + k];
    }
  const out = new Float64Array(size * size);
  for (let i = 0; i < size; i++)
    for (let x = 0; x < size; x++) {
      let sum = 0;
      for (let t = cols.start[x]; t < cols.start[x + 1]; t++) sum += half[i * w + cols.index[t]] * cols.weight[t];
      out[i * size + x] = sum;
    }
  return out;
}

function prepare(numbers) {
  // The image's numbers, decoded; its input is upsampled once per size asked for (base).
  return { numbers, key: numbers.key, image: decode(numbers.image), maps: decode(numbers.maps),
           colormap: decode(numbers.colormap), bases: {} };
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
  // One (grid, grid) map of levels 0..255 over the tab's input, size pixels a side, at (x, y) of the canvas;
  // map null: the input alone.
  const { numbers, colormap } = live.state;
  const under = base(size);
  const heat = map && upsample(Float64Array.from(map), grid, grid, size, true);
  const picture = context.createImageData(size, size);
  for (let p = 0; p < size * size; p++) {
    const level = heat && Math.trunc(Math.min(Math.max(heat[p], 0), 255));
    for (let c = 0; c < 3; c++) {
      const below = under[p * 3 + c];
      picture.data[p * 4 + c] = heat ? Math.trunc(below + numbers.alpha * (colormap[level * 3 + c] - below)) : below;
    }
    picture.data[p * 4 + 3] = 255;
  }
  context.putImageData(picture, x, y);
}

const view = () => element.querySelector("canvas.vd-live-canvas"); // looked up each time: a new value redraws it

function clear(drawn, caption) {
  // This view's canvas, cleared, and its caption; the context to draw on, or null when there is nothing to draw.
  // canvas.dataset.drawn says what it shows, for tests ("" nothing).
  const canvas = view(), context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  canvas.dataset.drawn = live.state && drawn ? drawn : "";
  const box = element.querySelector(".vd-caption");
  if (box) box.innerHTML = live.state ? caption ?? "" : "";
  return live.state && drawn ? context : null;
}

function drawTiles(context, maps) {
  // A tile per layer and head (and each layer's mean), at the origins render.attention_grid_layout gave.
  const canvas = view(), g = live.state.numbers.grid, thumb = Number(canvas.dataset.thumb);
  JSON.parse(canvas.dataset.origins).forEach(([x, y], tile) =>
    overlay(context, maps.subarray(tile * g * g, (tile + 1) * g * g), g, thumb, x, y));
}

function greyOff(context, knocked) {
  // Over a grid of tiles (drawTiles), the heads switched off greyed and marked "off".
  const heads = live.state.numbers.heads, thumb = Number(view().dataset.thumb);
  const origins = JSON.parse(view().dataset.origins);
  context.font = "bold 20px sans-serif";
  context.textAlign = "center";
  context.textBaseline = "middle";
  for (const index of knocked.off) {
    const [x, y] = origins[Math.floor(index / heads) * (heads + 1) + (index % heads)];
    context.fillStyle = "rgba(90, 90, 90, 0.72)";
    context.fillRect(x, y, thumb, thumb);
    context.fillStyle = "#fff";
    context.fillText("off", x + thumb / 2, y + thumb / 2);
  }
}

function redrawAll(which = () => true) {
  // Every view of the tab, or those ``which`` picks: the prediction and the views on screen (or nearly) at once, the
  // others once the browser has painted those (live.later), so that what the user looks at comes first.
  live.views = live.views.filter((v) => v.element.isConnected); // a view Gradio took out of the page goes
  for (const v of live.views.filter(which)) {
    if (v.prediction || live.onScreen.has(v.name)) v.draw();
    else live.later.add(v);
  }
  if (live.later.size && !live.laterTimer)
    live.laterTimer = setTimeout(() => {
      const views = [...live.later];
      live.later.clear();
      live.laterTimer = null;
      for (const v of views) if (v.element.isConnected) v.draw();
    }, 0);
}

// The views that show the knocked-out model, or say that heads are off: a head toggle redraws these alone.
const FOLLOWS_KNOCKOUT = ["prediction", "selected", "cls", "rollout", "query", "relevance", "training", "board", "lens"];
const redrawKnockout = () => redrawAll((v) => v.knockout);
const ON_SCREEN_MARGIN = "100px"; // a view this close to the screen counts as on it: its numbers are asked for early

function answer(kind, which) {
  // The server's answer for the image in hand, or null.
  return (live.state && live.answers[live.state.key]?.[kind]?.[which]) || null;
}


function knockoutId() {
  // The heads switched off and how, as the answers for them are kept ("" every head on).
  const k = live.knockout;
  return k.off.length ? `${k.mode}:${k.off.join(".")}` : "";
}

function heldAs(which) {
  // What a view's answer for ``which`` (a patch, a class) is kept under: with heads off, the knocked-out model's.
  const id = knockoutId();
  return id ? `${which}@${id}` : String(which);
}

const viewAnswer = (kind, which) => answer(kind, heldAs(which)); // the answer for the model as the board has it

function offRequest() {
  // The heads switched off as a server function reads them: {off: [[layer, head], ...] (0-based), mode}.
  const k = live.knockout, heads = live.state.numbers.heads;
  return { off: k.off.map((i) => [Math.floor(i / heads), i % heads]), mode: k.mode };
}

function waiting(kind, which, request, followsKnockout = true) {
  // What a view says while its numbers are asked for: the first time, it asks the server, which computes them
  // from the pixels sent (with the heads the board switched off, unless ``followsKnockout`` is false: then kept
  // under ``which``, else under ``heldAs(which)``); when the server failed, it says so, and the next choice asks again.
  const held = followsKnockout ? heldAs(which) : String(which);
  const id = `${live.state.key}/${kind}/${held}`;
  if (live.pending[id] === false) {
    delete live.pending[id];
    return "The server did not answer. Choose again to retry.";
  }
  if (!live.pending[id] && live.ask[kind]) {
    live.pending[id] = true;
    const key = live.state.key, off = followsKnockout && live.knockout.off.length ? offRequest() : {};
    live.ask[kind]({ image: live.state.numbers.image, ...request, ...off }).then((reply) => {
      if (reply && !reply.error && reply.key === key) {
        ((live.answers[key] ??= {})[kind] ??= {})[held] = reply;
        delete live.pending[id];
      } else live.pending[id] = false;
      if (live.state?.key === key) redrawAll();
    });
  }
  return "Asking the server…";
}

function knockoutNow() {
  // The heads switched off, for the image in hand: null when every head is on (or there is no image); else how many,
  // how, the id its answer is kept under, the answer (null until it comes) and why there is none (error). The first
  // view to draw asks the server; a failure is kept until the choice changes (setKnockout), so no view asks again.
  const k = live.knockout;
  if (!live.state || !k.off.length) return null;
  const id = knockoutId(), key = live.state.key, asked = `${key}/knockout/${id}`;
  const reply = answer("knockout", id);
  const found = { count: k.off.length, mode: k.mode, off: new Set(k.off), id, reply, error: null };
  if (reply || !live.ask.knockout) return found;
  if (typeof live.pending[asked] === "string") found.error = live.pending[asked];
  else if (!live.pending[asked]) {
    live.pending[asked] = true;
    live.ask.knockout({ image: live.state.numbers.image, ...offRequest() })
      .catch(() => null)
      .then((reply) => {
        if (reply && !reply.error && reply.key === key) {
          ((live.answers[key] ??= {}).knockout ??= {})[id] = reply;
          delete live.pending[asked];
        } else live.pending[asked] = reply?.error ? `The server says: ${reply.error}` : "The server did not answer.";
        if (live.state?.key === key) redrawKnockout();
      });
  }
  return found;
}

function setKnockout(off, mode) {
  // Switch these heads off (layer * heads + head; [] all on) with this ablation, and redraw the views that follow;
  // a choice that failed before is asked again.
  live.knockout = { off: [...new Set(off)].sort((a, b) => a - b), mode: mode ?? live.knockout.mode };
  for (const [id, value] of Object.entries(live.pending)) if (typeof value === "string") delete live.pending[id];
  redrawKnockout();
}

function shownMaps(knocked) {
  // The [CLS] maps the views show: the knocked-out model's where heads are off and its answer has come.
  return knocked?.reply ? (knocked.reply.levels ??= decode(knocked.reply.maps)) : live.state.maps;
}

function knockedCaption(knocked, own = false) {
  // What a view that follows the knockout adds to its caption, and what its canvas says it shows (data-ablated);
  // ``own``: the view drew an answer of its own, asked for with these heads off (not the board's answer).
  view().dataset.ablated = knocked && (own || knocked.reply) ? knocked.id : "";
  if (!knocked) return "";
  if (!own && !knocked.reply) return ` · <i>switching heads off: ${knocked.error ?? "asking the server…"}</i>`;
  return ` · <b class="vd-knocked">with ${knocked.count} head${knocked.count === 1 ? "" : "s"} off</b>`;
}

function chosen(layer, head) {
  // The layer (0-based) and the map's column (the heads, then their mean) asked for, or the tab's controls'.
  const { layers, heads } = live.state.numbers;
  layer ??= Number(document.querySelector(`#${PREFIX}-layer input[type=number]`)?.value ?? layers);
  head ??= document.querySelector(`#${PREFIX}-head input:checked`)?.value ?? "mean";
  const column = head === "mean" ? heads : Math.min(Math.max(Number(String(head).split(" ").pop()) - 1, 0), heads - 1);
  return [Math.min(Math.max(Math.round(layer), 1), layers) - 1, column];
}

const percent = (p) => `${(100 * p).toFixed(1)}%`;

const draws = {
  prediction() {
    const knocked = live.reading ? null : knockoutNow();
    const numbers = live.reading ?? knocked?.reply ?? live.state?.numbers;
    const notice = element.querySelector(".vd-notice"), info = element.querySelector(".vd-info");
    const about = live.reading ?? live.state?.numbers; // the image's own notice (unfamiliar), with heads off too
    notice.innerHTML = about?.notice ?? "";
    notice.hidden = !about?.notice;
    const ablated = element.querySelector(".vd-ablated"), count = live.knockout.off.length;
    ablated.hidden = !count;
    const heads = `${count} head${count === 1 ? "" : "s"}`, reset = '<button type="button" class="vd-heads-reset">' +
      "All heads on</button>";
    ablated.innerHTML = !count ? "" : knocked?.reply ?
      `<b>${heads} switched off</b> (${knocked.mode}-ablation)<span class="vd-ablated-which">: every view shows the ` +
      `model without them</span>. ${reset}` :
      knocked ? `<b>Switching ${heads} off:</b> ${knocked.error ?? "asking the server…"} ${reset}` :
      `<b>${heads} switched off</b>: ${live.reading ? "their answer follows when the pen lifts" : "for the next image"}` +
      `. ${reset}`;
    element.querySelector(".vd-top-class").textContent = numbers?.label ?? "";
    const ranked = Object.entries(numbers?.probs ?? {}).sort((a, b) => b[1] - a[1]).slice(0, 3);
    element.querySelector(".vd-probs").innerHTML = ranked.map(([name, p]) =>
      `<div class="vd-prob-row"><span class="vd-prob-name">${name}</span><span class="vd-prob"><span ` +
      `style="width: ${percent(p)}"></span></span><span class="vd-prob-share">${percent(p)}</span></div>`).join("");
    info.innerHTML = numbers?.info ?? live.message ?? info.dataset.prompt;
  },
  selected(layer, head) {
    if (!live.state) return clear(null);
    const { numbers, maps } = live.state;
    const [l, column] = chosen(layer, head);
    const g = numbers.grid, offset = (l * (numbers.heads + 1) + column) * g * g;
    const heads = column === numbers.heads ? `the mean of its ${numbers.heads} heads` : `head ${column + 1}`;
    const knocked = knockoutNow(), shown = shownMaps(knocked);
    const off = knocked?.reply && knocked.off.has(l * numbers.heads + column) ? " (switched off: the attention it " +
      "would have used; its output is replaced)" : "";
    const context = clear(`${l + 1}/${column === numbers.heads ? "mean" : column + 1}`,
                          `Where <b>[CLS]</b> attends: layer ${l + 1} of ${numbers.layers}, ${heads}${off}` +
                          knockedCaption(knocked));
    overlay(context, shown.subarray(offset, offset + g * g), g, numbers.size, 0, 0);
  },
  patches() {
    const context = clear(live.state && `patch ${live.patch}`);
    if (!context) return;
    const g = live.state.numbers.grid, size = view().width, step = size / g;
    overlay(context, null, g, size, 0, 0);
    context.drawImage(element.querySelector("img.vd-patch-layer"), 0, 0, size, size);
    const row = Math.floor(live.patch / g), col = live.patch % g;
    context.strokeStyle = "rgb(0, 255, 120)"; // render.mark_patch's outline, 3 pixels inside the patch
    context.lineWidth = 3;
    context.strokeRect(col * step + 1.5, row * step + 1.5, step - 3, step - 3);
  },
  input() {
    const context = clear("input");
    if (context) overlay(context, null, live.state.numbers.grid, view().width, 0, 0);
  },
  cls() {
    const knocked = live.state && knockoutNow();
    const context = clear("grid", knocked && `The model${knockedCaption(knocked)}${knocked.reply ?
      ": the heads switched off are greyed." : ""}`);
    if (!live.state) view().dataset.ablated = "";
    if (!context) return;
    drawTiles(context, shownMaps(knocked));
    if (knocked?.reply) greyOff(context, knocked);
  },
  query() {
    if (!live.state) return clear(null);
    const knocked = knockoutNow(), reply = viewAnswer("query", live.patch);
    if (!reply) {
      view().dataset.ablated = "";
      return clear(null, `Where patch ${live.patch} looks: ${waiting("query", live.patch, { patch: live.patch })}`);
    }
    const context = clear(`query ${live.patch}`, reply.title + knockedCaption(knocked, true));
    drawTiles(context, (reply.levels ??= decode(reply.maps)));
    if (knocked) greyOff(context, knocked);
  },
  training() {
    if (!live.state) return clear(null);
    const { positions, note } = view().dataset, last = Number(positions);
    const position = Math.min(Math.max(Math.round(live.position ?? last), 1), last);
    if (position === last) {
      const knocked = knockoutNow(), context = clear("trained", note + knockedCaption(knocked));
      drawTiles(context, shownMaps(knocked));
      if (knocked?.reply) greyOff(context, knocked);
      return;
    }
    view().dataset.ablated = "";
    const reply = answer("snapshot", position);
    if (!reply) return clear(null, waiting("snapshot", position, { position }, false));
    const kept = live.knockout.off.length ? " · <i>every head on: the board switches off the trained model's</i>" : "";
    drawTiles(clear(`snapshot ${position}`, reply.note + kept), (reply.levels ??= decode(reply.maps)));
  },
  rollout() {
    const knocked = live.state && knockoutNow();
    const reply = knocked?.reply?.rollout ?? answer("rollout", "map");
    const context = clear(reply && "map", knocked && `The model${knockedCaption(knocked)}`);
    if (!live.state) view().dataset.ablated = "";
    if (context) overlay(context, (reply.levels ??= decode(reply.map)), reply.grid, view().width, 0, 0);
    view().dataset.numbers = reply ? JSON.stringify({ grid: reply.grid, map: reply.map }) : ""; // for tests
  },
  relevance() {
    if (!live.state) return clear(null);
    const canvas = view(), knocked = knockoutNow();
    canvas.dataset.ablated = "";
    canvas.dataset.numbers = "";
    if (knocked && !knocked.reply) return clear(null, `Why this class?${knockedCaption(knocked)}`); // its class waits
    const predicted = knocked?.reply.label ?? live.state.numbers.label; // the class the model as it is now says
    const label = !live.choice || live.choice === canvas.dataset.predicted ? predicted : live.choice;
    const reply = viewAnswer("relevance", label);
    if (!reply && !live.onScreen.has(VIEW)) return clear(null, `Why ${label}?`); // asked for once it is in view
    if (!reply) return clear(null, `Why ${label}? ${waiting("relevance", label, { label })}`);
    canvas.dataset.numbers = JSON.stringify({ grid: reply.grid, map: reply.map }); // for tests
    overlay(clear(`relevance ${label}`, reply.title + knockedCaption(knocked, true)), (reply.levels ??= decode(reply.map)),
            reply.grid, canvas.width, 0, 0);
  },
};
/* __MORE_VIEWS__ */
const draw = draws[VIEW];

if (typeof server !== "undefined") Object.assign(live.ask, server); // this view's server functions, by kind
live.views.push({ element, draw, name: VIEW, prediction: VIEW === "prediction",
                  knockout: FOLLOWS_KNOCKOUT.includes(VIEW) });
new IntersectionObserver(([entry]) => {
  // Whether this view is on screen (or within ON_SCREEN_MARGIN of it): one that comes into view is drawn again.
  if (entry.isIntersecting === live.onScreen.has(VIEW)) return;
  if (entry.isIntersecting) live.onScreen.add(VIEW);
  else live.onScreen.delete(VIEW);
  if (entry.isIntersecting) draw();
}, { rootMargin: ON_SCREEN_MARGIN }).observe(element);
if (VIEW === "selected") {
  // The page's handle on the tab: the controls' events call these; tests read the numbers.
  live.draw = draw;
  live.numbers = () => props.value;
  live.choose = (patch) => ((live.patch = patch), redrawAll());
  live.explain = (choice) => ((live.choice = choice), redrawAll());
  live.train = (position) => ((live.position = position), redrawAll());
  let shown = null; // the value read last
  const read = () => {
    // The image's numbers, and the stroke's answers for it, with those asked for the same image before (a stroke
    // that changed nothing the model reads); earlier images' answers go. A message in place of numbers: no image.
    if (props.value === shown) return false;
    shown = props.value;
    const value = props.value ? JSON.parse(props.value) : null;
    live.message = value?.message ?? null;
    live.state = value && !value.message ? prepare(value) : null;
    const answers = (live.state && live.answers[live.state.key]) || {};
    for (const [kind, replies] of Object.entries(live.state?.numbers.answers ?? {}))
      Object.assign((answers[kind] ??= {}), replies);
    live.answers = live.state ? { [live.state.key]: answers } : {};
    live.patch = live.state?.numbers.patch ?? null;
    return true;
  };
  live.receive = (answer) => {
    // The canvas' answer to a drawing ("": it was cleared): the tab's value, as an upload's event sets it; while
    // the pen is down, the prediction alone, which only the prediction view shows.
    const redrawPrediction = () => live.views.filter((v) => v.prediction).forEach((v) => v.draw());
    live.reading = answer?.reading ? answer : null;
    if (live.reading) return redrawPrediction();
    props.value = answer === "" ? "" : JSON.stringify(answer);
    if (read()) redrawAll();
    else redrawPrediction(); // the same numbers as before the pen went down: the reading gives way to them
  };
  watch("value", () => read() && redrawAll());
  read();
} else if (VIEW === "prediction") {
  element.addEventListener("click", (event) => {
    if (event.target.closest(".vd-heads-reset")) setKnockout([]);
  });
} else if (VIEW === "patches") {
  element.addEventListener("click", (event) => {
    if (!live.state || event.target !== view()) return;
    const box = view().getBoundingClientRect(), g = live.state.numbers.grid;
    const col = Math.min(Math.floor(((event.clientX - box.left) / box.width) * g), g - 1);
    const row = Math.min(Math.floor(((event.clientY - box.top) / box.height) * g), g - 1);
    live.choose(row * g + col);
  });
}
if (VIEW === "selected") redrawAll(); // the views that loaded before it, too
else draw();
