"""What a long command says of its steps on stderr (vit_demo/progress.py): a tqdm bar naming the step under way on a
terminal, one line a step elsewhere, nothing where no command asked; stdout keeps its JSON lines
(tests/test_import.py runs the import command, tests/test_cli.py the onnx command, tests/test_calibration.py the
calibrate command and tests/test_own_model_page.py the static command, each checking what it says)."""

import io
import re

from vit_demo.progress import Steps


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_log_gets_a_line_a_step_as_it_begins_and_one_when_all_are_done():
    log = io.StringIO()
    with Steps("onnx mnist", 1, log) as progress:
        progress.step("loading")
        progress.expect(2)  # found once loaded
        progress.step("exporting model.onnx")
        progress.say("a note")
        progress.step("exporting relevance.onnx")
    lines = log.getvalue().splitlines()
    assert [re.sub(r", \d+ s\]", "]", line) for line in lines[:-1]] == [
        "onnx mnist [1/1] loading", "onnx mnist [2/3] exporting model.onnx", "a note",
        "onnx mnist [3/3] exporting relevance.onnx"]
    assert re.fullmatch(r"onnx mnist: done, 3 steps in \d+\.\d s", lines[-1])


def test_a_terminal_gets_a_bar_that_names_the_step_under_way():
    terminal = Terminal()
    with Steps("import", 2, terminal) as progress:
        progress.step("loading timm:vit_tiny_patch16_224")
        shown = terminal.getvalue()
        assert "import:" in shown and "0/2" in shown and "loading timm:vit_tiny_patch16_224" in shown
        progress.step("saving its weights")
        assert "1/2" in terminal.getvalue() and "saving its weights" in terminal.getvalue()
    assert terminal.getvalue().rstrip().endswith("2/2 [00:00, done]")  # the bar filled, left on screen


def test_a_failure_leaves_the_bar_where_it_stopped_and_says_nothing_done():
    log = io.StringIO()
    try:
        with Steps("import", 4, log) as progress:
            progress.step("loading timm:swin_tiny_patch4_window7_224")
            raise ValueError("no plain ViT")
    except ValueError:
        pass
    assert len(log.getvalue().splitlines()) == 1 and "done" not in log.getvalue()


def test_without_a_command_nothing_is_said(capsys):
    progress = Steps()  # what the functions use when no command asked (the app, train.py, the tests)
    progress.expect(3)
    progress.step("exporting model.onnx")
    progress.close()
    assert capsys.readouterr() == ("", "")
