"""The package's user-facing error: a problem with the user's input or options, not a bug.

`hardpos` prints a `UserInputError` as one line, `error: <message>`, and exits with status 2 (the
argparse convention for usage errors); any other exception is a bug and keeps its traceback.
`--debug` (or `HARDPOS_DEBUG=1`) shows the traceback of a `UserInputError` too. Messages name the
file, row, field or option at fault and say what to do.
"""

from __future__ import annotations


def first_line(err: BaseException) -> str:
    """An exception's message cut to its first line (its type's name when it has none): what a one-line
    error quotes of a library's multi-line message."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


class UserInputError(ValueError):
    """Bad input, options or environment the user can fix; printed without a traceback.

    A `ValueError` subclass, so library callers that already catch `ValueError` keep working.
    """

    exit_code = 2


def user_error_from(err: BaseException, args=None) -> UserInputError | None:
    """The `UserInputError` an environment failure amounts to, or None for a bug (which keeps its traceback).

    A full disk, a read-only or unwritable folder (an `--output`, `--cache-dir` or `HF_HOME`): the
    user fixes these by freeing space or pointing the path elsewhere, so they get one line naming
    the file, not a traceback.
    """
    import errno

    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return UserInputError(
            f"disk full while writing {err.filename or 'a file'}: free space, or choose another "
            "--output / --cache-dir / HF_HOME"
        )
    if isinstance(err, OSError) and err.errno == errno.EROFS:
        return UserInputError(
            f"cannot write {err.filename or 'a file'} (read-only file system): choose a writable "
            "--output / --cache-dir, or set HF_HOME to a writable folder"
        )
    if isinstance(err, OSError) and err.errno in (errno.EACCES, errno.EPERM):
        return UserInputError(
            f"cannot access {err.filename or 'a file'} ({err.strerror}): check its permissions, or "
            "choose another --output / --cache-dir / HF_HOME"
        )
    return None


def warn(message: str) -> None:
    """One line on stderr, `hardpos: warning: ...`: something the run got around (a cache it could not
    write or had to reject part of) and carries on from, with its result unchanged."""
    import sys

    print(f"hardpos: warning: {message}", file=sys.stderr)
