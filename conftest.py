"""Test session settings shared by tests/, notebooks/ and assignments/ (kernels inherit them)."""
import os

# Notebooks and the app shrink their training runs; nothing waits for the Hugging Face hub.
os.environ.setdefault("LAB_FAST", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

collect_ignore_glob = ["**/.ipynb_checkpoints/*"]
