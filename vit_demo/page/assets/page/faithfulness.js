// How far to trust each map, worked out in the page: interpret/faithfulness.py's deletion and insertion curves (Chefer
// et al. 2021, after Petsiuk et al. 2018, patch by patch) and its verdict (app/explanation_view.py: verdict_parts),
// step for step, from the model's graphs (model.js). Deletion and insertion are forward passes: the maps of the image
// (last-layer [CLS] attention averaged over heads, rollout, relevance for the predicted class) rank its patches, the
// patches are blanked (digits: background 0; photos: the image's mean colour) or put back 10% at a time, and the
// predicted class's calibrated probability is followed, the images run through the model in batches. source.js
// answers the view's "faithfulness" with ``scoreMaps``; tests/test_page_faithfulness.py holds it to Python's.
import { roundHalfEven } from "./arithmetic.js";
import { argmax, fill, gridMaps, mapAt, softmax } from "./numbers.js";

const KINDS = ["attention", "rollout", "relevance", "random"]; // faithfulness.MAP_KINDS
const BATCH = 50; // images per run of the graph (its activations for all of them are held at once)

// Patch indices, highest score first; ties keep index (row-major) order: numpy's argsort(-scores, kind="stable").
const order = (scores) => Array.from(scores.keys()).sort((a, b) => scores[b] - scores[a] || a - b);

// How many patches are removed (or added) at each step: round(k * patches / steps), halves to even as Python's.
const counts = (patches, steps) => Array.from({ length: steps + 1 }, (_, k) => roundHalfEven((k * patches) / steps));

// faithfulness.area_under: the trapezoid area of a curve sampled at 0, 1/steps, ..., 1 of the patches.
const areaUnder = (curve) => curve.slice(1).reduce((sum, v, i) => sum + (v + curve[i]), 0) / (2 * (curve.length - 1));

function spread(values) {
  // The standard deviation with one degree of freedom less (numpy's std(ddof=1)).
  const mean = values.reduce((a, b) => a + b, 0) / values.length;
  return Math.sqrt(values.reduce((sum, v) => sum + (v - mean) ** 2, 0) / (values.length - 1));
}

function seeded(seed) {
  // A small seeded generator (mulberry32) of numbers in [0, 1) for the random rankings. Python draws them from
  // numpy's PCG64, which the page does not reproduce: random's curves and the noise are the page's own, from the
  // same number of rankings; only the three maps' curves are the server's.
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function blankOf(pixels, model) {
  // faithfulness.blank_for: what a removed patch becomes in the model's input space [0, 1], per channel: 0 for
  // digits (background), each photo's mean colour (float32, as torch's mean; no 8-bit image holds it, so the
  // blanked images are made here as the graph's float input, not as pixels).
  const { height: H, width: W, channels: C } = model, blank = new Float32Array(C);
  if (model.name === "mnist") return blank;
  for (let c = 0; c < C; c++) {
    let sum = 0;
    for (let p = 0; p < H * W; p++) sum += Math.fround(pixels[p * C + c] / 255);
    blank[c] = Math.fround(sum / (H * W));
  }
  return blank;
}

function masked(pixels, model, blank, taken, keep) {
  // One image in the graph's layout (C, H, W) in [0, 1]: the patches ``taken`` (by patch index) are the original
  // where ``keep`` (insertion), the blank where not (deletion); the others the opposite.
  const { height: H, width: W, channels: C, grid: g } = model, side = H / g, image = new Float32Array(C * H * W);
  for (let y = 0; y < H; y++)
    for (let x = 0; x < W; x++) {
      const original = taken[Math.floor(y / side) * g + Math.floor(x / side)] === keep;
      for (let c = 0; c < C; c++)
        image[c * H * W + y * W + x] = original ? pixels[(y * W + x) * C + c] / 255 : blank[c];
    }
  return image;
}

async function probabilities(logitsOf, images, target) {
  // The calibrated probability of class ``target`` for each image, the images run BATCH at a time.
  const found = [];
  for (let start = 0; start < images.length; start += BATCH)
    for (const { logits } of await logitsOf(images.slice(start, start + BATCH))) found.push(softmax(logits)[target]);
  return found;
}

async function curvesOf(logitsOf, model, pixels, rankings, target, steps) {
  // faithfulness.curves for each ranking (patch indices, most relevant first): {deletion, insertion} of the
  // predicted class's probability, (steps + 1) each. The whole image and the blank one are run once, for all.
  const patches = model.grid * model.grid, blank = blankOf(pixels, model), taken = counts(patches, steps);
  const none = new Uint8Array(patches), all = new Uint8Array(patches).fill(1);
  const images = [masked(pixels, model, blank, none, 0), masked(pixels, model, blank, all, 0)]; // whole, blank
  for (const ranking of rankings) {
    const rank = new Int32Array(patches);
    ranking.forEach((patch, place) => (rank[patch] = place));
    for (let k = 1; k < steps; k++) {
      const chosen = Uint8Array.from(rank, (place) => (place < taken[k] ? 1 : 0));
      images.push(masked(pixels, model, blank, chosen, 0), masked(pixels, model, blank, chosen, 1));
    }
  }
  const found = await probabilities(logitsOf, images, target), [whole, empty] = found;
  return rankings.map((_, r) => {
    const at = (k, field) => found[2 + r * 2 * (steps - 1) + 2 * (k - 1) + field];
    const middle = (field) => Array.from({ length: steps - 1 }, (_, i) => at(i + 1, field));
    return { deletion: [whole, ...middle(0), empty], insertion: [empty, ...middle(1), whole] };
  });
}

export async function scoreMaps({ logitsOf, relevanceOf, run, model, pixels }) {
  // The faithfulness view's numbers for one image's 8-bit ``pixels``: ``run`` its intact forward pass ({logits,
  // cls_attention, rollout}), ``relevanceOf(target)`` its relevance for a class, ``logitsOf(images)`` the calibrated
  // logits of images in the graph's layout ([{logits}], model.js: run).
  // -> {label, steps, rankings, flat, curves, noise, verdict}
  const { steps, rankings: count, flat } = model.faithfulness, { layers: L, heads: H, tokens: T, prefix } = model;
  const target = argmax(run.logits), g2 = T - prefix, random = seeded(0);
  const last = mapAt(gridMaps(run.cls_attention, model), model, L - 1, H); // the last layer's mean over heads
  const maps = { attention: last, rollout: run.rollout, relevance: await relevanceOf(target) };
  const randoms = Array.from({ length: count }, () => Array.from({ length: g2 }, random));
  const rankings = [...Object.values(maps), ...randoms].map(order);
  const found = await curvesOf(logitsOf, model, pixels, rankings, target, steps);
  const curves = {}, aucs = (list, field) => list.map((c) => areaUnder(c[field]));
  const described = (c) => ({ ...c, deletion_auc: areaUnder(c.deletion), insertion_auc: areaUnder(c.insertion) });
  Object.keys(maps).forEach((kind, i) => (curves[kind] = described(found[i])));
  const drawn = found.slice(3), average = (field) =>
    Array.from({ length: steps + 1 }, (_, k) => drawn.reduce((sum, c) => sum + c[field][k], 0) / count);
  curves.random = described({ deletion: average("deletion"), insertion: average("insertion") });
  const noise = { deletion: spread(aucs(drawn, "deletion")), insertion: spread(aucs(drawn, "insertion")) };
  return { label: model.classes[target], steps, rankings: count, flat, curves, noise,
           verdict: verdict(curves, noise, flat) };
}

function leader(scores, noise, lowerIsBetter) {
  // faithfulness.leader: the map ahead of every other by more than ``noise``, or null (a stable sort, as Python's).
  const ranked = Object.keys(scores).sort((a, b) => (lowerIsBetter ? scores[a] - scores[b] : scores[b] - scores[a]));
  const [best, second] = ranked;
  return Math.abs(scores[best] - scores[second]) > noise ? best : null;
}

export function verdict(curves, noise, flatBand) {
  // faithfulness.verdict: each curve's leader (null: a tie, or a flat curve), whether each is flat, its band.
  const maps = KINDS.filter((kind) => kind !== "random"), found = { flat: {}, band: {} };
  for (const [field, lower] of [["deletion", true], ["insertion", false]]) {
    const points = KINDS.flatMap((kind) => curves[kind][field]);
    found.band[field] = [Math.min(...points), Math.max(...points)];
    found.flat[field] = found.band[field][1] - found.band[field][0] < flatBand;
    const aucs = Object.fromEntries(maps.map((kind) => [kind, curves[kind][`${field}_auc`]]));
    found[field] = found.flat[field] ? null : leader(aucs, noise[field], lower);
  }
  return Object.assign(found, { winner: found.deletion === found.insertion ? found.deletion : null,
                                whole: curves.random.deletion[0], blank: curves.random.deletion.at(-1) });
}

function fixed(x, digits) {
  // Python's f"{x:.{digits}f}": the exact value rounded, an exact half to even (toFixed sends it up).
  const exact = Math.abs(x).toFixed(digits + 20), [whole, fraction] = exact.split(".");
  if (fraction.slice(digits) !== "5".padEnd(20, "0")) return x.toFixed(digits);
  const last = Number((whole + fraction.slice(0, digits)).at(-1));
  return last % 2 ? x.toFixed(digits) : `${x < 0 ? "-" : ""}${whole}${digits ? `.${fraction.slice(0, digits)}` : ""}`;
}

function verdictParts(v, label, rankings, aucs) {
  // explanation_view.verdict_parts: which verdict text says it, and its fields (the text's own fragments by name,
  // "spread", "noise", "scores", "flat_why", to be filled in first: ``verdictText``).
  const two = (x) => fixed(x, 2), pc = (x) => fixed(100 * x, 1);
  const fragments = { spread: { rankings }, flat_why: { label, blank: pc(v.blank), whole: pc(v.whole) },
                      noise: { deletion: two(v.noise.deletion), insertion: two(v.noise.insertion) } };
  const scores = (kind) => ({ scores: { deletion: two(aucs[kind].deletion), insertion: two(aucs[kind].insertion) } });
  if (v.flat.deletion && v.flat.insertion) {
    const low = Math.min(v.band.deletion[0], v.band.insertion[0]);
    const high = Math.max(v.band.deletion[1], v.band.insertion[1]);
    return ["flat", { low: pc(low), high: pc(high) }, fragments];
  }
  if (v.winner) return ["winner", { winner: v.winner }, { ...fragments, ...scores(v.winner) }];
  if (v.deletion && v.insertion)
    return ["split", { deletion_leader: v.deletion, insertion_leader: v.insertion,
                       deletion_auc: two(aucs[v.deletion].deletion), insertion_auc: two(aucs[v.insertion].insertion) },
            fragments];
  const fields = ["deletion", "insertion"]; // the curve judged: the one with a leader, else one not flat
  const curve = fields.find((f) => v[f]) ?? fields.find((f) => !v.flat[f]) ?? "deletion";
  const other = curve === "deletion" ? "insertion" : "deletion", lead = v[curve];
  const [low, high] = v.band[other], base = { curve, other, curve_noise: two(v.noise[curve]) };
  const flatFields = { low: pc(low), high: pc(high) };
  if (lead && v.flat[other]) return ["one_flat", { ...base, lead, ...flatFields }, { ...fragments, ...scores(lead) }];
  if (lead) return ["one", { ...base, lead, other_noise: two(v.noise[other]) }, { ...fragments, ...scores(lead) }];
  if (v.flat[other]) return ["tie_flat", { ...base, ...flatFields }, fragments];
  return ["tie", {}, fragments];
}

export function verdictText(answer, texts) {
  // The verdict in words (HTML), from the page model's texts (verdict_<name>: vit_demo/page/description.py).
  const aucs = Object.fromEntries(Object.entries(answer.curves).map(([kind, c]) =>
    [kind, { deletion: c.deletion_auc, insertion: c.insertion_auc }]));
  const v = { ...answer.verdict, noise: answer.noise };
  const [key, fields, fragments] = verdictParts(v, answer.label, answer.rankings, aucs);
  const spread = fill(texts.verdict_spread, fragments.spread);
  const filled = { spread, noise: fill(texts.verdict_noise, { ...fragments.noise, spread }),
                   flat_why: fill(texts.verdict_flat_why, fragments.flat_why) };
  if (fragments.scores) filled.scores = fill(texts.verdict_scores, fragments.scores);
  return fill(texts[`verdict_${key}`], { ...filled, ...fields });
}
