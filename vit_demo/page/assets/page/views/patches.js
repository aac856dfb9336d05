// The input cut into numbered patches (render.patch_grid), the query patch outlined; a click chooses the query patch
// and shows, here where the visitor is looking, where that patch looks: the last layer's mean over its heads, as the
// query view (further down) shows it with every layer and head.
import { mapAt } from "../numbers.js";
import { overlay } from "../picture.js";
import { answer, knockoutNow, waiting } from "../store.js";

export default {
  draw(view) {
    const { live } = view, pointed = live.state && live.pointed, numbers = live.state?.numbers;
    const reply = pointed && answer(live, "query", live.patch); // where the query patch looks, once its answer is in:
    const map = reply ? mapAt(reply.maps, numbers, numbers.layers - 1, numbers.heads) : null; // the last layer's mean
    const query = `<a href="#${view.prefix}-query-title">where a patch looks, layer by layer</a>`;
    const caption = !pointed ? "" : map
      ? `<b>Patch ${live.patch}</b> (outlined) looks at the bright patches: the last layer, the mean of its heads ` +
        `(${query}).${knockoutNow(live) ? " With the heads switched off." : ""}`
      : `Where patch ${live.patch} looks: ${waiting(live, "query", live.patch, { patch: live.patch })}`;
    const context = view.clear(live.state && `patch ${live.patch}${map ? " looks" : ""}`, caption);
    if (!context) return;
    const g = live.state.numbers.grid, size = view.canvas.width, step = size / g;
    overlay(context, live.state, map, size);
    context.drawImage(view.element.querySelector("img.vd-patch-layer"), 0, 0, size, size);
    const row = Math.floor(live.patch / g), col = live.patch % g;
    context.strokeStyle = "rgb(0, 255, 120)"; // render.mark_patch's outline, 3 pixels inside the patch
    context.lineWidth = 3;
    context.strokeRect(col * step + 1.5, row * step + 1.5, step - 3, step - 3);
  },
  setup(view) {
    view.element.addEventListener("click", (event) => {
      const { live } = view;
      if (!live.state || event.target !== view.canvas) return;
      const box = view.canvas.getBoundingClientRect(), g = live.state.numbers.grid;
      const col = Math.min(Math.floor(((event.clientX - box.left) / box.width) * g), g - 1);
      const row = Math.min(Math.floor(((event.clientY - box.top) / box.height) * g), g - 1);
      live.pointed = true; // from now on this view shows where the chosen patch looks, until the next image
      live.choose(row * g + col);
    });
  },
};
