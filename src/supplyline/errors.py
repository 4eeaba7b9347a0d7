"""The one exception type that reaches users as a single clear line."""

from __future__ import annotations


class UserError(Exception):
    """Bad input or an unusable environment: printed as one line, exit code ``code``.

    The message names the thing that is wrong and, where there is one, the way out.
    """

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
