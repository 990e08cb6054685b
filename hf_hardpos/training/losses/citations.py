"""BibTeX of the papers the loss terms come from, kept once so model cards cite them consistently."""

__all__ = ["CE_CLIP", "CLIP", "HARD_POSITIVES", "SVLC"]

CLIP = """@inproceedings{radford2021learning,
    title = {Learning Transferable Visual Models From Natural Language Supervision},
    author = {Radford, Alec and Kim, Jong Wook and Hallacy, Chris and Ramesh, Aditya and Goh, Gabriel and Agarwal, Sandhini and Sastry, Girish and Askell, Amanda and Mishkin, Pamela and Clark, Jack and Krueger, Gretchen and Sutskever, Ilya},
    booktitle = {Proceedings of the 38th International Conference on Machine Learning},
    year = {2021},
    eprint = {2103.00020},
    archivePrefix = {arXiv}
}"""

SVLC = """@inproceedings{doveh2023teaching,
    title = {Teaching Structured Vision \\& Language Concepts to Vision \\& Language Models},
    author = {Doveh, Sivan and Arbelle, Assaf and Harary, Sivan and Schwartz, Eli and Herzig, Roei and Giryes, Raja and Feris, Rogerio and Panda, Rameswar and Ullman, Shimon and Karlinsky, Leonid},
    booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
    year = {2023},
    eprint = {2211.11733},
    archivePrefix = {arXiv}
}"""

CE_CLIP = """@inproceedings{zhang2024contrasting,
    title = {Contrasting Intra-Modal and Ranking Cross-Modal Hard Negatives to Enhance Visio-Linguistic Compositional Understanding},
    author = {Zhang, Le and Awal, Rabiul and Agrawal, Aishwarya},
    booktitle = {Proceedings of the IEEE/CVF Conference on Computer Vision and Pattern Recognition (CVPR)},
    year = {2024},
    eprint = {2306.08832},
    archivePrefix = {arXiv}
}"""

HARD_POSITIVES = """@inproceedings{kamath2024hard,
    title = {The Hard Positive Truth about Vision-Language Compositionality},
    author = {Kamath, Amita and Hsieh, Cheng-Yu and Chang, Kai-Wei and Krishna, Ranjay},
    booktitle = {European Conference on Computer Vision (ECCV)},
    year = {2024},
    eprint = {2409.17958},
    archivePrefix = {arXiv}
}"""
