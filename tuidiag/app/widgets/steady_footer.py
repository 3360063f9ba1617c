"""``SteadyFooter``: Textual's footer, rebuilt only when the keys it shows change.

Textual's ``Footer`` composes its key widgets again on every change of focus or
bindings, whether or not any key it shows changed: in the run view, a tab key that
moves the focus (into the events table and out again) spent most of its time building
the same footer. This one compares what it would show (each shown binding's key,
label, whether it is enabled, and its tooltip) with what it shows, and recomposes
only when they differ.
"""

from __future__ import annotations

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

    def bindings_changed(self, screen: Screen) -> None:
        """Recompose as ``Footer`` does, unless the keys shown are the same."""
        if self._bindings_ready and screen.app.app_focus and self.is_attached and screen is self.screen:
            keys = self._keys(screen)
            if keys == self._shown:
                return
            self._shown = keys
        super().bindings_changed(screen)
