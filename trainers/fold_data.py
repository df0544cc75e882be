"""A task's data as a fold reads it: lazily, sample by sample or batch by batch, never stacked.

``load_task_data`` calls the task's ``load_data`` once per worker (the worker keeps it warm):
``(X, y)`` arrays become an ``ArrayDataset`` whose batches are sliced in one go; a map-style
``Dataset`` stays as it is, read per sample by the fold's ``DataLoader``, so random transforms
run afresh every epoch. ``load_eval_data`` (optional) gives the same samples read for
evaluation (no augmentation). The labels, needed for stratified folds, come from
``load_targets``, the dataset's ``targets``/``labels``, or one pass over the samples; groups
and fold ids (for ``cv.scheme`` group, stratified_group and predefined) from ``load_groups``
and ``load_fold_ids`` or the dataset's attributes of those names, when the scheme needs them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, DistributedSampler, Subset

from foldwise.trainers.task import Task, TaskNotFound, takes_argument


class ArrayDataset(Dataset):
    """``(X, y)`` arrays as a Dataset; ``ArrayBatches`` reads its batches in one slice."""

    def __init__(self, X: np.ndarray, y: np.ndarray, *, classify: bool) -> None:
        floating = np.issubdtype(X.dtype, np.floating)
        self.X = torch.as_tensor(X.astype(np.float32) if floating else X)
        self.y = torch.as_tensor(y, dtype=torch.long if classify else torch.float32)
        if not classify and self.y.ndim == 1:
            self.y = self.y.unsqueeze(1)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.X[index], self.y[index]


class ArrayBatches(Dataset):
    """An ArrayDataset, or a view of one through Subsets, whose items are whole batches: the
    item of a list of indices is those samples, sliced at once (a DataLoader fed by a
    BatchSampler skips the per-sample reads and the collate)."""

    def __init__(self, dataset: Dataset) -> None:
        indices: torch.Tensor | None = None
        while isinstance(dataset, Subset):
            level = torch.as_tensor(dataset.indices)
            indices = level if indices is None else level[indices]
            dataset = dataset.dataset
        if not isinstance(dataset, ArrayDataset):
            raise TypeError("ArrayBatches reads an ArrayDataset or Subsets of one")
        self.base, self.indices = dataset, indices

    def __len__(self) -> int:
        return len(self.base) if self.indices is None else len(self.indices)

    def __getitem__(self, batch: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        idx = torch.as_tensor(batch)
        if self.indices is not None:
            idx = self.indices[idx]
        return self.base.X[idx], self.base.y[idx]


def array_batches(dataset: Dataset) -> ArrayBatches | None:
    """``dataset`` read a batch at a time, when it is (a view of) an ArrayDataset."""
    try:
        return ArrayBatches(dataset)
    except TypeError:
        return None


@dataclass(frozen=True)
class TaskData:
    """The task's training set: ``dataset`` for training reads, ``eval_dataset`` (the same
    samples, in the same order) for evaluation, and the labels (None for a regression task
    whose dataset does not say them)."""

    dataset: Dataset
    eval_dataset: Dataset
    targets: np.ndarray | None

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]


def load_task_data(task: Task, options: dict[str, Any]) -> TaskData:
    """The task's data as foldwise reads it (see the module docstring)."""
    classify = task.kind == "classification"
    data = _call_loader(task.obj.load_data, options)
    if isinstance(data, Dataset):
        dataset = data
        targets = _targets(task, dataset, options, read_all=classify)
    else:
        X, y = _pair(task.name, data)
        dataset, targets = ArrayDataset(X, y, classify=classify), y
    size = _length(task.name, dataset)
    if size == 0:
        raise ValueError(f"task {task.name!r}: load_data returned no samples")
    eval_dataset = dataset
    loader = task.hook("load_eval_data")
    if loader is not None:
        eval_dataset = _call_loader(loader, options)
        if not isinstance(eval_dataset, Dataset) or _length(task.name, eval_dataset) != size:
            raise TaskNotFound(
                f"task {task.name!r}: load_eval_data must give a Dataset of the same {size} "
                "samples as load_data, in the same order"
            )
    if targets is not None and len(targets) != size:
        raise TaskNotFound(
            f"task {task.name!r}: {len(targets)} labels for {size} samples (load_targets)"
        )
    return TaskData(dataset, eval_dataset, targets)


def load_test_data(task: Task, options: dict[str, Any]) -> TaskData:
    """The task's test data (``load_test_data``, for a hold-out score), read as its training
    data is, with its labels or targets (a score needs them, whatever the kind)."""
    classify = task.kind == "classification"
    data = _call_loader(task.obj.load_test_data, options)
    if isinstance(data, Dataset):
        dataset = data
        targets = _targets(task, dataset, options, read_all=True, loader="load_test_targets")
    else:
        X, y = _pair(task.name, data, "load_test_data")
        dataset, targets = ArrayDataset(X, y, classify=classify), y
    size = _length(task.name, dataset)
    if size == 0:
        raise ValueError(f"task {task.name!r}: load_test_data returned no samples")
    if targets is None or len(targets) != size:
        raise TaskNotFound(f"task {task.name!r}: load_test_data gave no label for each sample")
    return TaskData(dataset, dataset, np.asarray(targets))


class EvalShardSampler(DistributedSampler):
    """This rank's share of a dataset for evaluation, in order: the ranks together read each
    sample exactly once (no padding, nothing dropped), in shares that differ by one sample at
    most. With ``batch_size``, the shares are cut so that every rank reads the same number of
    batches of at most that size, where the data allows it (``even``): a collective each
    batch (a metric synced per step) meets on every rank.

    A ``DistributedSampler`` so that Lightning takes it for the fold's own and puts none of
    its own (which pads) in its place."""

    def __init__(
        self, size: int, *, rank: int, world_size: int, batch_size: int | None = None
    ) -> None:
        self.size, self.rank, self.world_size = size, rank, world_size
        self.num_replicas, self.shuffle, self.drop_last, self.epoch = world_size, False, False, 0
        shares, self.even = eval_shares(size, world_size, batch_size)
        self.start = sum(shares[:rank])
        self.stop = self.start + shares[rank]
        self.num_samples = shares[rank]
        self.total_size = size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.stop))

    def __len__(self) -> int:
        return self.stop - self.start


def eval_shares(size: int, world_size: int, batch_size: int | None) -> tuple[list[int], bool]:
    """How many samples of ``size`` each rank evaluates, and whether every rank then reads
    the same number of batches of ``batch_size`` (always, without one)."""
    base, extra = divmod(size, world_size)
    shares = [base + (r < extra) for r in range(world_size)]
    if not batch_size:
        return shares, True
    batches = -(-shares[0] // batch_size)
    full = (batches - 1) * batch_size if batches else 0
    rest = size - full * world_size  # past each rank's full batches: one last batch each
    if batches and rest >= world_size:
        base, extra = divmod(rest, world_size)
        shares = [full + base + (r < extra) for r in range(world_size)]
    counts = {-(-share // batch_size) for share in shares}
    return shares, len(counts) == 1 and 0 not in counts


def train_sampler(
    size: int, *, rank: int, world_size: int, seed: int, shuffle: bool, drop_last: bool = False
) -> DistributedSampler:
    """One shuffle per epoch shared by all ranks, dealt out in turn; padded by repeating the
    first few so every rank takes the same number of steps (an uneven last batch never
    deadlocks). Set its epoch before each pass (``FoldContext.prepare_loader`` does)."""
    return DistributedSampler(
        range(size),  # type: ignore[arg-type]
        num_replicas=world_size,
        rank=rank,
        shuffle=shuffle,
        seed=seed,
        drop_last=drop_last,
    )


def augmented_validation(task: Task, data: TaskData | None) -> str | None:
    """Why the validation folds would be read through random transforms, or None: the task's
    Dataset reads sample 0 differently each time and the task has no ``load_eval_data``
    (arrays, and a sample that does not read, say nothing here)."""
    if data is None or task.hook("load_eval_data") is not None:
        return None
    if array_batches(data.dataset) is not None:
        return None
    try:
        if len(data.dataset) == 0 or _same(data.dataset[0], data.dataset[0]):  # type: ignore[arg-type]
            return None
    except Exception:  # the run says why a sample does not read
        return None
    return (
        f"load_data's Dataset reads sample 0 differently each time (random transforms?) and "
        f"task {task.name!r} has no load_eval_data, so the validation folds are read with them "
        "too: give load_eval_data(options), the same samples without augmentation"
    )


def _same(a: Any, b: Any) -> bool:
    """Whether two reads of a sample are equal (tensors, arrays, numbers, and nests of them)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b)
    except Exception:  # a value with no plain equality: take it as the same
        return True


def _call_loader(func: Any, options: dict[str, Any]) -> Any:
    return func(options) if takes_argument(func) else func()


def _pair(name: str, data: Any, loader: str = "load_data") -> tuple[np.ndarray, np.ndarray]:
    try:
        X, y = data
    except (TypeError, ValueError) as err:
        raise TaskNotFound(
            f"task {name!r}: {loader} must return (X, y) or a torch Dataset, "
            f"got {type(data).__name__}"
        ) from err
    X, y = np.asarray(X), np.asarray(y)
    if len(X) != len(y):
        raise TaskNotFound(f"task {name!r}: {loader} gave {len(X)} samples but {len(y)} labels")
    return X, y


def _length(name: str, dataset: Dataset) -> int:
    try:
        return len(dataset)  # type: ignore[arg-type]
    except TypeError as err:
        raise TaskNotFound(f"task {name!r}: its Dataset needs __len__ ({err})") from err


def _targets(
    task: Task,
    dataset: Dataset,
    options: dict[str, Any],
    *,
    read_all: bool,
    loader: str = "load_targets",
) -> np.ndarray | None:
    """The labels of a Dataset: the task's ``loader``, else the dataset's ``targets`` /
    ``labels``, else (``read_all``) read from every sample once."""
    hook = task.hook(loader)
    if hook is not None:
        return np.asarray(_call_loader(hook, options))
    for attr in ("targets", "labels"):
        found = getattr(dataset, attr, None)
        if found is not None and not callable(found):
            return np.asarray(found)
    if not read_all:
        return None
    return np.asarray([_label(dataset[i]) for i in range(_length(task.name, dataset))])


def per_sample_values(task: Task, dataset: Dataset, options: dict[str, Any], what: str) -> Any:
    """A value per sample the task gives for its splits (``groups``, ``fold_ids``):
    ``load_<what>(options)``, else the dataset's ``<what>`` attribute, else None (the splitter
    that needs it says so). Read only for the schemes that need them."""
    loader = task.hook(f"load_{what}")
    if loader is not None:
        return np.asarray(_call_loader(loader, options))
    found = getattr(dataset, what, None)
    return None if found is None or callable(found) else np.asarray(found)


def _label(sample: Any) -> Any:
    label = sample[1]
    return label.item() if isinstance(label, torch.Tensor) else label
