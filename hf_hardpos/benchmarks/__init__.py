"""The benchmarks that live in a folder of their own, each registered in `hf_hardpos.benchmark_registry`.

A folder holds everything about its benchmark: the builder (`builder.py`), the dataset card's text
(`card.yaml`), the scoring profile with the task facts and its paper's columns (`task.py`), and in
`__init__.py` the one `Benchmark` declaration (build options, task, suites) it registers. Importing
this package registers every folder below; a new benchmark is its folder and one import line here.
The package's `__init__` imports it, so the tables that read the registry always see them.
"""

from . import valse, vl_checklist  # noqa: F401  (importing a folder registers it)
