"""BibTeX of every paper the package implements, evaluates on or converts from, kept once.

Cards (dataset, model, metric) and loss modules pick entries by key with `cite`, so one paper is
always cited under one key with one text. The `metrics/<name>/` folders are the exception by
design: each must build as a Hub Space without this package, so they carry their own copy
(`tests/test_metric_modules.py` checks that copy equals the entry here).
"""

from __future__ import annotations

BIBTEX: dict[str, str] = {
    "kamath2024hard": """@inproceedings{kamath2024hard,
    title = {The Hard Positive Truth about Vision-Language Compositionality},
    author = {Kamath, Amita and Hsieh, Cheng-Yu and Chang, Kai-Wei and Krishna, Ranjay},
    booktitle = {European Conference on Computer Vision (ECCV)},
    year = {2024},
    eprint = {2409.17958},
    archivePrefix = {arXiv}
}""",
    "radford2021learning": """@inproceedings{radford2021learning,
    title = {Learning Transferable Visual Models From Natural Language Supervision},
    author = {Radford, Alec and Kim, Jong Wook and Hallacy, Chris and Ramesh, Aditya and Goh, Gabriel and Agarwal, Sandhini and Sastry, Girish and Askell, Amanda and Mishkin, Pamela and Clark, Jack and Krueger, Gretchen and Sutskever, Ilya},
    booktitle = {Proceedings of the 38th International Conference on Machine Learning},
    year = {2021},
    eprint = {2103.00020},
    archivePrefix = {arXiv}
}""",
    "doveh2023teaching": """@inproceedings{doveh2023teaching,
    title = {Teaching Structured Vision \\& Language Concepts to Vision \\& Language Models},
    author = {Doveh, Sivan and Arbelle, Assaf and Harary, Sivan and Schwartz, Eli and Herzig, Roei and Giryes, Raja and Feris, Rogerio and Panda, Rameswar and Ullman, Shimon and Karlinsky, Leonid},
    booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
    year = {2023},
    eprint = {2211.11733},
    archivePrefix = {arXiv}
}""",
    "doveh2023dense": """@inproceedings{doveh2023dense,
    title = {Dense and Aligned Captions (DAC) Promote Compositional Reasoning in VL Models},
    author = {Doveh, Sivan and Arbelle, Assaf and Harary, Sivan and Herzig, Roei and Kim, Donghyun and Cascante-Bonilla, Paola and Alfassy, Amit and Panda, Rameswar and Giryes, Raja and Feris, Rogerio and Ullman, Shimon and Karlinsky, Leonid},
    booktitle = {Advances in Neural Information Processing Systems (NeurIPS)},
    year = {2023},
    eprint = {2305.19595},
    archivePrefix = {arXiv}
}""",
    "zhang2024contrasting": """@inproceedings{zhang2024contrasting,
    title = {Contrasting Intra-Modal and Ranking Cross-Modal Hard Negatives to Enhance Visio-Linguistic Compositional Understanding},
    author = {Zhang, Le and Awal, Rabiul and Agrawal, Aishwarya},
    booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
    year = {2024},
    eprint = {2306.08832},
    archivePrefix = {arXiv}
}""",
    "yuksekgonul2023when": """@inproceedings{yuksekgonul2023when,
    title = {When and Why Vision-Language Models Behave like Bags-Of-Words, and What to Do About It?},
    author = {Yuksekgonul, Mert and Bianchi, Federico and Kalluri, Pratyusha and Jurafsky, Dan and Zou, James},
    booktitle = {International Conference on Learning Representations (ICLR)},
    year = {2023}
}""",
    "ma2023crepe": """@inproceedings{ma2023crepe,
    title = {CREPE: Can Vision-Language Foundation Models Reason Compositionally?},
    author = {Ma, Zixian and Hong, Jerry and Gul, Mustafa Omer and Gandhi, Mona and Gao, Irena and Krishna, Ranjay},
    booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
    year = {2023}
}""",
    "zhao2022vlchecklist": """@article{zhao2022vlchecklist,
    title = {VL-CheckList: Evaluating Pre-trained Vision-Language Models with Objects, Attributes and Relations},
    author = {Zhao, Tiancheng and Zhang, Tianqi and Zhu, Mingwei and Shen, Haozhan and Lee, Kyusong and Lu, Xiaopeng and Yin, Jianwei},
    journal = {arXiv preprint arXiv:2207.00221},
    year = {2022}
}""",
    "lin2014microsoft": """@inproceedings{lin2014microsoft,
    title = {Microsoft COCO: Common Objects in Context},
    author = {Lin, Tsung-Yi and Maire, Michael and Belongie, Serge and Hays, James and Perona, Pietro and Ramanan, Deva and Doll{\\'a}r, Piotr and Zitnick, C. Lawrence},
    booktitle = {European Conference on Computer Vision (ECCV)},
    year = {2014}
}""",
    "hsieh2023sugarcrepe": """@inproceedings{hsieh2023sugarcrepe,
    title = {SugarCrepe: Fixing Hackable Benchmarks for Vision-Language Compositionality},
    author = {Hsieh, Cheng-Yu and Zhang, Jieyu and Ma, Zixian and Kembhavi, Aniruddha and Krishna, Ranjay},
    booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
    year = {2023}
}""",
    "dumpala2024sugarcrepepp": """@inproceedings{dumpala2024sugarcrepepp,
    title = {SUGARCREPE++ Dataset: Vision-Language Model Sensitivity to Semantic and Lexical Alterations},
    author = {Dumpala, Sri Harsha and Jaiswal, Aman and Sastry, Chandramouli and Milios, Evangelos and Oore, Sageev and Sajjad, Hassan},
    booktitle = {Advances in Neural Information Processing Systems (NeurIPS), Datasets and Benchmarks Track},
    year = {2024}
}""",
    "thrush2022winoground": """@inproceedings{thrush2022winoground,
    title = {Winoground: Probing Vision and Language Models for Visio-Linguistic Compositionality},
    author = {Thrush, Tristan and Jiang, Ryan and Bartolo, Max and Singh, Amanpreet and Williams, Adina and Kiela, Douwe and Ross, Candace},
    booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
    year = {2022}
}""",
    "ilharco2021openclip": """@software{ilharco2021openclip,
    title = {OpenCLIP},
    author = {Ilharco, Gabriel and Wortsman, Mitchell and Wightman, Ross and Gordon, Cade and Carlini, Nicholas and Taori, Rohan and Dave, Achal and Shankar, Vaishaal and Namkoong, Hongseok and Miller, John and Hajishirzi, Hannaneh and Farhadi, Ali and Schmidt, Ludwig},
    year = {2021},
    doi = {10.5281/zenodo.5143773}
}""",
    "cherti2023reproducible": """@inproceedings{cherti2023reproducible,
    title = {Reproducible Scaling Laws for Contrastive Language-Image Learning},
    author = {Cherti, Mehdi and Beaumont, Romain and Wightman, Ross and Wortsman, Mitchell and Ilharco, Gabriel and Gordon, Cade and Schuhmann, Christoph and Schmidt, Ludwig and Jitsev, Jenia},
    booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
    year = {2023}
}""",
    "parcalabescu2022valse": """@inproceedings{parcalabescu2022valse,
    title = {{VALSE}: A Task-Independent Benchmark for Vision and Language Models Centered on Linguistic Phenomena},
    author = {Parcalabescu, Letitia and Cafagna, Michele and Muradjan, Lilitta and Frank, Anette and Calixto, Iacer and Gatt, Albert},
    booktitle = {Proceedings of the 60th Annual Meeting of the Association for Computational Linguistics (ACL)},
    year = {2022}
}""",
}

# Named keys, so a typo is an ImportError rather than a KeyError at card-rendering time.
HARD_POSITIVES = "kamath2024hard"
CLIP = "radford2021learning"
SVLC = "doveh2023teaching"
DAC = "doveh2023dense"
CE_CLIP = "zhang2024contrasting"
ARO = "yuksekgonul2023when"
CREPE = "ma2023crepe"
VL_CHECKLIST = "zhao2022vlchecklist"
VALSE = "parcalabescu2022valse"
COCO = "lin2014microsoft"
SUGARCREPE = "hsieh2023sugarcrepe"
SUGARCREPE_PP = "dumpala2024sugarcrepepp"
WINOGROUND = "thrush2022winoground"
OPEN_CLIP = "ilharco2021openclip"
CLIP_BENCHMARK = "cherti2023reproducible"  # clip_benchmark asks to be cited with this paper


def cite(*keys: str) -> str:
    """The BibTeX entries for `keys`, in order, without repeats, separated by blank lines."""
    unknown = [k for k in keys if k not in BIBTEX]
    if unknown:
        raise KeyError(f"no BibTeX entry for {unknown}; known keys: {sorted(BIBTEX)}")
    return "\n\n".join(BIBTEX[k] for k in dict.fromkeys(keys))
