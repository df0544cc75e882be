"""torch.distributed plumbing for a fold run: the process group, the DDP model, all-reduces."""

from __future__ import annotations

import gc
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

COLLECTIVE_TIMEOUT = timedelta(minutes=5)
"""How long a rank waits for its peers (rendezvous or a collective) before giving up."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now, for ranks started together (tests, scripts); the
    service's rank 0 listens before it announces its port instead (`master_store`)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def master_store(host: str, timeout: timedelta = COLLECTIVE_TIMEOUT) -> dist.TCPStore:
    """Rank 0's rendezvous store, already listening on a port the OS picked (its `.port`).

    Make it before the port is announced and join the process group with it: a port found
    free and closed again (`free_port`) can be taken by any other socket before rank 0 binds
    it, and the run then fails at rendezvous with EADDRINUSE. Use a store for one run only:
    the keys a run leaves would mislead the next one's rendezvous.
    """
    return dist.TCPStore(host, 0, is_master=True, wait_for_workers=False, timeout=timeout)


@contextmanager
def process_group(
    *,
    backend: str,
    rank: int,
    world_size: int,
    master_addr: str,
    master_port: int,
    store: dist.Store | None = None,
    timeout: timedelta = COLLECTIVE_TIMEOUT,
) -> Iterator[dist.Store]:
    """Join a TCP-rendezvous process group for the duration of the block; always leave it.

    Rank 0 listens at `master_port` and the others connect there; rank 0 may instead bring
    the `store` it listens with already (`master_store`, the port the others were given).
    The block gets the store, where the ranks can leave each other messages. ``timeout`` is
    how long a collective waits for the other ranks (the rendezvous waits COLLECTIVE_TIMEOUT).
    """
    if dist.is_initialized():  # a previous run in this process did not clean up
        dist.destroy_process_group()
    if store is None:
        store = dist.TCPStore(
            master_addr,
            master_port,
            is_master=rank == 0,
            wait_for_workers=False,
            timeout=COLLECTIVE_TIMEOUT,
        )
    dist.init_process_group(
        backend,
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timeout,
    )
    try:
        yield store
    finally:
        dist.destroy_process_group()


def resolve_device(backend: str, device: str | torch.device | None) -> torch.device:
    """The device this rank trains on: the given one, else cuda:0 for nccl and cpu for gloo."""
    if device is not None:
        resolved = torch.device(device)
    else:
        resolved = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    if resolved.type == "cuda":
        torch.cuda.set_device(resolved)
    return resolved


def wrap_model(model: nn.Module, device: torch.device) -> nn.Module:
    """Move the model to `device` and wrap it in DDP when there is more than one rank.

    DDP broadcasts rank 0's parameters and buffers to every rank when it is constructed
    (`init_sync=True`), so all ranks start from identical weights even if their seeds differed.
    A single rank trains the bare model: the same arithmetic without DDP's per-step hooks.
    """
    model = model.to(device)
    if dist.get_world_size() == 1:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids, init_sync=True)


def release_models(models: list[nn.Module]) -> None:
    """Free DDP wrappers while the process group still exists.

    DDP's C++ reducer holds the process group. If the reducer held the last reference,
    freeing it would run ProcessGroupGloo's destructor with the GIL held, and that destructor
    joins gloo's worker threads, one of which may be waiting for the GIL to drop the tensor of
    the work it just finished: a deadlock (seen in about one warm fold run in ten). Freed
    first, the group is destroyed later by `destroy_process_group`, which releases the GIL.
    DDP's hooks make reference cycles, hence the collection.
    """
    models.clear()
    gc.collect()


def broadcast_object(obj: Any, device: torch.device) -> Any:
    """Rank 0's `obj` on every rank (pickled; for small things such as a checkpoint)."""
    if dist.get_world_size() == 1:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=0, device=device if device.type == "cuda" else None)
    return holder[0]


def to_device(obj: Any, device: torch.device) -> Any:
    """Tensors inside ``obj`` (a tensor, or dicts, lists and tuples of them) on ``device``."""
    if torch.is_tensor(obj):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, dict):
        return {key: to_device(value, device) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to_device(value, device) for value in obj)
    return obj
