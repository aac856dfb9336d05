// The views: every view the page draws (a module each, in views/), and ``mount``, which the host (host.js) calls for
// each element that names one (data-view: vit_demo/page/page.html). A view draws from its tab's store (store.js); it
// follows the heads switched off unless its module says ``knockout: false`` (a head toggle redraws those that follow
// alone); ``prediction`` marks the prediction (the one view redrawn while the pen is down).
import board from "./views/board.js";
import cls from "./views/cls.js";
import faithfulness from "./views/faithfulness.js";
import first from "./views/first.js";
import input from "./views/input.js";
import lens from "./views/lens.js";
import patches from "./views/patches.js";
import patching from "./views/patching.js";
import prediction from "./views/prediction.js";
import query from "./views/query.js";
import relevance from "./views/relevance.js";
import rollout from "./views/rollout.js";
import selected from "./views/selected.js";
import steps from "./views/steps.js";
import training from "./views/training.js";
import { redrawAll, tabStore } from "./store.js";
import { View } from "./view.js";

const VIEWS = { board, cls, faithfulness, first, input, lens, patches, patching, prediction, query, relevance, rollout,
                       selected, steps, training };
const ON_SCREEN_MARGIN = "100px"; // a view this close to the screen counts as on it: its numbers are asked for early

export function mount(element, prefix, name) {
  // View ``name`` of tab ``prefix`` in ``element`` (what it lacks it asks the tab's source: store.js, need).
  const spec = VIEWS[name], live = tabStore(prefix), view = new View(element, live, prefix, name);
  if (!spec) throw new Error(`there is no live view '${name}'`);
  Object.assign(view, { draw: (...args) => spec.draw(view, ...args), prediction: Boolean(spec.prediction),
                        knockout: spec.knockout !== false });
  live.views.push(view); // (its draw, which scripts may wrap: benchmarks time it)
  new IntersectionObserver(([seen]) => {
    // Whether this view is on screen (or within ON_SCREEN_MARGIN of it): one that comes into view is drawn again.
    if (seen.isIntersecting === live.onScreen.has(name)) return;
    if (seen.isIntersecting) live.onScreen.add(name);
    else live.onScreen.delete(name);
    if (seen.isIntersecting) view.draw();
  }, { rootMargin: ON_SCREEN_MARGIN }).observe(element);
  spec.setup?.(view);
  if (name === "selected") redrawAll(live); // the views that mounted before it, too
  else view.draw();
}
