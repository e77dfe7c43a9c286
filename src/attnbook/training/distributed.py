"""Data-parallel training over several processes (chapter 17), started by ``torchrun``.

``torchrun --nproc_per_node=N`` starts N copies of the script and tells each its rank through
environment variables. Each process holds a whole copy of the model, computes gradients on its share
of the batch, and ``DistributedDataParallel`` averages the gradients across processes during the
backward pass, so every copy takes the same optimiser step. The backend is NCCL on GPUs and gloo on CPUs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    """This process's place in the run: ``rank`` of ``world_size``; ``local_rank`` picks its GPU."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def init_distributed(device_type: str) -> DistInfo:
    """Join the process group when started by torchrun (``WORLD_SIZE`` > 1); otherwise a single process."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1:
        return DistInfo()
    info = DistInfo(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", "0")))
    if device_type == "cuda" and info.local_rank >= torch.cuda.device_count():
        # Checked before joining the group: torchrun then stops the other processes instead of leaving
        # them waiting for this one.
        raise ValueError(f"process {info.local_rank} of this machine needs GPU {info.local_rank}, but the "
                         f"machine has {torch.cuda.device_count()}; start at most that many processes per "
                         "node (torchrun --nproc_per_node), or train on the CPU (--device cpu)")
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device_type == "cuda" else "gloo")
    if device_type == "cuda":
        torch.cuda.set_device(info.local_rank)
    return info


def mean_over_processes(x: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """The average of ``x`` over all processes (``x`` itself in a single process)."""
    if not info.enabled:
        return x
    x = x.detach().clone()
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    return x / info.world_size


def shutdown(info: DistInfo) -> None:
    """Wait for every process, then close the process group (nothing in a single process)."""
    if info.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
