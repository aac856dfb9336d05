// The large view: where [CLS] looks in the layer and head the tab's controls choose (or the mean of the heads).
import { mapAt } from "../numbers.js";
import { overlay } from "../picture.js";
import { knockoutNow, shownMaps } from "../store.js";

export function chosen(prefix, { layers, heads }, layer, head) {
  // The layer (0-based) and the map's column (the heads, then their mean) asked for, or tab ``prefix``'s controls'.
  layer ??= Number(document.querySelector(`#${prefix}-layer input[type=number]`)?.value ?? layers);
  head ??= document.querySelector(`#${prefix}-head input:checked`)?.value ?? "mean";
  const column = head === "mean" ? heads : Math.min(Math.max(Number(String(head).split(" ").pop()) - 1, 0), heads - 1);
  return [Math.min(Math.max(Math.round(layer), 1), layers) - 1, column];
}

export default {
  draw(view, layer, head) {
    const { live } = view;
    if (!live.state) return view.clear(null);
    const { numbers } = live.state, [l, column] = chosen(view.prefix, numbers, layer, head);
    const heads = column === numbers.heads ? `the mean of its ${numbers.heads} heads` : `head ${column + 1}`;
    const knocked = knockoutNow(live), shown = shownMaps(live, knocked);
    const off = knocked?.reply && knocked.off.has(l * numbers.heads + column) ? " (switched off: the attention it " +
      "would have used; its output is replaced)" : "";
    const context = view.clear(`${l + 1}/${column === numbers.heads ? "mean" : column + 1}`,
                               `Where <b>[CLS]</b> attends: layer ${l + 1} of ${numbers.layers}, ${heads}${off}` +
                               view.knockedCaption(knocked));
    overlay(context, live.state, mapAt(shown, numbers, l, column), numbers.size);
  },
};
