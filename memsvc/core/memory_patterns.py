"""What the speaker says of themselves, found by patterns (issue 24's deterministic extractor). Pure.

A user message is split into sentences, a sentence into clauses at a conjunction that starts a
new first-person clause ("I'm Japanese but I live in Toronto"). A clause whose subject is the
speaker ("I", "we", "my ...", "our ...") is matched against patterns of kinds worth keeping:
identity (name, age, nationality, job), where they live and work or study, diet and health,
family and pets, preferences, decisions, plans with dates, and corrections ("actually, I moved
to Porto"; "no wait, it's Thursday" rewrites the speaker's previous finding). Each match becomes
a third-person statement ("User lives in Porto"; the speaker's `name` instead of "User").

Skipped: every message that is not the user's (the assistant's suggestions are never memories),
questions, hedged or hypothetical sentences ("if I ever ...", "maybe I'd ..."), and other
people's facts ("my coworker Tom lives in Berlin"), except the speaker's family's. A first-person
clause no pattern knows is returned as an `open` finding: the extractor's embedder decides
whether it is worth keeping or chit-chat.

Linear in the input: sentences and clauses are split by patterns with no nested quantifier, a
clause longer than `MAX_CLAUSE_CHARS` is never matched (no memory is that long), and every
pattern is anchored at the clause's start with bounded repeats.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memsvc.core.extraction import ConversationMessage
from memsvc.core.typed_memory import MemoryType

__all__ = ["Finding", "find_memories", "split_sentences", "split_clauses", "is_question", "is_hedged",
           "third_person", "MAX_CLAUSE_CHARS"]

MAX_CLAUSE_CHARS = 300  # a statement worth keeping is a line, not a page


@dataclass(frozen=True)
class Finding:
    """A statement about a speaker. `pattern`: the kind that matched, "open" when none did."""

    content: str
    type: MemoryType
    category: str
    importance: float
    seqs: tuple[int, ...]
    pattern: str
    speaker: str
    correction: bool = False


# --- sentences and clauses -------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")
_CLAUSE_SPLIT = re.compile(
    r"(?:[,;:]|,? (?:and|but|so|because|though|although|plus|whereas))(?: so| and| but)? "
    r"(?=(?:I|I'm|I've|I'll|I'd|we|we're|we've|we'll|my|our)\b)", re.I)
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'"})
# Long forms to the contracted ones the patterns are written for.
_CONTRACT = re.compile(r"\b(?:(I) (am|have|will|would)|(we) (are|have|will)|(do|does|can) (not)|(cannot))\b", re.I)
_SHORT = {"am": "'m", "have": "'ve", "will": "'ll", "would": "'d", "are": "'re"}


def _contract(m: re.Match[str]) -> str:
    if m.group(1):
        return m.group(1) + _SHORT[m.group(2).lower()]
    if m.group(3):
        return m.group(3) + _SHORT[m.group(4).lower()]
    if m.group(5):
        return m.group(5) + "n't"
    return m.group(7)[:3] + "'t"  # cannot -> can't


def split_sentences(text: str) -> list[str]:
    """The text's sentences, whitespace collapsed. O(len(text))."""
    out = []
    for raw in _SENTENCE_END.split(text.translate(_APOSTROPHES)):
        sentence = " ".join(raw.split())
        if sentence:
            out.append(sentence)
    return out


def split_clauses(sentence: str) -> list[str]:
    """The sentence cut where a new first-person clause starts. O(len(sentence))."""
    return [c.strip(" ,;:") for c in _CLAUSE_SPLIT.split(sentence) if c.strip(" ,;:")]


# --- skip rules ------------------------------------------------------------------------------

_INTERROGATIVES = frozenset(
    "what how why when where who whom which whose do does did can could should would will is are am was were "
    "shall may might have has any anything anyone isn't aren't don't doesn't didn't won't can't".split())
_HEDGE_START = re.compile(r"(?:if|maybe|perhaps|suppose|supposing|hypothetically|in case|someday|one day|unless|"
                          r"what if|imagine|assuming|i wonder|not sure)\b", re.I)
_HEDGE_ANY = re.compile(r"\b(?:if (?:i|we) ever|maybe (?:i|we)|(?:i|we) might|(?:i|we) may|(?:i|we) could|"
                        r"(?:i|we)'d probably|probably|i wonder|not sure|i guess|thinking (?:about|of)|considering|"
                        r"would be nice|some ?day)\b", re.I)
# What opens a sentence without saying anything ("Oh,", "Yes.", "Reminder:").
_FILLER = re.compile(
    r"(?:(?P<fix>actually|no wait|wait|sorry|oops|correction|scratch that|i mean|i meant|no)|oh|well|yes|yeah|yep|"
    r"ok|okay|so|and|also|but|hmm|haha|lol|by the way|btw|anyway|hi|hey|hello|good morning|great|cool|"
    r"honestly|fyi|just so you know|for the record|in fact|plus|ah|um|uh|right|sure|thanks|thank you|nope|"
    r"heads up|quick update|update|reminder|[a-z]{1,12} reminder)(?:[,!.:-]+ ?| |$)", re.I)


def _first_word(text: str) -> str:
    head = text[:40].split(" ", 1)[0]
    return head.strip(",.!:;").lower()


def is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or _first_word(sentence) in _INTERROGATIVES


def is_hedged(sentence: str) -> bool:
    return bool(_HEDGE_START.match(sentence) or _HEDGE_ANY.search(sentence))


def _strip_fillers(clause: str) -> tuple[str, bool]:
    """The clause without its opening fillers, and whether one of them marks a correction."""
    correction = False
    for _ in range(4):  # a bounded number of fillers: "Oh, sorry, actually, ..."
        m = _FILLER.match(clause)
        if not m or m.end() == 0:
            break
        correction = correction or bool(m.group("fix"))
        clause = clause[m.end():]
    return clause, correction


# --- third person ----------------------------------------------------------------------------

_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "am": "is", "are": "is", "'m": "is", "be": "is",
              "don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "was": "was", "were": "was"}
_KEEP_VERB = frozenset(
    "can can't could couldn't will won't would wouldn't should shouldn't must might may quit grew got took ran "
    "went bought made left began came put set read had did saw met fell found thought told sold won drove flew "
    "spent kept lost paid became chose broke wrote gave sent taught".split())
_ADVERBS = frozenset("really absolutely always usually generally definitely also just honestly totally truly "
                     "still never often sometimes rarely mostly finally recently currently now".split())
_SUBJECT = re.compile(r"(?:(?P<pron>I|we)(?P<contr>'m|'re|'ve|'ll|'d)?|(?P<poss>my|our))\b ?", re.I)
_INNER = re.compile(r"\b(?:my|our|me|us|myself|ourselves|we|we're|we've|we'll|we'd|I'm|I've|I'll|I'd|I)(?![\w'])")
_INNER_WORDS = {"my": "their", "our": "their", "me": "them", "us": "them", "myself": "themselves",
                "ourselves": "themselves", "we": "they", "we're": "they're", "we've": "they've", "we'll": "they'll",
                "we'd": "they'd"}
_TRAILING = re.compile(r"(?:[ ,]{1,3}(?:though|too|honestly|by the way|btw|lol|haha|then|as well|anyway|now|"
                       r"for now|either|ha|lmao|obviously)){1,3}[.!]{0,3}$|[.!,;:\s]{1,8}$", re.I)


def _third_person_verb(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _KEEP_VERB or low.endswith("n't") or (low.endswith("ed") and not low.endswith("eed")):
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if low.endswith("y") and low[-2:-1] not in ("a", "e", "i", "o", "u"):
        return verb[:-1] + "ies"
    return verb + "s"


def third_person(clause: str, speaker: str) -> str:
    """`clause` (first person, starting with its subject) said of `speaker`."""
    m = _SUBJECT.match(clause)
    if not m:
        return _TRAILING.sub("", _inner(clause, speaker))
    rest = clause[m.end():]
    if m.group("poss"):
        head = f"{speaker}'s"
    elif m.group("contr"):
        head = speaker + " " + {"'m": "is", "'re": "is", "'ve": "has", "'ll": "will", "'d": "would"}[
            m.group("contr").lower()]
    else:
        adverbs = []
        verb, _, rest = rest.partition(" ")
        while verb.lower() in _ADVERBS and rest and len(adverbs) < 3:  # "I always prefer": prefers
            adverbs.append(verb)
            verb, _, rest = rest.partition(" ")
        head = " ".join([speaker, *adverbs, _third_person_verb(verb)]) if verb else speaker
    return _TRAILING.sub("", f"{head} {_inner(rest, speaker)}".strip())


def _inner(text: str, speaker: str) -> str:
    """First-person words inside a clause, in the third person ("with my husband": their)."""
    def word(m: re.Match[str]) -> str:
        w = m.group()
        if w[0] == "I":
            return speaker + {"I": "", "I'm": " is", "I've": " has", "I'll": " will", "I'd": " would"}[w]
        return _INNER_WORDS.get(w, w)  # lower case only: "US" is a country

    return _INNER.sub(word, text)


# --- the patterns ----------------------------------------------------------------------------

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_TIME_PREFIX = re.compile(
    rf"(?P<time>next (?:week|month|year|weekend|{_DAYS}|spring|summer|fall|autumn|winter)|tomorrow|tonight|"
    rf"this (?:week|weekend|month|year|evening|afternoon|morning|{_DAYS})|later this (?:week|month|year)|"
    rf"on (?:{_DAYS})|in (?:{_MONTHS})|in (?:a|two|three|\d{{1,2}}) (?:days?|weeks?|months?)|"
    rf"on (?:the )?\d{{1,2}}(?:st|nd|rd|th)?(?: of (?:{_MONTHS}))?|on (?:{_MONTHS}) \d{{1,2}}(?:st|nd|rd|th)?),? "
    rf"(?=(?:I|we|my|our)\b)", re.I)
_DATE = re.compile(
    rf"\b(?:(?:{_DAYS}|tomorrow|tonight|today)\b|(?-i:May|March)\b|(?:january|february|april|june|july|august|"
    rf"september|october|november|december|jan|feb|apr|jun|jul|aug|sept?|oct|nov|dec)\b|"
    rf"next (?:week|month|year|weekend)|this (?:week|weekend|month|year)|\d{{1,2}}(?:st|nd|rd|th)\b|"
    rf"\d{{1,2}}(?::\d\d)? ?(?:am|pm)\b|in (?:a|two|three|\d{{1,2}}) (?:days?|weeks?|months?)|\d{{4}}-\d\d-\d\d)",
    re.I)

_NATIONALITIES = frozenset(
    "american british english scottish irish welsh canadian australian german french spanish portuguese "
    "italian dutch belgian swiss austrian swedish norwegian danish finnish polish czech hungarian greek "
    "turkish russian ukrainian romanian japanese chinese korean indian pakistani vietnamese thai filipino "
    "indonesian malaysian mexican brazilian argentinian chilean colombian peruvian nigerian kenyan egyptian "
    "moroccan israeli iranian lebanese south-african".split())
_DIETS = frozenset("vegetarian vegan pescatarian pescetarian gluten-free lactose-intolerant celiac coeliac keto paleo "
                   "halal kosher teetotal sober".split())
_FAMILY = ("wife|husband|partner|girlfriend|boyfriend|fiancee?|fiancée?|spouse|son|sons|daughter|daughters|"
           "kid|kids|children|child|baby|twins|mom|mum|mother|dad|father|parents|sister|sisters|brother|"
           "brothers|siblings|grandma|grandmother|grandpa|grandfather|grandparents|aunt|uncle|cousin|niece|"
           "nephew|in-laws|family|dog|dogs|cat|cats|puppy|kitten|pet|pets|parrot|rabbit|hamster|horse")
_FAMILY_WORDS = frozenset(_FAMILY.split("|"))
# People whose facts are theirs, not the speaker's ("my coworker Tom lives in Berlin").
_OTHERS = frozenset(
    "friend friends coworker co-worker coworkers colleague colleagues neighbor neighbour neighbors neighbours "
    "boss manager roommate flatmate classmate teacher doctor landlord client clients customer customers "
    "teammate teammates buddy ex".split())
_JOBS = ("engineer|developer|designer|nurse|doctor|physician|teacher|lawyer|manager|analyst|scientist|consultant|"
         "architect|accountant|programmer|researcher|chef|cook|writer|journalist|freelancer|founder|ceo|cto|"
         "student|professor|lecturer|pharmacist|dentist|electrician|plumber|carpenter|mechanic|pilot|"
         "firefighter|officer|paramedic|therapist|psychologist|artist|musician|photographer|editor|"
         "translator|recruiter|marketer|salesperson|entrepreneur|intern|contractor|veterinarian|vet|"
         "librarian|baker|barista|waiter|waitress|farmer|tester|administrator|admin|specialist|director|lead")
_PLACE = r"(?-i:[A-Z][\w'.-]{0,30}(?:,? [A-Z][\w'.-]{0,30}){0,3})"
_ADV = r"(?:(?:really|absolutely|always|usually|generally|definitely|also|just|honestly|totally|truly|still|" \
       r"kind of|pretty much|much|do|so|sort of|genuinely|secretly) ){0,2}"
_PREFERENCE_VERBS = (r"love|like|prefer|enjoy|adore|hate|dislike|detest|loathe|can't stand|can't bear|don't like|"
                     r"don't love|don't enjoy|don't mind|'m (?:a |not a )?(?:big |huge )?fan of|'d rather|"
                     r"'d prefer|'m into|'m obsessed with|'m not into|'m crazy about")
_PRONOUN_OBJECT = frozenset("it that this you them those these him her everything".split())
_ING_BASE = {"flying": "fly", "going": "go", "travelling": "travel", "traveling": "travel", "heading": "head",
             "driving": "drive", "leaving": "leave", "moving": "move", "starting": "start", "visiting": "visit",
             "taking": "take", "attending": "attend", "meeting": "meet", "returning": "return", "running": "run",
             "coming": "come", "getting": "get", "beginning": "begin", "graduating": "graduate",
             "retiring": "retire", "presenting": "present", "hosting": "host", "seeing": "see"}

def _pat(text: str) -> re.Pattern[str]:
    return re.compile(text, re.I)


# (kind, pattern, type, category, importance). The first that matches wins; the content is the
# clause in the third person unless the kind rewrites it (`_rewrite`).
_KINDS: tuple[tuple[str, re.Pattern[str], MemoryType, str, float], ...] = (
    ("name", _pat(r"(?:my name is|my name's|I'm called|call me|I'm) (?P<name>(?-i:[A-Z][\w'-]{1,30})"
                  r"(?: (?-i:[A-Z][\w'-]{1,30})){0,2})$"), "fact", "identity", 0.9),
    ("age", _pat(r"I'm (?P<age>\d{1,3})(?: years old| years of age| y/?o)?$"), "fact", "identity", 0.9),
    ("nationality", _pat(r"I'm (?:originally )?(?P<nat>[a-z-]{4,20})$"), "fact", "identity", 0.85),
    ("decision", _pat(r"(?:I|we)(?:'ve)? (?:finally |just |now )?decided (?P<rest>(?:to|on|against) .{2,200})$"),
     "decision", "other", 0.65),
    ("decision_will", _pat(r"(?:I|we)(?:'ll|'re going to|'m going to|'re gonna|'m gonna|'m going|'re going) "
                           r"(?:definitely )?(?P<verb>go with|use|take|pick|choose|buy|get|book|stick with|"
                           r"switch to|opt for|order|adopt|accept) (?P<rest>.{2,200})$"), "decision", "other", 0.65),
    ("decision_past", _pat(r"(?:I|we) (?:finally |just )?(?:chose|picked|went with|opted for|settled on|"
                           r"switched to|accepted|signed up for|enrolled in|booked|bought)\b"),
     "decision", "other", 0.6),
    ("diet", _pat(r"(?:I'm|we're) (?:a |an |strictly |fully |mostly |now )?(?:vegetarian|vegan|pescatarian|"
                  r"pescetarian|gluten[- ]free|lactose[- ]intolerant|celiac|coeliac|keto|paleo|halal|kosher|"
                  r"teetotal|sober)\b"), "fact", "diet", 0.85),
    ("diet_avoid", _pat(r"I (?:don't|never|can't|no longer) (?:eat|drink|have)\b"), "fact", "diet", 0.85),
    ("allergy", _pat(r"I'm (?:severely |very |mildly |deathly |slightly )?(?:allergic|intolerant|sensitive) to\b|"
                     r"I've (?:an? |got an? )?(?:[\w-]{1,20} ){0,2}(?:allergy|allergies|intolerance)\b"),
     "fact", "health", 0.9),
    ("health", _pat(r"I(?:'ve| was diagnosed with| suffer from| live with) (?:got )?(?:type [12] |mild |chronic |"
                    r"severe |bad )?(?:asthma|diabetes|celiac|adhd|autism|migraines?|high blood pressure|"
                    r"hypertension|anxiety|depression|arthritis|epilepsy|eczema|insomnia|a bad back|"
                    r"(?:[\w-]{1,20} ){1,2}(?:disease|syndrome|disorder|condition))\b|"
                    r"I'm (?:diabetic|pregnant|epileptic|asthmatic|deaf|blind|colou?r-?blind)\b|"
                    r"I (?:take|use) (?-i:[A-Z][\w-]{2,30})(?: \w+){0,3} (?:daily|every day|twice a day|"
                    r"once a day|a day|for my)\b|I'm (?:scared|afraid|terrified) of\b"), "fact", "health", 0.8),
    ("family_has", _pat(rf"(?:I|we)(?:'ve| have)(?: got)? (?:a|an|one|two|three|four|five|six|\d{{1,2}}) "
                        rf"(?:[\w-]{{1,20}} ){{0,3}}(?:{_FAMILY})\b"), "fact", "family", 0.8),
    ("family_got", _pat(r"(?:I|we) (?:just |recently |finally )?(?:adopted|got|rescued) (?:a|an|two|three|\d) "
                        r"(?:[\w-]{1,20} ){0,3}(?:dog|cat|puppy|kitten|rabbit|parrot|hamster|horse|baby)\b"),
     "fact", "family", 0.8),
    ("family_status", _pat(r"(?:I'm|we're) (?:happily )?(?:married|engaged|divorced|single|pregnant|expecting|"
                           r"a (?:mom|mum|dad|mother|father|parent|grandparent|widow|widower))\b"),
     "fact", "relationships", 0.8),
    ("lives", _pat(rf"(?:I|we)(?:'m|'re)? (?:currently |now |still )?(?:live|living|reside|residing|based|stay|"
                   rf"staying) in (?P<place>{_PLACE})"), "fact", "location", 0.8),
    ("moved", _pat(rf"(?:I|we)(?:'ve)? (?:just |recently |finally )?(?:moved|relocated|moved back) to "
                   rf"(?P<place>{_PLACE})(?P<rest>.{{0,200}})$"), "fact", "location", 0.8),
    ("origin", _pat(rf"(?:I'm (?:originally )?from|I (?:grew up|was born) in) {_PLACE}"), "fact", "identity", 0.75),
    ("job", _pat(rf"I'm (?:a|an|the) (?:[\w-]{{1,25}} ){{0,3}}(?:{_JOBS})s?\b|I(?:'ve been| have been) "
                 rf"(?:a|an) (?:[\w-]{{1,25}} ){{0,3}}(?:{_JOBS})\b|I'm (?:retired|unemployed|self-employed|"
                 rf"between jobs)\b"), "fact", "work", 0.75),
    ("work", _pat(r"(?:I|we) (?:currently )?(?:work|worked|run|own|manage) (?:as|at|for|in|on|a|an|the|"
                  r"(?-i:[A-Z]))|I'm working (?:as|at|for)\b|I (?:currently )?teach\b"), "fact", "work", 0.7),
    ("study", _pat(r"I (?:study|studied|major in|majored in|go to|attend) |I'm (?:studying|majoring) (?!for)|"
                   r"I'm in (?:my )?(?:first|second|third|fourth|final|last|\d(?:st|nd|rd|th)) year\b"),
     "fact", "education", 0.7),
    ("preference", _pat(rf"(?:I|we)(?:'m|'d)? {_ADV}(?P<verb>{_PREFERENCE_VERBS}) (?P<obj>.{{2,200}})$"),
     "preference", "preferences", 0.6),
    ("favourite", _pat(r"(?:my|our) (?:all-time |absolute )?favou?rite \w"), "preference", "preferences", 0.6),
    ("change", _pat(r"(?:I|we)(?:'ve)? (?:just |recently |finally )?(?:quit|stopped|gave up|given up|started|"
                    r"switched|cut out)\b"), "fact", "other", 0.6),
    ("plan_going", _pat(rf"(?:I'm|we're) (?P<verb>{'|'.join(_ING_BASE)}) (?P<rest>.{{1,200}})$"),
     "note", "plans", 0.5),
    ("plan_present", _pat(r"(?:I|we) (?P<verb>start|begin|fly|leave|move|travel|visit|return|graduate|retire|arrive|"
                          r"go) (?P<rest>.{1,200})$"), "note", "plans", 0.5),
    ("goal", _pat(r"(?:I'm|we're) (?:currently |also )?(?:planning|training|preparing|saving|studying|learning|"
                  r"trying|working on|applying|getting ready|looking for|looking to)\b"), "note", "plans", 0.5),
    ("has", _pat(r"(?:I|we)(?:'ve| have)(?: got)? (?:a|an|my|our|two|three) \w"), "fact", "other", 0.5),
    ("uses", _pat(r"(?:I|we) (?:use|play|speak|drive|own|run|ride|wear|drink|eat|cook|bake|volunteer|practice|"
                  r"practise|go)\b|I've been (?:\w+ing|doing|playing|learning)\b"), "fact", "other", 0.55),
    ("budget", _pat(r"(?:my|our) (?:[\w-]{1,20} ){0,2}(?:budget|rent|salary|income|mortgage)\b"),
     "fact", "finance", 0.6),
    ("possessive", _pat(r"(?:my|our) (?P<np>(?:[\w'-]{1,25} ){0,3}?[\w'-]{1,25}) (?:is|are|'s|was|turns|starts|"
                        r"begins|leaves|ends|costs|runs|lives|works|loves|hates|likes|uses|takes|needs|has|had|"
                        r"got|bakes|cooks|plays|studies|goes|gets|comes)\b"), "fact", "other", 0.5),
)

_CATEGORY_WORDS = (
    ("health", frozenset("allergic allergy allergies asthma diabetes diabetic medication inhaler doctor sick illness "
                         "disease surgery pregnant injury therapy migraine blood vet".split())),
    ("diet", frozenset("vegetarian vegan gluten lactose meat pork beef fish eat eating food drink coffee tea "
                       "sugar dairy cook cooking recipes recipe".split())),
    ("family", frozenset(_FAMILY_WORDS)),
    ("work", frozenset("job work works working office team company boss manager career promotion salary "
                       "interview hired colleague launch".split())),
    ("education", frozenset("study studies studying university college school exam thesis degree course class "
                            "student semester".split())),
    ("travel", frozenset("fly flying flight trip travel travelling traveling hotel vacation holiday airport "
                         "visit visiting abroad".split())),
    ("finance", frozenset("budget rent salary saving savings money dollars euros pounds invest fund mortgage "
                          "loan debt".split())),
    ("technology", frozenset("python postgres database kubernetes linux mac windows laptop phone editor code "
                             "server react aws api app software neovim vim".split())),
    ("hobbies", frozenset("guitar piano cello violin climbing running hiking painting reading chess music "
                          "orchestra football soccer tennis yoga knitting photography gaming".split())),
)
_WORD = re.compile(r"[a-z][a-z'-]{0,30}")


def _category(text: str, default: str) -> str:
    words = set(_WORD.findall(text.lower()))
    for category, vocabulary in _CATEGORY_WORDS:
        if words & vocabulary:
            return category
    return default


def _rewrite(kind: str, m: re.Match[str], clause: str, speaker: str, time: str) -> list[str]:
    """The statements a match says, in the third person; [] for a match that says nothing."""
    if kind == "name":
        name = m.group("name")
        if name.lower() in _NATIONALITIES or name == speaker:
            return []
        return [f"{speaker}'s name is {name}"]
    if kind == "age":
        return [f"{speaker} is {m.group('age')} years old"] if 5 <= int(m.group("age")) <= 120 else []
    if kind == "nationality":
        nat = m.group("nat").lower()
        return [f"{speaker} is {nat.title()}"] if nat in _NATIONALITIES else []
    if kind == "diet":  # "I'm vegan and gluten-free": two facts
        parts = re.split(r",? and |, ", re.sub(r"^(?:I'm|we're) ", "", clause, flags=re.I))
        words = [re.sub(r"^(?:a|an) ", "", p.lower()) for p in parts]
        if len(words) > 1 and all(w.replace(" ", "-") in _DIETS for w in words):
            return [f"{speaker} is {w}" for w in words]
    if kind == "decision":
        return [_clean(f"{speaker} decided {_inner(m.group('rest'), speaker)}")]
    if kind == "decision_will":
        rest = m.group("rest")
        if _first_word(rest) in _PRONOUN_OBJECT or rest.lower().startswith(("a look", "back", "a break", "some rest")):
            return []
        return [_clean(f"{speaker} decided to {m.group('verb').lower()} {third_person(rest, speaker)}")]
    if kind == "lives":
        return [f"{speaker} lives in {m.group('place')}"]
    if kind == "moved":
        out = [f"{speaker} lives in {m.group('place')}"]
        if m.group("rest").lstrip().lower().startswith(("for ", "because ", "to ", "with ")):
            out.append(third_person(clause, speaker))
        return out
    if kind == "preference":
        obj = m.group("obj")
        if _first_word(obj) in _PRONOUN_OBJECT and len(obj.split()) <= 3:
            return []  # "I love it", "I like that": a reaction, not a preference
        clause = re.sub(r"^((?:I|we)) do (?=like|love|enjoy|prefer)", r"\1 ", clause, flags=re.I)
    if kind in ("plan_going", "plan_present"):
        if not (time or _DATE.search(clause)):  # a plan without a date: only a trip somewhere
            going = kind == "plan_going" and re.match(r"to (?-i:[A-Z])", m.group("rest"), re.I)
            return [third_person(clause, speaker)] if going else []
        verb = m.group("verb").lower()
        base = _ING_BASE.get(verb, verb)
        rest = m.group("rest")
        if base == "go" and rest.lower().startswith("to ") and not re.match(
                r"to (?:the|a|an|my|our|(?-i:[A-Z]))", rest, re.I):
            rest = rest[3:]  # "I'm going to learn Spanish next month": a plan to learn it
            base, _, rest = rest.partition(" ")
        return [_with_time(_clean(f"{speaker} plans to {base} {third_person(rest, speaker)}"), time)]
    out = [_with_time(third_person(clause, speaker), time)]
    if kind in ("job", "work") and (place := re.search(rf" in (?:the )?({_PLACE})$", clause)):
        out.append(f"{speaker} works in {place.group(1)}")  # "a nurse in Lisbon": where they work
    if kind == "possessive" and (named := re.match(rf"(?:my|our) ({_FAMILY}) ((?-i:[A-Z][\w'-]{{1,30}}))\b",
                                                   clause, re.I)):
        out.append(f"{speaker} has a {named.group(1).lower()} named {named.group(2)}")  # "my cat Luna is 12"
    return out


def _clean(text: str) -> str:
    return _TRAILING.sub("", " ".join(text.split()))


def _with_time(text: str, time: str) -> str:
    return f"{text} {time.lower()}" if time else text


def _correct(previous: Finding, clause: str, seq: int) -> Finding | None:
    """"No wait, it's on Thursday": the speaker's previous finding with its value replaced."""
    m = re.match(r"(?:it's|it is|that's|that is|it was|make that|i meant) (?P<value>.{1,80})$", clause, re.I)
    if not m:
        return None
    value = _TRAILING.sub("", m.group("value"))
    prep = re.match(r"(on|at|in|to|for|from) ", value, re.I)
    content = previous.content
    if prep:
        spans = list(re.finditer(rf"\b{prep.group(1)} [^,;]{{1,60}}?(?= (?:on|at|in|to|for|from|by|with)\b|$)",
                                 content, re.I))
        if not spans:
            return None
        last = spans[-1]
        content = content[:last.start()] + value + content[last.end():]
    else:
        head, sep, _ = content.rpartition(" is ")
        if not sep:
            return None
        content = f"{head} is {value}"
    return Finding(content, previous.type, previous.category, previous.importance,
                   tuple(sorted({*previous.seqs, seq})), previous.pattern, previous.speaker, correction=True)


_FIRST_PERSON = re.compile(r"(?:I|I'm|I've|I'll|I'd|we|we're|we've|we'll|my|our)\b", re.I)


def _clause_findings(clause: str, seq: int, speaker: str, correction: bool) -> list[Finding]:
    clause, fix = _strip_fillers(clause)
    correction = correction or fix
    time = ""
    if t := _TIME_PREFIX.match(clause):
        time, clause = t.group("time"), clause[t.end():]
    clause = _CONTRACT.sub(_contract, clause).rstrip(".!,;: ")
    if clause[:2] == "i ":
        clause = "I" + clause[1:]
    if not _FIRST_PERSON.match(clause) or is_hedged(clause) or _first_word(clause) in _INTERROGATIVES:
        return []
    possessive = re.match(r"(?:my|our) ((?:[\w'-]{1,25} ){0,3}?[\w'-]{1,25})\b", clause, re.I)
    if possessive:
        words = set(possessive.group(1).lower().split())
        if words & _OTHERS and not words & _FAMILY_WORDS:
            return []  # someone else's fact
    for kind, pattern, type_, category, importance in _KINDS:
        m = pattern.match(clause)
        if not m:
            continue
        dated = bool(time or _DATE.search(clause))
        if kind in ("possessive", "has", "uses") and dated:
            type_, category = "note", "schedule"
        if category in ("other", "plans") or kind == "possessive":
            category = _category(clause, category)
        if kind == "possessive" and category == "family":
            importance = 0.75
        if kind == "job" and "student" in clause.lower():
            category = "education"
        contents = _rewrite(kind, m, clause, speaker, time)
        if contents:  # else another kind may read it ("I'm Japanese" is no name)
            return [Finding(c, type_, category, importance, (seq,), kind, speaker, correction) for c in contents]
    if len(clause.split()) < 4:  # "I'm coming too", "I agree": nothing to keep
        return []
    content = _with_time(third_person(clause, speaker), time)
    return [Finding(content, "note", _category(clause, "other"), 0.35, (seq,), "open", speaker, correction)]


def find_memories(messages: Sequence[ConversationMessage]) -> list[Finding]:
    """What the user messages' speakers say of themselves, in message order. O(total length)."""
    out: list[Finding] = []
    last: dict[str, Finding] = {}  # each speaker's latest finding, for "no wait, it's ..."
    for message in messages:
        if message.role != "user":
            continue
        speaker = (message.name or "").strip() or "User"
        for sentence in split_sentences(message.content):
            if len(sentence) > 4 * MAX_CLAUSE_CHARS or is_question(sentence) or is_hedged(sentence):
                continue
            stripped, correction = _strip_fillers(sentence)
            if not stripped or is_question(stripped):
                continue
            for clause in split_clauses(stripped):
                if len(clause) > MAX_CLAUSE_CHARS:
                    continue
                found = _clause_findings(clause, message.seq, speaker, correction)
                if not found and correction and speaker in last:
                    fixed = _correct(last[speaker], _strip_fillers(clause)[0], message.seq)
                    found = [fixed] if fixed else []
                out += found
                for f in found:
                    if f.pattern != "open":
                        last[speaker] = f
    return out
