"""A hostile or sloppy extractor whose quote is exact but whose memory claims more than the sentence says.

Each case is one message of Ana's and one memory proposed about her, with evidence quoted word for word.
The quote is always really there; what is attacked is support: a negation, limiter or sarcasm marker
dropped, a condition, question, wish, plan or obligation turned into a fact, the past turned into the
present, someone else's fact (a relative, a role, a quoted or forwarded text) given to Ana, a quantity
inflated, a qualifier added (only, always, still, again, well), what is to come told as done, and the
same tricks spelt with look-alike letters, characters that show nothing and fullwidth forms. Every one must
be refused for the reason named. The everyday facts next to them must still be kept.
None of these repeats a case of test_adversarial_capture.py or test_validation.py (beside this file).
"""

# ruff: noqa: F811

from __future__ import annotations

import json
from typing import Any

import pytest

from ground.db import Database
from memory.capture.validation import validate_extraction
from memory.core.records import AuthorRole, Scope, Turn
from memory.service import MemoryService
from tests.fakes.openai_api import FakeOpenAI, Scripted
from tests.support.memory import T0, memory_settings, reply, say, service  # noqa: F401
from tests.support.support_cases import (
    HYPOTHETICAL,
    KEEP,
    NEGATED,
    NOT_GROUNDED,
    PARTIAL,
    PAST,
    QUESTION,
    REPORTED,
    Case,
)

ZWSP, ZWNJ, RLM, CYR_O = "\u200b", "\u200c", "\u200f", "\u043e"


CASES = [
    # --- negation and what undoes a clause -------------------------------------------------------------
    Case("en-quote-drops-dont", "I don't have a dog", "PERSON has a dog", "have a dog", NEGATED),
    Case("en-hardly", "I hardly drink coffee", "PERSON drinks coffee", "I hardly drink coffee", NEGATED),
    Case("en-rarely", "I rarely drink coffee", "PERSON drinks coffee", "I rarely drink coffee", NEGATED),
    Case("en-almost", "I almost died", "PERSON died", "I almost died", NEGATED),
    Case("en-nearly", "I nearly married Tom", "PERSON married Tom", "I nearly married Tom", NEGATED),
    Case("en-quit", "I quit smoking last year", "PERSON smokes", "I quit smoking", NEGATED),
    Case("en-lost", "I lost my job", "PERSON has a job", "I lost my job", NEGATED),
    Case("en-deny-that", "I deny that I have diabetes", "PERSON has diabetes", "I have diabetes", REPORTED),
    Case("en-doubt-that", "I doubt that I am vegan", "PERSON is vegan", "I am vegan", REPORTED),
    Case("de-kaum", "Ich trinke kaum Kaffee", "PERSON trinkt Kaffee", "Ich trinke kaum Kaffee", NEGATED),
    Case("de-selten", "Ich trinke selten Kaffee", "PERSON trinkt Kaffee", "Ich trinke selten Kaffee", NEGATED),
    Case("de-aufgehoert", "Ich habe aufgehört zu rauchen", "PERSON raucht", "Ich habe aufgehört zu rauchen",
         NEGATED),
    Case("de-bezweifle-dass", "Ich bezweifle, dass ich Veganer bin", "PERSON ist Veganer", "ich Veganer bin",
         REPORTED),
    Case("fr-ne-pas", "Je n'habite pas à Paris", "PERSON habite à Paris", "Je n'habite pas à Paris", NEGATED),
    Case("fr-ne-jamais", "Je ne suis jamais allé à Paris", "PERSON est allé à Paris",
         "Je ne suis jamais allé à Paris", NEGATED),
    # --- conditions, questions ---------------------------------------------------------------------------
    Case("en-in-case", "In case I get the job, I move to Lisbon", "PERSON moves to Lisbon", "I move to Lisbon",
         HYPOTHETICAL),
    Case("en-assuming", "Assuming I get the job, I move to Lisbon", "PERSON moves to Lisbon",
         "I move to Lisbon", HYPOTHETICAL),
    Case("en-should-i-inverted", "Should I get the job, I will move to Lisbon", "PERSON will move to Lisbon",
         "I will move to Lisbon", QUESTION),
    Case("en-question-no-mark", "Do I have diabetes", "PERSON has diabetes", "I have diabetes", QUESTION),
    Case("en-question-lowercase", "should I move to Lisbon", "PERSON should move to Lisbon", "I move to Lisbon",
         QUESTION),
    Case("en-question-fullwidth-mark", "Should I move to Lisbon？", "PERSON moves to Lisbon", "I move to Lisbon",
         QUESTION),
    Case("en-question-mark-then-emoji", "Should I move to Lisbon?🤔", "PERSON moves to Lisbon",
         "I move to Lisbon", QUESTION),
    Case("en-am-i-fullwidth", "Am I vegan？", "PERSON is vegan", "I vegan", QUESTION),
    Case("de-question-no-mark", "Soll ich nach Lissabon ziehen", "PERSON soll nach Lissabon ziehen",
         "Soll ich nach Lissabon ziehen", QUESTION),
    Case("en-once-i-get", "Once I get the job, I move to Oslo", "PERSON moves to Oslo", "I move to Oslo",
         HYPOTHETICAL),
    Case("en-as-soon-as", "As soon as I save enough, I buy a boat", "PERSON buys a boat", "I buy a boat",
         HYPOTHETICAL),
    Case("en-whenever", "Whenever I drink, I get headaches", "PERSON gets headaches", "I get headaches",
         HYPOTHETICAL),
    Case("de-sobald", "Sobald ich den Job habe, ziehe ich nach Oslo", "PERSON zieht nach Oslo",
         "ziehe ich nach Oslo", HYPOTHETICAL),
    # --- wishes, plans, obligations and the future turned into facts ------------------------------------
    Case("en-want-to-play", "I want to play piano", "PERSON plays piano", "I want to play piano", HYPOTHETICAL),
    Case("en-id-love-to", "I'd love to play piano", "PERSON plays piano", "I'd love to play piano", HYPOTHETICAL),
    Case("en-ill-move", "I'll move to Lisbon", "PERSON moves to Lisbon", "I'll move to Lisbon", HYPOTHETICAL),
    Case("en-will-move", "I will move to Lisbon next year", "PERSON moves to Lisbon", "I will move to Lisbon",
         HYPOTHETICAL),
    Case("en-going-to", "I'm going to quit my job", "PERSON quit PERSON's job", "quit my job", HYPOTHETICAL),
    Case("en-should", "I should exercise more", "PERSON exercises more", "exercise more", HYPOTHETICAL),
    Case("en-have-to", "I have to call my mom", "PERSON calls mom", "call my mom", HYPOTHETICAL),
    Case("en-need-a-car", "I need a car", "PERSON has a car", "I need a car", HYPOTHETICAL),
    Case("en-hope-that", "I hope that I get the job", "PERSON gets the job", "I get the job", HYPOTHETICAL),
    Case("de-moechte", "Ich möchte Klavier lernen", "PERSON lernt Klavier", "Ich möchte Klavier lernen",
         HYPOTHETICAL),
    Case("de-will", "Ich will Klavier spielen", "PERSON spielt Klavier", "Ich will Klavier spielen", HYPOTHETICAL),
    Case("de-sollte", "Ich sollte mehr Sport machen", "PERSON macht mehr Sport", "Ich sollte mehr Sport machen",
         HYPOTHETICAL),
    Case("de-muss", "Ich muss mehr Sport machen", "PERSON macht mehr Sport", "Ich muss mehr Sport machen",
         HYPOTHETICAL),
    Case("de-hoffe-dass", "Ich hoffe, dass ich den Job bekomme", "PERSON bekommt den Job", "ich den Job bekomme",
         PARTIAL),
    Case("pl-chce", "Chcę grać na pianinie", "PERSON gra na pianinie", "Chcę grać na pianinie", HYPOTHETICAL),
    Case("fr-voudrais", "Je voudrais apprendre le piano", "PERSON apprend le piano",
         "Je voudrais apprendre le piano", HYPOTHETICAL),
    # --- the past turned into the present ----------------------------------------------------------------
    Case("en-used-to", "I used to live in Paris", "PERSON lives in Paris", "live in Paris", PAST),
    Case("en-lived", "I lived in Paris for ten years", "PERSON lives in Paris", "I lived in Paris", PAST),
    Case("en-was-a-smoker", "I was a smoker", "PERSON is a smoker", "I was a smoker", PAST),
    Case("en-back-then", "Back then I was vegan", "PERSON is vegan", "I was vegan", PAST),
    Case("en-had-a-dog", "I had a dog", "PERSON has a dog", "I had a dog", PAST),
    Case("en-have-lived-no-since", "I have lived in Paris", "PERSON lives in Paris", "I have lived in Paris", PAST),
    Case("de-wohnte-frueher", "Ich wohnte früher in Paris", "PERSON wohnt in Paris", "Ich wohnte früher in Paris",
         PAST),
    Case("de-war", "Ich war Veganer", "PERSON ist Veganer", "Ich war Veganer", PAST),
    Case("pl-mieszkalam", "Mieszkałam w Paryżu", "PERSON mieszka w Paryżu", "Mieszkałam w Paryżu", PAST),
    # --- someone else's fact -----------------------------------------------------------------------------
    Case("en-you-have", "You have a cat", "PERSON has a cat", "have a cat", NOT_GROUNDED),
    Case("de-du-hast", "Du hast eine Katze", "PERSON hat eine Katze", "Du hast eine Katze", NOT_GROUNDED),
    Case("en-translate-colon", "Translate: I have three sisters", "PERSON has three sisters",
         "I have three sisters", REPORTED),
    Case("pl-przetlumacz", "Przetłumacz: mam trzy siostry", "PERSON ma trzy siostry", "mam trzy siostry",
         REPORTED),
    Case("en-relative-who", "my mom, who lives in Oslo, is sick", "PERSON lives in Oslo", "lives in Oslo",
         NOT_GROUNDED),
    Case("en-texted-me", "Ola texted me 'I'm pregnant'", "PERSON is pregnant", "I'm pregnant", REPORTED),
    Case("en-apposition", "Tom, my roommate, is vegan", "PERSON is vegan", "is vegan", NOT_GROUNDED),
    Case("en-my-therapist", "My therapist is vegan", "PERSON is vegan", "My therapist is vegan", NOT_GROUNDED),
    Case("en-our-neighbour", "Our neighbour owns a boat", "PERSON owns a boat", "Our neighbour owns a boat",
         NOT_GROUNDED),
    Case("de-meine-therapeutin", "Meine Therapeutin ist Veganerin", "PERSON ist Veganerin",
         "Meine Therapeutin ist Veganerin", NOT_GROUNDED),
    Case("pl-moja-terapeutka", "Moja terapeutka jest weganką", "PERSON jest weganką",
         "Moja terapeutka jest weganką", NOT_GROUNDED),
    Case("fr-ma-soeur", "Ma sœur est végane", "PERSON est végane", "Ma sœur est végane", NOT_GROUNDED),
    Case("es-mi-hermana", "Mi hermana es vegana", "PERSON es vegana", "Mi hermana es vegana", NOT_GROUNDED),
    # --- quoted, forwarded, not meant --------------------------------------------------------------------
    Case("en-song-lyric", 'My favourite song goes "I am a rock"', "PERSON is a rock", "I am a rock", REPORTED),
    Case("en-she-was-like", 'She was like "I am vegan"', "PERSON is vegan", "I am vegan", REPORTED),
    Case("en-quoted-reply", "> I am vegan", "PERSON is vegan", "I am vegan", REPORTED),
    Case("en-fwd-header", "Fwd: I am vegan", "PERSON is vegan", "I am vegan", REPORTED),
    Case("de-german-quotes", "Auf ihrem Shirt steht „Ich bin Veganerin“", "PERSON ist Veganerin",
         "Ich bin Veganerin", REPORTED),
    Case("en-tone-tag", "I love Mondays /s", "PERSON loves Mondays", "I love Mondays", NEGATED),
    Case("en-tone-tag-next-sentence", "I love Mondays. /s", "PERSON loves Mondays", "I love Mondays", NEGATED),
    Case("en-jk", "I love Mondays jk", "PERSON loves Mondays", "I love Mondays", NEGATED),
    Case("en-eye-roll", "I love Mondays 🙄", "PERSON loves Mondays", "I love Mondays", NEGATED),
    Case("en-kind-of", "I'm kind of vegan", "PERSON is vegan", "vegan", NEGATED),
    Case("en-aspiring", "I'm an aspiring writer", "PERSON is a writer", "writer", NEGATED),
    Case("en-ish", "I'm vegan-ish", "PERSON is vegan", "vegan", NEGATED),
    Case("en-practically", "I'm practically a doctor", "PERSON is a doctor", "a doctor", NEGATED),
    Case("en-tail-sort-of", "I have a cat, sort of", "PERSON has a cat", "I have a cat", NEGATED),
    Case("en-tail-probably", "I'm allergic to cats, probably", "PERSON is allergic to cats",
         "I'm allergic to cats", HYPOTHETICAL),
    Case("en-well-was", "I'm vegan. Well, was.", "PERSON is vegan", "I'm vegan", PAST),
    Case("en-aside-not-really", "I have a cat (not really)", "PERSON has a cat", "I have a cat", NEGATED),
    Case("en-no-i-dont", "I have a cat!!! 😂😂 no I don't", "PERSON has a cat", "I have a cat", NEGATED),
    # --- quantity and frequency inflated -----------------------------------------------------------------
    Case("en-twice-to-daily", "I drink coffee twice a day", "PERSON drinks coffee daily",
         "I drink coffee twice a day", NOT_GROUNDED),
    Case("en-once-to-regularly", "I went running once", "PERSON runs regularly", "I went running once",
         NOT_GROUNDED),
    Case("en-once-to-many-times", "I have been to Japan once", "PERSON has been to Japan many times",
         "I have been to Japan once", NOT_GROUNDED),
    Case("en-one-beer-to-a-lot", "I had one beer", "PERSON drinks a lot of beer", "I had one beer", PAST),
    Case("en-2-to-22", "I have 2 cats", "PERSON has 22 cats", "I have 2 cats", NOT_GROUNDED),
    Case("en-places-swapped", "I work in Oslo and live in Bergen", "PERSON lives in Oslo",
         "I work in Oslo and live in Bergen", NOT_GROUNDED),
    Case("en-born-grew-swapped", "I was born in Oslo and grew up in Bergen", "PERSON was born in Bergen",
         "I was born in Oslo and grew up in Bergen", NOT_GROUNDED),
    Case("de-places-swapped", "Ich wohne in Wien und arbeite in Graz", "PERSON wohnt in Graz",
         "Ich wohne in Wien und arbeite in Graz", NOT_GROUNDED),
    Case("pl-places-swapped", "Mieszkam w Krakowie i pracuję w Warszawie", "PERSON mieszka w Warszawie",
         "Mieszkam w Krakowie i pracuję w Warszawie", NOT_GROUNDED),
    Case("en-numbers-swapped", "I have 2 kids and 3 cats", "PERSON has 3 kids", "I have 2 kids and 3 cats",
         NOT_GROUNDED),
    Case("en-number-words-swapped", "I have two kids and three cats", "PERSON has three kids",
         "I have two kids and three cats", NOT_GROUNDED),
    Case("en-smoke-to-heavy", "I smoke", "PERSON is a heavy smoker", "I smoke", NOT_GROUNDED),
    # --- words from both sides of a turn, a negation that coordinates, a clause of someone else's ----------
    Case("en-across-but", "I love my dog but hate my cat", "PERSON loves PERSON's cat",
         "I love my dog but hate my cat", NOT_GROUNDED),
    Case("en-across-semicolon", "I love dogs; cats scare me", "PERSON loves cats", "I love dogs; cats scare me",
         NOT_GROUNDED),
    Case("de-across-aber", "Ich mag Hunde, aber Katzen hasse ich", "PERSON mag Katzen",
         "Ich mag Hunde, aber Katzen hasse ich", NOT_GROUNDED),
    Case("en-neither-nor", "Neither my wife nor I eat meat", "PERSON eats meat", "I eat meat", NEGATED),
    Case("de-und-ich-new-clause", "Mein Mann ist Pilot und ich bin Lehrerin", "PERSON ist Pilot",
         "Mein Mann ist Pilot und ich bin Lehrerin", NOT_GROUNDED),
    Case("en-and-i-new-clause", "My husband is a pilot and I am a teacher", "PERSON is a pilot",
         "My husband is a pilot and I am a teacher", NOT_GROUNDED),
    # --- what is under way or to come told as done ----------------------------------------------------------
    Case("en-moving-to-moved", "I'm moving to Oslo next month", "PERSON moved to Oslo", "I'm moving to Oslo", PAST),
    Case("en-graduating-to-graduated", "I'm graduating from MIT in June", "PERSON graduated from MIT",
         "I'm graduating from MIT", PAST),
    Case("pl-przeprowadzam-to-przeprowadzila", "Przeprowadzam się do Oslo", "PERSON przeprowadziła się do Oslo",
         "Przeprowadzam się do Oslo", PAST),
    # --- a qualifier added: grammar to a search, a claim to a memory -------------------------------------
    Case("en-adds-only", "I drink tea", "PERSON only drinks tea", "I drink tea", NOT_GROUNDED),
    Case("en-adds-always", "I drink tea", "PERSON always drinks tea", "I drink tea", NOT_GROUNDED),
    Case("en-adds-still", "I swim", "PERSON still swims", "I swim", NOT_GROUNDED),
    Case("en-adds-again", "I have a cat", "PERSON has a cat again", "I have a cat", NOT_GROUNDED),
    Case("en-adds-well", "I play guitar badly", "PERSON plays guitar well", "I play guitar badly", NOT_GROUNDED),
    Case("en-adds-most", "I drink tea", "PERSON drinks the most tea", "I drink tea", NOT_GROUNDED),
    Case("de-adds-nur", "Ich trinke Tee", "PERSON trinkt nur Tee", "Ich trinke Tee", NOT_GROUNDED),
    Case("de-adds-noch", "Ich rauche", "PERSON raucht noch", "Ich rauche", NOT_GROUNDED),
    Case("pl-adds-tylko", "Piję herbatę", "PERSON pije tylko herbatę", "Piję herbatę", NOT_GROUNDED),
    # --- spelling tricks inside the quote ----------------------------------------------------------------
    Case("en-zwsp-in-dont", f"I don{ZWSP}'t have a dog", "PERSON has a dog", f"I don{ZWSP}'t have a dog", NEGATED),
    Case("en-cyrillic-o-in-not", f"I do n{CYR_O}t have a dog", "PERSON has a dog", f"I do n{CYR_O}t have a dog",
         NEGATED),
    Case("en-zwnj-in-never", f"I am ne{ZWNJ}ver sad", "PERSON is sad", f"I am ne{ZWNJ}ver sad", NEGATED),
    Case("en-zwsp-in-would", f"I wou{ZWSP}ld eat meat", "PERSON eats meat", f"I wou{ZWSP}ld eat meat",
         HYPOTHETICAL),
    Case("en-cyrillic-o-in-doctor", f"My d{CYR_O}ctor is vegan", "PERSON is vegan", f"My d{CYR_O}ctor is vegan",
         NOT_GROUNDED),
    Case("en-fullwidth-if", "ｉｆ I were rich, I buy a boat", "PERSON buys a boat", "I buy a boat", HYPOTHETICAL),
    Case("en-rlm-before-used", f"I {RLM}used to smoke", "PERSON smokes", f"I {RLM}used to smoke", PAST),
    # --- everyday facts: still kept ----------------------------------------------------------------------
    Case("keep-en-diagnosed", "I was diagnosed with diabetes last year", "PERSON is diabetic",
         "I was diagnosed with diabetes", KEEP),
    Case("keep-en-got-a-dog", "I got a dog two years ago", "PERSON has a dog", "I got a dog", KEEP),
    Case("keep-en-lived-since", "I've lived in Berlin since 2019", "PERSON lives in Berlin",
         "I've lived in Berlin since 2019", KEEP),
    Case("keep-en-used-to-kept", "I used to live in Paris", "PERSON used to live in Paris",
         "I used to live in Paris", KEEP),
    Case("keep-en-born", "I was born in Poland", "PERSON was born in Poland", "I was born in Poland", KEEP),
    Case("keep-en-want-kept", "I want to learn piano", "PERSON wants to learn piano", "I want to learn piano",
         KEEP),
    Case("keep-en-rarely-kept", "I rarely drink coffee", "PERSON rarely drinks coffee", "I rarely drink coffee",
         KEEP),
    Case("keep-en-know-that", "I know that I have diabetes", "PERSON has diabetes", "I have diabetes", KEEP),
    Case("keep-en-my-dog", "I love my dog Rex", "PERSON has a dog called Rex", "I love my dog Rex", KEEP),
    Case("keep-en-my-name", "My name is Ana", "PERSON is called Ana", "My name is Ana", KEEP),
    Case("keep-en-wife-and-i", "My wife and I live in Berlin", "PERSON lives in Berlin",
         "My wife and I live in Berlin", KEEP),
    Case("keep-en-by-bike", "I go to work by bike", "PERSON goes to work by bike", "I go to work by bike", KEEP),
    Case("keep-en-stopped-by", "I stopped by the bakery", "PERSON stopped by the bakery",
         "I stopped by the bakery", KEEP),
    Case("keep-en-need-glasses", "I need glasses to read", "PERSON needs glasses to read",
         "I need glasses to read", KEEP),
    Case("keep-en-have-to-my-dog", "I have to walk my dog Luna every morning", "PERSON's dog is called Luna",
         "I have to walk my dog Luna every morning", KEEP),
    Case("keep-en-age", "I am 34 years old", "PERSON is 34 years old", "I am 34 years old", KEEP),
    Case("keep-en-rlm-marks", f"{RLM}I am {RLM}vegan", "PERSON is vegan", f"I am {RLM}vegan", KEEP),
    Case("keep-de-seit", "Ich wohne seit 2019 in Berlin", "PERSON wohnt seit 2019 in Berlin",
         "Ich wohne seit 2019 in Berlin", KEEP),
    Case("keep-de-katzen", "Ich habe zwei Katzen", "PERSON hat zwei Katzen", "Ich habe zwei Katzen", KEEP),
    Case("keep-pl-pies", "Mój pies ma na imię Burek", "Pies PERSON ma na imię Burek", "Mój pies ma na imię Burek",
         KEEP),
    Case("keep-pl-mam-psa", "Mam psa", "PERSON ma psa", "Mam psa", KEEP),
    Case("keep-es-vivo", "Vivo en Madrid", "PERSON vive en Madrid", "Vivo en Madrid", KEEP),
    # English "by" is not Polish "by": a fact that leaves it out is still said.
    Case("keep-en-by-author", "My favourite book is Dune by Herbert", "PERSON's favourite book is Dune",
         "My favourite book is Dune", KEEP),
    Case("keep-en-cycle-by-bike", "I cycle to work by bike", "PERSON cycles to work", "I cycle to work", KEEP),
    Case("pl-by-still-conditional", "Ja by nie jadł mięsa", "PERSON nie je mięsa", "Ja by nie jadł mięsa",
         HYPOTHETICAL),
    # A question turned to the listener after a statement asks about them, not about it.
    Case("keep-en-do-you", "I love sushi, do you?", "PERSON loves sushi", "I love sushi", KEEP),
    Case("keep-en-and-you", "I'm a nurse, and you?", "PERSON is a nurse", "I'm a nurse", KEEP),
    Case("keep-en-what-about-you", "I live in Porto, what about you?", "PERSON lives in Porto", "I live in Porto",
         KEEP),
    Case("keep-de-und-du", "Ich wohne in Berlin, und du?", "PERSON wohnt in Berlin", "Ich wohne in Berlin", KEEP),
    Case("keep-pl-a-ty", "Mieszkam w Krakowie, a ty?", "PERSON mieszka w Krakowie", "Mieszkam w Krakowie", KEEP),
    # A relative clause after the quote tells of the thing it names; an interjection governs nothing.
    Case("keep-en-cat-that-needs", "I have a cat that needs a lot of attention", "PERSON has a cat", "I have a cat",
         KEEP),
    Case("keep-en-teacher-who-wants", "I'm a teacher who wants to change schools", "PERSON is a teacher",
         "I'm a teacher", KEEP),
    Case("keep-en-omg", "OMG I just adopted a puppy!!", "PERSON just adopted a puppy", "I just adopted a puppy",
         KEEP),
    Case("en-relative-keeps-the-negation-before", "I don't have a dog that barks", "PERSON has a dog",
         "have a dog", NEGATED),
    Case("en-dont-i", "I love sushi, don't I?", "PERSON loves sushi", "I love sushi", QUESTION),
    Case("en-is-that-weird", "I love sushi, is that weird?", "PERSON loves sushi", "I love sushi", QUESTION),
    # --- issue 32: the holes closed by structure ----------------------------------------------------------
    Case("en-gave-up-sweets", "I gave up sweets for good", "PERSON eats sweets", "I gave up sweets", NEGATED),
    Case("en-non-vegan", "I'm a non-vegan", "PERSON is a vegan", "I'm a non-vegan", NEGATED),
    Case("de-abgegeben", "Ich habe meinen Hund abgegeben und das Rauchen aufgegeben", "PERSON raucht",
         "das Rauchen aufgegeben", NEGATED),
    Case("en-nor-scope", "I neither smoke nor drink beer", "PERSON drinks beer", "drink beer", NEGATED),
    Case("en-nope-next", "I love camping. Nope.", "PERSON loves camping", "I love camping", NEGATED),
    Case("de-ja-klar-sarcasm", "Ja klar, ich liebe Montage", "PERSON liebt Montage", "ich liebe Montage", NEGATED),
    Case("en-only-if-time", "I cook only if I have time", "PERSON cooks", "I cook", HYPOTHETICAL),
    Case("pl-bede-studiowac", "Będę studiować prawo", "PERSON studiuje prawo", "Będę studiować prawo",
         HYPOTHETICAL),
    Case("de-werde-umziehen", "Ich werde nach Graz umziehen", "PERSON zieht nach Graz um",
         "Ich werde nach Graz umziehen", HYPOTHETICAL),
    Case("en-colon-her-card", "Her card said it all: I am retiring", "PERSON is retiring", "I am retiring", REPORTED),
    Case("pl-szwagrowi", "szwagrowi urodził się syn", "PERSON urodził się syn", "szwagrowi urodził się syn",
         NOT_GROUNDED),
    Case("en-pawel-lower", "pawel plays the cello", "PERSON plays the cello", "pawel plays the cello", NOT_GROUNDED),
    Case("de-number-dot", "Ich laufe 2.000 Meter", "PERSON läuft 2 Meter", "Ich laufe 2.000 Meter", NOT_GROUNDED),
    Case("pl-time-swap", "Wstaję o 7:20", "PERSON wstaje o 20:7", "Wstaję o 7:20", NOT_GROUNDED),
    Case("en-name-swap-pets", "My horse is Storm and my goat is Daisy", "PERSON's horse is Daisy",
         "My horse is Storm and my goat is Daisy", NOT_GROUNDED),
    Case("keep-en-name-bound-pets", "My horse is Storm and my goat is Daisy", "PERSON's goat is Daisy",
         "my goat is Daisy", KEEP),
    Case("keep-en-dont-share", "Please never share my address with anyone", "PERSON never wants their address "
         "shared", "never share my address with anyone", KEEP),
    Case("keep-de-fahre", "Ich fahre einen alten Golf", "PERSON fährt einen alten Golf", "Ich fahre einen alten Golf",
         KEEP),
    Case("keep-pl-ide", "Idę co tydzień na basen", "PERSON idzie co tydzień na basen", "Idę co tydzień na basen",
         KEEP),
    Case("keep-fr-elision-aime", "J'aime le jazz", "PERSON aime le jazz", "J'aime le jazz", KEEP),
    Case("keep-en-four-kids", "I have four kids", "PERSON has 4 kids", "I have four kids", KEEP),
    Case("keep-de-vier", "Ich habe 4 Enkel", "PERSON hat vier Enkel", "Ich habe 4 Enkel", KEEP),
    Case("keep-en-still-said", "I still swim every morning", "PERSON still swims every morning",
         "I still swim every morning", KEEP),
    Case("keep-en-only-said", "I only drink green tea", "PERSON only drinks green tea", "I only drink green tea",
         KEEP),
    Case("keep-en-also-now", "I live in Oslo and I have a cat", "PERSON now also has a cat", "I have a cat", KEEP),
    Case("keep-pl-tylko-said", "Piję tylko herbatę", "PERSON pije tylko herbatę", "Piję tylko herbatę", KEEP),
    Case("keep-en-both-sides", "I love my dog but hate my cat", "PERSON loves PERSON's dog but hates PERSON's cat",
         "I love my dog but hate my cat", KEEP),
    Case("keep-en-and-i-teacher", "My husband is a pilot and I am a teacher", "PERSON is a teacher",
         "I am a teacher", KEEP),
    Case("keep-en-moved-said", "I've moved to Oslo", "PERSON moved to Oslo", "I've moved to Oslo", KEEP),
    Case("keep-en-graduated-said", "I graduated from MIT", "PERSON graduated from MIT", "I graduated from MIT", KEEP),
    Case("keep-en-aside-says-more", "I have a cat (a tabby called Miso)", "PERSON has a cat", "I have a cat",
         KEEP),
    Case("keep-en-follow-up-says-more", "I have a cat. No dog though.", "PERSON has a cat", "I have a cat", KEEP),
    Case("keep-en-always-loved", "I've always loved jazz", "PERSON loves jazz", "I've always loved jazz", KEEP),
    Case("keep-en-once-met", "I once met Obama", "PERSON met Obama", "I once met Obama", KEEP),
    Case("keep-en-once-a-week", "Once a week I swim", "PERSON swims once a week", "Once a week I swim", KEEP),
    Case("keep-en-thank-you", "Thank you, I have a cat", "PERSON has a cat", "I have a cat", KEEP),
    Case("keep-en-tail-says-more", "I have a cat, a tabby called Miso", "PERSON has a cat", "I have a cat", KEEP),
    Case("keep-en-was-before", "I'm a nurse. Was a teacher before.", "PERSON is a nurse", "I'm a nurse", KEEP),
    Case("keep-en-kind-kept", "I'm kind of vegan", "PERSON is kind of vegan", "I'm kind of vegan", KEEP),
    Case("keep-de-mann-und-ich", "Mein Mann und ich laufen Marathon", "PERSON läuft Marathon",
         "Mein Mann und ich laufen Marathon", KEEP),
    Case("keep-pl-maz-i-ja", "Mój mąż i ja mamy psa", "PERSON ma psa", "Mój mąż i ja mamy psa", KEEP),
    Case("keep-en-numbers-bound", "I have 2 kids and 3 cats", "PERSON has 2 kids and 3 cats",
         "I have 2 kids and 3 cats", KEEP),
    Case("keep-en-places-reordered", "I moved to Oslo from Bergen", "PERSON moved from Bergen to Oslo",
         "I moved to Oslo from Bergen", KEEP),
    Case("keep-en-places-coordinated", "I studied in Kraków and in Berlin", "PERSON studied in Berlin",
         "I studied in Kraków and in Berlin", KEEP),
    Case("keep-pl-places-right", "Mieszkam w Krakowie i pracuję w Warszawie", "PERSON pracuje w Warszawie",
         "Mieszkam w Krakowie i pracuję w Warszawie", KEEP),
    Case("keep-en-friend-and-i", "My best friend and I run marathons", "PERSON runs marathons",
         "My best friend and I run marathons", KEEP),
]

ADVERSARIAL = [c for c in CASES if c.refused_as is not None]
LEGITIMATE = [c for c in CASES if c.refused_as is None]


def item(case: Case) -> dict[str, Any]:
    return {"kind": "fact", "text": case.text, "evidence": case.evidence}


def validate(case: Case):
    turns = [Turn(AuthorRole.USER, "p_ana", case.said, "console", "chat", "m0", T0, Scope.DM)]
    return validate_extraction(json.dumps({"memories": [item(case)]}), 0, turns=turns, person="p_ana",
                               known_ids=set(), person_names=["Ana"])


def test_the_table_has_no_duplicates_and_covers_its_languages() -> None:
    assert len({c.id for c in CASES}) == len(CASES)
    assert len({(c.said, c.text, c.evidence) for c in CASES}) == len(CASES)
    for prefix in ("en-", "de-", "pl-", "fr-", "es-", "keep-en-", "keep-de-", "keep-pl-"):
        assert any(c.id.startswith(prefix) for c in CASES), prefix
    assert all(c.evidence in c.said for c in CASES)  # every quote is really there: support is what is attacked


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_validator_refuses_what_the_sentence_does_not_say(case: Case) -> None:
    report = validate(case)
    if case.refused_as is None:
        assert len(report.accepted) == 1, (case.id, report.rejected)
    else:
        assert report.accepted == [], case.id
        assert [r.reason for r in report.rejected] == [case.refused_as], case.id


def test_a_receipt_keeps_the_sentence_as_written_not_as_the_rules_read_it() -> None:
    """The rules read look-alike letters and invisible marks folded away; what is kept is what was typed."""
    said = f"Ｈｉ！ {RLM}I am {RLM}vegan and I cycle."
    turns = [Turn(AuthorRole.USER, "p_ana", said, "console", "chat", "m0", T0, Scope.DM)]
    raw = json.dumps({"memories": [{"kind": "fact", "text": "PERSON is vegan", "evidence": f"I am {RLM}vegan"}]})
    report = validate_extraction(raw, 0, turns=turns, person="p_ana", known_ids=set())
    (kept,) = report.accepted
    assert kept.evidence_sentences == (f"{RLM}I am {RLM}vegan and I cycle.",)


# --- a few through the real capture path, the fake model playing the hostile extractor -----------------

THROUGH_CAPTURE = ["en-used-to", "en-cyrillic-o-in-not", "en-going-to", "en-my-therapist", "en-tone-tag",
                   "de-will", "keep-en-diagnosed", "keep-en-lived-since", "keep-en-have-to-my-dog"]


async def test_through_capture_only_the_supported_memories_are_staged(
    service: MemoryService, db: Database, fake_llm: FakeOpenAI
) -> None:
    proposing: list[dict[str, Any]] = []
    fake_llm.route = lambda body: Scripted(text=json.dumps({"memories": proposing}))
    cases = [c for c in CASES if c.id in THROUGH_CAPTURE]
    assert len(cases) == len(THROUGH_CAPTURE)
    kept: dict[str, list[str]] = {}
    for n, case in enumerate(cases):
        conversation = f"console:attack{n}"
        where = {"conversation": conversation, "chat_id": f"attack{n}", "group": False}
        person, _ = await say(db, f"console:ana{n}", case.said, name="Ana", **where)
        last = await reply(db, "I see.", **where)
        proposing[:] = [item(case)]
        await service.capture.run(conversation, last)
        kept[case.id] = [note.record.text for note in await service.list_notes(person)]
    assert {i: t for i, t in kept.items() if t} == {c.id: [c.text] for c in cases if c.refused_as is None}
