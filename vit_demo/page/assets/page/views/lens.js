// The logit lens (nostalgebraist 2020): what [CLS] would answer after each layer and, per patch, the probability of
// the final answer after each layer (a map per layer, on one scale): a card a layer, its answer over its map. Asked
// for once per image, and only while the view is on screen, so that a stroke costs nothing more.
// The cards wrap onto rows as few as fit, the columns even (12 layers in 660 px: three rows of four), each as wide as
// its answers need: a name of a few letters whole on one line, a longer one (ImageNet's "great white shark, white
// shark, man-eater, ...") on two lines at most, ending "…", whole in the card's title. The view's own canvas (view.js)
// carries what it shows (data-drawn, data-ablated) and is not shown: each card draws its map on a canvas of its own.
import { overlay } from "../picture.js";
import { answer, knockoutNow, waiting } from "../store.js";
import { escape, percentText } from "../view.js";

const GAP = 6, LONG = 9.5; // px between the cards (heads_view.css: .vd-lens-strip); em of a card of long names

function cardWidth(labels) {
  // The narrowest card (em) that shows these answers readably: a digit's, a word's, or two lines of a longer name's.
  const longest = Math.max(0, ...labels.map((label) => label.length));
  return longest <= 3 ? 4.5 : longest <= 10 ? 7.5 : LONG;
}

function fitColumns(strip) {
  // As many cards a row as fit at their width, in as few rows as that takes, the columns shared evenly by the rows.
  const cells = strip.children.length, width = strip.clientWidth;
  if (!cells || !width) return;
  const least = Number(strip.dataset.em) * parseFloat(getComputedStyle(strip).fontSize);
  const perRow = Math.max(1, Math.min(cells, Math.floor((width + GAP) / (least + GAP))));
  const columns = Math.ceil(cells / Math.ceil(cells / perRow));
  strip.style.gridTemplateColumns = `repeat(${columns}, minmax(0, 1fr))`;
}

export default {
  draw(view) {
    const { live, element } = view, strip = element.querySelector(".vd-lens-strip");
    const reply = answer(live, "lens", "strip"); // (null without an image)
    if (!reply) {
      strip.innerHTML = "";
      return view.clear(null, live.state && view.onScreen ? waiting(live, "lens", "strip", {}) : ""); // once in view
    }
    const knocked = view.knockedCaption(knockoutNow(live), true);
    view.clear("lens", `What [CLS] would answer after each layer${knocked}; the bar: its probability of the final ` +
                       `answer, <b>${escape(reply.label)}</b>`);
    const { layers } = reply, tile = view.canvas.dataset.tile;
    const em = cardWidth(layers.map((layer) => layer.label));
    strip.dataset.em = String(em);
    strip.classList.toggle("vd-lens-long", em === LONG); // each name given two lines
    strip.innerHTML = layers.map((layer, i) => {
      const said = `layer ${i + 1} of ${layers.length}: ${layer.label}, ${percentText(layer.probability)}`;
      const final = layer.label === reply.label ? " vd-lens-final" : "";
      return `<div class="vd-lens-cell${final}" title="${escape(said)}">` +
        `<span>layer ${i + 1}</span><b class="vd-lens-label">${escape(layer.label)}</b>` +
        `<span>${percentText(layer.probability)}</span><span class="vd-prob"><span ` +
        `style="width: ${percentText(layer.answer)}"></span></span>` +
        `<canvas class="vd-lens-map" width="${tile}" height="${tile}" role="img" aria-label="per patch, the ` +
        `probability of ${escape(reply.label)} after layer ${i + 1}"></canvas></div>`;
    }).join("");
    fitColumns(strip);
    const g2 = reply.grid ** 2; // each layer's map on one scale: probability 1 the hottest
    strip.querySelectorAll("canvas.vd-lens-map").forEach((canvas, i) =>
      overlay(canvas.getContext("2d"), live.state, reply.maps.subarray(i * g2, (i + 1) * g2), Number(tile), 0, 0, 1));
  },
  setup(view) {
    // The columns follow the view's width (a window made narrower, a phone turned), the cards drawn as they are.
    const strip = view.element.querySelector(".vd-lens-strip");
    new ResizeObserver(() => fitColumns(strip)).observe(strip);
  },
};
