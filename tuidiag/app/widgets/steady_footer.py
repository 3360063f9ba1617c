"""``SteadyFooter``: Textual's footer, rebuilt only when the keys it shows change.

Textual's ``Footer`` composes its key widgets again on every change of focus or
bindings, whether or not any key it shows changed: in the run view, a tab key that
moves the focus (into the events table and out again) spent most of its time building
the same footer. This one compares what it would show (each shown binding's key,
label, whether it is enabled, and its tooltip) with what it shows, and recomposes
only when they differ.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer


class SteadyFooter(Footer):
    """A ``Footer`` that recomposes only when the keys it shows change."""

    DEFAULT_CSS = """
    SteadyFooter.-compact FooterKey.-command-palette { margin-right: 0; }
    """
    """Textual's compact footer gives every key a right margin, the right-docked palette key too: its last
    column then showed a key cut off under it (``^p palette]`` at 40 columns). The palette key ends at the edge."""

    _shown: tuple[object, ...] | None = None

    def _keys(self, screen: Screen) -> tuple[object, ...]:
        """What the footer shows of ``screen``'s active bindings (:meth:`Footer.compose` reads the same)."""
        return tuple((binding.key, binding.description, binding.action, binding.group, enabled, tooltip)
                     for (_, binding, enabled, tooltip) in screen.active_bindings.values() if binding.show) + (
            self.app.ENABLE_COMMAND_PALETTE and self.show_command_palette,)

    def compose(self) -> ComposeResult:
        """``Footer``'s keys, remembering which ones it composed."""
        if self._bindings_ready:
            self._shown = self._keys(self.screen)
        yield from super().compose()

    def bindings_changed(self, screen: Screen) -> None:
        """Recompose as ``Footer`` does, unless the keys shown are the same."""
        if self._bindings_ready and screen.app.app_focus and self.is_attached and screen is self.screen:
            if self._keys(screen) == self._shown:
                return
        super().bindings_changed(screen)

    async def recompose(self) -> None:
        """Recompose unless the keys to show are those composed: ``Footer`` schedules a recompose for after the next
        refresh, so two changes of bindings before it (the view's first frame has three) queued two, each composing
        the same keys (a sixth of the CPU of a large run's first frame)."""
        if self.is_attached and self._bindings_ready and self._shown is not None and self._keys(self.screen) == self._shown:
            return
        await super().recompose()
