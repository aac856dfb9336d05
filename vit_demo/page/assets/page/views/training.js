// Where [CLS] looked at the training slider's snapshot (the last: the trained model, which follows the board; the
// earlier ones keep every head).
import { drawTiles } from "../picture.js";
import { answer, knockoutNow, shownMaps, waiting } from "../store.js";

export default {
  draw(view) {
    const { live } = view, canvas = view.canvas;
    if (!live.state) return view.clear(null);
    const { positions, note } = canvas.dataset, last = Number(positions);
    const position = Math.min(Math.max(Math.round(live.position ?? last), 1), last);
    if (position === last) {
      const knocked = knockoutNow(live), context = view.clear("trained", note + view.knockedCaption(knocked));
      return drawTiles(canvas, context, live.state, shownMaps(live, knocked), knocked?.reply && knocked.off);
    }
    const reply = answer(live, "snapshot", position, false);
    if (!reply) return view.clear(null, `Where [CLS] looked then: ${waiting(live, "snapshot", position, { position },
                                                                          false)}`);
    const kept = live.knockout.off.length ? " · <i>every head on: the board switches off the trained model's</i>" : "";
    drawTiles(canvas, view.clear(`snapshot ${position}`, reply.note + kept), live.state, reply.maps);
  },
};
