// Where a tab's numbers come from: every view's, made here alone from the raw outputs of the model's graphs, wherever
// their forward pass ran (model.js: in the page, or on the server), and the page's own preprocessing (drawing.js,
// preprocess.js). The canvas, the photo reader (photo.js) and the views (store.js: need) ask it; images come and go
// as typed arrays (an image: its 8-bit pixels, Uint8Array (H, W, C)). A question it can't answer rejects, with the
// reason in words. ``model``: a tab's model as vit_demo/page/description.py describes it: its shape, classes,
// temperature, unfamiliar rule, weights folder (relative to ``base``) and graphs in it, and captions with {fields}.
import { preprocessDrawing } from "./drawing.js";
import { InputError, NothingDrawn, preprocessPhoto, preprocessResized } from "./preprocess.js";
import { choose, patching, relevance, remembered, run } from "./model.js";
import { scoreMaps, verdictText } from "./faithfulness.js";
import { roundHalfEven } from "./arithmetic.js";
import { argmax, attentionSteps, fill, fromBase64, gridMaps, imageNumbers, percent, queryMaps, reading, softmax }
  from "./numbers.js";

// The graph's outputs a new image's numbers are made from (all but the logits for a model without a head, DINO's:
// it has no classes, only attention to show); its query_attention is the first query patch's, where rollout peaks.
const NUMBERS = ["logits", "cls_attention", "rollout", "query_attention", "features"];
const CANVAS = 112; // the canvas' copy of a drawing, pixels a side (canvas.js SMALL, data/preprocess.py CANVAS_SIZE)

const WARM_UP_RUNS = 60, WARM_UP_MS = 500; // see warmUp
const idle = (work) => (globalThis.requestIdleCallback ?? ((f) => setTimeout(f, 20)))(work);

function warmUpImage(model) {
  // An 8-bit input to warm the model up with: for digits a drawn stroke (warming preprocessing), for photos a gradient.
  if (model.channels === 1) {
    const ink = new Uint8Array(CANVAS * CANVAS);
    for (let y = 20; y < 92; y++) ink.fill(255, y * CANVAS + 50, y * CANVAS + 58);
    return preprocessDrawing(ink, CANVAS, CANVAS);
  }
  return Uint8Array.from({ length: model.height * model.width * model.channels }, (_, i) => i % 251);
}

function preprocessed(model, make) {
  // The 8-bit pixels ``make()`` makes of an input, or what is said in place of a prediction for one that can't be
  // classified ({message}: captions.message_text).
  try {
    return make();
  } catch (error) {
    if (error instanceof NothingDrawn) return { message: model.texts.blank };
    if (error instanceof InputError) return { message: fill(model.texts.unreadable, { why: error.message }) };
    throw error;
  }
}

export function pageSource(described, base, where = {}) {
  // A tab's one source (the host makes it). ``where``: {server: the app's server function "forward", forced: the
  // server even where the page could run the model, runtime: the page's build of onnxruntime-web, where asked}, as
  // model.js: choose takes them; the static page gives no server.
  const model = { ...described, colormap: fromBase64(described.colormap), // (256, 3) bytes, and the example's
                  example: described.example && fromBase64(described.example) }; // pixels: decoded once
  let forward = null; // the forward pass, once chosen (a failure is not kept: the next reading tries again)
  // The server where asked, where the graphs are missing or older than the weights, or for a model it reads quicker
  const forced = where.forced || model.pageGraphs === false || Boolean(where.server && model.serverFirst);
  const folder = new URL(model.folder, base).href;
  const rule = async () => { // the unfamiliar rule, whole: one that reads the features comes with the model, in a
    if (!described.unfamiliar?.file) return described.unfamiliar; // file of its folder (description.py: page_rule)
    const answer = await fetch(new URL(described.unfamiliar.file, folder));
    if (!answer.ok) throw new Error(`the model's unfamiliar rule did not load (${answer.status})`);
    return (await answer.json()).unfamiliar;
  };
  const pass = remembered(() => Promise.all([choose(folder, model.graph,
    { ...where, forced, gpu: model.gpu, shared: model.shared }), rule()]).then(([found, whole]) => {
    model.unfamiliar = whole;
    return (forward = found);
  }));
  const session = async (name) => (await pass()).session(name); // the graph ``name``, loaded once
  const graph = Object.fromEntries(Object.entries({ run, relevance, patching }).map(([kind, runs]) => // model.js'
    [kind, async (name, ...args) => runs(await session(name), model, ...args)])); // runs of the graph ``name``
  const size = model.height * model.width * model.channels;
  const image = (pixels) => { // an image the page keeps: Uint8Array (H, W, C)
    if (!(pixels instanceof Uint8Array) || pixels.length !== size)
      throw new Error(`the image has ${pixels?.length ?? 0} bytes where this model reads ${size}`);
    return pixels;
  };
  const offOf = (request) => ({ // the heads a request switches off, as layer * heads + head, in order
    off: [...new Set((request.off ?? []).map(([l, h]) => l * model.heads + h))].sort((a, b) => a - b),
    mode: request.mode ?? "mean" });
  // Once a drawing has been read, the relevance graph (0.1 MB: its weights are the model's) and the snapshots'
  // graphs (0.5 MB each for the digits) are loaded in the background, so that "why this class" and the training
  // slider work once the network is gone; not before the first prediction, which waits for nothing but the model.
  // (The photo tab, which reads no drawing, leaves its snapshots, 5.7 MB each, to the views that ask.)
  const prefetch = remembered(() =>
    Promise.all([model.relevance, ...model.snapshots.map((snapshot) => snapshot.graph)].map(session)));

  async function analyse(pixels) {
    // Every view's numbers for an 8-bit input, timing the model alone (its graph loaded first).
    await session(model.graph);
    const start = performance.now();
    const [numbers] = await graph.run(model.graph, [pixels], { outputs: NUMBERS.slice(model.classes.length ? 0 : 1) });
    return imageNumbers(model, pixels, numbers, performance.now() - start, forward.where);
  }

  function warmUp() {
    // V8 runs WebAssembly (and JavaScript) as quickly made code until a function has run enough to be optimised: a
    // fresh page's first ~50 readings of the digit model took 7-12 ms each in Chromium, then 2-3 ms. So once the graph
    // is loaded (ready(), which the host calls once) the page reads an image of its own, one reading per idle moment
    // (a stroke waits for one at most), WARM_UP_RUNS times or for WARM_UP_MS of runs, whichever comes first.
    if (!forward.inPage) return; // (on the server, a warm-up would be requests for nothing)
    const pixels = warmUpImage(model);
    let runs = 0, spent = 0;
    const next = () => idle(async () => {
      const start = performance.now();
      const failed = await analyse(pixels).then(() => false, () => true);
      if (failed) return; // a reading the user asks for says what went wrong
      spent += performance.now() - start;
      if (++runs < WARM_UP_RUNS && spent < WARM_UP_MS) next();
    });
    next();
  }

  return {
    get inPage() { // the forward pass runs in the page: the canvas reads drawings as often as the pointer moves
      return Boolean(forward?.inPage);
    },
    async ready() { // the forward pass chosen and its graph loaded, then warmed up in the background
      await session(model.graph);
      warmUp();
    },

    async example() {
      // The numbers of the example the tab starts with (its 8-bit pixels as the model reads them, in the model's
      // description), said to be an example (unless it is one the model cannot read: then its guess).
      const numbers = await analyse(model.example);
      const said = numbers.notice || !model.classes.length; // (an image it cannot read, or no classes: as any image)
      return { ...numbers, info: said ? numbers.info : fill(model.texts.example, { label: numbers.label }) };
    },

    async stroke({ drawing, views } = {}) {
      // A drawing: the canvas' copy, Uint8Array (112 * 112) of ink 0..255; views false while the pen is down.
      if (!drawing?.length) return { message: model.texts.prompt };
      const pixels = preprocessed(model, () => {
        if (drawing.length !== CANVAS * CANVAS)
          throw new InputError(`the drawing must be ${CANVAS}x${CANVAS} bytes, not ${drawing.length}`);
        return preprocessDrawing(drawing, CANVAS, CANVAS);
      });
      if (!(pixels instanceof Uint8Array)) return pixels; // (what is said in place of a prediction)
      if (views === false) {
        const [{ logits }] = await graph.run(model.graph, [pixels], { outputs: ["logits"] });
        return reading(model, logits);
      }
      const numbers = await analyse(pixels);
      setTimeout(() => prefetch().catch(() => {}), 1000); // once this answer is drawn and the page is idle again
      return numbers;
    },

    async photo(rgba, width, height) {
      // A photo decoded by the browser (RGBA pixels), made what the model reads as its weights say: CIFAR-10's way, or
      // an imported model's resize and crop (PIL's or torchvision's, as Python does them; another library is refused).
      const { method, ...resizing } = model.preprocessing;
      const pixels = preprocessed(model, () => (method === "resize_crop" ?
        preprocessResized(rgba, width, height, { size: model.height, ...resizing })
        : preprocessPhoto(rgba, width, height, model.height)));
      return pixels instanceof Uint8Array ? analyse(pixels) : pixels;
    },

    async query(request) {
      // Where a patch looks, in every layer and head (numbers.js: queryMaps).
      const pixels = image(request.image), patch = request.patch, patches = model.grid * model.grid;
      if (!Number.isInteger(patch) || patch < 0 || patch >= patches)
        throw new Error(`There is no patch ${patch}: this image has ${patches} patches, numbered 0 to ${patches - 1}.`);
      const [run] = await graph.run(model.graph, [pixels], { ...offOf(request), query: patch,
                                                             outputs: ["query_attention"] });
      return queryMaps(model, run.query_attention, patch);
    },

    async steps(request) {
      // How one head of one layer computes where a patch looks (numbers.js: attentionSteps), with the heads off.
      const { layer, head, patch } = request, within = (n, count) => Number.isInteger(n) && n >= 0 && n < count;
      if (!within(layer, model.layers) || !within(head, model.heads) || !within(patch, model.grid * model.grid))
        throw new Error(`there is no layer ${layer}, head ${head} or patch ${patch} in this model (numbered from 0)`);
      const [run] = await graph.run(model.graph, [image(request.image)], { ...offOf(request), outputs: ["qkv"] });
      return { layer, head, patch, ...attentionSteps(run.qkv, model, layer, head, model.prefix + patch) };
    },

    async knockout(request) {
      // With the heads switched off: the prediction (probs: Float64Array (K)), [CLS] maps (Float32Array (L, H + 1, g,
      // g)), rollout (Float64Array (g * g)); and the logit difference (intact class - runner-up) before and after.
      const pixels = image(request.image), off = offOf(request), T = model.temperature;
      if (!off.off.length) throw new Error("no head is switched off");
      const [[intact], [ablated]] = await Promise.all([
        graph.run(model.graph, [pixels], { outputs: ["logits"] }),
        graph.run(model.graph, [pixels], { ...off, outputs: ["logits", "cls_attention", "rollout"] })]);
      const raw = (run) => Array.from(run.logits, (z) => z * T); // the graph's logits are divided by T
      const before = raw(intact), after = raw(ablated);
      const order = [...before.keys()].sort((a, b) => before[b] - before[a]), [top, second] = order;
      const intactProbs = softmax(intact.logits), probs = softmax(ablated.logits), label = model.classes[argmax(probs)];
      const diff = (logits) => logits[top] - logits[second];
      return { off: off.off.map((i) => [Math.floor(i / model.heads), i % model.heads]), mode: off.mode, label, probs,
        intact: { label: model.classes[top], probability: intactProbs[top] }, runner_up: model.classes[second],
        logit_diff: { intact: Number(diff(before).toFixed(4)), ablated: Number(diff(after).toFixed(4)) },
        info: fill(model.texts.knockout, {
          label, percent: percent(Math.max(...probs)), count: off.off.length, total: model.layers * model.heads,
          mode: off.mode, intact: model.classes[top], intact_percent: percent(intactProbs[top]),
          runner_up: model.classes[second], before: diff(before).toFixed(2), after: diff(after).toFixed(2) }),
        maps: gridMaps(ablated.cls_attention, model), rollout: ablated.rollout };
    },

    async lens(request) {
      // The logit lens: what [CLS] would answer after each layer (calibrated), and per patch the probability of the
      // final answer read from each patch token after each layer (not calibrated): maps, Float64Array (L, g * g).
      const pixels = image(request.image), off = offOf(request), apart = model.lens !== model.graph;
      const [[run], [lensRun] = [run]] = await Promise.all([ // one run, or two where the lens is a graph of its own
        graph.run(model.graph, [pixels], { ...off, outputs: apart ? ["logits"] : ["logits", "lens"] }), // (costly)
        ...(apart ? [graph.run(model.lens, [pixels], { ...off, outputs: ["lens"] })] : [])]);
      const { layers: L, tokens: T, prefix, classes } = model, K = classes.length, g2 = T - prefix;
      const read = (l, t) => Array.from(lensRun.lens.subarray((l * T + t) * K, (l * T + t + 1) * K));
      const cls = [...Array(L).keys()].map((l) => softmax(read(l, 0).map((z) => z / model.temperature)));
      const final = argmax(cls[L - 1]), predicted = argmax(run.logits), maps = new Float64Array(L * g2);
      for (let l = 0; l < L; l++)
        for (let p = 0; p < g2; p++) maps[l * g2 + p] = softmax(read(l, prefix + p))[predicted];
      return { label: classes[final], grid: model.grid, maps, layers: cls.map((row) => ({ label: classes[argmax(row)],
        probability: Number(Math.max(...row).toFixed(4)), answer: Number(row[final].toFixed(4)) })) };
    },

    async relevance(request) {
      // Why the model would say the class asked for (with the heads off), from the relevance graph, whose gradients
      // were traced into it: {label, title, map: Float32Array (g * g)}.
      const pixels = image(request.image), label = request.label, target = model.classes.indexOf(label);
      if (target < 0) throw new Error(`there is no class '${label}'`);
      const run = await graph.relevance(model.relevance, pixels, target, offOf(request));
      const probs = softmax(run.logits), predicted = model.classes[argmax(probs)];
      const title = fill(label === predicted ? model.texts.why : model.texts.why_not,
                         { label, percent: percent(probs[target]), predicted });
      return { label, title, map: run.relevance };
    },

    async patching({ clean, corrupt, residual = true } = {}) {
      // {clean, corrupt: images, residual} -> two-image activation patching (Heimersheim & Nanda, 2024) from the
      // patching graphs, loaded when first asked: each head's and (with residual) each residual-stream position's share
      // of the logit difference restored, both directions (rows of numbers, rounded as Python's).
      [clean, corrupt].forEach(image);
      if (typeof residual !== "boolean") throw new Error("'residual' is true or false");
      if (residual && !model.patching.residual)
        throw new Error("this model's residual stream is too large to patch in the page (its heads can be)");
      const graphs = [model.patching.heads, ...(residual ? [model.patching.residual] : [])];
      await Promise.all([model.graph, ...graphs].map(session)); // loaded, not timed
      const start = performance.now();
      const runs = await graph.run(model.graph, [clean, corrupt], { outputs: ["logits"] });
      const classes = runs.map((run) => argmax(run.logits)); // what the model reads each image as
      if (classes[0] === classes[1])
        throw new Error(`the model reads both images as class ${classes[0]}: patching needs two images it tells ` +
                        "apart (or name the two classes)");
      const grids = [];
      for (const url of graphs) grids.push(await graph.patching(url, clean, corrupt, classes));
      const [diffClean, diffCorrupt] = grids[0].logitDiff;
      if (diffClean === diffCorrupt)
        throw new Error("the two images have the same logit difference: nothing to restore");
      const rows = (values, width) => Array.from({ length: values.length / width }, (_, i) => // np.round(x, 3)
        Array.from(values.subarray(i * width, (i + 1) * width), (v) => roundHalfEven(v * 1000) / 1000));
      const direction = (name) => Object.fromEntries(grids.map((grid, i) =>
        i === 0 ? ["heads", rows(grid[name], model.heads)] : ["residual", rows(grid[name], model.tokens)]));
      return { residual, classes: classes.map((c) => model.classes[c]), grid: model.grid, prefix: model.prefix,
        logit_diff: { clean: Number(diffClean.toFixed(4)), corrupt: Number(diffCorrupt.toFixed(4)) },
        clean_into_corrupt: direction("cleanIntoCorrupt"), corrupt_into_clean: direction("corruptIntoClean"),
        ms: Number((performance.now() - start).toFixed(1)), where: forward.where };
    },

    async snapshot(request) {
      // Where [CLS] looked at an earlier point of training: {position, note, maps: Float32Array (L, H + 1, g, g)}.
      const pixels = image(request.image), position = request.position, snapshot = model.snapshots[position - 1];
      if (!Number.isInteger(position) || !snapshot)
        throw new Error(`there is no snapshot ${position}: they are numbered 1 to ${model.snapshots.length}`);
      const [run] = await graph.run(snapshot.graph, [pixels], { outputs: ["logits", "cls_attention"] });
      const probs = softmax(run.logits), top = argmax(probs);
      const note = fill(snapshot.note, { label: model.classes[top], percent: percent(probs[top]) });
      return { position, note, maps: gridMaps(run.cls_attention, model) };
    },

    async faithfulness(request) {
      // Each map's deletion and insertion curves, every head on, and the verdict (faithfulness.js); its graphs loaded
      // first, not timed.
      const pixels = image(request.image), url = model.graph;
      await Promise.all([url, model.relevance].map(session));
      const start = performance.now();
      const [run] = await graph.run(url, [pixels], { outputs: ["logits", "cls_attention", "rollout"] });
      const found = await scoreMaps({ model, pixels, run,
        logitsOf: (images) => graph.run(url, images, { outputs: ["logits"] }),
        relevanceOf: async (target) => (await graph.relevance(model.relevance, pixels, target)).relevance });
      return { ...found, text: verdictText(found, model.texts), ms: Number((performance.now() - start).toFixed(1)),
               where: forward.where };
    },
  };
}
