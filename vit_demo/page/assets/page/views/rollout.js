// Attention rollout (Abnar & Zuidema 2020): one map over the input, of the model as the board has it.
import { decode, overlay } from "../picture.js";
import { answer, knockoutNow } from "../store.js";

export default {
  knockout: true,
  draw(view) {
    const { live } = view, knocked = live.state && knockoutNow(live);
    const reply = knocked?.reply?.rollout ?? answer(live, "rollout", "map");
    const context = view.clear(reply && "map", knocked && `The model${view.knockedCaption(knocked)}`);
    if (!live.state) view.canvas.dataset.ablated = "";
    if (context) overlay(context, live.state, (reply.levels ??= decode(reply.map)), reply.grid, view.canvas.width, 0, 0);
    view.canvas.dataset.numbers = reply ? JSON.stringify({ grid: reply.grid, map: reply.map }) : ""; // for tests
  },
};
