"""Evaluation subsets keep at least two classes, and every result says what it evaluated (issue 34,
defect 10: ``--eval-images 100`` on digits picked one class and reported R@1 = mAP = 1)."""
import json

import pytest
import torch

from lab.train import Trainer, class_subset
from lab.train import evaluation
from tests._train_fixtures import TinySet, small_model, tiny_config, tiny_splits


def test_a_subset_smaller_than_one_class_still_holds_two_classes():
    labels = TinySet(classes=5, per_class=40).labels  # digits-like: a few large classes
    for seed in range(5):
        fine = labels[class_subset(labels, 30, seed=seed), 0]
        assert len(fine.unique()) == 2 and len(fine) == 80, seed
    assert evaluation.subset_size(labels, 30) == {"num_images": 80, "num_classes": 2,
                                                  "split_images": 200, "split_classes": 5}


def test_every_evaluation_records_its_classes_and_queries(tmp_path):
    train, test = tiny_splits()
    trainer = Trainer(tiny_config(out=str(tmp_path), eval_max_items=5), train_set=train, test_set=test,
                      model=small_model())
    result = trainer.evaluate()
    assert (result["num_classes"], result["num_images"], result["split_classes"], result["split_images"]) == \
        (2, 12, 12, 72)
    assert result["num_queries"] + result.get("excluded_queries", 0) == 12 and result["R@1"] <= 1
    logged = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert logged[-1]["num_classes"] == 2 and logged[-1]["num_queries"] == result["num_queries"]
    whole = Trainer(tiny_config(), train_set=train, test_set=test, model=small_model()).evaluate()
    assert (whole["num_classes"], whole["num_images"]) == (12, 72)


def test_a_split_of_one_class_is_refused_in_one_line():
    train, _ = tiny_splits()
    one = TinySet(classes=1, per_class=8, offset=100)
    trainer = Trainer(tiny_config(), train_set=train, test_set=one, model=small_model())
    with pytest.raises(ValueError) as info:
        trainer.evaluate()
    assert "needs at least 2 classes" in str(info.value) and "holds 1 (8 images)" in str(info.value)
    assert "\n" not in str(info.value)
    assert torch.equal(one.labels[:, 0], torch.full((8,), 100))
