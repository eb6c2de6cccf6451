"""lab.models: shapes, pooling, frozen BN, bad names, and the fast pretrained fallback."""
import os
import subprocess
import sys
import textwrap

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before timm / huggingface_hub are imported

import pytest
import torch

from lab.models import GeM, build_model, num_parameters


def test_small_cnn_default_shape_norm_and_size():
    model = build_model(embed_dim=64, in_chans=1)
    out = model(torch.randn(5, 1, 32, 32))
    assert out.shape == (5, 64) and out.dtype == torch.float32
    assert torch.allclose(out.norm(dim=1), torch.ones(5), atol=1e-5)
    assert 200_000 < num_parameters(model) < 300_000
    assert {n.split(".")[0] for n, _ in model.named_parameters()} == {"backbone", "head"}


def test_small_cnn_takes_rgb_and_other_sizes():
    assert build_model(embed_dim=8, in_chans=3)(torch.randn(2, 3, 48, 40)).shape == (2, 8)


@pytest.mark.parametrize("pooling", ["avg", "max", "gem"])
def test_head_pooling_is_what_it_says(pooling):
    model = build_model(embed_dim=8, pooling=pooling)
    x = torch.rand(2, 128, 3, 3) + 0.1
    expected = {"avg": x.mean(dim=(2, 3)), "max": x.amax(dim=(2, 3)),
                "gem": x.pow(3).mean(dim=(2, 3)).pow(1 / 3)}[pooling]
    assert torch.allclose(model.head.pool(x), expected, atol=1e-6)


def test_gem_p_is_learnable_and_in_the_head():
    model = build_model(embed_dim=8, pooling="gem")
    names = [n for n, _ in model.head.named_parameters()]
    assert "gem.p" in names
    model(torch.randn(4, 1, 16, 16)).sum().backward()
    assert model.head.gem.p.grad is not None and isinstance(model.head.gem, GeM)


def test_layer_norm_has_no_affine_parameters():
    model = build_model(embed_dim=8, layer_norm=True)
    assert isinstance(model.head.norm, torch.nn.LayerNorm)
    assert not list(model.head.norm.parameters())


def test_freeze_bn_keeps_running_stats_and_affine_frozen():
    model = build_model(embed_dim=8, freeze_bn=True).train()
    bns = model.batch_norms()
    assert bns and all(not m.training for m in bns)
    assert all(not p.requires_grad for m in bns for p in m.parameters())
    before = [m.running_mean.clone() for m in bns]
    model(torch.randn(8, 1, 16, 16))
    assert all(torch.equal(b, m.running_mean) for b, m in zip(before, bns))
    assert model.training  # the rest of the model still trains


def test_timm_cnn_backbone_with_one_channel_and_gem():
    model = build_model("resnet18", embed_dim=12, in_chans=1, pooling="gem", layer_norm=True)
    out = model(torch.randn(2, 1, 64, 64))
    assert out.shape == (2, 12)
    assert torch.allclose(out.norm(dim=1), torch.ones(2), atol=1e-5)
    assert model.backbone.num_features == 512


def test_transformer_backbone_uses_its_token_pooling():
    model = build_model("deit_tiny_patch16_224", embed_dim=10, in_chans=3)
    assert model(torch.randn(1, 3, 224, 224)).shape == (1, 10)
    with pytest.raises(ValueError, match="pooled tokens"):
        build_model("deit_tiny_patch16_224", embed_dim=10, in_chans=3, pooling="max")(torch.randn(1, 3, 224, 224))


def test_bad_arguments_name_the_valid_values():
    with pytest.raises(ValueError, match="small_cnn.*resnet50.*deit_small_patch16_224"):
        build_model("resnet_typo")
    with pytest.raises(ValueError, match="pooling must be one of"):
        build_model(pooling="mean")
    with pytest.raises(ValueError, match="embed_dim"):
        build_model(embed_dim=0)
    with pytest.raises(ValueError, match="no pretrained weights"):
        build_model(pretrained=True)
    for size in (0, -32, True, 32.0):
        with pytest.raises(ValueError, match="image_size must be a positive integer or None"):
            build_model(image_size=size)


FALLBACK = textwrap.dedent("""
    import sys, time, warnings
    import timm  # imported before the clock starts: only the weight lookup is timed
    import lab.models.timm_backbone as tb
    if sys.argv[1] == "probe":
        tb.hub_reachable = lambda timeout=2.0: False  # as on a machine without internet
    from lab.models import build_model
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = build_model("resnet18", embed_dim=8, in_chans=1, pretrained=True)
    # The hub's retry loop takes ~47 s; the fallback ~1 s. 30 s separates them on any machine.
    assert time.monotonic() - start < 30, "the pretrained lookup waited on the network"
    messages = [str(w.message) for w in caught]
    assert any("RANDOM initialisation" in m for m in messages), messages
    print("fell back")
""")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["env", "probe"])
def test_pretrained_falls_back_with_a_warning_and_does_not_hang(mode, tmp_path):
    """env: HF_HUB_OFFLINE=1 set; probe: unset, the hub found unreachable. An empty HF cache
    either way. The only timing check is the generous 30 s bound against the hub's 47 s retry loop."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_HOME=str(tmp_path / "hf"), TORCH_HOME=str(tmp_path / "torch"))
    if mode == "env":
        env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run([sys.executable, "-c", FALLBACK, mode], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "fell back" in done.stdout


@pytest.mark.parametrize("name, embed_dim, in_chans", [("small_cnn", 64, 1), ("small_cnn", 128, 3), ("resnet18", 64, 3),
                                                        ("deit_tiny_patch16_224", 32, 3)])
def test_parameter_count_is_the_built_models(name, embed_dim, in_chans):
    """Counted on the meta device (the dashboard's size limit, issue 46): the same as the model built for real."""
    from lab.models import parameter_count

    assert parameter_count(name, embed_dim, in_chans) == num_parameters(build_model(name, embed_dim, in_chans), False)


def test_counting_a_giant_allocates_nothing_and_draws_no_random_number():
    """eva02_enormous's 4.3 B parameters are 17 GB as float32: counting them must hold none of it, and must not
    move the global generators (a page counts while another session's run may be drawing)."""
    import random

    import numpy as np

    from lab.models import parameter_count

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    states = torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy()
    before = rss()
    assert parameter_count("eva02_enormous_patch14_clip_224") > 4 * 10**9
    assert rss() - before < 500 * 10**6
    assert torch.equal(states[0], torch.get_rng_state()) and states[1] == random.getstate()
    assert (states[2] == np.random.get_state()[1]).all()


def test_a_fixed_size_transformer_is_built_for_the_images_it_will_see():
    """DeiT is built for 224 px; at 32 px (the dashboard's glyphs) it refused every image. With image_size it
    has a 2 x 2 grid of patches and embeds 32-px images; at its own size, and for a CNN at any size, the model
    is the one built without image_size, bit for bit (no stored run or checkpoint changes)."""
    from lab.models.timm_backbone import input_size_kwargs

    with pytest.raises(AssertionError, match="doesn't match model"):
        build_model("deit_small_patch16_224", 16, 1)(torch.zeros(2, 1, 32, 32))
    z = build_model("deit_small_patch16_224", 16, 1, image_size=32)(torch.randn(2, 1, 32, 32))
    assert z.shape == (2, 16) and torch.allclose(z.norm(dim=1), torch.ones(2))
    assert input_size_kwargs("deit_small_patch16_224", 32) == {"img_size": 32}
    for name, size in [("deit_small_patch16_224", 224), ("resnet18", 32), ("deit_small_patch16_224", None)]:
        assert input_size_kwargs(name, size) == {}
        torch.manual_seed(0)
        sized = build_model(name, 16, 3, image_size=size).state_dict()
        torch.manual_seed(0)
        plain = build_model(name, 16, 3).state_dict()
        assert sized.keys() == plain.keys() and all(torch.equal(sized[k], plain[k]) for k in plain)
