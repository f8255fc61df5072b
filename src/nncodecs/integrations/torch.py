"""torch state dicts in and out of containers, dtypes and tied tensors kept; and
whole checkpoints back as ``torch.load`` gives them (:func:`load`).

Tied (shared) tensors, such as an embedding also used as the output layer,
are stored once; ``load_state_dict`` gives back one tensor under every name.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from nncodecs.container import Reader
from nncodecs.errors import CorruptDataError
from nncodecs.extras import need
from nncodecs.formats.source import ORDER, TIED, named_order
from nncodecs.formats.torch_full import FULL, PICKLE_FILE, STORAGES, replay, select
from nncodecs.formats.torch_members import member_record
from nncodecs.frame import get_threads
from nncodecs.gcpause import collector_paused

__all__ = ["load", "load_state_dict", "save_state_dict"]

_TIED = TIED


def save_state_dict(state_dict: dict[str, Any], path: Any, codec: str = "auto") -> None:
    """Write a state dict; tensors that share storage (the same view) are stored once."""
    seen: dict[tuple, str] = {}
    tied: dict[str, str] = {}
    from nncodecs.container import Writer  # (a process that only loads needs none)

    with Writer(path, codec=codec) as w:
        for name, tensor in state_dict.items():
            key = (
                tensor.device.type,
                tensor.untyped_storage().data_ptr(),
                tensor.storage_offset(),
                tuple(tensor.shape),
                tuple(tensor.stride()),
                tensor.dtype,
            )
            if tensor.numel() and key in seen:
                tied[name] = seen[key]
                continue
            seen[key] = name
            w.add_tensor(name, tensor)
        w.metadata[_TIED] = json.dumps(tied)
        w.metadata[ORDER] = json.dumps(list(state_dict))


def load_state_dict(path: Any, device: str = "cpu") -> dict[str, Any]:
    """The state dict back, in its order, tied tensors as one tensor."""
    if device != "cpu":
        torch = need("torch", "a device other than the CPU")
        torch.device(device)  # (a bad name refused before anything is read)
    with collector_paused(), Reader(path) as r:
        if r.metadata.get(FULL):
            raise ValueError(
                f"{path}: a checkpoint holding more than a state dict (model and optimizer "
                "state, ...): nncodecs.integrations.torch.load gives it back whole"
            )
        order, tied = named_order(r)  # (checked: a tie names a stored tensor)
        names = [name for name in order if name not in tied]
        out: dict[str, Any] = {}
        ahead = None if device == "cpu" else _AHEAD_BYTES  # (on the CPU every tensor stays)
        for name, tensor in zip(names, _read_all(r, names, ahead), strict=True):
            out[name] = tensor if device == "cpu" else tensor.to(device)
        for name, target in tied.items():
            out[name] = out[target]
        return {name: out[name] for name in order}


def load(path: Any, prefix: Any = None, file: str | None = None) -> Any:
    """The object ``torch.load(file, weights_only=True)`` gives of the torch checkpoint a
    container was made from (``nncodecs compress ckpt.pt``): the same types and keys,
    tensors of the same dtype, shape, stride and bytes, tensors that shared a storage
    sharing one. Its kept pickle is replayed through torch's weights-only unpickler
    (never :mod:`pickle`), each storage read from the container, checked, as the pickle
    asks for it, on the CPU.

    ``prefix``: only that part of the object (``"model"``, ``"optimizer.state.0"``, or
    a tuple of keys), and only the storages its tensors use are read and decoded.

    ``file``: in the container of a folder (a Trainer checkpoint), the torch file of that
    name stored typed (``"optimizer.pt"``).

    A container of a state dict from another source (safetensors, a legacy pickle)
    gives its state dict (:func:`load_state_dict`), or the part at ``prefix``.
    """
    with collector_paused(), Reader(path) as r:
        if file is not None:
            member = member_record(r, file)
            record, pickle_file = json.dumps(member["storages"]), member["pickle_file"]
        else:
            record, pickle_file = r.metadata.get(STORAGES), PICKLE_FILE
        if record is None:
            if r.metadata.get(FULL):
                raise CorruptDataError(f"{path}: the record of the checkpoint's storages is lost")
            whole = load_state_dict(path)
            return whole if prefix is None else select(whole, prefix)
        try:
            storages = json.loads(record)
        except ValueError:
            storages = None
        if not isinstance(storages, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v in r for k, v in storages.items()
        ):
            raise CorruptDataError(f"{path}: the record of the checkpoint's storages is damaged")
        try:
            pickle = r.read_file(pickle_file)
        except KeyError:
            raise CorruptDataError(f"{path}: the checkpoint's kept pickle is missing") from None
        return replay(pickle, storages, lambda n: r.read_tensor(n, to="torch", check=True), prefix)


#: A load to another device holds about this many bytes of tensors read ahead on the host.
_AHEAD_BYTES = 64 << 20


def _read_all(r: Reader, names: list[str], ahead: int | None) -> Iterator[Any]:
    """Every tensor of ``names`` as torch, checked, in order, two read at once where the
    codecs have two threads: one tensor's Python work, file read and page faults
    overlap the other's decoding (on two cores, the generated 1 GiB model loaded in
    0.43-0.47 s instead of 0.72, the 2,472-tensor one in 0.86-0.91 s instead of 1.24).
    ``ahead``: at most about that many bytes read and not yet taken (``None``: no
    bound; a bound of four tensors made many small ones slower, 1.14-1.27 s: every
    one was waited on). The first error stops the reads."""
    if get_threads() < 2 or len(names) < 2:
        yield from (r.read_tensor(name, to="torch", check=True) for name in names)
        return
    failed = threading.Event()

    def read(name: str) -> Any:
        if failed.is_set():  # (the first error is the answer: no more reads)
            return None
        try:
            return r.read_tensor(name, to="torch", check=True)
        except BaseException:
            failed.set()
            raise

    with ThreadPoolExecutor(2, thread_name_prefix="nncodecs-load") as pool:
        waiting: collections.deque[tuple[Future, int]] = collections.deque()
        held = 0
        try:
            for name in names:
                size = 0 if ahead is None else r.info(name).nbytes
                waiting.append((pool.submit(read, name), size))
                held += size
                while ahead is not None and held > ahead and len(waiting) > 1:
                    future, size = waiting.popleft()
                    held -= size
                    yield future.result()
            while waiting:
                yield waiting.popleft()[0].result()
        finally:  # (an error, an interrupt or a caller that stops: no more reads)
            failed.set()
