"""The words other languages than English name times with, for :mod:`memory.recall.when`: data only.

Each :class:`DateWords` holds one language's month and weekday names, numbers and unit words, and
the phrase shapes it uses ("vor zwei Wochen", "il y a deux semaines", "hace dos semanas"). Every
word is written as :func:`memory.recall.when.plain` leaves text: lower case, accents dropped ("fevrier",
"sabado"), so a message typed with or without accents reads the same.

A language's phrases are looked for only in a message that holds more of its ``markers`` (everyday
words of that language and its own date words) than of any other's: a word that names a time in one
language can mean something else in another (French "hier" is yesterday, German and Dutch "hier" is
here). Abbreviations that are also everyday words ("out", "set", "sept", "dez") are left out.

Templates name their parts in braces: ``{n}`` a number, ``{unit}`` a unit word, ``{month}``,
``{day}``, ``{year}``, ``{weekday}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DateWords:
    name: str
    markers: frozenset[str]
    months: Mapping[str, int]  # name -> 1..12
    weekdays: Mapping[str, int]  # name -> 0 (Monday)..6
    numbers: Mapping[str, int]
    units: Mapping[str, str]  # every form of a unit word -> day, week, month, year, weekend
    day_before_yesterday: str  # a phrase (regex)
    yesterday: str
    today: str
    day_month: str  # a day of a month, the year optional
    month_year: str  # a month and its year
    month_prepositions: str  # what names a month when put before it ("im", "en", "a")
    year_prepositions: str
    ago: str  # "{n} {unit}" ago
    last: str  # the {unit} before this one
    this: str  # this {unit}
    past: str  # the last {n} {unit}s
    weekday: str  # the latest {weekday}


def _names(*groups: tuple[str, ...]) -> dict[str, int]:
    return {name: n for n, names in enumerate(groups, start=1) for name in names}


def _days(*groups: tuple[str, ...]) -> dict[str, int]:
    return {name: n - 1 for name, n in _names(*groups).items()}


GERMAN = DateWords(
    name="de",
    markers=frozenset({"ich", "du", "wir", "mir", "mich", "dir", "wann", "wo", "habe", "hast", "hat", "haben",
                       "ist", "bin", "und", "der", "das", "dem", "den", "ein", "eine", "einen", "nicht", "mit",
                       "im", "vor", "gestern", "heute", "vorgestern", "letzte", "letzten", "letztes"}),
    months=_names(("januar", "jan", "janner"), ("februar", "feb"), ("marz",), ("april", "apr"), ("mai",),
                  ("juni",), ("juli",), ("august", "aug"), ("september", "sept", "sep"), ("oktober", "okt"),
                  ("november", "nov"), ("dezember", "dez")),
    weekdays=_days(("montag",), ("dienstag",), ("mittwoch",), ("donnerstag",), ("freitag",),
                   ("samstag", "sonnabend"), ("sonntag",)),
    numbers={"ein": 1, "einem": 1, "einer": 1, "einen": 1, "zwei": 2, "drei": 3, "vier": 4, "funf": 5, "sechs": 6,
             "sieben": 7, "acht": 8, "neun": 9, "zehn": 10, "ein paar": 3, "paar": 3, "einigen": 3},
    units={"tag": "day", "tage": "day", "tagen": "day", "woche": "week", "wochen": "week", "monat": "month",
           "monate": "month", "monaten": "month", "jahr": "year", "jahre": "year", "jahren": "year",
           "wochenende": "weekend"},
    day_before_yesterday=r"vorgestern",
    yesterday=r"gestern(?: ?(?:abend|nacht|morgen|fruh))?",
    today=r"heute(?: ?(?:morgen|fruh|abend|nachmittag))?",
    day_month=r"(?:am |den )?{day}\.? {month}(?: {year})?",
    month_year=r"{month} {year}",
    month_prepositions=r"im|in|seit|anfang|mitte|ende|bis",
    year_prepositions=r"im jahr|im jahre|in|seit|bis",
    ago=r"vor {n} {unit}",
    last=r"(?:letzte[nrs]?|vergangene[nrs]?|vorige[nrs]?) {unit}",
    this=r"(?:diese[nrs]?) {unit}",
    past=r"(?:in )?den (?:letzten|vergangenen) {n} {unit}",
    weekday=r"(?:am|letzten|vergangenen) {weekday}",
)

FRENCH = DateWords(
    name="fr",
    markers=frozenset({"je", "j", "tu", "ai", "avons", "est", "suis", "etait", "etais", "que", "qu", "quoi",
                       "quand", "ou", "le", "les", "du", "des", "et", "une", "avec", "pour", "ce", "cette", "mon",
                       "ma", "mes", "il", "y", "avant", "aujourd", "dernier", "derniere"}),
    months=_names(("janvier", "janv"), ("fevrier", "fevr"), ("mars",), ("avril",), ("mai",), ("juin",),
                  ("juillet",), ("aout",), ("septembre",), ("octobre", "oct"), ("novembre", "nov"),
                  ("decembre", "dec")),
    weekdays=_days(("lundi",), ("mardi",), ("mercredi",), ("jeudi",), ("vendredi",), ("samedi",), ("dimanche",)),
    numbers={"un": 1, "une": 1, "deux": 2, "trois": 3, "quatre": 4, "cinq": 5, "six": 6, "sept": 7, "huit": 8,
             "neuf": 9, "dix": 10, "quelques": 3},
    units={"jour": "day", "jours": "day", "semaine": "week", "semaines": "week", "mois": "month", "an": "year",
           "ans": "year", "annee": "year", "annees": "year", "week-end": "weekend", "weekend": "weekend"},
    day_before_yesterday=r"avant[- ]hier",
    yesterday=r"(?:d')?hier(?: (?:soir|matin|apres-midi))?",
    today=r"aujourd'hui|ce (?:matin|soir|midi)|cet apres-midi",
    day_month=r"(?:le )?{day}(?:er)? {month}(?: {year})?",
    month_year=r"{month} {year}",
    month_prepositions=r"en|depuis|debut|mi|fin|au mois de|jusqu'en",
    year_prepositions=r"en|depuis|jusqu'en",
    ago=r"il y a {n} {unit}",
    last=r"(?:la |le |l')?{unit} (?:derniere?|passee?)",
    this=r"(?:cette|ce|cet) {unit}(?:-ci)?",
    past=r"(?:les|ces|pendant les|durant les) {n} (?:dernier|derniere)s {unit}",
    weekday=r"{weekday} (?:dernier|passe)|(?:ce|le) {weekday}(?! (?:prochain|qui vient))",
)

SPANISH = DateWords(
    name="es",
    markers=frozenset({"yo", "que", "el", "los", "las", "del", "lo", "es", "una", "con", "por", "para", "donde",
                       "cuando", "como", "mi", "dije", "dijiste", "hice", "hicimos", "fue", "fui", "fuimos", "estuve",
                       "tuve", "hace", "ayer", "hoy", "anteayer",
                       "pasado", "pasada"}),
    months=_names(("enero", "ene"), ("febrero", "feb"), ("marzo",), ("abril",), ("mayo",), ("junio",), ("julio",),
                  ("agosto",), ("septiembre", "setiembre", "sept"), ("octubre", "oct"), ("noviembre", "nov"),
                  ("diciembre", "dic")),
    weekdays=_days(("lunes",), ("martes",), ("miercoles",), ("jueves",), ("viernes",), ("sabado",), ("domingo",)),
    numbers={"un": 1, "una": 1, "uno": 1, "dos": 2, "tres": 3, "cuatro": 4, "cinco": 5, "seis": 6, "siete": 7,
             "ocho": 8, "nueve": 9, "diez": 10, "unos": 3, "unas": 3, "algunos": 3, "algunas": 3},
    units={"dia": "day", "dias": "day", "semana": "week", "semanas": "week", "mes": "month", "meses": "month",
           "ano": "year", "anos": "year", "fin de semana": "weekend"},
    day_before_yesterday=r"anteayer|antes de ayer",
    yesterday=r"ayer(?: (?:por la )?(?:noche|manana|tarde))?|anoche",
    today=r"hoy|esta (?:manana|tarde|noche)",
    day_month=r"(?:el )?{day} de {month}(?: (?:de |del )?{year})?",
    month_year=r"{month} (?:de |del )?{year}",
    month_prepositions=r"en|desde|durante|a principios de|a mediados de|a finales de|hasta",
    year_prepositions=r"en|en el|desde|durante|hasta",
    ago=r"hace {n} {unit}",
    last=r"(?:la |el )?{unit} pasad[oa]|(?:la |el )?pasad[oa] {unit}",
    this=r"(?:esta|este) {unit}",
    past=r"(?:en )?(?:los|las) ultim[oa]s {n} {unit}",
    weekday=r"(?:el )?{weekday} pasado|el {weekday}(?! (?:que viene|proximo))",
)

PORTUGUESE = DateWords(
    name="pt",
    markers=frozenset({"eu", "que", "os", "da", "dos", "das", "uma", "foi", "fiz", "disse", "quando",
                       "onde", "voce", "meu", "minha", "com", "para", "em", "na", "nao", "ontem", "hoje",
                       "anteontem", "passado", "passada", "atras", "duas", "dois", "tenho", "tinha", "estive", "falei",
                       "voces", "ela", "ele"}),
    months=_names(("janeiro", "jan"), ("fevereiro", "fev"), ("marco",), ("abril",), ("maio",), ("junho",),
                  ("julho",), ("agosto",), ("setembro",), ("outubro",), ("novembro", "nov"), ("dezembro",)),
    weekdays=_days(("segunda",), ("terca",), ("quarta",), ("quinta",), ("sexta",), ("sabado",), ("domingo",)),
    numbers={"um": 1, "uma": 1, "dois": 2, "duas": 2, "tres": 3, "quatro": 4, "cinco": 5, "seis": 6, "sete": 7,
             "oito": 8, "nove": 9, "dez": 10, "uns": 3, "umas": 3, "alguns": 3, "algumas": 3},
    units={"dia": "day", "dias": "day", "semana": "week", "semanas": "week", "mes": "month", "meses": "month",
           "ano": "year", "anos": "year", "fim de semana": "weekend"},
    day_before_yesterday=r"anteontem|antes de ontem",
    yesterday=r"ontem(?: a (?:noite|tarde)| de manha)?",
    today=r"hoje|esta (?:manha|tarde|noite)",
    day_month=r"(?:em |no dia )?{day} de {month}(?: de {year})?",
    month_year=r"{month} de {year}",
    month_prepositions=r"em|desde|durante|no inicio de|em meados de|no final de",
    year_prepositions=r"em|desde|durante",
    ago=r"(?:ha|faz) {n} {unit}|{n} {unit} atras",
    last=r"(?:a |o |na |no )?{unit} passad[oa]|(?:a |o |na |no )?(?:ultim[oa]|passad[oa]) {unit}",
    this=r"(?:n?esta|n?este) {unit}",
    past=r"(?:n?os|n?as) ultim[oa]s {n} {unit}",
    weekday=(r"(?:na |no |na ultima |no ultimo )?{weekday}(?:-feira)? passad[oa]"
             r"|(?:na|no) {weekday}(?:-feira)?(?! que vem)"),
)

ITALIAN = DateWords(
    name="it",
    markers=frozenset({"io", "che", "ho", "hai", "ha", "il", "lo", "gli", "della", "del", "cosa", "quando",
                       "dove", "sono", "un", "una", "ti", "con", "di", "ieri", "oggi",
                       "altro", "scorso", "scorsa", "fa"}),
    months=_names(("gennaio", "genn"), ("febbraio", "febbr"), ("marzo",), ("aprile",), ("maggio",), ("giugno",),
                  ("luglio",), ("agosto",), ("settembre", "sett"), ("ottobre", "ott"), ("novembre", "nov"),
                  ("dicembre", "dic")),
    weekdays=_days(("lunedi",), ("martedi",), ("mercoledi",), ("giovedi",), ("venerdi",), ("sabato",),
                   ("domenica",)),
    numbers={"un": 1, "uno": 1, "una": 1, "due": 2, "tre": 3, "quattro": 4, "cinque": 5, "sei": 6, "sette": 7,
             "otto": 8, "nove": 9, "dieci": 10, "qualche": 3, "alcuni": 3, "alcune": 3},
    units={"giorno": "day", "giorni": "day", "settimana": "week", "settimane": "week", "mese": "month",
           "mesi": "month", "anno": "year", "anni": "year", "fine settimana": "weekend", "weekend": "weekend"},
    day_before_yesterday=r"l'altro ieri|altroieri|ieri l'altro",
    yesterday=r"ieri(?: (?:sera|mattina|pomeriggio))?",
    today=r"oggi|stamattina|stasera|questa (?:mattina|sera)|questo pomeriggio",
    day_month=r"(?:il |l')?{day} {month}(?: {year})?",
    month_year=r"{month} (?:del )?{year}",
    month_prepositions=r"a|in|di|nel mese di|da|durante|fino a|a inizio|a meta|a fine",
    year_prepositions=r"nel|dal|fino al|durante il",
    ago=r"{n} {unit} fa",
    last=r"(?:la |il |l'|lo )?{unit} scors[oa]|(?:la |il |lo )?scors[oa] {unit}",
    this=r"(?:questa|questo|quest') ?{unit}",
    past=r"(?:negli|nelle|gli|le) ultim[ie] {n} {unit}",
    weekday=r"{weekday} scors[oa]|(?:lo |la )?scors[oa] {weekday}",
)

DUTCH = DateWords(
    name="nl",
    markers=frozenset({"ik", "je", "jij", "wat", "wanneer", "waar", "heb", "hebt", "heeft", "het", "een", "en",
                       "niet", "met", "van", "mijn", "gisteren", "vandaag", "eergisteren", "geleden", "vorige",
                       "afgelopen"}),
    months=_names(("januari", "jan"), ("februari", "feb"), ("maart", "mrt"), ("april", "apr"), ("mei",),
                  ("juni",), ("juli",), ("augustus", "aug"), ("september", "sept", "sep"), ("oktober", "okt"),
                  ("november", "nov"), ("december", "dec")),
    weekdays=_days(("maandag",), ("dinsdag",), ("woensdag",), ("donderdag",), ("vrijdag",), ("zaterdag",),
                   ("zondag",)),
    numbers={"een": 1, "twee": 2, "drie": 3, "vier": 4, "vijf": 5, "zes": 6, "zeven": 7, "acht": 8, "negen": 9,
             "tien": 10, "een paar": 3, "paar": 3, "enkele": 3},
    units={"dag": "day", "dagen": "day", "week": "week", "weken": "week", "maand": "month", "maanden": "month",
           "jaar": "year", "jaren": "year", "weekend": "weekend"},
    day_before_yesterday=r"eergisteren",
    yesterday=r"gister(?:en)?(?:avond|ochtend|middag| avond| ochtend| middag)?",
    today=r"vandaag|vanochtend|vanmorgen|vanmiddag|vanavond",
    day_month=r"(?:op )?{day} {month}(?: {year})?",
    month_year=r"{month} {year}",
    month_prepositions=r"in|sinds|begin|half|eind|tot",
    year_prepositions=r"in|sinds|tot",
    ago=r"{n} {unit} geleden",
    last=r"(?:vorige|vorig|afgelopen) {unit}",
    this=r"(?:deze|dit) {unit}",
    past=r"(?:in )?de (?:afgelopen|laatste) {n} {unit}",
    weekday=r"(?:vorige|afgelopen|op) {weekday}",
)

LANGUAGES: tuple[DateWords, ...] = (GERMAN, FRENCH, SPANISH, PORTUGUESE, ITALIAN, DUTCH)
