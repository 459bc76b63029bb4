"""The page's pure rules: its headers, paging, which memories a page shows, and what counts as this machine."""

from __future__ import annotations

import pytest

from ground.config import ConfigError, Settings, WebSettings, check_web
from kith.web.rules import (
    CONTENT_SECURITY_POLICY,
    SECURITY_HEADERS,
    allowed_hosts,
    is_loopback,
    may_show,
    page_number,
    paged,
)
from kith.web.server import exposure_warning


def test_the_policy_allows_no_script_and_only_its_own_styles_and_forms() -> None:
    rules = dict(part.strip().split(" ", 1) for part in CONTENT_SECURITY_POLICY.split(";"))
    assert rules["default-src"] == "'none'" and "script-src" not in rules
    assert rules["style-src"] == "'self'" and rules["form-action"] == "'self'"
    assert rules["frame-ancestors"] == "'none'"
    assert SECURITY_HEADERS["Referrer-Policy"] == "no-referrer" and SECURITY_HEADERS["Cache-Control"] == "no-store"


@pytest.mark.parametrize(("total", "asked", "expected"), [
    (0, 1, (1, 1, 0, 0)), (120, 1, (1, 3, 0, 50)), (120, 3, (3, 3, 100, 120)), (120, 9, (3, 3, 100, 120)),
    (120, -2, (1, 3, 0, 50)), (10_000, 200, (200, 200, 9950, 10_000)),
])
def test_paging(total: int, asked: int, expected: tuple[int, int, int, int]) -> None:
    window = paged(total, asked, 50)
    assert (window.page, window.pages, window.start, window.stop) == expected
    assert window.previous == (window.page - 1 or None)
    assert window.next == (window.page + 1 if window.page < window.pages else None)


@pytest.mark.parametrize(("text", "page"), [("3", 3), (None, 1), ("", 1), ("x", 1), ("-4", 1), ("0", 1)])
def test_a_page_number_from_the_address(text: str | None, page: int) -> None:
    assert page_number(text) == page


def test_a_memory_shows_only_on_its_own_persons_page() -> None:
    assert may_show("p_ana", "p_ana")
    assert not may_show("p_ana", "p_ben")
    assert not may_show("p_ana", None)


@pytest.mark.parametrize(("host", "local"), [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                             ("localhost", True), ("0.0.0.0", False), ("192.168.1.5", False)])
def test_loopback(host: str, local: bool) -> None:
    assert is_loopback(host) is local


def test_another_address_without_tls_warns_loudly_and_with_tls_does_not() -> None:
    assert exposure_warning(WebSettings()) is None
    warning = exposure_warning(WebSettings(host="0.0.0.0"))
    assert warning is not None and warning.startswith("WARNING") and "tls_cert" in warning
    assert exposure_warning(WebSettings(host="0.0.0.0", tls_cert="c.pem", tls_key="k.pem")) is None


@pytest.mark.parametrize(("web", "error"), [(WebSettings(port=0), "web.port"), (WebSettings(port=70000), "web.port"),
                                            (WebSettings(tls_cert="c.pem"), "set both")])
def test_bad_web_settings_get_one_clear_line(web: WebSettings, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        check_web(Settings(web=web))
    assert ConfigError  # the loader adds the file's name to the line (ground.config.load_settings)


def test_on_loopback_only_this_machines_names_are_answered() -> None:
    assert allowed_hosts("127.0.0.1") == ["127.0.0.1", "::1", "localhost"]
    assert allowed_hosts("127.0.0.2") == ["127.0.0.1", "127.0.0.2", "::1", "localhost"]
    assert allowed_hosts("0.0.0.0") is None  # reached by a name of the operator's: any
