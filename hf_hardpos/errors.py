"""The package's user-facing error: a problem with the user's input or options, not a bug.

`hardpos` prints a `UserInputError` as one line, `error: <message>`, and exits with status 2 (the
argparse convention for usage errors); any other exception is a bug and keeps its traceback.
`--debug` (or `HARDPOS_DEBUG=1`) shows the traceback of a `UserInputError` too. Messages name the
file, row, field or option at fault and say what to do.
"""

from __future__ import annotations


class UserInputError(ValueError):
    """Bad input, options or environment the user can fix; printed without a traceback.

    A `ValueError` subclass, so library callers that already catch `ValueError` keep working.
    """

    exit_code = 2
