"""Support, not just presence: does the person's own sentence actually say what the memory says?

A literal quote proves the person typed the words, not that the words state the memory: "I am vegan"
is a substring of "I would never say I am vegan". :func:`check_support` takes one memory's text, its
quotes and the person's turn texts they were found in, and applies these rules, in English, Polish
and German (with the plainest French and Spanish negations, conditions, modals and family words as
well), to each quote where it stands in its turn (an occurrence that passes every rule is enough).
The rules read the turn, the quote and the memory through :func:`memory.core.text.fold`: every default-ignorable
and bidirectional-control character removed (variation selectors, a right-to-left override), fullwidth forms
folded and the confusables skeleton applied ("nоt" with a Cyrillic "о" or a Coptic "ⲟ" is "not", "？" is "?"),
so no spelling trick hides a word from them; what is kept is what was typed. Word forms are compared through
their dictionary forms too (:func:`memory.core.text.lemmas`: "esse"/"isst", "biorę"/"bierze"), so the rules
follow the grammar, not lists of forms.

1. **Whole words**: the quote neither starts nor ends inside a word ("vegan" out of "vegans").
2. **A clause from its start**: the quote begins where a clause begins (the turn's or a sentence's
   start, after punctuation, or after a connective such as "and", "but", "that", "i", "że", "und",
   "dass"), or leaves off only grammar words ("I was", "ich bin"), an interjection ("OMG"), one adverb in
   -ly, or one leading phrase of place or time ("at work", "these days", "w pracy", "seit 2019"), so whatever governs it
   is not cut off ("I am vegan" out of "I doubt I am vegan" is refused).
3. **Polarity**: the clause the quote stands in is negated ("not", "never", "n't", "nie", "nigdy",
   "nicht", "kein", ...) exactly when the memory is. Words that cut a clause down or undo it count as
   negations ("rarely", "almost", "quit", "lost", "non-", "gave up", "got rid of", "kaum", "rzadko", and
   any form of "aufgeben", "abschaffen", "rzucić", "pozbyć się"), and so do approximators ("kind of",
   "practically", "aspiring", "-ish", "trochę", "irgendwie") and a hedge set off after the quote ("..., sort
   of": negated; "..., probably": hypothetical). A short next sentence that moves the statement to the past
   ("Well, was.") makes it past (rule 9). The clause runs from the previous
   clause boundary (punctuation or a coordinating conjunction) to the next one or to a relative pronoun after
   the quote ("I have a cat that needs ..." is about the cat), so "I'm not a fan of cats,
   but I love dogs" supports "loves dogs", while "I would never say I am vegan" does not support "is vegan".
   A comma before "that", "że", "dass" or a German "zu" infinitive does not end the clause before it
   ("Nigdy nie powiedziałbym, że jestem weganinem"), and "or" (or "and" before an article) joining a phrase
   without a subject of its own keeps it in the clause before: "I don't own a car or a bike" owns no bike.
4. **Not hypothetical**: no condition anywhere in the sentence ("if", "unless", "in case", "assuming",
   "whenever", "as soon as", a clause-opening "once I ...", "gdyby", "jeśli", "wenn", "falls", "sobald";
   "only if" is one too, a concession such as "even if" is not), and no
   modal, hedge, wish, plan, obligation or future in the quote's clause ("would", "I'd", "might", "maybe",
   "want to", "need", "should", "have to", "will", "going to", "thinking of", "about to", "byłbym", "chcę",
   "będę", "würde", "möchte", "muss", "werde", "überlege") unless
   the memory carries a modal or wish of its own ("would like to", "wants to") or repeats the clause's,
   or says no more than what the clause's possessives name ("my dog Luna").
5. **Not a question**: no question mark from the quote on (also one followed by an emoji, or fullwidth),
   and the sentence opens neither with "czy" nor with an auxiliary before its subject ("Do I have ...",
   "Should I ...", "Bin ich ..."). A question turned to the listener after it ("..., do you?", "und du?")
   asks nothing about the statement.
6. **Not reported**: no verb of saying, thinking, claiming or denying, nor a hearsay word, comes before
   the quote in its sentence or inside the quote ("my friend says I am vegan", "I think", "I deny",
   "apparently", "podobno", "angeblich"), nor trails it ("..., says my mum"), unless introduced by "as"
   ("as I said"); a verb of telling that opens the sentence as an order to hold back ("don't tell anyone
   about my diagnosis", "Erzähl niemandem ...") is the person's own instruction, not a report. What follows
   a colon after another person or their message ("Her message was: I am pregnant") is theirs.
7. **Grounded**: every content word of the memory (its names, numbers, places and objects, and its
   verbs) appears in the quotes, allowing for inflection ("lives"/"live", "Krakowie"/"Kraków",
   "wohnt"/"wohne", and by dictionary form); numbers, in digits or number words, match as whole values in
   order ("1,200" is not "200", "12.05.1990" not "05.12.1990", "two" is "2"). Words that only refer to
   the person ("PERSON", their name, pronouns), grammar words and words of wish or modality are exempt, but
   not a word that qualifies the fact ("only", "always", "still", "again", "more", "very", "well", "nur",
   "noch", "tylko"): a memory that adds one claims more than the quote says. Where a quote turns ("but",
   "aber", "ale", a semicolon), each part of the memory is grounded on one side of the turn. A
   name is bound to the noun it follows: "my dog is Rex and my cat is Luna" does not support "dog is Luna";
   a number to the noun it counts: "2 kids and 3 cats" does not support "3 kids"; and a place to the verb
   before its preposition: "I work in Oslo and live in Bergen" does not support "lives in Oslo".
8. **About the person**: a sentence about someone else is not a fact about the speaker. Every word for
   another person in the quote's clause ("my sister", "my therapist", "in my family", "mój brat",
   "meine Mutter") and the quote's opening word when it is capitalised and not grammar ("Tom is vegan")
   must appear in the memory as well, unless the speaker is a subject beside them ("my wife and I"). Those
   words are matched in any case form by dictionary form ("szwagrem", "teściowej", "mi jefe"); a clause whose
   first word is followed by a verb in the third person ("ola lives ...", "jonas wohnt ...") has that word for
   its subject, capitalised or not. A
   quote opening with a verb in the third person ("is vegan", "ist", "jest") has another subject, and a
   clause opening with the speaker's possessive ("my X is ...") is about X, which the memory must name. A clause
   with "you" for its subject ("You have a cat", "Du hast eine Katze") is said of the listener, and a quote
   opening a relative clause ("my mom, who lives in Oslo, ...") of whoever its pronoun stands for.
9. **The tense is kept**: a clause in the past ("used to", "früher", "dawniej"; "was", "had", "war",
   "byłam" before a noun or adjective, not before a participle: "I was diagnosed" still holds; or the
   memory's verb in the present where the quote has it in the past: "lives"/"lived", "wohnt"/"wohnte",
   "mieszka"/"mieszkałam") supports only a memory that says it was. A perfect with "since"/"for" lasts. The
   other way, a memory's verb in the past ("moved") is not supported by the same verb said only in the present
   or the future ("I'm moving to Oslo"): that tells as done what is under way.
10. **What governs a "that"-clause**: the words before "that"/"dass"/"że" decide whether what follows is
   asserted ("I hope that I get the job" does not say "gets the job"): they must be grammar, assert it
   ("I know that", "the truth is that"), or be in the memory too.
11. **Their own words**: a quote inside quotation marks, in a sentence opened by ">", after a
   forwarding header ("Fwd:"), or after a colon following a request to work on a text ("Translate: ...",
   "Popraw: ...") is someone else's text passed on, or a text to work on.
12. **Meant**: a tone tag anywhere in the message ("/s", "/j"), a joke marker after the quote ("jk",
   "kidding", an eye-roll or unamused emoji), a short take-back as the next sentence ("Not.", "haha no",
   "no I don't", "Nie.", "Nicht.") or in brackets right after the quote ("(not really)"), or sarcasm opening
   the sentence ("Yeah right, ...", "No jasne, ...", "Ja klar, ...")
   takes it back.

The sentence (or sentences) the passing occurrence stands in is returned, with a short sentence that
immediately follows it (a few words, or no letters at all: "Really!", an emoji), so the receipt keeps
what was said whole.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ground.tunables import GROUNDING_MAX_ENDING_CHARS, PREFIX_MATCH_MIN_CHARS
from memory.core.text import fold, is_stop_word, lemmas, same_lemma, tokens, words_match


class Unsupported(enum.StrEnum):
    PARTIAL = "evidence_partial"  # cuts a word, or starts inside a clause
    NEGATED = "evidence_negated"
    HYPOTHETICAL = "evidence_hypothetical"
    QUESTION = "evidence_question"
    REPORTED = "evidence_reported"
    NOT_GROUNDED = "not_grounded"
    PAST = "evidence_past"  # the quote tells what was, the memory what is


@dataclass(frozen=True, slots=True)
class Supported:
    sentences: tuple[str, ...]  # the whole sentence each quote stands in, in quote order


def _set(*groups: str) -> frozenset[str]:
    return frozenset(w for group in groups for w in group.split())


NEGATIONS = _set(
    "not no never nor neither none nothing nobody nowhere cannot without",
    "nie nigdy nic nikt nigdzie żaden żadna żadne żadnego żadnej ani bez",
    "nicht nie niemals nichts niemand nirgends nirgendwo weder kein keine keinen keinem keiner keines ohne",
    # French and Spanish are not among the languages the rules claim, but their plain negators cost nothing
    # and keep a memory in those languages from dropping one ("Je n'habite pas à Paris").
    "ne pas jamais rien aucun aucune sans nunca jamás nada nadie ningún ninguna tampoco",
)
# Words that cut a clause down to almost nothing, or undo it: "I rarely drink coffee" does not say "drinks
# coffee", "I almost died" not "died", "I quit smoking" not "smokes", "I lost my job" not "has a job". They
# count as a negation, so the memory must carry one too (most simply, the same word). German "fast" is left
# out: it is also the English adjective.
LIMITERS = _set(
    "hardly barely scarcely rarely seldom almost nearly quit quits stopped ceased lost sold failed non",
    "rzadko ledwo ledwie prawie niemal",
    "kaum selten beinahe aufgehört verloren verkauft",
    # Approximators say it holds only in part, or not yet: "I'm kind of vegan" is not "vegan", "an aspiring
    # writer" not "a writer", "vegan-ish" not "vegan".
    "kinda sorta practically basically virtually somewhat partly partially semi quasi ish aspiring wannabe",
    "trochę niby poniekąd częściowo", "irgendwie teilweise halbwegs",
)
# Polish verbs of stopping, losing and selling inflect too much for a list: their stems.
LIMITER_STEMS = ("przesta", "strac", "sprzeda")
# Verbs that undo what follows, by their dictionary form, so every person, tense and participle counts: "ich
# habe ... aufgegeben", "rzuciłem palenie", "pozbyłam się samochodu".
LIMITER_LEMMAS = _set("aufgeben aufhören abschaffen verlieren", "rzucić przestać stracić pozbyć",
                      "abandonner arrêter dejar abandonar")
# Undoing spelt in two words: "I gave up smoking", "I got rid of my car".
# Approximating spelt in more than one word: "kind of", "sort of", "pretty much", "more or less".
LIMITER_PHRASES: tuple[tuple[str, ...], ...] = (
    *((v, "up") for v in "give gives gave given giving".split()),
    *((v, "rid") for v in "get gets got gotten getting".split()),
    ("kind", "of"), ("sort", "of"), ("pretty", "much"), ("more", "or", "less"),
)
CONDITIONALS = _set("if unless whether suppose supposing hypothetically assuming provided providing whenever",
                    "jeśli jeżeli gdyby jeśliby czy kiedykolwiek",
                    "wenn falls sofern ob angenommen vorausgesetzt sobald",
                    "si")  # French and Spanish "if"
# Conditions of more than one word: "in case I get the job, ...", "as long as I live here, ...", "as soon as I
# save enough, ...".
CONDITIONAL_PHRASES = (("in", "case"), ("as", "long", "as"), ("as", "soon", "as"), ("o", "ile"),
                       ("gdy", "tylko"), ("jak", "tylko"))
# "Only if" is a condition, not a concession: "I drink wine only if there is a wedding" says no more than "if".
CONCESSIVE_BEFORE_IF = _set("even as nawet auch selbst")  # "even if", "auch wenn", "nawet jeśli"
MODALS = _set(
    "would could might may maybe perhaps possibly probably wish",
    "bym byś by byłbym byłabym byłoby mógłbym mogłabym może chyba pewnie prawdopodobnie",
    "würde würdest würden wäre wären hätte hätten könnte könnten vielleicht wahrscheinlich möglicherweise",
    # Obligation, the future, and wanting, needing, hoping, planning or trying: "I should exercise more",
    # "I will move to Lisbon", "I want to play piano", "I need a car" state no fact about the present.
    "should must ought shall will gonna wanna want wants wanted need needs hope hopes hoped plan plans "
    "planned planning intend intends trying",
    "chcę chciałam chciałem muszę musisz powinienem powinnam powinien powinna planuję zamierzam",
    "soll sollte sollten solltest muss musst müssen musste möchte möchtest möchten will willst wollen wollte "
    "werde werden wirst darf dürfte",
    "voudrais voudrait aimerais aimerait devrais devrait pourrais pourrait veux quiero quiere quisiera "
    "querría debería podría quizás quizá",
    # The future and plans being weighed: "I'm considering ...", "będę pracować", "ich überlege, ...".
    "considering contemplating będę będziesz będzie będziemy będziecie będą "
    "überlege überlegt überlegen vorhabe vais voy",
)
# Modality spelt in more than one word: "I have to call my mom", "I'm going to quit my job".
MODAL_PHRASES = (("have", "to"), ("has", "to"), ("had", "to"), ("going", "to"), ("got", "to"),
                 # A plan, not a fact: "I'm thinking of moving", "I'm about to quit".
                 ("thinking", "of"), ("thinking", "about"), ("about", "to"))
# Words that carry the modality or wish in the memory itself, and so may stand in it ungrounded.
WISH_WORDS = _set(
    "would could might may maybe perhaps possibly probably want wants wanted wish wishes hope hopes hoping "
    "plan plans planning intend intends intention dream dreams someday",
    "should must ought shall will going gonna need needs needed try tries trying",
    "chce chciałby chciałaby chciałbym planuje marzy może chyba kiedyś musi powinien powinna zamierza",
    "möchte möchten will wollen wünscht hofft plant träumt würde vielleicht irgendwann soll sollte muss "
    "müssen werde wird",
)
REPORTING = _set(
    "say says said saying tell tells told telling claim claims claimed claiming think thinks thought "
    "believe believes believed reckon reckons guess guessed suppose supposed assume assumes assumed "
    "heard hear hears pretend pretends pretended joke jokes joked joking kidding insist insists insisted "
    "swear swears swore wrote writes texted messaged tweeted "
    "according apparently allegedly supposedly reportedly rumour rumor "
    "rumoured rumored seems seemed imagine imagines imagined deny denies denied doubt doubts doubted",
    "mówi mówią mówił mówiła mówili mówiłem mówiłam powiedział powiedziała powiedzieli powiedziałem "
    "powiedziałam twierdzi twierdzą twierdził twierdziła myśli myślą myślał myślała myślę sądzi sądzę "
    "uważa uważam uważają podobno ponoć rzekomo według słyszałem słyszałam napisał napisała pisze żartuje "
    "żartował żartowała udaje udawał udawała wydaje",
    "sagt sagen sagte sagten gesagt sage meint meinte glaubt glaube glaubte glauben denkt denke "
    "dachte behauptet behauptete erzählt erzählte angeblich laut schreibt schrieb geschrieben scherzt "
    "scherzte vermutet vermute anscheinend gehört bezweifle bezweifelt bestreite bestreitet leugne leugnet",
)
# Clause boundaries for polarity and modality: coordinators and causal connectives start a new clause.
COORDINATORS = _set(
    "and but or nor so yet then because since while whereas however",
    "i a ale lecz lub albo oraz więc bo ponieważ jednak zaś natomiast",
    "und aber oder sondern denn doch weil da während jedoch",
)
COMPLEMENTISERS = _set("that whether if", "że iż czy jakoby", "dass ob")
# A quote may open right after one of these as well: complementisers and discourse openers govern
# nothing by themselves (what governs is checked by the other rules).
OPENERS = COORDINATORS | _set(
    "that also plus well oh ok okay yes yeah yep no nope btw honestly actually anyway now hi hey please "
    "so though still besides",
    "że iż też także no tak cóż właściwie szczerze teraz hej cześć proszę",
    "dass auch ja nein naja übrigens eigentlich ehrlich jetzt hallo bitte also",
    # Interjections open a chat message without governing it: "OMG I just adopted a puppy".
    "omg wow lol lmao haha hehe yay ugh aww hmm gosh jeez whoa ooh ah finally ojej och ach mensch krass",
)
PREPOSITIONS = _set(
    "at in on since during after before for with from by until around about",
    "w we na od do po przy z ze u dla podczas",
    "in im am an auf bei seit nach vor mit von vom aus zur zum während",
)
# Words that open a leading adverbial of time: "these days", "last year", "every Monday", "heute".
TIME_OPENERS = _set(
    "these this last next every each today tonight nowadays lately recently currently usually yesterday "
    "tomorrow",
    "dziś dzisiaj teraz ostatnio zwykle codziennie wczoraj jutro obecnie zazwyczaj",
    "heute jetzt neulich meistens gestern morgen diese dieses diesen letztes letzte letzten nächste "
    "nächstes jeden jede jedes derzeit",
)
LEADING_PHRASE_MAX_WORDS = 4  # "in my old job", "bei der Arbeit"
FIRST_PERSON = _set(
    "i me my mine myself we us our ours i'm",
    "ja mnie mi mną mój moja moje mojego mojej moim moją moich my nas nasz nasza nasze",
    "ich mich mir mein meine meinen meinem meiner meines wir uns unser unsere",
)
# Words for another person: a quote holding one is about them unless the memory names them too. Only the forms
# OTHER_PEOPLE_LEMMAS below does not already give (each of its words counts as it is, and by every form of it).
OTHER_PEOPLE = _set(
    "mother mom mum mommy dad daddy father brother brothers sister sisters boyfriend "
    "girlfriend friend friends son sons daughter daughters kid kids child children colleagues "
    "coworker coworkers neighbour neighbor neighbours neighbors uncle aunt grandma grandmother grandpa "
    "grandfather roommate flatmate fiance fiancee parents family he she they",
    # People by their role: what a doctor or a therapist is, the speaker is not.
    "doctor therapist teacher student classmate manager client patient landlord tenant ex",
    "mamy mamą matki ojca taty brata bratem siostry siostrą żony "
    "żoną męża mężem chłopak dziewczyna przyjaciela kolegi "
    "syna córki dziecko dzieci "
    "rodzice rodzina rodzinie rodziny rodzinę",
    "papa brüder schwestern ehefrau ehemann partnerin freunde "
    "freundinnen kinder onkel oma "
    "opa großmutter großvater eltern familie mitbewohner mitbewohnerin arzt ärztin therapeut therapeutin "
    "lehrer lehrerin",
    "nauczyciel nauczycielka współlokator współlokatorka",
    # French and Spanish family words, so a sister's fact in those languages is not taken for the speaker's.
    "soeur mère père mari femme fille fils ami amie copain copine madre padre "
    "esposa esposo marido novio novia amigo amiga hijo hija médico médecin",
)
# Relatives and roles by their dictionary form, so every case and number the lemmatiser knows counts
# ("szwagrem", "teściowej", "Schwägerin", "jefes") without listing forms.
OTHER_PEOPLE_LEMMAS = _set(
    "stepbrother stepsister stepmother stepfather stepson stepdaughter nephew niece grandson granddaughter "
    "grandchild fiancé husband wife partner boss supervisor colleague mentor coach nanny babysitter",
    "szwagier szwagierka teść teściowa zięć synowa wnuk wnuczka bratanek bratanica siostrzeniec siostrzenica "
    "narzeczony narzeczona partner partnerka kuzyn kuzynka szef szefowa kolega koleżanka sąsiad sąsiadka "
    "przyjaciel przyjaciółka wujek ciocia babcia dziadek brat siostra mama tata matka ojciec syn córka mąż żona "
    "lekarz lekarka terapeuta terapeutka",
    "schwager schwägerin schwiegermutter schwiegervater schwiegersohn schwiegertochter enkel enkelin neffe "
    "nichte verlobte verlobter stiefvater stiefmutter stiefbruder stiefschwester kollege kollegin nachbar "
    "nachbarin freund freundin bruder schwester mutter vater sohn tochter chef chefin",
    "jefe jefa cuñado cuñada suegro suegra tío tía primo prima abuelo abuela vecino vecina compañero compañera "
    "sobrino sobrina nieto nieta hermano hermana",
    "patron patronne oncle tante cousin cousine voisin voisine collègue neveu nièce frère sœur",
)


def _stems(lemma: str) -> set[str]:
    """Where the case forms of ``lemma`` start: itself, without its final vowel ("kolega" -> "koleg-"), and with
    the Polish mobile "e" dropped ("szwagier" -> "szwagr-owi"). Stems shorter than five letters are left out:
    they start too many other words ("neve-" of "neveu" starts "never")."""
    stems = {lemma, lemma[:-1] if lemma[-1:] in "aeiouy" else lemma}
    if lemma[-3:-1] == "ie" or lemma[-2:-1] == "e":
        stems.add(lemma[:-3] + lemma[-1] if lemma[-3:-1] == "ie" else lemma[:-2] + lemma[-1])
    return {stem for stem in stems if len(stem) >= 5}


def _by_initial(stems: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``stems`` grouped by their first letter, so a word is compared with the few that can start it."""
    grouped: dict[str, list[str]] = {}
    for stem in sorted(stems):
        grouped.setdefault(stem[0], []).append(stem)
    return {initial: tuple(group) for initial, group in grouped.items()}


_OTHER_PEOPLE_STEMS = _by_initial(stem for lemma in OTHER_PEOPLE_LEMMAS for stem in _stems(lemma))
CASE_ENDING_MAX_CHARS = 3  # "-owi", "-ami", "-em": what a case adds to a stem


def _other_person(word: str) -> bool:
    """``word`` names another person: a relative or a role, in any form, by its dictionary form, or where the
    lemmatiser does not know the form, by a lexicon stem with a short case ending ("szwagrowi")."""
    if word in OTHER_PEOPLE or not lemmas(word).isdisjoint(OTHER_PEOPLE_LEMMAS):
        return True
    if is_stop_word(word) or word in NEGATIONS:
        return False
    return any(word.startswith(stem) and len(word) - len(stem) <= CASE_ENDING_MAX_CHARS
               for stem in _OTHER_PEOPLE_STEMS.get(word[:1], ()))


# The speaker's possessives: a clause that opens with one ("my therapist is vegan") is about what follows it.
POSSESSIVES = _set(
    "my our", "mój moja moje mojego mojej moi nasz nasza nasze nasi",
    "mein meine meinen meinem meiner meines unser unsere unserem unseren unserer",
    "mon mes notre nos mi mis nuestro nuestra",
)
# Words that name the person rather than something of theirs ("my name is Ana" is about the speaker).
NAME_WORDS = _set("name names nickname imię imienia nazwisko spitzname")
# A quote that opens with a verb in the third person has its subject outside the quote, and it is not the
# speaker, who says "am", "have", "jestem", "bin": "Tom, my roommate, is vegan" does not make "is vegan" theirs.
THIRD_PERSON_OPENERS = _set("is are has does", "jest są ma mają", "ist sind hat")
# Words that put a clause in the past outright: "I used to live in Paris" is not "lives in Paris", "Ich wohnte
# früher in Paris" not "wohnt in Paris".
PAST_WORDS = _set(
    "used formerly previously former",
    "dawniej wcześniej niegdyś",
    "früher damals ehemals ehemalige ehemaliger einst",
)
# A past copula or "had" before a noun or an adjective is a state that was ("I was a smoker", "I had a dog",
# "Byłam weganką", "Ich war Veganer"); before a participle it is an event whose result may last ("I was
# diagnosed with diabetes" does say "is diabetic"), so it does not count.
PAST_COPULAS = _set(
    "was were had",
    "był była było byli były byłem byłam byłeś byłaś",
    "war waren warst hatte hatten hattest",
)
PARTICIPLES = _set("born told made done gone got given taken seen hurt hit left lost paid sent put")
# Words before "that"/"dass"/"że" that assert what follows ("I know that I ...", "the truth is that ...");
# any other word governing a "that"-clause ("I hope that", "I fear that", "so that") must stay in the memory.
FACTIVE = _set(
    "know knew known sure certain admit admitted confess realise realize realised realized remember "
    "glad happy proud sorry fact true truth now given except clear obvious course",
    "wiem wiedziałam wiedziałem pewna pewien pewno fakt prawda przyznaję cieszę teraz",
    "weiß wusste sicher klar tatsache wahr wahrheit zugegeben froh jetzt",
)
# Tone tags and joke markers that take back what the message says: "I love Mondays /s", "... jk".
_TONE_TAG = re.compile(r"(?:^|\s)/(?:s|sarc|sarcasm|j|jk|hj)(?=\W|$)", re.IGNORECASE)
JOKE_WORDS = _set("jk kidding joking", "żartuję żart", "spaß scherz")
# An eye-roll, an upside-down, unamused, smirking or zany face after a statement marks it as not meant.
JOKE_SIGNS = "🙄🙃😒😏🤪😜🤥"
# Sarcasm said before the statement, at its sentence's start: "Yeah right, I love Mondays", "No jasne, ...".
SARCASM_OPENERS = (("yeah", "right"), ("oh", "sure"), ("yeah", "sure"), ("as", "if"), ("no", "jasne"),
                   ("jasne", "jasne"), ("ja", "klar"), ("na", "klar"), ("klar", "doch"), ("oh", "ja"))
# A sentence after the statement this short (in words), or with no letters at all, belongs to it: a take-back
# ("Not.", "haha no", "no I don't": four words as the rules read "don't") undoes it, anything else ("Really!", an
# emoji) is kept in its receipt.
SHORT_FOLLOW_UP_MAX_WORDS = 4
# A forwarded or pasted message: a header such as "Fwd:" before the quote, or a ">" opening its sentence.
_FORWARD_HEADER = re.compile(r"(?:^|\W)(?:fwd?|forwarded(?: message)?|wg|weitergeleitet\w*|pd|przekazan\w*)\s*:",
                             re.IGNORECASE)
# Grammar and person words that a memory may use without the quote having them.
FREE_WORDS = _set(
    "person persons user users kith they them their theirs he him his she her hers it its",
    # Naming a thing adds no claim of its own: "my dog Luna" says the dog is called Luna, and the name
    # itself must still be in the quote.
    "called named nazywa nazywają nazywał nazywała heißt heißen hieß genannt",
    "ona on ono oni one jej jego ich go mu jest są był była było",
    "ich du er sie es wir ihr ihm ihn ihnen sein seine seinen seinem seiner seines ihre ihren ihrem ihrer "
    "ist bin bist sind war waren hat habe hast haben hatte hatten wird werde wurde der die das den dem "
    "des ein eine einen einem einer eines und oder aber im am an auf aus bei mit nach von vom zu zum zur "
    "für über unter seit als wie auch noch schon sehr hier dort jetzt",
)

# Words that say nothing of their own for search (stop words, or free above) but qualify a fact: how often, how
# much, only, still, again, how well. A memory that adds one claims more than its quote says ("I drink tea" is not
# "PERSON only drinks tea", "I swim" not "PERSON still swims", "I play guitar" not "PERSON plays guitar well"), so
# one must be grounded like a content word. Additive and temporal glue ("also", "now") stays free: it changes no
# truth of the fact it sits in.
QUALIFIERS = _set(
    "only just always usually often sometimes once again still already more most very really quite well all lot "
    "lots few bit same other further",
    "tylko bardzo już dość zawsze często czasem czasami wciąż nadal jeszcze znowu znów ciągle",
    "nur immer oft manchmal noch schon wieder sehr ganz alle",
)

_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’»)\]]*(?=\s|$)")
_WORD_CHAR = re.compile(r"\w", re.UNICODE)


def _is_word_char(char: str) -> bool:
    return bool(_WORD_CHAR.match(char))


def _sentence_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence(s) holding ``text[start:end]``."""
    s, e = 0, len(text)
    for m in _SENTENCE_END.finditer(text):
        if m.end() <= start:
            s = m.end()
        elif m.start() >= end - 1 or m.end() >= end:
            e = m.end()
            break
    while s < len(text) and text[s].isspace():
        s += 1
    return s, e


def _whole_words(text: str, start: int, end: int) -> bool:
    if start > 0 and _is_word_char(text[start - 1]) and _is_word_char(text[start]):
        return False
    if end < len(text) and _is_word_char(text[end - 1]):
        after = text[end]
        if _is_word_char(after):
            return False
        # "doctor" out of "doctor's": an apostrophe followed by a letter continues the word.
        if after in "'’" and end + 1 < len(text) and text[end + 1].isalpha():
            return False
    return True


def _clause_starts_at(text: str, sentence_start: int, start: int) -> bool:
    """Rule 2: what the quote leaves off its clause's start is nothing, grammar, or one leading phrase."""
    before = text[sentence_start:start]
    cut = 0
    for m in _HEAD_BOUNDARY_RE.finditer(before):
        cut = m.end()
    head = tokens(before[cut:])
    for i in range(len(head) - 1, -1, -1):
        if head[i] in OPENERS:
            if head[i] in PREPOSITIONS and _leading_phrase(head[i:]):
                return True  # "since" opens a leading phrase here, not a clause: "Since 2020 I've been ..."
            head = head[i + 1:]
            break
    if all(is_stop_word(w) for w in head):
        return True
    if len(head) == 1 and head[0].endswith("ly"):  # "secretly", "honestly"
        return True
    return _leading_phrase(head)


def _leading_phrase(head: Sequence[str]) -> bool:
    """``head`` is one leading phrase of place or time: "at work", "these days", "seit 2019"."""
    return bool(head) and (head[0] in PREPOSITIONS or head[0] in TIME_OPENERS) and len(head) <= LEADING_PHRASE_MAX_WORDS


RELATIVES = _set("that who which whose whom", "który która które którzy którego której", "welche welcher welches")
_BOUNDARY_RE = re.compile(r"[,;:()]|\s[-–—]\s")
# Where a clause may open: punctuation, a dash between spaces, an opening quotation mark.
_HEAD_BOUNDARY_RE = re.compile(r"[,;:()…\"“„«]|\s[-–—]\s|(?:^|\s)['‘]")


# "Or" joins what the clause before it says no to as well: "I don't own a car or a bike" owns no bike. "And"
# does when it joins a noun phrase ("kein Hund und keine Katze" aside, "I don't have a dog and a cat"); "but"
# never does.
POLISH_ONLY_COORDINATORS = _set("a")
SCOPE_OR = _set("or nor lub albo ani oder noch ou ni o")
SCOPE_AND = _set("and und et y")
ARTICLES = _set("a an the", "ein eine einen einem einer eines der die das den dem des",
                "un une le la les des el los las unos unas")


def _joins_a_phrase(coordinator: str, conjunct: Sequence[str]) -> bool:
    """Whether ``coordinator`` joins a phrase (``conjunct``, what follows it up to the quote's end) to the
    clause before it, rather than opening a clause with a subject of its own: then what governs that clause
    (a negation, a modal) governs the phrase too."""
    if not conjunct or conjunct[0] in SUBJECT_PRONOUNS or conjunct[0] in FIRST_PERSON:
        return False
    if coordinator in SCOPE_OR:
        return True
    return coordinator in SCOPE_AND and conjunct[0] in ARTICLES


def _infinitive_clause(rest: str) -> bool:
    """``rest`` (what follows a comma) opens a German infinitive clause with "zu" and no subject of its own,
    which the verb before the comma governs ("Ich plane, ... zu kaufen", "Ich habe vor, ... zu ziehen")."""
    boundary = _BOUNDARY_RE.search(rest)
    words = tokens(rest[:boundary.start()] if boundary is not None else rest)
    return (
        len(words) >= 2 and words[-2] == "zu" and words[-1].endswith("en")
        and not any(w in SUBJECT_PRONOUNS for w in words)
    )


def _clause_around(sentence: str, start: int, end: int) -> str:
    """The clause(s) of ``sentence`` holding ``sentence[start:end]``: from the last boundary before the quote to
    the first one after it. Boundaries are punctuation and coordinating conjunctions."""
    head = sentence[:start]
    cut = 0
    for m in _BOUNDARY_RE.finditer(head):
        # Polish and German set a comma before "że"/"dass": the clause it opens stays governed by the one before.
        following = tokens(head[m.end():m.end() + 12])
        if m.group() == "," and following and following[0] in COMPLEMENTISERS:
            continue
        if m.group() == "," and _infinitive_clause(sentence[m.end():]):
            continue  # "Ich überlege, nach Wien zu ziehen": what the verb before the comma governs
        cut = m.end()
    words = list(re.finditer(r"\w+(?:['’]\w+)*", head))
    polish = _reads_polish(tokens(sentence))
    for m in words:
        word = m.group().casefold()
        if word in POLISH_ONLY_COORDINATORS and not polish:
            continue  # English "a" is an article, not Polish "and"
        if m.start() >= cut and word in COORDINATORS and not _joins_a_phrase(
            m.group().casefold(), tokens(sentence[m.end():end])
        ):
            # A coordinator that is a negation ("nor") opens its clause negated: it stays in it.
            cut = m.start() if word in NEGATIONS else m.end()
    tail = sentence[end:]
    stop = len(tail)
    boundary = _BOUNDARY_RE.search(tail)
    if boundary is not None:
        stop = boundary.start()
    for m in re.finditer(r"\w+(?:['’]\w+)*", tail[:stop]):
        # A relative clause after the quote tells of a thing the quote names, not of the quote: "I have a cat
        # that needs a lot of attention" still says "has a cat".
        if m.group().casefold() in COORDINATORS or m.group().casefold() in RELATIVES:
            stop = m.start()
            break
    return sentence[cut:start] + sentence[start:end] + tail[:stop]


def _has(words: Iterable[str], lexicon: frozenset[str]) -> bool:
    return any(w in lexicon for w in words)


# Polish and German verbs of saying and thinking inflect too much for a word list: their stems.
REPORTING_STEMS = (
    "powiedzia", "powiedzie", "mówi", "mówił", "twierdz", "myśla", "myśle", "sądz", "uważa", "słysza", "napisa",
    "żartow", "udawa", "gesagt", "behaupt", "glaubt", "meint", "erzähl", "vermut", "scherz",
)


def _reporting(word: str) -> bool:
    return word in REPORTING or word.startswith(REPORTING_STEMS)


# French elides its negator onto the verb ("n'habite"), which the tokeniser glues into one word.
_FRENCH_ELIDED_NEGATION = re.compile(r"(?<!\w)n['’](?=\w)", re.IGNORECASE)


_NEGATIONS_AND_LIMITERS = NEGATIONS | LIMITERS


def _negated(text: str) -> bool:
    words = tokens(text)
    return (
        _has(words, _NEGATIONS_AND_LIMITERS)
        or any(w.startswith(LIMITER_STEMS) for w in words)
        or _has_phrase(words, LIMITER_PHRASES)
        or _FRENCH_ELIDED_NEGATION.search(text) is not None
        or any(not lemmas(w).isdisjoint(LIMITER_LEMMAS) for w in words if not is_stop_word(w))
    )


# Polish glues its conditional to the word: "gdybym", "jadłbym", "byłabyś", "zrobiliby".
_POLISH_CONDITIONAL = re.compile(r"^gdyby|ł[aoy]?by(?:m|ś|śmy|ście)?$|liby(?:śmy|ście)?$")


def _has_phrase(words: Sequence[str], phrases: Iterable[tuple[str, ...]]) -> bool:
    return any(tuple(words[i:i + len(p)]) == p for p in phrases for i in range(len(words) - len(p) + 1))


# English glues "would" and "will" to the pronoun ("I'd love to", "I'll move"), and the tokeniser drops the
# clitic. "'d" before a participle is "had" ("I'd been"), which is no modal.
_CLITIC_MODAL = re.compile(r"\w['’](?:ll|d(?!\s+(?:been|had|gone|done|never|already|just|\w+ed)\b))\b", re.IGNORECASE)


# Polish "by" standing alone is also English "by", one of its commonest words ("I go to work by bike", "Dune by
# Herbert"): it counts as a modal only in a clause that reads as Polish, by its letters or its everyday words.
_AMBIGUOUS_MODALS = frozenset({"by"})
_POLISH_LETTERS = frozenset("ąćęłńóśźż")
_POLISH_MARKERS = _set("nie się że żeby aby jest jestem jesteś są mam masz ma mój moja moje ja ty on ona oni też "
                       "już bardzo tak tylko")


def _reads_polish(words: Sequence[str]) -> bool:
    return any(w in _POLISH_MARKERS or not _POLISH_LETTERS.isdisjoint(w) for w in words)


def _modal_words(words: Sequence[str]) -> set[str]:
    found = {w for w in words if w in MODALS or _POLISH_CONDITIONAL.search(w)}
    if found & _AMBIGUOUS_MODALS and not _reads_polish(words):
        found -= _AMBIGUOUS_MODALS
    return found


def _modal(text: str, memory: str) -> bool:
    """Rule 4's modal or hedge in ``text``, unless the memory repeats it word for word: a memory that keeps
    the modality says no more than the clause (English "by" in "I go to work by bike" is Polish "by" too)."""
    words = tokens(text)
    memory_words = set(tokens(memory))
    return (
        bool(_modal_words(words) - memory_words)
        or _has_phrase(words, MODAL_PHRASES)
        or _CLITIC_MODAL.search(text) is not None
    )


def _wishful(memory: str) -> bool:
    """The memory carries a modality or wish of its own ("would like to", "has to", "wants to")."""
    words = tokens(memory)
    return _has(words, WISH_WORDS) or _has_phrase(words, MODAL_PHRASES) or _CLITIC_MODAL.search(memory) is not None


def _conditional(sentence_words: Sequence[str]) -> bool:
    for i, word in enumerate(sentence_words):
        conditional = word in CONDITIONALS or word.startswith("gdyby") or (
            # "Once I get the job, ..." waits on the job; "I once met Tom" does not.
            word == "once" and i + 1 < len(sentence_words) and sentence_words[i + 1] in SUBJECT_PRONOUNS)
        if conditional and not (i > 0 and sentence_words[i - 1] in CONCESSIVE_BEFORE_IF):
            # Polish "czy" opens a question or "whether": either way the clause is not asserted.
            return True
    return _has_phrase(sentence_words, CONDITIONAL_PHRASES)


# A sentence that opens with an auxiliary before its subject asks ("Do I have diabetes", "Am I vegan",
# "Bin ich Veganer") or supposes ("Should I get the job, ...", "Hätte ich Zeit, ..."), with or without
# its question mark: either way it asserts nothing.
INVERTED_AUXILIARIES = _set(
    "do does did am is are was were have has had can could should would will shall may might must",
    "bin bist ist sind seid habe hast hat haben habt kann kannst könnte sollte soll muss darf will werde "
    "wirst wird war waren hätte wäre würde",
)
SUBJECT_PRONOUNS = _set("i you we he she they it my", "ich du er sie es wir ihr")
# Question marks of other scripts and widths are folded to "?" before this; Spanish opens with "¿".
_QUESTION_MARKS = "?¿؟"


# A statement handed over to the listener ends with a short question about them: "I love sushi, do you?", "I'm a
# nurse, and you?", "Mieszkam w Krakowie, a ty?", "Ich wohne in Berlin, und du?". That question asks about the
# listener, not about what was said before it, so its mark does not make the statement a question.
_TAG_LEADS = _set("and but what how so a i und", "about")
_TAG_AUXILIARIES = _set("do does did not have are can will would", "czy")
_TAG_LISTENERS = _set("you u ya yours ty wy pan pani du ihr sie")
_TAG_ENDS = _set("too also either guys then też auch denn")
_TAG_BOUNDARY = re.compile(r"[,;:—–]|\s-\s")


def _listener_tag(words: Sequence[str]) -> bool:
    """``words`` (a clause before a question mark) only turn the question to the listener."""
    rest = list(words)
    while rest and rest[0] in _TAG_LEADS:
        rest = rest[1:]
    while rest and rest[0] in _TAG_AUXILIARIES:
        rest = rest[1:]
    while rest and rest[-1] in _TAG_ENDS:
        rest = rest[:-1]
    return len(rest) == 1 and rest[0] in _TAG_LISTENERS


def _asks(tail: str) -> bool:
    """A question mark in ``tail`` (the sentence from the quote on) that asks about what the quote says."""
    for mark in re.finditer("[" + _QUESTION_MARKS + "]", tail):
        before = tail[:mark.start()]
        cuts = list(_TAG_BOUNDARY.finditer(before))
        if not cuts or not _listener_tag(tokens(before[cuts[-1].end():])):
            return True
    return False


def _question(sentence: str, start: int) -> bool:
    """Rule 5: a question mark from the quote on (or "¿" anywhere), "czy" first, or an inverted auxiliary
    first. A question mark followed by an emoji ("...Lisbon?🤔") ends no sentence, so it is searched for. A
    question turned to the listener after the statement ("..., do you?") asks nothing about it."""
    if "¿" in sentence or _asks(sentence[start:]):
        return True
    words = _without_openers(tokens(sentence))
    if words and words[0] == "czy":
        return True
    return len(words) >= 2 and words[0] in INVERTED_AUXILIARIES and words[1] in SUBJECT_PRONOUNS


# What someone else wrote, posted or put up, by its dictionary form: after such a word and a colon comes their
# text, not the person's ("Her message was: I am pregnant", "Jej wiadomość: jestem w ciąży").
MESSAGE_LEMMAS = _set(
    "message text note letter email mail sms post tweet status sign caption card headline title",
    "wiadomość list napis notatka kartka esemes wpis post status tytuł",
    "nachricht brief notiz zettel schild post status überschrift titel",
    "mensaje carta nota cartel lettre mot panneau",
)
# Another person's possessives and pronouns: a colon after them hands the sentence to that person.
THIRD_PERSON = _set("he she they his her their him them", "on ona oni one jej jego",
                    "er sie ihr ihre ihren ihrem ihrer sein seine seinen seinem seiner", "su sus son sa ses leur")
# An order opens a sentence with its verb, after these at most: "don't tell anyone about my diagnosis" is the
# person's own instruction, not a report of telling.
IMPERATIVE_LEADS = _set("do not don't dont never please pls just", "nie nigdy proszę", "bitte nie nicht niemals")


def _after_someone_elses_colon(sentence: str, start: int) -> bool:
    """The quote follows a colon whose head names another person or a message: their text, passed on."""
    colon = sentence.rfind(":", 0, start)
    if colon == -1:
        return False
    head = tokens(sentence[:colon])
    return any(
        w in THIRD_PERSON or _other_person(w) or not lemmas(w).isdisjoint(MESSAGE_LEMMAS)
        for w in head if w not in FIRST_PERSON
    )


_NOBODY = NEGATIONS | _set("niemandem nikomu nikogo")


def _imperative(words: Sequence[str], index: int) -> bool:
    """``words[index]`` opens its sentence as an order to hold back: only negators and "please" come before
    it, and a negator before it or right after it ("don't tell ...", "erzähl niemandem ...")."""
    return all(w in IMPERATIVE_LEADS for w in words[:index]) and (
        _has(words[:index], _NOBODY) or (index + 1 < len(words) and words[index + 1] in _NOBODY)
    )


def _reported(sentence: str, start: int, end: int) -> bool:
    head = tokens(sentence[:end])
    if any(
        _reporting(w) and not _imperative(head, i) and not (i == 0 and head[1:2] == ["what"])  # "Guess what: ..."
        for i, w in enumerate(head)
    ):
        return True
    if _after_someone_elses_colon(sentence, start):
        return True
    tail = tokens(sentence[end:])
    for i, word in enumerate(tail):
        if _reporting(word) and not (i > 0 and tail[i - 1] in {"as", "jak", "wie"}) and not (
            i > 1 and tail[i - 2] in {"as", "jak", "wie"}
        ):
            return True
    return False


def _grounded_word(word: str, quote_words: Sequence[str]) -> bool:
    if word.isdigit():
        return word in quote_words
    for other in quote_words:
        if words_match(word, other):
            return True
        # Inflection across the three languages ("wohnt"/"wohne", "Kraków"/"Krakowie"): a shared stem of
        # at least PREFIX_MATCH_MIN_CHARS letters with short endings either side.
        common = 0
        for a, b in zip(word, other, strict=False):
            if a != b:
                break
            common += 1
        if (
            common >= PREFIX_MATCH_MIN_CHARS
            and len(word) - common <= GROUNDING_MAX_ENDING_CHARS
            and len(other) - common <= GROUNDING_MAX_ENDING_CHARS
        ):
            return True
    # Irregular forms no shared stem reveals ("esse"/"isst", "biorę"/"bierze", "told"/"tell"): by their
    # dictionary forms, looked up last because it is the slowest.
    return word.isalpha() and any(
        other.isalpha() and (same_lemma(word, other) or _polish_persons(word, other)) for other in quote_words
    )


def _polish_persons(a: str, b: str) -> bool:
    """``a`` and ``b`` are the first and third person of one Polish verb, "gram"/"gra", "czytam"/"czyta",
    which a lemmatiser may take for a noun ("gra", a game)."""
    shorter, longer = sorted((a, b), key=len)
    return longer == shorter + "m" and any(lemma.endswith("ć") for lemma in lemmas(longer) - {longer})


# Number words up to twelve in the five languages, so "two daughters" supports "2 daughters" and back. Words
# that are also articles ("a", "ein", "un") are left out: they name no number.
NUMBER_WORDS = {
    word: str(value)
    for value, spellings in enumerate((
        "zero null cero zéro", "one jeden jedna jedno eins uno une", "two dwa dwie dwóch dwoje zwei dos deux",
        "three trzy trzech troje drei tres trois", "four cztery czterech czworo vier cuatro quatre",
        "five pięć pięciu fünf cinco cinq", "six sześć sześciu sechs seis", "seven siedem siedmiu sieben siete sept",
        "eight osiem ośmiu acht ocho huit", "nine dziewięć dziewięciu neun nueve neuf",
        "ten dziesięć dziesięciu zehn diez dix", "eleven jedenaście elf once onze", "twelve dwanaście zwölf doce douze",
    ))
    for word in spellings.split()
}
# A number as written: digits with the separators of thousands, decimals, dates and times inside it.
_NUMBER = re.compile(r"(?<![\w.,:/])\d+(?:[.,:/'’]\d+)*(?![\w])")


def _number_values(number: str) -> frozenset[str]:
    """The whole values ``number`` may be: "1,500" and "1.500" are 1500 (or the decimals 1.5), "72,5" is 72.5,
    "03.11.1988" is that date and "08:45" that time, each group without leading zeros. Never a part of it:
    "1,500" is not 500, and "03.11.1988" is not "11.03.1988"."""
    groups = re.split(r"[.,:/'’]", number)
    if len(groups) == 1:
        return frozenset({str(int(number))})
    separators = re.findall(r"[.,:/'’]", number)
    values = set()
    if all(sep in ".,'’" for sep in separators) and len(set(separators)) == 1 and all(len(g) == 3 for g in groups[1:]):
        values.add(str(int("".join(groups))))  # thousands
    if len(groups) == 2 and separators[0] in ".,":
        values.add(f"{int(groups[0])}.{groups[1].rstrip('0') or '0'}")  # a decimal
    if not values:
        kind = "t" if separators[0] == ":" else "d"
        values.add(kind + ".".join(str(int(g)) for g in groups))
    return frozenset(values)


def _number_spans(text: str) -> list[tuple[int, int, frozenset[str]]]:
    """Where each number of ``text`` stands, in order, with the whole values it may be, number words included."""
    found = [(m.start(), m.end(), _number_values(m.group())) for m in _NUMBER.finditer(text)]
    for m in re.finditer(r"\w+", text):
        value = NUMBER_WORDS.get(m.group().casefold())
        if value is not None:
            found.append((m.start(), m.end(), frozenset({value})))
    return sorted(found, key=lambda f: f[0])


def _numbers(text: str) -> list[frozenset[str]]:
    """The numbers of ``text`` in order, each as the whole values it may be, number words included."""
    return [values for _start, _end, values in _number_spans(text)]


def _numbers_grounded(text: str, quotes: Sequence[str]) -> bool:
    """Every number of the memory is a whole number of the quotes, and they come in the quotes' order."""
    said = [values for q in quotes for values in _numbers(q)]
    at = 0
    for values in _numbers(text):
        while at < len(said) and said[at].isdisjoint(values):
            at += 1
        if at == len(said):
            return False
        at += 1
    return True


def ungrounded_words(text: str, quotes: Sequence[str], person_words: frozenset[str] = frozenset()) -> list[str]:
    """The content words of a memory's ``text`` that none of its ``quotes`` has (rule 7); numbers, in digits or
    words, are compared as whole values in order (a memory whose numbers the quotes lack gets "#")."""
    quote_words = [w for q in quotes for w in tokens(q)]
    missing = []
    for word in tokens(text):
        if word.isdigit() or word in NUMBER_WORDS:
            continue
        if word in person_words:
            continue
        if word not in QUALIFIERS and (is_stop_word(word) or word in FREE_WORDS or word in WISH_WORDS):
            continue
        if not _grounded_word(word, quote_words):
            missing.append(word)
    if not _numbers_grounded(text, quotes):
        missing.append("#")
    return missing


_CAPITALISED_START = re.compile(r"^\W*(?P<word>[^\W\d_][\w'’]*)")


SPEAKER = _set("i me ich mich ja je moi yo")
AND = _set("and und i et y &")


# How far into its clause a subject that joins the speaker to others reaches: "my husband's best friend and I".
SUBJECT_MAX_WORDS = 5


def _with_the_speaker(words: Sequence[str]) -> bool:
    """Whether the clause's subject joins the speaker to the others: "my sister and I", "ich und meine
    Schwester". What it says is then said of the speaker as well. The join opens the clause, where a subject
    stands: in "my husband is a pilot and I am a teacher" the "and I" begins a claim of its own."""
    words = _without_openers(words)
    return any(
        w in AND and i < SUBJECT_MAX_WORDS
        and ((i > 0 and words[i - 1] in SPEAKER) or (i + 1 < len(words) and words[i + 1] in SPEAKER))
        # A verb before the "and" makes what precedes it a clause, not a subject: "Mein Mann ist Pilot und ich ...".
        and not any(v in INVERTED_AUXILIARIES or _third_person_verb(v) for v in words[:i])
        for i, w in enumerate(words)
    )


# Prepositions of company or benefit: "I live in Lisbon with my partner", "Gotuję obiad dla rodziny" are still
# the speaker's facts, the others beside them or what they do it for ("in my family" is not one of these).
WITH = _set("with for", "z ze dla", "mit für", "avec con pour para")


def _beside_the_speaker(words: Sequence[str], index: int) -> bool:
    """``words[index]`` (a word for another person) stands in a phrase of company ("with my partner", "z mężem",
    "mit meiner Frau", "con mi novio"), at most two words after its preposition."""
    return any(w in WITH for w in words[max(0, index - 2):index])


def _without_openers(words: Sequence[str]) -> list[str]:
    words = list(words)
    while words and words[0] in OPENERS:
        words = words[1:]
    return words


def _about_someone_else(quote: str, clause: str, memory: str) -> bool:
    """Rule 8: the quote's clause speaks of another person (a word for them, or the quote's capitalised
    subject) that the memory leaves out: "I have diabetes" out of "I have diabetes in my family" too. A quote
    whose first word is a verb in the third person ("is vegan") has someone else for its subject, and a clause
    opening with the speaker's possessive ("my therapist is vegan") is about what the possessive names, which
    the memory must name too."""
    memory_words = tokens(memory)
    clause_words = tokens(clause)
    quote_words = _without_openers(tokens(quote))
    if quote_words and quote_words[0] in THIRD_PERSON_OPENERS:
        return True
    if _with_the_speaker(clause_words):
        return False
    opening_words = _without_openers(clause_words)
    if opening_words and opening_words[0] in POSSESSIVES:
        named = []
        for w in opening_words[1:3]:
            if is_stop_word(w) or w in FREE_WORDS:
                break
            named.append(w)
        if named and not any(w in NAME_WORDS or _grounded_word(w, memory_words) for w in named):
            return True
    others = [w for i, w in enumerate(clause_words) if _other_person(w) and not _beside_the_speaker(clause_words, i)]
    if len(opening_words) >= 2 and _third_person_verb(opening_words[1]) and _could_be_a_subject(opening_words[0]):
        others.append(opening_words[0])  # "marta works at a bank", "jonas wohnt in kiel": lower case or not
    opening = _CAPITALISED_START.match(quote)
    if opening is not None and opening.group("word")[0].isupper():
        first = tokens(opening.group("word"))
        if first and _could_be_a_subject(first[0]):
            others.append(first[0])
    return any(not _grounded_word(w, memory_words) for w in others)


SECOND_PERSON = _set("you u ya", "ty wy", "du ihr", "tu vous usted ustedes")


def _said_of_the_listener(clause: str, quote: str) -> bool:
    """Rule 8 for the listener: the quote's clause has "you" for its subject, right before the quote or as its
    first word ("You have a cat", "Du hast eine Katze"): said of kith or of whoever is addressed, not the
    speaker."""
    at = clause.find(quote)
    head = tokens(clause[:at]) if at >= 0 else []
    quote_words = tokens(quote)
    return bool(head and head[-1] in SECOND_PERSON) or bool(quote_words and quote_words[0] in SECOND_PERSON)


def _relative_subject(sentence: str, start: int, quote: str) -> bool:
    """Rule 8 for a relative clause: the quote opens right after "who"/"which"/"który"/"der" with no subject of
    its own ("my mom, who lives in Oslo, is sick"), so it says what it says of whoever the pronoun stands for."""
    head = tokens(sentence[:start])
    quote_words = tokens(quote)
    return bool(head and head[-1] in RELATIVES and quote_words
                and quote_words[0] not in SUBJECT_PRONOUNS and quote_words[0] not in FIRST_PERSON)


def _first_person_verb(word: str) -> bool:
    """A Polish verb the speaker uses of themselves, which carries its own subject: "Pozbyłam", "rzuciłem",
    "pracuję", "mieszkam" (by its dictionary form, so a noun ending in "m" is not one)."""
    return word.endswith(("łem", "łam", "ę")) or (
        word.endswith("m") and any(lemma.endswith("ć") for lemma in lemmas(word) - {word})
    )


def _could_be_a_subject(word: str) -> bool:
    """``word`` may be the subject of its clause: a content word, not the speaker, a negator, an opener, a
    leading phrase's first word or a verb in the first person."""
    return not (
        is_stop_word(word) or word in FIRST_PERSON or word in FREE_WORDS or word in OPENERS or word in NEGATIONS
        or word in PREPOSITIONS or word in TIME_OPENERS or word in POSSESSIVES or word.endswith("ly")
        or not word.isalpha() or _first_person_verb(word)
    )


def _third_person_verb(word: str) -> bool:
    """``word`` is a verb in the third person, which the speaker does not use of themselves: "works" (the
    speaker says "work"), "wohnt" ("wohne"), "mieszka" ("mieszkam"), "vive" ("vivo"), by its dictionary form."""
    if word in THIRD_PERSON_OPENERS:
        return True
    forms = lemmas(word) - {word}
    return any(
        (lemma + "s" == word or lemma + "es" == word or (lemma.endswith("y") and lemma[:-1] + "ies" == word))
        or (lemma.endswith("en") and word.endswith("t") and not word.endswith("et") and len(word) > 3)
        or (lemma.endswith("ć") and word[-1:] in set("aeił") and not word.endswith(("nie", "cie")))
        or (lemma.endswith(("ar", "er", "ir")) and word[-1:] in set("ae") and len(word) > 3)
        for lemma in forms
    )


def _only_what_they_have(memory: str, clause: str, person_words: frozenset[str]) -> bool:
    """Whether the memory says no more than what the clause's possessives name: "I have to take my dog Luna
    to the vet" supports "Ana's dog is called Luna" whatever the obligation, since "my dog Luna" is there
    either way. A possessive phrase runs from the possessive to the first grammar word, at most three words."""
    words = tokens(clause)
    had: list[str] = []
    for i, word in enumerate(words):
        if word in POSSESSIVES:
            for w in words[i + 1:i + 4]:
                if is_stop_word(w):
                    break
                had.append(w)
    content = [w for w in tokens(memory) if not (is_stop_word(w) or w in FREE_WORDS or w in NAME_WORDS)]
    # The memory's names for the person themselves are no claim (rule 7 exempts them too).
    return bool(had) and bool(content) and all(w in person_words or _grounded_word(w, had) for w in content)


# --- rule 9: the tense is kept ---------------------------------------------------------------------------
# Polish past forms end in -ł with the person's ending ("mieszkałam", "był", "mieszkali").
_POLISH_PAST = re.compile(r"ł(?:a|o|y|i|em|am|eś|aś|yśmy|iśmy|yście|iście)?$|[aeiy]li$")


def _past_form(word: str) -> bool:
    return (
        word in PAST_WORDS
        or word in PAST_COPULAS
        or (len(word) > 4 and word.endswith("ed"))
        or bool(_POLISH_PAST.search(word))
    )


def _participle(word: str) -> bool:
    return word in PARTICIPLES or (word != "been" and len(word) > 3 and word.endswith(("ed", "en")))


def _past_state(words: Sequence[str]) -> bool:
    return _has(words, PAST_WORDS) or any(
        w in PAST_COPULAS and i + 1 < len(words) and not _participle(words[i + 1]) for i, w in enumerate(words)
    )


def _shifted_to_present(word: str, said: str) -> bool:
    """``word`` of the memory is a present form of the verb ``said`` holds in the past: "lives"/"lived",
    "mieszka"/"mieszkałam", German weak preterite "wohnt"/"wohnte"."""
    if not _grounded_word(word, [said]) or _past_form(word):
        return False
    if _past_form(said):
        return True
    return word.endswith("t") and said[len(word):] in {"e", "en", "est", "et"} and said.startswith(word)


def _told_as_done(clause: str, memory: str) -> bool:
    """Rule 9, the other way: the memory's verb is in the past ("moved", "przeprowadziła") where the quote's
    clause has it only in the present or the future ("I'm moving to Oslo", "Przeprowadzam się"): the memory tells
    as done what was only under way or to come."""
    clause_words = tokens(clause)
    memory_words = tokens(memory)
    for i, word in enumerate(memory_words):
        # The verb right after the memory's subject, PERSON: elsewhere an "-ed" is as often a participle ("wants
        # their divorce kept quiet", "wants to be called Sam") as a past.
        if i == 0 or memory_words[i - 1] != "person":
            continue
        if not _past_form(word) or word in PAST_COPULAS or word in PAST_WORDS:
            continue
        said = [w for w in clause_words if _grounded_word(word, [w])]
        if said and not any(_past_form(w) or _participle(w) for w in said):
            return True
    return False


# A perfect with one of these lasts until now: "I have lived here since 2019", "I've always loved jazz".
_DURATION = _set("since for always", "seit immer", "od przez zawsze")
_PERFECT = re.compile(r"\b(?:have|has)\b|['’]ve\b", re.IGNORECASE)


def _in_the_past(clause: str, memory: str) -> bool:
    """Rule 9: the quote's clause tells what was (a past-tense word, a state in the past, or the memory's verb
    in the present where the quote has it in the past) and the memory does not say it was. "I have lived in
    Berlin since 2019" is a perfect that lasts until now, and says "lives" still."""
    clause_words = tokens(clause)
    memory_words = tokens(memory)
    if any(_past_form(w) for w in memory_words):
        return False
    if _past_state(clause_words):
        return True
    if _has(clause_words, _DURATION) and _PERFECT.search(clause):
        return False
    return any(
        _shifted_to_present(word, said)
        for word in memory_words
        if not (is_stop_word(word) or word in FREE_WORDS)
        for said in clause_words
    )


# --- rule 10: what governs a "that"-clause --------------------------------------------------------------
_COMPLEMENT_BOUNDARY = re.compile(r"[;:()…\"“„«]|\s[-–—]\s|[.!?]")


def _governed(sentence: str, end: int, memory: str) -> bool:
    """Rule 10: a "that"/"dass"/"że" before the quote's end opens a clause whose truth hangs on the words before
    it: "I doubt that I am vegan", "I hope that I get the job", "Ich bezweifle, dass ich Veganer bin". Those
    words must be grammar, assert what follows (``FACTIVE``), or be in the memory too. The comma Polish and
    German set before the complementiser does not cut it off from them."""
    head = sentence[:end]
    memory_words = tokens(memory)
    for m in re.finditer(r"\w+", head):
        if m.group().casefold() not in COMPLEMENTISERS or m.group().casefold() in CONDITIONALS:
            continue
        frame_start = 0
        for b in _COMPLEMENT_BOUNDARY.finditer(head[:m.start()]):
            frame_start = b.end()
        frame = tokens(head[frame_start:m.start()])
        cut = 0
        for i, w in enumerate(frame):
            if w in COORDINATORS:
                cut = i + 1
        for w in frame[cut:]:
            if is_stop_word(w) or w in FREE_WORDS or w in FACTIVE or w in FIRST_PERSON:
                continue
            if not _grounded_word(w, memory_words):
                return True
    return False


# --- rule 11: said as their own, in earnest -------------------------------------------------------------
_OPENING_MARKS = {"“": "”", "„": "“”", "«": "»", "»": "«", "\"": "\""}


def _inside_quotation(sentence: str, start: int) -> bool:
    """Whether ``sentence[start]`` stands inside quotation marks opened before it in its sentence."""
    open_mark: str | None = None
    for char in sentence[:start]:
        if open_mark is not None and char in _OPENING_MARKS[open_mark]:
            open_mark = None
        elif open_mark is None and char in _OPENING_MARKS:
            open_mark = char
    return open_mark is not None


# Requests whose object is text to work on, not a statement: "Translate: I have three sisters".
TEXT_REQUESTS = _set("translate repeat correct spell rewrite proofread paraphrase",
                     "przetłumacz popraw powtórz", "übersetze übersetz korrigiere wiederhole", "traduce traduis")


def _handed_text(sentence: str, start: int) -> bool:
    """The quote follows a colon after a request to work on a text ("Translate: ...", "Popraw: ...")."""
    colon = sentence.rfind(":", 0, start)
    return colon >= 0 and any(w in TEXT_REQUESTS for w in tokens(sentence[:colon]))


def _not_their_own(text: str, sentence: str, start: int) -> bool:
    """Rule 11: the quote is someone else's words the person passes on: inside quotation marks, in a sentence
    opened by ">" (a quoted reply), after a forwarding header ("Fwd:", "Weitergeleitete Nachricht:"), or a text
    handed over to work on ("Translate: ...")."""
    return (
        _inside_quotation(sentence, start)
        or sentence.lstrip().startswith(">")
        or _FORWARD_HEADER.search(text) is not None
        or _handed_text(sentence, start)
    )


def _short_follow_up(text: str, sentence_end: int) -> int:
    """Where the short sentence right after ``text[:sentence_end]`` ends (a few words, or no letters: "Not!",
    "haha no", "😊"), or ``sentence_end`` when the next sentence is not short or there is none."""
    rest = text[sentence_end:]
    if not rest.strip():
        return sentence_end
    stop = _SENTENCE_END.search(rest)
    follow_end = sentence_end + (stop.end() if stop is not None else len(rest))
    if len(tokens(text[sentence_end:follow_end])) > SHORT_FOLLOW_UP_MAX_WORDS:
        return sentence_end
    return follow_end


# What a take-back is made of besides its "no": laughter and words that only weigh it ("haha not really").
_TAKE_BACK_FILLERS = _set("really at all just lol lmao haha hahaha hehe xd obviously of course",
                          "naprawdę wcale serio oczywiście", "wirklich gar echt natürlich", "vraiment pas du tout")
# What a take-back's "no" is: a negator, a joke marker, or a plain refusal.
_REFUSING = NEGATIONS | JOKE_WORDS | _set("nope nah nö nee")


# The echo of the statement a take-back may carry: its subject and an auxiliary ("no I don't", "I'm not",
# "nein, bin ich nicht").
_TAKE_BACK_ECHO = FIRST_PERSON | _set("do does did am is are was have has had", "jestem mam", "bin habe")


def _takes_back(follow_up: str) -> bool:
    """A short sentence after a statement that says no to it and nothing else ("Not.", "Nope", "haha no",
    "not really", "no I don't", "Nicht.", "Nie.") or an eye-roll; "Not in Bergen." or "No kids yet." says
    something new."""
    words = tokens(follow_up)
    return (_has(words, _REFUSING) and all(
        w in _REFUSING or w in _TAKE_BACK_FILLERS or w in _TAKE_BACK_ECHO for w in words)) or any(
        c in follow_up for c in JOKE_SIGNS
    )


_ASIDE = re.compile(r"\s*[(\[]([^()\[\]]*)[)\]]")


_TAIL = re.compile(r"\s*(?:,|\s[-–—])\s*")
# What a hedging tail may hold besides its hedge: "..., I guess", "..., more or less", "..., sort of anyway".
_HEDGE_FILLERS = _TAKE_BACK_FILLERS | _set("i guess anyway at least sorta kinda", "chyba jakby", "wohl")


_HEDGES = LIMITERS | MODALS | {w for phrase in LIMITER_PHRASES for w in phrase}


def _hedged_tail(sentence: str, end: int) -> Unsupported | None:
    """A short tail after the quote, set off by a comma or a dash, that only hedges it: "I have a cat, sort of"
    (a limiter: NEGATED), "I'm allergic to cats, probably" (a modal: HYPOTHETICAL)."""
    tail = _TAIL.match(sentence, end)
    if tail is None:
        return None
    words = tokens(sentence[tail.end():])
    if not words or len(words) > SHORT_FOLLOW_UP_MAX_WORDS:
        return None
    if not all(w in _HEDGES or w in _HEDGE_FILLERS for w in words):
        return None
    if _has(words, LIMITERS) or _has_phrase(words, LIMITER_PHRASES):
        return Unsupported.NEGATED
    return Unsupported.HYPOTHETICAL if _has(words, MODALS) else None


# A short next sentence that puts the statement in the past: "I'm vegan. Well, was." "Used to."
_BACK_TO_PAST = _set("was were used", "byłam byłem", "war")


def _moved_to_the_past(follow_up: str) -> bool:
    words = tokens(follow_up)
    return _has(words, _BACK_TO_PAST) and all(
        w in _BACK_TO_PAST or w in _TAKE_BACK_FILLERS or w in _HEDGE_FILLERS or w in {"well", "to", "once"}
        for w in words)


def _aside_takes_back(text: str, end: int) -> bool:
    """What the quote says is taken back in a bracketed aside right after it: "I have a cat (not really)"."""
    aside = _ASIDE.match(text, end)
    return aside is not None and _takes_back(aside.group(1))


def _sarcastic_opening(sentence: str, start: int) -> bool:
    """The sentence opens with a sarcasm marker before the quote: "Yeah right, I love Mondays"."""
    head = tokens(sentence[:start])
    return any(tuple(head[:len(p)]) == p for p in SARCASM_OPENERS)


def _not_in_earnest(text: str, end: int) -> bool:
    """Rule 12: a tone tag anywhere in the message ("/s", "/j") or a joke marker after the quote ("... jk",
    "just kidding") takes back what it says."""
    after = text[end:]
    return _TONE_TAG.search(text) is not None or _has(tokens(after), JOKE_WORDS) or any(c in after for c in JOKE_SIGNS)


def _occurrences(text: str, quote: str) -> Iterable[int]:
    start = text.find(quote)
    while start != -1:
        yield start
        start = text.find(quote, start + 1)


@functools.lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    if char.isspace():
        return char
    folded = fold(char)
    return folded.upper() if char.isupper() else folded


@dataclass(frozen=True, slots=True)
class _Folded:
    """A text as the rules read it: characters that show nothing dropped, compatibility forms (fullwidth
    letters, "？") and look-alike letters (Cyrillic "о" in "nоt") folded to what they look like, so no
    spelling trick hides a negation, a condition or a question mark from a rule. ``at[i]`` is where the
    original's character ``i`` starts in ``text`` (and ``at[len]`` its end); ``origin[j]`` the original
    character folded text's character ``j`` came from."""

    text: str
    at: tuple[int, ...]
    origin: tuple[int, ...]

    @classmethod
    def of(cls, original: str) -> _Folded:
        pieces: list[str] = []
        at: list[int] = []
        origin: list[int] = []
        length = 0
        for i, char in enumerate(original):
            at.append(length)
            piece = _fold_char(char)
            pieces.append(piece)
            origin.extend([i] * len(piece))
            length += len(piece)
        at.append(length)
        return cls("".join(pieces), tuple(at), tuple(origin))

    def original_span(self, original: str, start: int, end: int) -> tuple[int, int]:
        """The span of ``original`` that ``text[start:end]`` was folded from, with the marks that show
        nothing just before it (a right-to-left mark opening the sentence is part of what was written)."""
        if start >= end:
            return 0, 0
        first = self.origin[start]
        while first > 0 and not _fold_char(original[first - 1]):
            first -= 1
        return first, self.origin[end - 1] + 1


def _folded(text: str) -> str:
    return _Folded.of(text).text


def _judge_occurrence(
    original: str, quote_start: int, quote_end: int, memory: str, person_words: frozenset[str]
) -> Unsupported | str:
    """One place a quote stands in its turn ``original``, as ``[quote_start, quote_end)``: the reason it does
    not support ``memory`` (already folded), or its sentence as the person wrote it."""
    view = _Folded.of(original)
    text = view.text
    start, end = view.at[quote_start], view.at[quote_end]
    quote = text[start:end]
    if start == end or not _whole_words(text, start, end):
        return Unsupported.PARTIAL
    s, e = _sentence_span(text, start, end)
    sentence = text[s:e]
    if not _clause_starts_at(text, s, start):
        return Unsupported.PARTIAL
    local_start, local_end = start - s, end - s
    if _question(sentence, local_start) or "?" in quote:
        return Unsupported.QUESTION
    if _reported(sentence, local_start, local_end) or _not_their_own(text[:end], sentence, local_start):
        return Unsupported.REPORTED
    clause = _clause_around(sentence, local_start, local_end)
    if (_about_someone_else(quote, clause, memory) or _said_of_the_listener(clause, quote)
            or _relative_subject(sentence, local_start, quote)):
        return Unsupported.NOT_GROUNDED
    follow_end = _short_follow_up(text, e)
    if (
        _negated(clause) != _negated(memory) or _not_in_earnest(text, end) or _takes_back(text[e:follow_end])
        or _aside_takes_back(text, end)
        or _sarcastic_opening(sentence, local_start)
    ):
        return Unsupported.NEGATED
    hedged = _hedged_tail(sentence, local_end)
    if hedged is not None:
        return hedged
    if _conditional(tokens(sentence)):
        return Unsupported.HYPOTHETICAL
    if _modal(clause, memory) and not _wishful(memory) and not _only_what_they_have(memory, clause, person_words):
        return Unsupported.HYPOTHETICAL
    if _governed(sentence, local_end, memory):
        return Unsupported.PARTIAL
    if _in_the_past(clause, memory) or _told_as_done(clause, memory) or (
            not _past_state(tokens(memory)) and _moved_to_the_past(text[e:follow_end])):
        return Unsupported.PAST
    os, oe = view.original_span(original, s, follow_end)
    return original[os:oe]


# The reasons in the order they are reported when no occurrence of a quote passes: the most telling first.
_PRIORITY = [Unsupported.NOT_GROUNDED, Unsupported.NEGATED, Unsupported.REPORTED, Unsupported.HYPOTHETICAL,
             Unsupported.PAST, Unsupported.QUESTION, Unsupported.PARTIAL]


# Words that bind a name to the noun before it: "my dog is Rex", "a dog called Rex", "Pies to Reksio", "der
# Hund heißt Bello", "mi perro se llama Toby"; and the genitive links a memory puts between them ("the dog of
# PERSON is Rex", "Der Hund von PERSON heißt Bello").
BINDING_WORDS = _set("is was s called named", "to jest ma na imię nazywa się", "ist heißt hieß heisst hiess",
                     "es se llama est appelle")
_GENITIVE_LINKS = _set("of von de des del")
_CASED_WORD = re.compile(r"\w+")


def _name_bindings(text: str, skip: frozenset[str]) -> list[tuple[str, str]]:
    """(noun, name) pairs of ``text``: a capitalised word that is not the text's first, and the word before it
    across binding words only (and, in a memory, the person's names and genitive links): ("dog", "Rex") in "my
    dog is Rex", none in "I moved to Berlin from Paris"."""
    words = [m.group() for m in _CASED_WORD.finditer(text)]
    pairs = []
    for i, name in enumerate(words):
        if i == 0 or not name[0].isupper() or name.casefold() in skip or name.isupper():
            continue
        j = i - 1
        while j >= 0 and (words[j].casefold() in BINDING_WORDS or words[j].casefold() in skip):
            j -= 1
        if 0 <= j < i - 1 and words[j][0].isalpha() and not is_stop_word(words[j].casefold()):
            pairs.append((words[j].casefold(), name.casefold()))
    return pairs


def _same_word(a: str, b: str) -> bool:
    """Two words of a binding are one word: inflected alike, or of one dictionary form ("live"/"lives", "grew"/
    "grow")."""
    return words_match(a, b) or same_lemma(a, b)


def _names_swapped(memory: str, quotes: Sequence[str], person_words: frozenset[str]) -> bool:
    """Names are bound to the noun they follow: "my dog is Rex and my cat is Luna" does not support "the dog is
    Luna". A memory binding a name to a noun is refused when the quotes bind that noun to another name and
    never to this one."""
    said = [pair for q in quotes for pair in _name_bindings(q, frozenset())]
    skip = person_words | {"person"} | _GENITIVE_LINKS
    for noun, name in _name_bindings(memory, skip):
        bound = [n for h, n in said if _same_word(h, noun)]
        if bound and not any(words_match(n, name) for n in bound):
            return True
    return False


# Where a sentence turns against what it just said: "I love my dog but hate my cat". Words on either side of one
# of these belong to different claims (temporal "while" and its kin are left out: "I met Tom while I was in Paris").
CONTRASTS = _set(
    "but yet whereas although though however",
    "ale lecz jednak natomiast zaś choć chociaż",
    "aber sondern doch jedoch obwohl",
    "mais pourtant cependant pero sino aunque",
)
_CONTRAST_RE = re.compile(r";|\b(?:" + "|".join(sorted(CONTRASTS, key=len, reverse=True)) + r")\b", re.IGNORECASE)


def contrasted_clauses(text: str) -> list[str]:
    """``text`` cut where it turns (:data:`CONTRASTS`, a semicolon); the parts with words in them."""
    return [part for part in _CONTRAST_RE.split(text) if tokens(part)]


def _mixes_contrasted_clauses(memory: str, quotes: Sequence[str], person_words: frozenset[str]) -> bool:
    """Rule 7 within a turn of the sentence: each part of the memory (cut as :func:`contrasted_clauses` cuts) is
    grounded in one part of one quote. Every word of "PERSON loves PERSON's cat" is in "I love my dog but hate my
    cat", but "love" and "cat" are on opposite sides of its "but"."""
    parts = [part for q in quotes for part in contrasted_clauses(q)]
    if len(parts) <= len(quotes):
        return False  # no quote turns: the whole-quote check already said it all
    return any(all(ungrounded_words(claim, [part], person_words) for part in parts)
               for claim in contrasted_clauses(memory))


_NEXT_WORD = re.compile(r"\s+(\w+)")


_PLACE_PREPOSITIONS = PREPOSITIONS | _set("to into near", "nach in")
_PARTICLES = _set("up out back down off away over")


def _place_bindings(text: str, skip: frozenset[str]) -> list[tuple[str, str, str]]:
    """(verb, preposition, name) triples of ``text``: a capitalised word that is not the text's first, the
    preposition right before it and the content word before that ("work", "in", "oslo" in "I work in Oslo")."""
    words = [m.group() for m in _CASED_WORD.finditer(text)]
    triples = []
    for i, name in enumerate(words):
        if i < 2 or not name[0].isupper() or name.isupper() or name.casefold() in skip:
            continue
        preposition, verb = words[i - 1].casefold(), words[i - 2].casefold()
        if verb in _PARTICLES and i >= 3:  # "grew up in Bergen": the verb is "grew"
            verb = words[i - 3].casefold()
        if preposition in _PLACE_PREPOSITIONS and verb.isalpha() and not is_stop_word(verb) and verb not in skip:
            triples.append((verb, preposition, name.casefold()))
    return triples


def _places_swapped(memory: str, quotes: Sequence[str], person_words: frozenset[str]) -> bool:
    """A name after a preposition is bound to the verb before it: "I work in Oslo and live in Bergen" does not
    support "PERSON lives in Oslo". Refused when the quotes put that verb with that preposition before other
    names only, and this name after other verbs only ("I studied in Kraków and in Berlin" binds Berlin to no
    verb, and still supports "studied in Berlin")."""
    said = [t for q in quotes for t in _place_bindings(q, frozenset())]
    for verb, preposition, name in _place_bindings(memory, person_words | {"person"}):
        names = [n for v, p, n in said if p == preposition and _same_word(v, verb)]
        verbs = [v for v, p, n in said if p == preposition and words_match(n, name)]
        if (names and not any(words_match(n, name) for n in names)
                and verbs and not any(_same_word(v, verb) for v in verbs)):
            return True
    return False


def _number_bindings(text: str) -> list[tuple[frozenset[str], str]]:
    """(values, noun) pairs of ``text``: a number as written (its whole values, :func:`_number_values`) or a
    number word, and the content word right after it ("2 kids", "three cats", "1,500 metres")."""
    pairs = []
    for _start, end, values in _number_spans(text):
        after = _NEXT_WORD.match(text, end)
        if after is None:
            continue
        following = after.group(1).casefold()
        if following.isalpha() and not is_stop_word(following) and following not in NUMBER_WORDS:
            pairs.append((values, following))
    return pairs


def _numbers_swapped(memory: str, quotes: Sequence[str]) -> bool:
    """Numbers are bound to the noun they count, as names are (:func:`_names_swapped`): "I have 2 kids and 3
    cats" does not support "PERSON has 3 kids". Refused when the quotes give that noun another number and never
    this one."""
    said = [pair for q in quotes for pair in _number_bindings(q)]
    for value, noun in _number_bindings(memory):
        counted = [v for v, n in said if _same_word(n, noun)]
        if counted and all(v.isdisjoint(value) for v in counted):
            return True
    return False


def check_support(
    memory: str, quotes: Sequence[str], turn_texts: Sequence[Sequence[str]], person_words: frozenset[str]
) -> Supported | Unsupported:
    """Whether ``quotes`` support ``memory``. ``turn_texts[i]`` are the (normalised) texts of the person's own
    turns that hold ``quotes[i]``; ``person_words`` the tokens the memory may use to name the person."""
    sentences: list[str] = []
    folded_memory = _folded(memory)
    for quote, texts in zip(quotes, turn_texts, strict=True):
        found: str | None = None
        reasons: set[Unsupported] = set()
        for text in texts:
            for start in _occurrences(text, quote):
                outcome = _judge_occurrence(text, start, start + len(quote), folded_memory, person_words)
                if isinstance(outcome, Unsupported):
                    reasons.add(outcome)
                else:
                    found = outcome
                    break
            if found is not None:
                break
        if found is None:
            return next((r for r in _PRIORITY if r in reasons), Unsupported.PARTIAL)
        sentences.append(found)
    if (ungrounded_words(memory, quotes, person_words) or _names_swapped(folded_memory, quotes, person_words)
            or _numbers_swapped(memory, quotes) or _places_swapped(folded_memory, quotes, person_words)
            or _mixes_contrasted_clauses(memory, quotes, person_words)):
        return Unsupported.NOT_GROUNDED
    return Supported(tuple(sentences))
