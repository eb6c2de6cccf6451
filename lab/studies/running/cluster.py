"""The cluster a study's jobs go to (``--executor submitit``): its parameters, from flags or a small YAML file.

    # cluster.yaml (every key optional)
    backend: auto          # auto (SLURM where sbatch exists, else processes on this machine), slurm, local
    partition: gpu
    gpus_per_task: 1       # default: 1 with --device cuda, else 0; on SLURM --gpus-per-node per array task
    cpus_per_task: 8       # default: --threads
    time: "12:00:00"       # a job's time limit: minutes, H:MM:SS or D-HH:MM:SS (default 24 h)
    array_parallelism: 16  # jobs of the array running at once (default 256, submitit's)
    mem: 64G               # memory per job: a number of GB, or with a unit (M, G, T)
    setup: ["source ~/ranklab/.venv/bin/activate"]   # shell lines each job runs first
    poll_seconds: 10       # how often the driver looks for finished jobs

``python -m lab study NAME --executor submitit --cluster cluster.yaml --partition gpu`` (a flag overrides the
file). A key or value it does not take is one line naming it and what it accepts.
"""
from __future__ import annotations

import dataclasses
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ...core.extras import require

BACKENDS = ("auto", "slurm", "local")


@dataclass(frozen=True)
class ClusterConfig:
    backend: str = "auto"
    partition: Optional[str] = None
    gpus_per_task: Optional[int] = None
    cpus_per_task: Optional[int] = None
    time: Any = 24 * 60  # minutes, or text (H:MM:SS, D-HH:MM:SS); ``minutes`` reads it
    array_parallelism: int = 256
    mem: Any = None  # GB, or text with a unit; ``mem_gb`` reads it
    setup: tuple[str, ...] = ()
    poll_seconds: float = 5.0

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"cluster backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        for name, least in (("gpus_per_task", 0), ("cpus_per_task", 1), ("array_parallelism", 1)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
                raise ValueError(f"cluster {name} must be a whole number >= {least}, got {value!r}")
        if not isinstance(self.poll_seconds, (int, float)) or self.poll_seconds <= 0:
            raise ValueError(f"cluster poll_seconds must be a number > 0, got {self.poll_seconds!r}")
        if isinstance(self.setup, str) or not all(isinstance(line, str) for line in self.setup):
            raise ValueError(f"cluster setup must be a list of shell lines, got {self.setup!r}")
        object.__setattr__(self, "setup", tuple(self.setup))
        minutes(self.time), mem_gb(self.mem)  # checked as the config is built: one line naming the key

    @property
    def minutes(self) -> int:
        """The time limit in minutes."""
        return minutes(self.time)

    @property
    def mem_gb(self) -> Optional[float]:
        return mem_gb(self.mem)

    def resolved_backend(self) -> str:
        """auto: slurm where ``sbatch`` is on the PATH (as submitit's AutoExecutor decides), else local."""
        if self.backend != "auto":
            return self.backend
        return "slurm" if shutil.which("sbatch") else "local"

    def gpus(self, device: Optional[str]) -> int:
        """GPUs per job: as given, else one for a CUDA study (each array task its own GPU), else none."""
        if self.gpus_per_task is not None:
            return self.gpus_per_task
        return 1 if str(device or "").startswith("cuda") else 0


FIELDS = tuple(f.name for f in dataclasses.fields(ClusterConfig))


def minutes(value: Any) -> int:
    """A time limit as SLURM writes one (minutes; MM:SS is not taken; H:MM:SS; D-HH[:MM[:SS]]) in whole minutes."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    text = str(value).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if isinstance(value, str) and m and (m.group(1) or m.group(3)):
        days, hours, mins, secs = (int(g or 0) for g in m.groups())
        total = days * 1440 + hours * 60 + mins + (secs > 0)
        if total > 0:
            return total
    raise ValueError(f"cluster time must be minutes (> 0), H:MM:SS or D-HH:MM:SS, got {value!r}")


def mem_gb(value: Any) -> Optional[float]:
    """Memory per job in GB: a number (GB) or text with a unit: 500M, 64G, 64GB, 1T."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([MGT])B?", str(value).strip(), flags=re.I)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"cluster mem must be a number of GB or a size such as 500M, 64G, 1T, got {value!r}")
    return float(m.group(1)) * {"M": 1 / 1024, "G": 1.0, "T": 1024.0}[m.group(2).upper()]


def load_cluster(path: Optional[Path] = None, **flags: Any) -> ClusterConfig:
    """The cluster of ``path`` (YAML, every key optional) with ``flags`` that are not None over it."""
    values: dict[str, Any] = {}
    if path is not None:
        import yaml

        try:
            values = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError as e:
            raise ValueError(f"--cluster {path}: not YAML ({' '.join(str(e).split())})") from None
        if not isinstance(values, dict):
            raise ValueError(f"--cluster {path}: expected a mapping of keys ({', '.join(FIELDS)}), got "
                             f"{type(values).__name__}")
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            raise ValueError(f"--cluster {path}: unknown key {unknown[0]!r}; accepted keys: {', '.join(FIELDS)}")
    values.update({k: v for k, v in flags.items() if v is not None})
    return ClusterConfig(**values)


def make_executor(cluster: ClusterConfig, folder: Path, device: Optional[str], threads: int) -> Any:
    """submitit's executor for ``cluster``, its jobs' files under ``folder``: one task of ``cpus_per_task``
    (default ``threads``) CPUs and :meth:`ClusterConfig.gpus` GPUs per job."""
    require("python -m lab study --executor submitit")  # submitit: the [cluster] extra, named in one line when missing
    import submitit

    backend = cluster.resolved_backend()
    executor = submitit.AutoExecutor(folder=folder, cluster=backend)
    params: dict[str, Any] = dict(name="ranklab-study", timeout_min=cluster.minutes, tasks_per_node=1, nodes=1,
                                  cpus_per_task=cluster.cpus_per_task or threads, gpus_per_node=cluster.gpus(device))
    if cluster.mem_gb is not None:
        params["mem_gb"] = cluster.mem_gb
    if backend == "slurm":
        params["slurm_array_parallelism"] = cluster.array_parallelism
        if cluster.partition:
            params["slurm_partition"] = cluster.partition
        if cluster.setup:
            params["slurm_setup"] = list(cluster.setup)
    elif cluster.setup:
        params["local_setup"] = list(cluster.setup)
    executor.update_parameters(**params)
    return executor
