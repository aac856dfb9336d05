// Python's, numpy's and torch's arithmetic, as the page's preprocessing (preprocess.js) mirrors it: float32 where
// numpy or torch compute in float32 (Math.fround after each operation: a float32 operation is the double one rounded
// once), float64 where they compute in float64, torch.quantile and np.quantile (linear), np.median, numpy's pairwise
// sums and torch's sums, Python's and numpy's rounding (halves to even). Where torch's compiled kernels fuse a
// multiply and an add, or group a loop's additions, so does this port: that is how torch's x86-64 builds compute,
// measured against torch 2.14 kernel by kernel, bit for bit (see fma, torchSum). Pure functions on typed arrays.

export const f32 = Math.fround;

export function fma(a, b, c) {
  // a * b + c rounded once to float32, as the fused multiply-add that torch's x86-64 kernels are compiled to (its
  // AVX2 and AVX512 builds contract `x * y + z`). The product of two float32 values is exact in float64, so only
  // the sum is rounded twice (to float64, then float32), which differs from one rounding about once in 2^29 sums.
  return f32(a * b + c);
}

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
    const r = new Float64Array(values.subarray(start, start + 8));
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

// np.sum of a contiguous array: add.reduce from its identity (0) over the pairwise sum (exact: -0 becomes 0).
export const numpySum = (values, float32) => 0 + pairwiseSum(values, 0, values.length, float32);

export function medianOf8Bit(grey) {
  // np.median of the float32 values v / 255 of 8-bit pixels (the middle one, or the float32 mean of the middle two),
  // by counting rather than sorting.
  const counts = new Uint32Array(256);
  for (let i = 0; i < grey.length; i++) counts[grey[i]]++;
  const n = grey.length, nth = (k) => { // the k-th smallest value (from 0)
    let v = 0;
    for (let seen = counts[0]; seen <= k; seen += counts[++v]);
    return f32(v / 255);
  };
  return n % 2 ? nth(n >> 1) : f32(f32(nth((n >> 1) - 1) + nth(n >> 1)) / 2);
}

export function numpyQuantile(values, q) {
  // np.quantile(values, q) (method "linear") of a float32 array with a Python float q: the virtual index in
  // float64, the interpolation (numpy's _lerp) in float32, q being a weak scalar.
  if (!values.length) throw new Error("cannot take the quantile of no values");
  const sorted = Float32Array.from(values).sort(), n = sorted.length, virtual = (n - 1) * q;
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
  const sorted = Float32Array.from(values).sort(), rank = f32(q) * (sorted.length - 1);
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
    for (let j = 0; j < levelStep; j++, i++)
      for (let k = 0; k < rows; k++) acc[0][k] = f32(acc[0][k] + get(i * rows + k));
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

export const clamp01 = (x) => (x < 0 ? 0 : x > 1 ? 1 : x);
