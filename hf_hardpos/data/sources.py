"""Where each upstream input comes from: a local copy when the user has one, else a cached download.

Builders ask for annotation files by their path *inside the upstream repository* (``data/...``) so a
local clone and the download give byte-identical inputs (images, by key, are :mod:`.image_sources`'
work). Downloads go through ``datasets.DownloadManager`` (cached, extracted once); the manager is
created only when something must be fetched, which keeps local builds and the tests offline. Every
input is recorded with its sha256 for the dataset card.

Nothing an upstream download says is trusted either: every file downloaded from a GitHub repository
comes from a fixed commit and is checked against the digest recorded here for that commit before it
is read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..provenance import sha256_file
from .checks import DataValidationError, MissingSourceError


@dataclass(frozen=True)
class FileDigest:
    """What a file of an upstream commit must hash to: its sha256 where we hashed the file itself, and
    always its git blob id (``git ls-tree`` of the commit lists it, so it is checkable without the
    file: sha1 of ``b"blob <size>\\0"`` + the bytes)."""

    git_blob: str
    sha256: str | None = None


@dataclass(frozen=True)
class GitHubRepo:
    """An upstream repository at a fixed commit, with the digests of the files the builders read."""

    name: str
    ref: str
    files: Mapping[str, FileDigest] = field(default_factory=dict)

    def raw_url(self, path: str) -> str:
        return f"https://raw.githubusercontent.com/{self.name}/{self.ref}/{path}"


def original_file(subset: str) -> str:
    """REPLACE's file of c and c_n for `subset` in the hard_positives repository: the captions and hard
    negatives of the benchmark REPLACE was drawn from, whose file names it keeps (the one place they are
    spelled: the builder and the digests below are keyed through these two names)."""
    return f"data/vl_checklist_{subset}.json"


def positive_file(subset: str) -> str:
    """REPLACE's file of c_p for `subset` (the same rows as `original_file`'s, with the hard positives)."""
    return f"swapped_data/vl_checklist_{subset}.json"


# Pinned to the commits whose files the builders were checked on (counts, alignment, defects). The
# sha256s were computed from the files at these commits; the git blob ids are those commits' trees.
HARD_POSITIVES_REPO = GitHubRepo(
    "amitakamath/hard_positives",
    "33addaae84b58d96dc8e9251b61d497c536ed23d",
    {
        original_file("attributes"): FileDigest(
            "8502f610e15c0022e316abca4a8412972fd46089",
            "4c7d262e77e1a1fd5a89ee0de43191fe697d4cf1c044e76c496761f07d824950",
        ),
        original_file("relations"): FileDigest(
            "0a79261bf87069525343fd0298dcfc558ba9ac0c",
            "f4aee47194df09f73c4bdb13e2f24c17901d71fbb15ab629b40c8667a841d535",
        ),
        positive_file("attributes"): FileDigest(
            "2f305ee08a1771a4cd33779d21d1fbebd8f5765a",
            "7f6d2f2614ff8a037780ab4b6243c6e1165ceabc5e4db506ad70c63fd95f6441",
        ),
        positive_file("relations"): FileDigest(
            "b60bbe62bc7c0d42e21f2a2b20f3c1fbd9ee7707",
            "25174b3f0286c124cd7c2c844c1e57bb85179e37cdee0d55fc2857387dede9b5",
        ),
        # Large files: checked by their git blob id (the commit's tree), sha256 not recorded.
        "swapped_data/visual_genome_attribution.json": FileDigest("064e9409a45574acbf5b9c360969e43cda063e67"),
        "hard_positives_ft/replace_hp.jsonl": FileDigest("7401bb980a509058b7457678d04a02329fae3ae7"),
        "hard_positives_ft/swap_hp.jsonl": FileDigest("70879f11d4f80654acf19e94ff434b33f5e1d990"),
    },
)
SUGARCREPE_REPO = GitHubRepo(
    "RAIVNLab/sugar-crepe",
    "0047054b243992f0fad63d6f64f7544862daf846",
    {
        "data/add_att.json": FileDigest(
            "71c463725f3f9bae0a9227a01ae5d431db235396",
            "012d88d729693d193760e6f3393b06a1cf874380a9db0062e937201199fe044d",
        ),
        "data/add_obj.json": FileDigest(
            "289b22a04690f6f542bb048346021d768ec9b24d",
            "1b9d76b93139a937b8dc1ada92a4f05ecc821bb3c291d752428bafadd4bb0682",
        ),
        "data/replace_att.json": FileDigest(
            "6393e04971c06cb62a8fed62ef2805ff6c7c5666",
            "9fe55fd4c0a9ad1f85d486d9f6d0215b41f867eb025026e7f7b5ce44352545ee",
        ),
        "data/replace_obj.json": FileDigest(
            "1585a4a6998d785c043fb923d8e0248436d9da51",
            "9d299600639947e9d15281a9ded1382b376cf4ea088a8d08a1314bfe76e81898",
        ),
        "data/replace_rel.json": FileDigest(
            "8716359e17fa36d37e75c6eff5e94826cdb047e5",
            "356bcc2fc4c6aed3f4d9fd50acc58489bb1fe70c28791f9368d4cbf9ea39cdc9",
        ),
        "data/swap_att.json": FileDigest(
            "375fdd6d372e22e43c0dfbe898c1ec1494016b8c",
            "7a7ce04e5c4c80412b48c6f0c1347fb1a2f5d54c0be6aa429b64d390e442f8d0",
        ),
        "data/swap_obj.json": FileDigest(
            "db5abe6b488fa38c4b67d1d3da87b6b5c2e1e626",
            "073cdb8e253d053614e80710834d9773b09dbc1dd0a412f6f9492262caa1dcad",
        ),
    },
)
SUGARCREPE_PP_REPO = GitHubRepo(
    "Sri-Harsha/scpp",
    "c083bbf039a5ca215acaf25e7ee736d2ea6f3864",
    {
        "data/replace_att.json": FileDigest(
            "be89e623f6fd54d015f6a437ba9a34ffa39cc465",
            "6826413592894754eeca02aeebbcbbc8b95a7456998abcc714e71c033ce6fe87",
        ),
        "data/replace_obj.json": FileDigest(
            "3b62823c003659737a68c3d78cfe721c57b44f5f",
            "5c6dc499ec8f511a8aa4ec1b7b5eb0eca90317488abe36ec39573355e2d361ab",
        ),
        "data/replace_rel.json": FileDigest(
            "69d447e3fcb33817b866bd5688741f42bad7c26a",
            "040fb95d3f0619bf515db60879e99709a87a5e9b4f524ec3403b127243480fd4",
        ),
        "data/swap_att.json": FileDigest(
            "61ea987bbac7d8c99e6a88f3c1028609fbea6c73",
            "450d0fd9fcad3e6f44950dc634e7f901ab1c6d9c60a569ade5ae8ffb3d203ad8",
        ),
        "data/swap_obj.json": FileDigest(
            "8e9c3f66a2c2d3369146dec5324b1926b2fc1d40",
            "5f33cae824de431a7ecd3c5de6301f689815f9497aa36d96b154bbaf117b201b",
        ),
    },
)


def google_drive_url(file_id: str) -> str:
    return f"https://drive.google.com/uc?export=download&id={file_id}"


# ARO distributes its annotations and its VG crops' source images through Google Drive (ids from its
# dataset_zoo/aro_datasets.py, commit 81fdd20).
ARO_FILES = {
    "visual_genome_attribution.json": google_drive_url("13tWvOrNOLHxl3Rm9cR3geAdHx2qR3-Tw"),
    "visual_genome_relation.json": google_drive_url("1kX2iCHEv0CADL8dSO1nMdW-V0NqIAiP3"),
}
ARO_IMAGES_URL = google_drive_url("1qaPlrwhGNMrR3a11iopZUT_GPP_LrgP9")  # vgr_vga_images.zip -> images/

# Visual Genome 1.2 ships its images in two archives; each extracts to a folder named after its part.
VG_PART_URLS = {
    "VG_100K": "https://cs.stanford.edu/people/rak248/VG_100K_2/images.zip",
    "VG_100K_2": "https://cs.stanford.edu/people/rak248/VG_100K_2/images2.zip",
}
VG_PARTS = tuple(VG_PART_URLS)

COCO_ANNOTATIONS_URL = "http://images.cocodataset.org/annotations/annotations_trainval2014.zip"
COCO_CAPTIONS_FILE = "annotations/captions_train2014.json"
COCO_VAL2017_URL = "http://images.cocodataset.org/zips/val2017.zip"  # extracts to val2017/


def git_blob_of(path: Path) -> str:
    """The git blob id of a file (what ``git hash-object`` prints)."""
    digest = hashlib.sha1(f"blob {Path(path).stat().st_size}\0".encode())
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def matches_digest(path: Path, expected: FileDigest) -> bool:
    """True when ``path`` is the file ``expected`` describes (sha256 when recorded, else git blob id)."""
    if expected.sha256 is not None:
        return sha256_file(path) == expected.sha256
    return git_blob_of(path) == expected.git_blob


class UpstreamMismatchError(DataValidationError):
    """A downloaded upstream file is not the file of the pinned commit."""


class Sources:
    """Resolve upstream files to local paths, from ``upstream_dir`` or by (cached) download.

    Downloads of repository files come from ``repo``'s pinned commit and must match the digest
    recorded for that file (else :class:`UpstreamMismatchError`: the rows would not be the paper's). A
    local copy is read as it is; when it differs from the pinned file it is listed in
    :attr:`local_variants`, and the dataset card says its rows are the user's, not upstream's.

    Args:
        upstream_dir: a folder laid out like ``repo`` (e.g. ``data/``, ``swapped_data/``). When given,
            nothing from that repository is downloaded and a file missing there is an error rather
            than a silent download.
        cache_dir: where the download manager caches downloads and extractions (default: the
            ``datasets`` cache); created if missing, refused if it cannot be.
        repo: the upstream repository the relative paths refer to.
    """

    def __init__(
        self,
        upstream_dir: str | Path | None = None,
        cache_dir: str | Path | None = None,
        repo: GitHubRepo = HARD_POSITIVES_REPO,
    ):
        self.upstream_dir = Path(upstream_dir) if upstream_dir is not None else None
        self.cache_dir = existing_cache_dir(cache_dir)
        self.repo = repo
        self._dl_manager = None
        self.provenance: dict[str, str] = {}
        self.local_variants: list[
            str
        ] = []  # inputs read from local copies that are not the pinned upstream files

    @property
    def dl_manager(self):
        """The ``datasets.DownloadManager``, created on first use."""
        if self._dl_manager is None:
            from datasets import DownloadConfig, DownloadManager

            config = DownloadConfig(cache_dir=str(self.cache_dir) if self.cache_dir else None)
            self._dl_manager = DownloadManager(dataset_name="hardpos", download_config=config)
        return self._dl_manager

    def upstream_file(self, relative_path: str) -> Path:
        """A file of the upstream repository, by its path in that repository."""
        url = self.repo.raw_url(relative_path)
        expected = self.repo.files.get(relative_path)
        pinned = f"{self.repo.name} @{self.repo.ref[:7]}"
        if self.upstream_dir is not None:
            path = self.upstream_dir / relative_path
            if not path.is_file():
                raise MissingSourceError(
                    f"{path} not found: --upstream-dir must be laid out like github.com/{self.repo.name} "
                    f"(expected {relative_path} inside it)"
                )
            if expected is not None and matches_digest(path, expected):
                return self.record(
                    relative_path, path, f"{url} (read from a local copy, identical to {pinned})"
                )
            self.local_variants.append(relative_path)
            return self.record(relative_path, path, f"a local copy that is NOT the file of {pinned}")
        path = self.download(url)
        if expected is None:
            raise UpstreamMismatchError(f"{url}: no digest is recorded for this file of {pinned}; not read")
        if not matches_digest(path, expected):
            raise UpstreamMismatchError(
                f"{url} (downloaded to {path}) is not the file of {pinned} (its digest differs from the recorded "
                f"{expected.sha256 or 'git blob ' + expected.git_blob}); delete it from the download cache and retry, "
                "or pass --upstream-dir with a copy you trust"
            )
        return self.record(relative_path, path, f"{url} (digest checked against {pinned})")

    def local_or_download(self, name: str, local_dir: str | Path | None, url: str, option: str) -> Path:
        """``local_dir/name`` when the user gave ``option``, else ``url`` through the download manager.

        No digest is recorded for these files (Google Drive and bucket links, not a commit), so a local
        copy is listed in :attr:`local_variants` and a download's sha256 is only recorded."""
        if local_dir is not None:
            path = Path(local_dir) / name
            if not path.is_file():
                raise MissingSourceError(f"{path} not found: {option} must be a folder holding {name}")
            self.local_variants.append(name)
            return self.record(
                name, path, f"{url} (read from a local copy, not checked against a recorded digest)"
            )
        return self.record(name, self.download(url), url)

    def record(self, name: str, path: Path, origin: str) -> Path:
        """Note where an input came from, with its sha256, for the dataset card's provenance."""
        self.provenance[name] = f"{origin}, sha256 {sha256_file(path)}"
        return path

    def download(self, url: str) -> Path:
        return Path(self.dl_manager.download(url))

    def download_and_extract(self, url: str) -> Path:
        return Path(self.dl_manager.download_and_extract(url))


def existing_cache_dir(cache_dir: str | Path | None) -> Path | None:
    """``--cache-dir`` as a folder, created if missing, so a bad one fails before any input is read."""
    if cache_dir is None:
        return None
    cache_dir = Path(cache_dir)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise MissingSourceError(f"--cache-dir {cache_dir}: cannot create it ({error.strerror})") from error
    if not cache_dir.is_dir():
        raise MissingSourceError(f"--cache-dir {cache_dir} is not a directory")
    return cache_dir
