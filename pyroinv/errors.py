"""Exceptions that carry a one-line message meant for the user."""


class PyroinvError(Exception):
    """Base class: bad input or a missing resource, explained in one line.

    Command-line entry points print ``str(err)`` and exit with status 2 instead of
    showing a traceback.
    """


class DataError(PyroinvError, ValueError):
    """A data set cannot be found, read or validated."""


class ConfigError(PyroinvError, ValueError):
    """A configuration value is out of range or inconsistent."""
