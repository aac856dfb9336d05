"""Hugging Face Spaces entry point: ``python app.py`` starts the demo (GRADIO_SERVER_NAME / _PORT are honoured)."""

from vit_demo.ui import launch

if __name__ == "__main__":
    launch()
