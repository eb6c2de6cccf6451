"""Every refusal of ``python -m lab`` is its error line alone (issue 47, point 7): argparse's errors came
after the whole usage (37 lines for ``train``), and ``lab eval`` on a checkpoint whose weights do not fit
its config's model printed load_state_dict's 15-line traceback."""
from __future__ import annotations

import pytest

from lab.cli import main
from lab.train import load_checkpoint
from lab.train.checkpoint import save_checkpoint
from tests._cli import TINY, one_error_line


@pytest.mark.parametrize("argv, expected", [
    (["train", "--gamma", "abc"], "python -m lab train: error: argument --gamma: invalid float value: 'abc' "
                                  "(see python -m lab train --help)"),
    (["train", "--optimizer", "sgd"], "python -m lab train: error: argument --optimizer: invalid choice: 'sgd'"),
    (["train", "--no-such-flag"], "python -m lab: error: unrecognized arguments: --no-such-flag "
                                  "(see python -m lab --help)"),
    (["eval"], "python -m lab eval: error: the following arguments are required: --checkpoint "
               "(see python -m lab eval --help)"),
    ([], "python -m lab: error: name a command: demo, train"),  # lab.cli.main's own line, with --help's pointer
    (["study", "--no-such-flag"], "python -m lab: error: unrecognized arguments: --no-such-flag"),
])
def test_an_argparse_error_is_its_line_alone_with_a_pointer_to_help(argv, expected, capsys):
    assert one_error_line(capsys, *argv).startswith(expected)


def test_help_still_shows_the_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "--help"])
    assert info.value.code == 0 and "usage: python -m lab train" in capsys.readouterr().out


def test_eval_of_weights_that_do_not_fit_their_config_is_one_line(tmp_path, capsys):
    main(["train", *TINY, "--out", str(tmp_path / "run")])
    capsys.readouterr()
    state = load_checkpoint(tmp_path / "run" / "checkpoint.pt")
    state["config"]["embed_dim"] = 32  # the weights are of a 16-dimensional head
    edited = tmp_path / "edited.pt"
    save_checkpoint(state, edited)
    line = one_error_line(capsys, "eval", "--checkpoint", edited, "--device", "cpu")
    assert line.startswith(f"python -m lab eval: error: {edited}: its model weights do not fit the model its config "
                           "builds (size mismatch for head.proj.weight: copying a param with shape "
                           "torch.Size([16, 128]) from checkpoint, the shape in current model is "
                           "torch.Size([32, 128]).; size mismatch for head.proj.bias")
