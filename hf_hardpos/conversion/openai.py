"""OpenAI's released CLIP files: TorchScript archives with fp16 weights and three scalar entries.

A TorchScript archive is a zip of compiled code (``code/``) and pickled data (``data.pkl`` plus one
file per storage under ``data/``). ``torch.jit.load`` would run that code (a scripted ``__setstate__``
runs at load time, whoever wrote it), so the weights are read without it: ``data.pkl`` goes through
a restricted unpickler that builds only tensors, ordered dicts and inert records of the archive's
module objects, and refuses any other global. Only the state dict is kept. OpenAI's archives hold no
config, so the architecture comes from shapes with OpenAI's head width of 64
(`config_from_openai_state_dict`) unless `--config` says otherwise.
"""

from __future__ import annotations

import pickle
import sys
import zipfile
from collections import OrderedDict
from pathlib import Path

import torch

from ..errors import UserInputError, first_line
from .archive import entry_size

RESAVE = (
    "hardpos reads TorchScript archives without running their code; load the model where you trust its code "
    "and save its weights with torch.save(model.state_dict(), 'weights.pt'), then convert that file with --config"
)
# Storage classes named in a TorchScript pickle -> the dtype of their bytes.
_STORAGE_DTYPES = {
    "DoubleStorage": torch.float64,
    "FloatStorage": torch.float32,
    "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
}


class _ScriptObject:
    """An inert stand-in for one of the archive's TorchScript objects: it records its attributes and
    has no behaviour, so unpickling it runs nothing."""

    qualified_name = "__torch__"
    attributes: dict | None = None

    def __init__(self, *args) -> None:
        pass

    def __setstate__(self, state) -> None:
        if not isinstance(state, dict):
            raise UserInputError(
                f"{self.qualified_name} has custom state (a scripted __getstate__/__setstate__), which only its own "
                f"code could restore; OpenAI's archives have none. {RESAVE}"
            )
        self.attributes = state


def _script_class(qualified_name: str) -> type:
    return type("ScriptObject", (_ScriptObject,), {"qualified_name": qualified_name})


def _rebuild_tensor(
    storage: torch.Tensor, offset: int, size, stride, requires_grad=False, hooks=None, metadata=None
):
    try:
        return torch.as_strided(storage, tuple(size), tuple(stride), offset)
    except (RuntimeError, TypeError) as err:
        raise UserInputError(f"a tensor of the archive does not fit its storage ({err})") from None


def _identity(value, *args):
    return value


class _RestrictedUnpickler(pickle.Unpickler):
    """Builds tensors from the archive's storages; ``__torch__`` classes become inert records."""

    _ALLOWED = {
        ("collections", "OrderedDict"): OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
        ("torch.jit._pickle", "restore_type_tag"): _identity,
        ("torch.jit._pickle", "build_intlist"): _identity,
        ("torch.jit._pickle", "build_doublelist"): _identity,
        ("torch.jit._pickle", "build_boollist"): _identity,
        ("torch.jit._pickle", "build_tensorlist"): _identity,
    }

    def __init__(self, handle, archive: zipfile.ZipFile, prefix: str, where: str):
        super().__init__(handle)
        self.archive, self.prefix, self.where = archive, prefix, where
        self.storages: dict[str, torch.Tensor] = {}

    def find_class(self, module: str, name: str):
        if module == "__torch__" or module.startswith("__torch__."):
            return _script_class(f"{module}.{name}")
        if module == "torch" and name in _STORAGE_DTYPES:
            return _STORAGE_DTYPES[name]
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[(module, name)]
        raise UserInputError(
            f"checkpoint {self.where}: data.pkl refers to {module}.{name}, which is not weights. {RESAVE}"
        )

    def persistent_load(self, saved_id):
        if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and saved_id[0] == "storage"):
            raise UserInputError(
                f"checkpoint {self.where}: unexpected storage reference {saved_id!r:.80}. {RESAVE}"
            )
        _, dtype, key, _location, numel = saved_id
        if not isinstance(dtype, torch.dtype):
            raise UserInputError(f"checkpoint {self.where}: storage {key} has no known dtype. {RESAVE}")
        if key not in self.storages:
            name = f"{self.prefix}data/{key}"
            if not isinstance(numel, int) or numel < 0:
                raise UserInputError(f"checkpoint {self.where}: storage {key} has no valid size. {RESAVE}")
            # Sized from the pickle and the zip directory before a byte is read (`archive`): no bomb allocates.
            entry_size(self.archive, name, self.where, expected=numel * dtype.itemsize)
            raw = bytearray(self.archive.read(name))
            self.storages[key] = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        return self.storages[key]


def _named_tensors(obj, prefix: str = "") -> dict[str, torch.Tensor]:
    """Every tensor attribute of the module tree, by dotted name (what `state_dict()` names them)."""
    found: dict[str, torch.Tensor] = {}
    for key, value in (obj.attributes or {}).items():
        if isinstance(value, torch.Tensor):
            found[prefix + key] = value
        elif isinstance(value, _ScriptObject):
            found.update(_named_tensors(value, f"{prefix}{key}."))
    return found


def read_torchscript_tensors(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a TorchScript archive's module tree, read without running any of its code."""
    where = str(path)
    try:
        with zipfile.ZipFile(path) as archive:
            pickles = [
                name for name in archive.namelist() if name.endswith("/data.pkl") and name.count("/") == 1
            ]
            if len(pickles) != 1:
                raise UserInputError(
                    f"checkpoint {where}: expected one <name>/data.pkl in the TorchScript archive"
                )
            prefix = pickles[0][: -len("data.pkl")]
            for metadata in (pickles[0], f"{prefix}byteorder"):
                if metadata in archive.namelist():
                    entry_size(archive, metadata, where)
            byteorder = (
                archive.read(f"{prefix}byteorder").decode().strip()
                if f"{prefix}byteorder" in archive.namelist()
                else "little"
            )
            if byteorder != sys.byteorder:
                raise UserInputError(f"checkpoint {where}: saved on a {byteorder}-endian machine; {RESAVE}")
            with archive.open(pickles[0]) as handle:
                root = _RestrictedUnpickler(handle, archive, prefix, where).load()
    except (zipfile.BadZipFile, KeyError, EOFError, pickle.UnpicklingError, UnicodeDecodeError) as err:
        raise UserInputError(f"checkpoint {where}: not a readable TorchScript archive ({err})") from err
    except UserInputError as err:
        if str(err).startswith(f"checkpoint {where}"):
            raise
        raise UserInputError(f"checkpoint {where}: {err}") from None
    except (
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
        RecursionError,
        OSError,
    ) as err:  # crafted data.pkl
        raise UserInputError(
            f"checkpoint {where}: data.pkl is not a TorchScript module's data "
            f"({type(err).__name__}: {first_line(err)})"
        ) from err
    if not isinstance(root, _ScriptObject):
        raise UserInputError(f"checkpoint {where}: data.pkl does not hold a TorchScript module. {RESAVE}")
    try:
        return _named_tensors(root)
    except RecursionError:  # a module that holds itself
        raise UserInputError(f"checkpoint {where}: its module tree contains a cycle. {RESAVE}") from None


def load_torchscript_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    """The archive's weights cast to float32, without `input_resolution`/`context_length`/`vocab_size`.

    The scalars are checked against the weights they describe before being dropped, so an archive
    whose metadata contradicts its tensors is refused rather than converted.
    """
    state = read_torchscript_tensors(path)
    scalars = {
        k: int(state.pop(k)) for k in ("input_resolution", "context_length", "vocab_size") if k in state
    }
    state = {k: v for k, v in state.items() if k.split(".")[-1] != "attn_mask"}  # a buffer, not a weight
    checks = {
        "context_length": lambda: state["positional_embedding"].shape[0],
        "vocab_size": lambda: state["token_embedding.weight"].shape[0],
        "input_resolution": lambda: (
            state["visual.conv1.weight"].shape[-1]
            * round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
        ),
    }
    for key, value in scalars.items():
        try:
            actual = int(checks[key]())
        except KeyError as err:
            raise UserInputError(
                f"checkpoint {path}: TorchScript archive lacks weight {err.args[0]!r}"
            ) from err
        if actual != value:
            raise UserInputError(
                f"checkpoint {path}: the archive's {key}={value} contradicts its weights ({actual})"
            )
    return {k: v.float() if v.is_floating_point() else v.clone() for k, v in state.items()}
