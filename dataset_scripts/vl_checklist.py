"""Build VL-CheckList (Zhao et al. 2022: one config per corpus file) as a Hub dataset folder.

Same as `hardpos build vl_checklist ...`. Example:
    python dataset_scripts/vl_checklist.py --upstream-dir VL-CheckList --images-dir vlc_images \
        --output-dir out/vl_checklist
    # then: load_dataset("out/vl_checklist", "attribute_color_vg", split="test")

--upstream-dir is a clone of github.com/om-ai-lab/VL-CheckList (corpus/v1/*.yaml and the data/ files
they name); --images-dir holds the images under each yaml file's IMG_ROOT. Non-commercial licence.
"""

import sys

from hf_hardpos.cli import run_dataset_script


def main(argv=None) -> int:
    return run_dataset_script("vl_checklist", argv)


if __name__ == "__main__":
    sys.exit(main())
