"""The gate every input file passes first: a regular file, of bounded size, readable.

Opening a FIFO blocks until someone writes to it (``predict --sizes-file FIFO`` hung for
ever); a character device such as ``/dev/zero`` or ``/dev/urandom`` never ends. Neither is
a model, a sizes list, a campaign or a tool output, so they are refused up front, from
``stat`` alone (which does not block), with one paragraph naming the file. Readers that
take a whole file into memory give a size limit, so a wrong multi-gigabyte file is refused
instead of exhausting memory.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kit.core.atomicwrite import output_error
from kit.core.errors import UserError

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """Words for a file type that is not a regular file."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def refuse_special(path: str | Path, what: str = "file",
                   error: type[UserError] = UserError) -> None:
    """Refuse an existing FIFO, device or socket at ``path`` (``stat`` only, never blocks);
    a missing file or a folder is left to the caller's own message."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise error(f"the {what} is {kind_of(mode)}, not a regular file", where=str(path),
                    hint=f"give a regular {what}")


def require_regular(path: str | Path, what: str = "file",
                    error: type[UserError] = UserError) -> os.stat_result:
    """``stat`` of ``path`` (links followed) if it is a regular file; else ``error``."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise error(f"no such {what}", where=str(path), hint="check the path") from None
    except OSError as exc:
        raise error(output_error(exc, path, f"cannot read the {what}").message,
                    where=str(path), hint="check the path and its permissions") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(f"the {what} is {kind_of(st.st_mode)}, not a regular file",
                    where=str(path), hint=f"give a regular {what}")
    return st


def read_bytes(path: str | Path, what: str = "file", *, limit: int,
               error: type[UserError] = UserError) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ``error`` otherwise."""
    path = Path(path)
    st = require_regular(path, what, error)
    if st.st_size > limit:
        raise error(f"the {what} is {st.st_size:,} bytes; at most {limit:,} are read",
                    where=str(path), hint=f"check that this is the right {what}")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise error(output_error(exc, path, f"cannot read the {what}").message,
                    where=str(path), hint="check the path and its permissions") from None
    if len(data) > limit:  # grew since stat
        raise error(f"the {what} is more than {limit:,} bytes; at most that is read",
                    where=str(path), hint=f"check that this is the right {what}")
    return data


def read_regular(path: str | Path) -> bytes:
    """The bytes of ``path`` if it is a regular file, for a reader that falls back quietly
    (a cache, say): anything else raises :class:`OSError`, missing files as usual. Opened
    with ``O_NONBLOCK`` and checked with ``fstat``, so a FIFO put in its place is never waited
    on, even if it appears between a ``stat`` and the ``open``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"{path} is {kind_of(mode)}, not a regular file")
        return fh.read()
