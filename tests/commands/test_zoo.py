"""`hardpos zoo` (commands/zoo.py): its prose fits the terminal."""

from hf_hardpos import cli


def test_zoo_prose_is_wrapped_to_the_terminal(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "72")
    assert cli.main(["zoo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    prose = [line for line in lines if line and not line.startswith("-" * 10) and "  " not in line.strip()]
    assert prose and all(len(line) <= 72 for line in prose)
    assert any(line.startswith("- ") for line in prose)  # the notes, each a wrapped paragraph
