"""An output folder written by one run at a time, whose files are always complete or absent.

Why: two `hardpos eval` runs into the same `--output` used to read `metrics.json`, score, and write
it back independently, so the later writer dropped the earlier one's configs (and with different
models filed one model's scores under the other's identity); an interrupted write left half a file.
Here a run holds an exclusive lock on the folder from the moment it reads what is saved there until
its last write, so a second run waits for the first and then merges with what the first saved;
every file is written under a unique temporary name in the same folder and renamed into place
(atomic on POSIX and Windows).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import UserInputError

LOCK_NAME = ".hardpos.lock"
METRICS_FILE = "metrics.json"  # every run folder's summary (evaluation, suite, fine-tuning)

# Folders held, per thread, with a depth count: a caller already holding a folder's lock may take it
# again without waiting for itself; another thread of the same process waits like another process.
_HELD: dict[tuple[str, int], int] = {}


def holder_path(lock_file: str | Path) -> Path:
    """Where the holder of `lock_file` names itself (beside it: the lock file itself is the lock's, and on
    Windows its locked byte cannot be written through another handle)."""
    lock_file = Path(lock_file)
    return lock_file.with_name(lock_file.name + ".holder")


def _refuse_link(path: Path) -> None:
    """A lock or holder file that is a symbolic link is refused: opening it would open the link's
    target, wherever it points (a planted `.hardpos.lock` -> `~/.bashrc`)."""
    if path.is_symlink():
        raise UserInputError(
            f"{path} is a symbolic link (to {os.readlink(path)}); remove it: a lock file is "
            "never opened through a link"
        )


@contextlib.contextmanager
def exclusive(
    lock_file: str | Path, on_busy: Callable[[str], None], poll_seconds: float = 0.5
) -> Iterator[None]:
    """Hold an exclusive `filelock.FileLock` on `lock_file` (flock on POSIX, msvcrt on Windows) for the block.

    When another process (or thread) holds it, `on_busy(holder)` is called once with what the holder wrote
    (pid, host, start time): it raises to refuse, or returns to wait. The operating system releases the
    lock when its holder exits, even killed. The holder removes the lock file and the holder file
    before releasing (a run leaves no lock files behind); a process that waited on the removed file
    finds that the file it locked is no longer the one at `lock_file` and locks again, so two writers
    never hold two files of the same name. A `lock_file` that is a symbolic link is refused with one
    line; the holder file is written by rename and removed by unlink, which replace or remove a
    link, never write through it.
    """
    from filelock import FileLock, Timeout

    lock_file = Path(lock_file)
    holder = holder_path(lock_file)
    _refuse_link(lock_file)
    opened: list[int] = []
    lock = FileLock(str(lock_file), timeout=0, thread_local=False, on_acquired=opened.append)

    def current() -> bool:
        try:
            return os.path.samestat(os.fstat(opened[-1]), os.lstat(lock_file))
        except FileNotFoundError:
            return False

    try:
        try:
            lock.acquire()
        except Timeout:
            try:
                said = "" if holder.is_symlink() else holder.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                said = ""
            on_busy(said or "another process")
            lock.acquire(timeout=-1, poll_interval=poll_seconds)
        while not current():  # the file we waited on was removed by its holder: lock the one there now
            lock.release()
            lock.acquire(timeout=-1, poll_interval=poll_seconds)
    except OSError as err:
        if err.errno == errno.ELOOP:  # a link planted between the check and the open
            _refuse_link(lock_file)
        raise
    try:
        write_text(
            holder, f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"
        )
        yield
    finally:
        try:
            holder.unlink(missing_ok=True)
            lock_file.unlink(missing_ok=True)  # while held: whoever waits on it locks again (above)
        finally:
            lock.release()


@contextlib.contextmanager
def locked(
    folder: str | Path, log: Callable[[str], None] = print, poll_seconds: float = 0.5
) -> Iterator[Path]:
    """Hold `folder`'s lock for the duration of the block, waiting (and saying so) if another run holds it.

    The wait message says whom we wait for (`exclusive`).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    key = (str(folder.resolve()), threading.get_ident())
    if key in _HELD:
        _HELD[key] += 1
        try:
            yield folder
        finally:
            _HELD[key] -= 1
        return
    with exclusive(
        folder / LOCK_NAME,
        lambda holder: log(f"waiting: {folder} is being written by {holder}"),
        poll_seconds,
    ):
        _HELD[key] = 1
        try:
            yield folder
        finally:
            del _HELD[key]


def temporary_path(target: str | Path) -> Path:
    """A unique name beside `target` for a file that is renamed onto it once complete.

    It keeps `target`'s suffix after a `.tmp-<id>` infix that no reader's pattern matches
    (`scores-x.parquet` -> `.scores-x.tmp-<id>.parquet`, hidden and not `scores-*.parquet`).
    """
    target = Path(target)
    return target.with_name(f".{target.stem}.tmp-{uuid.uuid4().hex[:12]}{target.suffix}")


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; rename it onto `target` if the block succeeds, delete it otherwise.

    The rename replaces `target` itself: a symbolic link planted at `target` is replaced by the file,
    its target left untouched (and a dangling link creates nothing). A failed write (a full disk)
    leaves the old `target` as it was, and its OSError names `target`, not the temporary name.
    """
    target = Path(target)
    partial = temporary_path(target)
    try:
        yield partial
        os.replace(partial, target)
    except OSError as err:
        if err.filename in (
            None,
            str(partial),
        ):  # "disk full while writing .x.tmp-..." would not say which file
            err.filename = str(target)
        raise
    finally:
        if partial.exists():
            partial.unlink()


def write_text(target: str | Path, text: str) -> None:
    """Write `text` to `target` atomically."""
    with atomic_path(target) as partial:
        partial.write_text(text, encoding="utf-8")


def write_json(target: str | Path, value, default=None) -> None:
    """Write `value` as indented JSON to `target` atomically."""
    write_text(target, json.dumps(value, indent=2, default=default) + "\n")


def check_output_writable(output_dir: str | Path) -> None:
    """Fail before any scoring if results could not be saved (the work would be lost)."""
    output_dir = Path(output_dir)
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
        write_text(output_dir / ".hardpos-write-test", "ok")  # a unique temporary name, renamed
        (output_dir / ".hardpos-write-test").unlink(missing_ok=True)  # another run may have removed it
    except OSError as err:
        raise UserInputError(f"--output {output_dir} is not writable ({err.strerror or err})") from err


def refuse_links(folder: str | Path, option: str) -> None:
    """Refuse (one line) a folder holding a symbolic link anywhere below it, before anything is written.

    Why: writers we do not own (the Trainer's `trainer_state.json`, checkpoints and model card) open
    their files by name, so a link planted at one of those names (`README.md` -> `~/.bashrc`) would be
    written through. Such a folder is refused as a whole rather than guessing which names a writer uses.
    """
    root = Path(folder)
    if root.is_symlink():
        raise UserInputError(
            f"{option} {root} is a symbolic link (to {os.readlink(root)}); give the real folder"
        )
    for parent, dirs, files in os.walk(root):  # does not follow links into folders
        for name in (*dirs, *files):
            path = Path(parent) / name
            if path.is_symlink():
                raise UserInputError(
                    f"{option} {root} holds a symbolic link {path} (to {os.readlink(path)}), which "
                    "a save would write through; remove it or choose another folder"
                )
