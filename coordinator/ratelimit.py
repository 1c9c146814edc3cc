"""The coordinator's one token bucket: every budget of writes to the API server (node
patches, evictions, Events) is one of these, on the caller's injected monotonic clock."""

from __future__ import annotations


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up. Time comes in as an argument
    (the caller's injected monotonic clock), so the refill is exact under a fake clock."""

    def __init__(self, rate: float, burst: float) -> None:
        self._rate = rate
        self._burst = burst
        self.tokens = burst
        self._last: float | None = None

    def refill(self, now_mono: float) -> None:
        """Add what accrued since the last refill (nothing on the first)."""
        if self._last is not None:
            elapsed = max(0.0, now_mono - self._last)
            self.tokens = min(self._burst, self.tokens + elapsed * self._rate)
        self._last = now_mono

    def take(self) -> bool:
        """Spend one token, if there is one to spend."""
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
