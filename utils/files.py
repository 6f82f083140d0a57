"""Writing a file so that nothing is lost: the whole file or the old one, never half of it.

- `replacing(path)`: a context manager that hands out a scratch path beside `path` (a unique name,
  so two processes never share it); when the block ends without an error the scratch file replaces
  `path` in one step (`os.replace`, atomic on one file system); on an error or a Ctrl-C it is
  deleted and `path` is untouched. A symbolic link at `path` is refused, never written through.
- `write_text_atomically(path, text)` / `write_bytes_atomically(path, data)`: the same for a
  string or bytes.
- `locked(path)`: holds an exclusive lock on `path.lock` (POSIX `flock`) for a read-modify-write,
  so that two runs finishing together do not lose one's update.
- `keep_backup(path)`: copies `path` to `path.bak` (or `.bak1`, `.bak2`, ... when that exists)
  before a tool replaces a file people did not ask it to; returns the copy's path.

Sits at the start of the data flow: imports nothing from `utils`.
"""

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; the course's tools run there one at a time
    fcntl = None


def check_not_a_link(path: Path) -> None:
    """Refuse to write at a symbolic link (it could point anywhere, even outside the folder)."""
    if path.is_symlink():
        raise ValueError(
            f"{path} is a symbolic link (to {os.readlink(path)}): not writing through it; remove the link first"
        )


@contextlib.contextmanager
def replacing(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a scratch path beside `path`; on success it replaces `path` atomically, else it is removed."""
    path = Path(path)
    check_not_a_link(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder: name a file to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(handle)
    scratch = Path(name)
    try:
        yield scratch
        if path.exists():  # keep the old file's permissions (mkstemp makes 0600)
            shutil.copymode(path, scratch)
        else:
            os.chmod(scratch, 0o666 & ~_umask())
        os.replace(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomically(path: str | os.PathLike, data: bytes) -> Path:
    """Write `data` to `path`: the whole of it, or (on any error) the old file untouched."""
    path = Path(path)
    with replacing(path) as scratch, open(scratch, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    return path


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8, newlines as given) to `path` atomically."""
    return write_bytes_atomically(path, text.encode("utf-8"))


@contextlib.contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on `path` + '.lock' while the block runs (other holders wait)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    with open(lock, "a") as file:
        if fcntl is not None:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(file.fileno(), fcntl.LOCK_UN)


def keep_backup(path: str | os.PathLike) -> Path:
    """Copy `path` to the first free name of `path.bak`, `path.bak1`, ... and return it."""
    path = Path(path)
    for number in range(1000):
        backup = path.with_name(f"{path.name}.bak{number or ''}")
        if not backup.exists() and not backup.is_symlink():
            shutil.copy2(path, backup)
            return backup
    raise FileExistsError(f"{path}: 1,000 backups exist already; remove some of {path.name}.bak*")
