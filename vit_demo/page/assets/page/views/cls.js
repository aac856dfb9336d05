// Where [CLS] looks: a tile per layer and head (render.attention_grid), and each layer's mean; with heads switched
// off, the knocked-out model's, those heads greyed.
import { drawTiles } from "../picture.js";
import { knockoutNow, shownMaps } from "../store.js";

export default {
  draw(view) {
    const { live } = view, knocked = live.state && knockoutNow(live);
    const context = view.clear("grid", knocked && `The model${view.knockedCaption(knocked)}${knocked.reply ?
      ": the heads switched off are greyed." : ""}`);
    if (context) drawTiles(view.canvas, context, live.state, shownMaps(live, knocked), knocked?.reply && knocked.off);
  },
};
