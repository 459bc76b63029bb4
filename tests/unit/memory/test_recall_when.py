"""Dates a message names, resolved against the clock, and the lift they give what was said then."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from ground.config import RecallSettings
from memory.core.records import MemoryKind, MemoryRecord, Scope, Source
from memory.recall.ranking import RecallMatch, rank
from memory.recall.when import Window, query_windows

NOW = datetime(2023, 11, 15, 14, 0, tzinfo=UTC)  # a Wednesday


def day(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)


def covers(query: str, *inside: str, outside: tuple[str, ...] = ()) -> None:
    windows = query_windows(query, NOW)
    assert windows, query
    for when in inside:
        assert any(w.holds(day(when) + timedelta(hours=12)) for w in windows), (query, when, windows)
    for when in outside:
        assert not any(w.holds(day(when) + timedelta(hours=12)) for w in windows), (query, when, windows)


@pytest.mark.parametrize(("query", "inside", "outside"), [
    ("what did I tell you yesterday?", ("2023-11-14",), ("2023-11-10", "2023-10-14")),
    ("the day before yesterday", ("2023-11-13",), ("2023-11-01",)),
    ("two days ago I mentioned a book", ("2023-11-13",), ("2023-11-05",)),
    ("a couple of weeks ago", ("2023-11-01",), ("2023-10-01",)),
    ("last week", ("2023-11-07", "2023-11-12"), ("2023-10-25",)),
    ("what did we talk about last month", ("2023-10-03", "2023-10-30"), ("2023-09-20",)),
    ("in May", ("2023-05-10",), ("2022-05-10", "2023-07-10")),
    ("what did Evan do in March", ("2023-03-20",), ("2023-05-20",)),
    ("Which hobby did Sam take up in May 2023?", ("2023-05-02", "2023-05-31"), ("2023-08-01",)),
    ("Which classes did Evan join in mid-August 2023?", ("2023-08-15",), ("2023-10-15",)),
    ("on 8 May", ("2023-05-08",), ("2023-05-20",)),
    ("Where did Evan take his family on 24 May, 2023?", ("2023-05-24",), ("2023-05-28",)),
    ("What did Audrey eat for dinner on October 24, 2023?", ("2023-10-24",), ("2023-10-30",)),
    ("news from 9th December 2023", ("2023-12-09",), ("2023-12-20",)),
    ("what happened in 2022", ("2022-06-01",), ("2023-06-01",)),
    ("What did Sam do in May of 2022?", ("2022-05-10",), ("2023-05-10",)),
    ("last summer", ("2023-07-15",), ("2022-07-15", "2023-11-01")),
    ("towards the end of summer 2022", ("2022-08-20",), ("2023-08-20",)),
    ("on Monday", ("2023-11-13",), ("2023-11-06",)),
    ("over the weekend", ("2023-11-11", "2023-11-12"), ("2023-11-04",)),
    ("2023-05-08", ("2023-05-08",), ("2023-06-08",)),
])
def test_a_named_time_becomes_a_window_around_when_it_was(query: str, inside: tuple[str, ...],
                                                          outside: tuple[str, ...]) -> None:
    covers(query, *inside, outside=outside)


def test_a_window_reaches_a_little_past_the_span_because_things_are_told_after_they_happen() -> None:
    covers("on Saturday", "2023-11-11", "2023-11-12", outside=("2023-11-15",))
    covers("in May 2023", "2023-06-03", outside=("2023-06-20",))


@pytest.mark.parametrize("query", [
    "I may go swimming", "March on, soldiers", "June said hi", "how are you?", "the 2 of us went", "I have 3 dogs",
    "what happened recently", "a Monday before July", "this may take a while", "A crowd of 2000 people came",
    "I saved around 2000 dollars",
])
def test_words_that_only_look_like_dates_name_no_time(query: str) -> None:
    assert query_windows(query, NOW) == (), query


def test_a_month_named_without_a_year_is_its_latest_occurrence_never_a_future_one() -> None:
    (december,) = query_windows("in December", NOW)
    assert december.start == day("2022-12-01")
    (november,) = query_windows("in November", NOW)
    assert november.start == day("2023-11-01")


def test_every_time_a_message_names_counts() -> None:
    windows = query_windows("between 3 May and 9 June 2023", NOW)
    assert len(windows) == 2
    assert all(isinstance(w, Window) for w in windows)


@pytest.mark.parametrize(("query", "inside", "outside"), [
    ("Was habe ich dir gestern erzählt?", ("2023-11-14",), ("2023-11-10",)),
    ("vorgestern war ich beim Arzt", ("2023-11-13",), ("2023-11-10",)),
    ("Was habe ich vor zwei Wochen gesagt?", ("2023-11-01",), ("2023-10-15",)),
    ("Was hast du letzte Woche gehört?", ("2023-11-08",), ("2023-10-25",)),
    ("Was war im März?", ("2023-03-20",), ("2023-05-20",)),
    ("am 8. Mai 2023 war ich in Berlin", ("2023-05-08",), ("2023-05-20",)),
    ("Qu'est-ce que je t'ai dit hier ?", ("2023-11-14",), ("2023-11-10",)),
    ("il y a trois jours j'ai vu Paul", ("2023-11-12",), ("2023-11-05",)),
    ("l'année dernière, où suis-je allé ?", ("2022-06-01",), ("2021-06-01",)),
    ("Qu'ai-je fait en août ?", ("2023-08-10",), ("2023-10-10",)),
    ("¿Qué te dije ayer?", ("2023-11-14",), ("2023-11-10",)),
    ("hace dos semanas fui al médico", ("2023-11-01",), ("2023-10-15",)),
    ("el 8 de mayo de 2023 fui a Madrid", ("2023-05-08",), ("2023-05-20",)),
    ("¿Dónde estuve el sábado pasado?", ("2023-11-11",), ("2023-11-04",)),
    ("O que eu disse ontem?", ("2023-11-14",), ("2023-11-10",)),
    ("há duas semanas eu viajei", ("2023-11-01",), ("2023-10-15",)),
    ("no mês passado eu mudei de casa", ("2023-10-15",), ("2023-09-15",)),
    ("Cosa ti ho detto ieri?", ("2023-11-14",), ("2023-11-10",)),
    ("due settimane fa ho visto Luca", ("2023-11-01",), ("2023-10-15",)),
    ("a maggio ho cambiato lavoro", ("2023-05-10",), ("2023-07-10",)),
    ("Wat heb ik gisteren gezegd?", ("2023-11-14",), ("2023-11-10",)),
    ("twee weken geleden was ik ziek", ("2023-11-01",), ("2023-10-15",)),
    ("vorige maand heb ik verhuisd", ("2023-10-15",), ("2023-09-15",)),
])
def test_other_languages_name_times_the_same_way(query: str, inside: tuple[str, ...],
                                                 outside: tuple[str, ...]) -> None:
    covers(query, *inside, outside=outside)


def test_accents_or_none_read_the_same() -> None:
    assert query_windows("la semaine dernière", NOW) == query_windows("la semaine derniere", NOW) != ()
    assert query_windows("im März", NOW) == query_windows("im Marz", NOW) != ()


@pytest.mark.parametrize("query", [
    "ich bin hier", "ik ben hier, en jij?", "I was here", "Mai Tai please", "mars is red", "more mayo please",
    "vor zwei Wochenenden habe ich gekocht",  # a count of weekends is no span this reads
    "Kannst du mir hier helfen?", "Ben je hier?", "Ik ben hier met je broer",  # "du", "je": shared words
    "I ate out with Sam", "we ate set menus", "I ate 2 mars bars",  # month abbreviations that are words
    "Je le connais depuis sept ans", "Eu volto em dez minutos",  # numbers that abbreviate months
    "na segunda-feira que vem tenho médico",  # next Monday: recall looks back only
])
def test_a_word_that_names_a_time_in_one_language_only_counts_in_that_language(query: str) -> None:
    # German and Dutch "hier" is here, not French "yesterday"; a month name alone names no time.
    assert query_windows(query, NOW) == (), query


def memory(memory_id: str, said: datetime) -> MemoryRecord:
    return MemoryRecord(id=memory_id, person="p", kind=MemoryKind.FACT, text="a fact", evidence=("a fact",),
                        sources=(Source("telegram", "c", memory_id, said),), scope=Scope.DM, created_at=said,
                        updated_at=said)


def test_asking_about_yesterday_lifts_what_was_said_yesterday_over_an_equal_match_from_last_month() -> None:
    yesterday = memory("b-yesterday", NOW - timedelta(days=1))
    last_month = memory("a-last-month", NOW - timedelta(days=30))
    matches = [RecallMatch(last_month, 0.5, 0.5), RecallMatch(yesterday, 0.5, 0.5)]
    settings = RecallSettings()
    asked = query_windows("what did I say yesterday about the trip?", NOW)
    assert [r.record.id for r in rank(matches, NOW, settings, vector_path=True, windows=asked)] == [
        "b-yesterday", "a-last-month"]
    # Without a date in the question they tie, and ties go by id.
    assert [r.record.id for r in rank(matches, NOW, settings, vector_path=True)] == ["a-last-month", "b-yesterday"]
    # The boost multiplies: a much better match from another time still wins.
    strong = [RecallMatch(last_month, 0.9, 0.9), RecallMatch(yesterday, 0.4, 0.4)]
    assert rank(strong, NOW, settings, vector_path=True, windows=asked)[0].record.id == "a-last-month"
    # date_boost 1 turns it off.
    off = dataclasses.replace(settings, date_boost=1.0)
    assert [r.record.id for r in rank(matches, NOW, off, vector_path=True, windows=asked)] == [
        "a-last-month", "b-yesterday"]


@pytest.mark.parametrize("query", ["Two days ago I went hiking", "A few weeks ago", "The last Three weeks"])
def test_a_number_word_reads_the_same_in_capitals(query: str) -> None:
    assert query_windows(query, NOW) == query_windows(query.lower(), NOW) != ()


@pytest.mark.parametrize("query", ["on frıday", "3 ſept", "Auguſt 3", "am Freıtag habe ich", "vor zweı Wochen"])
def test_a_look_alike_letter_never_fails_the_message(query: str) -> None:
    query_windows(query, NOW)  # recall runs this on every message: it must not raise
