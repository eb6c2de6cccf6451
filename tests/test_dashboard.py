"""The dashboard's logic without Streamlit (lab.dashboard): hyper-parameter widgets read off the
loss classes, settings validation, URL round trips, the training session and held-out views."""
import dataclasses
import inspect
import re
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from lab.dashboard import (Settings, TrainingSession, calibration_thresholds, from_query, loss_sliders,
                           run_labels, slider_options, to_configs, to_query, validate)
from lab.dashboard import worker
from lab.dashboard.session_registry import Registry
from lab.dashboard.heldout import (HeldOut, describe_item, neighbours, pair_similarities, per_query_ap, project,
                                   selected_row)
from lab.dashboard.settings import GLYPH_INSTANCES, JOINER, MARKDOWN_SPECIAL, SHOWN_CHARS, escape_markdown
from lab.losses import LOSSES
from lab.metrics import average_precision
from lab.train import NonFiniteLossError, Trainer
from tests._spies import hold_steps, record_step_threads


# ------------------------------------------------------------------------------ hparams
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_sliders_are_the_class_ranges_and_paper_defaults(name):
    cls = LOSSES[name]
    specs = loss_sliders(name)
    assert set(specs) == set(cls.hparam_ranges)
    params = inspect.signature(cls.__init__).parameters
    for key, spec in specs.items():
        assert spec.value == params[key].default
        assert (spec.min, spec.max) == tuple(float(v) for v in cls.hparam_ranges[key])
        assert spec.min <= spec.value <= spec.max


def test_slider_kinds_follow_the_ranges():
    assert loss_sliders("smooth_ap")["tau"].log  # 1e-3 .. 1: three decades
    assert loss_sliders("fast_ap")["num_bins"].integer
    lam = loss_sliders("roadmap")["lam"]
    assert not lam.log and lam.step == pytest.approx(0.01)


def test_the_rho_slider_is_the_toy_explorers_log_slider_with_the_papers_100_mid_track():
    from lab.viz.surrogates import SURROGATE_SLIDERS

    rho = loss_sliders("sup_ap")["rho"]
    toy = SURROGATE_SLIDERS["rho"]
    assert rho.log and (rho.min, rho.max, rho.value) == (toy.min, toy.max, toy.value) == (1.0, 1e4, 100.0)
    options = slider_options(rho)
    assert {1.0, 10.0, 100.0, 1000.0, 10_000.0} <= set(options)  # 10 could not be set on the linear track
    assert options.index(100.0) == len(options) // 2  # the paper's value at the middle, not at 1 %


def test_log_slider_options_hold_the_ends_the_default_and_an_extra_value():
    spec = loss_sliders("smooth_ap")["tau"]
    options = slider_options(spec, extra=0.0123)
    assert options == sorted(options)
    assert {0.001, 1.0, 0.01, 0.0123} <= set(options)
    assert all(spec.min <= v <= spec.max for v in options)
    assert 40 < len(options) < 80


def test_calibration_thresholds_only_from_losses_with_alpha_and_beta():
    assert calibration_thresholds("roadmap", {"alpha": 0.8}) == (0.8, 0.6, True)
    assert calibration_thresholds("calibration") == (0.9, 0.6, True)
    # Sup-H-AP's alpha is a relevance exponent, not a threshold: reference values, flagged.
    assert calibration_thresholds("sup_hap", {"alpha": 3.0}) == (0.9, 0.6, False)


# ------------------------------------------------------------------------------ settings
def test_default_settings_are_valid_and_build_configs():
    s = Settings()
    assert validate(s) == []
    (cfg,) = to_configs(s)
    assert cfg.loss == "roadmap" and cfg.dataset_kwargs == {"num_classes": s.classes}
    assert cfg.batch_size % cfg.m == 0


@pytest.mark.parametrize("changes, words", [
    (dict(batch_size=30), ["not divisible by m = 4", "try 28 or 32"]),
    (dict(m=GLYPH_INSTANCES + 1, batch_size=4 * (GLYPH_INSTANCES + 1)), ["each glyph class has"]),
    (dict(classes=3, batch_size=32, m=4), ["needs 8 classes", "only 3"]),
    (dict(batch_size=0), ["batch size must be an integer in [4, 256]"]),
    (dict(m=1), ["m must be an integer in [2, 32]"]),
    (dict(lr=0.0), ["lr must be a number"]),
    (dict(dataset="cub", data_root="/nonexistent/cub"), ["cub was not found", "CUB_200_2011"]),
    (dict(dataset="cub", data_root="/proc/self"), ["does not read cub data from that folder"]),
    (dict(dataset="sop"), ["does not offer the dataset 'sop'"]),
    (dict(dataset="folder", data_root="/nonexistent/folder"), ["one sub-folder per class"]),
    (dict(dataset="imagenet"), ["unknown dataset 'imagenet'"]),
    (dict(model="no_such_net"), ["unknown model 'no_such_net'"]),
    (dict(loss="roadmap", hparams={"alpha": 0.3, "beta": 0.6}), ["alpha must be larger than beta"]),
    (dict(loss="smooth_ap", hparams={"tau": 5.0}), ["tau must be a number in [0.001, 1]"]),
    (dict(loss="smooth_ap", hparams={"rho": 1.0}), ["no hyper-parameter 'rho'"]),
    (dict(compare=True, loss_b="fast_ap", hparams_b={"num_bins": 1000}), ["num_bins must be a number in [2, 100]"]),
])
def test_invalid_settings_are_explained(changes, words, monkeypatch):
    monkeypatch.setenv("RANKLAB_APP_DATA", "cub=/nonexistent/cub:folder=/nonexistent/folder")  # the operator's
    errors = validate(Settings().replace(**changes))
    assert errors, changes
    text = " ".join(errors)
    for w in words:
        assert w in text, (w, errors)


def test_large_models_get_a_smaller_batch_limit():
    errors = validate(Settings().replace(model="resnet18", batch_size=128, m=4, classes=200))
    assert any("too large for resnet18" in e and "at most 64" in e for e in errors)


def test_compare_mode_gives_two_configs_differing_only_in_the_loss():
    s = Settings().replace(compare=True, loss="smooth_ap", loss_b="roadmap", hparams_b={"lam": 0.3})
    a, b = to_configs(s)
    da, db = a.to_dict(), b.to_dict()
    assert {k for k in da if da[k] != db[k]} == {"loss", "loss_kwargs"}
    assert b.loss_kwargs == {"lam": 0.3} and run_labels(s) == ["A · smooth_ap", "B · roadmap"]


# ------------------------------------------------------------------------------ URL
@pytest.mark.parametrize("s", [
    Settings(),
    Settings().replace(loss="sup_ap", hparams={"tau": 0.05, "rho": 200.0}, batch_size=32, lr=3e-4, seed=7),
    Settings().replace(compare=True, loss="smooth_ap", loss_b="roadmap", hparams_b={"lam": 0.25}, steps=77),
    Settings().replace(dataset="folder", data_root="/data/my images", model="resnet18", loss="fast_ap",
                       hparams={"num_bins": 40}),
])
def test_url_round_trip(s, monkeypatch):
    monkeypatch.setenv("RANKLAB_APP_DATA", "folder=/data/my images")  # the operator offers it
    back, notes = from_query(to_query(s))
    assert notes == []
    assert back == s


def test_url_is_short_but_always_names_the_core_settings():
    q = to_query(Settings().replace(hparams={"tau": 0.01, "lam": 0.5}))  # roadmap's own defaults
    assert set(q) == {"dataset", "model", "loss", "batch", "m", "lr", "seed"}
    q = to_query(Settings().replace(compare=False, loss_b="fast_ap", hparams_b={"num_bins": 3}))
    assert "b.num_bins" not in q  # run B is not shown: its knobs are not shared


def test_bad_links_are_repaired_with_notes():
    s, notes = from_query({"batch": "100000", "lr": "fast", "a.tau": "9", "a.nope": "1", "x": "1",
                           "compare": ["0", "1"], "loss": "smooth_ap"})
    # 48: the largest batch of m = 4 the 12 glyph classes of fast mode can fill (a clamp picks one that trains)
    assert s.batch_size == 48 and s.lr == Settings().lr and s.hparams == {"tau": 1.0} and s.compare
    text = " ".join(notes)
    for w in ("batch=100000 is outside [4, 256]; small_cnn on glyphs with m = 4 trains batches of 48 at most, in "
              "multiples of m: using 48", "lr='fast' is not a number: using the default 0.001",
              "a.tau=9 is outside [0.001, 1]: using 1", "a.nope", "'x'"):
        assert w in text, w


@pytest.mark.parametrize("key, text, field, words", [
    ("dataset", "imagenet", "dataset", "dataset='imagenet': unknown dataset"),
    ("loss", "nope", "loss", "loss='nope': unknown loss"),
    ("loss_b", "nope", "loss_b", "loss_b='nope': unknown loss"),
    ("model", "no_such_net", "model", "model='no_such_net': unknown model"),
    ("lr", "nan", "lr", "lr=nan is not a finite number"),
    ("lr", "inf", "lr", "lr=inf is not a finite number"),
    ("lr", "-inf", "lr", "lr=-inf is not a finite number"),
    ("batch", "nan", "batch_size", "batch='nan' is not an integer"),
    ("steps", "1.5e0", "steps", "steps='1.5e0' is not an integer"),
    ("seed", "٣", "seed", "seed='٣' is not an integer"),  # Python's int() reads Arabic-Indic digits: a link may not
    ("lr", "1e-٣", "lr", "lr='1e-٣' is not a number"),
])
def test_a_link_value_that_cannot_be_used_becomes_the_default_with_a_note(key, text, field, words):
    s, notes = from_query({key: text, "compare": "1"})
    default = getattr(Settings(), field)
    assert getattr(s, field) == default  # never a replacement other than the default (nor nan)
    assert len(notes) == 1 and words in notes[0], notes
    shown = f"{default:.6g}" if isinstance(default, float) else str(default)
    assert notes[0].endswith(f"using the default {shown}"), notes
    assert validate(s) == []


def test_link_numbers_are_read_as_the_command_line_reads_them():
    """One converter (lab.core.convert.to_type) for flags, recipes and links: 1e3 is 1000 steps in both."""
    from lab.core.convert import to_type

    s, notes = from_query({"steps": "1e3", "batch": "3.2e1", "lr": "2.5E-4", "compare": "yes", "seed": " 7 "})
    assert (s.steps, s.batch_size, s.lr, s.compare, s.seed) == (1000, 32, 2.5e-4, True, 7) and notes == []
    assert to_type("steps", "1e3", int) == 1000
    s, notes = from_query({"steps": "1e9", "lr": "1e308"})  # read, then clamped, both with a note
    assert (s.steps, s.lr) == (100_000, 1.0) and len(notes) == 2
    assert notes[0].endswith("using 100000") and notes[1].endswith("using 1")


@pytest.mark.parametrize("params, clamps", [
    ({"batch": "1000", "model": "resnet18"}, 1), ({"batch": "1000", "m": "3"}, 1), ({"batch": "1000", "m": "40"}, 2),
    ({"m": "40"}, 1), ({"batch": "2", "m": "3"}, 1), ({"batch": "1000", "dataset": "digits"}, 1),
    ({"batch": "1000", "classes": "3"}, 1)])
def test_a_clamped_batch_or_m_is_one_that_trains(params, clamps):
    # Before: batch=1000&model=resnet18 became 256, which resnet18 cannot train on a CPU (64 at most).
    s, notes = from_query(params)
    assert validate(s) == [], (params, s, notes)
    assert len(notes) == clamps, notes  # one note per clamped value, none else
    if s.dataset == "digits":
        assert s.batch_size // s.m <= 5  # digits trains on 5 classes
    assert all(n.count(": using") == 1 and "\n" not in n for n in notes), notes


@pytest.mark.parametrize("root", ["/proc/self", "/", "..", "/data/class_photos/..", "/data/class_photos/../../etc"])
def test_a_link_picks_only_among_the_folders_the_operator_offers(root, monkeypatch):
    s, notes = from_query({"dataset": "folder", "root": root})
    assert (s.dataset, s.data_root) == ("glyphs", "") and len(notes) == 1
    assert "does not offer the dataset 'folder' (it offers: glyphs, digits)" in notes[0], notes
    monkeypatch.setenv("RANKLAB_APP_DATA", "folder=/data/class_photos")
    s, notes = from_query({"dataset": "folder", "root": root})
    assert (s.dataset, s.data_root) == ("glyphs", "") and len(notes) == 1 and "\n" not in notes[0]
    assert "does not read folder data from that folder (the operator offers: /data/class_photos)" in notes[0]
    assert "does not read folder data" in " ".join(validate(Settings(dataset="folder", data_root=root)))
    s, notes = from_query({"dataset": "folder", "root": "/data/other/../class_photos/"})  # the operator's, spelt so
    assert (s.dataset, s.data_root, notes) == ("folder", "/data/class_photos", [])


@pytest.mark.parametrize("key, text, expected, words", [
    ("a.lam", "nan", None, "a.lam='nan' is not a finite number: using the default 0.5"),
    ("a.lam", "inf", None, "a.lam='inf' is not a finite number: using the default 0.5"),
    ("a.lam", "-3", 0.0, "a.lam=-3 is outside [0, 1]: using 0"),
    ("b.num_bins", "4.4", 4, "b.num_bins=4.4 is not an integer: using 4"),
    ("b.num_bins", "1000", 100, "b.num_bins=1000 is outside [2, 100]: using 100"),
])
def test_every_hyperparameter_of_a_link_is_finite_in_range_or_the_default_with_a_note(key, text, expected, words):
    s, notes = from_query({"loss": "roadmap", "compare": "1", "loss_b": "fast_ap", key: text})
    values = s.hparams if key.startswith("a.") else s.hparams_b
    name = key[2:]
    assert values.get(name) == expected and notes == [words]
    assert validate(s) == []


def test_link_values_in_notes_are_cut_to_a_sane_length():
    long = "x" * 5000
    _, notes = from_query({"loss": long, long: "1", "m": "9" * 5000, "a.tau": "1" * 5000, "a." + long: "1"})
    assert len(notes) == 5 and all(len(n) < 250 for n in notes), notes
    assert all("… (5,000 characters)" in n for n in notes), notes
    assert notes[0].startswith("loss='" + "x" * SHOWN_CHARS + "'… (5,000 characters): unknown loss")


@pytest.mark.parametrize("text", ["[Click here to log in](https://evil.example)", "![x](https://e.example/a.png)",
                                  ":red[red] :material/home: :smile: $x^2$ **b** _i_ `c` <b>h</b> # h\n- li",
                                  "www.evil.example a@evil.example \\[ ok"])
def test_escape_markdown_leaves_no_markdown_and_no_autolink_start(text):
    out = escape_markdown(text)
    unescaped = re.sub(r"\\(.)", r"\1", out.replace(JOINER, ""))
    assert unescaped == text.replace("\n", " ")  # the same characters, read literally
    plain = re.sub(r"\\.", "", out)  # what is left once every escaped character is taken out
    assert not set(plain) & MARKDOWN_SPECIAL and "\n" not in plain
    assert "://" not in out.replace(JOINER, "X") and "www." not in out and "@e" not in out and ":m" not in out


def test_the_sid_of_a_link_is_no_setting_and_no_note():
    s, notes = from_query({"sid": "abc", "loss": "fast_ap"})
    assert notes == [] and s == Settings().replace(loss="fast_ap")


# ------------------------------------------------------------------------------ session
def tiny(**changes) -> Settings:
    base = dict(classes=6, batch_size=8, m=2, steps=6, steps_per_tick=2, eval_every=4)
    return Settings().replace(**{**base, **changes})


def session_for(s: Settings, background: bool = False) -> TrainingSession:
    """Without background: nothing trains unless the test calls tick(), step() or advance()."""
    return TrainingSession(to_configs(s), run_labels(s), s.steps, s.steps_per_tick, s.eval_every, background)


def evals(run) -> list[int]:
    return [r["step"] for r in run.history if r["kind"] == "eval"]


def test_start_tick_pause_step_reset_and_done():
    session = session_for(tiny())
    assert session.status == "new" and not session.tick()
    session.start()
    assert session.status == "running" and session.step_count == 0 and evals(session.runs[0]) == []
    assert session.tick() and session.step_count == 2 and evals(session.runs[0]) == [0]  # evaluated after step 1
    session.pause()
    assert not session.tick() and session.step_count == 2 and session.status == "paused"
    session.step()
    assert session.step_count == 4 and session.status == "paused"
    session.start()
    session.tick()
    assert session.step_count == 6 and session.status == "done" and not session.running
    assert evals(session.runs[0]) == [0, 4, 6]  # step 0, every 4 steps, and the end
    session.start()
    assert not session.running and "raise 'steps'" in session.notice
    session.reset()
    assert session.status == "new" and session.step_count == 0 and session.runs[0].history == []



@pytest.mark.parametrize("model", ["deit_small_patch16_224", "deit_small_distilled_patch16_224", "resnet18"])
def test_every_model_of_the_menu_trains_on_the_embedded_data(model):
    """The Model menu offers nothing that cannot train: DeiT, built for 224 px, refused the glyphs' 32 px
    ("could not build the model: AssertionError: Input height (32) doesn't match model (224)") at every Start."""
    from lab.dashboard.settings import MODEL_EXAMPLES

    assert model in MODEL_EXAMPLES
    session = session_for(tiny(model=model, steps=2, steps_per_tick=1))
    session.step()
    assert session.error is None and session.step_count == 1, session.error
    assert evals(session.runs[0]) == [0]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in session.runs[0].history if r["kind"] == "step")


@pytest.mark.parametrize("eval_every", [4, 1])
def test_the_untrained_model_is_evaluated_after_step_one_is_shown(eval_every):
    """Issue 46: a Start shows step 1 without waiting for the step-0 evaluation (about five steps' cost): the
    untrained model is kept at the build, step 1 is published, then the copy is evaluated. Its record is what
    evaluating the untrained model gives, bit for bit, and comes before step 1's own evaluation (eval_every 1)."""
    s = tiny(steps_per_tick=1, eval_every=eval_every)
    reference = session_for(s)
    reference.build()
    untrained = reference.runs[0].trainer.evaluate()
    session = session_for(s)
    seen = []
    session.on_publish = lambda x: seen.append((x.step_count, evals(x.runs[0])))
    session.start()
    assert session.runs[0].initial is not None and session.runs[0].history == []
    assert session.tick() and session.step_count == 1
    assert (1, []) in seen  # step 1 on the page before the evaluation was made
    assert seen[-1] == (1, [0, 1] if eval_every == 1 else [0])
    assert session.runs[0].initial is None  # the copy is gone once evaluated
    history = session.runs[0].history
    assert [(r["kind"], r["step"]) for r in history][:2] == [("train", 1), ("eval", 0)]
    assert history[1] == untrained
    assert session.view.runs[0].last_eval["step"] == (1 if eval_every == 1 else 0)
    session.reset()
    assert session.runs[0].initial is None and session.build() and session.runs[0].initial is not None

def test_schedule_changes_keep_the_run_but_training_changes_do_not():
    s = tiny()
    session = session_for(s)
    assert session.matches(to_configs(s.replace(steps=50, steps_per_tick=3)), run_labels(s))
    assert not session.matches(to_configs(s.replace(lr=0.01)), run_labels(s))
    assert not session.matches(to_configs(s.replace(compare=True)), run_labels(s.replace(compare=True)))


def test_compare_runs_start_from_the_same_seed_and_keep_their_own_randomness():
    pair = session_for(tiny(compare=True, loss_b="roadmap"))  # the same loss twice
    pair.step()
    pair.step()
    solo = session_for(tiny())
    solo.step()
    solo.step()
    losses = [[r["loss"] for r in run.history if r["kind"] == "train"] for run in pair.runs + solo.runs]
    assert len(losses[0]) == 4
    assert losses[0] == losses[1] == losses[2]


def test_a_proxy_loss_trains_with_the_datasets_class_count():
    session = session_for(tiny(loss="proxy_dg"))
    session.step()
    assert session.error is None and session.step_count == 2
    assert session.runs[0].trainer.loss_fn.num_classes == 6


def test_a_training_error_stops_training_and_becomes_a_message(monkeypatch):
    session = session_for(tiny())
    session.start()

    def diverge(self, n=1):
        raise NonFiniteLossError(self.step_count + 1, "the loss (nan)")

    monkeypatch.setattr(Trainer, "step", diverge)
    session.tick()
    assert session.status == "error" and not session.running
    assert "training stopped" in session.error and "not finite" in session.error
    session.step()  # refused until reset
    assert session.step_count == 0
    monkeypatch.undo()
    session.reset()
    session.step()
    assert session.error is None and session.step_count == 2


def test_pause_waits_for_the_step_in_flight_and_no_other(monkeypatch):
    # Streamlit runs a button's callback in the script thread while the worker is inside a tick:
    # Pause must not slip into the middle of a step, and no step may start after it.
    session = session_for(tiny(steps=400))
    session.start()
    inside, release = hold_steps(monkeypatch)
    ticker = threading.Thread(target=session.tick)
    ticker.start()
    assert inside.wait(timeout=60)
    seen = []
    clicker = threading.Thread(target=lambda: (session.pause(), seen.append(session.view)))
    clicker.start()
    # Until Pause has been asked (the clicker thread may not be scheduled at once on a loaded machine),
    # the tick may rightly start its second step: wait for the request, not for a fixed time.
    deadline = time.monotonic() + 60
    while session.running and time.monotonic() < deadline:
        time.sleep(0.01)
    clicker.join(timeout=0.5)
    assert not session.running and clicker.is_alive() and seen == []  # blocked behind the step in flight
    release.set()
    ticker.join()
    clicker.join()
    # The tick had steps_per_tick = 2 steps to do: the first ends, the second never starts.
    assert seen[0].step_count == 1 and seen[0].status == "paused" and not seen[0].running
    assert session.step_count == 1 and session.view.step_count == 1


def hold_evaluations(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """(inside, release): every ``Trainer.evaluate`` call sets ``inside``, then waits for ``release``."""
    inside, release = threading.Event(), threading.Event()
    evaluate = Trainer.evaluate

    def held(self, *args, **kwargs):
        inside.set()
        release.wait(timeout=120)
        return evaluate(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "evaluate", held)
    return inside, release


def test_pause_does_not_wait_for_an_evaluation_and_the_evaluation_keeps_its_step(monkeypatch):
    session = session_for(tiny(steps=400, steps_per_tick=2, eval_every=4))
    session.step()  # steps 1-2, built and evaluated at step 0 before the evaluations are held
    session.start()
    inside, release = hold_evaluations(monkeypatch)
    ticker = threading.Thread(target=session.tick)  # steps 3 and 4; step 4 is evaluated
    ticker.start()
    assert inside.wait(timeout=60)
    clicker = threading.Thread(target=session.pause)
    clicker.start()
    clicker.join(timeout=60)
    paused = session.view
    done = not clicker.is_alive()
    release.set()  # only now can the evaluation end: Pause returned while it was held
    ticker.join()
    assert done and paused.status == "paused" and paused.step_count == 4
    assert evals(session.runs[0]) == [0, 4] and session.step_count == 4  # no step after the Pause
    assert session.view.runs[0].last_eval["step"] == 4


def test_a_build_error_becomes_a_message():
    s = tiny()
    session = TrainingSession([dataclasses.replace(c, dataset="folder", data_root="/nonexistent", dataset_kwargs={})
                               for c in to_configs(s)], run_labels(s), 4, 2, 2)
    session.start()
    assert session.status == "error" and session.error.startswith("could not build the model")
    assert not session.running and not session.built


def losses(run) -> list[float]:
    return [r["loss"] for r in run.history if r["kind"] == "train"]


def test_a_new_loss_b_restarts_run_b_only_and_b_catches_up_with_a():
    s = tiny(compare=True, loss_b="smooth_ap", steps=20)
    session = session_for(s)
    session.step()
    session.step()
    a = session.runs[0]
    history_a = list(a.history)
    changed = s.replace(loss_b="fast_ap")
    assert session.reconfigure(to_configs(changed), run_labels(changed)) == ["B · fast_ap"]
    assert session.runs[0] is a and a.step_count == 4 and a.history == history_a
    assert session.runs[1].label == "B · fast_ap" and session.runs[1].step_count == 0
    assert session.status == "paused" and session.view.runs[0].step_count == 4
    session.step()  # B builds and trains; A waits for it
    assert [r.step_count for r in session.runs] == [4, 2]
    session.step()
    session.step()
    assert [r.step_count for r in session.runs] == [6, 6]
    assert losses(a)[:4] == losses(SimpleNamespace(history=history_a))
    solo = session_for(tiny(loss="fast_ap", steps=20))
    for _ in range(3):
        solo.step()
    assert losses(session.runs[1]) == losses(solo.runs[0])  # B trained exactly as it would alone
    both = changed.replace(lr=0.01)  # shared by both runs: both restart, the session is new
    assert session.reconfigure(to_configs(both), run_labels(both)) == ["A · roadmap", "B · fast_ap"]
    assert session.status == "new" and session.step_count == 0
    assert session.reconfigure(to_configs(both), run_labels(both)) == []


def test_an_error_of_run_b_goes_with_run_b(monkeypatch):
    s = tiny(compare=True, loss_b="smooth_ap", steps=20)
    session = session_for(s)
    session.step()
    step = Trainer.step

    def b_diverges(self, n=1):
        if self.config.loss == "smooth_ap":
            raise NonFiniteLossError(self.step_count + 1, "the loss (nan)")
        return step(self, n)

    monkeypatch.setattr(Trainer, "step", b_diverges)
    session.step()
    assert session.status == "error" and session.error.startswith("B · smooth_ap: training stopped")
    # The runs step in turn: A made step 3, B failed on it, and nothing trained after.
    assert [r.step_count for r in session.runs] == [3, 2]
    changed = s.replace(loss_b="fast_ap")
    session.reconfigure(to_configs(changed), run_labels(changed))
    assert session.error is None and session.runs[0].step_count == 3
    session.step()
    assert session.error is None and [r.step_count for r in session.runs] == [3, 2]


def test_the_worker_trains_in_the_background_until_paused(monkeypatch):
    threads = record_step_threads(monkeypatch)
    session = session_for(tiny(steps=100_000), background=True)
    session.start()  # builds here, then returns: the steps are the worker's
    assert session.wait(lambda v: v.step_count >= 6, timeout=120), session.view
    assert set(threads) == {"ranklab-training"}
    session.pause()
    session.worker.thread.join(timeout=60)
    assert not session.worker.thread.is_alive() and not session.worker.active
    stopped = session.step_count
    assert session.view.step_count == stopped and session.view.status == "paused"
    session.start()  # a new thread goes on from there
    assert session.wait(lambda v: v.step_count >= stopped + 4, timeout=120)
    session.pause()


def test_the_worker_stops_at_the_end_of_the_run():
    session = session_for(tiny(steps=6), background=True)
    session.start()
    assert session.wait(lambda v: v.status == "done", timeout=120), session.view
    session.worker.thread.join(timeout=60)
    assert not session.running and session.step_count == 6 and evals(session.runs[0]) == [0, 4, 6]


def test_the_page_reads_the_view_without_waiting_for_the_tick_in_progress(monkeypatch):
    session = session_for(tiny(steps=400))
    session.step()
    inside, release = hold_steps(monkeypatch)
    session.start()
    ticker = threading.Thread(target=session.tick)
    ticker.start()
    assert inside.wait(timeout=60)
    seen = []
    reader = threading.Thread(target=lambda: seen.append(session.view))
    reader.start()
    reader.join(timeout=5)
    release.set()
    ticker.join()
    assert not reader.is_alive() and seen[0].step_count == 2 and len(seen[0].runs[0].history) == len(
        [r for r in session.runs[0].history if r["step"] <= 2])
    assert session.view.step_count == 4  # published once the tick ended


def test_training_waits_while_nobody_watches_and_goes_on_when_a_page_does(monkeypatch):
    monkeypatch.setattr(worker, "WATCH_SECONDS", 0.0)
    session = session_for(tiny(steps=100_000), background=True)
    session.start()
    assert session.wait(lambda v: v.notice is not None and "waits at step 0" in v.notice, timeout=60), session.view
    session.worker.thread.join(timeout=60)
    assert session.running and session.step_count == 0 and not session.worker.active
    session.worker.page_open = lambda: True  # the page that owns it is connected again
    session.touch()
    assert session.wait(lambda v: v.step_count >= 4, timeout=120)
    assert "waited at step 0" in session.view.notice
    session.pause()


# ------------------------------------------------------------------------------ registry (reloads)
def test_a_reload_takes_its_run_over_but_a_second_open_tab_does_not():
    connected = set()
    registry = Registry(page_open=connected.__contains__)
    sid, found, note = registry.claim(None, "page1")
    assert found is None and note is None and sid
    session = session_for(tiny(), background=True)
    registry.put(sid, session, "page1")
    connected.add("page1")
    assert session.worker.page_open()
    other_sid, found, note = registry.claim(sid, "page2")  # the same link in a second tab
    assert found is None and other_sid != sid and "open in another tab" in note
    connected.discard("page1")  # reload: the old page disconnects, the new one asks
    assert not session.worker.page_open()
    assert registry.claim(sid, "page3") == (sid, session, None)
    connected.add("page3")
    assert session.worker.page_open()
    stale_sid, found, note = registry.claim("gone", "page4")
    assert found is None and stale_sid != "gone" and "not on this server any more" in note


def test_the_registry_keeps_few_closed_sessions_and_pauses_the_ones_it_drops():
    registry = Registry(max_closed=2)  # nobody connected
    sessions = [session_for(tiny()) for _ in range(3)]
    for i, s in enumerate(sessions):
        s.running = True  # as if training: dropping it must stop it
        registry.put(f"sid{i}", s, f"page{i}")
    assert set(registry.entries) == {"sid1", "sid2"} and not sessions[0].running
    assert sessions[1].running and sessions[2].running
    assert registry.claim("sid0", "page9")[1] is None  # dropped: a fresh run
    idle = Registry(idle_seconds=0.0)
    s = session_for(tiny())
    s.running = True
    idle.put("x", s, "page")
    assert idle.entries == {} and not s.running


def test_drop_closed_drops_the_runs_of_pages_not_connected_and_keeps_the_others():
    connected = {"open"}
    registry = Registry(page_open=connected.__contains__)
    kept, closed = session_for(tiny()), session_for(tiny())
    closed.running = True
    registry.put("a", kept, "open")
    registry.put("b", closed, "gone")
    assert registry.drop_closed() == 1 and set(registry.entries) == {"a"} and not closed.running
    assert registry.drop_closed() == 0


def test_a_dropped_session_stops_at_a_step_and_its_thread_is_joined():
    registry = Registry(max_closed=0)  # nobody connected and none kept: dropped as soon as it is put
    session = session_for(tiny(steps=100_000), background=True)
    session.start()
    assert session.wait(lambda v: v.step_count >= 2, timeout=120), session.view
    registry.put("sid", session, "page")
    assert registry.entries == {} and not session.running and not session.worker.thread.is_alive()
    assert session.view.step_count == session.step_count and session.view.status == "paused"


def test_stop_all_pauses_every_session_and_joins_its_thread():
    sessions = [session_for(tiny(steps=100_000), background=True) for _ in range(2)]
    for session in sessions:
        session.start()
    for session in sessions:
        assert session.wait(lambda v: v.step_count >= 2, timeout=120), session.view
    worker.stop_all()
    for session in sessions:
        assert not session.running and not session.worker.thread.is_alive()
        assert session.view.step_count == session.step_count


# ------------------------------------------------------------------------------ held-out views
def toy_heldout() -> HeldOut:
    # Rows 0-1 class 0, row 2 class 1 (same coarse group 0 as class 0), row 3 class 2 (group 1).
    emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.7, 0.7], [-1.0, 0.2]])
    labels = torch.tensor([[0, 0], [0, 0], [1, 0], [2, 1]])
    return HeldOut(step=3, items=[10, 11, 12, 13], embeddings=emb, labels=labels)


def test_neighbours_are_ranked_and_graded():
    found = neighbours(toy_heldout(), 0, k=3)
    assert found["rows"] == [1, 2, 3]
    assert found["levels"] == ["class", "coarse", "other"]
    assert found["scores"] == sorted(found["scores"], reverse=True)
    assert neighbours(toy_heldout(), 0, k=99)["rows"] == [1, 2, 3]  # k clamped to the others


def test_pair_similarities_count_every_ordered_pair_once():
    pos, neg = pair_similarities(toy_heldout())
    assert len(pos) == 2 and len(neg) == 16 - 4 - 2  # 2 same-class ordered pairs; N^2 - N - 2
    capped_pos, capped_neg = pair_similarities(toy_heldout(), max_pairs=3)
    assert len(capped_pos) == 2 and len(capped_neg) == 3


def test_per_query_ap_matches_the_metric_and_skips_queries_without_positive():
    h = toy_heldout()
    aps = per_query_ap(h)
    assert len(aps) == 2  # rows 2 and 3 have no other item of their class
    e = torch.nn.functional.normalize(h.embeddings, dim=1)
    expected = average_precision((e @ e.T)[:2], (h.labels[:, :1] == h.labels[:, 0])[:2], ~torch.eye(4, dtype=bool)[:2])
    assert aps == pytest.approx(expected.tolist())


def test_projections_give_one_point_per_item():
    g = torch.Generator().manual_seed(0)
    h = HeldOut(0, list(range(24)), torch.randn(24, 8, generator=g), torch.arange(24)[:, None] // 4)
    for method in ("pca", "tsne"):
        points = project(h, method)
        assert len(points) == 24 and all(len(p) == 2 for p in points)
    with pytest.raises(ValueError, match="pca"):
        project(h, "umap")


def test_selected_row_reads_the_clicked_points_customdata():
    assert selected_row({"selection": {"points": [{"customdata": [7], "x": 0}]}}) == 7
    assert selected_row(SimpleNamespace(selection=SimpleNamespace(points=[{"customdata": 3}]))) == 3
    assert selected_row({"selection": {"points": []}}) is None
    assert selected_row(None) is None


def test_describe_item_names_class_and_coarse_group():
    ds = SimpleNamespace(class_names={4: "Ж"}, coarse_names={1: "Cyrillic"})
    assert describe_item(ds, torch.tensor([4, 1])) == "Ж · Cyrillic"
    assert describe_item(SimpleNamespace(class_names={}), torch.tensor([9])) == "class 9"
