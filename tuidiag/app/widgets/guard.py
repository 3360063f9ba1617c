"""The monitor's safety net: a widget that fails to draw shows the error in its place.

A fix for each known failure comes first; this catches the rest of the class, so
one bad chart or panel never takes the monitor down. The error is shown as
literal text (an exception message can hold brackets or escapes from run files).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from rich.text import Text

from tuidiag.text.safe import clean

F = TypeVar("F", bound=Callable[..., Any])


def failure_text(what: str, error: BaseException) -> Text:
    """An inline error for a widget: what failed and why, never parsed as markup."""
    text = Text(f" {what} could not be drawn: ", style="bold red")
    text.append(clean(f"{type(error).__name__}: {error}", 300), style="red")
    text.append("\n (the monitor keeps running; please report this with the run)", style="dim")
    return text


def guarded(what: str) -> Callable[[F], F]:
    """Decorate a widget's ``show``: an exception is logged and handed, as an inline
    error, to the widget's ``show_error(text)``; the app stays up."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except Exception as error:  # noqa: BLE001 - the safety net itself
                self.log.error(f"{what} could not be drawn: {error!r}")
                self.show_error(failure_text(what, error))
                return None

        return wrapper  # type: ignore[return-value]

    return decorate
