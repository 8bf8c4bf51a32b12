"""The TFRecord file format in pure Python: framing records and writing files, GZIP or plain.

A TFRecord file is a sequence of records, each framed as TensorFlow's `tf.io.TFRecordWriter`
frames it (tensorflow/core/lib/io/record_writer.cc):

    uint64 length (little-endian)
    uint32 masked CRC-32C of the 8 length bytes
    byte   data[length]
    uint32 masked CRC-32C of the data

where the mask is ``((crc >> 15) | (crc << 17)) + 0xa282ead8`` (mod 2**32). A GZIP file is the
same byte stream compressed as one gzip member, which `tf.data.TFRecordDataset(...,
compression_type="GZIP")` reads. Writing here needs no TensorFlow, so worker processes can frame
their own records in parallel, and the plain files are byte-identical to TensorFlow's.
"""

from __future__ import annotations

import gzip
import logging
import struct
from typing import IO

from keras_bert import fileio

logger = logging.getLogger(__name__)

_MASK_DELTA = 0xA282EAD8
_UINT64 = struct.Struct("<Q")
_UINT32 = struct.Struct("<I")
# TensorFlow's GZIP writer uses zlib's default level (6); Python's gzip defaults to 9 (slower).
_GZIP_LEVEL = 6


def _crc32c_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


def crc32c_python(data: bytes, crc: int = 0) -> int:
    """CRC-32C (Castagnoli) in plain Python: correct but slow (a few MB/s)."""
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


_TABLE = _crc32c_table()

try:
    import google_crc32c

    if google_crc32c.implementation != "c":
        raise ImportError("google-crc32c without its C extension")
    crc32c = google_crc32c.value
except ImportError:  # pragma: no cover - google-crc32c is a dependency; this is a safety net
    logger.warning("google-crc32c (C) is not available: framing TFRecords with a slow pure-Python "
                   "CRC-32C; `pip install google-crc32c` for speed")
    crc32c = crc32c_python


def masked_crc32c(data: bytes) -> int:
    """The CRC TFRecord files store: CRC-32C of `data`, rotated right by 15 bits, plus a delta."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """`data` framed as one TFRecord: length, its CRC, the data, the data's CRC."""
    length = _UINT64.pack(len(data))
    return b"".join((length, _UINT32.pack(masked_crc32c(length)), data,
                     _UINT32.pack(masked_crc32c(data))))


class TFRecordFileWriter:
    """Writes already framed records (see `frame_record`) to a local or remote file.

    Args:
        path: where to write; local, or any scheme tf.io.gfile knows (gs://...).
        gzip_compress: compress the file as GZIP, as `TFRecordOptions(compression_type="GZIP")`.
    """

    def __init__(self, path: str, gzip_compress: bool = False) -> None:
        self.path = path
        self._raw: IO[bytes] = fileio.open_file(path, "wb")
        # mtime=0 and no file name in the header: the same records give the same bytes.
        self._file: IO[bytes] = (
            gzip.GzipFile(filename="", mode="wb", fileobj=self._raw, compresslevel=_GZIP_LEVEL,
                          mtime=0) if gzip_compress else self._raw)

    def write_framed(self, framed: bytes) -> None:
        self._file.write(framed)

    def write(self, data: bytes) -> None:
        """Frames and writes one record."""
        self._file.write(frame_record(data))

    def close(self) -> None:
        if self._file is not self._raw:
            self._file.close()  # flushes the gzip trailer; does not close the raw file
        self._raw.close()

    def __enter__(self) -> TFRecordFileWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
