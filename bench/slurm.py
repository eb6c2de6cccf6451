"""A real one-node SLURM cluster for the tests and bench.cluster_overhead, started as root from Debian's slurm-wlm
(``make slurm`` installs it), every file of it in a temporary folder: munged on its own key and socket, slurmctld
and slurmd on free ports, ``SLURM_CONF`` pointing at its slurm.conf. :class:`Slurm` starts it, waits until
``sinfo`` shows the node idle, and stops the three daemons by the pids in their pid files. Where it cannot start
(not root, no slurm-wlm), :func:`unavailable` says why in one line. shared/notes/environment.md has the recipe
this follows. It lives in bench/: tests import bench, never the reverse (tests/test_suite_shape.py).
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
REQUEUE_SECONDS = 2.0  # a requeued job waits this long before release_requeued starts it (see there)
REQUIRE_ENV = "RANKLAB_REQUIRE_SLURM"  # CI: the SLURM tests must run, not skip (.ci/run sets it)


def unavailable() -> Optional[str]:
    """Why a cluster cannot be started here (one line), or None."""
    if os.geteuid() != 0:
        return "SLURM tests need root (munged runs as the munge user, slurmd as root)"
    missing = [d for d in DAEMONS if not os.access(d, os.X_OK)] + \
        [c for c in ("runuser", "sbatch", "sinfo", "scontrol", "squeue", "scancel", "munge") if not shutil.which(c)]
    if missing:
        return f"SLURM tests need Debian's slurm-wlm (make slurm, or apt-get install slurm-wlm): no {missing[0]}"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "SLURM tests need the munge user (apt-get install slurm-wlm creates it)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONF = """ClusterName=ranklab-test
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
NodeName={host} CPUs={cpus} RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


class Slurm:
    """``with Slurm() as cluster:`` a running cluster; ``cluster.env`` the variables its clients need."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="ranklab-slurm-"))
        self.pids: dict[str, int] = {}
        self.conf = self.root / "slurm.conf"
        self.env = {"SLURM_CONF": str(self.conf)}
        self.started = 0.0
        self._held: dict[str, float] = {}  # a requeued job's id -> when release_requeued first saw it held

    def __enter__(self) -> "Slurm":
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def run(self, *command: str, check: bool = True) -> str:
        done = subprocess.run(command, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=60)
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout

    def _start(self) -> None:
        start = time.perf_counter()
        root, munge = self.root, pwd.getpwnam("munge")
        root.chmod(0o755)  # munged (the munge user) reaches its socket through it
        for name, mode in (("key", 0o700), ("munge", 0o755)):
            (root / name).mkdir()
            os.chown(root / name, munge.pw_uid, munge.pw_gid)
            (root / name).chmod(mode)
        key = root / "key" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chown(key, munge.pw_uid, munge.pw_gid)
        key.chmod(0o400)
        subprocess.run(["runuser", "-u", "munge", "--", DAEMONS[0], f"--key-file={key}",
                        f"--socket={root}/munge/munge.socket", f"--pid-file={root}/munge/munged.pid",
                        f"--log-file={root}/munge/munged.log", f"--seed-file={root}/key/munged.seed"],
                       check=True, capture_output=True, timeout=60)
        self.pids["munged"] = self._pid(root / "munge" / "munged.pid")
        for name in ("state", "spool", "log"):
            (root / name).mkdir()
        host = socket.gethostname().split(".")[0]
        self.conf.write_text(CONF.format(host=host, root=root, ctld_port=_free_port(), d_port=_free_port(),
                                         cpus=os.cpu_count() or 1))
        for daemon, pid_file in ((DAEMONS[1], "slurmctld.pid"), (DAEMONS[2], "slurmd.pid")):
            subprocess.run([daemon, "-f", str(self.conf)], check=True, capture_output=True, timeout=60,
                           env={**os.environ, **self.env})
            self.pids[Path(daemon).name] = self._pid(root / pid_file)
        deadline = time.monotonic() + 60
        while "idle" not in self.run("sinfo", "-h", "-o", "%T", check=False):
            if time.monotonic() > deadline:
                raise RuntimeError(f"slurmd's node never came up idle: {self.run('sinfo', check=False).strip()}; "
                                   f"see {root}/log")
            time.sleep(0.2)
        self.started = time.perf_counter() - start

    @staticmethod
    def _pid(path: Path) -> int:
        deadline = time.monotonic() + 30
        while not (path.is_file() and path.read_text().strip()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"no pid file {path}: the daemon did not start")
            time.sleep(0.05)
        return int(path.read_text().split()[0])

    def release_requeued(self) -> list[str]:
        """Start the jobs a requeue left waiting (SLURM holds a requeued job ~2 minutes, reason BeginTime) once
        they have waited ``REQUEUE_SECONDS``: only a wait is cut short, as an admin would. Released within the
        second of its kill, a job's new launch met its old, revoked credential ("Job credential revoked": SLURM
        compares whole seconds) and the job ended without starting. Returns the ids released."""
        ids, now = [], time.monotonic()
        for line in self.run("squeue", "-h", "-o", "%i %T %r", check=False).splitlines():
            job, state, reason = (line.split() + ["", "", ""])[:3]
            if state == "PENDING" and reason == "BeginTime" and \
                    now - self._held.setdefault(job, now) >= REQUEUE_SECONDS:
                self.run("scontrol", "update", f"jobid={job}", "StartTime=now", check=False)
                self._held.pop(job)
                ids.append(job)
        return ids

    def stop(self) -> None:
        """This cluster's jobs cancelled (their slurmstepd gone with them), then SIGTERM to slurmd, slurmctld and
        munged (by the pids their pid files gave), SIGKILL after 30 s."""
        if "slurmctld" in self.pids:
            self.run("scancel", "--user", "root", check=False)
            deadline = time.monotonic() + 30
            while self.run("squeue", "-h", check=False).strip() and time.monotonic() < deadline:
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids.pop(name, None)
            if pid is None:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            deadline = time.monotonic() + 30
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if Path(f"/proc/{pid}").exists():
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)
