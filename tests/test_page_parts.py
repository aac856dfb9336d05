"""The page's numbers are made in one place (vit_demo/app/page_numbers.py): a view's server answer for what an
image's numbers already carry is that part of them, to the byte, and every part is plain JSON."""

from __future__ import annotations

import json

import pytest
from conftest import REPO

from vit_demo.app import attention_view, explanation_view, heads_view, page_numbers, service


@pytest.fixture(scope="module", params=[("mnist", "digits/7.png"), ("cifar10", "photos/ship.png")])
def analysed(request) -> tuple[str, service.Analysis]:
    model, example = request.param
    return model, service.analyse(model, REPO / "examples" / example)


def test_a_views_server_answer_is_a_part_of_the_images_numbers(analysed):
    model, analysis = analysed
    page = page_numbers.numbers(analysis, "").to_json()
    assert json.loads(json.dumps(page)) == page  # nothing but JSON's types
    image, patch, key = page["image"], page["patch"], {"key": page["key"]}
    answers = page["answers"]
    assert attention_view.ask_query(model)({"image": image, "patch": patch}) == {**answers["query"][str(patch)], **key}
    relevance = explanation_view.ask_relevance(model)({"image": image, "label": analysis.label})
    assert relevance == {**answers["relevance"][analysis.label], **key}
    # The board with every head on: the prediction and the views' numbers are the image's own.
    board = heads_view.ask_knockout(model)({"image": image, "off": [], "mode": "zero"})
    assert board["maps"] == page["maps"] and board["rollout"] == answers["rollout"]["map"]
    assert board["label"] == page["label"] and board["off"] == [] and board["key"] == page["key"]


def test_an_image_that_cant_be_read_is_a_message_and_the_example_says_so():
    assert page_numbers.numbers("Draw a digit", "").to_json() == {"message": "Draw a digit"}
    analysis = service.analyse("mnist", REPO / "examples" / "digits" / "7.png")
    started = json.loads(page_numbers.starting_numbers(analysis, "Draw one"))
    assert started["info"].startswith("An example: <b>7</b>") and started["info"].endswith("Draw one")
    assert {**started, "info": None} == {**page_numbers.numbers(analysis, "").to_json(), "info": None}
    assert "relevance" in started["answers"] and page_numbers.starting_numbers(None, "Draw one") == ""
