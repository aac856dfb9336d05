// The input alone, as the model reads it.
import { overlay } from "../picture.js";

export default {
  knockout: false, // the input is the same with heads off
  draw(view) {
    const context = view.clear("input");
    if (context) overlay(context, view.live.state, null, view.canvas.width);
  },
};
