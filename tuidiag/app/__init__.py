"""The monitor: a Textual app over ``tuidiag.viewmodel`` snapshots. Never imports torch."""
