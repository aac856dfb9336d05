// The first screen's map: of the maps the page draws, the one most faithful to this model by its faithfulness record
// (weights/NAME/faithfulness.json, in data-kind: rollout for the digits, the answer's relevance for photos). The Map
// choice beside it swaps it for raw attention, one layer and head (selected.js), and its controls.
import relevance from "./relevance.js";
import rollout from "./rollout.js";
import selected from "./selected.js";

export function showRaw(prefix, raw) { // raw attention, its controls and view, in place of the first map, or back
  for (const id of ["layer", "head", "selected"]) document.getElementById(`${prefix}-${id}`).hidden = !raw;
  document.getElementById(`${prefix}-first`).hidden = raw;
  document.querySelector(`#${prefix}-map input[value=${raw ? "attention" : "first"}]`).checked = true;
}

const DRAW = { rollout: (view) => rollout.draw(view), relevance: (view) => relevance.draw(view, { first: true }),
               attention: (view) => selected.draw(view, view.live.state?.numbers.layers, "mean") };

export default {
  draw: (view) => DRAW[view.canvas.dataset.kind](view),
  setup(view) {
    const choice = document.getElementById(`${view.prefix}-map`);
    choice.addEventListener("change",
      () => showRaw(view.prefix, choice.querySelector("input:checked").value !== "first"));
  },
};
