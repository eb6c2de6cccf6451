"""Studies beyond one machine (issue 44): seed ranges and shards, the cluster's parameters, one GPU per local
worker, a run stopped and resumed to the same bits, and submitit's jobs (its local executor: processes here)
recording what the local runner records. The real scheduler: tests/test_study_slurm.py."""
import functools
import json
import os
import signal
import sys
import tempfile
import threading
import time
import types
from concurrent import futures
from pathlib import Path

import pytest
import torch

from lab.cli import main
from lab.studies.running import execution, local_pool, runner
from lab.studies.running import spec as study_spec
from lab.studies.running.cluster import ClusterConfig, load_cluster
from lab.studies.running.results_file import RAN
from tests._pool_probe import pid_and_device
from tests.test_study import fake_execute

ROOT = Path(__file__).resolve().parents[1]


def measured(rec: dict) -> dict:
    """What a record says the run trained and measured: every field but how, when and where it ran."""
    return {k: v for k, v in rec.items() if k not in RAN and k != "curve"} | \
        {"curve": [{k: v for k, v in p.items() if not k.endswith("_seconds")} for p in rec.get("curve", [])]}


@functools.lru_cache(maxsize=None)
def local_records(seeds: int = 2) -> dict[str, dict]:
    """The quick methods study's records as the local runner trains them (``seeds`` per method), once per test
    session: the executors' tests here and in tests/test_study_slurm.py compare theirs with these."""
    with tempfile.TemporaryDirectory(prefix="ranklab-local-") as tmp:
        return runner.run_studies(["methods"], Path(tmp), quick=True, seeds=seeds, log=lambda _: None)["methods"][
            "runs"]


@functools.lru_cache(maxsize=None)
def straight_record(steps: int) -> dict:
    """The record of :func:`_longer_run` of ``steps`` trained straight through (no stop), once per session."""
    return execution.execute(_longer_run(steps))


@pytest.fixture
def fake(monkeypatch):
    trained = []
    monkeypatch.setattr(runner, "execute", lambda spec, *a, **k: trained.append(spec) or fake_execute(spec))
    return trained


# ------------------------------------------------------------------ --seeds A-B and --shard I/N
def test_seeds_a_b_trains_those_seeds_and_names_them_in_the_session(tmp_path, fake):
    data = runner.run_studies(["methods"], tmp_path, quick=True, seeds=range(2, 4), log=lambda _: None)["methods"]
    assert sorted({r["seed"] for r in data["runs"].values()}) == [2, 3] and len(data["runs"]) == 4
    assert "--seeds 2-3" in data["sessions"][-1]["command"]
    main(["study", "methods", "--quick", "--seeds", "4-4", "--out", str(tmp_path), "--no-render"])
    assert sorted({r["seed"] for r in json.loads((tmp_path / "methods.json").read_text())["runs"].values()}) == \
        [2, 3, 4]


@pytest.mark.parametrize("given", ["3-1", "a-b", "0", "-2", "2-"])
def test_a_bad_seeds_value_is_one_line_naming_the_forms(given, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["study", "methods", "--quick", f"--seeds={given}", "--out", str(tmp_path), "--no-render"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seeds expects N (seeds 0..N-1, N >= 1) or A-B" in err and repr(given) in err


def test_shards_split_the_runs_by_key_into_disjoint_parts_that_cover_them(tmp_path, fake):
    names, every = ["methods", "batch_size"], {s.key for n in ("methods", "batch_size")
                                              for s in study_spec.study_runs(n, quick=True)}
    parts = []
    for i in (2, 0, 1):  # in any order, each part the same share: the split is of every run, done or not
        before = len(fake)
        runner.run_studies(names, tmp_path, quick=True, shard=(i, 3), log=lambda _: None)
        parts.append({s.key for s in fake[before:]})
    assert set.union(*parts) == every and sum(map(len, parts)) == len(every)  # each run once, none missing
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert all(not runner.missing_runs(n, runner.load_results(tmp_path / f"{n}.json"), quick=True) for n in names)
    assert "--shard 2/3" in runner.load_results(tmp_path / "methods.json")["sessions"][0]["command"]


@pytest.mark.parametrize("given", ["3/3", "1", "-1/2", "a/b", "1/0"])
def test_a_bad_shard_is_one_line(given, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["study", "methods", "--quick", f"--shard={given}", "--out", str(tmp_path), "--no-render"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--shard expects I/N with 0 <= I < N" in err and repr(given) in err


# ------------------------------------------------------------------ the cluster's parameters
def test_the_cluster_comes_from_yaml_with_flags_over_it(tmp_path):
    path = tmp_path / "cluster.yaml"
    path.write_text("partition: gpu\ntime: '1-02:00:00'\nmem: 64G\narray_parallelism: 8\nsetup: [module load cuda]\n")
    cluster = load_cluster(path, partition="long", cpus_per_task=None)
    assert (cluster.partition, cluster.minutes, cluster.mem_gb, cluster.array_parallelism) == ("long", 1560, 64, 8)
    assert cluster.setup == ("module load cuda",) and cluster.gpus("cuda") == 1 and cluster.gpus("cpu") == 0
    assert ClusterConfig(time="0:30:00", mem="512M").minutes == 30 and ClusterConfig(mem="512M").mem_gb == 0.5


@pytest.mark.parametrize("text, said", [
    ("partitoin: gpu\n", "unknown key 'partitoin'; accepted keys: backend, partition, gpus_per_task"),
    ("time: soon\n", "cluster time must be minutes (> 0), H:MM:SS or D-HH:MM:SS, got 'soon'"),
    ("mem: lots\n", "cluster mem must be a number of GB or a size such as 500M, 64G, 1T, got 'lots'"),
    ("backend: pbs\n", "cluster backend must be one of auto, slurm, local, got 'pbs'"),
    ("array_parallelism: 0\n", "cluster array_parallelism must be a whole number >= 1, got 0"),
    ("- gpu\n", "expected a mapping of keys")])
def test_a_bad_cluster_file_is_one_line_naming_the_key_and_what_it_takes(text, said, tmp_path, capsys):
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    with pytest.raises(SystemExit):
        main(["study", "methods", "--quick", "--executor", "submitit", "--cluster", str(path), "--out",
              str(tmp_path), "--no-render"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def test_cluster_flags_without_the_submitit_executor_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["study", "methods", "--quick", "--partition", "gpu", "--out", str(tmp_path), "--no-render"])
    assert "--partition sets a cluster job's parameters: add --executor submitit" in capsys.readouterr().err


# ------------------------------------------------------------------ one GPU per local worker
def test_each_worker_of_a_node_with_several_gpus_gets_its_own(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert local_pool.worker_devices("cuda", 4) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
    assert local_pool.worker_devices("cuda", 6) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:0", "cuda:1"]
    assert local_pool.worker_devices("cuda:2", 3) == ["cuda:2"] * 3  # a named GPU stays named
    assert local_pool.worker_devices("cpu", 2) == ["cpu", "cpu"] and local_pool.worker_devices(None, 1) == [None]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert local_pool.worker_devices("cuda", 3) == ["cuda"] * 3


def test_jobs_4_device_cuda_sends_the_runs_to_4_gpus_not_all_to_gpu_0(tmp_path, monkeypatch):
    """The pool as runner builds it: each worker takes its device once, as it starts; its runs train there
    (measured before: every run of --jobs 4 --device cuda on cuda, i.e. GPU 0)."""
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(local_pool, "execute", lambda spec, threads, device, **k: {**fake_execute(spec),
                                                                                 "device": device})

    class Pool:  # 4 workers, each started with the pool's initializer, runs handed out in turn
        def __init__(self, jobs, mp_context, initializer, initargs):
            self.workers = []
            for _ in range(jobs):
                initializer(*initargs)
                self.workers.append(local_pool._WORKER_DEVICE)
            self.submitted = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def submit(self, fn, *args, **kwargs):
            monkeypatch.setattr(local_pool, "_WORKER_DEVICE", self.workers[self.submitted % len(self.workers)])
            self.submitted += 1
            future = futures.Future()
            future.set_result(fn(*args, **kwargs))
            return future

    monkeypatch.setattr(runner.futures, "ProcessPoolExecutor", Pool)
    data = runner.run_studies(["methods"], tmp_path, quick=True, jobs=4, device="cuda", log=lambda _: None)
    assert sorted(r["device"] for r in data["methods"]["runs"].values()) == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]


@pytest.mark.slow
def test_real_worker_processes_each_keep_one_gpu(monkeypatch):
    import multiprocessing

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # in this process, which hands the devices out
    # A spawned worker first runs the parent's __main__ again: pytest's own, not a script an earlier test left there
    # (AppTest leaves app.py; in CI's full run the workers then died, 'terminated abruptly', and passed alone).
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    ctx = multiprocessing.get_context("spawn")  # as the runner's pool (each worker imports torch: ~10 s)
    with futures.ProcessPoolExecutor(2, mp_context=ctx, initializer=local_pool.worker_init,
                                     initargs=(1, local_pool.device_queue(ctx, "cuda", 2))) as pool:
        seen = list(pool.map(pid_and_device, range(8)))
    by_pid = {}
    for pid, device in seen:
        by_pid.setdefault(pid, set()).add(device)
    assert all(len(d) == 1 for d in by_pid.values())  # a worker keeps its GPU
    assert sorted(d for ds in by_pid.values() for d in ds) == ["cuda:0", "cuda:1"][:len(by_pid)]


# ------------------------------------------------------------------ where a run ran
def test_a_run_on_a_cluster_records_its_host_job_array_index_and_gpu(monkeypatch):
    from lab.core.provenance import where_it_ran

    for var in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_RESTART_COUNT",
                "SLURM_JOB_PARTITION", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    here = where_it_ran("cpu")
    assert here == {"host": os.uname().nodename, "gpu": None}  # off a cluster: the host only
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "4240")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "2")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: f"NVIDIA H200 ({device})")
    there = where_it_ran("cuda")
    assert there == {"host": os.uname().nodename, "slurm_job_id": "4242", "slurm_array_job_id": "4240",
                     "slurm_array_task_id": "2", "slurm_restart_count": "1", "cuda_visible_devices": "3",
                     "gpu": "NVIDIA H200 (cuda)"}
    spec = study_spec.study_runs("methods", quick=True, seeds=1)[0]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rec = execution.execute(spec)  # a record carries it, in its provenance
    assert {k: rec["provenance"][k] for k in ("slurm_job_id", "slurm_array_task_id", "host")} == \
        {"slurm_job_id": "4242", "slurm_array_task_id": "2", "host": os.uname().nodename}


# ------------------------------------------------------------------ stopped, checkpointed, resumed
def _longer_run(steps: int = 24) -> study_spec.RunSpec:
    spec = study_spec.study_runs("methods", quick=True, seeds=1)[1]
    return study_spec.RunSpec(spec.study, spec.method, spec.seed, {**spec.config, "steps": steps})


def test_a_run_stopped_part_way_resumes_to_the_same_bits(tmp_path):
    spec = _longer_run()
    straight = execution.execute(spec, curve_every=8)
    with pytest.raises(execution.Preempted, match="stopped at step 8 of 24"):
        execution.execute(spec, curve_every=8, work=tmp_path, stop=lambda step, total: step >= 5)
    assert (tmp_path / "checkpoint.pt").is_file() and json.loads((tmp_path / "progress.json").read_text())["curve"]
    resumed = execution.execute(spec, curve_every=8, work=tmp_path)
    assert measured(resumed) == measured(straight)  # metrics, curve, gaps and the trained state's sha256
    assert resumed["trained_state_sha256"] == straight["trained_state_sha256"]
    assert [s["step"] for s in resumed["provenance"]["stopped_at"]] == [8]
    assert [p["step"] for p in resumed["curve"]] == [0, 8, 16, 24]


def test_a_run_killed_outright_resumes_from_its_last_periodic_checkpoint_to_the_same_bits(tmp_path):
    """A job killed without warning (SIGKILL, a node lost) had no stop to honour: with ``checkpoint_every`` it
    saved on its way, and the run resumes from the last of those."""
    spec = _longer_run()
    spec = study_spec.RunSpec(spec.study, spec.method, spec.seed, {**spec.config, "checkpoint_every": 5})
    straight = execution.execute(spec)

    def killed(step, total):
        if step >= 12:
            raise SystemExit("killed")  # not an exception a run could catch: the process ends here
        return False

    with pytest.raises(SystemExit):
        execution.execute(spec, work=tmp_path, stop=killed)
    resumed = execution.execute(spec, work=tmp_path)
    assert resumed["provenance"]["resumed_from_step"] == 10 and "stopped_at" not in resumed["provenance"]
    assert measured(resumed) == measured(straight)


# ------------------------------------------------------------------ submitit's jobs (local processes)
@pytest.fixture
def job_env(monkeypatch):
    """submitit's jobs are new processes: they import this checkout's lab."""
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.mark.slow
def test_submitit_jobs_record_what_the_local_runner_records(tmp_path, job_env):
    local = local_records(seeds=1)  # 2 runs (a process each: what the test's time goes to), 2 at once
    lines = []
    cluster = ClusterConfig(backend="local", array_parallelism=2, poll_seconds=0.5, time=30)
    jobs = runner.run_studies(["methods"], tmp_path / "jobs", quick=True, seeds=1, executor="submitit",
                              cluster=cluster, log=lines.append)["methods"]
    assert set(jobs["runs"]) == set(local) and len(jobs["runs"]) == 2
    for key, rec in jobs["runs"].items():
        assert measured(rec) == measured(local[key]), key
    assert "--executor submitit" in jobs["sessions"][-1]["command"] and not jobs["sessions"][-1]["stopped"]
    assert sum(line.startswith("  [") and "done" in line for line in lines) == 2
    assert not list((tmp_path / "jobs" / ".work").glob("[0-9a-f]*"))  # recorded runs leave no checkpoint


def _stop_first_job_midway(folder: Path, done: threading.Event) -> None:
    """SIGTERM to the first local job once its log says it trained a tenth of its steps (submitit's local
    controller passes it to the run, as SLURM's preemption does)."""
    while not done.is_set():
        for log in folder.glob("*_0_log.out"):
            if ": step " in log.read_text():
                os.kill(int(log.name.split("_")[0]), signal.SIGTERM)
                return
        time.sleep(0.05)


@pytest.mark.slow
def test_a_job_stopped_with_sigterm_is_requeued_and_resumes_to_the_same_bits(tmp_path, job_env):
    from lab.studies.running.submitit_runs import train_as_jobs

    spec = _longer_run(steps=150)
    straight = straight_record(150)
    records, lines, done = {}, [], threading.Event()
    watcher = threading.Thread(target=_stop_first_job_midway, args=(tmp_path / "submitit", done), daemon=True)
    watcher.start()
    try:
        broken = train_as_jobs([spec], lambda key, rec, error="": records.update({key: rec or error}),
                               ClusterConfig(backend="local", poll_seconds=0.5, time=30), tmp_path, 1, None, "s", 0,
                               lines.append)
    finally:
        done.set()
    rec = records[spec.key]
    assert broken == 0 and isinstance(rec, dict), (records, lines)
    stops = rec["provenance"]["stopped_at"]
    assert len(stops) == 1 and 0 < stops[0]["step"] < 150, stops  # it did stop part-way
    assert measured(rec) == measured(straight)
    assert any("stopped and requeued at step" in line for line in lines)
    assert any(f"stopped at step {stops[0]['step']} on" in line and "checkpointed; requeued" in line
               for line in lines)  # said as it happened


def test_where_slurm_cannot_start_the_slurm_tests_say_why_in_one_line(monkeypatch):
    from bench import slurm as _slurm

    monkeypatch.setattr(_slurm.os, "geteuid", lambda: 1000)
    assert _slurm.unavailable() == "SLURM tests need root (munged runs as the munge user, slurmd as root)"
    monkeypatch.setattr(_slurm.os, "geteuid", lambda: 0)
    monkeypatch.setattr(_slurm.shutil, "which", lambda name: None)
    said = _slurm.unavailable()
    assert "\n" not in said and "slurm-wlm (make slurm, or apt-get install slurm-wlm): no " in said


def test_without_submitit_the_submitit_executor_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    from lab.core import extras

    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None if name == "submitit" else real(name))
    with pytest.raises(SystemExit) as e:
        main(["study", "methods", "--quick", "--executor", "submitit", "--out", str(tmp_path), "--no-render"])
    err = str(e.value.code)  # sys.exit's one line (Python prints it on stderr)
    assert "\n" not in err and err.startswith("python -m lab study: error: ")
    assert "needs submitit, not installed here: pip install 'ranklab-retrieval[cluster]'" in err
    assert not (tmp_path / "methods.json").exists()  # nothing written
    assert capsys.readouterr().out == ""
