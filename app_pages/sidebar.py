"""The sidebar: settings widgets (seeded from the URL on a page's first run), the Start /
Pause / Step / Reset buttons, and keeping the session and the URL in step with the settings."""
from __future__ import annotations

import copy
from typing import Any, Callable, Optional

import streamlit as st

from lab.dashboard import (Settings, TrainingSession, from_query, loss_sliders, new_session, run_labels, to_configs,
                           to_query)
from lab.core.env import app_max_params
from lab.dashboard.pool import Refused
from lab.dashboard.served import dataset_label, millions, offered
from lab.dashboard.settings import BOUNDS, LR_SLIDER, MODEL_EXAMPLES, session_ask
from lab.dashboard.urlstate import SID
from lab.data import EMBEDDED
from lab.losses import LOSSES

from . import reattach
from .widgets import kept, lazy_expander, seed_state, spec_slider, spec_value

# Settings field -> widget key.
KEYS = {"dataset": "w_dataset", "data_root": "w_root", "classes": "w_classes", "model": "w_model", "loss": "w_loss",
        "compare": "w_compare", "loss_b": "w_loss_b", "batch_size": "w_batch", "m": "w_m", "lr": "w_lr",
        "seed": "w_seed", "steps": "w_steps", "steps_per_tick": "w_tick", "eval_every": "w_eval"}
LOSS_NAMES = sorted(LOSSES)


def hparam_key(run: str, loss: str, name: str) -> str:
    """One key per (run, loss, name): a loss's slider never starts from another loss's value
    (SmoothAP's tau is not Sup-AP's) and runs A and B never share one."""
    return f"w_hp_{run}_{loss}_{name}"


def init_from_url() -> None:
    """On a page's first run, put the link's settings (or the defaults) into the widgets and
    take over the link's run if it may (a reload); notes on what the link could not do."""
    if st.session_state.get("url_loaded"):
        return
    settings, notes = from_query(st.query_params.to_dict())
    note = reattach.attach()
    st.session_state["url_loaded"] = True
    st.session_state["url_notes"] = notes + ([note] if note else [])
    for name, key in KEYS.items():
        st.session_state[key] = getattr(settings, name)
    for run, loss, hparams in (("a", settings.loss, settings.hparams), ("b", settings.loss_b, settings.hparams_b)):
        for name, value in hparams.items():
            st.session_state[hparam_key(run, loss, name)] = value


def _index(options: list, name: str) -> int:
    """Position of the widget's current value of setting ``name`` (see ``widgets``: the fallback if
    the browser rebuilds it); the default's if it is not an option (``from_query`` notes those)."""
    value = st.session_state[KEYS[name]]
    return options.index(value if value in options else getattr(Settings(), name))


def _number(label: str, name: str, help: Optional[str] = None, step: int = 1, drawn: bool = True) -> int:
    """The number field of setting ``name``; its value only (kept) when ``drawn`` is false."""
    low, high = BOUNDS[name]
    value = int(st.session_state[KEYS[name]])
    if not drawn:
        return kept(KEYS[name], value)
    return int(st.number_input(label, int(low), int(high), value=value, step=step, key=KEYS[name], help=help))


def _loss_widgets(run: str, loss: str) -> dict[str, Any]:
    """Loss ``loss``'s hyper-parameter sliders for run ``run`` in a lazy expander: their values, drawn or not."""
    box, drawn = lazy_expander(f"{loss} hyper-parameters" + (" (run B)" if run == "b" else " (paper defaults)"),
                               key=f"x_hp_{run}_{loss}")
    specs = loss_sliders(loss)
    if not drawn:
        return {name: kept(hparam_key(run, loss, name), spec_value(spec, hparam_key(run, loss, name)))
                for name, spec in specs.items()}
    with box:
        return {name: spec_slider(spec.description, spec, hparam_key(run, loss, name), help=spec.help or None)
                for name, spec in specs.items()}


def settings_panel() -> Settings:
    """Draw the settings widgets in the sidebar; what they hold, as Settings."""
    init_from_url()
    defaults = Settings()
    for name, key in KEYS.items():
        seed_state(key, getattr(defaults, name))
    served = offered()  # the datasets and folders the operator offers (RANKLAB_APP_DATA): nothing else
    dataset = st.selectbox("Dataset", list(served), index=_index(list(served), "dataset"), key=KEYS["dataset"],
                           format_func=dataset_label)
    classes, root = st.session_state[KEYS["classes"]], st.session_state[KEYS["data_root"]]
    if dataset == "glyphs":
        classes = _number("Glyph classes (train; the test split has as many others)", "classes")
    elif dataset not in EMBEDDED:
        folders = list(served[dataset])
        root = st.selectbox("Dataset folder", folders, index=folders.index(root) if root in folders else 0,
                            key=KEYS["data_root"], help="The folders this server's operator offers (RANKLAB_APP_DATA)")
    models = list(MODEL_EXAMPLES) + ([st.session_state[KEYS["model"]]]
                                     if st.session_state[KEYS["model"]] not in MODEL_EXAMPLES else [])
    model = st.selectbox("Model", models, index=_index(models, "model"), key=KEYS["model"],
                         accept_new_options=True, help="small_cnn (fast on a CPU) or any timm model name: type it "
                         f"(this server builds models of up to {millions(app_max_params())} parameters)")
    loss = st.selectbox("Loss", LOSS_NAMES, index=_index(LOSS_NAMES, "loss"), key=KEYS["loss"])
    hparams = _loss_widgets("a", loss)
    compare = st.toggle("Compare with a second loss (same seed)", value=bool(st.session_state[KEYS["compare"]]),
                        key=KEYS["compare"])
    loss_b, hparams_b = st.session_state[KEYS["loss_b"]], {}
    if compare:
        loss_b = st.selectbox("Second loss (run B)", LOSS_NAMES, index=_index(LOSS_NAMES, "loss_b"),
                              key=KEYS["loss_b"])
        hparams_b = _loss_widgets("b", loss_b)
    batch = _number("Batch size", "batch_size", help="At most 256 for the small CNN on embedded data, else 64",
                    step=4)
    m = _number("Images per class in a batch (m)", "m")
    lr = spec_slider("Learning rate (Adam)", LR_SLIDER, KEYS["lr"])
    seed = _number("Seed", "seed")
    box, drawn = lazy_expander("Schedule", key="x_schedule")
    with box:
        steps = _number("Run length (steps)", "steps", drawn=drawn)
        tick = _number("Steps per tick", "steps_per_tick", help="Fewer: a more responsive page", drawn=drawn)
        every = _number("Evaluate every (steps)", "eval_every", drawn=drawn)
    return Settings(dataset=dataset, data_root=root or "", classes=int(classes), model=str(model), loss=loss,
                    hparams=hparams, compare=compare, loss_b=loss_b, hparams_b=hparams_b, batch_size=batch, m=m,
                    lr=float(lr), seed=seed, steps=steps, steps_per_tick=tick, eval_every=every)


def sync_session(settings: Settings, errors: list[str]) -> Optional[TrainingSession]:
    """The page's session, training these settings: a run whose configuration did not change
    keeps its model and steps (a new loss B restarts run B only). When the server cannot take the
    session now (``pool.Refused``: its memory, or its workers' room for pages, even after the runs kept
    for closed pages' reloads are dropped), the reason joins ``errors`` and nothing trains."""
    session: Optional[TrainingSession] = st.session_state.get("session")
    if errors:
        if session is not None:
            session.pause()  # invalid settings: nothing trains until they are fixed
        return session
    configs, labels = configs_of(settings), run_labels(settings)
    if session is None:
        made = _in_memory(errors, lambda: new_session(configs, labels, settings.steps, settings.steps_per_tick,
                                                      settings.eval_every, session_ask(configs)))
        if made is not None:
            st.session_state["session"] = made
            reattach.keep(made)
        return made
    session.set_schedule(settings.steps, settings.steps_per_tick, settings.eval_every)
    if session.matches(configs, labels):
        return session  # the common case, every click and tick: without waiting for the training's lock
    reserve = getattr(session, "reserve", None)  # trained by the server's workers: their memory first
    if reserve is not None and _in_memory(errors, lambda: reserve(session_ask(configs)) or True) is None:
        session.pause()  # it keeps its runs, and trains nothing of the new settings
        return session
    steps = {r.label: r.step_count for r in session.runs}
    restarted = session.reconfigure(configs, labels)
    kept = [f"{r.label} keeps its {r.step_count} steps" for r in session.runs if r.label not in restarted]
    if restarted and any(steps.values()):
        st.toast(f"Settings changed: {' and '.join(restarted)} starts from step 0"
                 + (f"; {', '.join(kept)}" if kept else ""))
    return session


def _in_memory(errors: list[str], make: Callable[[], Any]) -> Any:
    """``make()``, once more after dropping the runs kept for closed pages when the server's memory cannot hold
    it; None, and the reason in ``errors``, when it still cannot."""
    for last in (False, True):
        try:
            return make()
        except Refused as e:  # no memory, or no worker with room for another page: closed pages' runs go first
            if last or not reattach.drop_closed():
                errors.append(str(e))
                return None
    raise AssertionError("unreachable")


def configs_of(settings: Settings) -> list:
    """The settings' TrainConfigs, built when the settings change: the reruns of every click and tick between
    two changes reuse them (each build checks every value of the config and its loss again)."""
    built = st.session_state.get("built_configs")
    if built is None or built[0] != settings:
        built = (copy.deepcopy(settings), to_configs(settings))
        st.session_state["built_configs"] = built
    return built[1]


def sync_url(settings: Settings) -> None:
    """Keep the address bar on the current settings and the page's sid: copying it shares the
    settings, reloading it finds the run again."""
    wanted = {**to_query(settings), SID: st.session_state["sid"]}
    if st.query_params.to_dict() != wanted:
        st.query_params.from_dict(wanted)


def run_buttons(session: Optional[TrainingSession], can_train: bool) -> None:
    """Start / Pause / Step / Reset. Callbacks run before the next script run, so the whole run
    (and the fragment's timer) sees the new state."""
    ok = can_train and session is not None and session.status != "error"
    top, bottom = st.columns(2), st.columns(2)
    top[0].button("Start", key="start", type="primary", icon=":material/play_arrow:", width="stretch",
                  disabled=not ok or session.running, on_click=session.start if session else None)
    top[1].button("Pause", key="pause", icon=":material/pause:", width="stretch",
                  disabled=session is None or not session.running, on_click=session.pause if session else None)
    bottom[0].button("Step", key="step", icon=":material/skip_next:", width="stretch", disabled=not ok,
                     on_click=session.step if session else None, help="One tick of training, then pause")
    bottom[1].button("Reset", key="reset", icon=":material/restart_alt:", width="stretch", disabled=session is None,
                     on_click=session.reset if session else None, help="Back to the untrained model (step 0)")
