"""Dates a query names, resolved against the clock into time windows: pure, no I/O.

"yesterday", "two days ago", "last week", "last month", "in May", "on 8 May", "May 2023",
"in 2023", "last summer", "on Monday"... each becomes a :class:`Window`; so do the same kinds of
phrase in German, French, Spanish, Portuguese, Italian and Dutch ("letzte Woche", "il y a deux
jours", "en mayo"; :mod:`memory.recall.when_languages`). Recall boosts the
memories said inside one (``RecallSettings.date_boost``): a person asking what they said
"last week" means what they said then, whatever words they used.

A window reaches a little past the span it names: things are usually told shortly after they
happened ("I went hiking on Saturday", said on Monday), and the clock's day need not be the
person's (a day's window starts a day early too). A month or a weekday without a year or a date
is its latest occurrence up to now: recall looks back, never forward. Seasons are the northern
hemisphere's. Words that are also names or verbs ("may", "march", "june") count as months only
with a preposition or a day or year beside them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from memory.recall.when_languages import LANGUAGES, DateWords

DAY = timedelta(days=1)

# How far past the named span a window reaches (see the module docstring), by the span's size.
AFTER = {"day": DAY, "week": 3 * DAY, "month": 7 * DAY, "season": 14 * DAY, "year": 14 * DAY}
BEFORE_DAY = DAY  # the clock's day need not be the person's

MONTHS = {name: n for n, names in enumerate((
    ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",), ("june", "jun"),
    ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"), ("october", "oct"),
    ("november", "nov"), ("december", "dec")), start=1) for name in names}
WEEKDAYS = {name: n for n, name in enumerate(
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))}
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
           "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "couple of": 2,
           "a few": 3, "few": 3, "several": 4}
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # the season's first month

_MONTH = "(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_FULL_MONTH = "(?P<month>" + "|".join(n for n in MONTHS if len(n) > 3 or n == "may") + ")"
_DAY_NUM = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUM = "(?P<n>" + "|".join(sorted((re.escape(k) for k in NUMBERS), key=len, reverse=True)) + r"|\d{1,3})"
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WEEKDAY = "(?P<weekday>" + "|".join(WEEKDAYS) + ")"
_SEASON = "(?P<season>" + "|".join(SEASONS) + ")"
_PREP = r"(?:in|on|during|since|from|by|of|around|until|till|through|last|this|early|mid|late|end of|beginning of)"


@dataclass(frozen=True, slots=True)
class Window:
    """A span of time, ``start`` inclusive, ``end`` exclusive."""

    start: datetime
    end: datetime

    def holds(self, when: datetime) -> bool:
        return self.start <= when < self.end


def _day_start(when: datetime) -> datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int, like: datetime) -> datetime:
    return like.replace(year=year, month=month, day=1, hour=0, minute=0, second=0, microsecond=0)


def _add_months(start: datetime, months: int) -> datetime:
    index = start.year * 12 + (start.month - 1) + months
    return start.replace(year=index // 12, month=index % 12 + 1)


def _span(start: datetime, end: datetime, size: str) -> Window:
    before = BEFORE_DAY if size == "day" else timedelta(0)
    return Window(start - before, end + AFTER[size])


def _day(day: datetime) -> Window:
    start = _day_start(day)
    return _span(start, start + DAY, "day")


def _month(year: int, month: int, now: datetime) -> Window:
    start = _month_start(year, month, now)
    return _span(start, _add_months(start, 1), "month")


def _latest_month(month: int, now: datetime) -> Window:
    """The month's latest start not after now (this month when it is now)."""
    year = now.year if month <= now.month else now.year - 1
    return _month(year, month, now)


def _year(year: int, now: datetime) -> Window:
    start = _month_start(year, 1, now)
    return _span(start, _month_start(year + 1, 1, now), "year")


def _season(season: str, year: int | None, now: datetime) -> Window:
    first = SEASONS[season]
    if year is None:
        year = now.year
        if _month_start(year, first, now) > now:
            year -= 1
    start = _month_start(year, first, now)
    return _span(start, _add_months(start, 3), "season")


def _latest_weekday(weekday: int, now: datetime) -> datetime:
    """The latest such day before today (today's name means today, which ``today`` says better)."""
    back = (now.weekday() - weekday) % 7 or 7
    return now - back * DAY


def _week_start(when: datetime) -> datetime:
    return _day_start(when) - when.weekday() * DAY


def _amount(text: str) -> int:
    text = " ".join(text.casefold().split())
    return NUMBERS[text] if text in NUMBERS else int(text)


def _ago(n: int, unit: str, now: datetime) -> Window:
    if unit == "day":
        return _day(now - n * DAY)
    if unit == "week":
        start = _week_start(now - n * 7 * DAY)
        return _span(start, start + 7 * DAY, "week")
    if unit == "month":
        start = _add_months(_month_start(now.year, now.month, now), -n)
        return _span(start, _add_months(start, 1), "month")
    return _year(now.year - n, now)


def _last(unit: str, now: datetime) -> Window:
    """"last week/month/year": the calendar span before this one, up to now (people say it of both)."""
    if unit == "weekend":
        saturday = _day_start(now) - ((now.weekday() - 5) % 7) * DAY
        if saturday + 2 * DAY > now:  # this weekend is not over yet: the one before
            saturday -= 7 * DAY
        return _span(saturday, saturday + 2 * DAY, "day")
    if unit == "night":
        return _day(now - DAY)
    window = _ago(1, unit, now)
    return Window(window.start, max(window.end, now))


def _this(unit: str, now: datetime) -> Window:
    if unit == "weekend":
        saturday = _day_start(now) - ((now.weekday() - 5) % 7) * DAY
        return _span(saturday, saturday + 2 * DAY, "day")
    if unit == "week":
        start = _week_start(now)
    elif unit == "month":
        start = _month_start(now.year, now.month, now)
    else:
        start = _month_start(now.year, 1, now)
    return Window(start, now + DAY)


def _past(n: int, unit: str, now: datetime) -> Window:
    """"the past three weeks": from then until now."""
    days = {"day": 1, "week": 7, "month": 31, "year": 366}[unit]
    return Window(_day_start(now) - n * days * DAY, now + DAY)


def _int(match: re.Match[str], group: str) -> int | None:
    value = match.groupdict().get(group)
    return int(value) if value else None


def _dated(match: re.Match[str], now: datetime) -> Window | None:
    """A day of a month, its year given or the latest such day up to now."""
    return _dated_month(MONTHS[match.group("month").lower()], _int(match, "day"), _int(match, "year"), now)


def _dated_month(month: int, day: int | None, year: int | None, now: datetime) -> Window | None:
    if day is None or not 1 <= day <= 31:
        return None
    try:
        if year is not None:
            return _day(now.replace(year=year, month=month, day=day))
        when = now.replace(month=month, day=day)
        if _day_start(when) > now:
            when = when.replace(year=now.year - 1)
        return _day(when)
    except ValueError:  # 31 June
        return None


def _iso(match: re.Match[str], now: datetime) -> Window | None:
    try:
        return _day(now.replace(year=int(match.group(1)), month=int(match.group(2)), day=int(match.group(3))))
    except ValueError:
        return None


def _month_phrase(match: re.Match[str], now: datetime) -> Window:
    month = MONTHS[match.group("month").lower()]
    year = _int(match, "year")
    return _month(year, month, now) if year is not None else _latest_month(month, now)


def _season_phrase(match: re.Match[str], now: datetime) -> Window:
    season = match.group("season").lower()
    year = _int(match, "year")
    if year is None and (match.groupdict().get("which") or "").lower() == "last":
        this = _season(season, None, now)
        # "last summer" in July is the summer before this one
        return _season(season, this.start.year - 1, now) if this.holds(now) else this
    return _season(season, year, now)


Rule = tuple[re.Pattern[str], Callable[[re.Match[str], datetime], Window | None]]


def _rule(pattern: str, resolve: Callable[[re.Match[str], datetime], Window | None]) -> Rule:
    return re.compile(r"(?<!\w)" + pattern + r"(?!\w)", re.IGNORECASE), resolve


# Longest phrases first: a rule's match is blanked out before the next rule looks.
RULES: tuple[Rule, ...] = (
    _rule(r"(\d{4})-(\d{2})-(\d{2})", _iso),
    _rule(_DAY_NUM + r"(?: of)? " + _MONTH + r",?(?: " + _YEAR + ")?", _dated),
    _rule(_MONTH + " " + _DAY_NUM + r"(?:,? " + _YEAR + ")?", _dated),
    _rule(r"(?:(?P<which>last|this|past) )?" + _SEASON + r"(?: of)?(?: " + _YEAR + ")?",
          lambda m, now: _season_phrase(m, now) if m.group("which") or m.group("year") else None),
    _rule(_MONTH + r",? (?:of )?" + _YEAR, _month_phrase),
    # "this may take a while" is no month; "of 2000 people" and "around 2000 dollars" no year.
    _rule(r"(?!this[ -]may(?!\w))" + _PREP + r"[ -]" + _FULL_MONTH, _month_phrase),
    _rule(r"(?:in|during|since|from|until|till|through) " + _YEAR,
          lambda m, now: _year(int(m.group("year")), now)),
    _rule(r"(?:the )?day before yesterday", lambda _m, now: _day(now - 2 * DAY)),
    _rule(r"yesterday|last night", lambda _m, now: _day(now - DAY)),
    _rule(r"today|tonight|this (?:morning|afternoon|evening)", lambda _m, now: _day(now)),
    _rule(_NUM + " " + _UNIT + " ago",
          lambda m, now: _ago(_amount(m.group("n")), m.group("unit").lower(), now)),
    _rule(r"(?:in |over |during )?the (?:last|past) " + _NUM + " " + _UNIT,
          lambda m, now: _past(_amount(m.group("n")), m.group("unit").lower(), now)),
    _rule(r"(?:last|past|previous) (?P<unit>week|weekend|month|year|night)",
          lambda m, now: _last(m.group("unit").lower(), now)),
    _rule(r"(?:over )?the weekend", lambda _m, now: _last("weekend", now) if now.weekday() < 5
          else _this("weekend", now)),
    _rule(r"this (?P<unit>week|weekend|month|year)", lambda m, now: _this(m.group("unit").lower(), now)),
    _rule(r"(?:on|last|this past) " + _WEEKDAY + r"(?! (?:before|after))",
          lambda m, now: _day(_latest_weekday(WEEKDAYS[m.group("weekday").lower()], now))),
)


def plain(text: str) -> str:
    """Lower case without accents (and with one apostrophe), as :mod:`memory.recall.when_languages` writes words."""
    decomposed = unicodedata.normalize("NFKD", text.replace("\u2019", "'"))
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _alternation(words: Iterable[str]) -> str:
    return "|".join(sorted((re.escape(w) for w in words), key=len, reverse=True))


def _top_level(template: str) -> list[str]:
    """A template's alternatives outside any group: each becomes a rule of its own, so each may name its parts."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(template):
        if char == "(" and template[i - 1:i] != "\\":
            depth += 1
        elif char == ")" and template[i - 1:i] != "\\":
            depth -= 1
        elif char == "|" and depth == 0:
            out.append(template[start:i])
            start = i + 1
    out.append(template[start:])
    return out


def _language_rules(words: DateWords) -> tuple[Rule, ...]:
    parts = {
        "n": f"(?P<n>{_alternation(words.numbers)}|\\d{{1,3}})",
        "unit": f"(?P<unit>{_alternation(words.units)})",
        "month": f"(?P<month>{_alternation(words.months)})\\.?",
        "day": r"(?P<day>[0-3]?\d)",
        "year": _YEAR,
        "weekday": f"(?P<weekday>{_alternation(words.weekdays)})",
    }
    months: Mapping[str, int] = words.months

    def month_of(match: re.Match[str]) -> int:
        return months[match.group("month")]

    def amount(match: re.Match[str]) -> int:
        text = " ".join(match.group("n").split())
        return words.numbers[text] if text in words.numbers else int(text)

    def unit(match: re.Match[str]) -> str:
        return words.units[" ".join(match.group("unit").split())]

    def dated(match: re.Match[str], now: datetime) -> Window | None:
        return _dated_month(month_of(match), _int(match, "day"), _int(match, "year"), now)

    def month_phrase(match: re.Match[str], now: datetime) -> Window:
        year = _int(match, "year")
        return _month(year, month_of(match), now) if year is not None else _latest_month(month_of(match), now)

    def counted(span: Callable[[int, str, datetime], Window]) -> Callable[[re.Match[str], datetime], Window | None]:
        return lambda m, now: None if unit(m) == "weekend" else span(amount(m), unit(m), now)

    shapes: list[tuple[str, Callable[[re.Match[str], datetime], Window | None]]] = [
        (words.day_month, dated),
        (words.month_year, month_phrase),
        (f"(?:{words.month_prepositions})[ -]{{month}}", month_phrase),
        (f"(?:{words.year_prepositions}) {{year}}", lambda m, now: _year(int(m.group("year")), now)),
        (words.day_before_yesterday, lambda _m, now: _day(now - 2 * DAY)),
        (words.yesterday, lambda _m, now: _day(now - DAY)),
        (words.today, lambda _m, now: _day(now)),
        (words.ago, counted(_ago)),
        (words.past, counted(_past)),
        (words.last, lambda m, now: _last(unit(m), now)),
        (words.this, lambda m, now: _this(unit(m), now)),
        (words.weekday, lambda m, now: _day(_latest_weekday(words.weekdays[m.group("weekday")], now))),
    ]
    # A match may not stop before a hyphen either: "segunda" is not the start of "segunda-feira que vem".
    return tuple(_rule(alternative.format(**parts) + r"(?!-)", resolve)
                 for template, resolve in shapes for alternative in _top_level(template))


LANGUAGE_RULES: tuple[tuple[frozenset[str], tuple[Rule, ...]], ...] = tuple(
    (w.markers, _language_rules(w)) for w in LANGUAGES)


def _resolve(rules: Iterable[Rule], text: str, now: datetime, found: list[Window]) -> str:
    """Add the windows ``rules`` find in ``text``; the text with each match blanked out."""
    for pattern, resolve in rules:
        for match in pattern.finditer(text):
            try:
                window = resolve(match, now)
            except (KeyError, ValueError, OverflowError):
                # A look-alike the case-blind pattern took ("ſept", "frıday") names no time it can read; the
                # message is still recalled for, only without this window.
                window = None
            if window is not None:
                found.append(window)
        text = pattern.sub(lambda m: " " * len(m.group(0)), text)
    return text


def query_windows(query: str, now: datetime) -> tuple[Window, ...]:
    """The time windows ``query`` names, resolved against ``now`` (none: it names no date)."""
    found: list[Window] = []
    rest = plain(_resolve(RULES, query, now, found))
    words = re.findall(r"\w+", rest)
    hits = [sum(w in markers for w in words) for markers, _rules in LANGUAGE_RULES]
    best = max(hits, default=0)
    # The one language the message reads as most: a word shared by two ("je", "du") decides nothing, and a
    # message that reads as two alike names no time in either ("Ben je hier?" is Dutch or French).
    if best and hits.count(best) == 1:
        _resolve(LANGUAGE_RULES[hits.index(best)][1], rest, now, found)
    return tuple(dict.fromkeys(found))


def said_within(when: datetime, windows: tuple[Window, ...]) -> bool:
    return any(w.holds(when) for w in windows)
