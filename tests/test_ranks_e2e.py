"""Per-rank recording and multi-rank findings end to end: real DDP training (gloo, 2 CPU processes).

Two ranks forked from one interpreter that imported torch once (``tests/rank_forks.py``) train
five runs in turn: a healthy control, one where rank 1 is fed a NaN batch, one where rank 1 uses a 10x larger LR (replicas
drift apart), one where rank 1 loads its data slowly (a straggler the other rank waits for), and
one into a directory that already holds a run, where rank 0 chooses ``run-1`` and rank 1 follows.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuidiag import Recorder
from tuidiag.diagnosis import diagnose
from tuidiag.store import open_run

RANK_CODES = {"rank_nonfinite_first", "rank_desync", "straggler_rank"}

WORKER = textwrap.dedent(
    """
    import sys, time, torch, torch.distributed as dist
    import tuidiag
    from tests.rank_forks import fork_ranks
    tuidiag.Recorder  # resolved before the forks, which would each import the recorder again
    root = sys.argv[1]

    def train(name, lr=0.05, nan_at=None, sleep=0.0, steps=40):
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(
            torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
        opt = torch.optim.SGD(model.parameters(), lr)
        gen = torch.Generator().manual_seed(100 + rank)
        with tuidiag.Recorder(f"{root}/{name}", config={"lr": lr}, weights_every=5) as rec:
            rec.watch(model, opt)
            for step in range(steps):
                time.sleep(sleep)
                x = torch.randn(16, 8, generator=gen)
                if step == nan_at:
                    x[0, 0] = float("nan")
                y = x.sum(1, keepdim=True)
                rec.batch(x, y)
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                rec.step(loss)
                opt.step()
                opt.zero_grad()
        dist.barrier()

    def rank_main():
        global rank
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        train("healthy")
        train("nan", nan_at=15 if rank == 1 else None)
        train("desync", lr=0.05 if rank == 0 else 0.005)
        train("straggler", sleep=0.04 if rank == 1 else 0.0, steps=30)

        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
        opt = torch.optim.SGD(model.parameters(), 0.01)
        with tuidiag.Recorder(f"{root}/run", config={"world": dist.get_world_size()}) as rec:
            rec.watch(model, opt)
            for step in range(20):
                x = torch.randn(8, 4) + rank
                rec.batch(x)
                loss = model(x).pow(2).mean()
                loss.backward()
                rec.step(loss)
                opt.step(); opt.zero_grad()
        dist.destroy_process_group()

    sys.exit(fork_ranks(2, rank_main))
    """
)


@pytest.fixture(scope="module")
def ddp_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five runs trained by two gloo ranks; returns their root."""
    root = tmp_path_factory.mktemp("ddp")
    with Recorder(root / "run") as rec:  # an earlier run is there: both ranks must go to run-1
        rec.step(1.0)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    worker = subprocess.run([sys.executable, "-c", WORKER, str(root)], env=env, timeout=240)
    assert worker.returncode == 0
    return root


def _codes(run_dir: Path) -> dict[str, object]:
    diagnosis = diagnose(open_run(run_dir))
    return {f.code: f for f in diagnosis.findings}


def test_healthy_ddp_run_has_no_rank_findings(ddp_runs: Path) -> None:
    codes = _codes(ddp_runs / "healthy")
    assert not RANK_CODES & set(codes), codes


def test_rank_fed_a_nan_batch_is_named(ddp_runs: Path) -> None:
    diagnosis = diagnose(open_run(ddp_runs / "nan"))
    top = diagnosis.top
    assert top.code == "rank_nonfinite_first" and top.first_step == 15
    assert "rank 1" in top.title.lower()
    assert any("non-finite input" in e for e in top.evidence)
    assert {"nonfinite_loss", "lr_too_high"} & set(top.related)


def test_rank_with_other_lr_is_a_desync(ddp_runs: Path) -> None:
    codes = _codes(ddp_runs / "desync")
    assert "rank_desync" in codes and "rank_nonfinite_first" not in codes
    finding = codes["rank_desync"]
    assert finding.first_step is not None and finding.first_step <= 5
    assert any("learning rates differ" in e and "0.005" in e for e in finding.evidence)
    assert any("gradient norms agree" in e for e in finding.evidence)


def test_slow_rank_is_a_straggler(ddp_runs: Path) -> None:
    codes = _codes(ddp_runs / "straggler")
    finding = codes["straggler_rank"]
    assert finding.title == "Rank 1 is a straggler"
    assert "waits" in finding.evidence[0] and "all-reduce" in finding.evidence[1]


def test_each_rank_writes_its_own_shards(ddp_runs: Path) -> None:
    assert open_run(ddp_runs / "run").ranks == [0]  # untouched
    run_dir = ddp_runs / "run-1"
    names = sorted(p.name for p in (run_dir / "metrics").glob("*.parquet"))
    assert {n.split("-")[0] for n in names} == {"r0", "r1"}
    run = open_run(run_dir)
    assert run.ranks == [0, 1]
    assert run.manifest["world_size"] == 2 and run.status == "finished"
    assert len(run.series("train/loss", rank=1)) == 20
    # DDP all-reduces gradients: both ranks see the same gradient norm
    assert abs(run.series("grad_norm/total", rank=0).values - run.series("grad_norm/total", rank=1).values).max() < 1e-5
    assert run.series("input/mean", rank=1).values.mean() > run.series("input/mean", rank=0).values.mean() + 0.5
