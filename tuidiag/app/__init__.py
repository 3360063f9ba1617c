"""The monitor: a Textual app over ``tuidiag.live`` snapshots. Never imports torch."""
