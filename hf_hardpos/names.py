"""Names from untrusted inputs (suite entries, models, dataset configs) as file and folder names.

Why: a name becomes a path (`OUT/<model>/`, `OUT/<suite entry>/`, `scores-<config>.parquet`,
`data/<config>/`), and names come from YAML files, command lines, dataset cards and tables anyone
may have written. A name must never leave the folder it is put in (`..`, `/`), be that folder (`.`,
empty), or land on another name's folder (`x/y` and `x y`; `Rep` and `rep` on macOS and Windows).
"""

from __future__ import annotations

import re

from .errors import UserInputError

UNSAFE_CHARACTERS = re.compile(r"[^A-Za-z0-9_.=-]+")
# A dataset config's name: it becomes a file name (`scores-<config>.parquet`, `data/<config>/`), so only
# letters, digits and `_.=+-`, starting with a letter or digit (never `..`, a separator or a blank).
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.=+-]{0,99}")


def folder_name(name: str, what: str) -> str:
    """`name` (a suite entry's, a model's) as one folder name inside an output folder: every run of
    characters outside `[A-Za-z0-9_.=-]` becomes `_` (no separators, so never a path), and a name left
    empty or all dots (`.`, `..`) is refused: it would name the output folder itself or its parent.
    `what` says what the name is, for the one-line error."""
    slug = UNSAFE_CHARACTERS.sub("_", str(name))
    if not slug.strip("."):
        raise UserInputError(f"{what} {name!r} cannot name a folder (empty or only dots); rename it")
    check_output_name(slug, name, what)
    return slug


# Files an output folder holds beside the per-name folders (`output_folder`): no name may become one of them.
RESERVED_NAMES = frozenset({"metrics.json", ".hardpos.lock", ".hardpos.lock.holder"})
MAX_NAME_LENGTH = 200  # file systems allow 255 bytes; a name is also given suffixes (`-2`, `.tmp-<id>`)


def check_output_name(folder: str, name: str, what: str) -> None:
    """Refuse, up front, a folder name that is one of an output folder's own files, hidden (our lock and
    temporary files start with a dot), read as an option by shell tools (`-rf`), or too long to create."""
    if folder.casefold() in RESERVED_NAMES:
        raise UserInputError(f"{what} {name!r} would name the output folder's own {folder}; rename it")
    if folder.startswith((".", "-")):
        raise UserInputError(
            f"{what} {name!r} would name a folder starting with {folder[0]!r} (hidden, or read as an "
            "option by shell tools); rename it"
        )
    if len(folder.encode()) > MAX_NAME_LENGTH:
        raise UserInputError(
            f"{what} {name[:40]!r}... is {len(folder.encode())} bytes long as a folder name (at most "
            f"{MAX_NAME_LENGTH}); shorten it"
        )


def require_plain_name(value, what: str) -> str:
    """`value` if it is a plain name (`PLAIN_NAME`), else a one-line error naming `what` (file and field)."""
    if not isinstance(value, str) or not PLAIN_NAME.fullmatch(value):
        raise UserInputError(
            f"{what}: {value!r} is not a plain name (letters, digits and _.=+-, starting with a letter or digit)"
        )
    return value


def unique_folder_names(names: dict[str, str], what: str) -> None:
    """Refuse two keys whose folder names (`names`: key -> folder name) are equal, ignoring case (equal on
    the case-insensitive file systems of macOS and Windows): the second would overwrite the first."""
    seen: dict[str, str] = {}
    for key, folder in names.items():
        other = seen.setdefault(folder.casefold(), key)
        if other != key:
            raise UserInputError(
                f"{what} {other!r} and {key!r} would share the folder {folder!r}; rename one"
            )
