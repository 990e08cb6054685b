"""Data-parallel evaluation: `torchrun --nproc_per_node N -m hf_hardpos eval ...` (or `accelerate launch`).

    torchrun --nproc_per_node 4 -m hf_hardpos eval --model laion/CLIP-ViT-bigG-14-laion2B-39B-b160k ...
    accelerate launch --multi_gpu --num_processes 4 -m hf_hardpos eval ...

(accelerate starts several processes only with `--multi_gpu`, also on CPU; `--cpu` alone starts one.)

Why: large models (ViT-bigG) and large benchmarks want several GPUs, and evaluation is otherwise one
process. Here process 0 runs `hardpos eval` as usual (reading data, resuming, computing metrics,
writing every output once), and whenever its scorer must encode images or captions, the work is cut
into the batches a single process would run, the batches are dealt round-robin to the processes,
each process encodes its own, and process 0 gathers the embeddings. The other processes load the
same model (the `ResolvedModel` process 0 resolved, sent as is: nothing is resolved or converted
again) and only encode.

Whole batches, not single inputs, are dealt out: a batch is the same images, or captions padded the
same way, as in a single-process run, so every embedding, hence every score, equals the
single-process one (on GPUs up to their kernels' own determinism). On CPU a matrix product's
last bits depend on the number of threads, and launchers start each process with one
(OMP_NUM_THREADS=1), so each process uses as many as a single process would (`single_process_threads`). Process 0 keeps its embedding cache (`--cache-dir`) and its resume logic; the others
hold no state beyond their models.

Failures: a process that fails while encoding sends its error to process 0, which stops every
process and exits with one line naming the process and the error; when process 0 fails, it tells
the others, which exit with status 1 naming it. A process killed outright is handled by the
launcher (torchrun ends the others). What was saved before stays saved, so the rerun resumes.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import UserInputError
from ..image_keys import ImageSource
from ..pixel_store import SharedPixelScorer

STOP, IMAGES, TEXTS = "stop", "images", "texts"


class DistributedEvalError(UserInputError):
    """Another process failed: one line naming it, exit status 1 (not a usage error)."""

    exit_code = 1


def world_size() -> int:
    """The launcher's WORLD_SIZE (torchrun, accelerate launch), 1 when run directly."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def single_process_threads() -> int:
    """torch's default intra-op thread count: the machine's physical cores (unique core ids per package in
    /proc/cpuinfo), else the logical CPUs. What `hardpos eval` uses when run alone, whatever OMP_NUM_THREADS
    a launcher set."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return os.cpu_count() or 1
    cores, package = set(), ""
    for line in lines:
        name, _, value = line.partition(":")
        if name.strip() == "physical id":
            package = value.strip()
        elif name.strip() == "core id":
            cores.add((package, value.strip()))
    return len(cores) or os.cpu_count() or 1


def deal_batches(count: int, batch_size: int, processes: int) -> list[np.ndarray]:
    """Positions 0..count-1 cut into consecutive batches of `batch_size`, dealt round-robin: process r
    gets batches r, r + processes, ... (each process's positions in increasing order)."""
    batches = [np.arange(start, min(start + batch_size, count)) for start in range(0, count, batch_size)]
    return [
        np.concatenate(batches[rank::processes]) if batches[rank::processes] else np.zeros(0, dtype=np.int64)
        for rank in range(processes)
    ]


class Workers:
    """This process's place in the group, and the commands process 0 sends the others."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size
        self.is_driver = rank == 0
        self.pixels = None  # processes 1..N-1: their `PixelStore`, shared by the models of a sweep

    def run(self, op: str, spec: dict, payloads: Sequence[Any], local: Callable[[Any], Any]) -> list[Any]:
        """Process 0: send `op` on `payloads[r]` to every process r, do `local(payloads[0])`, gather
        every result; a failure anywhere raises here after every process has answered."""
        import torch.distributed as dist

        dist.broadcast_object_list([{"op": op, "spec": spec}], src=0)
        received: list[Any] = [None]
        dist.scatter_object_list(received, list(payloads), src=0)
        answer = _attempt(local, received[0])
        gathered: list[Any] = [None] * self.size
        dist.gather_object(answer, gathered, dst=0)
        failed = [(rank, error) for rank, (_, error) in enumerate(gathered) if error is not None]
        if failed:
            rank, error = failed[0]
            raise DistributedEvalError(f"process {rank} of {self.size} failed while encoding {op}: {error}")
        return [result for result, _ in gathered]

    def stop(self, error: str | None = None) -> None:
        """Process 0: end every other process's `follow` (with process 0's error, if any)."""
        import torch.distributed as dist

        dist.broadcast_object_list([{"op": STOP, "error": error}], src=0)

    def follow(self) -> int:
        """Processes 1..N-1: encode what process 0 sends until it stops; exit status 1 if it failed."""
        import torch.distributed as dist

        scorers: dict[str, SharedPixelScorer] = {}
        while True:
            command: list[Any] = [None]
            dist.broadcast_object_list(command, src=0)
            order = command[0]
            if order["op"] == STOP:
                if order.get("error"):
                    print(
                        f"hardpos eval: process {self.rank} of {self.size}: stopped, process 0 failed: "
                        f"{order['error']}",
                        file=sys.stderr,
                    )
                    return 1
                return 0
            payload: list[Any] = [None]
            dist.scatter_object_list(payload, None, src=0)
            answer = _attempt(
                lambda work, order=order: self._encode(scorers, order["op"], order["spec"], work), payload[0]
            )
            dist.gather_object(answer, None, dst=0)

    def _encode(self, scorers: dict, op: str, spec: dict, work: Any) -> torch.Tensor | None:
        if len(work) == 0:
            return None
        scorer = self._scorer(scorers, spec)
        if op == TEXTS:
            return scorer._encode_token_ids(work)
        values, sources = work  # the sources keep process 0's row numbers and ids, for error messages
        rows = {source.row: {"image": value} for source, value in zip(sources, values)}
        return scorer._encode_images(rows, "image", sources)

    def _scorer(self, scorers: dict, spec: dict) -> SharedPixelScorer:
        """The model `spec` carries (the `ResolvedModel` process 0 resolved), loaded once. Models come one
        after the other (a sweep), so only the current one is kept."""
        from ..provenance import digest_of

        key = digest_of(spec)
        if key not in scorers:
            scorers.clear()
            loaded, processor = spec["model"].load(spec["image_backend"])
            scorers[key] = SharedPixelScorer(
                loaded,
                processor,
                spec["batch_size"],
                spec["num_workers"],
                local_device(spec["device"]),
                spec["precision"],
                spec["allow_tf32"],
                False,
                pixels=self._pixels(spec),
            )
        return scorers[key]

    def _pixels(self, spec: dict):
        """One `PixelStore` for every model this process scores (with process 0's `--pixel-cache`), or None."""
        from ..pixel_store import PixelStore

        if spec["pixels"] is None:
            return None
        if self.pixels is None:
            self.pixels = PixelStore(spec["pixels"]["directory"], spec["pixels"]["max_disk_bytes"])
        return self.pixels


def _attempt(work: Callable[[Any], Any], payload: Any) -> tuple[Any, str | None]:
    """(result, None), or (None, the error in one line): every process answers, failed or not."""
    try:
        return work(payload), None
    except Exception as err:  # noqa: BLE001 - sent to process 0, which stops every process
        text = str(err).strip()
        return None, f"{type(err).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def local_device(device: str | None) -> str | None:
    """Each process its own GPU (LOCAL_RANK) when the device is CUDA; other devices as given."""
    if device is None and not torch.cuda.is_available():
        return device
    if device is None or torch.device(device).type == "cuda":
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return device


@contextlib.contextmanager
def process_group(device: str | None = None) -> Iterator[Workers | None]:
    """Join the launcher's process group (gloo on CPU, nccl is not needed: only Python objects move),
    or yield None when there is one process. Process 0 stops the others on leaving, with its error if it
    failed."""
    size = world_size()
    if size <= 1:
        yield None
        return
    import torch.distributed as dist

    try:
        dist.init_process_group("gloo")
    except (RuntimeError, ValueError) as err:
        raise UserInputError(
            f"WORLD_SIZE={size}, but this process cannot join its group ({err}); start it with "
            "torchrun or accelerate launch"
        ) from err
    workers = Workers(dist.get_rank(), size)
    if local_device(device) in (None, "cpu") or torch.device(local_device(device)).type == "cpu":
        torch.set_num_threads(single_process_threads())
    try:
        if not workers.is_driver:
            yield workers
            dist.barrier()  # every process leaves together: process 0 hosts the group's store
            return
        try:
            yield workers
        except BaseException as err:
            text = str(err).strip()
            workers.stop(f"{type(err).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": "))
            dist.barrier()
            raise
        workers.stop()
        dist.barrier()
    finally:
        dist.destroy_process_group()


class DistributedScorer(SharedPixelScorer):
    """Process 0's scorer: each encoding call is dealt out by whole batches (`deal_batches`) to every
    process (`Workers.run`), and the embeddings put back in order. Pixels are shared as in
    `SharedPixelScorer` (each process keeps its own)."""

    def __init__(self, *args, workers: Workers, source, **kwargs):
        super().__init__(*args, **kwargs)
        from ..image_processing import backend_of

        self.workers = workers
        self.spec = {
            "model": source,  # a `ResolvedModel`: pickled as is, loaded by the other processes
            "image_backend": backend_of(self.processor.image_processor),
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "device": self.device.type,
            "precision": self.precision,
            "allow_tf32": self.allow_tf32,
            "pixels": None
            if self.pixels is None
            else {
                "directory": None if self.pixels.directory is None else str(self.pixels.directory),
                "max_disk_bytes": self.pixels.max_disk_bytes,
            },
        }

    def _encode_token_ids(self, ids: Sequence[Sequence[int]]) -> torch.Tensor:
        # The single-process order (by length, stable) cut into its batches: each share, passed in that
        # order, is re-sorted to itself and cut into the same batches by every process.
        order = np.argsort([len(i) for i in ids], kind="stable")
        shares = [order[part] for part in deal_batches(len(ids), self.batch_size, self.workers.size)]
        results = self.workers.run(
            TEXTS,
            self.spec,
            [[list(ids[i]) for i in share] for share in shares],
            lambda work: super(DistributedScorer, self)._encode_token_ids(work) if len(work) else None,
        )
        return _put_back(len(ids), shares, results)

    def _encode_images(self, dataset, image_column: str, sources: list[ImageSource]) -> torch.Tensor:
        shares = deal_batches(len(sources), self.batch_size, self.workers.size)
        payloads: list[Any] = [[sources[i] for i in shares[0]]]
        for share in shares[1:]:
            picked = [sources[i] for i in share]
            payloads.append(([dataset[s.row][image_column] for s in picked], picked))
        results = self.workers.run(
            IMAGES,
            self.spec,
            payloads,
            lambda mine: (
                super(DistributedScorer, self)._encode_images(dataset, image_column, mine) if mine else None
            ),
        )
        return _put_back(len(sources), shares, results)


def _put_back(
    count: int, shares: Sequence[np.ndarray], results: Sequence[torch.Tensor | None]
) -> torch.Tensor:
    """The embeddings of every position, from each process's share."""
    width = next(r.shape[-1] for r in results if r is not None)
    out = torch.empty(count, width)
    for share, result in zip(shares, results):
        if len(share):
            out[torch.as_tensor(share)] = result
    return out
