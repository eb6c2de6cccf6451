"""Test session settings shared by tests/, notebooks/ and assignments/ (kernels inherit them)."""
import os

import torch

# Notebooks and the app shrink their training runs; nothing waits for the Hugging Face hub.
os.environ.setdefault("RANKLAB_FAST", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Without a GPU, the fused Triton kernels (lab.losses.engine.fused_sums) are built for Triton's CPU interpreter,
# so that tests/test_losses_fused.py runs them; it must be set before lab is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

collect_ignore_glob = ["**/.ipynb_checkpoints/*"]
