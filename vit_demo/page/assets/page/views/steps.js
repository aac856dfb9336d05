// How attention is computed, for one head of one layer (the view's own choices) and the query patch (a click on a
// patch here or on the patch grid): the patch's query against every token's key (the scores), their softmax (the
// attention weights: where the patch looks) and the values summed with those weights (the head's output), each
// step with the model's own numbers for the image in hand (source.js: steps), asked for only while the view is on
// screen, so that a stroke costs no second run of the model. data-steps holds them, for tests; each step's worked
// line (vd-worked) and its grid show the numbers the next step uses, so that the steps check by hand.
import { answer, json, knockoutNow, waiting } from "../store.js";

const SHOWN = 3; // the values drawn in the weighted sum: the most weighted tokens'
const PREFIX_NAMES = ["[CLS]", "[DIST]"]; // the tokens before the patches (then registers, where a model has them)
const fixed = (v, decimals) => v.toFixed(decimals).replace(/^-(?=[0.]*$)/, ""); // (no "-0.0")
const number = (v) => fixed(v, 1); // a number in a row
const bracket = (text) => (text.startsWith("-") ? `(${text})` : text); // a negative number in a product
const capital = (text) => text[0].toUpperCase() + text.slice(1);
const ink = (strength) => (strength > 0.6 ? "; color: #fff" : ""); // white on a strong colour

// Every number of a worked step is written with the digits the next step reads, so that a calculator given the shown
// numbers agrees with the shown result to its last digit: "=" where it does, "≈" where a shown rounding hides it.
function significant(v, digits = 3) {
  // ``v`` to ``digits`` significant digits (at most 6 decimals), written out: 0.0512, -1.23, 12.3, 4567.
  const decimals = v ? digits - 1 - Math.floor(Math.log10(Math.abs(v))) : 0;
  return fixed(v, Math.min(Math.max(decimals, 0), 6));
}

function big(x) {
  // A positive number to 4 significant digits (the sum of the e^score), as written and as read back.
  if (x < 1e4) return { text: significant(x, 4), value: Number(significant(x, 4)) };
  if (x < 1e9) return { text: Math.round(x).toLocaleString("en"), value: Math.round(x) };
  const [mantissa, power] = x.toExponential(3).split("e"), value = Number(mantissa) * 10 ** Number(power);
  return { text: `${mantissa} × 10<sup>${Number(power)}</sup>`, value };
}

function equals(value, shown) {
  // "=" where ``value`` (a calculator's, from shown numbers) is the ``shown`` number to its last digit, else "≈".
  const decimals = (shown.split(".")[1] ?? "").length;
  const agrees = Math.abs(value - Number(shown)) <= 0.5 * 10 ** -decimals * (1 + 1e-9);
  return agrees ? "=" : '<span title="not exactly: the numbers shown are rounded">≈</span>';
}

function tenths(weights) {
  // Each weight in tenths of a percent, rounded so that together they make 100.0%: rounded down, then the largest
  // remainders up (the weights each rounded on its own can make 99.9% or 101.1%).
  const down = Array.from(weights, (w) => Math.floor(w * 1000)), left = 1000 - down.reduce((a, b) => a + b, 0);
  const remainder = (j) => weights[j] * 1000 - down[j];
  [...weights.keys()].sort((a, b) => remainder(b) - remainder(a) || a - b).slice(0, left).forEach((j) => down[j]++);
  return down;
}

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
  // of the largest (``text(j)``: what it shows); a click on a patch chooses it (data-patch); the query patch outlined.
  const low = Math.min(...values), span = Math.max(...values) - low || 1;
  const cell = (j) => {
    const strength = (values[j] - low) / span;
    const mark = `class="vd-token${j === patch + prefix ? " vd-query" : ""}" title="${token(j)}" ` +
      `style="--share: ${strength}${ink(strength)}"`;
    return j >= prefix ? `<button type="button" ${mark} data-patch="${j - prefix}">${text(j)}</button>`
      : `<span ${mark}>${token(j)}<br>${text(j)}</span>`;
  };
  return `<div class="vd-tokens">${Array.from({ length: prefix }, (_, j) => cell(j)).join("")}<div ` +
    `class="vd-token-grid" style="--g: ${g}">${Array.from({ length: g * g }, (_, p) => cell(p + prefix)).join("")}` +
    "</div></div>";
}

function steps(reply, shape) {
  // The four steps, in words and numbers, each worked out for one token (class vd-worked) in the numbers it shows.
  const { query, keys, values, scores, weights, output } = reply, Dh = query.length, T = weights.length;
  const asker = `patch ${reply.patch}`, { prefix } = shape;
  const named = prefix > 1 && shape.distilled ? PREFIX_NAMES : PREFIX_NAMES.slice(0, 1);
  const token = (j) => (j >= prefix ? `patch ${j - prefix}` : named[j] ?? `register ${j - named.length + 1}`);
  const order = [...weights.keys()].sort((a, b) => weights[b] - weights[a]), [best] = order;
  const shown = order.slice(0, SHOWN), value = (j) => values.subarray(j * Dh, (j + 1) * Dh);
  const top = Math.max(...values.map(Math.abs));
  const term = (words, numbers) => `<div class="vd-term">${words}${vector(numbers, top)}</div>`; // on one scale
  const worked = (text) => `<div class="vd-worked">${text}</div>`;
  // Scores: the query against the best-matching token's key, term by term.
  const key = (d) => keys[best * Dh + d], dot = query.reduce((sum, q, d) => sum + q * key(d), 0);
  const terms = [0, 1, 2].map((d) => `${bracket(significant(query[d]))} × ${bracket(significant(key(d)))}`);
  const [dotText, root, score] = [fixed(dot, 3), Math.sqrt(Dh), fixed(scores[best], 3)];
  const rootText = Number.isInteger(root) ? String(root) : root.toFixed(3);
  const mine = best === reply.patch + prefix, whose = mine ? `The key of ${asker} itself, the token it matches best`
    : `The key of ${token(best)}, the token ${asker} matches best`;
  // Softmax: their weights, in tenths of a percent that add up to 100.0%.
  const total = big(scores.reduce((sum, s) => sum + Math.exp(s), 0)), shares = tenths(weights);
  const percent = (j) => (shares[j] / 10).toFixed(1), share = (j) => `${percent(j)}%`;
  const exact = equals((100 * Math.exp(Number(score))) / total.value, percent(best));
  // Values: the most weighted tokens' values, the others' weighted sum, and the output's first number from them.
  const others = new Float64Array(Dh);
  order.slice(SHOWN).forEach((j) => value(j).forEach((v, d) => (others[d] += weights[j] * v)));
  const rest = `${((1000 - shown.reduce((sum, j) => sum + shares[j], 0)) / 10).toFixed(1)}%`;
  const firsts = shown.map((j) => significant(values[j * Dh])), [otherFirst, outFirst] = [others, output].map(
    (v) => significant(v[0]));
  const mixed = shown.reduce((sum, j, i) => sum + (shares[j] / 1000) * Number(firsts[i]), 0) + Number(otherFirst);
  return [
    `<b>The query.</b> Patch ${reply.patch} asks with its <i>query</i>: ${Dh} numbers this head makes from its token.` +
      vector(query),
    `<b>Scores.</b> The query times each token's <i>key</i> (${Dh} numbers too), summed and divided by √${Dh}. ` +
      "The higher, the better they match." +
      `<div class="vd-term">${whose}${vector(keys.subarray(best * Dh, (best + 1) * Dh))}</div>` +
      worked(`${capital(asker)}'s query times ${mine ? "its own" : `${token(best)}'s`} key: ${terms.join(" + ")} ` +
        `+ … (${Dh} terms in all) = ${dotText}, and ${dotText} ÷ ${rootText} (√${Dh}) ` +
        `${equals(Number(dotText) / Number(rootText), score)} <b>${score}</b>.`) +
      tokens(scores, shape, reply.patch, (j) => fixed(scores[j], 2), token),
    `<b>Softmax.</b> Each score made positive, e<sup>score</sup>, and divided by their sum (${total.text}). ` +
      `These weights, which add up to 100%, are where ${asker} looks: this head's map.` +
      worked(`${capital(token(best))}'s weight: e<sup>${score}</sup> ÷ ${total.text} ${exact} ` +
        `<b>${share(best)}</b>.`) +
      tokens(weights, shape, reply.patch, share, token),
    `<b>Values, mixed.</b> Each token offers a <i>value</i> (${Dh} numbers); the head's answer for ${asker} is the ` +
      "values summed with those weights:" +
      shown.map((j) => term(`${share(j)} × ${token(j)}'s value`, value(j))).join("") +
      term(`+ the other ${T - SHOWN} tokens' values, each times its weight (${rest} in all)`, others) +
      term(`<b>= the output</b>, passed on with the other heads' to ${asker}'s token`, output) +
      worked(`The output's first number: ${shown.map((j, i) => `${share(j)} × ${bracket(firsts[i])}`).join(" + ")}` +
        ` + ${bracket(otherFirst)} ${equals(mixed, outFirst)} <b>${outFirst}</b>.`),
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
