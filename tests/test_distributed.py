"""Per-rank shards under torch.distributed (gloo, 2 processes on CPU); rank 0 writes the manifest
and chooses the directory (a re-run goes to ``run-1``), the other rank follows it."""

from __future__ import annotations

import os
import socket
import subprocess
import textwrap

import tuidiag

WORKER = textwrap.dedent(
    """
    import os, sys, torch, torch.distributed as dist
    import tuidiag
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    with tuidiag.Recorder(sys.argv[1], config={"world": dist.get_world_size()}) as rec:
        rec.watch(model, opt)
        for step in range(20):
            x = torch.randn(8, 4) + rank
            rec.batch(x)
            loss = model(x).pow(2).mean()
            loss.backward()
            rec.step(loss)
            opt.step(); opt.zero_grad()
    dist.destroy_process_group()
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_each_rank_writes_its_own_shards(tmp_path, python) -> None:
    with tuidiag.Recorder(tmp_path / "run") as rec:  # an earlier run is there: both ranks must go to run-1
        rec.step(1.0)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE="2")
    procs = [subprocess.Popen([python, "-c", WORKER, str(tmp_path / "run")], env=dict(env, RANK=str(r))) for r in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert tuidiag.open_run(tmp_path / "run").ranks == [0]  # untouched
    run_dir = tmp_path / "run-1"
    names = sorted(p.name for p in (run_dir / "metrics").glob("*.parquet"))
    assert {n.split("-")[0] for n in names} == {"r0", "r1"}
    run = tuidiag.open_run(run_dir)
    assert run.ranks == [0, 1]
    assert run.manifest["world_size"] == 2 and run.status == "finished"
    assert len(run.series("train/loss", rank=1)) == 20
    # DDP all-reduces gradients: both ranks see the same gradient norm
    assert abs(run.series("grad_norm/total", rank=0).values - run.series("grad_norm/total", rank=1).values).max() < 1e-5
    assert run.series("input/mean", rank=1).values.mean() > run.series("input/mean", rank=0).values.mean() + 0.5
