"""lab.models.max_pool: bit for bit nn.MaxPool2d(2) (values, gradients, ties, NaN, odd sizes), and a small CNN
whose steps are the same bits with it as with nn.MaxPool2d."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.pool_speed import with_nn_pool
from lab.models import SmallCNN
from lab.models.max_pool import MaxPool2x2, max_pool_2x2


def _inputs(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    x[:, :, : shape[2] // 2] = 0.5  # a flat region: every window there is a four-way tie
    x[0, 0, -2:, -2:] = float("nan")
    x[-1, -1, 1, 1] = float("-inf")
    return x


def _same(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("shape", [(3, 4, 8, 8), (2, 5, 7, 9), (1, 1, 2, 2), (4, 16, 33, 17)])
def test_forward_and_backward_are_max_pool2d_bit_for_bit(shape):
    x = _inputs(shape, seed=sum(shape))
    g = torch.randn(shape[0], shape[1], shape[2] // 2, shape[3] // 2, generator=torch.Generator().manual_seed(1))
    ours, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, y_ref = max_pool_2x2(ours), F.max_pool2d(ref, 2)
    _same(y, y_ref)
    assert y.is_contiguous() and y.shape == y_ref.shape
    y.backward(g)
    y_ref.backward(g)
    _same(ours.grad, ref.grad)
    with torch.no_grad():  # evaluation: the forward alone
        _same(max_pool_2x2(x), F.max_pool2d(x, 2))


def test_ties_send_the_gradient_to_the_first_maximum_as_max_pool2d_does():
    x = torch.ones(1, 1, 2, 2, requires_grad=True)
    max_pool_2x2(x).sum().backward()
    assert x.grad.flatten().tolist() == [1.0, 0.0, 0.0, 0.0]


def test_non_contiguous_and_channels_last_inputs():
    x = _inputs((2, 6, 10, 10), seed=3)
    for v in (x.transpose(2, 3), x.contiguous(memory_format=torch.channels_last), x[:, ::2]):
        _same(max_pool_2x2(v), F.max_pool2d(v, 2))


def test_module_has_no_state_and_names_itself():
    assert MaxPool2x2().state_dict() == {} and "channels-last" in repr(MaxPool2x2())


def test_small_cnn_trains_the_same_bits_as_with_nn_max_pool2d():
    """Three Adam steps of the small CNN with its pooling, and with every pooling swapped for nn.MaxPool2d:
    the same losses, weights and BN statistics, bit for bit (the pooling is all that differs)."""
    torch.manual_seed(0)
    ours = SmallCNN(1, widths=(8, 8, 16, 16))
    ref = with_nn_pool(ours)  # a copy, every MaxPool2x2 an nn.MaxPool2d(2) (bench/pool_speed.py's reference)
    assert sum(isinstance(m, MaxPool2x2) for m in ours.modules()) == 3
    assert sum(isinstance(m, nn.MaxPool2d) for m in ref.modules()) == 3
    images = torch.rand(16, 1, 32, 32, generator=torch.Generator().manual_seed(2))
    images[:, :, :8] = 0.0  # a flat background, as glyphs have: ties after the ReLU
    for model in (ours, ref):
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = model(images).pow(2).mean()
            loss.backward()
            opt.step()
            model.losses.append(loss.item())
    assert ours.losses == ref.losses
    for a, b in zip(ours.state_dict().values(), ref.state_dict().values()):
        _same(a, b)
    ours.eval(), ref.eval()
    with torch.no_grad():
        _same(ours(images), ref(images))
