// The input cut into numbered patches (render.patch_grid), the query patch outlined; a click chooses the query patch.
import { overlay } from "../picture.js";

export default {
  draw(view) {
    const { live } = view, context = view.clear(live.state && `patch ${live.patch}`);
    if (!context) return;
    const g = live.state.numbers.grid, size = view.canvas.width, step = size / g;
    overlay(context, live.state, null, g, size, 0, 0);
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
      live.choose(row * g + col);
    });
  },
};
