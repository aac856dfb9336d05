// The numbers the page's views draw from, made here alone from the graphs' raw outputs: rows of the attention
// weights (L, H, T), rollout, calibrated logits, [CLS] features. Pure functions on typed arrays, so they run in the
// browser and under Node (tests/page_numbers.mjs and tests/page_source.mjs hold them to Python's). Ports, step for
// step: vit_demo/interpret/explain.py (token_attention_maps, first_query_patch, attention_steps; rollout comes from
// the graph); the calibrated probabilities of vit_demo/interpret/calibration.py and its unfamiliar rule
// (UnfamiliarRule.scores).
//
// A model's shape, as these functions take it: {layers, heads, tokens, prefix}: T tokens, the first ``prefix`` of them
// before the patches ([CLS], then DeiT's distillation token or registers, where a model has them): patch i is token
// prefix + i.

export function gridMaps(rows, { layers, heads, tokens, prefix }) {
  // Where one token attends, per layer, from its rows of the attention weights (the graph's cls_attention or
  // query_attention): every head, then the heads' mean, each over the patches alone, rescaled to sum to 1
  // (explain.token_attention_maps). rows (L, H, T) -> Float32Array (L, H + 1, g, g), in float32 as numpy computes it.
  const g2 = tokens - prefix, out = new Float32Array(layers * (heads + 1) * g2);
  for (let l = 0; l < layers; l++) {
    const mean = new Float64Array(g2);
    for (let h = 0; h < heads; h++) {
      const row = (l * heads + h) * tokens + prefix; // rows[l, h, prefix:]
      let sum = 0;
      for (let p = 0; p < g2; p++) sum = Math.fround(sum + rows[row + p]);
      const at = (l * (heads + 1) + h) * g2;
      for (let p = 0; p < g2; p++) out[at + p] = Math.fround(rows[row + p] / Math.max(sum, 1e-12));
      for (let p = 0; p < g2; p++) mean[p] += out[at + p];
    }
    const at = (l * (heads + 1) + heads) * g2;
    for (let p = 0; p < g2; p++) out[at + p] = Math.fround(mean[p] / heads);
  }
  return out;
}

export function mapAt(maps, { heads, grid: g }, layer, column) {
  // One (g, g) map of gridMaps' (L, H + 1, g, g): its layer (0-based) and column (a head; heads: their mean).
  const at = (layer * (heads + 1) + column) * g * g;
  return maps.subarray(at, at + g * g);
}

export function attentionSteps(qkv, { layers, heads, tokens: T }, layer, head, token) {
  // explain.attention_steps: how one head of one layer computes where ``token`` attends, from the graph's queries,
  // keys and values (L, 3, H, T, Dh): {query (Dh), keys, values (T * Dh), scores = query . key / sqrt(Dh) (T), their
  // softmax ``weights`` (T), output = the values summed with those weights (Dh)}, in float64.
  const Dh = qkv.length / (layers * 3 * heads * T);
  const part = (p, at = ((layer * 3 + p) * heads + head) * T * Dh) => qkv.subarray(at, at + T * Dh); // (T, Dh)
  const [keys, values] = [part(1), part(2)], query = part(0).subarray(token * Dh, (token + 1) * Dh);
  const scores = Float64Array.from({ length: T }, (_, j) =>
    query.reduce((sum, q, d) => sum + q * keys[j * Dh + d], 0) / Math.sqrt(Dh));
  const weights = softmax(scores), output = new Float64Array(Dh);
  weights.forEach((w, j) => output.forEach((_, d) => (output[d] += w * values[j * Dh + d])));
  return { query, keys, values, scores, weights, output };
}

export const argmax = (values) => values.reduce((best, v, i) => (v > values[best] ? i : best), 0); // (first of a tie)

export function softmax(logits) {
  // Probabilities from logits (the graph's are calibrated already: divided by the temperature): (K) -> Float64Array.
  const peak = Math.max(...logits), exps = Float64Array.from(logits, (z) => Math.exp(z - peak));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

function float16(bits) {
  const sign = bits & 0x8000 ? -1 : 1, exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
  if (exponent === 0) return sign * 2 ** -14 * (fraction / 1024);
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * 2 ** (exponent - 15) * (1 + fraction / 1024);
}

function halves(text) {
  // Base64 of little-endian float16 (calibration.py's arrays) -> Float64Array.
  const raw = fromBase64(text);
  return Float64Array.from({ length: raw.length / 2 }, (_, i) => float16(raw[2 * i] | (raw[2 * i + 1] << 8)));
}

const decoded = new WeakMap(); // a rule -> its arrays, decoded once (whitenings and whitened means, or weights)

function whiten(vector, at, whitenings, p, D) {
  // vector[at : at + D] times part p's whitening W (D, D), in float64.
  const out = new Float64Array(D);
  for (let d = 0; d < D; d++)
    for (let j = 0; j < D; j++) out[j] += vector[at + d] * whitenings[(p * D + d) * D + j];
  return out;
}

function whitened(rule) {
  // The rule's whitenings W (parts, D, D) and its class means whitened, m W (parts, K: D each): |(x - m) W|^2 is then
  // |x W - m W|^2, one (D, D) product an image and layer where the distances to K means cost K of them.
  if (!decoded.has(rule)) {
    const means = halves(rule.means), whitenings = halves(rule.whitenings), [P, K, D] = rule.shape;
    const meansWhitened = Array.from({ length: P }, (_, p) =>
      Array.from({ length: K }, (_, k) => whiten(means, (p * K + k) * D, whitenings, p, D)));
    decoded.set(rule, { whitenings, meansWhitened });
  }
  return decoded.get(rule);
}

function probeScore(rule, features) {
  // The probe's weighted sum of the features of its layers, plus its bias.
  if (!decoded.has(rule)) decoded.set(rule, halves(rule.weights));
  const weights = decoded.get(rule), [, D] = rule.shape;
  let sum = rule.bias;
  for (const [p, layer] of rule.layers.entries())
    for (let d = 0; d < D; d++) sum += features[layer * D + d] * weights[p * D + d];
  return sum;
}

function mlpScore(rule, features) {
  // The read-out with one hidden layer: relu(features . weights (P, D, H) + hidden_bias) . output + bias.
  if (!decoded.has(rule)) decoded.set(rule, halves(rule.weights));
  const weights = decoded.get(rule), [, D, H] = rule.shape, hidden = new Float64Array(H);
  for (const [p, layer] of rule.layers.entries())
    for (let d = 0; d < D; d++) {
      const x = features[layer * D + d], row = (p * D + d) * H;
      for (let h = 0; h < H; h++) hidden[h] += x * weights[row + h];
    }
  return hidden.reduce((sum, v, h) => sum + Math.max(v + rule.hidden_bias[h], 0) * rule.output[h], 0) + rule.bias;
}

export function familiarity(calibrated, temperature, rule, features) {
  // unfamiliar_rule.UnfamiliarRule.scores for one image, higher = more familiar: from its calibrated logits (K) and,
  // for the mahalanobis, probe and mlp rules, its [CLS] features after every layer (L, D), the graph's ``features``.
  const energy = () => { // the log-sum-exp of the raw logits
    const raw = Array.from(calibrated, (z) => z * temperature), peak = Math.max(...raw);
    return peak + Math.log(raw.reduce((sum, v) => sum + Math.exp(v - peak), 0));
  };
  if (rule.score === "energy") return energy();
  if (rule.score === "max_probability") return Math.max(...softmax(calibrated));
  if (!["mahalanobis", "probe", "mlp"].includes(rule.score)) throw new Error(`unknown unfamiliar score ${rule.score}`);
  if (!features) throw new Error(`the ${rule.score} rule needs the graph's features`);
  if (rule.score === "probe") return probeScore(rule, features);
  if (rule.score === "mlp") return mlpScore(rule, features);
  const { whitenings, meansWhitened } = whitened(rule), D = rule.shape[2];
  const parts = rule.layers.map((layer, p) => { // minus the squared distance to the nearest class
    const xw = whiten(features, layer * D, whitenings, p, D);
    return -Math.min(...meansWhitened[p].map((mw) => mw.reduce((sum, m, j) => sum + (xw[j] - m) ** 2, 0)));
  });
  if (rule.energy) parts.push(energy());
  return parts.reduce((sum, part, i) => sum + (part - rule.centre[i]) / rule.spread[i], 0);
}

export function unfamiliar(calibrated, temperature, rule, features = null) {
  // unfamiliar_rule.UnfamiliarRule.flags: whether the image looks unlike anything the model knows (rule null: never),
  // held to the threshold of the class it reads, where the rule has one a class.
  const threshold = rule?.class_thresholds?.[argmax(calibrated)] ?? rule?.threshold;
  return Boolean(rule) && familiarity(calibrated, temperature, rule, features) < threshold;
}

export function fromBase64(text) {
  // base64 -> Uint8Array, for what comes from Python: the model's description (colormap, example, unfamiliar rule),
  // the template's colours, the server's answers (model.js). Inside the page numbers stay typed arrays.
  const raw = atob(text), bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

export function fill(template, values) {
  // A caption Python wrote with {name} fields (vit_demo/page/description.py's texts), filled in.
  return template.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
}

export const percent = (p) => (100 * p).toFixed(1);

function classes(model, calibrated) {
  // The label, its probability and every class' (Float64Array (K), in ``classes`` order), from calibrated logits.
  const probs = softmax(calibrated), top = argmax(probs);
  return { label: model.classes[top], confidence: probs[top], probs, classes: model.classes };
}

export function queryMaps(model, rows, patch) {
  // Where patch ``patch`` looks, in every layer and head, from its rows (the graph's query_attention, L, H, T):
  // {patch, title, maps: Float32Array (L, H + 1, g, g)}.
  return { patch, title: fill(model.texts.query, { patch }), maps: gridMaps(rows, model) };
}

export function imageNumbers(model, pixels, run, milliseconds, where) {
  // A new image's numbers, which its tab's store keeps and every view draws from (store.js), for its 8-bit
  // ``pixels`` (Uint8Array (H, W, C)) and the graph's ``run`` (source.js: NUMBERS): the prediction and the info line
  // and the unfamiliar notice ("" none); ``maps``, where [CLS] looks: Float32Array (L, H + 1, g, g), every head then
  // their mean, each map summing to 1; ``rollout``: Float32Array (g * g), summing to 1; ``query``: where the first
  // query patch (where rollout peaks) looks. With the model's shape and colours, for the views.
  // A model without a head (no classes, no logits) gets no prediction: its info line says so.
  const predicted = model.classes.length ? classes(model, run.logits) : { label: "", probs: [], classes: [] };
  const roll = run.rollout, patch = argmax(roll); // (the graph's query_attention is this patch's, at query -1)
  const flagged = unfamiliar(run.logits, model.temperature, model.unfamiliar, run.features);
  const info = fill(model.texts[flagged ? "guess" : predicted.label ? "info" : "features"], { label: predicted.label,
    ms: milliseconds.toFixed(1), where, percent: percent(predicted.confidence) }); // flagged: no percentage
  const { layers, heads, prefix, distilled, grid, height, width, channels, alpha, colormap } = model;
  return { ...predicted, notice: flagged ? model.texts.notice : "", info, patch, image: pixels, rollout: roll,
           maps: gridMaps(run.cls_attention, model), query: queryMaps(model, run.query_attention, patch),
           size: model.large, layers, heads, prefix, distilled, grid, height, width, channels, smooth: channels === 3,
           alpha, colormap };
}

export function reading(model, calibrated) {
  // The prediction alone, while the pen is down (no notice: it waits for the pen to lift).
  const predicted = classes(model, calibrated);
  return { reading: true, label: predicted.label, probs: predicted.probs, classes: model.classes, notice: "",
           info: fill(model.texts.reading, { label: predicted.label, percent: percent(predicted.confidence) }) };
}
