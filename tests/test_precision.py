"""The opt-in TF32 switch (TrainConfig.matmul_precision, --matmul-precision) and its CPU emulation
(lab.core.precision): TF32 rounding against a bit-level reference, products against rounded inputs."""
from __future__ import annotations

import struct

import pytest
import torch
import torch.nn.functional as F

from lab.core.precision import emulated_tf32, matmul_precision, round_to_tf32
from lab.studies.running.spec import config_key
from lab.train import TrainConfig


def reference_tf32(value: float) -> float:
    """One float32 rounded to a 10-bit mantissa, to nearest, ties to even, on its bit pattern."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if (bits >> 23) & 0xFF == 0xFF:  # inf, NaN
        return value
    low, kept = bits & 0x1FFF, bits >> 13
    if low > 0x1000 or (low == 0x1000 and kept & 1):
        kept += 1  # a carry into the exponent is right: the next binade, or infinity
    return struct.unpack("<f", struct.pack("<I", (kept << 13) & 0xFFFFFFFF))[0]


def edge_values() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    random = torch.randn(2000, generator=g) * torch.logspace(-30, 30, 2000)
    bits = torch.randint(0, 2**31 - 1, (2000,), generator=g, dtype=torch.int64)
    patterns = torch.cat([bits, -bits - 1]).to(torch.int32).view(torch.float32)  # every kind of float32
    ties = torch.tensor([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 1 + 2**-11 + 2**-23, 1 + 2**-11 - 2**-23])
    special = torch.tensor([0.0, -0.0, 1.0, float("inf"), -float("inf"), 3.4028234663852886e38, -3.4028234663852886e38,
                            1e-45, 1.1754942e-38, 2**-126, 65504.0, 0.1, 1 / 3])
    return torch.cat([random, patterns, ties, special]).float()


def test_tf32_rounding_matches_the_bit_level_reference():
    x = edge_values()
    got = round_to_tf32(x)
    want = torch.tensor([reference_tf32(v) for v in x.tolist()], dtype=torch.float32)
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
    assert bool(same.all()), x[~same][:5]
    assert bool((got[torch.isfinite(got)].view(torch.int32) & 0x1FFF == 0).all())  # 10 mantissa bits left
    assert round_to_tf32(torch.tensor([1 + 2**-11]))[0] == 1.0  # a tie to even: down
    assert round_to_tf32(torch.tensor([1 + 3 * 2**-11]))[0] == 1 + 2**-9  # a tie to even: up
    strided = x[:6000].view(40, -1)[:, ::3]
    assert torch.equal(round_to_tf32(strided).view(torch.int32), round_to_tf32(strided.contiguous()).view(torch.int32))
    with pytest.raises(ValueError, match="float32"):
        round_to_tf32(x.double())


@pytest.mark.parametrize("product", ["matmul", "linear", "einsum", "bmm", "addmm"])
def test_emulated_tf32_rounds_both_matrices_forward_and_backward(product):
    g = torch.Generator().manual_seed(1)
    a, b, bias = torch.randn(6, 7, generator=g), torch.randn(7, 5, generator=g), torch.randn(5, generator=g)
    upstream = torch.randn(6, 5, generator=g)
    ops = {"matmul": lambda a, b: a @ b, "linear": lambda a, b: F.linear(a, b.T, bias),
           "einsum": lambda a, b: torch.einsum("ij,jk->ik", a, b),
           "bmm": lambda a, b: torch.bmm(a[None], b[None])[0], "addmm": lambda a, b: torch.addmm(bias, a, b)}
    op = ops[product]
    ra, rb = round_to_tf32(a), round_to_tf32(b)
    plain = op(a, b)
    x, y = a.clone().requires_grad_(), b.clone().requires_grad_()
    with emulated_tf32():
        out = op(x, y)
        out.backward(upstream)
    assert torch.equal(out, op(ra, rb)) and not torch.equal(out, plain)
    # The backward's products take rounded matrices too (upstream gradient and the other input), as on the GPU:
    # the reference is the plain backward of the product of rounded inputs, given the rounded upstream gradient.
    rx, ry = ra.clone().requires_grad_(), rb.clone().requires_grad_()
    op(rx, ry).backward(round_to_tf32(upstream))
    assert torch.equal(x.grad, rx.grad) and torch.equal(y.grad, ry.grad)
    assert not torch.equal(x.grad, (upstream @ b.T))
    assert torch.equal(op(a, b), plain)  # off after the block


def test_emulated_tf32_leaves_float64_alone():
    a = torch.randn(4, 4, dtype=torch.float64)
    want = a @ a
    with emulated_tf32():
        assert torch.equal(a @ a, want)


def test_matmul_precision_sets_cuda_products_and_restores():
    backend = torch.backends.cuda.matmul
    before = backend.fp32_precision
    with matmul_precision("high"):
        assert backend.fp32_precision == "tf32"
    assert backend.fp32_precision == before
    with pytest.raises(RuntimeError, match="inside"), matmul_precision("high"):
        raise RuntimeError("inside")
    assert backend.fp32_precision == before
    with matmul_precision("highest"):
        assert backend.fp32_precision == "ieee"
    assert torch.get_float32_matmul_precision() == "highest"  # torch's legacy getter still answers
    refused = pytest.raises(ValueError, match=r"matmul_precision must be one of \('highest', 'high'\), got 'medium'")
    with refused, matmul_precision("medium"):
        pass


def test_the_config_field_the_flag_and_the_study_keys():
    from lab.cli import build_parser, config_from_args

    assert TrainConfig().matmul_precision == "highest"
    with pytest.raises(ValueError, match="matmul_precision must be one of"):
        TrainConfig(matmul_precision="tf32")
    args = build_parser().parse_args(["train", "--matmul-precision", "high", "--device", "cpu"])
    assert config_from_args(args).matmul_precision == "high"
    base = {"loss": "roadmap", "seed": 3}
    assert config_key(base) == config_key({**base, "matmul_precision": "highest"})  # stored keys hold
    assert config_key(base) != config_key({**base, "matmul_precision": "high"})  # another run


def test_the_trainer_runs_its_products_in_the_configured_precision(monkeypatch):
    import lab.train.trainer as trainer_module
    from tests._train_fixtures import small_model, tiny_config, tiny_splits

    seen = []
    real = trainer_module.plain_backward

    def spy(*args, **kwargs):
        seen.append(torch.backends.cuda.matmul.fp32_precision)
        return real(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "plain_backward", spy)
    for precision in ("high", "highest"):
        train, test = tiny_splits()
        trainer = trainer_module.Trainer(tiny_config(matmul_precision=precision), train_set=train, test_set=test,
                                         model=small_model())
        before = torch.backends.cuda.matmul.fp32_precision
        trainer.step(1)
        assert torch.backends.cuda.matmul.fp32_precision == before  # restored after the step
    assert seen == ["tf32", "ieee"]
