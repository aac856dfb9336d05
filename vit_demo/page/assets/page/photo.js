// A photo read in the page: decoded by the browser (its orientation from the file, no colour conversion), refused
// above MAX_PIXELS as the server refuses it, and classified by the tab's source (source.js: photo). The host
// (host.js) reads uploads and examples with it; the digit tab's canvas (canvas.js) decodes a digit's photo with it.

const MAX_PIXELS = 40_000_000; // vit_demo/data/preprocess.py MAX_PIXELS: refused before decoding, as the server does
const MAX_FILE_BYTES = 20 * 1024 * 1024; // vit_demo/data/preprocess.py MAX_FILE_BYTES

async function claimedPixels(blob) {
  // The pixels a PNG, GIF or BMP file's header claims (null for other kinds): read before decoding, as
  // vit_demo/data/preprocess.py does, so that a file claiming billions of pixels is refused without the browser trying.
  const head = new DataView(await blob.slice(0, 26).arrayBuffer()), bytes = new Uint8Array(head.buffer);
  const starts = (...magic) => magic.every((b, i) => bytes[i] === b);
  if (head.byteLength >= 24 && starts(0x89, 0x50, 0x4e, 0x47)) return head.getUint32(16) * head.getUint32(20);
  if (head.byteLength >= 10 && starts(0x47, 0x49, 0x46)) return head.getUint16(6, true) * head.getUint16(8, true);
  if (head.byteLength >= 26 && starts(0x42, 0x4d)) return Math.abs(head.getInt32(18, true) * head.getInt32(22, true));
  return null;
}

export async function decodeImage(blob, unreadable) {
  // A file (a Blob) decoded by the browser: {bitmap}, or {message, refused: true} saying why it can't be read
  // (``unreadable``: the model's template, with {why}), so that the page does not show the file.
  const refuse = (why) => ({ message: unreadable.replace("{why}", why), refused: true });
  if (blob.size > MAX_FILE_BYTES) return refuse(`the file is larger than ${MAX_FILE_BYTES / 2 ** 20} MB`);
  if ((await claimedPixels(blob)) > MAX_PIXELS)
    return refuse(`the image has too many pixels (more than ${MAX_PIXELS.toLocaleString("en")})`);
  const bitmap = await createImageBitmap(blob, { imageOrientation: "from-image", premultiplyAlpha: "none",
                                                 colorSpaceConversion: "none" }).catch(() => null);
  if (!bitmap) return refuse("this file is not an image that can be read (PNG, JPEG, GIF, BMP, WebP...)");
  const { width, height } = bitmap;
  if (width * height <= MAX_PIXELS) return { bitmap };
  bitmap.close();
  return refuse(`the image is too large (${width}x${height}); the limit is ${MAX_PIXELS.toLocaleString("en")} pixels`);
}

export async function readPhoto(source, blob, unreadable) {
  // The tab's answer for a photo (a Blob): its numbers, or why it can't be read (decodeImage).
  const { bitmap, ...refused } = await decodeImage(blob, unreadable);
  if (!bitmap) return refused;
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height), context = canvas.getContext("2d");
  context.drawImage(bitmap, 0, 0);
  bitmap.close();
  return source.photo(context.getImageData(0, 0, canvas.width, canvas.height).data, canvas.width, canvas.height);
}
