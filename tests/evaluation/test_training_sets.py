"""A trainer eval set given as a plain `datasets.Dataset` is scored as the task its columns name."""

import pytest

from hf_hardpos.errors import UserInputError
from hf_hardpos.evaluation.section import HARD_POSITIVE
from hf_hardpos.evaluation.tasks import CAPTION_SELECTION, WINOGROUND
from hf_hardpos.evaluation.training_sets import as_benchmark_eval_set
from hf_hardpos.synthetic.world import make_replace_dataset
from tests.support.caption_selection import make_selection_set, make_winoground


def test_a_plain_dataset_is_the_task_its_columns_name():
    assert as_benchmark_eval_set("replace", make_replace_dataset(4, 0, "attributes")).task == HARD_POSITIVE
    selection = as_benchmark_eval_set("sugarcrepe", make_selection_set(3, 2, seed=0))
    assert selection.task == CAPTION_SELECTION
    assert as_benchmark_eval_set("winoground", make_winoground(3, seed=0)).task == WINOGROUND


def test_a_plain_dataset_whose_columns_name_no_task_gets_the_hard_positive_schema_error():
    broken = make_replace_dataset(4, 0, "attributes").remove_columns(["hard_negative", "caption"])
    with pytest.raises(UserInputError, match="hard_negative"):
        as_benchmark_eval_set("replace", broken)
