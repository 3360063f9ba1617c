"""The format contract: explicit schema, version metadata, shard names, zstd."""

from __future__ import annotations

import pyarrow.parquet as pq

from tests.helpers import train
from tuidiag.format import EVENTS_SCHEMA, FORMAT_VERSION, FORMAT_VERSION_KEY, METRICS_SCHEMA, ShardName


def test_shard_name_round_trip() -> None:
    name = ShardName(3, 12, 40)
    assert name.filename == "r3-000000012-000000040.parquet"
    assert ShardName.parse(name.filename) == name


def test_shard_name_rejects_temp_and_foreign_files() -> None:
    for bad in (".r0-000000001-000000001.parquet.abc.partial", "notes.parquet", "r0-000000005-000000001.parquet", "r0-1-1.parquet"):
        assert ShardName.parse(bad) is None


def test_written_shards_carry_the_explicit_schema_and_version(run_dir) -> None:
    train(run_dir, steps=5, poison_at=3)
    metrics = list((run_dir / "metrics").glob("*.parquet"))
    events = list((run_dir / "events").glob("*.parquet"))
    assert metrics and events
    for path, schema in [(metrics[0], METRICS_SCHEMA), (events[0], EVENTS_SCHEMA)]:
        file_schema = pq.read_schema(path)
        assert file_schema.remove_metadata().equals(schema.remove_metadata())
        assert file_schema.metadata[FORMAT_VERSION_KEY] == str(FORMAT_VERSION).encode()
        columns = pq.ParquetFile(path).metadata.row_group(0)
        assert all(columns.column(i).compression == "ZSTD" for i in range(columns.num_columns))
