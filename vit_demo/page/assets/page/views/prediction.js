// The prediction: the top class large, the top three's probabilities as bars (five of more than ten classes; for an
// image the model should not be trusted with, their names alone, and the notice above), the info line under them, and
// which heads are switched off (or the message, or the tab's prompt). While the pen is down it shows the reading alone.
import { asking, knockoutNow, setKnockout } from "../store.js";
import { escape, percentText, plural } from "../view.js";

// A top class this long (ImageNet's "great white shark, white shark, man-eater, ...") is set smaller (app.css).
const LONG = 16, LONGER = 40;

function ablatedText(live, knocked) {
  const { off, mode } = live.knockout, heads = plural(off.length, "head");
  const reset = '<button type="button" class="vd-heads-reset">All heads on</button>';
  if (!off.length) return "";
  if (knocked?.reply)
    return `<b>${heads} switched off</b> (replaced by ${mode}s)<span class="vd-ablated-which">: every ` +
      `view shows the model without them</span>. ${reset}`;
  if (knocked) return `<b>Switching ${heads} off:</b> ${knocked.error ?? asking(live)} ${reset}`;
  return `<b>${heads} switched off</b>: ${live.reading ? "their answer follows when the pen lifts" :
    "for the next image"}. ${reset}`;
}

export default {
  prediction: true,
  draw({ element, live }) {
    const knocked = live.reading ? null : knockoutNow(live);
    const numbers = live.reading ?? knocked?.reply ?? live.state?.numbers;
    const about = live.reading ?? live.state?.numbers; // the image's own notice (unfamiliar), with heads off too
    Object.assign(element.querySelector(".vd-notice"), { innerHTML: about?.notice ?? "", hidden: !about?.notice });
    Object.assign(element.querySelector(".vd-ablated"), { innerHTML: ablatedText(live, knocked),
                                                          hidden: !live.knockout.off.length });
    const top = element.querySelector(".vd-top-class");
    top.textContent = numbers?.label ?? "";
    const length = top.textContent.length;
    top.dataset.length = length > LONGER ? "longer" : length > LONG ? "long" : "";
    top.title = length > LONGER ? top.textContent : ""; // (talk mode may show it on three lines alone)
    top.classList.toggle("vd-guess", Boolean(about?.notice)); // a flagged image's label is a guess, and looks it
    const ranked = Array.from(numbers?.probs ?? [], (p, i) => [about.classes[i], p]) // probs: (K), classes' order
      .sort((a, b) => b[1] - a[1]).slice(0, about?.classes.length > 10 ? 5 : 3);
    // An image it cannot read gets its closest classes, no percentage: a bar would read as a sure answer.
    element.querySelector(".vd-probs").innerHTML = about?.notice ? `<p class="vd-guesses">Closest classes: ` +
      `${ranked.map(([name]) => `<b>${escape(name)}</b>`).join(", ")}</p>` :
      ranked.map(([name, p]) => // (a long name on two lines at most, whole in its title)
      `<div class="vd-prob-row"><span class="vd-prob-name" title="${escape(name)}">${escape(name)}</span>` +
      `<span class="vd-prob"><span ` +
      `style="width: ${percentText(p)}"></span></span><span class="vd-prob-share">${percentText(p)}</span></div>`)
        .join("");
    const info = element.querySelector(".vd-info");
    info.innerHTML = numbers?.info ?? live.message ?? info.dataset.prompt;
  },
  setup({ element, live }) {
    element.addEventListener("click", (event) => {
      if (event.target.closest(".vd-heads-reset")) setKnockout(live, []);
    });
  },
};
