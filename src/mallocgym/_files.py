"""Atomic file writes: write to a temporary file (or folder) beside the target, then rename; and
the lock that keeps two runs out of one output folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterator, Sequence

__all__ = ["atomic_write", "check_result_folder", "claim_folder", "replace_folder", "lock_path"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file in ``path``'s folder; on success rename it over ``path``.

    On any error the temporary file is removed and ``path`` is left as it was. The file gets
    the permissions a plain ``open`` would give it (``0o666`` minus the umask), not
    ``mkstemp``'s private ``0o600``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ------------------------------------------------------------------------------ result folders
def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def lock_path(out: str | os.PathLike) -> Path:
    """The lock file of the output folder ``out``: beside it, so that replacing the folder keeps it."""
    out = Path(os.path.abspath(out))
    return out.parent / f".{out.name}.lock"


def check_result_folder(out: str | os.PathLike, owned: Sequence[str], *, flag: str = "--out") -> Path:
    """Refuse, before any work, an output folder that cannot take a result set: a file, a folder
    holding files that are not results (they would be replaced), or a place that is not writable."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{flag} {out}: exists and is not a folder")
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in owned)
        if foreign:
            raise ValueError(f"{flag} {out}: holds {foreign[0]!r}, which is not one of its result files "
                             f"({', '.join(owned)}); the results replace the folder as a whole: give a new or "
                             "empty folder")
    parent = Path(os.path.abspath(out)).parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"{flag} {out}: cannot create its folder ({exc.strerror or exc})") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {out}: {parent} is not writable")
    return out


@contextlib.contextmanager
def claim_folder(out: str | os.PathLike, owned: Sequence[str], *, flag: str = "--out") -> Iterator[Path]:
    """Hold ``out`` for one run: checked as :func:`check_result_folder` does, then locked by a file
    beside it (``.NAME.lock`` with the process id); a second run into the same folder while the
    first one lives is refused. A lock left by a dead process is taken over."""
    out = check_result_folder(out, owned, flag=flag)
    lock = lock_path(out)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                pid = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and _pid_alive(pid):
                raise ValueError(f"{flag} {out}: another run (process {pid}) is writing into this folder; wait for "
                                 f"it, or give another {flag} (the lock is {lock})") from None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)  # left by a run that died
            continue
        except OSError as exc:
            raise ValueError(f"{flag} {out}: cannot write there ({exc.strerror or exc})") from None
        with os.fdopen(fd, "w") as handle:
            handle.write(f"{os.getpid()}\n")
        break
    else:
        raise ValueError(f"{flag} {out}: cannot take the lock {lock}")
    try:
        yield out
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)


def replace_folder(out: str | os.PathLike, files: dict[str, bytes]) -> Path:
    """Write ``files`` (name -> bytes) as the whole content of folder ``out``, as one set: into a
    temporary folder beside it, then renamed into place (the old folder, stale files included,
    goes). On an error (disk full) ``out`` is left as it was."""
    out = Path(out)
    parent = Path(os.path.abspath(out)).parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent))
    old = None
    try:
        for name, data in files.items():
            with open(tmp / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp / name, 0o666 & ~_umask())
        os.chmod(tmp, 0o777 & ~_umask())
        if out.is_dir():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=parent))
            os.rmdir(old)
            os.rename(out, old)
        try:
            os.rename(tmp, out)
        except BaseException:
            if old is not None:
                os.rename(old, out)
                old = None
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out
