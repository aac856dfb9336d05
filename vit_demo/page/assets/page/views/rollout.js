// Attention rollout (Abnar & Zuidema 2020): one map over the input, of the model as the board has it.
import { overlay } from "../picture.js";
import { json, knockoutNow } from "../store.js";

export default {
  draw(view) {
    const { live } = view, knocked = live.state && knockoutNow(live);
    const map = knocked?.reply?.rollout ?? live.state?.numbers.rollout;
    const context = view.clear(map && "map", knocked && `The model${view.knockedCaption(knocked)}`);
    if (context) overlay(context, live.state, map, view.canvas.width);
    view.canvas.dataset.numbers = map ? json({ map }) : ""; // for tests
  },
};
