"""Hugging Face Spaces entry point: ``python app.py`` starts the demo (GRADIO_SERVER_NAME / _PORT are honoured).

A "starting" page answers on the port at once, while the heavy imports and the models' warm-up run.
"""

from vit_demo.app.starting import open_starting_page

if __name__ == "__main__":
    starting = open_starting_page()
    from vit_demo.app.demo import launch

    launch(before_serving=starting.close if starting else None)
