"""Execute one student's notebook, inside the sandbox: the only step of an nbgrader autograde that runs their code.

    python -I -m lab.grading.run_notebook NOTEBOOK.ipynb --output-fd FD [--cell-timeout 120]

Started by :mod:`lab.grading.autograde` in a bubblewrap sandbox (:func:`lab.grading.sandbox.bwrap_folder_command`)
whose one writable folder is a scratch copy of this student's hand-in: the notebook the trusted side prepared
(outputs cleared, graded cells restored, hidden tests removed) and their modules. Every cell runs, errors
included, in one kernel, as ``nbgrader autograde`` runs it (``NBGRADER_EXECUTION=autograde``). The executed
notebook is written to the pipe FD (no host folder is writable here), whose other end the trusted side reads
as untrusted data, bounded: its outputs are shown to the instructor, but nothing in it is a score.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Optional


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lab.grading.run_notebook", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook", type=Path)
    parser.add_argument("--output-fd", type=int, required=True, help="where the executed notebook goes")
    parser.add_argument("--cell-timeout", type=float, default=120, help="seconds a cell may run (default 120)")
    args = parser.parse_args(argv)
    import nbformat
    from nbclient import NotebookClient

    os.environ["NBGRADER_EXECUTION"] = "autograde"  # as nbgrader's Execute sets it: a notebook may read it
    nb = nbformat.read(args.notebook, as_version=4)
    client = NotebookClient(nb, timeout=args.cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, resources={"metadata": {"path": str(args.notebook.parent)}})
    try:
        client.execute()
    finally:  # what ran so far is the student's output, also when the kernel died
        with os.fdopen(args.output_fd, "w", encoding="utf-8") as out:
            out.write(nbformat.writes(nb))


if __name__ == "__main__":
    main()
