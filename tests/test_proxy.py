"""The proxy decomposability loss L_DG* (SupRank Eq. 8) and the ROD combinations (Eq. 2, 17, 22, 25)."""
from __future__ import annotations

import pytest
import torch

import lab.losses as L
from tests.reference_graded import proxy_loss_loop

NEW_LOSSES = ["smooth_recall", "sup_recall", "rod_recall", "sup_hap", "happier", "sup_ndcg", "rod_ndcg",
              "roadmap_proxy", "proxy_dg"]


def build(name, num_classes=100, embed_dim=512):
    cls = L.LOSSES[name]
    return cls(num_classes=num_classes, embed_dim=embed_dim) if cls.needs_num_classes else cls()


def test_matches_eq8_loop():
    g = torch.Generator().manual_seed(0)
    loss = L.ProxyDecompositionLoss(num_classes=7, embed_dim=5, eta=0.1, reduction="none").double()
    emb = torch.randn(6, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([6, 0, 3, 3, 1, 6])
    got = loss(emb, labels)
    proxies = loss.proxies.tolist()
    want = [proxy_loss_loop(e, y, proxies, 0.1) for e, y in zip(emb.tolist(), labels.tolist())]
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64))


def test_gradcheck_float64_embeddings_and_proxies():
    loss = L.ProxyDecompositionLoss(num_classes=4, embed_dim=3, eta=0.5).double()
    emb = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    proxies = loss.proxies.detach().clone().requires_grad_(True)
    labels = torch.tensor([0, 3, 3, 1, 2])

    def fn(e, p):
        return torch.func.functional_call(loss, {"proxies": p}, (e, labels))

    assert torch.autograd.gradcheck(fn, (emb, proxies))


def test_fine_level_of_hierarchical_labels_and_sparse_class_ids():
    loss = L.ProxyDecompositionLoss(num_classes=1000, embed_dim=8)
    emb = torch.randn(4, 8)
    fine = torch.tensor([999, 3, 3, 512])
    torch.testing.assert_close(loss(emb, torch.stack([fine, fine // 100], 1)), loss(emb, fine))


def test_proxies_get_gradient_and_move_with_their_own_param_group():
    g = torch.Generator().manual_seed(1)
    model = torch.nn.Linear(6, 4)
    loss = L.HAPPIER(num_classes=5, embed_dim=4)
    assert {id(p) for p in loss.parameters()} == {id(loss.decomposability_loss.proxies)}
    opt = torch.optim.SGD([{"params": model.parameters(), "lr": 0.0}, {"params": loss.parameters(), "lr": 1.0}])
    x = torch.randn(20, 6, generator=g)
    fine = torch.arange(5).repeat_interleave(4)
    labels = torch.stack([fine, fine // 3], 1)
    before = loss.decomposability_loss.proxies.detach().clone()
    values = []
    for _ in range(5):
        value = loss(model(x), labels)
        opt.zero_grad()
        value.backward()
        assert loss.decomposability_loss.proxies.grad.abs().sum() > 0
        opt.step()
        values.append(float(value.detach()))
    assert not torch.equal(before, loss.decomposability_loss.proxies)
    assert values[-1] < values[0]  # only the proxies moved (lr 0 for the model), towards their classes


def test_rod_loss_is_the_convex_combination():
    emb = torch.randn(16, 8, dtype=torch.float64)
    fine = torch.arange(4).repeat_interleave(4)
    labels = torch.stack([fine, fine // 2], 1)
    proxy = L.ProxyDecompositionLoss(4, 8).double()
    for rank_loss, named in ((L.SupHAP(), L.HAPPIER), (L.SupNDCG(), L.RODNDCG), (L.SupAP(), L.ROADMAPProxy)):
        combined = named(num_classes=4, embed_dim=8).double()
        combined.decomposability_loss.load_state_dict(proxy.state_dict())
        assert combined.lam == 0.1 and combined.needs_num_classes
        want = 0.9 * rank_loss(emb, labels) + 0.1 * proxy(emb, labels)
        torch.testing.assert_close(combined(emb, labels), want)
    generic = L.RODLoss(L.SupRecall(), L.CalibrationLoss(), lam=0.25)
    assert not generic.needs_num_classes
    want = 0.75 * L.SupRecall()(emb, labels) + 0.25 * L.CalibrationLoss()(emb, labels)
    torch.testing.assert_close(generic(emb, labels), want)
    assert L.RODLoss(L.SupRecall(), proxy).needs_num_classes


@pytest.mark.parametrize("name", NEW_LOSSES)
def test_registered_losses_build_with_defaults_and_train_on_512_d_batches(name):
    loss = build(name)
    fine = torch.arange(16).repeat_interleave(4)
    for labels in (fine, torch.stack([fine, fine // 4], 1)):
        emb = torch.randn(len(fine), 512, requires_grad=True)
        value = loss(emb, labels)
        value.backward()
        assert value.dim() == 0 and torch.isfinite(value) and value > 0
        assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0
    assert L.LOSSES[name].__name__ in L.__all__


def test_bad_inputs_raise_clear_errors():
    loss = L.ProxyDecompositionLoss(num_classes=10, embed_dim=4)
    with pytest.raises(ValueError, match=r"labels must be class ids in \[0, num_classes=10\)"):
        loss(torch.randn(3, 4), torch.tensor([0, 10, 2]))
    with pytest.raises(ValueError, match="labels must be class ids"):
        loss(torch.randn(3, 4), torch.tensor([0, -1, 2]))
    with pytest.raises(ValueError, match="embeddings have dim 5 but the loss was built with embed_dim=4"):
        loss(torch.randn(3, 5), torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="num_classes must be an integer >= 1"):
        L.ProxyDecompositionLoss(num_classes=0, embed_dim=4)
    with pytest.raises(ValueError, match=r"eta must be a number in \[0.0001, 10\]"):
        L.HAPPIER(num_classes=3, embed_dim=4, eta=0.0)
    with pytest.raises(ValueError, match=r"lam must be a number in \[0, 1\]"):
        L.RODLoss(L.SupAP(), loss, lam=1.5)
    with pytest.raises(ValueError, match="decomposability_loss must be an nn.Module"):
        L.RODLoss(L.SupAP(), "calibration")
    with pytest.raises(ValueError, match="same reduction"):
        L.RODLoss(L.SupAP(reduction="none"), loss)(torch.randn(3, 4), torch.tensor([0, 0, 2]))
