"""A cached conversion records where its activation came from: the open_clip config, or --activation."""

import json
import re
from pathlib import Path

from hf_hardpos.conversion import resolve_model
from hf_hardpos.conversion.record import MARKER
from tests.support.paths import OPEN_CLIP_FIXTURES as FIXTURES

QUICKGELU_JSON = FIXTURES / "tiny-quickgelu.json"


def test_cached_conversion_says_where_the_activation_came_from(tmp_path, tiny_tokenizer):
    options = dict(
        open_clip_config=QUICKGELU_JSON, tokenizer=tiny_tokenizer, cache_dir=tmp_path, progress=False
    )
    from_config = Path(resolve_model(FIXTURES / "quickgelu_ddp.pt", **options))
    requested = Path(resolve_model(FIXTURES / "quickgelu_ddp.pt", activation="gelu", **options))
    facts = {
        name: json.loads((folder / MARKER).read_text())
        for name, folder in (("config", from_config), ("requested", requested))
    }
    reasons = {name: set(re.findall(r"[\w.-]+", fact["activation_reason"])) for name, fact in facts.items()}
    assert facts["config"]["activation"] == "quick_gelu"
    assert QUICKGELU_JSON.name in reasons["config"] and "--activation" not in reasons["config"]
    assert facts["requested"]["activation"] == "gelu"
    assert "--activation" in reasons["requested"]
    card = (from_config / "README.md").read_text()  # the card carries its own folder's record
    assert (
        facts["config"]["activation_reason"] in card and facts["requested"]["activation_reason"] not in card
    )
