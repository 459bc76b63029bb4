"""One line of `doctor`: what a check found, shared by the features that can check themselves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    warn: bool = False  # passed, with something the operator should look at

    def line(self) -> str:
        return f"{('warn' if self.warn else 'ok  ') if self.ok else 'FAIL'}  {self.name}: {self.detail}"
