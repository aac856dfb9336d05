// Where the query patch (chosen on the patch grid) looks, in every layer and head: asked for once per patch (and
// per set of heads switched off).
import { drawTiles } from "../picture.js";
import { answer, knockoutNow, waiting } from "../store.js";

export default {
  draw(view) {
    const { live } = view;
    if (!live.state) return view.clear(null);
    const knocked = knockoutNow(live), reply = answer(live, "query", live.patch);
    if (!reply)
      return view.clear(null, `Where patch ${live.patch} looks: ${waiting(live, "query", live.patch,
                                                                         { patch: live.patch })}`);
    const context = view.clear(`query ${live.patch}`, reply.title + view.knockedCaption(knocked, true));
    drawTiles(view.canvas, context, live.state, reply.maps, knocked?.off);
  },
};
