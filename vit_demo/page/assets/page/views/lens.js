// The logit lens (nostalgebraist 2020): what [CLS] would answer after each layer (a strip) and, per patch, the
// probability of the final answer after each layer (a map per layer, on one scale). Asked for once per image, and
// only while the view is on screen, so that a stroke costs nothing more.
import { overlay } from "../picture.js";
import { answer, knockoutNow, waiting } from "../store.js";
import { escape, percentText } from "../view.js";

export default {
  draw(view) {
    const { live, element } = view, strip = element.querySelector(".vd-lens-strip");
    const reply = answer(live, "lens", "strip"); // (null without an image)
    if (!reply) {
      strip.innerHTML = "";
      return view.clear(null, live.state && view.onScreen ? waiting(live, "lens", "strip", {}) : ""); // once in view
    }
    const knocked = view.knockedCaption(knockoutNow(live), true);
    const context = view.clear("lens", `What [CLS] would answer after each layer${knocked}; the bar: its probability ` +
                                       `of the final answer, <b>${escape(reply.label)}</b>`);
    strip.style.gridTemplateColumns = `repeat(${reply.layers.length}, minmax(0, 1fr))`;
    strip.innerHTML = reply.layers.map((layer, i) =>
      `<div class="vd-lens-cell${layer.label === reply.label ? " vd-lens-final" : ""}"><span>layer ${i + 1}</span>` +
      `<b>${escape(layer.label)}</b><span>${percentText(layer.probability)}</span><span class="vd-prob"><span ` +
      `style="width: ${percentText(layer.answer)}"></span></span></div>`).join("");
    const g2 = reply.grid ** 2, tile = view.canvas.height; // each layer's map on one scale: probability 1 the hottest
    reply.layers.forEach((_, i) =>
      overlay(context, live.state, reply.maps.subarray(i * g2, (i + 1) * g2), tile, i * (tile + 6), 0, 1));
  },
};
