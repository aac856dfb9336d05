import io
import time

import numpy as np
import pytest
from conftest import draw_on_canvas, mnist_test_digits, pixel_bomb_png
from PIL import Image, ImageDraw

from vit_demo.data.preprocess import (STROKE_RANGE, InputError, NothingDrawn, preprocess_drawing, preprocess_photo,
                                      stroke_width)


def _png_bytes(image: Image.Image, **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=params.pop("format", "PNG"), **params)
    return buffer.getvalue()


# ---- Drawings ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits(mnist_root):
    return mnist_test_digits(mnist_root, 8)


@pytest.mark.parametrize("canvas,size,at", [(800, 300, (50, 50)), (800, 120, (600, 640)), (800, 700, (60, 20)),
                                            (200, 150, (25, 40)), (1000, 250, (700, 10))])
def test_moved_or_scaled_digit_gives_nearly_the_same_input(digits, canvas, size, at):
    images, _ = digits
    for digit in images:
        reference = preprocess_drawing(draw_on_canvas(digit))
        moved = preprocess_drawing(draw_on_canvas(digit, canvas=canvas, size=size, at=at))
        assert moved.shape == (28, 28) and moved.dtype == np.float32
        assert np.abs(moved - reference).mean() < 0.03
        assert np.corrcoef(moved.ravel(), reference.ravel())[0, 1] > 0.95


def test_output_looks_like_mnist(digits):
    images, _ = digits
    out = preprocess_drawing(draw_on_canvas(images[0]))
    assert out.min() >= 0 and out.max() == pytest.approx(1.0)
    rows, cols = np.nonzero(out > 0.05)
    assert rows.max() - rows.min() < 22 and cols.max() - cols.min() < 22  # fits the 20 px box (+ antialiasing)
    ys, xs = np.indices(out.shape)
    com = ((ys * out).sum() / out.sum(), (xs * out).sum() / out.sum())
    assert abs(com[0] - 14) <= 1 and abs(com[1] - 14) <= 1
    assert out[:2].max() == 0 and out[:, :2].max() == 0  # a black border, as in MNIST


def test_ink_polarity_and_transparent_layers_agree(digits):
    digit = digits[0][1]
    black_on_white = preprocess_drawing(draw_on_canvas(digit, ink="black"))
    white_on_black = preprocess_drawing(draw_on_canvas(digit, ink="white"))
    # A sketchpad layer: transparent, with black ink carried in alpha.
    layer = np.zeros((800, 800, 4), dtype=np.uint8)
    layer[..., 3] = 255 - np.asarray(draw_on_canvas(digit).convert("L"))
    from_alpha = preprocess_drawing(layer)
    for other in (white_on_black, from_alpha):
        assert np.abs(other - black_on_white).mean() < 0.02


def _pen_drawing(width: int, canvas: int = 800) -> Image.Image:
    image = Image.new("RGBA", (canvas, canvas), "white")
    s = canvas / 800
    ImageDraw.Draw(image).line([(200 * s, 200 * s), (600 * s, 200 * s), (350 * s, 700 * s)], fill="black",
                               width=max(1, round(width * s)), joint="curve")
    return image


@pytest.mark.parametrize("width", [1, 3, 12, 40, 110])
def test_thin_pens_and_thick_brushes_give_mnist_stroke_widths(width):
    import torch

    out = preprocess_drawing(_pen_drawing(width))
    low, high = STROKE_RANGE
    assert low - 0.3 <= stroke_width(torch.from_numpy(out)) <= high + 0.3
    assert out.max() == pytest.approx(1.0) and (out > 0.5).sum() > 20  # full-strength ink, not a faint trace


@pytest.mark.parametrize("blank", [
    np.full((400, 400, 4), 255, np.uint8),  # a white sketchpad composite
    np.zeros((400, 400, 4), np.uint8),  # an empty transparent layer
    np.zeros((300, 300), np.uint8),  # black
    np.full((300, 300, 3), 128, np.uint8),  # uniform grey
    np.zeros((0, 0, 3), np.uint8),  # no pixels at all
], ids=["white", "transparent", "black", "grey", "empty"])
def test_blank_canvas_is_nothing_to_classify(blank):
    with pytest.raises(NothingDrawn, match="Nothing to classify"):
        preprocess_drawing(blank)


def test_faint_dots_far_apart_are_nothing_to_classify():
    """Four faint dots at the canvas' edges: their crop is large, so scaling it down averages them away."""
    canvas = np.zeros((112, 112), np.uint8)
    for y, x in ((0, 3), (3, 0), (111, 3), (3, 111)):
        canvas[y, x] = 54
    with pytest.raises(NothingDrawn):
        preprocess_drawing(canvas)


def test_a_stray_click_is_nothing_to_classify():
    canvas = np.full((500, 500), 255, np.uint8)
    canvas[250, 250] = 0
    with pytest.raises(NothingDrawn):
        preprocess_drawing(canvas)


def test_drawing_from_path_bytes_and_pil_agree(tmp_path, digits):
    image = draw_on_canvas(digits[0][2], canvas=300, size=200)
    path = tmp_path / "digit.png"
    image.save(path)
    expected = preprocess_drawing(image)
    for source in (path, str(path), path.read_bytes(), np.asarray(image)):
        np.testing.assert_allclose(preprocess_drawing(source), expected, atol=1e-6)


# ---- Photos --------------------------------------------------------------------------------------


def _halves(width: int = 64, height: int = 48) -> Image.Image:
    """Left half red, right half blue."""
    image = Image.new("RGB", (width, height), (255, 0, 0))
    image.paste((0, 0, 255), (width // 2, 0, width, height))
    return image


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "P", "L", "LA", "1", "CMYK", "I", "F", "YCbCr"])  # 16-bit: below
def test_photo_of_any_mode(mode):
    out = preprocess_photo(_halves().convert(mode))
    assert out.shape == (32, 32, 3) and out.dtype == np.float32
    assert 0 <= out.min() and out.max() <= 1
    if mode in ("RGB", "RGBA", "P", "CMYK"):
        assert out[16, 2, 0] > 0.9 and out[16, 29, 2] > 0.9  # red stays left, blue stays right


def test_sixteen_bit_photo_keeps_its_range():
    array = np.full((40, 40), 65535, np.uint16)
    array[:, :20] = 0
    out = preprocess_photo(Image.fromarray(array))
    assert out[:, :10].max() < 0.05 and out[:, -10:].min() > 0.95


def test_transparent_photo_is_composited_on_white():
    image = Image.new("RGBA", (50, 50), (0, 0, 0, 0))
    image.paste((0, 0, 255, 255), (25, 0, 50, 50))  # the right half opaque blue
    out = preprocess_photo(image)
    assert out[:, :10].min() == pytest.approx(1.0) and out[:, -10:, 2].min() > 0.95


@pytest.mark.parametrize("image", [Image.new("RGB", (64, 48), "white"), Image.new("RGB", (64, 48), "black"),
                                   Image.new("RGBA", (64, 48), (200, 30, 30, 0)), Image.new("RGB", (1, 1), "red"),
                                   Image.new("L", (32, 32), 128)], ids=["white", "black", "transparent", "1x1", "grey"])
def test_a_one_colour_photo_is_nothing_to_classify(image):
    with pytest.raises(NothingDrawn, match="one flat colour"):
        preprocess_photo(image)


def test_a_float_tiff_in_0_1_is_read_like_a_float_array(tmp_path, digits):
    """Scientific tools write 32-bit float images (PIL mode "F") with values in [0, 1]."""
    digit = digits[0][0].astype(np.float32) / 255  # (28, 28) in [0, 1], white ink on black
    Image.fromarray(digit).save(tmp_path / "digit.tif")
    np.testing.assert_allclose(preprocess_drawing(tmp_path / "digit.tif"), preprocess_drawing(digit), atol=1e-6)
    photo = np.asarray(_halves(), dtype=np.float32)[..., 0] / 255  # red channel: a bright half and a dark half
    Image.fromarray(photo).save(tmp_path / "photo.tif")
    np.testing.assert_allclose(preprocess_photo(tmp_path / "photo.tif"), preprocess_photo(photo), atol=1e-6)


def test_photo_is_resized_by_its_shorter_side_and_centre_cropped():
    out = preprocess_photo(_halves(320, 64))  # 5:1, the crop keeps the middle: the red/blue border
    assert out[:, :12, 0].mean() > 0.9 and out[:, -12:, 2].mean() > 0.9


def test_exif_rotation_is_applied():
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees clockwise to display"
    data = _png_bytes(_halves(64, 48), format="JPEG", exif=exif.tobytes(), quality=95)
    out = preprocess_photo(data)
    # Displayed upright, the red half is on top and the blue half at the bottom.
    assert out[2, 16, 0] > 0.8 and out[29, 16, 2] > 0.8


def test_animated_gif_gives_its_first_frame():
    frames = [Image.new("RGB", (40, 40), colour) for colour in ((255, 0, 0), (0, 255, 0), (0, 0, 255))]
    for frame in frames:
        frame.paste((255, 255, 255), (0, 0, 4, 4))  # a white corner: no frame is one flat colour
    buffer = io.BytesIO()
    frames[0].save(buffer, format="GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    out = preprocess_photo(buffer.getvalue())
    assert out[..., 0].mean() > 0.9 and out[..., 1].mean() < 0.1


# ---- Bad input -----------------------------------------------------------------------------------


BAD_FILES = {
    "text": (b"this is not an image\n", "not an image"),
    "svg": (b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>',
            "not an image"),
    "truncated": (_png_bytes(Image.effect_noise((200, 200), 50))[:700], "damaged or truncated"),
    "bomb": (pixel_bomb_png(), "too"),
    "empty": (b"", "empty"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
@pytest.mark.parametrize("preprocess", [preprocess_drawing, preprocess_photo])
def test_bad_files_give_a_clear_error_quickly(tmp_path, name, preprocess):
    data, message = BAD_FILES[name]
    path = tmp_path / f"{name}.png"
    path.write_bytes(data)
    started = time.perf_counter()
    for source in (path, data):
        with pytest.raises(InputError, match=message):
            preprocess(source)
    assert time.perf_counter() - started < 10  # a generous bound: the bomb must not be decoded


def test_oversized_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.png"
    with open(path, "wb") as f:
        f.truncate(50 * 2**20)  # sparse: 50 MB on paper
    with pytest.raises(InputError, match="larger than"):
        preprocess_photo(path)


def test_missing_file():
    with pytest.raises(InputError, match="no such file"):
        preprocess_photo("no/such/picture.png")


@pytest.mark.parametrize("array,message", [
    (np.full((10, 10), np.nan, np.float32), "NaN"),
    (np.zeros((3, 4, 5, 6)), "must be"),
    (np.zeros((10, 10, 7)), "must be"),
    (np.array([["a", "b"]]), "real numbers"),
    (np.zeros((1, 50_000_000), np.uint8), "too large"),
])
def test_unusable_arrays(array, message):
    with pytest.raises(InputError, match=message):
        preprocess_photo(array)


def test_unsupported_object():
    with pytest.raises(InputError, match="cannot read an image from a dict"):
        preprocess_drawing({"composite": None})
