"""No write goes through a planted link, a full disk never replaces a file by half of it, and a run leaves
no lock files behind (`output_folder`: atomic writes by rename, the folder lock; `commands._parsers.write_output`;
`output_folder.refuse_links` for the Trainer's own saves)."""

import errno
import os
import pathlib

import pytest

from hf_hardpos import output_folder
from hf_hardpos.cli import main
from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.run import evaluate_model
from hf_hardpos.generation.run_output import lock_path
from tests.support.eval_data import make_eval_set, write_hub_folder


@pytest.fixture(scope="module")
def run(tmp_path_factory, tiny_clip_dir):
    root = tmp_path_factory.mktemp("run")
    hub = write_hub_folder(
        root / "data", {"attributes": make_eval_set(num_images=3, rows_per_image=2, seed=2)}
    )
    evaluate_model(
        str(tiny_clip_dir),
        str(hub),
        ["attributes"],
        output_dir=root / "out",
        progress=False,
        log=lambda m: None,
    )
    return root / "out"


def _victim(tmp_path) -> pathlib.Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    return victim


def test_report_replaces_a_link_at_report_html_and_never_writes_its_target(run, tmp_path, capsys):
    victim = _victim(tmp_path)
    (run / "report.html").unlink(missing_ok=True)
    (run / "report.html").symlink_to(victim)
    assert main(["report", str(run)]) == 0
    assert victim.read_text() == "precious"
    assert not (run / "report.html").is_symlink() and "<html" in (run / "report.html").read_text().lower()
    (run / "report.html").unlink()
    (run / "report.html").symlink_to(tmp_path / "created-through-link.html")  # dangling
    assert main(["report", str(run)]) == 0
    assert not (tmp_path / "created-through-link.html").exists()


def test_a_full_disk_leaves_the_old_output_whole_and_names_it(run, tmp_path, monkeypatch, capsys):
    target = tmp_path / "page.html"
    target.write_text("old page")
    real = pathlib.Path.write_text

    def full(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2], *args, **kwargs)  # half written, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", full)
    assert main(["report", str(run), "--output", str(target)]) == 2
    monkeypatch.undo()
    assert target.read_text() == "old page"
    assert str(target) in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name] == []
    with pytest.raises(OSError) as err:  # any atomic write names its target, not the temporary file
        with output_folder.atomic_path(tmp_path / "x.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert err.value.filename == str(tmp_path / "x.json")


def test_the_lock_refuses_a_link_and_writes_no_holder_through_one(tmp_path, tiny_clip_dir):
    victim = _victim(tmp_path)
    hub = write_hub_folder(tmp_path / "data", {"attributes": make_eval_set(num_images=2, rows_per_image=1)})
    out = tmp_path / "out"
    out.mkdir()
    (out / output_folder.LOCK_NAME).symlink_to(victim)
    with pytest.raises(UserInputError, match="symbolic link") as err:
        evaluate_model(
            str(tiny_clip_dir), str(hub), ["attributes"], output_dir=out, progress=False, log=lambda m: None
        )
    assert "\n" not in str(err.value) and victim.read_text() == "precious"
    (out / output_folder.LOCK_NAME).unlink()
    holder = output_folder.holder_path(out / output_folder.LOCK_NAME)
    holder.symlink_to(victim)
    evaluate_model(
        str(tiny_clip_dir), str(hub), ["attributes"], output_dir=out, progress=False, log=lambda m: None
    )
    assert victim.read_text() == "precious"
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".hardpos")) == []  # no lock files left


def test_generate_output_lock_holder_link_is_replaced_not_written(tmp_path):
    victim = _victim(tmp_path)
    output = tmp_path / "out.jsonl"
    holder = output_folder.holder_path(lock_path(output))
    holder.symlink_to(victim)
    with output_folder.exclusive(lock_path(output), on_busy=lambda h: None):
        assert not holder.is_symlink() and holder.read_text().startswith(f"pid {os.getpid()} ")
    assert victim.read_text() == "precious"
    assert not lock_path(output).exists() and not holder.exists()


def test_a_waiter_on_a_removed_lock_file_locks_the_current_one(tmp_path):
    """The holder removes the lock file while held; whoever then locks must hold the file at that name."""
    import threading

    lock = tmp_path / ".hardpos.lock"
    inside = threading.Event()
    order = []

    def second():
        inside.wait()
        with output_folder.exclusive(lock, on_busy=lambda h: order.append("waited")):
            order.append(("second", os.stat(lock).st_ino))

    thread = threading.Thread(target=second)
    with output_folder.exclusive(lock, on_busy=lambda h: None):
        thread.start()
        inside.set()
        thread.join(0.5)
        assert thread.is_alive()  # it waits for us
    thread.join(10)
    assert order[0] == "waited" and order[1][0] == "second" and not lock.exists()


def test_train_refuses_an_output_dir_holding_links_before_writing(tmp_path):
    from hf_hardpos.commands.train import finetune

    victim = _victim(tmp_path)
    out = tmp_path / "ft"
    out.mkdir()
    (out / "README.md").symlink_to(victim)
    (out / "trainer_state.json").symlink_to(tmp_path / "dangling.json")
    assert finetune(["--output_dir", str(out), "--max_steps", "1", "--synthetic_train_size", "8"]) == 2
    assert victim.read_text() == "precious" and not (tmp_path / "dangling.json").exists()
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "trainer_state.json"]
