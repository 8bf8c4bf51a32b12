"""The weights of a Hugging Face model folder as NumPy arrays, without torch: model.safetensors,
sharded safetensors, pytorch_model.bin and sharded pytorch_model.bin.

Safetensors files are parsed here (an 8-byte header length, a JSON header, the raw bytes) so
that bfloat16 tensors read too (NumPy has no bfloat16: they become float32). A pytorch_model.bin
is PyTorch's zip serialization: ``<archive>/data.pkl`` is a pickle whose tensors point at raw
storages ``<archive>/data/<key>``. It is unpickled by an unpickler that knows only the few
globals a state dict uses and refuses every other one, so reading a file never runs its code.
PyTorch's legacy (pre-1.6, not zip) format is refused with a ValueError. A model.safetensors
that transformers' TensorFlow classes wrote (``save_pretrained(safe_serialization=True)``; its
metadata says ``{"format": "tf"}``) holds TF's weight names: they are read under the Hugging
Face keys (``tf_names``), as tf_model.h5's are.

Example:
>>> import os, tempfile
>>> from safetensors.numpy import save_file
>>> folder = tempfile.mkdtemp()
>>> save_file({"classifier.bias": np.array([1, 2, 3], np.float32)},
...           os.path.join(folder, "model.safetensors"))
>>> read_hf_weights(folder)
{'classifier.bias': array([1., 2., 3.], dtype=float32)}
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import pickle
import struct
import zipfile
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from keras_bert import fileio
from keras_bert.checkpoints.tf_names import hf_key, names_to_hf
from keras_bert.fileio import join

logger = logging.getLogger(__name__)

SAFETENSORS_NAME = "model.safetensors"
SAFETENSORS_INDEX_NAME = "model.safetensors.index.json"
PYTORCH_NAME = "pytorch_model.bin"
PYTORCH_INDEX_NAME = "pytorch_model.bin.index.json"
# In order of preference: the first one present in a folder is read.
WEIGHT_FILES: tuple[str, ...] = (SAFETENSORS_NAME, SAFETENSORS_INDEX_NAME, PYTORCH_NAME,
                                 PYTORCH_INDEX_NAME)

RESAVE_HINT = ("re-save it with safetensors (transformers: model.save_pretrained(folder) writes "
               "model.safetensors)")

# Safetensors dtype names -> little-endian NumPy dtypes. BF16 is read as uint16 and widened.
_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8",
                       "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
# torch.<Name>Storage -> NumPy dtype name, as in safetensors' table ("bfloat16": see above).
_TORCH_STORAGES = {"DoubleStorage": "<f8", "FloatStorage": "<f4", "HalfStorage": "<f2",
                   "BFloat16Storage": "bfloat16", "LongStorage": "<i8", "IntStorage": "<i4",
                   "ShortStorage": "<i2", "CharStorage": "i1", "ByteStorage": "u1",
                   "BoolStorage": "?"}


def has_hf_weights(directory: fileio.PathLike) -> bool:
    """Whether ``directory`` holds one of WEIGHT_FILES."""
    return any(fileio.exists(join(directory, name)) for name in WEIGHT_FILES)


def read_hf_weights(directory: fileio.PathLike) -> dict[str, np.ndarray]:
    """Reads every tensor of a Hugging Face model folder, keys as stored (``bert.`` prefix kept).

    The first of WEIGHT_FILES present is read: ``model.safetensors``, the shards named by
    ``model.safetensors.index.json``, ``pytorch_model.bin``, the shards named by
    ``pytorch_model.bin.index.json``. Tensors come back in their stored dtype (native byte
    order), except bfloat16, which becomes float32 (exactly: bfloat16 is float32's upper half).
    Weights that transformers ties and leaves out of the file (``cls.predictions.decoder.weight``,
    the word embeddings) are absent here too.

    Args:
        directory: the model folder, local or ``gs://``.

    Returns:
        {key: array}.

    Raises:
        FileNotFoundError: no weight file in ``directory``, or an index names a missing shard.
        ValueError: a file that is truncated, malformed, or (for .bin) needs a Python global a
            state dict never holds; the message names the file.
    """
    for name in WEIGHT_FILES:
        path = join(directory, name)
        if fileio.exists(path):
            logger.info("reading Hugging Face weights from %s", path)
            if name.endswith(".index.json"):
                return read_sharded(directory, path)
            return _read_weight_file(path)
    raise FileNotFoundError(f"{fileio.local_path(directory)!r} has no Hugging Face weights: "
                            f"expected one of {', '.join(WEIGHT_FILES)}")


def _read_weight_file(path: str) -> dict[str, np.ndarray]:
    with fileio.open_file(path, "rb") as f:
        data = f.read()
    return _parse_safetensors(data, path) if path.endswith(".safetensors") \
        else _parse_pytorch_zip(data, path)


def read_sharded(directory: fileio.PathLike, index_path: str,
                 read_shard: Callable[[str], dict[str, np.ndarray]] | None = None,
                 stored_name: Callable[[str], str] | None = None) -> dict[str, np.ndarray]:
    """The union of the shards an index's ``weight_map`` names (the index format of
    transformers' sharded safetensors, pytorch_model.bin and tf_model.h5 files alike); each
    shard, read by ``read_shard``, must hold the keys the index gives it, as ``stored_name``
    spells them in the shard (by default the key itself, or its Hugging Face key for a TF name:
    a TF model's safetensors shards come back under Hugging Face keys)."""
    read_shard = read_shard or _read_weight_file
    stored_name = stored_name or (lambda key: hf_key(key)[0] if "/" in key else key)
    with fileio.open_file(index_path, "rb") as f:
        try:
            weight_map = json.loads(f.read())["weight_map"]
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{index_path!r} is not a shard index (a JSON object with a "
                             f"'weight_map' of key -> shard file): {error!r}") from None
    if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) and v and "/" not in v and "\\" not in v and v not in (".", "..")
            for v in weight_map.values()):
        raise ValueError(f"{index_path!r}: 'weight_map' must map each key to the name of a "
                         f"shard file in the same folder")
    values: dict[str, np.ndarray] = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = join(directory, shard)
        if not fileio.exists(shard_path):
            raise FileNotFoundError(f"{index_path!r} names the shard {shard!r}, which is not in "
                                    f"{fileio.local_path(directory)!r}; copy the folder again "
                                    f"with every shard")
        shard_values = read_shard(shard_path)
        expected = sorted(stored_name(k) for k, v in weight_map.items() if v == shard)
        missing = [k for k in expected if k not in shard_values]
        if missing:
            raise ValueError(f"{index_path!r} says {shard!r} holds {missing[:5]}, but it does "
                             f"not ({len(missing)} keys missing)")
        repeated = sorted(set(shard_values) & set(values))
        if repeated:
            raise ValueError(f"{shard_path!r} repeats {repeated[:5]}, already read from another "
                             f"shard of {index_path!r}")
        values.update(shard_values)
    return values


# ---------------------------------------------------------------------------------- safetensors
def _parse_safetensors(data: bytes, path: str) -> dict[str, np.ndarray]:
    """Tensors of one safetensors file: u64 header size, JSON header, then the tensors' bytes
    (each header entry: dtype, shape and data_offsets [begin, end) from the header's end)."""
    def bad(what: str) -> ValueError:
        return ValueError(f"{path!r} is truncated or not a safetensors file: {what}; "
                          f"download or save it again")

    if len(data) < 8:
        raise bad(f"{len(data)} bytes, fewer than the 8-byte header size")
    (header_size,) = struct.unpack("<Q", data[:8])
    if header_size > len(data) - 8:
        raise bad(f"the header says it is {header_size} bytes but only {len(data) - 8} follow")
    try:
        header = json.loads(data[8:8 + header_size])
    except ValueError as error:
        raise bad(f"its header is not JSON ({error})") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    body = memoryview(data)[8 + header_size:]
    values = {}
    for key, entry in header.items():
        try:
            dtype, shape, (begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
            shape = tuple(int(n) for n in shape)
            if any(n < 0 for n in shape):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise bad(f"tensor {key!r} has no valid dtype, shape and data_offsets: "
                      f"{entry!r}") from None
        if dtype not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{path!r}: tensor {key!r} has dtype {dtype}, which keras-bert does "
                             f"not read (it reads {', '.join(_SAFETENSORS_DTYPES)})")
        stored = np.dtype(_SAFETENSORS_DTYPES[dtype])
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end or end - begin != count * stored.itemsize:
            raise bad(f"tensor {key!r} of dtype {dtype} and shape {list(shape)} has "
                      f"data_offsets [{begin}, {end}], which do not hold "
                      f"{count * stored.itemsize} bytes")
        if end > len(body):
            raise bad(f"the bytes [{begin}, {end}) of tensor {key!r} run past the end of the "
                      f"data ({len(body)} bytes)")
        flat = np.frombuffer(body, dtype=stored, count=count, offset=begin)
        values[key] = _to_native(flat, "bfloat16" if dtype == "BF16" else stored).reshape(shape)
    if isinstance(metadata, dict) and metadata.get("format") == "tf":
        # save_pretrained(safe_serialization=True) from transformers' TF classes: TF's names
        return names_to_hf(values, path)
    return values


def _to_native(flat: np.ndarray, dtype: np.dtype | str) -> np.ndarray:
    """A native-order copy of ``flat`` (stored with ``dtype``; "bfloat16": raw uint16 bits)."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        return (flat.astype(np.uint32) << 16).view(np.float32)
    return flat.astype(np.dtype(dtype).newbyteorder("="))


# ---------------------------------------------------------------------------------- torch zip
@dataclasses.dataclass(frozen=True)
class _Storage:
    """A storage a pickle refers to: ``<archive>/data/<key>``, ``size`` elements of ``dtype``."""
    key: str
    dtype: str
    size: int


@dataclasses.dataclass(frozen=True)
class _Tensor:
    """What ``torch._utils._rebuild_tensor_v2`` receives: a view into a storage."""
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor(storage, storage_offset, size, stride, *_unused) -> _Tensor:
    return _Tensor(storage, int(storage_offset), tuple(size), tuple(stride))


def _rebuild_parameter(data, *_unused):
    return data


class _StorageType:
    """Stands for ``torch.<Name>Storage`` in a pickle: only its dtype matters."""

    def __init__(self, dtype: str):
        self.dtype = dtype


class _Refused(Exception):
    """A pickle asked for something a state dict never holds; the message says what."""


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickles a torch.save'd state dict, knowing only the globals such a pickle uses."""

    ALLOWED = {("collections", "OrderedDict"): OrderedDict,
               ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
               ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
               **{("torch", name): _StorageType(dtype) for name, dtype in _TORCH_STORAGES.items()}}

    def __init__(self, data: bytes, path: str):
        super().__init__(io.BytesIO(data))
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[(module, name)]
        raise _Refused(f"{self.path!r} needs the Python global {module}.{name}, which is "
                         f"not one of the few a plain PyTorch state dict of tensors uses; it "
                         f"was refused, not run. If you trust the file, load it with torch and "
                         f"{RESAVE_HINT}")

    def persistent_load(self, saved_id: Any) -> _Storage:
        if not (isinstance(saved_id, tuple) and len(saved_id) == 5 and saved_id[0] == "storage"
                and isinstance(saved_id[1], _StorageType)):
            raise _Refused(f"{self.path!r}: unknown PyTorch storage reference {saved_id!r}; "
                           f"{RESAVE_HINT}")
        _, storage_type, key, _location, size = saved_id
        return _Storage(str(key), storage_type.dtype, int(size))


def _parse_pytorch_zip(data: bytes, path: str) -> dict[str, np.ndarray]:
    """The tensors of a torch.save'd state dict (PyTorch >= 1.6 zip format)."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise ValueError(f"{path!r} is not a PyTorch zip checkpoint (it may be PyTorch's legacy "
                         f"pre-1.6 format, or truncated); load it with torch and {RESAVE_HINT}")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        pickles = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise ValueError(f"{path!r} has {len(pickles)} '<archive>/data.pkl' entries, not one; "
                             f"{RESAVE_HINT}")
        prefix = pickles[0][:-len("data.pkl")]
        names = set(archive.namelist())
        byteorder = archive.read(prefix + "byteorder").decode() \
            if prefix + "byteorder" in names else "little"
        try:
            state = _StateDictUnpickler(archive.read(pickles[0]), path).load()
        except _Refused as error:
            raise ValueError(str(error)) from None
        except (pickle.UnpicklingError, ValueError, EOFError, AttributeError, TypeError,
                IndexError, KeyError) as error:
            raise ValueError(f"{path!r}: its data.pkl is not a readable state dict "
                             f"({error!r}); {RESAVE_HINT}") from None
        if not isinstance(state, dict) or not all(
                isinstance(k, str) and isinstance(v, _Tensor) for k, v in state.items()):
            raise ValueError(f"{path!r} holds a {type(state).__name__}, not a state dict of "
                             f"name -> tensor; {RESAVE_HINT}")
        storages: dict[str, np.ndarray] = {}
        values = {}
        for key, tensor in state.items():
            storage = tensor.storage
            if storage.key not in storages:
                storages[storage.key] = _read_storage(archive, prefix, storage, byteorder, path)
            values[key] = _view(storages[storage.key], tensor, key, path)
        return values
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError) as error:
        raise ValueError(f"{path!r} is a damaged PyTorch zip checkpoint ({error}); "
                         f"{RESAVE_HINT}") from None


def _read_storage(archive: zipfile.ZipFile, prefix: str, storage: _Storage, byteorder: str,
                  path: str) -> np.ndarray:
    """A storage's elements as a flat native-order array (bfloat16 widened to float32)."""
    raw = archive.read(f"{prefix}data/{storage.key}")
    stored = np.dtype("<u2" if storage.dtype == "bfloat16" else storage.dtype)
    stored = stored.newbyteorder("<" if byteorder == "little" else ">")
    if len(raw) < storage.size * stored.itemsize:
        raise ValueError(f"{path!r}: storage {storage.key!r} should hold {storage.size} "
                         f"elements ({storage.size * stored.itemsize} bytes) but has "
                         f"{len(raw)} bytes; the file is damaged, {RESAVE_HINT}")
    flat = np.frombuffer(raw, dtype=stored, count=storage.size)
    return _to_native(flat, "bfloat16" if storage.dtype == "bfloat16" else stored)


def _view(storage: np.ndarray, tensor: _Tensor, key: str, path: str) -> np.ndarray:
    """A copy of the elements ``tensor`` picks out of ``storage`` (offset, shape, stride)."""
    if len(tensor.shape) != len(tensor.stride) or any(n < 0 for n in tensor.shape + tensor.stride):
        raise ValueError(f"{path!r}: tensor {key!r} has shape {tensor.shape} and stride "
                         f"{tensor.stride}, which do not describe a tensor; {RESAVE_HINT}")
    if 0 in tensor.shape:
        return np.zeros(tensor.shape, storage.dtype)
    last = tensor.offset + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride))
    if tensor.offset < 0 or last >= storage.size:
        raise ValueError(f"{path!r}: tensor {key!r} (offset {tensor.offset}, shape "
                         f"{list(tensor.shape)}, stride {list(tensor.stride)}) runs past its "
                         f"storage of {storage.size} elements; the file is damaged, "
                         f"{RESAVE_HINT}")
    start = storage[tensor.offset:]
    strides = tuple(s * storage.itemsize for s in tensor.stride)
    return np.lib.stride_tricks.as_strided(start, tensor.shape, strides, writeable=False).copy()
