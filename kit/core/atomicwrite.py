"""The one way the kit writes an output file: whole or not at all, and errors in words.

Every writer of a user-visible file (model JSON, report page and figures, SimGrid
configuration, campaign plan, diff/compare/loggp results) goes through :func:`replacing`
(or :func:`write_text` / :func:`write_bytes` on top of it). Why one helper:

* a reader never sees half a file: the bytes go to a temp file in the target's folder,
  which is renamed over the target only once complete (a crash leaves the old file);
* a full disk, a permission problem or a name too long for the file system is the user's
  situation, not a bug: it becomes an :class:`OutputError` (one paragraph naming the file,
  exit 1) instead of a traceback, and the temp file is removed;
* a read-only target (no write bit: someone protected it) is never replaced, even by root
  and even though a rename into a writable folder would succeed;
* a replaced file keeps its permissions; a new one gets the umask's (not mkstemp's 0600).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kit.core.errors import UserError

#: Suffix of every temp file this module makes (readers and cleaners recognise it).
TMP_SUFFIX = ".tmp"


class OutputError(UserError):
    """An output file or folder cannot be written (disk full, permission, read-only, name
    too long). Exit 1: the input was fine, the place to write it is not."""

    exit_code = 1


#: errno -> (what happened, what to do). Anything else is reported with its strerror.
_ERRNOS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on the device",
                   "free some space or write to another file system, then run the same "
                   "command again"),
    errno.EDQUOT: ("the disk quota is exceeded",
                   "free some space within your quota and run the same command again"),
    errno.EROFS: ("the file system is read-only", "write to a folder on a writable file system"),
    errno.EACCES: ("permission denied", "check the folder's owner and permissions, or write "
                   "somewhere you can (another -o/--output)"),
    errno.EPERM: ("operation not permitted", "check the folder's owner and permissions, or "
                  "write somewhere you can (another -o/--output)"),
    errno.ENAMETOOLONG: ("the file name is too long for the file system",
                         "use a shorter name (at most 255 bytes per path component)"),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", "check the path"),
    errno.EISDIR: ("it is a folder", "give a file name, or another path"),
    errno.ENOENT: ("a folder on the way does not exist", "check the path"),
    errno.EEXIST: ("something is in the way", "remove it or choose another path"),
    errno.ELOOP: ("too many symbolic links on the way", "check the path's symbolic links"),
    errno.EFBIG: ("the file is too large for the file system", "write to another file system"),
}
#: What an OSError is called inside Polars' and Rust's messages: "... (os error 28)".
_OS_ERROR_IN_TEXT = re.compile(r"os error (\d+)")


def error_code(exc: BaseException) -> int | None:
    """The errno of an OSError, or of a library error whose text ends in ``(os error N)``
    (Polars reports a failed write so), else None."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno
    found = _OS_ERROR_IN_TEXT.search(str(exc))  # Polars raises OSError("... (os error 28)")
    return int(found.group(1)) if found else None


def output_error(exc: BaseException, path: str | Path, what: str = "cannot write") -> OutputError:
    """The one-paragraph error for a failed write at ``path``."""
    code = error_code(exc)
    if code in _ERRNOS:
        text, hint = _ERRNOS[code]
        name = errno.errorcode.get(code, str(code))
        return OutputError(f"{what}: {text} ({name})", where=str(path), hint=hint)
    detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return OutputError(f"{what}: {detail}", where=str(path),
                       hint="check the path and the folder's permissions")


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a problem of the place written to (full, denied, too long...)."""
    return error_code(exc) in _ERRNOS


def refuse_read_only(path: Path) -> None:
    """An existing file without any write bit is protected on purpose: never replace it."""
    try:
        st = path.stat()
    except OSError:
        return
    if stat.S_ISREG(st.st_mode) and not st.st_mode & 0o222:
        raise OutputError("the file is read-only, so it is not rewritten", where=str(path),
                          hint=f"make it writable ('chmod u+w {path}') or write to another "
                               "file")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_name(path: Path, suffix: str) -> Path:
    # Short and bounded: a target name of 250 bytes must not fail only because of the
    # temp name's extra characters. ``suffix`` keeps an extension tools look at (.png).
    stem = path.name[:40]
    # os.urandom, not secrets: the latter imports random and hashlib (a model read avoids them)
    return path.with_name(f".{stem}.{os.urandom(4).hex()}{TMP_SUFFIX}{suffix}")


def make_dirs(folder: str | Path) -> Path:
    """``mkdir -p`` with the errors in words."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise OutputError("exists and is not a folder", where=str(folder),
                          hint="give a folder path, or remove the file in the way") from exc
    except OSError as exc:
        raise output_error(exc, folder, "cannot create the folder") from None
    return folder


@contextlib.contextmanager
def replacing(path: str | Path, *, mode: int | None = None, suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside ``path``; when the block ends without error it becomes
    ``path`` (renamed over it). On any error the temp file is removed; OSErrors (and
    library errors carrying an ``os error N``) of the write become :class:`OutputError`.

    ``mode``: the new file's permission bits (default: the replaced file's, else the
    umask's). ``suffix``: appended to the temp name (a writer choosing its format by
    extension, such as matplotlib's ``savefig``, needs it).
    """
    path = Path(path)
    refuse_read_only(path)
    make_dirs(path.parent)
    tmp = _temp_name(path, suffix)
    try:
        try:
            keep = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            keep = 0o666 & ~_umask()
        yield tmp
        if not tmp.exists():  # the writer wrote nothing: still an (empty) output
            tmp.touch()
        os.chmod(tmp, keep if mode is None else mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OutputError) or not is_storage_error(exc):
            raise
        raise output_error(exc, path) from None


def write_bytes(path: str | Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`replacing`)."""
    path = Path(path)
    # O_EXCL: the temp name is ours alone (never a file or link someone put there)
    with replacing(path, mode=mode) as tmp, os.fdopen(
            os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fh:
        fh.write(data)
    return path


def write_text(path: str | Path, text: str, *, mode: int | None = None,
               encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`replacing`)."""
    return write_bytes(path, text.encode(encoding), mode=mode)


def save_png(fig: Any, path: Path, dpi: int) -> Path:
    """Write the matplotlib figure ``fig`` as the PNG ``path`` (through :func:`replacing`:
    a reader never sees half a picture, a full disk is an :class:`OutputError`) and close it
    whatever happens, so that a report of many figures does not keep them all in memory."""
    import matplotlib.pyplot as plt

    try:
        with replacing(path, suffix=".png") as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        plt.close(fig)
    return path
