// Where [CLS] looked at the training slider's snapshot (the last: the trained model, which follows the board; the
// earlier ones keep every head).
import { drawTiles, greyOff } from "../picture.js";
import { answer, knockoutNow, shownMaps, waiting } from "../store.js";

export default {
  knockout: true,
  draw(view) {
    const { live } = view, canvas = view.canvas;
    if (!live.state) return view.clear(null);
    const { positions, note } = canvas.dataset, last = Number(positions);
    const position = Math.min(Math.max(Math.round(live.position ?? last), 1), last);
    if (position === last) {
      const knocked = knockoutNow(live), context = view.clear("trained", note + view.knockedCaption(knocked));
      drawTiles(canvas, context, live.state, shownMaps(live, knocked));
      if (knocked?.reply) greyOff(canvas, context, live.state.numbers.heads, knocked.off);
      return;
    }
    canvas.dataset.ablated = "";
    const reply = answer(live, "snapshot", position);
    if (!reply) return view.clear(null, `Where [CLS] looked then: ${waiting(live, "snapshot", position, { position },
                                                                          false)}`);
    const kept = live.knockout.off.length ? " · <i>every head on: the board switches off the trained model's</i>" : "";
    drawTiles(canvas, view.clear(`snapshot ${position}`, reply.note + kept), live.state, reply.maps);
  },
};
