"""The monitor's live actions: offering the changes a live training may take, and sending the one the user picks.

A mixin of :class:`tuidiag.app.app.TuidiagApp`. What may change comes from the run's
diagnosis and its LR finder (:mod:`tuidiag.app.action_requests`), read in a worker;
the change goes to the training as a control request and the answer is a notification.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work

from tuidiag.app import action_requests
from tuidiag.app.screens.live_action import LiveActionScreen
from tuidiag.app.screens.run_screen import RunScreen
from tuidiag.viewmodel.actions import Proposal
from tuidiag.viewmodel.model import RunsModel

if TYPE_CHECKING:
    from tuidiag.app.app import TuidiagApp


class MonitorLiveActions:
    """The app's live actions (the app's state is its own: see ``TuidiagApp.__init__``)."""

    model: RunsModel

    def on_run_screen_action_requested(self, message: RunScreen.ActionRequested) -> None:
        self.offer_actions(message.key)

    @work(thread=True, exclusive=True, group="action", exit_on_error=False)
    def offer_actions(self, key: str) -> None:
        """Worker: what can be changed in this run's live training, from its diagnosis."""
        offer = action_requests.offer(self.model, Path(key))
        self.post_message(self.ActionsOffered(key, *offer))

    def on_tuidiag_app_actions_offered(self, message: TuidiagApp.ActionsOffered) -> None:
        if message.problem is not None:
            self.notify(f"live actions: {message.problem}", severity="warning", timeout=8, markup=False)
            return
        screen = LiveActionScreen(Path(message.key).name, message.where, message.proposals, message.past, message.withheld)
        self.push_screen(screen, lambda chosen: self.apply_action(message.key, chosen) if chosen else None)

    @work(thread=True, exclusive=False, group="action", exit_on_error=False)
    def apply_action(self, key: str, proposal: Proposal) -> None:
        """Worker: send the change and wait for the training's answer."""
        ok, text = action_requests.apply(Path(key), proposal)
        self.post_message(self.ActionAnswered(ok, text))

    def on_tuidiag_app_action_answered(self, message: TuidiagApp.ActionAnswered) -> None:
        self.notify(message.text, severity="information" if message.ok else "error", timeout=10, markup=False)
        self.request_refresh(None)
