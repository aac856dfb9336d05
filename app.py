"""Hugging Face Spaces entry point: ``python app.py`` starts the demo (GRADIO_SERVER_NAME / _PORT are honoured).

A "starting" page answers on the port at once, while the heavy imports and the models' warm-up run.
"""

from vit_demo.app.starting import open_starting_page

if __name__ == "__main__":
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="Start the demo: the page, its API, and the models it explains.")
    parser.add_argument("--model", action="append", default=[], metavar="DIR",
                        help="a weights folder to explain beside the shipped models, in a tab of its own (`python -m "
                             "vit_demo import` writes one); may be given more than once")
    models = parser.parse_args().model
    # Stopped (a Space's restart, a service manager), the app closes as on Ctrl-C: the server shuts down and what the
    # process wrote for its page is removed.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    starting = open_starting_page()
    from vit_demo.app.demo import launch

    launch(before_serving=starting.close if starting else None, models=models)
