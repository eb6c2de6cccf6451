"""One normalisation for every loss and metric, right for every finite row (issue 34, defects 5, 6):
rows at 1e-30 or 1e30, or float64 rows beyond float32's range, give the cosines of rows at 1."""
import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import lab.losses as L
from lab.core.normalize import unit_rows
from lab.metrics import retrieval_metrics

# Powers of two the test scales by (exact in each dtype, so the cosines must be bit for bit the
# same), about 1e-30 .. 1e30 where the dtype holds them; float16 holds little more than 1e-4 .. 1e4.
EXPONENTS = {torch.float16: (-4, 12), torch.bfloat16: (-100, 100), torch.float32: (-100, 100),
             torch.float64: (-1000, 1000)}


def batch(seed: int = 0, n: int = 24, dim: int = 8, dtype: torch.dtype = torch.float32):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(n, dim, generator=g, dtype=torch.float64).to(dtype)
    return emb, torch.arange(n // 4).repeat_interleave(4)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.sampled_from(list(EXPONENTS)), st.integers(0, 2**16), st.data())
def test_rows_scaled_by_a_power_of_two_give_the_same_unit_rows_bit_for_bit(dtype, seed, data):
    emb, _ = batch(seed, n=6, dim=5, dtype=dtype)
    k = data.draw(st.integers(*EXPONENTS[dtype]))
    scaled = emb * torch.tensor(2.0, dtype=torch.float64).pow(k).to(dtype)
    assert torch.equal(scaled.double() / 2.0**k, emb.double())  # the test's own scaling is exact
    for out in (torch.float32, torch.float64):
        want = unit_rows(emb, out)
        assert torch.equal(unit_rows(scaled, out), want), (dtype, k, out)
        torch.testing.assert_close(want.norm(dim=1), torch.ones(len(emb), dtype=out))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.sampled_from([torch.float32, torch.float64]), st.integers(0, 2**16), st.integers(-30, 30))
def test_decimal_scales_from_1e_minus_30_to_1e30_give_the_same_cosines(dtype, seed, power):
    emb, _ = batch(seed, n=6, dim=5, dtype=dtype)
    cosines = [(u @ u.T) for u in (unit_rows(x, dtype) for x in (emb, emb * 10.0**power))]
    torch.testing.assert_close(cosines[1], cosines[0], rtol=0, atol=1e-6 if dtype == torch.float32 else 1e-14)


def test_ordinary_rows_normalise_bit_for_bit_as_f_normalize_did():
    for dtype in (torch.float32, torch.float64):
        emb, _ = batch(1, n=64, dim=37, dtype=dtype)
        assert torch.equal(unit_rows(emb, dtype), F.normalize(emb, dim=1))
    emb, _ = batch(2, n=64, dim=37, dtype=torch.float64)  # the metrics' float64 -> float32
    assert torch.equal(unit_rows(emb, torch.float32), F.normalize(emb.float(), dim=1))


def built(name: str, dim: int, classes: int):
    torch.manual_seed(0)  # the proxies' initialisation
    return L.build_loss(name, num_classes=classes, embed_dim=dim)


@pytest.mark.parametrize("name", sorted(L.LOSSES))
@pytest.mark.parametrize("dtype, scale", [(torch.float32, 1e-30), (torch.float32, 1e20), (torch.float32, 1e30),
                                          (torch.float64, 1e-300), (torch.float64, 1e300)])
def test_every_loss_and_its_gradient_are_the_same_at_every_scale(name, dtype, scale):
    """Failed on main: SmoothAP()(e * 1e20, y) was 0.75 where e gave 0.63 (squared norms overflowed)."""
    emb, labels = batch(3, dtype=dtype)
    loss = built(name, emb.shape[1], int(labels.max()) + 1).to(dtype)
    values, grads = [], []
    for s in (1.0, scale):
        base = emb.clone().requires_grad_()
        value = copy.deepcopy(loss)(base * s, labels)
        value.backward()
        values.append(value.detach())
        grads.append(base.grad)
    torch.testing.assert_close(values[1], values[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["torch", "faiss"])
@pytest.mark.parametrize("scale", [1e39, 2.0**130, 1e-300])
def test_float64_embeddings_beyond_float32s_range_give_the_same_metrics(backend, scale):
    """Failed on main: e * 1e39 became infinity in float32, R@1 = 1.0 and mAP = inf."""
    emb, labels = batch(4, n=40, dtype=torch.float64)
    want = retrieval_metrics(emb, labels, backend=backend)
    got = retrieval_metrics(emb * scale, labels, backend=backend)
    assert got == pytest.approx(want, abs=1e-12)
    gallery, gallery_labels = batch(5, n=32, dtype=torch.float64)
    want = retrieval_metrics(emb, labels, gallery, gallery_labels, backend=backend)
    assert retrieval_metrics(emb, labels, gallery * scale, gallery_labels, backend=backend) == pytest.approx(want)


def zero_row(emb: torch.Tensor, row: int = 2) -> torch.Tensor:
    emb = emb.clone()
    emb[row] = 0.0
    return emb


@pytest.mark.parametrize("name", sorted(L.LOSSES))
def test_an_all_zero_row_is_a_one_line_error_naming_the_argument(name):
    emb, labels = batch(6)
    loss = built(name, emb.shape[1], int(labels.max()) + 1)
    with pytest.raises(ValueError, match=r"^embeddings has an all-zero row \(row 2\)") as info:
        loss(zero_row(emb), labels)
    assert "\n" not in str(info.value)
    if not loss.needs_num_classes:  # the proxy losses take no gallery
        with pytest.raises(ValueError, match=r"^ref_embeddings has an all-zero row \(row 2\)"):
            loss(emb, labels, zero_row(emb), labels)


def test_retrieval_metrics_name_the_all_zero_row_of_queries_and_gallery():
    emb, labels = batch(7)
    with pytest.raises(ValueError, match=r"^query_emb has an all-zero row \(row 2\)"):
        retrieval_metrics(zero_row(emb), labels)
    with pytest.raises(ValueError, match=r"^ref_emb has an all-zero row \(row 2\)"):
        retrieval_metrics(emb, labels, zero_row(emb), labels)


def test_a_subnormal_row_is_normalised_and_a_zero_proxy_is_named():
    tiny = torch.tensor([[1e-45, 0.0], [3e-45, 3e-45]])  # float32 subnormals: F.normalize left them as they were
    torch.testing.assert_close(unit_rows(tiny, torch.float32), torch.tensor([[1.0, 0.0], [0.7071068, 0.7071068]]))
    loss = built("proxy_dg", 8, 6)
    with torch.no_grad():
        loss.proxies[1] = 0.0
    with warnings.catch_warnings(), pytest.raises(ValueError, match=r"^proxies has an all-zero row \(row 1\)"):
        loss(*batch(8))


def test_ordinary_rows_keep_the_gradients_and_so_the_training_runs_of_f_normalize():
    """Scaling every row first gave the same values but summed x's gradient in another order (its extra node):
    the last bits of every loss's gradient moved, and with them every seeded training run (the stored
    study runs were no longer the runs the code trains). Ordinary rows take F.normalize's own graph."""
    import torch.nn.functional as F

    from lab.core.normalize import unit_rows

    torch.manual_seed(0)
    e, g = torch.randn(128, 64), torch.randn(128, 128)

    def gradient(normalise):
        x = e.clone().requires_grad_(True)
        ((normalise(x) @ normalise(x).T) * g).sum().backward()  # queries and references, as pairwise_inputs
        return x.grad

    expected = gradient(lambda x: F.normalize(x, dim=1))
    assert torch.equal(gradient(lambda x: unit_rows(x, torch.float32)), expected)
    scaled_always = gradient(lambda x: F.normalize(x * 2.0 ** -torch.frexp(x.detach().abs().amax(1, keepdim=True))[1],
                                                   dim=1))
    assert not torch.equal(scaled_always, expected)  # what the graph with a scaling node gives: the test can fail
