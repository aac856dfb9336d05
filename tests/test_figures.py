"""The pictures of the faithfulness and inside-the-model views, from the shipped models and example images."""

import functools
import json
from concurrent.futures import ThreadPoolExecutor

import matplotlib
import numpy as np
import pytest
from conftest import REPO

from vit_demo.classifier import load_model
from vit_demo.interpret.faithfulness import MAP_KINDS, faithfulness
from vit_demo.interpret.inside import embedding_components, position_similarity, read_attention_distance
from vit_demo.pictures import figures, render

TAB_COLOURS = {"attention": (31, 119, 180), "rollout": (255, 127, 14), "relevance": (44, 160, 44),
               "random": (128, 128, 128)}  # matplotlib's tab:blue, tab:orange, tab:green and grey


@functools.cache
def classifier(name: str):
    return load_model(name, device="cpu")


@pytest.fixture(scope="module")
def digit_curves():
    """Deletion and insertion curves of two example digits, {kind: Curves of (2, STEPS + 1)}."""
    clf = classifier("mnist")
    inputs = [clf.preprocess(REPO / "examples" / "digits" / f"{name}.png") for name in ("0", "7")]
    return faithfulness(clf.model, clf.batch(inputs), "mnist")


def pixels_near(picture, colour, tolerance: int = 10) -> int:
    return int((np.abs(np.asarray(picture, dtype=int) - colour).max(axis=-1) <= tolerance).sum())


def test_faithfulness_plot_draws_each_kind_in_its_colour_for_the_chosen_image(digit_curves):
    first, second = (figures.faithfulness_plot(digit_curves, i) for i in range(2))
    assert first.mode == "RGB" and first.size == (760, 400)
    assert tuple(np.asarray(first)[0, 0]) == (255, 255, 255)
    for kind in MAP_KINDS:  # lines in both panels and the two legend handles
        assert pixels_near(first, TAB_COLOURS[kind]) > 100, kind
    changed = (np.asarray(first) != np.asarray(second)).any(axis=-1).mean()  # the share of pixels that differ
    assert changed > 0.01


def test_charts_drawn_in_threads_are_the_ones_drawn_alone(digit_curves):
    alone = [np.asarray(figures.faithfulness_plot(digit_curves, i)) for i in range(2)]
    with ThreadPoolExecutor(3) as pool:
        threaded = list(pool.map(lambda i: np.asarray(figures.faithfulness_plot(digit_curves, i)), (0, 1, 0)))
    for one, other in zip((alone[0], alone[1], alone[0]), threaded):
        np.testing.assert_array_equal(one, other)


@pytest.mark.parametrize("name", ["mnist", "cifar10"])
def test_attention_distance_plot_shows_the_heads(name):
    distance = read_attention_distance(classifier(name).info.folder)  # (L, H) in pixels
    picture = figures.attention_distance_plot(distance)
    assert picture.size == (480, 320)
    dots = np.asarray(picture, dtype=int)
    heads = distance.shape[1]
    for head in range(heads):  # each head's dots (and its legend's) in a colour of its own
        colour = 255 * np.array(matplotlib.colormaps["tab10"](head)[:3])
        on_white = np.round(0.9 * colour + 0.1 * 255).astype(int)  # the dots are drawn at alpha 0.9
        assert (np.abs(dots - on_white).max(axis=-1) <= 6).sum() > 10 * distance.shape[0], head
    # The dots are where the data is: the layers in reverse order are another picture.
    assert (np.asarray(figures.attention_distance_plot(distance[::-1])) != dots).any()


def test_training_curves_from_a_shipped_history():
    history = json.loads((REPO / "weights" / "mnist" / "metrics.json").read_text())["history"]
    picture = figures.training_curves(history, "ViT on mnist")
    assert picture.size == (1000, 400)
    assert pixels_near(picture, TAB_COLOURS["attention"]) > 200 and pixels_near(picture, TAB_COLOURS["rollout"]) > 200


@pytest.mark.parametrize(("name", "count", "channels"), [("mnist", 16, 1), ("cifar10", 28, 3)])
def test_filter_components_are_a_grid_of_crisp_tiles(name, count, channels):
    components, share = embedding_components(classifier(name).model)  # (K, C, 4, 4), (K,)
    assert components.shape == (count, channels, 4, 4)
    picture = np.asarray(render.filter_components(components, share, tile=56))
    rows = (count + 6) // 7  # 7 tiles a row, 10 px apart, each with an 18 px label underneath, then the colour key
    assert picture.shape == (10 + rows * 84 + render.KEY_HEIGHT, 10 + 7 * 66, 3)
    first = picture[10:66, 10:66]  # rank 1's tile
    assert len(np.unique(first.reshape(-1, 3), axis=0)) > 4
    np.testing.assert_array_equal(first, np.repeat(np.repeat(first[::14, ::14], 14, 0), 14, 1))  # 4x4 pixels
    # The strongest weight of the component is at an end of the scale.
    flat = components[0].reshape(channels, 16)
    row, col = divmod(int(np.abs(flat).max(0).argmax()), 4)
    pixel = first[14 * row + 7, 14 * col + 7]
    if channels == 1:
        ends = render.colormap("RdBu_r")[[0, 255]]
        assert (pixel == ends).all(axis=1).any()
    else:
        strongest = int(np.abs(flat[:, 4 * row + col]).argmax())
        assert pixel[strongest] in (0, 255)
    # Past the last tile is background only.
    last_row, last_col = divmod(count, 7)
    if last_col:
        blank = picture[10 + last_row * 84 : 10 + (last_row + 1) * 84, 10 + last_col * 66 :]
        assert (blank == 255).all()
    # The colour key under the tiles: the tiles' own scale, from one end to the other.
    key = picture[-render.KEY_HEIGHT + 12]  # a row through the key's bar
    inked = key[(key != 255).any(axis=1)]
    ends = render.colormap("RdBu_r")[[0, 255]] if channels == 1 else render.grey_ramp()[[0, 255]]
    np.testing.assert_array_equal(inked[0], ends[0])
    assert (np.abs(inked[-1].astype(int) - ends[1]) <= 1).all()  # (the grey ramp's white end meets the background)


@pytest.mark.parametrize(("name", "grid"), [("mnist", 7), ("cifar10", 8)])
def test_position_grid_cells_map_back_to_their_patch(name, grid):
    similarity = position_similarity(classifier(name).model)  # (g, g, g, g)
    assert similarity.shape[0] == grid
    picture = np.asarray(render.position_similarity_grid(similarity, cell=56))
    assert 400 <= picture.shape[1] <= 510 and 400 <= picture.shape[0] - render.KEY_HEIGHT <= 510
    cells = np.array([[-1 if (i := render.position_cell_at(x, y, grid, 56)) is None else i
                       for x in range(picture.shape[1])] for y in range(picture.shape[0])])  # (H, W)
    viridis = render.colormap("viridis")
    for index in range(grid * grid):
        ys, xs = np.nonzero(cells == index)
        assert len(ys) == 56 * 56 and np.ptp(ys) == np.ptp(xs) == 55  # a 56 x 56 square
        top, left = ys.min(), xs.min()
        assert render.position_cell_box(index, grid, 56) == (left, top, left + 56, top + 56)
        assert render.position_cell_at(left + 28, top + 28, grid, 56) == index  # its centre
        # It shows that patch's similarity to every patch, -1..1 over the whole colormap, 56 / g px a patch.
        levels = np.round((similarity.reshape(grid * grid, grid, grid)[index] + 1) * 127.5).astype(int)
        expected = viridis[np.repeat(np.repeat(levels, 56 // grid, 0), 56 // grid, 1)]
        np.testing.assert_allclose(picture[top : top + 56, left : left + 56], expected, atol=3)
        if index % grid < grid - 1:  # the gap to its right neighbour
            assert render.position_cell_at(left + 56, top + 28, grid, 56) is None
            assert (picture[top : top + 56, left + 56] == 255).all()
    assert render.position_cell_at(5, 5, grid, 56) is None  # on the labels
    assert render.position_cell_at(picture.shape[1] + 10, 100, grid, 56) is None  # outside


def test_position_grid_outlines_the_selected_cell():
    similarity = position_similarity(classifier("mnist").model)
    plain = np.asarray(render.position_similarity_grid(similarity))
    marked = np.asarray(render.position_similarity_grid(similarity, selected=10))
    ys, xs = np.nonzero((plain != marked).any(axis=-1))
    assert {render.position_cell_at(x, y, 7, 56) for x, y in zip(xs, ys)} == {10, None}  # the cell and its gaps
    assert np.ptp(xs) == np.ptp(ys) == 57  # a frame around the 56 px cell, one pixel into the gaps
    assert len(np.unique(marked[ys, xs], axis=0)) == 1  # of one colour


@pytest.mark.parametrize("name", ["mnist", "cifar10"])
def test_large_position_map_is_brightest_at_its_own_patch(name):
    similarity = position_similarity(classifier(name).model)
    g = similarity.shape[0]
    for patch in (0, g + 2, g * g - 1):
        picture = np.asarray(render.position_similarity_large(similarity, patch, size=336))
        assert picture.shape == (336 + render.KEY_HEIGHT, 336, 3)  # the map, then its colour key
        step = 336 // g
        row, col = divmod(patch, g)
        centre = picture[row * step + step // 2, col * step + step // 2]
        np.testing.assert_array_equal(centre, render.colormap("viridis")[255])  # cosine self-similarity is 1
        edge = picture[row * step + step // 2, col * step]  # the outline
        assert tuple(edge) != tuple(centre)
