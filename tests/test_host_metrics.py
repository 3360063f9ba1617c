"""CPU-side system metrics: a real training with DataLoader workers records its process and host health."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import tuidiag
from tuidiag.format import LOSS, SYS_CPU_PERCENT, SYS_CHILD_PROCESSES, SYS_HOST_MEM_PERCENT, SYS_RSS

pytest.importorskip("psutil")


def test_a_training_with_two_workers_records_cpu_memory_and_live_children(tmp_path: Path) -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 4), torch.randn(64, 1))
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    with tuidiag.Recorder(tmp_path / "r", flush_interval=0.05) as rec:
        rec.watch(model, opt)
        for x, y in DataLoader(data, batch_size=8, num_workers=2):
            loss = ((model(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss)
            rec.flush()  # one sample per step, while the workers are alive
    run = tuidiag.open_run(tmp_path / "r")
    children = run.series(SYS_CHILD_PROCESSES).values
    assert len(children) >= 2 and children.max() == 2  # both workers seen alive during the epoch (no other child)
    rss = run.series(SYS_RSS).values
    assert (rss > 10e6).all()  # a Python process with torch holds tens of MB at least
    host = run.series(SYS_HOST_MEM_PERCENT).values
    assert ((host > 0) & (host <= 100)).all()
    cpu = run.series(SYS_CPU_PERCENT).values
    assert (cpu >= 0).all()


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


@pytest.mark.parametrize("workers", [0, 2])
def test_the_child_count_is_the_workers_and_every_other_child(tmp_path: Path, workers: int) -> None:
    """Beside two other children alive the whole time (a multiprocessing process, a subprocess), the figure reaches
    the workers plus those two while the DataLoader runs, and never says fewer than the two: it is named for what it
    counts (an earlier name, ``sys/dataloader_workers``, said workers and counted these too)."""
    import multiprocessing

    others = [multiprocessing.get_context("fork").Process(target=_sleep, args=(60,), daemon=True),
              subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])]
    others[0].start()
    try:
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), 0.1)
        loader = DataLoader(TensorDataset(torch.randn(48, 4), torch.randn(48, 1)), batch_size=8, num_workers=workers)
        with tuidiag.Recorder(tmp_path / "r", flush_interval=0.05) as rec:
            rec.watch(model, opt)
            for x, y in loader:
                loss = ((model(x) - y) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                rec.step(loss)
                rec.flush()
        counted = tuidiag.open_run(tmp_path / "r").series(SYS_CHILD_PROCESSES).values
        assert len(counted) >= 2 and counted.max() == workers + 2 and counted.min() >= 2, counted
    finally:
        others[0].kill()
        others[0].join(10)
        others[1].kill()
        others[1].wait(10)


def test_without_psutil_the_recorder_records_the_rest(tmp_path: Path) -> None:
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "psutil":
                    raise ImportError("psutil blocked for the test")
        sys.meta_path.insert(0, Block())
        import tuidiag
        with tuidiag.Recorder({str(tmp_path / 'r')!r}, flush_interval=0.05) as rec:
            for i in range(5):
                rec.step(1.0 / (i + 1))
                rec.flush()
        assert rec.errors.count == 0, rec.errors.count
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    run = tuidiag.open_run(tmp_path / "r")
    assert len(run.series(LOSS).values) == 5
    assert not run.has(SYS_RSS)
