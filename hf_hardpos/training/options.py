"""String options of training and their choices, each choice with what it does: one message wherever
training checks one (the arguments, the collator, the objective, the loss terms), so a typo fails at
construction naming the option, its choices and the value given; and one `--help` text per option,
written from the same descriptions."""

from __future__ import annotations

from collections.abc import Mapping


def one_of(name: str, value: str, choices: Mapping[str, str], error: type[Exception] = ValueError) -> str:
    """`value` when it is one of `choices`; otherwise `error` (ValueError, or UserInputError for user input)."""
    if value not in choices:
        raise error(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def describe_choices(what: str, choices: Mapping[str, str]) -> str:
    """`what: 'a' (its description) or 'b' (...)`: the help text of an option with these choices."""
    return f"{what}: " + " or ".join(f"'{name}' ({meaning})" for name, meaning in choices.items()) + "."
