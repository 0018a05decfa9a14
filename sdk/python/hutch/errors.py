"""The API's errors."""


class HutchError(Exception):
    """An error the daemon answered: code is one of the API's stable codes
    (not_found, invalid_argument, conflict, …); status is the HTTP status,
    0 for an error reported inside an event stream."""

    def __init__(self, code: str, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status

    def __repr__(self) -> str:
        return f"HutchError({self.code!r}, {self.message!r}, status={self.status})"

    @property
    def not_found(self) -> bool:
        return self.code == "not_found"
