"""Python fuzz targets (atheris): every parser a user's file meets above the C++ kernels.

Targets, each a function of the input bytes:

* ``frame``: a frame through the Python layer (``decode_frame``, then ``decode_weights``
  with the element type the frame records);
* ``container``: a container's metadata, attributes, shard indexes and chunks. The input
  is one byte that picks a seed container and one of its members, then that member's new
  bytes: the zip is rebuilt with them (so zip's own CRC does not hide the member from the
  parsers), read whole by ``Reader`` (every tensor, checked), verified, and, where it
  records a source file, restored as that file (GGUF / ONNX / torch splices, safetensors
  records);
* ``safetensors``, ``gguf``, ``onnx``, ``torch``, ``npz``, ``ztensor``: a model file of that
  format read by ``nncodecs.formats.iter_source`` (headers, shapes, offsets, the protobuf
  wire walk, the weights-only unpickler's storages, the ztensor package's index).

A target returns when its input decodes or raises a clear error (the classes of
``scripts/make_conformance.py``'s ``ERRORS``); any other exception is a finding, and
atheris keeps its input. A decode that succeeds must also be stable: the same input read
twice gives the same digest.

Usage::

    python fuzz/targets.py TARGET [libFuzzer options] CORPUS_DIR [SEED_DIR ...]
    python fuzz/targets.py --write-seeds TARGET DIR

Seeds: the conformance corpus (tests/conformance), accepted and rejected, and for
``container`` also containers made from its model files; for ``ztensor`` a file made by
``scripts/make_conformance.py``'s ``ztensor_model`` (not in the corpus: 460 KB).
``make fuzz`` runs every target (fuzz/run_python.sh); tests/hostile/test_fuzz.py runs each over
its seeds and over the regression cases in fuzz/regressions/TARGET.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import shutil
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "conformance"
sys.path.insert(0, str(ROOT / "scripts"))

#: The clear errors a hostile input may raise (as scripts/make_conformance.py).
CLEAR = ("CorruptDataError", "NotAContainerError", "ReferenceProblemError", "ValueError",
         "TypeError")  # fmt: skip
MODEL_SUFFIX = {"safetensors": ".safetensors", "gguf": ".gguf", "onnx": ".onnx",
                "torch": ".pt", "npz": ".npz", "ztensor": ".zt"}  # fmt: skip
TARGETS = ("frame", "container", *MODEL_SUFFIX)
#: Where each input is written to be read as a file (tmpfs where there is one).
SCRATCH = Path(tempfile.mkdtemp(prefix="nncodecs-fuzz-", dir="/dev/shm" if
                                os.path.isdir("/dev/shm") else None))  # fmt: skip
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


class FindingError(AssertionError):
    """An input that a parser answered with something other than a result or a clear error."""


#: Where a finding's input is kept when fuzzing (main() sets it from -artifact_prefix):
#: libFuzzer keeps it too, but a process that dies while it exits (libFuzzer's own timer
#: seen firing on a loaded machine) would lose it.
KEEP: str | None = None


def _keep(data: bytes) -> None:
    if KEEP is not None:
        Path(f"{KEEP}finding-{hashlib.sha1(data).hexdigest()}").write_bytes(data)


def clear(exc: BaseException) -> bool:
    return type(exc).__name__ in CLEAR


def _checked(run: Callable[[], str], data: bytes) -> None:
    """Run a decode: an unclear error is a finding. One input in eight (by its CRC, so
    always the same ones) that decodes is decoded again: another result is a finding."""
    try:
        first = run()
    except Exception as exc:
        if clear(exc):
            return
        _keep(data)
        raise FindingError(f"{type(exc).__name__}: {exc}") from exc
    if zlib.crc32(data) % 8 == 0 and run() != first:
        _keep(data)
        raise FindingError("the same input decoded twice to different results")


# -- frame ----------------------------------------------------------------------------


def frame(data: bytes) -> None:
    import numpy as np

    from nncodecs.frame import decode_frame
    from nncodecs.frame.weights import decode_weights

    def run() -> str:
        a = decode_frame(data)
        try:
            w = decode_weights(data, None, None)
        except Exception as exc:  # (a frame of bytes has no element type to decode to)
            if not clear(exc):
                raise
            w = np.zeros(0, np.uint8)
        b = np.ascontiguousarray(w).reshape(-1).view(np.uint8)
        return hashlib.sha256(a.tobytes() + b"|" + b.tobytes()).hexdigest()

    _checked(run, data)


# -- container ------------------------------------------------------------------------


def _seed_containers() -> list[tuple[str, list[tuple[zipfile.ZipInfo, bytes]]]]:
    """The containers a ``container`` input edits, in a fixed order: the conformance
    corpus's, then one made from each of its model files (source records)."""
    paths = sorted((CORPUS / "accept").glob("container-*.zarr.zip"))
    made = Path(tempfile.mkdtemp(prefix="seeds-", dir=SCRATCH))
    from nncodecs.formats import compress

    for model in sorted((CORPUS / "accept").glob("model-*")):
        if model.suffix == ".pt" and not _has_torch():
            continue
        out = made / (model.name + ".zarr.zip")
        compress(model, out)
        paths.append(out)
    found = []
    for path in paths:
        with zipfile.ZipFile(path) as z:
            found.append((path.name, [(i, z.read(i)) for i in z.infolist()]))
    return found


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


_CONTAINERS: list[tuple[str, list[tuple[zipfile.ZipInfo, bytes]]]] = []


def containers() -> list[tuple[str, list[tuple[zipfile.ZipInfo, bytes]]]]:
    if not _CONTAINERS:
        _CONTAINERS.extend(_seed_containers())
    return _CONTAINERS


def _pick(selector: int) -> tuple[int, int]:
    """The (container, member) a selector byte names: every member of every seed
    container has one (the seeds are fewer than 256 members in all)."""
    pairs = [(c, m) for c, (_, members) in enumerate(containers()) for m in range(len(members))]
    return pairs[selector % len(pairs)]


def container_input(c: int, m: int, content: bytes) -> bytes:
    pairs = [(ci, mi) for ci, (_, ms) in enumerate(containers()) for mi in range(len(ms))]
    return bytes([pairs.index((c, m))]) + content


def container(data: bytes) -> None:
    if not data:
        return
    c, m = _pick(data[0])
    name, members = containers()[c]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, (info, content) in enumerate(members):
            z.writestr(info, data[1:] if k == m else content)
    path = SCRATCH / name
    path.write_bytes(buf.getvalue())
    out = SCRATCH / "restored"
    try:
        _checked(lambda: _read_container(path, out), data)
    finally:
        path.unlink(missing_ok=True)
        for left in SCRATCH.glob("restored*"):
            left.unlink()


def _read_container(path: Path, out: Path) -> str:
    from make_conformance import digest

    from nncodecs import Reader
    from nncodecs.formats import decompress

    with Reader(path) as r:
        got = digest((n, r.read_tensor(n, check=True)) for n in r)
        r.verify()
        fmt = r.metadata.get("source.format")
    if isinstance(fmt, str) and fmt in MODEL_SUFFIX:
        target = out.with_suffix(MODEL_SUFFIX[fmt])
        decompress(path, target, force=True)
        got += hashlib.sha256(target.read_bytes()).hexdigest()
        target.unlink()
    return got


# -- model files ----------------------------------------------------------------------


def model(kind: str) -> Callable[[bytes], None]:
    def target(data: bytes) -> None:
        from make_conformance import digest

        from nncodecs.formats import iter_source

        path = SCRATCH / ("input" + MODEL_SUFFIX[kind])
        path.write_bytes(data)
        try:
            _checked(lambda: digest(iter_source(path)), data)
        finally:
            path.unlink(missing_ok=True)

    target.__name__ = kind
    return target


def target_function(name: str) -> Callable[[bytes], None]:
    if name == "frame":
        return frame
    if name == "container":
        return container
    if name in MODEL_SUFFIX:
        return model(name)
    raise SystemExit(f"unknown target {name!r}: one of {', '.join(TARGETS)}")


# -- seeds ----------------------------------------------------------------------------


def seeds(name: str) -> Iterator[bytes]:
    """The target's seed inputs (see the module)."""
    if name == "frame":
        for sub in ("accept", "reject"):
            for p in sorted((CORPUS / sub).glob("*.bin")):
                yield p.read_bytes()
    elif name == "container":
        for c, (_, members) in enumerate(containers()):
            for m, (_, content) in enumerate(members):
                yield container_input(c, m, content)
    elif name == "ztensor":
        from make_conformance import ztensor_model

        made = Path(tempfile.mkdtemp(prefix="seeds-", dir=SCRATCH))
        for _, _, data in ztensor_model(made):
            yield data
    else:
        for sub in ("accept", "reject"):
            for p in sorted((CORPUS / sub).glob(f"model-{name}*")):
                yield p.read_bytes()


def regressions(name: str) -> list[Path]:
    """Inputs that once were findings (each a case of tests/hostile/test_fuzz.py)."""
    return sorted((ROOT / "fuzz" / "regressions" / name).glob("*"))


def _import_all() -> None:
    import importlib
    import pkgutil

    import nncodecs

    for info in pkgutil.walk_packages(nncodecs.__path__, "nncodecs."):
        skip = ("nncodecs.gpu", "nncodecs.integrations", "nncodecs.__main__")
        if not info.name.startswith(skip):
            importlib.import_module(info.name)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--write-seeds"]:
        name, out = argv[1], Path(argv[2])
        out.mkdir(parents=True, exist_ok=True)
        count = 0
        for count, data in enumerate(seeds(name), 1):
            (out / f"seed-{count}").write_bytes(data)
        print(f"{count} seed inputs written to {out}")
        return
    if not argv or argv[0] not in TARGETS:
        raise SystemExit(__doc__)
    import atheris

    global KEEP
    name = argv[0]
    KEEP = next((a.split("=", 1)[1] for a in argv if a.startswith("-artifact_prefix=")), "./")
    with atheris.instrument_imports(include=["nncodecs"]):
        _import_all()  # (every parser, instrumented for coverage)
    fn = target_function(name)
    if name == "container":
        containers()  # (made before fuzzing starts)
    atheris.Setup([sys.argv[0], *argv[1:]], fn)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv[1:])
