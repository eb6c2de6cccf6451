"""bench/pool_speed.py: the reference model really pools with nn.MaxPool2d, and the table has every case."""
import torch
from torch import nn

from bench import pool_speed as bench
from lab.models import build_model
from lab.models.max_pool import MaxPool2x2


def test_reference_model_swaps_every_pooling_and_computes_the_same():
    ours = build_model(embed_dim=8, in_chans=1)
    ref = bench.with_nn_pool(ours)
    kinds = [type(m) for m in ref.modules() if isinstance(m, (nn.MaxPool2d, MaxPool2x2))]
    assert kinds == [nn.MaxPool2d] * 3
    assert sum(isinstance(m, MaxPool2x2) for m in ours.modules()) == 3  # the original is left alone
    x = torch.rand(4, 1, 32, 32)
    ours.eval(), ref.eval()
    assert torch.equal(ours(x), ref(x))


def test_table_has_every_case_with_positive_times(capsys, monkeypatch):
    monkeypatch.setattr(bench, "SHAPES", [(2, 4, 8, 8)])
    bench.main(["--repeat", "1", "--no-write"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "ms |" not in line]
    assert [r.split(" | ")[0] for r in rows] == [
        "| pooling (2, 4, 8, 8), forward", "| pooling (2, 4, 8, 8), forward + backward",
        "| small CNN, evaluation forward, B = 256", "| small CNN, training step, B = 64"]
    for row in rows[2:]:  # the whole model's cases take milliseconds (a tiny pooling may print 0.0)
        nn_ms, lab_ms, ratio = (float(v) for v in row.strip("| ").split(" | ")[1:])
        assert nn_ms > 0 and lab_ms > 0 and abs(ratio - lab_ms / nn_ms) < 0.06
