"""A reader of nncodecs containers written from docs/format.md, "The container", alone.

It imports nothing of nncodecs but the frame decoder (``nncodecs.frame.decode_frame``;
tests/conformance/test_container_spec.py checks its imports): the keys, documents, chunk grid,
shard indexes, composite tensors, kept files and references are read here as the
specification describes them, so that a test that finds it agreeing bit for bit with
``nncodecs.Reader`` shows the specification is enough to read a container.

It is a test's reader: small and strict, not fast (every chunk is read whole, in
memory) and it raises ``SpecError`` for anything the specification says a reader
must refuse that it checks.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

import google_crc32c
import ml_dtypes
import numpy as np
import zstandard

from nncodecs.frame import decode_frame

__all__ = ["SpecError", "SpecReader", "escape", "unescape"]

EMPTY = 2**64 - 1
_FLOATS = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
_ML = {n: np.dtype(getattr(ml_dtypes, n)) for n in
       ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn")}  # fmt: skip
_LAYOUTS = {"csr", "csc", "coo", "mxfp4", "nvfp4", "records"}
_PARTS = {"csr": {"data", "indices", "indptr"}, "csc": {"data", "indices", "indptr"},
          "coo": {"coords", "data"}, "mxfp4": {"blocks", "scales"},
          "nvfp4": {"blocks", "scales"}}  # fmt: skip


class SpecError(Exception):
    """What the specification says a reader must refuse."""


def crc32c(data: Any) -> int:
    return int(google_crc32c.value(bytes(np.ascontiguousarray(data).reshape(-1).view(np.uint8))))


def escape(name: str) -> str:
    """A tensor's node name ("Node names", steps 1-5)."""
    return _escape_1_to_4(name).replace("\\", "%5C")


def _escape_1_to_4(name: str) -> str:
    if name == "":
        return "%00"
    out = name.replace("%", "%25").replace("/", "%2F")
    if out.startswith("_"):
        out = "%5F" + out[1:]
    if out.startswith("."):
        out = "%2E" + out[1:]
    return "zarr%2Ejson" if out == "zarr.json" else out


_CODES = {"25": "%", "2F": "/", "5F": "_", "2E": ".", "5C": "\\"}


def unescape(node: str) -> str:
    if node == "%00":
        return ""
    out, i = [], 0
    while i < len(node):
        if node[i] == "%" and node[i + 1 : i + 3] in _CODES:
            out.append(_CODES[node[i + 1 : i + 3]])
            i += 3
        else:
            out.append(node[i])
            i += 1
    return "".join(out)


def dtype_of(name: str) -> np.dtype:
    """A data type by its Zarr name (or nncodecs' ``float8_e4m3fn``)."""
    name = name.removeprefix("nncodecs.")
    return _ML[name] if name in _ML else np.dtype(name).newbyteorder("<")


def dtype_name(dt: np.dtype) -> str:
    for name, ml in _ML.items():
        if dt == ml:
            return name
    return np.dtype(dt).name


class _Store:
    """The keys of a directory or zip container ("What a reader must check", 9)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.zip = None
        if self.path.is_file():
            self.zip = zipfile.ZipFile(self.path)
            names = [i.filename for i in self.zip.infolist()]
            if len(names) != len(set(names)):
                raise SpecError("two zip entries of one name")

    def get(self, key: str) -> bytes | None:
        if self.zip is not None:
            try:
                info = self.zip.getinfo(key)
            except KeyError:
                return None
            if info.flag_bits & 1:
                raise SpecError(f"{key}: an encrypted entry")
            meta = key.rsplit("/", 1)[-1] == "zarr.json"
            if not meta and info.compress_type != zipfile.ZIP_STORED:
                raise SpecError(f"{key}: a compressed chunk entry")
            if meta and info.file_size > 64 << 20:
                raise SpecError(f"{key}: metadata over 64 MiB")
            return self.zip.read(key)
        root = self.path.resolve()
        real = (self.path / key).resolve()
        if root not in real.parents:
            raise SpecError(f"{key} resolves outside the container")
        if not real.exists():
            return None
        if not real.is_file():
            raise SpecError(f"{key}: not a regular file")
        return real.read_bytes()

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


class SpecReader:
    """A container's tensors and kept files, read as docs/format.md says."""

    def __init__(self, path: str | os.PathLike[str], _chain: tuple[str, ...] = ()) -> None:
        self.path = Path(path)
        self._chain = (*_chain, str(self.path.resolve()))
        if len(self._chain) > 65:
            raise SpecError("a chain of references over 64 deep")
        self.store = _Store(path)
        raw = self.store.get("zarr.json")
        if raw is None:
            raise SpecError("no root zarr.json")
        root = json.loads(raw)
        attrs = (root.get("attributes") or {}).get("nncodecs") if isinstance(root, dict) else None
        if root.get("node_type") != "group" or not isinstance(attrs, dict):
            raise SpecError("not a container")
        if attrs.get("format") != "nncodecs-container" or attrs.get("version") != 1:
            raise SpecError("not a container of version 1")
        tensors, meta = attrs.get("tensors", []), attrs.get("metadata", {})
        if not (isinstance(tensors, list) and all(isinstance(t, str) for t in tensors)):
            raise SpecError("tensors is not a list of strings")
        if not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
            raise SpecError("metadata is not strings")
        self.attrs, self.metadata, self.records = attrs, meta, attrs.get("records") == 1
        consolidated = root.get("consolidated_metadata")
        if isinstance(consolidated, dict) and consolidated.get("kind") == "inline":
            self.docs: dict[str, Any] = consolidated["metadata"]
        else:  # (no consolidated metadata: a writer died; list the members)
            self.docs = self._listed()
        self.nodes: dict[str, tuple[str, dict[str, Any]]] = {}  # name -> (node, its doc)
        for node, doc in self.docs.items():
            if "/" in node:
                continue
            own = doc.get("attributes", {}).get("nncodecs")
            if not (isinstance(own, dict) and own.get("complete") is True):
                continue
            layout = own.get("layout", "dense")
            if (layout == "dense") != (doc.get("node_type") == "array"):
                continue
            name = own["name"] if isinstance(own.get("name"), str) else unescape(node)
            if name in self.nodes or node not in (escape(name), _escape_1_to_4(name)):
                raise SpecError(f"node {node!r} does not stand for {name!r}, or twice")
            self.nodes[name] = (node, doc)
        if consolidated is not None and any(t not in self.nodes for t in tensors):
            raise SpecError("a listed tensor has no complete node")
        order = [t for t in tensors if t in self.nodes]
        self.order = order + sorted(set(self.nodes) - set(order))
        self.files = self._kept_files()

    def _listed(self) -> dict[str, Any]:
        keys = (
            [i.filename for i in self.store.zip.infolist()]
            if self.store.zip is not None
            else [p.relative_to(self.path).as_posix() for p in self.path.rglob("zarr.json")]
        )
        docs = {}
        for key in keys:
            if key.endswith("/zarr.json"):
                raw = self.store.get(key)
                if raw is not None:
                    docs[key.removesuffix("/zarr.json")] = json.loads(raw)
        return docs

    def _kept_files(self) -> dict[str, str]:
        files = self.attrs.get("files", {})
        if not isinstance(files, dict):
            raise SpecError("files is not an object")
        for name, node in files.items():
            parts = name.split("/")
            if any(p in ("", ".", "..") for p in parts) or "\\" in name or "\0" in name:
                raise SpecError(f"kept file name {name!r}")
            rest = node.removeprefix("_files/") if isinstance(node, str) else ""
            if not (node.startswith("_files/") and rest.isdigit()):
                raise SpecError(f"kept file node {node!r}")
            own = self.docs[node].get("attributes", {}).get("nncodecs", {})
            if own.get("file") != name:
                raise SpecError(f"kept file {name!r}: its array is another's")
        listed = {k for k in self.docs if k.startswith("_files/") and k[7:].isdigit()}
        if listed - set(files.values()):
            raise SpecError("a kept file's array has no record")
        return dict(files)

    # -- reads -------------------------------------------------------------------------

    def layout(self, name: str) -> str:
        own = self.nodes[name][1]["attributes"]["nncodecs"]
        return own.get("layout", "dense")

    def read_tensor(self, name: str) -> Any:
        """A dense tensor as a NumPy array; a sparse one as a dict of its parts and
        ``shape``; an MXFP4 / NVFP4 one as (blocks, scales); records as their bytes."""
        node, doc = self.nodes[name]
        layout = self.layout(name)
        if layout == "dense":
            return self.read_array(node, doc)
        if layout not in _LAYOUTS:
            raise SpecError(f"tensor {name!r}: unknown layout {layout!r}")
        own = doc["attributes"]["nncodecs"]
        parts = {k[len(node) + 1 :]: self.read_array(k, d) for k, d in self.docs.items()
                 if k.startswith(node + "/") and "/" not in k[len(node) + 1 :]}  # fmt: skip
        if layout == "records":
            return _interleave(parts, own)
        if set(parts) != _PARTS[layout]:
            raise SpecError(f"tensor {name!r}: parts {sorted(parts)}")
        if layout in ("mxfp4", "nvfp4"):
            return parts["blocks"], parts["scales"]
        return {**parts, "shape": tuple(own["shape"])}

    def read_file(self, name: str) -> bytes:
        node = self.files[name]
        return self.read_array(node, self.docs[node]).tobytes()

    def read_array(self, path: str, doc: dict[str, Any]) -> np.ndarray:
        """An array's values, its records checked; a delta array through its reference."""
        own = doc.get("attributes", {}).get("nncodecs", {})
        dt, shape = dtype_of(doc["data_type"]), tuple(doc["shape"])
        if own.get("shape", list(shape)) != list(shape):
            raise SpecError(f"{path}: zarr.json says shape {list(shape)}, records {own['shape']}")
        if own.get("dtype", dtype_name(dt)) != dtype_name(dt):
            raise SpecError(
                f"{path}: zarr.json says dtype {dtype_name(dt)}, records {own['dtype']}"
            )
        if self.records and own.get("chunks") != "all":
            raise SpecError(f"{path}: no chunks record")
        codecs = doc["codecs"]
        inner = codecs
        per = 0
        chunk = tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
        if codecs[0]["name"] == "sharding_indexed":
            config = codecs[0]["configuration"]
            index = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
            if config.get("index_location") != "end" or config["index_codecs"] != index:
                raise SpecError(f"{path}: shard index declared otherwise")
            inner, shard = config["codecs"], chunk
            chunk = tuple(config["chunk_shape"])
            per = shard[0] // chunk[0]
        if doc["chunk_key_encoding"] != {"name": "default", "configuration": {"separator": "/"}}:
            raise SpecError(f"{path}: chunk keys not the default")
        delta = inner[0] if inner[0]["name"] == "nncodecs.delta" else None
        coded_dt = np.dtype(f"<u{dt.itemsize}") if delta is not None else dt
        if delta is not None:
            inner = [delta["configuration"]["codec"]]
        rows = chunk[0] if shape else 1
        count = -(-shape[0] // rows) if shape else 1
        if 0 in shape:
            count = 0
        frames = self._chunks(path, len(shape), count, per, strict=own.get("chunks") == "all")
        out = np.zeros((count * rows, *shape[1:]) if shape else (), coded_dt)
        for i, raw in enumerate(frames):
            if raw is None:  # (a container written before the records: fill values)
                continue
            values = _decode(raw, inner, coded_dt, int(np.prod(chunk)))
            if shape:
                out[i * rows : (i + 1) * rows] = values.reshape(chunk)
            else:
                out[()] = values.reshape(())
        out = out[: shape[0]] if shape else out
        if delta is not None:
            out = self._undo_delta(path, delta["configuration"], out, dt, own)
        if "crc32c" in own and crc32c(out) != own["crc32c"]:
            raise SpecError(f"{path}: CRC32C differs from its record")
        return out

    def _chunks(self, path: str, ndim: int, count: int, per: int, strict: bool) -> list[Any]:
        def key(i: int) -> str:
            return f"{path}/c" + "".join(f"/{c}" for c in ([i] + [0] * (ndim - 1))[:ndim])

        if not per:
            got = [self.store.get(key(i)) for i in range(count)]
            if strict and any(g is None for g in got):
                raise SpecError(f"{path}: a chunk is missing")
            return got
        out: list[Any] = []
        for s in range(-(-count // per)):
            inner = min(per, count - s * per)
            raw = self.store.get(key(s))
            if raw is None:
                if strict:
                    raise SpecError(f"{path}: shard {s} is missing")
                out += [None] * inner
                continue
            size = 16 * per + 4
            if len(raw) < size:
                raise SpecError(f"{path}: shard {s} is cut short")
            index = raw[-size:]
            if crc32c(np.frombuffer(index[:-4], np.uint8)) != int.from_bytes(index[-4:], "little"):
                raise SpecError(f"{path}: shard {s}'s index fails its CRC32C")
            spans = np.frombuffer(index[:-4], "<u8").reshape(per, 2)[:inner].tolist()
            end = 0
            for offset, length in spans:
                if offset == length == EMPTY:
                    if strict:
                        raise SpecError(f"{path}: a chunk of shard {s} is missing")
                    out.append(None)
                    continue
                if offset < end or offset + length > len(raw) - size:
                    raise SpecError(f"{path}: shard {s}'s index is out of order or too long")
                end = offset + length
                out.append(raw[offset:end])
        return out

    def _undo_delta(
        self, path: str, config: dict[str, Any], coded: np.ndarray, dt: np.dtype, own: dict
    ) -> np.ndarray:
        ref = config["reference"]
        place = PurePosixPath(ref["container"])
        if place.is_absolute() or ".." in place.parts or "://" in ref["container"]:
            raise SpecError(f"{path}: reference {ref['container']!r} outside the directory")
        there = self.path.parent / place
        if str(there.resolve()) in self._chain:
            raise SpecError(f"{path}: a cycle of references")
        other = SpecReader(there, self._chain)
        try:
            rnode, rdoc = other.nodes[ref["tensor"]]
            rown = rdoc["attributes"]["nncodecs"]
            base = other.read_array(rnode, rdoc)
        finally:
            other.close()
        recorded = rown.get("sha256")
        if isinstance(recorded, str):
            if recorded != ref["sha256"]:
                raise SpecError(f"{path}: its reference is another tensor (SHA-256)")
        elif "crc32c" in ref and crc32c(base) != ref["crc32c"]:
            raise SpecError(f"{path}: its reference is another tensor (CRC32C)")
        if base.shape != coded.shape or base.dtype.itemsize != dt.itemsize:
            raise SpecError(f"{path}: its reference has another shape or type")
        r = np.ascontiguousarray(base).view(coded.dtype)
        if config["transform"] == "xor":
            bits = coded ^ r
        elif config["transform"] == "sub":
            one = coded.dtype.type(1)
            d = (coded >> one) ^ (np.zeros_like(coded) - (coded & one))
            bits = r + d  # (unsigned: modulo 2^W)
        else:
            raise SpecError(f"{path}: transform {config['transform']!r}")
        out = bits.view(dt)
        chunks = own.get("chunk_crc32c")
        if chunks and out.ndim:
            rows = -(-out.shape[0] // len(chunks))
            got = [crc32c(out[i : i + rows]) for i in range(0, max(out.shape[0], 1), rows)]
            if got != chunks:
                raise SpecError(f"{path}: a chunk differs from its chunk_crc32c record")
        return out

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> SpecReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decode(raw: bytes, codecs: list[dict[str, Any]], dt: np.dtype, count: int) -> np.ndarray:
    """One chunk's ``count`` elements of ``dt`` under its codec chain ("Codecs")."""
    names = [c["name"] for c in codecs]
    nbytes = count * dt.itemsize
    if names == ["nncodecs.weights"]:
        name = dtype_name(dt)
        out = decode_frame(raw, elements=True, layout=name if name in _FLOATS else "none",
                           planes=dt.itemsize, dtype=name, max_decoded=nbytes)  # fmt: skip
        data = np.asarray(out).tobytes()
    elif names == ["bytes", "zstd"]:
        data = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    elif names == ["bytes"]:
        data = raw
    else:
        raise SpecError(f"codecs {names} are none a container uses")
    if len(data) != nbytes:
        raise SpecError(f"a chunk of {len(data)} bytes, not {nbytes}")
    return np.frombuffer(data, dt).copy()


def _interleave(parts: dict[str, np.ndarray], own: dict[str, Any]) -> np.ndarray:
    fields = [(f, dtype_of(t), int(c)) for f, t, c in own["fields"]]
    if set(parts) != {f for f, _, _ in fields}:
        raise SpecError(f"parts {sorted(parts)} are not the fields")
    record = sum(dt.itemsize * c for _, dt, c in fields)
    (size,) = own["shape"]
    n = size // record
    out, at = np.empty((n, record), np.uint8), 0
    for field, dt, c in fields:
        width = dt.itemsize * c
        out[:, at : at + width] = (
            np.ascontiguousarray(parts[field]).view(np.uint8).reshape(n, width)
        )
        at += width
    if crc32c(out) != own["crc32c"]:
        raise SpecError("records put back differ from their crc32c record")
    return out.reshape(-1)
