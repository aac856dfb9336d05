// The large view: where [CLS] looks in the layer and head the tab's controls choose (or the mean of the heads). Its
// gr.HTML's value is the image's numbers, which every other view of the tab draws from: an upload's event sets it,
// and the canvas hands it the answer to a drawing (``live.receive``); so it also holds the tab's handle
// (window.vdLive[prefix]: draw, numbers, choose, explain, train, receive), which the controls' events call.
import { overlay } from "../picture.js";
import { knockoutNow, read, redrawAll, shownMaps } from "../store.js";

function chosen(view, layer, head) {
  // The layer (0-based) and the map's column (the heads, then their mean) asked for, or the tab's controls'.
  const { layers, heads } = view.live.state.numbers;
  layer ??= Number(document.querySelector(`#${view.prefix}-layer input[type=number]`)?.value ?? layers);
  head ??= document.querySelector(`#${view.prefix}-head input:checked`)?.value ?? "mean";
  const column = head === "mean" ? heads : Math.min(Math.max(Number(String(head).split(" ").pop()) - 1, 0), heads - 1);
  return [Math.min(Math.max(Math.round(layer), 1), layers) - 1, column];
}

export default {
  knockout: true,
  draw(view, layer, head) {
    const { live } = view;
    if (!live.state) return view.clear(null);
    const { numbers } = live.state, [l, column] = chosen(view, layer, head), g = numbers.grid;
    const offset = (l * (numbers.heads + 1) + column) * g * g;
    const heads = column === numbers.heads ? `the mean of its ${numbers.heads} heads` : `head ${column + 1}`;
    const knocked = knockoutNow(live), shown = shownMaps(live, knocked);
    const off = knocked?.reply && knocked.off.has(l * numbers.heads + column) ? " (switched off: the attention it " +
      "would have used; its output is replaced)" : "";
    const context = view.clear(`${l + 1}/${column === numbers.heads ? "mean" : column + 1}`,
                               `Where <b>[CLS]</b> attends: layer ${l + 1} of ${numbers.layers}, ${heads}${off}` +
                               view.knockedCaption(knocked));
    overlay(context, live.state, shown.subarray(offset, offset + g * g), g, numbers.size, 0, 0);
  },
  setup(view, { props, watch, draw }) {
    const { live } = view;
    let shown = null; // the value read last
    const take = () => {
      if (props.value === shown) return false;
      shown = props.value;
      read(live, props.value);
      return true;
    };
    const redrawPrediction = () => live.views.filter((v) => v.prediction).forEach((v) => v.draw());
    Object.assign(live, {
      draw,
      numbers: () => props.value,
      choose: (patch) => ((live.patch = patch), redrawAll(live)),
      explain: (choice) => ((live.choice = choice), redrawAll(live)),
      train: (position) => ((live.position = position), redrawAll(live)),
      receive(answer) {
        // The canvas' answer to a drawing ("": it was cleared), taken as an upload's event sets the value; while
        // the pen is down, the prediction alone, which only the prediction view shows.
        live.reading = answer?.reading ? answer : null;
        if (live.reading) return redrawPrediction();
        props.value = answer === "" ? "" : JSON.stringify(answer);
        if (take()) redrawAll(live);
        else redrawPrediction(); // the same numbers as before the pen went down: the reading gives way to them
      },
    });
    watch("value", () => take() && redrawAll(live));
    take();
    if ("undelivered" in live) { // an answer the canvas had before this view mounted
      const answer = live.undelivered;
      delete live.undelivered;
      live.receive(answer);
    }
  },
};
