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
from tuidiag.format import LOSS, SYS_CPU_PERCENT, SYS_DATALOADER_WORKERS, SYS_HOST_MEM_PERCENT, SYS_RSS

pytest.importorskip("psutil")


def test_a_training_with_two_workers_records_cpu_memory_and_live_workers(tmp_path: Path) -> None:
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
    workers = run.series(SYS_DATALOADER_WORKERS).values
    assert len(workers) >= 2 and workers.max() == 2  # both workers seen alive during the epoch
    rss = run.series(SYS_RSS).values
    assert (rss > 10e6).all()  # a Python process with torch holds tens of MB at least
    host = run.series(SYS_HOST_MEM_PERCENT).values
    assert ((host > 0) & (host <= 100)).all()
    cpu = run.series(SYS_CPU_PERCENT).values
    assert (cpu >= 0).all()


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
