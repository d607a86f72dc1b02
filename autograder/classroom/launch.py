"""A sandboxed kernelspec's launcher: ``python -m autograder.classroom.launch SPEC -- CMD``.

jupyter_client starts it (outside any sandbox) in the notebook's folder with the connection file
in the runtime folder; it execs ``prlimit ... bwrap ... [setpriv ...] CMD`` so that the kernel
sees only the files of that folder (read-only, notebooks excluded: the folder nbgrader executes
in holds the notebook with its hidden tests restored), its runtime folder (the IPC sockets) and
the system. Plain ``nbgrader autograde`` can use it too: see :func:`write_kernelspec`.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from autograder.classroom.isolation import (
    Isolation,
    Limits,
    bwrap_argv,
    kernel_env,
    prlimit_argv,
)

KERNEL_NAME = "mha-sandbox"
RUNTIME_MARKER = ".mha-kernel-runtime"


def prepare_runtime(folder: Path) -> Path:
    """A private folder for one kernel at a time: its connection file and IPC sockets."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    (folder / RUNTIME_MARKER).touch()
    return folder


def sandbox_settings(c, runtime: Path) -> None:
    """nbgrader/nbclient settings that run kernels through the ``mha-sandbox`` kernelspec.

    The kernel has no network, so it talks over IPC sockets in ``runtime``, which it shares with
    the grader; put ``write_kernelspec``'s folder on JUPYTER_PATH.
    """
    c.Execute.kernel_name = KERNEL_NAME
    c.KernelManager.transport = "ipc"
    c.KernelManager.connection_file = str(runtime / "kernel.json")
    c.KernelManager.ip = str(runtime / "ipc")


def write_kernelspec(
    jupyter_dir: Path,
    iso: Isolation,
    limits: Limits,
    uid: int | None,
    font_cache: Path | None,
) -> Path:
    """A kernelspec ``mha-sandbox`` under ``jupyter_dir/kernels`` (put it on JUPYTER_PATH)."""
    spec_dir = jupyter_dir / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "isolation": iso.to_json(),
        "limits": limits.to_json(),
        "uid": uid,
        "font_cache": str(font_cache) if font_cache else None,
    }
    (spec_dir / "sandbox.json").write_text(json.dumps(spec, indent=1))
    kernel = {
        "argv": [
            sys.executable,
            "-m",
            "autograder.classroom.launch",
            str(spec_dir / "sandbox.json"),
            "--",
            sys.executable,
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
        ],
        "display_name": "Python 3 (sandboxed grading)",
        "language": "python",
        "interrupt_mode": "message",  # signals cannot cross into the sandbox's own session
        "metadata": {"debugger": False},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(kernel, indent=1))
    return spec_dir


def visible_files(folder: Path) -> dict[str, str]:
    """Regular files under ``folder`` the kernel may see: no notebooks, no symbolic links."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.suffix == ".ipynb":
            continue
        if any(part.startswith(".ipynb_checkpoints") for part in path.parts):
            continue
        files[str(path.relative_to(folder))] = str(path)
    return files


def _connection_file(cmd: list[str]) -> Path:
    return Path(cmd[cmd.index("-f") + 1])


def hand_over(paths: list[Path], uid: int) -> None:
    """Give the kernel's uid the runtime folder and connection file it must use."""
    for path in paths:
        os.chown(path, uid, uid)


def launch_argv(spec: dict, cmd: list[str], cwd: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``cmd`` sandboxed in ``cwd``."""
    iso = Isolation.from_json(spec["isolation"])
    limits = Limits(**spec["limits"])
    uid = spec.get("uid")
    connection = _connection_file(cmd)
    runtime = connection.parent
    if not (runtime / RUNTIME_MARKER).is_file():
        raise SystemExit(
            f"refusing to start a sandboxed kernel: {connection} is not in a folder made by "
            "prepare_runtime() (see sandbox_settings())"
        )
    if uid is not None and iso.switches_uid:
        hand_over([runtime, connection], uid)
    env = kernel_env(limits, dict(os.environ))
    argv = prlimit_argv(iso, limits)
    if iso.sandboxed:
        argv += bwrap_argv(
            iso,
            limits,
            rw_dirs=[str(runtime)],
            workdir=str(cwd),
            workdir_files=visible_files(cwd),
            font_cache=spec.get("font_cache"),
            uid=uid,
            env=env,
        )
        return argv + cmd, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    # No sandbox: a private home in the runtime folder, the real folder as working directory.
    home = runtime / "home"
    for sub in ("", "mpl", "ipython"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), MPLCONFIGDIR=str(home / "mpl"), IPYTHONDIR=str(home / "ipython"))
    env["TMPDIR"] = str(home)
    if uid is not None and iso.switches_uid:
        hand_over([home, home / "mpl", home / "ipython", cwd], uid)
        argv += [iso.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    return argv + cmd, env


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    split = args.index("--")
    spec = json.loads(Path(args[0]).read_text())
    command, env = launch_argv(spec, args[split + 1 :], Path.cwd())
    executable = shutil.which(command[0]) or command[0]
    os.execve(executable, command, env)


if __name__ == "__main__":
    main()
