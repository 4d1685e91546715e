"""Exceptions that carry a one-line message meant for the user."""


def one_line(err: BaseException, limit: int = 100) -> str:
    """``Type: first line of the message`` (cut to ``limit`` characters), to quote a library's error in one line."""
    text = str(err).strip()
    return type(err).__name__ + (f": {text.splitlines()[0][:limit]}" if text else "")


class PyroinvError(Exception):
    """Base class: bad input or a missing resource, explained in one line.

    Command-line entry points print ``str(err)`` and exit with status 2 instead of
    showing a traceback.
    """


class DataError(PyroinvError, ValueError):
    """A data set cannot be found, read or validated."""


class ConfigError(PyroinvError, ValueError):
    """A configuration value is out of range or inconsistent."""
