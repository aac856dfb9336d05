// How attention is computed, for one head of one layer (the view's own choices) and the query patch (a click on a
// patch here or on the patch grid): the patch's query against every token's key (the scores), their softmax (the
// attention weights: where the patch looks) and the values summed with those weights (the head's output), each
// step with the model's own numbers for the image in hand (source.js: steps), asked for only while the view is on
// screen, so that a stroke costs no second run of the model. data-steps holds them, for tests.
import { answer, json, knockoutNow, waiting } from "../store.js";

const SHOWN = 3; // the values drawn in the weighted sum: the most weighted tokens'
const PREFIX_NAMES = ["[CLS]", "[DIST]"]; // the tokens before the patches (then registers, where a model has them)
const number = (v) => v.toFixed(1).replace("-0.0", "0.0");
const factor = (v) => (v < 0 ? `(${number(v)})` : number(v)); // a negative number in a product, bracketed
const share = (w) => `${(100 * w).toFixed(w < 0.0005 || w >= 0.095 ? 0 : 1)}%`;
const big = (x) => (x < 1000 ? x.toPrecision(3) : x < 1e9 ? Math.round(x).toLocaleString("en") : x.toExponential(2));
const ink = (strength) => (strength > 0.6 ? "; color: #fff" : ""); // white on a strong colour

function vector(values, top = Math.max(...values.map(Math.abs))) {
  // A row of numbers, each on its colour: blue below 0, white at 0, red above (``top``: the strongest colour's).
  return `<div class="vd-vector">${Array.from(values, (v) => {
    const strength = Math.min(Math.abs(v) / (top || 1), 1), fade = Math.round(255 * (1 - strength));
    const colour = v < 0 ? `${fade} ${fade} 255` : `255 ${fade} ${fade}`;
    return `<span style="background: rgb(${colour})${ink(strength)}" title="${v}">${number(v)}</span>`;
  }).join("")}</div>`;
}

function tokens(values, { grid: g, prefix }, patch, text, token) {
  // Every token's value: the prefix tokens ([CLS]...), then the patches on their grid, each cell as dark as its share
  // of the largest; a click on a patch chooses it (data-patch); the query patch outlined.
  const low = Math.min(...values), span = Math.max(...values) - low || 1;
  const cell = (j) => {
    const strength = (values[j] - low) / span;
    const mark = `class="vd-token${j === patch + prefix ? " vd-query" : ""}" title="${token(j)}" ` +
      `style="--share: ${strength}${ink(strength)}"`;
    return j >= prefix ? `<button type="button" ${mark} data-patch="${j - prefix}">${text(values[j])}</button>`
      : `<span ${mark}>${token(j)}<br>${text(values[j])}</span>`;
  };
  return `<div class="vd-tokens">${Array.from({ length: prefix }, (_, j) => cell(j)).join("")}<div ` +
    `class="vd-token-grid" style="--g: ${g}">${Array.from({ length: g * g }, (_, p) => cell(p + prefix)).join("")}` +
    "</div></div>";
}

function steps(reply, shape) {
  // The four steps, in words and numbers.
  const { query, keys, values, scores, weights, output } = reply, Dh = query.length, asker = `patch ${reply.patch}`;
  const { prefix } = shape, named = prefix > 1 && shape.distilled ? PREFIX_NAMES : PREFIX_NAMES.slice(0, 1);
  const token = (j) => (j >= prefix ? `patch ${j - prefix}` : named[j] ?? `register ${j - named.length + 1}`);
  const order = [...weights.keys()].sort((a, b) => weights[b] - weights[a]), [best] = order;
  const shown = order.slice(0, SHOWN);
  const terms = [0, 1, 2].map((d) => `${factor(query[d])} × ${factor(keys[best * Dh + d])}`).join(" + ");
  const total = scores.reduce((sum, score) => sum + Math.exp(score), 0);
  const value = (j) => values.subarray(j * Dh, (j + 1) * Dh), top = Math.max(...values.map(Math.abs));
  const rest = 1 - shown.reduce((sum, j) => sum + weights[j], 0);
  const term = (words, numbers) => `<div class="vd-term">${words}${vector(numbers, top)}</div>`; // on one scale
  return [
    `<b>The query.</b> Patch ${reply.patch} asks with its <i>query</i>: ${Dh} numbers this head makes from its token.` +
      vector(query),
    `<b>Scores.</b> The query times each token's <i>key</i> (${Dh} numbers too), summed and divided by √${Dh}: ` +
      `${token(best)}: ${terms} + … = ${number(scores[best] * Math.sqrt(Dh))}, ÷ ${number(Math.sqrt(Dh))} = ` +
      `<b>${number(scores[best])}</b>. The higher, the better they match.` +
      tokens(scores, shape, reply.patch, number, token),
    `<b>Softmax.</b> Each score made positive, e<sup>score</sup>, and divided by their sum ` +
      `(${big(total)}): ${token(best)}: e<sup>${number(scores[best])}</sup> ÷ ${big(total)} = ` +
      `<b>${share(weights[best])}</b>. These weights are where ${asker} looks: this head's map.` +
      tokens(weights, shape, reply.patch, share, token),
    `<b>Values, mixed.</b> Each token offers a <i>value</i>; the head's answer for ${asker} is the values summed ` +
      `with those weights: ${shown.map((j) => `${share(weights[j])} × ${token(j)}'s`).join(" + ")} ` +
      `+ the other ${weights.length - SHOWN} tokens' (${share(rest)} in all) =` +
      shown.map((j) => term(`${share(weights[j])} × ${token(j)}`, value(j))).join("") +
      term(`<b>= the output</b>, passed on with the other heads' to ${asker}'s token`, output),
  ].map((text) => `<li>${text}</li>`).join("");
}

export default {
  draw(view) {
    const { live, element } = view, list = element.querySelector(".vd-steps-list");
    const caption = element.querySelector(".vd-caption"), say = (text) => (caption.innerHTML = text);
    const [layer, head] = [".vd-steps-layer", ".vd-steps-head"].map((s) => Number(element.querySelector(s).value));
    const which = `${layer}/${head}/${live.patch}`, reply = answer(live, "steps", which);
    element.dataset.steps = reply ? json(reply) : "";
    list.classList.toggle("vd-stale", !reply); // the last image's steps, faded, until this one's land: nothing jumps
    if (!live.state) {
      list.innerHTML = "";
      return say("");
    }
    if (!reply) return say(view.onScreen ? waiting(live, "steps", which, { layer, head, patch: live.patch }) : "");
    say(`Patch ${reply.patch}, layer ${layer + 1}, head ${head + 1}${view.knockedCaption(knockoutNow(live), true)}`);
    list.innerHTML = steps(reply, live.state.numbers);
  },
  setup(view) {
    view.element.addEventListener("change", () => view.draw());
    view.element.addEventListener("click", (event) => {
      const patch = event.target.closest("[data-patch]")?.dataset.patch;
      if (patch !== undefined) view.live.choose(Number(patch));
    });
  },
};
