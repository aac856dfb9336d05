// Export for slides, made in the page (its section: vit_demo/page/page.html) as vit_demo/pictures/slides.py makes
// it on the server: the chosen view of the image in hand as a PNG at least SLIDE_WIDTH pixels wide, or a GIF of where
// [CLS] looks layer by layer, drawn afresh at that size from the tab's numbers with the views' drawing (picture.js),
// named as slides.slide_name names it and downloaded by the one click that asked for it (the status line says so, and
// keeps a link to download it again). It shows the intact model, every head on.
import { mapAt } from "./numbers.js";
import { overlay } from "./picture.js";
import { answer, tabStore } from "./store.js";
import { chosen } from "./views/selected.js";

const SLIDE_WIDTH = 1600, GIF_SIZE = 720, GIF_FRAME_MS = 900, CAPTION_HEIGHT = 64; // slides.py's
const TEXT = "rgb(20, 20, 20)", GRID_LINE = "rgb(0, 170, 255)"; // render.py's
const NO_IMAGE = "Draw or upload an image first: the export is made from the image in hand.";
// The GIF encoder, fetched with the page so that a GIF needs no network; without it the page runs, its GIF fails.
const encoder = import("../vendor/gifenc/gifenc.esm.js");

function sheet(width, height) {
  // A white canvas to draw a slide on, and its context (kept in memory: it is drawn with putImageData and read back).
  const canvas = Object.assign(document.createElement("canvas"), { width, height });
  const context = canvas.getContext("2d", { willReadFrequently: true });
  Object.assign(context, { fillStyle: "#fff" }).fillRect(0, 0, width, height);
  Object.assign(context, { fillStyle: TEXT, textAlign: "center", textBaseline: "middle" });
  return [canvas, context];
}

function grid(state, maps, { size: [width, height], thumb, origins, font, columns, rows }) {
  // render.attention_grid at slide width, by its geometry (render.attention_grid_geometry, in the page's HTML): a
  // tile per layer and head, then each layer's mean, labelled.
  const { heads, grid: g } = state.numbers, [canvas, context] = sheet(width, height);
  context.font = `${font}px sans-serif`;
  columns.forEach(([x, y], head) => context.fillText(head === heads ? "mean" : `head ${head + 1}`, x, y));
  rows.forEach(([x, y], layer) => context.fillText(`layer ${layer + 1}`, x, y));
  origins.forEach(([x, y], tile) => overlay(context, state, maps.subarray(tile * g * g, (tile + 1) * g * g), thumb,
                                            x, y));
  return canvas;
}

function single(state, map) {
  // One (g, g) map (null: none) over the input, SLIDE_WIDTH a side (render.overlay).
  const [canvas, context] = sheet(SLIDE_WIDTH, SLIDE_WIDTH);
  overlay(context, state, map, SLIDE_WIDTH);
  return canvas;
}

function patchGrid(state) {
  // render.patch_grid: the input cut into its patches, each numbered in reading order.
  const canvas = single(state, null), context = canvas.getContext("2d");
  const g = state.numbers.grid, step = SLIDE_WIDTH / g;
  Object.assign(context, { strokeStyle: GRID_LINE, lineWidth: 2 });
  context.beginPath();
  for (let i = 1; i < g; i++) {
    context.moveTo(i * step, 0), context.lineTo(i * step, SLIDE_WIDTH);
    context.moveTo(0, i * step), context.lineTo(SLIDE_WIDTH, i * step);
  }
  context.stroke();
  Object.assign(context, { font: `${Math.floor(step / 3.5)}px sans-serif`, textAlign: "left", textBaseline: "top",
                           fillStyle: "#fff", strokeStyle: TEXT, lineWidth: 4, lineJoin: "round" });
  for (let p = 0; p < g * g; p++) {
    const x = (p % g) * step + 6, y = Math.floor(p / g) * step + 4;
    context.strokeText(String(p), x, y), context.fillText(String(p), x, y);
  }
  return canvas;
}

async function intact(live, kind, which, request) {
  // The intact model's answer for the image in hand: kept already (store.js), or asked of the tab's source now.
  if (!live.source) throw new Error("the model is still loading: try again in a moment");
  return answer(live, kind, which, false) ?? live.source[kind]({ image: live.state.numbers.image, ...request });
}

async function slide(live, view, geometry, { layer, column, head, patch, explained }) {
  // The chosen view: its name as slides.slide_name gives it (less the model and label), and its canvas.
  const { state } = live, { numbers } = state;
  if (view === "cls-grid") return ["cls-grid", grid(state, numbers.maps, geometry)];
  if (view === "layer")
    return [`layer${layer + 1}-${head}`, single(state, mapAt(numbers.maps, numbers, layer, column))];
  if (view === "patches") return ["patches", patchGrid(state)];
  if (view === "query")
    return [`patch${patch}-grid`, grid(state, (await intact(live, "query", patch, { patch })).maps, geometry)];
  if (view === "rollout") return ["rollout", single(state, numbers.rollout)];
  const reply = await intact(live, "relevance", explained, { label: explained });
  return [`relevance-${explained}`, single(state, reply.map)];
}

async function gif(state, column, progress) {
  // slides.layers_gif: one GIF_SIZE frame a layer under its caption, GIF_FRAME_MS each, looping forever; the page is
  // let paint between frames, so that ``progress`` (called with the frame's layer and the layers) shows on screen.
  const { layers, heads } = state.numbers, { GIFEncoder, applyPalette, quantize } = await encoder;
  const out = GIFEncoder(), which = column === heads ? `mean of ${heads} heads` : `head ${column + 1} of ${heads}`;
  const [canvas, context] = sheet(GIF_SIZE, GIF_SIZE + CAPTION_HEIGHT);
  context.font = `${CAPTION_HEIGHT / 2}px sans-serif`;
  for (let layer = 0; layer < layers; layer++) {
    if (progress(layer, layers) === false) return null; // a later click's file replaces this one
    await new Promise((resolve) => setTimeout(resolve)); // (the status painted)
    Object.assign(context, { fillStyle: "#fff" }).fillRect(0, 0, GIF_SIZE, CAPTION_HEIGHT);
    context.fillStyle = TEXT;
    context.fillText(`[CLS] attention · layer ${layer + 1} of ${layers} · ${which}`, GIF_SIZE / 2, CAPTION_HEIGHT / 2);
    overlay(context, state, mapAt(state.numbers.maps, state.numbers, layer, column), GIF_SIZE, 0, CAPTION_HEIGHT);
    const { data } = context.getImageData(0, 0, canvas.width, canvas.height), palette = quantize(data, 256);
    out.writeFrame(applyPalette(data, palette), canvas.width, canvas.height, { palette, delay: GIF_FRAME_MS });
  }
  out.finish();
  return new Blob([out.bytes()], { type: "image/gif" });
}

export function mountExport(element, prefix, model) {
  // The export of tab ``prefix``, whose model is named ``model`` (as slides.slide_name names it: "mnist"); each
  // button makes its file from the image in hand and the tab's controls (layer, head, class: outside ``element``).
  const live = tabStore(prefix), control = (selector) => document.querySelector(`#${prefix}-${selector}`);
  const geometry = JSON.parse(element.dataset.grid); // the layer x head grid's, at slide width
  const box = element.querySelector(".vd-export-file"), patchBox = element.querySelector(`#${prefix}-export-patch`);
  let typedFor = null, clicks = 0, url = null; // the image the patch was typed for; the clicks so far; the link's
  patchBox.addEventListener("input", () => (typedFor = live.state?.key));

  async function make(animated) {
    const { state } = live, click = ++clicks;
    if (!state) return (box.textContent = NO_IMAGE);
    const { heads, grid: g, label } = state.numbers, view = element.querySelector("select").value;
    const [layer, column] = chosen(prefix, state.numbers), head = column === heads ? "mean" : `head${column + 1}`;
    if (typedFor !== state.key) patchBox.value = ""; // a patch typed for an earlier image
    const typed = patchBox.value.trim(), patch = typed === "" ? live.patch : Number(typed);
    if (!animated && view === "query" && !(typed === "" || (/^\d+$/.test(typed) && patch < g * g)))
      return (box.textContent = `There is no patch ${typed}: the patches are numbered 0 to ${g * g - 1}.`);
    box.textContent = "Making the file…";
    const progress = (at, of) => { // the GIF's frames as they are made; false once a later click has come
      if (click !== clicks) return false;
      box.textContent = `Making the GIF: layer ${at + 1} of ${of}…`;
    };
    try {
      const explained = control("explain-class")?.selectedIndex > 0 ? control("explain-class").value : label;
      const [name, made] = animated ? [`layers-${head}`, await gif(state, column, progress)]
        : await slide(live, view, geometry, { layer, column, head, patch, explained });
      const blob = animated ? made : await new Promise((resolve) => made.toBlob(resolve, "image/png"));
      if (click !== clicks || !blob) return; // a later click's file replaces this one
      const file = `${model}-${label}-${name}.${animated ? "gif" : "png"}`;
      if (url) URL.revokeObjectURL(url);
      url = URL.createObjectURL(blob);
      const link = (words) => Object.assign(document.createElement("a"), { href: url, download: file,
                                                                            textContent: words });
      link("").click(); // the click's own download (the status's link downloads it once more)
      const again = link("download again");
      box.replaceChildren(`Downloaded ${file} · `, again);
    } catch (error) {
      if (click === clicks) box.textContent = `The file could not be made: ${error.message ?? error}`;
    }
  }
  element.querySelector(`#${prefix}-export-png`).addEventListener("click", () => make(false));
  element.querySelector(`#${prefix}-export-gif`).addEventListener("click", () => make(true));
}
