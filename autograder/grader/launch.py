"""A sandboxed kernelspec's launcher: ``python -m autograder.grader.launch SPEC -- CMD``.

jupyter_client starts it (outside any sandbox) in the notebook's folder with the connection file
in the kernel's runtime folder (:func:`autograder.grader.sockets.fresh_runtime`: made by the
grader for this kernel alone); it execs ``prlimit ... bwrap ... [setpriv ...] CMD`` so that the
kernel sees only the files of that folder (read-only, notebooks excluded: the folder nbgrader
executes in holds the notebook with its hidden tests restored), its runtime folder (read-only,
but for the ``sockets/`` folder its ZeroMQ sockets are bound in) and the system. The kernel
manager must be :class:`~autograder.grader.kernels.SandboxKernelManager`, which makes that
folder (:func:`sandbox_settings` sets it).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

from autograder.grader.isolation import Isolation, Limits, bwrap_argv, kernel_env, prlimit_argv
from autograder.grader.sockets import MARKER, SOCKETS, private_home

KERNEL_NAME = "mha-sandbox"


def prepare_runtime(folder: Path) -> Path:
    """The grader's folder that holds each kernel's own runtime folder, one at a time."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o711)  # kernels may pass through to their own folder, not list or write
    return folder


def sandbox_settings(c, runtime: Path, uid: int | None = None) -> None:
    """nbgrader/nbclient settings that run kernels through the ``mha-sandbox`` kernelspec.

    The kernel has no network, so it talks over IPC sockets in a fresh folder under ``runtime``
    for each kernel (``uid``: the kernels'); put ``write_kernelspec``'s folder on JUPYTER_PATH.
    """
    c.Execute.kernel_name = KERNEL_NAME
    c.Execute.kernel_manager_class = "autograder.grader.kernels.SandboxKernelManager"
    c.SandboxKernelManager.runtime_base = str(runtime)
    c.SandboxKernelManager.kernel_uid = -1 if uid is None else uid


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
            "autograder.grader.launch",
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


def hand_over(path: Path, uid: int, folder: bool = False) -> None:
    """Give the kernel's uid ``path``, never through a link (``folder``: it is a folder)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if folder else 0)
    fd = os.open(path, flags)
    try:
        os.fchown(fd, uid, uid)
    finally:
        os.close(fd)


def launch_argv(spec: dict, cmd: list[str], cwd: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment that run ``cmd`` sandboxed in ``cwd``."""
    iso = Isolation.from_json(spec["isolation"])
    limits = Limits(**spec["limits"])
    uid = spec.get("uid")
    connection = _connection_file(cmd)
    runtime = connection.parent
    try:
        made = stat.S_ISREG(os.lstat(runtime / MARKER).st_mode)
    except OSError:
        made = False
    if not made:
        raise SystemExit(
            f"refusing to start a sandboxed kernel: {connection} is not in a folder made by "
            "sockets.fresh_runtime() (see sandbox_settings())"
        )
    switch = uid is not None and iso.switches_uid
    if switch:
        hand_over(connection, uid)  # to read it; the folder stays the grader's
    env = kernel_env(limits, dict(os.environ))
    argv = prlimit_argv(iso, limits)
    if iso.sandboxed:
        argv += bwrap_argv(
            iso,
            limits,
            ro_dirs=(str(runtime),),
            rw_dirs=(str(runtime / SOCKETS),),
            workdir=str(cwd),
            workdir_files=visible_files(cwd),
            font_cache=spec.get("font_cache"),
            uid=uid,
            env=env,
        )
        return argv + cmd, {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    # No sandbox: a private home in the runtime folder, the real folder as working directory.
    home = private_home(runtime, uid if switch else None)
    env.update(HOME=str(home), MPLCONFIGDIR=str(home / "mpl"), IPYTHONDIR=str(home / "ipython"))
    env["TMPDIR"] = str(home)
    if switch:
        hand_over(cwd, uid, folder=True)
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
