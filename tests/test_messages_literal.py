"""Messages that quote commands or run files are shown as written: never read as Rich markup."""

from __future__ import annotations

import pytest

from tests.app_helpers import DEMO_RUNS
from tuidiag.app.app import TuidiagApp


@pytest.mark.parametrize("text", ["the overfit-one-batch test failed: pip install 'tuidiag[torch]'",
                                  "[bold red]not markup[/] and [link=x]y[/link]", "a [dim] b"])
async def test_a_job_message_is_shown_as_written(text: str) -> None:
    """The review saw "pip install 'tuidiag'" in a job's failure: the message was read as markup and ``[torch]``
    vanished. Job messages now show every character."""
    app = TuidiagApp(DEMO_RUNS / "healthy")
    async with app.run_test(size=(120, 30)) as pilot:
        app.post_message(TuidiagApp.JobFinished("error", text))
        await pilot.pause()
        shown = [n for n in app._notifications if n.message == text]
        assert shown and not shown[-1].markup
