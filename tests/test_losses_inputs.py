"""Bad input gets a clear ValueError naming the argument; memory stays O(Q * P * N)."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import lab.losses as L
from lab.losses import functional as LF

S = torch.rand(4, 6)
T = torch.rand(4, 6) < 0.5


@pytest.mark.parametrize("call, match", [
    (lambda: LF.sup_ap(S, T[:, :5]), "targets must have the shape"),
    (lambda: LF.sup_ap(S, T, mask=torch.ones(4, 5, dtype=torch.bool)), "mask must have the shape"),
    (lambda: LF.sup_ap(S[0], T[0]), "scores must be 2-D"),
    (lambda: LF.sup_ap(torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool)), "scores is empty"),
    (lambda: LF.sup_ap(S.masked_fill(T, float("nan")), T), "NaN"),
    (lambda: LF.smooth_ap(S.masked_fill(T, float("inf")), T), "infinity"),
    (lambda: LF.sup_ap(torch.ones(4, 6, dtype=torch.long), T), "floating-point"),
    (lambda: LF.sup_ap(S, T.float() * 2), "targets must be a bool"),
    (lambda: LF.sup_ap(S, T, reduction="sum"), "reduction must be one of"),
    (lambda: LF.smooth_ap(S, T, tau=0.0), "tau"),
    (lambda: LF.sup_ap(S, T, tau=-1.0), "tau"),
    (lambda: LF.sup_ap(S, T, rho=-1.0), "rho"),
    (lambda: LF.fast_ap(S, T, num_bins=1), "num_bins"),
    (lambda: LF.soft_bin_ap(S, T, num_bins=2.5), "num_bins"),
    (lambda: LF.calibration(S, T, alpha=0.5, beta=0.6), "alpha must be larger than beta"),
    (lambda: LF.roadmap(S, T, lam=1.5), "lam"),
    (lambda: LF.blackbox_ap(S, T, lambda_val=0), "lambda_val"),
    (lambda: LF.sup_ap(S, T, chunk_size=0), "chunk_size"),
    (lambda: LF.sup_ap(S, T.to("meta")), "device"),
    (lambda: L.SupAP(tau=0), "tau"),
    (lambda: L.CalibrationLoss(alpha=0.1, beta=0.6), "alpha"),
    (lambda: L.build_loss("smoothap"), "choose one of"),
    (lambda: L.build_loss("happier"), "num_classes and embed_dim"),
    (lambda: L.SupAP()(torch.randn(4, 3), torch.tensor([0.0, 0, 1, 1])), "labels must be an integer"),
    (lambda: L.SupAP()(torch.randn(4, 3), torch.tensor([0, 0, 1])), "labels must have shape"),
    (lambda: L.SupAP()(torch.randn(0, 3), torch.zeros(0, dtype=torch.long)), "embeddings must be a non-empty"),
    (lambda: L.SupAP()(torch.full((2, 3), float("nan")), torch.tensor([0, 0])), "embeddings contain NaN"),
    (lambda: L.SupAP()(torch.randn(2, 3), torch.tensor([0, 0]), torch.randn(2, 4), torch.tensor([0, 1])), "dim"),
    (lambda: L.SupAP()(torch.randn(2, 3), torch.tensor([0, 0]), torch.randn(2, 3)), "given together"),
])
def test_bad_input_raises_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_integer_zero_one_targets_are_accepted():
    torch.testing.assert_close(LF.sup_ap(S, T.long()), LF.sup_ap(S, T))


class LargestTensor(TorchDispatchMode):
    """Records the number of elements of the largest tensor any op produces."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


@pytest.mark.parametrize("name", list(L.LOSSES))
def test_no_cubic_tensor_in_forward_and_backward(name):
    """The references build B x B x B tensors; only (query, positive, item) triples are needed."""
    batch, per_class = 256, 4
    emb = torch.randn(batch, 32, requires_grad=True)
    labels = torch.arange(batch // per_class).repeat_interleave(per_class)
    with LargestTensor() as probe:
        L.build_loss(name, num_classes=batch // per_class, embed_dim=32)(emb, labels).backward()
    triples = batch * (per_class - 1) * batch  # Q * P * N
    bins = batch * batch * 21  # histogram losses: Q * N * bins (20 bins at most by default)
    assert probe.largest <= max(triples, bins)
    assert probe.largest < batch**3 / 10


def test_chunking_bounds_the_largest_block():
    batch, per_class, chunk = 256, 4, 16
    emb = torch.randn(batch, 32, requires_grad=True)
    labels = torch.arange(batch // per_class).repeat_interleave(per_class)
    with LargestTensor() as probe:
        L.SupAP(chunk_size=chunk)(emb, labels).backward()
    assert probe.largest <= max(chunk * (per_class - 1) * batch, batch * batch)
