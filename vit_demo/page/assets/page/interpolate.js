// torch's F.interpolate on a (1, 1, H, W) float32 tensor, as aten/src/ATen/native/cpu computes it: area (adaptive
// average pooling), bilinear with align_corners=False, and bilinear with antialias=True; PIL's Image.resize of an
// 8-bit image (pilResize); and torch's antialiased interpolation of a uint8 image, as torchvision's resize does it
// (torchResizeUint8); for the page's preprocessing (preprocess.js). For torch's float32 ones an image is a plane,
// { h, w, data: Float32Array(h * w) } (one channel, row-major); for the 8-bit ones data is 8-bit (h, w, channels).
import { f32, fma } from "./arithmetic.js";

export function areaResize(plane, oh, ow) {
  // F.interpolate(mode="area") = adaptive_avg_pool2d, (h, w) -> (oh, ow): each output pixel the float32 mean of its
  // input block [floor(o * in / out), ceil((o + 1) * in / out)), summed row by row, divided by its height then width.
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
  for (let o = 0; o < outSize; o++) { // (a side that keeps its size: each output its input, weight 1, as torch copies)
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
  // F.interpolate(mode="bilinear", align_corners=False) of one channel, (h, w) -> (oh, ow), as torch's CPU kernel
  // does it in float32 (with fused multiply-adds). For an output with oh + ow <= 128 torch takes its channels-last
  // kernel (upsample_bilinear2d_kernel_impl_float: the four corner weights multiplied first, then the four products
  // summed); for larger ones its generic kernel (each row interpolated along the width, then the two along the height).
  const { h, w, data } = plane, out = new Float32Array(oh * ow);
  const ys = linearTaps(h, oh), xs = linearTaps(w, ow), cornersFirst = oh + ow <= 128;
  for (let oy = 0; oy < oh; oy++) {
    const r0 = ys.i0[oy] * w, r1 = ys.i1[oy] * w, h0 = ys.l0[oy], h1 = ys.l1[oy];
    for (let ox = 0; ox < ow; ox++) {
      const c0 = xs.i0[ox], c1 = xs.i1[ox], w0 = xs.l0[ox], w1 = xs.l1[ox];
      const v00 = data[r0 + c0], v01 = data[r0 + c1], v10 = data[r1 + c0], v11 = data[r1 + c1];
      if (cornersFirst) {
        const w00 = f32(h0 * w0), w01 = f32(h0 * w1), w10 = f32(h1 * w0), w11 = f32(h1 * w1);
        // v00 w00 + v01 w01 + v10 w10 + v11 w11
        out[oy * ow + ox] = fma(v11, w11, fma(v10, w10, fma(v00, w00, f32(v01 * w01))));
      } else {
        const top = fma(v00, w0, f32(v01 * w1)), bottom = fma(v10, w0, f32(v11 * w1)); // v0 w0 + v1 w1
        out[oy * ow + ox] = fma(top, h0, f32(bottom * h1));
      }
    }
  }
  return { h: oh, w: ow, data: out };
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
  // taps (filterTaps in float32: its _compute_indices_min_size_weights_aa) summed in order in float32 (tapSum).
  // (h, w) -> (oh, ow)
  const antialiasTaps = (n, size) => filterTaps(n, size, FILTERS.bilinear, f32);
  let { h, w, data } = plane;
  if (ow !== w) {
    const { start, count, weights, taps } = antialiasTaps(w, ow), out = new Float32Array(h * ow);
    for (let y = 0; y < h; y++)
      for (let o = 0; o < ow; o++) out[y * ow + o] = tapSum(data, y * w + start[o], 1, weights, o * taps, count[o]);
    data = out;
    w = ow;
  }
  if (oh !== h) {
    const { start, count, weights, taps } = antialiasTaps(h, oh), out = new Float32Array(oh * w);
    for (let o = 0; o < oh; o++)
      for (let x = 0; x < w; x++) out[o * w + x] = tapSum(data, start[o] * w + x, w, weights, o * taps, count[o]);
    data = out;
    h = oh;
  }
  return { h, w, data };
}

// ---- PIL's Image.resize of 8-bit pixels, as Pillow 12.3 computes it (src/libImaging/Resample.c, Geometry.c), and
// torch's uint8 antialiased interpolation (aten/src/ATen/native/cpu/UpSampleKernel.cpp), which computes the same
// weights in double and rounds them to fewer bits --------------------------------------------------------------------

const PRECISION_BITS = 22; // PIL's: 32 - 8 - 2: a weight is an integer, weight / 2^22 its value

const FILTERS = { // Resample.c's filters (of |x|) and their supports: bilinear_filter, bicubic_filter (a = -0.5);
  // torch's HelperInterpLinear::aa_filter and HelperInterpCubic::aa_filter (a = -0.5 with antialias): the same doubles
  bilinear: [1, (x) => (x < 1 ? 1 - x : 0)],
  bicubic: [2, (x) => (x < 1 ? (1.5 * x - 2.5) * x * x + 1 : x < 2 ? (((x - 5) * x + 8) * x - 4) * -0.5 : 0)],
};

function torchPrecision(largest) {
  // _compute_index_ranges_int16_weights' weights_precision: the first p under 22 at which the largest weight, at
  // p + 1 bits, would round to 2^15 or more (p bits keep every weight an int16); else 22.
  let p = 0;
  while (p < 22 && Math.trunc(0.5 + largest * 2 ** (p + 1)) < 2 ** 15) p++;
  return p;
}

function filterTaps(inSize, outSize, [filterSupport, filter], round) {
  // Each output index's first input index, how many inputs it reads and their weights, normalised to sum 1 (unless
  // they sum to 0), and the largest weight: PIL's precompute_coeffs (its box the whole image) in double (``round``
  // the identity), or torch's _compute_indices_min_size_weights_aa in float32 (``round`` f32: its scalar_t float).
  // -> { start, count: Int32Array(out), weights: Float64Array(out * taps), taps, largest }
  const scale = round(inSize / outSize), filterscale = Math.max(scale, 1), inverse = round(1 / filterscale);
  const support = filterSupport * filterscale, taps = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(outSize), count = new Int32Array(outSize), weights = new Float64Array(outSize * taps);
  let largest = 0;
  for (let o = 0; o < outSize; o++) {
    const center = round((o + 0.5) * scale), at = o * taps;
    const xmin = Math.max(Math.trunc(round(center - support) + 0.5), 0);
    const xsize = Math.min(Math.max(Math.min(Math.trunc(round(center + support) + 0.5), inSize) - xmin, 0), taps);
    let total = 0;
    for (let j = 0; j < xsize; j++) { // the filter's argument: (j + xmin - center + 0.5) / filterscale
      weights[at + j] = round(filter(Math.abs(round((round(j + xmin - center) + 0.5) * inverse))));
      total = round(total + weights[at + j]);
    }
    if (total !== 0)
      for (let j = 0; j < xsize; j++) largest = Math.max(largest, (weights[at + j] = round(weights[at + j] / total)));
    start[o] = xmin;
    count[o] = xsize;
  }
  return { start, count, weights, taps, largest };
}

function resampleCoeffs(inSize, outSize, filter, bits) {
  // filterTaps in double, then normalize_coeffs_8bpc: the weights rounded to fixed point with `bits` bits, halves
  // away from 0 (torch's _compute_index_ranges_int16_weights: the same, with bits null, torchPrecision of the largest).
  // -> { start, count: Int32Array(out), weights: Int32Array(out * taps), taps, precision }
  const { weights: k, largest, ...taps } = filterTaps(inSize, outSize, filter, (x) => x);
  const precision = bits ?? torchPrecision(largest), weights = new Int32Array(k.length);
  for (let i = 0; i < k.length; i++) weights[i] = Math.trunc(k[i] * 2 ** precision + (k[i] < 0 ? -0.5 : 0.5));
  return { ...taps, weights, precision };
}

function resamplePass(image, channels, ow, oh, filter, bits) {
  // PIL's ImagingResampleHorizontal_8bpc (oh = h) or ImagingResampleVertical_8bpc (ow = w); torch's
  // basic_loop_aa_horizontal<uint8_t> or basic_loop_aa_vertical<uint8_t> (and the AVX2 ImagingResampleHorizontal and
  // ImagingResampleVertical, the same integer sums). The image itself where its size does not change. Each value:
  // half of 2^precision plus the taps' integer products, shifted right by the precision and clamped to [0, 255]
  // (clip8, std::clamp), as a Uint8ClampedArray clamps. { h, w, data } -> { h: oh, w: ow, data: Uint8ClampedArray }
  const { h, w, data } = image, horizontal = ow !== w;
  if (!horizontal && oh === h) return image;
  const { start, count, weights, taps, precision } =
    resampleCoeffs(horizontal ? w : h, horizontal ? ow : oh, FILTERS[filter], bits);
  const step = horizontal ? channels : w * channels, out = new Uint8ClampedArray(oh * ow * channels);
  for (let y = 0; y < oh; y++)
    for (let x = 0; x < ow; x++) {
      const o = horizontal ? x : y, from = (horizontal ? y * w + start[o] : start[o] * w + x) * channels;
      const k = o * taps, n = count[o];
      for (let c = 0; c < channels; c++) {
        let sum = 1 << (precision - 1);
        for (let j = 0, at = from + c; j < n; j++, at += step) sum += data[at] * weights[k + j];
        out[(y * ow + x) * channels + c] = sum >> precision;
      }
    }
  return { h: oh, w: ow, data: out };
}

function nearestIndices(inSize, outSize) {
  // ImagingScaleAffine's input index for each output index: the coordinate summed in double from a / 2 in steps of
  // a = in / out, truncated (COORD). -> Int32Array(out)
  const a = inSize / outSize, at = new Int32Array(outSize);
  let coordinate = a * 0.5;
  for (let o = 0; o < outSize; o++, coordinate += a) at[o] = Math.trunc(coordinate);
  return at;
}

export function pilResize(pixels, width, height, channels, outWidth, outHeight, filter) {
  // Image.resize((outWidth, outHeight), filter) of an 8-bit image ("RGB", "L"...), filter "nearest", "bilinear" or
  // "bicubic". NEAREST is an affine transform (_resize -> ImagingTransform: ImagingScaleAffine); the others
  // ImagingResampleInner's two passes, 8-bit in between: along the width, then along the height (Image.resize, since
  // Pillow 12.2, does the height first for an image over 100 times taller than wide that it makes shorter), each
  // only if its side changes. (height, width, channels) interleaved -> (outHeight, outWidth, channels): a
  // Uint8ClampedArray, or the pixels themselves if the size does not change.
  if (filter === "nearest") {
    const ys = nearestIndices(height, outHeight), xs = nearestIndices(width, outWidth);
    const out = new Uint8ClampedArray(outHeight * outWidth * channels);
    for (let y = 0, at = 0; y < outHeight; y++)
      for (let x = 0; x < outWidth; x++) {
        const from = (ys[y] * width + xs[x]) * channels;
        for (let c = 0; c < channels; c++) out[at++] = pixels[from + c];
      }
    return out;
  }
  if (!FILTERS[filter]) throw new Error(`PIL's resize here takes nearest, bilinear or bicubic, not ${filter}`);
  let image = { h: height, w: width, data: pixels };
  if (height > width * 100 && outHeight < height)
    image = resamplePass(image, channels, width, outHeight, filter, PRECISION_BITS);
  image = resamplePass(image, channels, outWidth, image.h, filter, PRECISION_BITS);
  return resamplePass(image, channels, outWidth, outHeight, filter, PRECISION_BITS).data; // (done for a tall image)
}

export function torchResizeUint8(pixels, width, height, channels, outWidth, outHeight, filter) {
  // torchvision's resize of a uint8 (channels, height, width) tensor, antialias=True, filter "bilinear" or "bicubic":
  // F.interpolate(mode=filter, antialias=True, align_corners=False) on uint8, as torch 2.14 computes it on the CPU
  // (upsample_bilinear2d_aa_kernel_impl, upsample_bicubic2d_aa_kernel_impl: upsample_avx_bilinear_bicubic_uint8 on
  // x86-64 with AVX2, separable_upsample_generic_Nd_kernel_impl elsewhere, the same integers). PIL's resampling
  // with each pass's weights rounded to torch's weights_precision bits (torchPrecision) instead of 22: along the
  // width, then along the height, each only if its side changes, 8-bit in between (torchvision takes this path for
  // bilinear only where the CPU has AVX2 or is an ARM one; elsewhere it resizes in float32). (height, width,
  // channels) interleaved -> (outHeight, outWidth, channels): a Uint8ClampedArray, or the pixels if the size stays.
  if (!FILTERS[filter]) throw new Error(`torchvision's resize here takes bilinear or bicubic, not ${filter}`);
  const image = resamplePass({ h: height, w: width, data: pixels }, channels, outWidth, height, filter, null);
  return resamplePass(image, channels, outWidth, outHeight, filter, null).data;
}
