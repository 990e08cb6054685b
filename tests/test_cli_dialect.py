"""One command-line dialect: every folder a command writes is `--output-dir`, flags are dashed, and the
underscore spellings (and eval's older `--output`) still parse to the same option."""

from __future__ import annotations

import pytest

from hf_hardpos.cli import build_parser
from hf_hardpos.training.finetune_args import argument_parser


@pytest.mark.parametrize("spelling", ["--output-dir", "--output_dir"])
def test_build_demo_convert_take_both_spellings(spelling):
    build = build_parser(["build"]).parse_args(
        ["build", "valse", spelling, "out", "--images_dir", "img", "--upstream-dir", "up"])  # fmt: skip
    assert (str(build.output_dir), str(build.images_dir), str(build.upstream_dir)) == ("out", "img", "up")
    demo, _ = build_parser(["demo"]).parse_known_args(["demo", spelling, "d"])
    assert str(demo.output_dir) == "d"
    convert, _ = build_parser(["convert"]).parse_known_args(["convert", "x.pt", spelling, "c"])
    assert str(convert.output_dir) == "c"


@pytest.mark.parametrize("spelling", ["--output-dir", "--output_dir", "--output"])
def test_eval_writes_into_output_dir(spelling):
    args = build_parser(["eval"]).parse_args(["eval", "--dataset", "d", spelling, "o"])
    assert args.output == "o"


def test_train_takes_the_other_commands_names():
    parser = argument_parser()
    for argv in (["--model", "m", "--output-dir", "o", "--lora-rank", "4"],
                 ["--model_name_or_path", "m", "--output_dir", "o", "--lora_r", "4"]):  # fmt: skip
        model, _, training = parser.parse_args_into_dataclasses(argv)
        assert (model.model_name_or_path, training.output_dir, training.lora_r) == ("m", "o", 4)
