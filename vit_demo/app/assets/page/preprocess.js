// What the model reads, made in the page: a port of vit_demo/data/preprocess.py, step for step, so that the page feeds
// its model the same 8-bit image the server makes. Pure functions on typed arrays (no DOM): they run in the browser
// and under Node (tests/page_preprocess.mjs runs them for tests/test_page_preprocess.py, which compares them with
// Python's on a thousand drawings and two hundred photos).
//
// - preprocessDrawing: the canvas' grey copy (ink 255 on 0, or dark on light) -> MNIST-like 28x28 pixels.
// - preprocessPhoto: a decoded upload's RGBA pixels -> CIFAR-10-like 32x32x3 pixels (HWC).
//
// Each Python step is mirrored with the arithmetic Python does: float32 where numpy or torch compute in float32
// (Math.fround after each operation: a float32 operation is the double one rounded once), float64 where they
// compute in float64, torch's interpolation kernels (area = adaptive average pooling, bilinear with
// align_corners=False, bilinear with antialias=True) as aten/src/ATen/native/cpu computes them, torch.quantile and
// np.quantile (linear), np.median, numpy's pairwise sums and torch's sums, Python's and numpy's rounding (halves to
// even). Where torch's compiled kernels fuse a multiply and an add, or group a loop's additions, so does this port:
// that is how torch's x86-64 builds compute, measured against torch 2.14 kernel by kernel, bit for bit (torch built
// for another CPU may round some intermediate values otherwise; see fma, tapSum, torchSum).
//
// An image inside is a plane: { h, w, data: Float32Array(h * w) }, row-major (one channel).

const f32 = Math.fround;

function fma(a, b, c) {
  // a * b + c rounded once to float32, as the fused multiply-add that torch's x86-64 kernels are compiled to (its
  // AVX2 and AVX512 builds contract `x * y + z`). The product of two float32 values is exact in float64, so only
  // the sum is rounded twice (to float64, then float32), which differs from one rounding about once in 2^29 sums.
  return f32(a * b + c);
}

// Constants of vit_demo/data/preprocess.py.
const MAX_PIXELS = 40_000_000;
const MAX_DIMENSION = 20_000;
const INK_THRESHOLD = f32(0.2); // numpy compares a float32 array with a Python float in float32
const MIN_INK_PIXELS = 4;
const DIGIT_BOX = 20;
const DIGIT_CANVAS = 28;
const STROKE_RANGE = [1.8, 2.9];
const WORK_SCALE = 4;
const FLAT_RANGE = f32(4 / 255);
const FAINT = f32(0.05); // the "is there ink" threshold of the torch steps (a float32 tensor > 0.05)
const TINY = f32(1e-6); // clamp_min(1e-6) on a float32 tensor

// ---- Errors (preprocess.py's InputError and NothingDrawn, with the same messages) --------------------------------

export class InputError extends Error {
  // Input that cannot be classified; the message says why in words meant for the user.
  constructor(message) {
    super(message);
    this.name = "InputError";
  }
}

export class NothingDrawn extends InputError {
  // A blank canvas or an empty image: there is nothing to classify.
  constructor(message = "Nothing to classify: the image is blank. Draw a digit.") {
    super(message);
    this.name = "NothingDrawn";
  }
}

function checkSize(width, height) {
  // preprocess._check_size.
  if (width * height > MAX_PIXELS || Math.max(width, height) > MAX_DIMENSION) {
    const limit = String(MAX_PIXELS).replace(/\B(?=(\d{3})+$)/g, ","); // 40,000,000 as Python's {:,} writes it
    throw new InputError(`the image is too large (${width}x${height}); the limit is ${limit} pixels`);
  }
  if (width === 0 || height === 0) throw new NothingDrawn("Nothing to classify: the image is empty.");
}

function checkPixels(pixels, width, height, channels) {
  if (!Number.isInteger(width) || !Number.isInteger(height) || width < 0 || height < 0) {
    throw new InputError(`an image's width and height must be whole numbers, not ${width}x${height}`);
  }
  if (!pixels || pixels.length !== width * height * channels) {
    throw new InputError(`a ${width}x${height} image with ${channels} channel(s) has ${width * height * channels} values, not ${pixels?.length}`);
  }
}

// ---- Python's and numpy's arithmetic -------------------------------------------------------------------------------

export function roundHalfEven(x) {
  // Python's round() and numpy's np.round: halves go to the even neighbour.
  const r = Math.round(x); // halves up
  return r - x === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

function pairwiseSum(values, start, n, float32) {
  // numpy's pairwise summation (loops_utils.h.src, <TYPE>_pairwise_sum) of values[start : start + n], what
  // np.sum does over a contiguous array: in float32 (float32 = true) or float64.
  const add = float32 ? (a, b) => f32(a + b) : (a, b) => a + b;
  if (n < 8) {
    let res = -0.0;
    for (let i = 0; i < n; i++) res = add(res, values[start + i]);
    return res;
  }
  if (n <= 128) {
    const r = new Float64Array(8);
    for (let k = 0; k < 8; k++) r[k] = values[start + k];
    let i = 8;
    for (; i < n - (n % 8); i += 8) for (let k = 0; k < 8; k++) r[k] = add(r[k], values[start + i + k]);
    let res = add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]), add(r[6], r[7])));
    for (; i < n; i++) res = add(res, values[start + i]);
    return res;
  }
  let n2 = Math.floor(n / 2);
  n2 -= n2 % 8;
  return add(pairwiseSum(values, start, n2, float32), pairwiseSum(values, start + n2, n - n2, float32));
}

export function numpySum(values, float32) {
  // np.sum of a contiguous array: add.reduce from its identity (0) over the pairwise sum.
  const add = float32 ? (a, b) => f32(a + b) : (a, b) => a + b;
  return add(0, pairwiseSum(values, 0, values.length, float32));
}

function medianOf8Bit(grey) {
  // numpyMedian of the float32 values v / 255 of 8-bit pixels, found by counting them rather than sorting.
  const counts = new Uint32Array(256);
  for (let i = 0; i < grey.length; i++) counts[grey[i]]++;
  const n = grey.length, nth = (k) => { // the k-th smallest value (from 0)
    let v = 0;
    for (let seen = counts[0]; seen <= k; seen += counts[++v]);
    return f32(v / 255);
  };
  return n % 2 ? nth(n >> 1) : f32(f32(nth((n >> 1) - 1) + nth(n >> 1)) / 2);
}

export function numpyMedian(values) {
  // np.median of a float32 array: the middle value, or the float32 mean of the two middle values.
  const sorted = Float32Array.from(values).sort();
  const n = sorted.length, half = n >> 1;
  return n % 2 ? sorted[half] : f32(f32(sorted[half - 1] + sorted[half]) / 2);
}

export function numpyQuantile(values, q) {
  // np.quantile(values, q) (method "linear") of a float32 array with a Python float q: the virtual index in
  // float64, the interpolation (numpy's _lerp) in float32, q being a weak scalar.
  if (!values.length) throw new Error("cannot take the quantile of no values");
  const sorted = Float32Array.from(values).sort();
  const n = sorted.length, virtual = (n - 1) * q;
  let below = Math.floor(virtual), above = below + 1;
  if (virtual >= n - 1) below = above = n - 1;
  const gamma = virtual - (virtual >= n - 1 ? -1 : below); // numpy sets the index to -1 there (a == b: no effect)
  const a = sorted[below], b = sorted[above], diff = f32(b - a);
  return gamma >= 0.5 ? f32(b - f32(diff * f32(1 - gamma))) : f32(a + f32(diff * f32(gamma)));
}

export function torchQuantile(values, q) {
  // torch.quantile(values, q) (linear) of a float32 tensor: q as a float32, its rank q * (n - 1) in float64 (as
  // torch computes it: measured, it is not rounded to float32), then lerp between the two neighbours in float32,
  // fused: start + weight * (end - start) for a weight under 0.5, end + (weight - 1) * (end - start) otherwise.
  if (!values.length) throw new Error("quantile() input tensor must be non-empty");
  const sorted = Float32Array.from(values).sort();
  const rank = f32(q) * (sorted.length - 1);
  const below = Math.trunc(rank), weight = f32(rank - below);
  const start = sorted[below], end = sorted[Math.ceil(rank)], span = f32(end - start);
  return Math.abs(weight) < 0.5 ? fma(weight, span, start) : fma(f32(weight - 1), span, end);
}

// Floats in one of the vectors (Vectorized<float>) of torch's sum kernel: it sets the order of torch's sums. 8 (as
// in its AVX2 kernels) matches torch 2.x's sums on x86-64, measured on a CPU with AVX512 too.
const TORCH_VECTOR = 8;

function torchRowSum(get, size) {
  // torch's row_sum (SumKernel.cpp) of get(0), ..., get(size - 1) in float32: four interleaved partial sums
  // (multi_row_sum, whose cascade of levels keeps the partial sums of similar size), then the rest, then the four.
  const rows = 4, perRow = Math.floor(size / rows);
  const levelPower = Math.max(4, Math.floor(Math.ceil(Math.log2(Math.max(perRow, 2))) / 4));
  const levelStep = 2 ** levelPower, levelMask = levelStep - 1;
  const acc = [0, 1, 2, 3].map(() => new Float64Array(rows)); // acc[level][row], each a float32
  let i = 0;
  while (i + levelStep <= perRow) {
    for (let j = 0; j < levelStep; j++, i++) for (let k = 0; k < rows; k++) acc[0][k] = f32(acc[0][k] + get(i * rows + k));
    for (let j = 1; j < 4; j++) {
      for (let k = 0; k < rows; k++) {
        acc[j][k] = f32(acc[j][k] + acc[j - 1][k]);
        acc[j - 1][k] = 0;
      }
      if ((i & (levelMask * 2 ** (j * levelPower))) !== 0) break;
    }
  }
  for (; i < perRow; i++) for (let k = 0; k < rows; k++) acc[0][k] = f32(acc[0][k] + get(i * rows + k));
  for (let j = 1; j < 4; j++) for (let k = 0; k < rows; k++) acc[0][k] = f32(acc[0][k] + acc[j][k]);
  let sum = acc[0][0];
  for (let m = perRow * rows; m < size; m++) sum = f32(sum + get(m));
  for (let k = 1; k < rows; k++) sum = f32(sum + acc[0][k]);
  return sum;
}

export function torchSum(values) {
  // Tensor.sum() of a contiguous float32 tensor as torch's CPU kernel adds it (cascade_sum, vectorized_inner_sum):
  // lane l of TORCH_VECTOR-wide vectors sums values l, l + V, l + 2V, ... (torchRowSum on each lane); then the
  // values left after the last whole vector, then the lanes, one after the other. (Up to 32768 values, which torch
  // sums in one piece; it splits longer tensors between threads.)
  const n = values.length, V = TORCH_VECTOR;
  if (n < V) return f32(0 + torchRowSum((i) => values[i], n));
  const vectors = Math.floor(n / V), lanes = new Float64Array(V);
  for (let l = 0; l < V; l++) lanes[l] = torchRowSum((m) => values[m * V + l], vectors);
  let sum = 0;
  for (let k = vectors * V; k < n; k++) sum = f32(sum + values[k]);
  for (let l = 0; l < V; l++) sum = f32(sum + lanes[l]);
  return f32(0 + sum);
}

function clamp01(x) {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}

// ---- torch's F.interpolate on a (1, 1, H, W) float32 tensor -------------------------------------------------------

export function areaResize(plane, oh, ow) {
  // F.interpolate(mode="area") = adaptive_avg_pool2d: each output pixel the float32 mean of its input block
  // [floor(o * in / out), ceil((o + 1) * in / out)), summed row by row, divided by the block's height then its width.
  // (h, w) -> (oh, ow)
  const { h, w, data } = plane, out = new Float32Array(oh * ow);
  for (let oy = 0; oy < oh; oy++) {
    const y0 = Math.floor((oy * h) / oh), y1 = Math.ceil(((oy + 1) * h) / oh);
    for (let ox = 0; ox < ow; ox++) {
      const x0 = Math.floor((ox * w) / ow), x1 = Math.ceil(((ox + 1) * w) / ow);
      let sum = 0;
      for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) sum = f32(sum + data[y * w + x]);
      out[oy * ow + ox] = f32(f32(sum / (y1 - y0)) / (x1 - x0));
    }
  }
  return { h: oh, w: ow, data: out };
}

function linearTaps(inSize, outSize) {
  // torch's compute_source_index_and_lambda (align_corners=False), in float32: for each output index, the two input
  // indices and their weights. -> { i0, i1: Int32Array(out), l0, l1: Float32Array(out) }
  const scale = outSize > 1 ? f32(inSize / outSize) : 0; // area_pixel_compute_scale
  const i0 = new Int32Array(outSize), i1 = new Int32Array(outSize);
  const l0 = new Float32Array(outSize), l1 = new Float32Array(outSize);
  for (let o = 0; o < outSize; o++) {
    if (inSize === outSize) {
      i0[o] = i1[o] = o;
      l0[o] = 1;
      continue;
    }
    let real = f32(scale * (o + 0.5) - 0.5); // area_pixel_compute_source_index (exact in float64, rounded once)
    if (real < 0) real = 0;
    const index = Math.min(Math.floor(real), inSize - 1); // guard_index_and_lambda
    const lambda = Math.min(Math.max(f32(real - index), 0), 1);
    i0[o] = index;
    i1[o] = index + (index < inSize - 1 ? 1 : 0);
    l1[o] = lambda;
    l0[o] = f32(1 - lambda);
  }
  return { i0, i1, l0, l1 };
}

export function bilinearResize(plane, oh, ow) {
  // F.interpolate(mode="bilinear", align_corners=False) of one channel, as torch's CPU kernel does it in float32
  // (with fused multiply-adds). For an output with oh + ow <= 128 torch takes its channels-last kernel
  // (upsample_bilinear2d_kernel_impl_float: the four corner weights multiplied first, then the four products
  // summed); for larger outputs its generic kernel (each row interpolated along the width, then the two rows along
  // the height). (h, w) -> (oh, ow)
  const { h, w, data } = plane, out = new Float32Array(oh * ow);
  const ys = linearTaps(h, oh), xs = linearTaps(w, ow);
  const cornersFirst = oh + ow <= 128;
  for (let oy = 0; oy < oh; oy++) {
    const r0 = ys.i0[oy] * w, r1 = ys.i1[oy] * w, h0 = ys.l0[oy], h1 = ys.l1[oy];
    for (let ox = 0; ox < ow; ox++) {
      const c0 = xs.i0[ox], c1 = xs.i1[ox], w0 = xs.l0[ox], w1 = xs.l1[ox];
      const v00 = data[r0 + c0], v01 = data[r0 + c1], v10 = data[r1 + c0], v11 = data[r1 + c1];
      let value;
      if (cornersFirst) {
        const w00 = f32(h0 * w0), w01 = f32(h0 * w1), w10 = f32(h1 * w0), w11 = f32(h1 * w1);
        value = fma(v11, w11, fma(v10, w10, fma(v00, w00, f32(v01 * w01)))); // v00 w00 + v01 w01 + v10 w10 + v11 w11
      } else {
        const top = fma(v00, w0, f32(v01 * w1)), bottom = fma(v10, w0, f32(v11 * w1)); // v0 w0 + v1 w1
        value = fma(top, h0, f32(bottom * h1));
      }
      out[oy * ow + ox] = value;
    }
  }
  return { h: oh, w: ow, data: out };
}

function antialiasTaps(inSize, outSize) {
  // torch's _compute_indices_min_size_weights_aa for the bilinear (triangle) filter, in float32 (scalar_t float):
  // for each output index, the first input index, how many inputs it reads and their normalised weights.
  // -> { start, count: Int32Array(out), weights: Float32Array(out * taps), taps }
  const scale = outSize > 1 ? f32(inSize / outSize) : 0;
  const support = scale >= 1 ? scale : 1; // (interp_size / 2) * scale, interp_size 2
  const taps = Math.ceil(support) * 2 + 1;
  const invscale = scale >= 1 ? f32(1 / scale) : 1;
  const start = new Int32Array(outSize), count = new Int32Array(outSize);
  const weights = new Float32Array(outSize * taps);
  for (let o = 0; o < outSize; o++) {
    const center = f32(scale * (o + 0.5));
    const xmin = Math.max(Math.trunc(f32(center - support) + 0.5), 0);
    const xsize = Math.min(Math.max(Math.min(Math.trunc(f32(center + support) + 0.5), inSize) - xmin, 0), taps);
    let total = 0;
    for (let j = 0; j < xsize; j++) {
      const x = Math.abs(f32((f32(j + xmin - center) + 0.5) * invscale)); // the filter's argument, as float
      const weight = x < 1 ? f32(1 - x) : 0; // HelperInterpLinear::aa_filter
      weights[o * taps + j] = weight;
      total = f32(total + weight);
    }
    if (total !== 0) for (let j = 0; j < xsize; j++) weights[o * taps + j] = f32(weights[o * taps + j] / total);
    start[o] = xmin;
    count[o] = xsize;
  }
  return { start, count, weights, taps };
}

function tapSum(data, from, step, weights, at, n) {
  // One output of torch's antialiased pass (interpolate_aa_single_dim): sum = t0 w0, then sum += tj wj for each
  // further tap, in order, in float32. As torch's x86-64 build compiles that loop (measured against it: exact on
  // every output tried), the further taps go four at a time with each product rounded before it is added, and the
  // last (n - 1) % 4 taps one at a time with a fused multiply-add.
  let sum = f32(data[from] * weights[at]);
  const grouped = 1 + Math.floor((n - 1) / 4) * 4;
  for (let j = 1; j < grouped; j++) sum = f32(sum + f32(data[from + j * step] * weights[at + j]));
  for (let j = grouped; j < n; j++) sum = fma(data[from + j * step], weights[at + j], sum);
  return sum;
}

export function antialiasResize(plane, oh, ow) {
  // F.interpolate(mode="bilinear", antialias=True, align_corners=False) of one channel, as torch's separable CPU
  // kernel does it: along the width first (if it changes), then along the height (if it changes), each output its
  // taps summed in order in float32 (tapSum). (h, w) -> (oh, ow)
  let { h, w, data } = plane;
  if (ow !== w) {
    const taps = antialiasTaps(w, ow), out = new Float32Array(h * ow);
    for (let y = 0; y < h; y++) {
      const row = y * w;
      for (let o = 0; o < ow; o++) {
        out[y * ow + o] = tapSum(data, row + taps.start[o], 1, taps.weights, o * taps.taps, taps.count[o]);
      }
    }
    data = out;
    w = ow;
  }
  if (oh !== h) {
    const taps = antialiasTaps(h, oh), out = new Float32Array(oh * w);
    for (let o = 0; o < oh; o++) {
      const from = taps.start[o] * w, at = o * taps.taps, n = taps.count[o];
      for (let x = 0; x < w; x++) out[o * w + x] = tapSum(data, from + x, w, taps.weights, at, n);
    }
    data = out;
    h = oh;
  }
  return { h, w, data };
}

// ---- Drawings -> MNIST ----------------------------------------------------------------------------------------------

export function eightBit(values) {
  // preprocess.eight_bit: clipped to [0, 1] and rounded to 256 levels, in float32. Float32Array -> Float32Array
  const out = new Float32Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = f32(roundHalfEven(f32(clamp01(values[i]) * 255)) / 255);
  return out;
}

export function pixels(values) {
  // page_numbers.pixels: an image on 256 levels in [0, 1] as its 8-bit pixels. Float32Array -> Uint8Array
  const out = new Uint8Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = roundHalfEven(f32(values[i] * 255));
  return out;
}

export function inkMap(grey, width, height) {
  // preprocess.ink_map for one channel (what the canvas sends: 8-bit grey): the background is the median
  // brightness; ink is how far a pixel is from it, towards white on a dark background, towards black on a light
  // one, in [0, 1]. (H*W) uint8 -> plane (H, W)
  const values = new Float32Array(grey.length);
  for (let i = 0; i < grey.length; i++) values[i] = f32(grey[i] / 255); // to_float_array: uint8 / 255 in float32
  const background = medianOf8Bit(grey);
  const ink = new Float32Array(values.length);
  if (background >= 0.5) {
    const scale = f32(Math.max(background, 1e-6));
    for (let i = 0; i < ink.length; i++) ink[i] = clamp01(f32(f32(background - values[i]) / scale));
  } else {
    const scale = f32(Math.max(1 - background, 1e-6));
    for (let i = 0; i < ink.length; i++) ink[i] = clamp01(f32(f32(values[i] - background) / scale));
  }
  return { h: height, w: width, data: ink };
}

export function strokeWidth(digit, h, w) {
  // preprocess.stroke_width: twice the ink mass over the total edge strength, of an (h, w) float32 ink map, the
  // sums as torch adds them (torchSum). torch.sqrt goes through MKL, which rounds some 0.5% of its results the
  // other way (1 ulp), so the width can differ from Python's in its last bits (measured: 7 of 2,000 MNIST
  // digits, by 1e-7): that changes the output only for a width within 1e-6 of a limit of STROKE_RANGE.
  const edges = new Float32Array((h - 1) * (w - 1)); // (h - 1, w - 1): sqrt(dx ** 2 + dy ** 2)
  for (let y = 0; y < h - 1; y++) {
    for (let x = 0; x < w - 1; x++) {
      const here = digit[y * w + x];
      const dy = f32(digit[(y + 1) * w + x] - here), dx = f32(digit[y * w + x + 1] - here);
      edges[y * (w - 1) + x] = Math.sqrt(f32(f32(dx * dx) + f32(dy * dy)));
    }
  }
  return f32(f32(2 * torchSum(digit)) / Math.max(torchSum(edges), TINY));
}

function inkBox(plane, threshold) {
  // The rows and columns holding a value above threshold: { top, bottom, left, right } (inclusive), or null.
  const { h, w, data } = plane;
  let top = h, bottom = -1, left = w, right = -1;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if (data[y * w + x] > threshold) {
        if (y < top) top = y;
        bottom = y;
        if (x < left) left = x;
        if (x > right) right = x;
      }
    }
  }
  return bottom < 0 ? null : { top, bottom, left, right };
}

function crop(plane, box) {
  // plane[top : bottom + 1, left : right + 1] -> plane (bottom - top + 1, right - left + 1)
  const h = box.bottom - box.top + 1, w = box.right - box.left + 1, out = new Float32Array(h * w);
  for (let y = 0; y < h; y++) {
    const from = (box.top + y) * plane.w + box.left;
    out.set(plane.data.subarray(from, from + w), y * w);
  }
  return { h, w, data: out };
}

function pad(plane, by) {
  // F.pad with zeros, `by` on every side: (h, w) -> (h + 2 by, w + 2 by)
  const h = plane.h + 2 * by, w = plane.w + 2 * by, out = new Float32Array(h * w);
  for (let y = 0; y < plane.h; y++) out.set(plane.data.subarray(y * plane.w, (y + 1) * plane.w), (y + by) * w + by);
  return { h, w, data: out };
}

export function fitBox(work) {
  // preprocess._fit_box: crop a work-scale ink map to its ink (> 0.05) and shrink it (area) so that its longest
  // side is 20 px, its peak scaled to 1. plane (H, W) -> plane (<= 20, <= 20)
  const box = inkBox(work, FAINT);
  if (!box) throw new Error("index 0 is out of bounds for dimension 0 with size 0"); // torch's error on no ink
  const ink = crop(work, box);
  const longest = Math.max(ink.h, ink.w);
  const digit = areaResize(ink, Math.max(1, roundHalfEven((ink.h * DIGIT_BOX) / longest)),
    Math.max(1, roundHalfEven((ink.w * DIGIT_BOX) / longest)));
  let peak = -Infinity;
  for (const v of digit.data) if (v > peak) peak = v;
  const divisor = Math.max(peak, TINY);
  for (let i = 0; i < digit.data.length; i++) digit.data[i] = f32(digit.data[i] / divisor);
  return digit;
}

export function changeWidth(work, by) {
  // preprocess._change_width: dilate (by > 0) or erode (by < 0) a (H, W) ink map with a k x k max (min) filter,
  // k = 2 * max(1, round(|by| / 2)) + 1, zeros beyond the border. plane (H, W) -> plane (H, W)
  // (A k x k max is a max along the rows, then along the columns; a min likewise.)
  const k = 2 * Math.max(1, roundHalfEven(Math.abs(by) / 2)) + 1, r = (k - 1) / 2, dilate = by > 0;
  const { h, w, data } = work;
  const rows = new Float32Array(h * w), out = new Float32Array(h * w);
  const pass = (from, to, size, step, count, stride) => {
    // along lines of `size` values `step` apart; `count` lines, `stride` apart
    for (let line = 0; line < count; line++) {
      for (let i = 0; i < size; i++) {
        let v = i - r < 0 || i + r >= size ? 0 : from[line * stride + i * step]; // the zero padding takes part
        for (let j = Math.max(0, i - r); j <= Math.min(size - 1, i + r); j++) {
          const u = from[line * stride + j * step];
          if (dilate ? u > v : u < v) v = u;
        }
        to[line * stride + i * step] = v;
      }
    }
  };
  pass(data, rows, w, 1, h, w);
  pass(rows, out, h, w, w, 1);
  return { h, w, data: out };
}

export function centreByMass(digit) {
  // preprocess._centre_by_mass: paste an (h, w) digit into a 28x28 image with its centre of mass at the centre
  // (a sub-pixel, bilinear shift), then scale so that typical ink (the 0.9 quantile) is at full strength, on 256
  // levels. plane (h, w) -> Float32Array (28 * 28)
  const { h, w, data } = digit;
  const mass = numpySum(data, true); // float32
  const ysWeighted = new Float64Array(h * w), xsWeighted = new Float64Array(h * w); // int64 * float32 -> float64
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      ysWeighted[y * w + x] = y * data[y * w + x];
      xsWeighted[y * w + x] = x * data[y * w + x];
    }
  }
  const comY = numpySum(ysWeighted, false) / mass, comX = numpySum(xsWeighted, false) / mass;
  const offsetY = Math.min(Math.max((DIGIT_CANVAS - 1) / 2 - comY, 0), DIGIT_CANVAS - h);
  const offsetX = Math.min(Math.max((DIGIT_CANVAS - 1) / 2 - comX, 0), DIGIT_CANVAS - w);
  const top = Math.trunc(offsetY), left = Math.trunc(offsetX);
  const fy = offsetY - top, fx = offsetX - left;
  // padded (h + 1, w + 1): the four shifted copies added in numpy's order, each weight a float32
  const pw = w + 1, padded = new Float32Array((h + 1) * pw);
  const parts = [[0, 0, f32((1 - fy) * (1 - fx))], [1, 0, f32(fy * (1 - fx))], [0, 1, f32((1 - fy) * fx)], [1, 1, f32(fy * fx)]];
  for (const [dy, dx, weight] of parts) {
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const at = (y + dy) * pw + x + dx;
        padded[at] = f32(padded[at] + f32(weight * data[y * w + x]));
      }
    }
  }
  // canvas (29, 29) with padded at (top, left), cut to (28, 28)
  const canvas = new Float32Array(DIGIT_CANVAS * DIGIT_CANVAS);
  for (let y = 0; y <= h; y++) {
    for (let x = 0; x <= w; x++) {
      if (top + y < DIGIT_CANVAS && left + x < DIGIT_CANVAS) canvas[(top + y) * DIGIT_CANVAS + left + x] = padded[y * pw + x];
    }
  }
  const inked = canvas.filter((v) => v > FAINT);
  const typical = numpyQuantile(inked, 0.9); // float32
  return eightBit(canvas.map((v) => f32(v / typical)));
}

export function preprocessDrawing(grey, width, height) {
  // preprocess.preprocess_drawing for the canvas' copy: (H*W) 8-bit grey (Uint8Array or Uint8ClampedArray; ink 255
  // on 0, or dark on light) -> Uint8Array (28 * 28), the 8-bit pixels of the MNIST-like digit, white on black.
  // Find the ink, crop to it, bring the stroke width into MNIST's range, scale the longest side to 20 px, centre
  // the centre of mass in 28x28. Throws NothingDrawn for a blank canvas, InputError for what is not an image.
  checkPixels(grey, width, height, 1);
  checkSize(width, height);
  const ink = inkMap(grey, width, height); // (H, W)
  let drawn = 0;
  for (const v of ink.data) if (v > INK_THRESHOLD) drawn++;
  if (drawn < MIN_INK_PIXELS) throw new NothingDrawn();
  const inkCrop = crop(ink, inkBox(ink, INK_THRESHOLD)); // (h, w)

  // Work at 4x the final size: fine enough to adjust strokes, small enough to be fast.
  const { h, w } = inkCrop;
  const scale = (WORK_SCALE * DIGIT_BOX) / Math.max(h, w);
  const oh = Math.max(1, roundHalfEven(h * scale)), ow = Math.max(1, roundHalfEven(w * scale));
  let work = scale < 1 ? areaResize(inkCrop, oh, ow) : bilinearResize(inkCrop, oh, ow); // (<= 80, <= 80)
  const inked = work.data.filter((v) => v > FAINT);
  if (!inked.length) throw new NothingDrawn(); // a few faint dots far apart, averaged away at this scale
  // A pen much thinner than a work pixel leaves faint grey strokes: scale so typical ink is full strength.
  const typical = Math.max(torchQuantile(inked, 0.9), TINY);
  for (let i = 0; i < work.data.length; i++) work.data[i] = clamp01(f32(work.data[i] / typical));
  work = pad(work, WORK_SCALE * 4); // room for thicker strokes
  const [low, high] = STROKE_RANGE;
  let digit;
  for (let round = 0; round < 4; round++) {
    digit = centreByMass(fitBox(work));
    const width = strokeWidth(digit, DIGIT_CANVAS, DIGIT_CANVAS);
    if (low <= width && width <= high) break;
    const adjusted = changeWidth(work, ((width < low ? low : high) - width) * WORK_SCALE);
    if (!adjusted.data.some((v) => v > FAINT)) break; // thinning would erase the ink altogether: keep the strokes
    work = adjusted;
  }
  return pixels(digit);
}

// ---- Photos -> CIFAR-10 ---------------------------------------------------------------------------------------------

let overWhite = null;

function compositeOverWhite() {
  // The first step of preprocess_photo for every 8-bit (alpha, value): value / 255 * alpha + (1 - alpha), each
  // operation in float32 as numpy does it, as a table: Float32Array (256 * 256), alpha major.
  if (!overWhite) {
    overWhite = new Float32Array(256 * 256);
    for (let a = 0; a < 256; a++) {
      const alpha = f32(a / 255), background = f32(1 - alpha);
      for (let v = 0; v < 256; v++) overWhite[a * 256 + v] = f32(f32(f32(v / 255) * alpha) + background);
    }
  }
  return overWhite;
}

export function preprocessPhoto(rgba, width, height, size = 32) {
  // preprocess.preprocess_photo for a decoded upload's RGBA pixels (as getImageData gives them: (H*W*4) 8-bit,
  // not premultiplied) -> Uint8Array (size * size * 3), HWC: the 8-bit pixels of the CIFAR-10-like photo.
  // Transparent areas become white; the shorter side is resized to `size` (bilinear, antialiased) and the centre
  // cropped. Throws NothingDrawn for an empty or flat image, InputError for what is not an image.
  checkPixels(rgba, width, height, 4);
  checkSize(width, height);
  const n = width * height, over = compositeOverWhite();
  const planes = [], ranges = []; // (3, H, W) and each channel's range (np.ptp, in float32)
  for (let c = 0; c < 3; c++) {
    const plane = new Float32Array(n);
    let lo = Infinity, hi = -Infinity;
    for (let p = 0; p < n; p++) {
      const v = over[rgba[p * 4 + 3] * 256 + rgba[p * 4 + c]];
      plane[p] = v;
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    planes.push(plane);
    ranges.push(f32(hi - lo));
  }
  if (ranges.every((range) => range < FLAT_RANGE)) {
    throw new NothingDrawn("Nothing to classify: the image is one flat colour.");
  }
  const scale = size / Math.min(height, width);
  const oh = Math.max(size, roundHalfEven(height * scale)), ow = Math.max(size, roundHalfEven(width * scale));
  const top = Math.floor((oh - size) / 2), left = Math.floor((ow - size) / 2);
  const out = new Uint8Array(size * size * 3);
  planes.forEach((plane, c) => {
    const resized = antialiasResize({ h: height, w: width, data: plane }, oh, ow).data; // (oh, ow)
    for (let y = 0; y < size; y++) {
      for (let x = 0; x < size; x++) {
        const v = clamp01(resized[(top + y) * ow + left + x]); // .clamp(0, 1), then eight_bit
        out[(y * size + x) * 3 + c] = roundHalfEven(f32(v * 255));
      }
    }
  });
  return out;
}
