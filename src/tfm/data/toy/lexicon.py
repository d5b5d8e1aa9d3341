"""The toy corpus's words: each English entry, its German counterpart, and how both inflect.

Open classes (nouns, adjectives, verbs) are text tables, one entry per line, parsed once at import;
closed classes (pronouns, numbers, prepositions, articles) are plain dicts. Regular inflection is
computed by the functions at the bottom; only irregular forms are spelled out in the tables.

Every English word form belongs to exactly one entry (no "fish"/"fish", no noun that is also a
verb), so an English sentence has one reading and one German translation.

Semantic kinds keep the corpus plausible ("the cat eats the cake", not "the cake eats the cat"):
each noun has one kind, and verbs, adjectives and prepositions name the kinds they combine with.
Only the generator looks at kinds; the parser translates any grammatical combination.
"""

from dataclasses import dataclass

KINDS = ("animal", "person", "thing", "food", "text", "place")
PERSONS = ("1sg", "2sg", "3sg", "1pl", "3pl")  # no "ihr": English "you" is always "du"
CASES = ("nom", "acc", "dat")
GENDERS = ("m", "f", "n", "pl")  # plural declines like a fourth gender

# english[/irregular plural]  German  gender (m* = weak masculine: den Löwen)  German plural
_NOUNS = {
    "animal": """
        dog Hund m Hunde               cat Katze f Katzen             bird Vogel m Vögel
        horse Pferd n Pferde           mouse/mice Maus f Mäuse        cow Kuh f Kühe
        pig Schwein n Schweine         duck Ente f Enten              fox Fuchs m Füchse
        bear Bär m* Bären              lion Löwe m* Löwen             monkey Affe m* Affen
        rabbit Hase m* Hasen           frog Frosch m Frösche          wolf/wolves Wolf m Wölfe
        goat Ziege f Ziegen            snake Schlange f Schlangen     chicken Huhn n Hühner
        elephant Elefant m* Elefanten  donkey Esel m Esel
    """,
    "person": """
        man/men Mann m Männer          woman/women Frau f Frauen      child/children Kind n Kinder
        boy Junge m* Jungen            girl Mädchen n Mädchen         teacher Lehrer m Lehrer
        student Student m* Studenten   doctor Arzt m Ärzte            baby Baby n Babys
        king König m Könige            queen Königin f Königinnen     friend Freund m Freunde
        neighbor Nachbar m* Nachbarn   sister Schwester f Schwestern  brother Bruder m Brüder
        mother Mutter f Mütter         father Vater m Väter
    """,
    "thing": """
        ball Ball m Bälle              car Auto n Autos               box Kiste f Kisten
        key Schlüssel m Schlüssel      cup Tasse f Tassen             chair Stuhl m Stühle
        table Tisch m Tische           bag Tasche f Taschen           hat Hut m Hüte
        shoe Schuh m Schuhe            door Tür f Türen               window Fenster n Fenster
        flower Blume f Blumen          stone Stein m Steine           bicycle Fahrrad n Fahrräder
        clock Uhr f Uhren              lamp Lampe f Lampen            bed Bett n Betten
    """,
    "food": """
        apple Apfel m Äpfel            egg Ei n Eier                  cake Kuchen m Kuchen
        banana Banane f Bananen        sausage Wurst f Würste         carrot Karotte f Karotten
        lemon Zitrone f Zitronen       tomato Tomate f Tomaten        cherry Kirsche f Kirschen
        pear Birne f Birnen            cookie Keks m Kekse
    """,
    "text": """
        book Buch n Bücher             letter Brief m Briefe          newspaper Zeitung f Zeitungen
        story Geschichte f Geschichten poem Gedicht n Gedichte        card Karte f Karten
    """,
    "place": """
        house Haus n Häuser            garden Garten m Gärten         park Park m Parks
        school Schule f Schulen        city Stadt f Städte            kitchen Küche f Küchen
        forest Wald m Wälder           river Fluss m Flüsse           street Straße f Straßen
        village Dorf n Dörfer          room Zimmer n Zimmer
    """,
}

# english German kinds-it-describes ("any", "animate", or a comma list)
_ADJECTIVES = """
big groß any             small klein any          old alt any              new neu thing,text,place
young jung animate       tired müde animate       hungry hungrig animate   happy froh animate
sad traurig animate      fast schnell animate     slow langsam animate     good gut any
bad schlecht any         beautiful schön any      ugly hässlich any        clever klug animate
funny lustig animate     loud laut animate        quiet leise animate      warm warm food,place
cold kalt food,place     long lang text,place     short kurz text,place    heavy schwer thing
strong stark animate     wild wild animal         lazy faul animate        rich reich person
poor arm person          friendly freundlich animate                       brave mutig animate
sick krank animate       clean sauber thing,place dirty schmutzig thing,place,animal
"""
_COLOURS = """
red rot    blue blau    green grün    yellow gelb    black schwarz    white weiß    brown braun
grey grau
"""
_COLOUR_KINDS = "animal,thing,food,text,place"

# english German valency subjects objects [irregular present: "du er" or "ich du er"]
_VERBS = """
sleep schlafen intransitive animate - schläfst schläft
run laufen intransitive animate - läufst läuft
swim schwimmen intransitive animate -
laugh lachen intransitive person -
sing singen intransitive animate -
dance tanzen intransitive person -
play spielen intransitive animate -
wait warten intransitive animate -
work arbeiten intransitive person -
cry weinen intransitive animate -
jump springen intransitive animate -
go gehen intransitive animate -
come kommen intransitive animate -
fall fallen intransitive any - fällst fällt
sit sitzen intransitive animate -
stand stehen intransitive animate -
live wohnen intransitive animate -
speak sprechen intransitive person - sprichst spricht
fly fliegen intransitive animal -
smile lächeln intransitive person - lächle lächelst lächelt
see sehen accusative animate any siehst sieht
have haben accusative animate animal,thing,food,text hast hat
eat essen accusative animate food isst isst
read lesen accusative person text liest liest
carry tragen accusative animate animal,thing,food,text trägst trägt
find finden accusative animate any
like mögen accusative animate any mag magst mag
love lieben accusative animate animate,thing,food
hear hören accusative animate animate
catch fangen accusative animate animal,thing fängst fängt
throw werfen accusative person thing wirfst wirft
buy kaufen accusative person thing,food,text
wash waschen accusative person animate,thing wäschst wäscht
meet treffen accusative animate animate triffst trifft
visit besuchen accusative person person,place
take nehmen accusative animate thing,food,text nimmst nimmt
paint malen accusative person any
call rufen accusative animate animate
kiss küssen accusative animate animate
need brauchen accusative animate thing,food,text
open öffnen accusative person thing,text öffnest öffnet
forget vergessen accusative animate any vergisst vergisst
cook kochen accusative person food
sell verkaufen accusative person thing,food,text
build bauen accusative person thing,place
help helfen dative animate animate hilfst hilft
follow folgen dative animate animate
thank danken dative person animate
answer antworten dative person person
think denken that person -
know wissen that person - weiß weißt weiß
say sagen that person -
hope hoffen that person -
believe glauben that person -
"""


@dataclass(frozen=True)
class Noun:
    english: str
    english_plural: str
    german: str
    gender: str  # "m", "f" or "n"
    german_plural: str
    kind: str
    weak: bool  # weak masculine: every case but the nominative singular ends in -n (den Löwen)


@dataclass(frozen=True)
class Adjective:
    english: str
    german: str
    kinds: tuple[str, ...]
    colour: bool  # colours follow other adjectives: "the big red ball"


@dataclass(frozen=True)
class Verb:
    english: str  # base form: "see"
    german: str  # infinitive: "sehen"
    valency: str  # "intransitive", "accusative", "dative", "that" (a that-clause), "copula"
    subjects: tuple[str, ...]
    objects: tuple[str, ...]
    english_forms: dict[str, str]  # person -> present form: "3sg" -> "sees"
    german_forms: dict[str, str]  # person -> present form: "2sg" -> "siehst"


@dataclass(frozen=True)
class PersonalPronoun:
    english: str
    english_object: str
    person: str
    nom: str
    acc: str
    dat: str


@dataclass(frozen=True)
class Preposition:
    english: str
    german: str  # every preposition here is locative or "mit", so it governs the dative
    kinds: tuple[str, ...]


def add_s(word: str) -> str:
    """The English -s suffix for plurals and the third person: dogs, boxes, cities, goes."""
    if word.endswith(("s", "x", "z", "sh", "ch", "o")):
        return word + "es"
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    return word + "s"


def _kinds(spec: str) -> tuple[str, ...]:
    groups = {"any": KINDS, "animate": ("animal", "person"), "-": ()}
    return groups.get(spec, tuple(spec.split(",")))


def _german_present(infinitive: str, irregular: list[str]) -> dict[str, str]:
    stem = infinitive.removesuffix("en")
    if stem.endswith(("d", "t")):  # finden: du findest, er findet
        du, er = stem + "est", stem + "et"
    elif stem.endswith(("s", "ß", "z", "x")):  # tanzen: du tanzt
        du, er = stem + "t", stem + "t"
    else:
        du, er = stem + "st", stem + "t"
    ich = stem + "e"
    if len(irregular) == 3:
        ich, du, er = irregular
    elif irregular:
        du, er = irregular
    return {"1sg": ich, "2sg": du, "3sg": er, "1pl": infinitive, "3pl": infinitive}


def _rows(table: str, width: int) -> list[list[str]]:
    """A table written several entries to a line, read back as rows of `width` fields."""
    fields = table.split()
    assert len(fields) % width == 0, f"a table row lacks a field: {len(fields)} % {width}"
    return [fields[i : i + width] for i in range(0, len(fields), width)]


def _parse_nouns(tables: dict[str, str]) -> dict[str, Noun]:
    nouns = {}
    for kind, table in tables.items():
        for english, german, gender, german_plural in _rows(table, 4):
            assert gender in ("m", "f", "n", "m*"), (english, gender)
            singular, _, plural = english.partition("/")
            nouns[singular] = Noun(
                english=singular,
                english_plural=plural or add_s(singular),
                german=german,
                gender=gender.rstrip("*"),
                german_plural=german_plural,
                kind=kind,
                weak=gender.endswith("*"),
            )
    return nouns


def _parse_adjectives(table: str, colours: str) -> dict[str, Adjective]:
    adjectives = {
        english: Adjective(english, german, _kinds(kinds), colour=False)
        for english, german, kinds in _rows(table, 3)
    }
    for english, german in _rows(colours, 2):
        adjectives[english] = Adjective(english, german, _kinds(_COLOUR_KINDS), colour=True)
    return adjectives


def _parse_verbs(table: str) -> dict[str, Verb]:
    verbs = {}
    for line in table.strip().splitlines():
        english, german, valency, subjects, objects, *irregular = line.split()
        third = "has" if english == "have" else add_s(english)
        verbs[english] = Verb(
            english=english,
            german=german,
            valency=valency,
            subjects=_kinds(subjects),
            objects=_kinds(objects),
            english_forms={person: third if person == "3sg" else english for person in PERSONS},
            german_forms=_german_present(german, irregular),
        )
    return verbs


def _copula() -> Verb:
    english = ("am", "are", "is", "are", "are")
    german = ("bin", "bist", "ist", "sind", "sind")
    return Verb(
        english="be",
        german="sein",
        valency="copula",
        subjects=KINDS,
        objects=(),
        english_forms=dict(zip(PERSONS, english, strict=True)),
        german_forms=dict(zip(PERSONS, german, strict=True)),
    )


NOUNS = _parse_nouns(_NOUNS)
ADJECTIVES = _parse_adjectives(_ADJECTIVES, _COLOURS)
VERBS = _parse_verbs(_VERBS) | {"be": _copula()}
PRONOUNS = {
    p.english: p
    for p in (
        PersonalPronoun("i", "me", "1sg", "ich", "mich", "mir"),
        PersonalPronoun("you", "you", "2sg", "du", "dich", "dir"),
        PersonalPronoun("he", "him", "3sg", "er", "ihn", "ihm"),
        PersonalPronoun("she", "her", "3sg", "sie", "sie", "ihr"),
        PersonalPronoun("it", "it", "3sg", "es", "es", "ihm"),
        PersonalPronoun("we", "us", "1pl", "wir", "uns", "uns"),
        PersonalPronoun("they", "them", "3pl", "sie", "sie", "ihnen"),
    )
}
NUMBERS = dict(
    zip(
        "two three four five six seven eight nine ten".split(),
        "zwei drei vier fünf sechs sieben acht neun zehn".split(),
        strict=True,
    )
)
PREPOSITIONS = {
    p.english: p
    for p in (
        Preposition("in", "in", ("place", "thing")),
        Preposition("on", "auf", ("thing",)),
        Preposition("under", "unter", ("thing",)),
        Preposition("behind", "hinter", ("thing", "place")),
        Preposition("with", "mit", ("animal", "person", "thing")),
    )
}
CONTRACTIONS = {("in", "dem"): "im"}  # always contracted: "im Haus", never "in dem Haus"

# Articles and adjective endings by English determiner ("" = none: bare plural or a number) and
# case; columns are the GENDERS m f n pl, "-" where the combination does not exist.
_ARTICLES = {
    "the": {"nom": "der die das die", "acc": "den die das die", "dat": "dem der dem den"},
    "a": {"nom": "ein eine ein -", "acc": "einen eine ein -", "dat": "einem einer einem -"},
    "no": {
        "nom": "kein keine kein keine",
        "acc": "keinen keine kein keine",
        "dat": "keinem keiner keinem keinen",
    },
}
_ENDINGS = {  # weak after der, mixed after ein/kein, strong without an article
    "the": {"nom": "e e e en", "acc": "en e e en", "dat": "en en en en"},
    "a": {"nom": "er e es -", "acc": "en e es -", "dat": "en en en -"},
    "no": {"nom": "er e es en", "acc": "en e es en", "dat": "en en en en"},
    "": {"nom": "- - - e", "acc": "- - - e", "dat": "- - - en"},
}


def _table(rows: dict[str, dict[str, str]]) -> dict[tuple[str, str, str], str]:
    return {
        (determiner, case, gender): form
        for determiner, by_case in rows.items()
        for case, forms in by_case.items()
        for gender, form in zip(GENDERS, forms.split(), strict=True)
        if form != "-"
    }


ARTICLES = _table(_ARTICLES)  # ("the", "dat", "f") -> "der"
ENDINGS = _table(_ENDINGS)  # ("a", "nom", "m") -> "er"


def inflect_adjective(german: str, ending: str) -> str:
    """groß + en -> großen; a stem in -e takes no second e: müde + en -> müden."""
    return german + (ending[1:] if german.endswith("e") else ending)


def inflect_noun(noun: Noun, *, plural: bool, case: str) -> str:
    """Hund, Hunden (dative plural), Löwen (weak masculine outside the nominative singular)."""
    if plural:
        dative_n = case == "dat" and not noun.german_plural.endswith(("n", "s"))
        return noun.german_plural + ("n" if dative_n else "")
    return noun.german_plural if noun.weak and case != "nom" else noun.german


def entries() -> list[tuple[str, str]]:
    """Every lexicon entry as an (English, German) pair of citation forms."""
    classes = (NOUNS, ADJECTIVES, VERBS, PREPOSITIONS)
    pairs = [(word, entry.german) for table in classes for word, entry in table.items()]
    pairs += [(word, pronoun.nom) for word, pronoun in PRONOUNS.items()]
    return pairs + list(NUMBERS.items())
