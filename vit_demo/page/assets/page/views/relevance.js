// Why this class: the relevance of the class the picker shows (the predicted one by default), of the model as the
// board has it. While it is off screen (below the fold, or in talk mode) the canvas does not ask for it with a
// drawing; it asks for itself once it comes into view.
import { overlay } from "../picture.js";
import { answer, json, knockoutNow, waiting } from "../store.js";

export default {
  draw(view, { first = false } = {}) { // first: as the first map, the predicted class's whatever the picker says
    const { live } = view, canvas = view.canvas;
    if (!live.state) return view.clear(null);
    const knocked = knockoutNow(live);
    canvas.dataset.numbers = "";
    if (knocked && !knocked.reply) return view.clear(null, `Why this class?${view.knockedCaption(knocked)}`);
    const predicted = knocked?.reply.label ?? live.state.numbers.label; // the class the model as it is now says
    const label = first || !live.choice || live.choice === canvas.dataset.predicted ? predicted : live.choice;
    const reply = answer(live, "relevance", label);
    if (!reply && !view.onScreen) return view.clear(null, `Why ${label}?`); // asked for once it is in view
    if (!reply) return view.clear(null, `Why ${label}? ${waiting(live, "relevance", label, { label })}`);
    canvas.dataset.numbers = json({ map: reply.map }); // for tests
    const title = first ? `<b>Why ${label}?</b>` : reply.title; // the first map: its step says the rest
    overlay(view.clear(`relevance ${label}`, title + view.knockedCaption(knocked, true)), live.state,
            reply.map, canvas.width);
  },
};
