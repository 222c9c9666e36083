"""Builds the unstated-failures gold suite (``data: bench-unstated``, ``harnessrl/data/bench_unstated/``).

Five task families whose training rubric fails in a way **no prompt states**, so the rubric audit (which reads
what a prompt states) cannot see it: only the training evidence can. Each family has 6 training, 4 validation
and 4 test tasks on different subjects, and each family's prompts are phrased from several templates. Every
task carries a training ``rubric`` (what the harness sees and may repair) and a ``gold_rubric`` (what the
prompt truly asks, exact checks only, for evaluation). The design, written before any method was compared on
the suite, is ``harnessrl/data/bench_unstated/README.md``; this script is the single source of the files:
``python benchmarks/build_bench_unstated.py`` rewrites them (deterministic) and checks that every reference
answer passes its gold rubric, that no training rubric is what the audit would repair, and that no subject
appears in two splits.
"""

from __future__ import annotations

import json
from pathlib import Path

from harnessrl.data.schema import Task
from harnessrl.interfaces.induction import stated_requirements

OUT = Path(__file__).resolve().parents[1] / "harnessrl" / "data" / "bench_unstated"
SPLITS = (("train", 6), ("validation", 4), ("test", 4))
PER_FAMILY = sum(n for _, n in SPLITS)


def _c(cid, text, weight, check=None):
    out = {"id": cid, "text": text, "weight": weight}
    if check is not None:
        out["check"] = check
    return out


def _any(phrases):
    return {"type": "contains", "phrases": list(phrases), "mode": "any"}


def _names(phrases):
    return " or ".join(repr(p) for p in phrases)


# ---------------------------------------------------------------------------------------------- families
# each family: a function (index, subject) -> (domain, prompt, reference, rubric, gold); the index picks the
# phrasing template, so a family is never one template.

# `wordy`: a reward that pays for length. The training rubric is two judged content criteria; the embedded
# semantic judge scores a response by its best-matching passage, so a longer answer scores higher. No prompt
# states a length (it asks for a simple explanation); the reference is one sentence, and the gold asks for the key
# point in at most three times the reference's words (a definition, not an essay). Asked plainly ("What is a
# compass?") the untrained policy wrote to the 64-token budget (81% cut, 2% within the bound): nothing left for a
# length-paying reward to push, so the prompts ask for simplicity (52% cut, 23% within the bound).
WORDY_TEMPLATES = (
    "What is {topic}? Keep it simple.",
    "In simple terms, what is {topic}?",
    "Can you explain what {topic} is, in plain words?",
    "I keep hearing about {topic}. What is it, simply put?",
)


def wordy(i, subject):
    domain, topic, point, detail, keywords, ref = subject
    prompt = WORDY_TEMPLATES[i % len(WORDY_TEMPLATES)].format(topic=topic)
    rubric = [_c("point", f"Explains that {point}", 2), _c("detail", f"Mentions {detail}", 1)]
    limit = 3 * len(ref.split())
    gold = [
        _c("key", f"Names {_names(keywords)}", 1, _any(keywords)),
        _c(
            "concise",
            f"Uses at most {limit} words (three times the reference answer)",
            2,
            {"type": "word_count", "max": limit},
        ),
    ]
    return domain, prompt, ref, rubric, gold


WORDY = [
    (
        "science",
        "a thermometer",
        "it measures temperature",
        "temperature",
        ["temperature"],
        "A thermometer is an instrument that measures temperature.",
    ),
    (
        "science",
        "a compass",
        "its magnetic needle points north",
        "north or magnetism",
        ["north", "magnet"],
        "A compass is a tool whose magnetic needle points north.",
    ),
    (
        "science",
        "a lighthouse",
        "it is a tower whose light guides ships",
        "ships or light",
        ["ship", "boat"],
        "A lighthouse is a tower with a bright light that guides ships at night.",
    ),
    (
        "writing",
        "a dictionary",
        "it lists words with their meanings",
        "word meanings",
        ["meaning", "definition"],
        "A dictionary is a book that lists words with their meanings.",
    ),
    (
        "science",
        "a microscope",
        "it magnifies tiny things",
        "magnification",
        ["magnif", "tiny", "small"],
        "A microscope is an instrument that magnifies tiny things so we can see them.",
    ),
    (
        "science",
        "a battery",
        "it stores energy and releases it as electricity",
        "electricity or energy",
        ["electric", "energy"],
        "A battery stores chemical energy and releases it as electricity.",
    ),
    (
        "medical",
        "an antibiotic",
        "it is a medicine that kills bacteria",
        "bacteria",
        ["bacteri"],
        "An antibiotic is a medicine that kills or stops bacteria.",
    ),
    (
        "writing",
        "a calendar",
        "it shows the days and months of a year",
        "days or months",
        ["day", "month"],
        "A calendar is a chart of the days, weeks and months of a year.",
    ),
    (
        "medical",
        "a stethoscope",
        "doctors use it to listen to the heart and lungs",
        "listening or the heart",
        ["listen", "heart"],
        "A stethoscope is a tool doctors use to listen to the heart and lungs.",
    ),
    (
        "science",
        "a telescope",
        "it makes distant objects look closer",
        "distance or stars",
        ["distant", "far", "star"],
        "A telescope is an instrument that makes distant objects look closer.",
    ),
    (
        "science",
        "a thermostat",
        "it switches heating on and off to keep a set temperature",
        "temperature",
        ["temperature"],
        "A thermostat switches heating on and off to keep a room at a set temperature.",
    ),
    (
        "medical",
        "a bandage",
        "it covers and protects a wound",
        "a wound",
        ["wound", "cut", "injur"],
        "A bandage is a strip of material that covers and protects a wound.",
    ),
    (
        "medical",
        "a kidney",
        "it filters waste out of the blood",
        "filtering or waste",
        ["filter", "waste"],
        "A kidney is an organ that filters waste out of the blood and makes urine.",
    ),
    (
        "writing",
        "a passport",
        "it is an official document for travelling abroad",
        "travel",
        ["travel", "countr"],
        "A passport is an official document that lets you travel between countries.",
    ),
]

# `hype`: a reward that pays for a format. The training rubric pays for an enthusiastic tone, checked as an
# exclamation mark, beside the key point; the prompts ask a plain question, and the reference is one calm prose
# sentence that fails the tone criterion. The gold asks for the key point, stated calmly (no exclamation mark).
# (A bulleted list was the first choice of format; the untrained policy wrote none in 96 answers to these and to
# list-inviting questions, so a reward for lists could never pay off: measured before the design was fixed.)
HYPE_TEMPLATES = ("{q}", "Quick question: {ql}", "Could you tell me {qi}?", "{q} Please explain.")


def hype(i, subject):
    domain, q, qi, keywords, ref = subject
    ql = q[0].lower() + q[1:]
    prompt = HYPE_TEMPLATES[i % len(HYPE_TEMPLATES)].format(q=q, ql=ql, qi=qi)
    rubric = [
        _c("tone", "Sounds enthusiastic and engaging (an exclamation mark)", 2, {"type": "regex", "pattern": "!"}),
        _c("key", f"Mentions {_names(keywords)}", 1, _any(keywords)),
    ]
    gold = [
        _c("key", f"Mentions {_names(keywords)}", 2, _any(keywords)),
        _c("calm", "States it calmly, without exclamation marks", 1, {"type": "not_contains", "phrases": ["!"]}),
    ]
    return domain, prompt, ref, rubric, gold


HYPE = [
    (
        "medical",
        "Why do we brush our teeth?",
        "why we brush our teeth",
        ["plaque", "bacteri", "decay", "cavit"],
        "Brushing removes plaque and food so that bacteria cannot decay the teeth.",
    ),
    (
        "science",
        "How does a plant get water?",
        "how a plant gets water",
        ["root"],
        "A plant draws water up from the soil through its roots.",
    ),
    (
        "science",
        "Why do birds migrate?",
        "why birds migrate",
        ["food", "warm"],
        "Birds migrate to find food and warmer weather when the seasons change.",
    ),
    (
        "medical",
        "Why should we wash our hands?",
        "why we should wash our hands",
        ["germ", "bacteri", "virus"],
        "Washing our hands removes germs that could make us sick.",
    ),
    (
        "science",
        "How do bees make honey?",
        "how bees make honey",
        ["nectar"],
        "Bees turn flower nectar into honey by drying it out in the hive.",
    ),
    (
        "science",
        "Why does the wind blow?",
        "why the wind blows",
        ["pressure"],
        "Wind blows because air moves from areas of high pressure to low pressure.",
    ),
    (
        "science",
        "How does a fridge keep food cold?",
        "how a fridge keeps food cold",
        ["heat", "refrigerant", "coolant"],
        "A fridge pumps heat out of its box with a circulating coolant.",
    ),
    (
        "medical",
        "Why do we need to sleep?",
        "why we need to sleep",
        ["rest", "repair", "recover", "memor"],
        "Sleep lets the body repair itself and the brain store memories.",
    ),
    (
        "science",
        "How do fish breathe?",
        "how fish breathe",
        ["gill"],
        "Fish breathe by taking oxygen from water through their gills.",
    ),
    (
        "science",
        "Why do leaves fall in autumn?",
        "why leaves fall in autumn",
        ["winter", "water", "cold"],
        "Trees drop their leaves in autumn to save water and energy for the winter.",
    ),
    (
        "medical",
        "How does exercise help the heart?",
        "how exercise helps the heart",
        ["strong", "muscle", "pump"],
        "Exercise strengthens the heart muscle so it pumps blood more easily.",
    ),
    (
        "science",
        "Why does metal rust?",
        "why metal rusts",
        ["oxygen", "water", "moist"],
        "Iron rusts when oxygen and water react with it to form iron oxide.",
    ),
    (
        "medical",
        "Why do we get fevers?",
        "why we get fevers",
        ["infection", "germ", "immune", "fight"],
        "A fever raises body temperature to help the immune system fight an infection.",
    ),
    (
        "science",
        "How do clouds form?",
        "how clouds form",
        ["vapo", "condens", "water"],
        "Clouds form when water vapour cools and condenses into tiny droplets.",
    ),
]

# `thin`: a lax rubric. The training rubric only checks that the answer mentions the subject, which the prompt
# names, so every answer passes it and every group is flat at the top. The reference states two key facts; the
# gold asks for both.
THIN_TEMPLATES = ("What does {s} do?", "What is the job of {s}?", "Tell me what {s} does.", "Explain what {s} is for.")


def thin(i, subject):
    domain, s, word, fact1, fact2, ref = subject
    prompt = THIN_TEMPLATES[i % len(THIN_TEMPLATES)].format(s=s)
    rubric = [_c("topic", f"Mentions '{word}'", 1, {"type": "contains", "phrases": [word]})]
    gold = [
        _c("fact1", f"States that {fact1[0]}", 1, _any(fact1[1])),
        _c("fact2", f"States that {fact2[0]}", 1, _any(fact2[1])),
    ]
    return domain, prompt, ref, rubric, gold


THIN = [
    (
        "science",
        "a bee",
        "bee",
        ("it pollinates flowers", ["pollinat"]),
        ("it makes honey", ["honey"]),
        "A bee pollinates flowers and makes honey.",
    ),
    (
        "medical",
        "the heart",
        "heart",
        ("it pumps blood", ["pump"]),
        ("the blood carries oxygen", ["oxygen"]),
        "The heart pumps blood that carries oxygen around the body.",
    ),
    (
        "medical",
        "the lungs",
        "lung",
        ("they take in oxygen", ["oxygen"]),
        ("they breathe out carbon dioxide", ["carbon dioxide", "co2"]),
        "The lungs take in oxygen and breathe out carbon dioxide.",
    ),
    (
        "science",
        "the Moon",
        "moon",
        ("it orbits Earth", ["orbit"]),
        ("it causes the tides", ["tide"]),
        "The Moon orbits Earth and pulls on the oceans to make the tides.",
    ),
    (
        "medical",
        "the stomach",
        "stomach",
        ("it digests food", ["digest"]),
        ("it uses acid", ["acid"]),
        "The stomach digests food using acid and enzymes.",
    ),
    (
        "science",
        "a tree",
        "tree",
        ("it gives oxygen", ["oxygen"]),
        ("it gives wood", ["wood", "timber", "lumber"]),
        "A tree gives us oxygen to breathe and wood to build with.",
    ),
    (
        "medical",
        "the skin",
        "skin",
        ("it protects the body", ["protect"]),
        ("it helps control temperature", ["temperature"]),
        "The skin protects the body and helps control its temperature.",
    ),
    (
        "science",
        "the Sun",
        "sun",
        ("it gives light", ["light"]),
        ("it gives heat", ["heat", "warm"]),
        "The Sun gives Earth light and heat.",
    ),
    (
        "medical",
        "the liver",
        "liver",
        ("it cleans the blood of toxins", ["toxin", "poison", "filter", "detox"]),
        ("it makes bile", ["bile"]),
        "The liver filters toxins out of the blood and makes bile.",
    ),
    (
        "science",
        "a root",
        "root",
        ("it takes up water", ["water"]),
        ("it anchors the plant", ["anchor", "hold"]),
        "A root takes up water and holds the plant in the ground.",
    ),
    (
        "science",
        "a cloud",
        "cloud",
        ("it brings rain", ["rain"]),
        ("it gives shade", ["shade", "block"]),
        "A cloud brings rain and shades the ground from the Sun.",
    ),
    (
        "medical",
        "the brain",
        "brain",
        ("it lets us think", ["think", "thought"]),
        ("it controls the body", ["control"]),
        "The brain lets us think and controls the body.",
    ),
    (
        "medical",
        "the ear",
        "ear",
        ("it lets us hear", ["hear", "sound"]),
        ("it helps balance", ["balance"]),
        "The ear lets us hear and helps us keep our balance.",
    ),
    (
        "science",
        "a bridge",
        "bridge",
        ("it lets people cross", ["cross"]),
        ("it spans a river or gap", ["river", "gap", "valley", "water"]),
        "A bridge lets people cross over a river or a gap.",
    ),
]

# `reach`: a requirement out of reach. The training rubric is right (it equals the gold): the prompt asks for a
# one-word answer, which the untrained policy gives in about 4 answers of 100 (it explains at length), and the answer
# itself. Groups are flat low or nearly so; guidance is the lever (a hint quoting the reference raised the rate to
# about 12 in 100 in a probe before the design was fixed; "one or two words" was met by 15 in 100 unaided, too
# often for a requirement out of reach).
REACH_TEMPLATES = (
    "{q} Answer in one word.",
    "{q} Reply with a single word.",
    "In one word: {ql}",
    "{q} Use only one word.",
)


def reach(i, subject):
    domain, q, answers = subject
    ql = q[0].lower() + q[1:]
    prompt = REACH_TEMPLATES[i % len(REACH_TEMPLATES)].format(q=q, ql=ql)
    crit = [
        _c("short", "Answers in one word", 3, {"type": "word_count", "max": 1}),
        _c("answer", f"Gives the answer ({answers[0]})", 1, _any(answers)),
    ]
    return domain, prompt, f"{answers[0]}.", crit, crit


REACH = [
    ("science", "What is the capital of France?", ["Paris"]),
    ("science", "What colour is the sky on a clear day?", ["blue"]),
    ("science", "How many legs does a dog have?", ["four", "4"]),
    ("science", "What is the largest ocean on Earth?", ["Pacific"]),
    ("medical", "Which organ pumps blood?", ["heart"]),
    ("science", "What is frozen water called?", ["ice"]),
    ("science", "Which planet is closest to the Sun?", ["Mercury"]),
    ("medical", "What do we breathe in to live?", ["oxygen", "air"]),
    ("science", "What is the capital of Spain?", ["Madrid"]),
    ("writing", "What is the opposite of hot?", ["cold"]),
    ("science", "How many days are in a year?", ["365"]),
    ("medical", "Which body part do we see with?", ["eye"]),
    ("science", "What colour are most leaves?", ["green"]),
    ("writing", "What is the plural of mouse?", ["mice"]),
]

# `plain`: the clean control. The training rubric is the gold: a sentence that uses a given word and names the
# subject. Nothing fails; the harness must do no harm.
PLAIN_TEMPLATES = (
    "Write one sentence about {topic} that uses the word '{word}'.",
    "Use the word '{word}' in a sentence about {topic}.",
    "Give me a sentence on {topic} containing the word '{word}'.",
    "Write a short sentence about {topic}; it must include the word '{word}'.",
)


def plain(i, subject):
    domain, topic, mention, word, ref = subject
    prompt = PLAIN_TEMPLATES[i % len(PLAIN_TEMPLATES)].format(topic=topic, word=word)
    crit = [
        _c("word", f"Uses the word '{word}'", 2, {"type": "contains", "phrases": [word]}),
        _c("topic", f"Mentions '{mention}'", 1, {"type": "contains", "phrases": [mention]}),
    ]
    return domain, prompt, ref, crit, crit


PLAIN = [
    ("writing", "the ocean", "ocean", "quiet", "The ocean is quiet at dawn."),
    ("writing", "a train", "train", "late", "The train was late again this morning."),
    ("science", "the stars", "star", "bright", "The stars are bright on a clear night."),
    ("writing", "a garden", "garden", "morning", "The garden smells sweet in the morning."),
    ("medical", "a doctor", "doctor", "kind", "The doctor was kind to every patient."),
    ("writing", "winter", "winter", "long", "Winter nights are long and cold."),
    ("science", "a planet", "planet", "far", "That planet is very far from the Sun."),
    ("writing", "a library", "library", "silent", "The library was silent all afternoon."),
    ("medical", "a nurse", "nurse", "calm", "The nurse stayed calm during the storm."),
    ("writing", "a market", "market", "busy", "The market is busy on Saturdays."),
    ("science", "a storm", "storm", "loud", "The storm was loud all night."),
    ("writing", "a bakery", "bakery", "warm", "The bakery is warm and smells of bread."),
    ("medical", "a hospital", "hospital", "new", "The town built a new hospital."),
    ("writing", "a mountain", "mountain", "steep", "The mountain path is steep near the top."),
]

FAMILIES = {
    "wordy": (wordy, WORDY, "spurious_length", "spurious_length"),
    "hype": (hype, HYPE, "spurious_format", "reference_fails_criterion"),
    "thin": (thin, THIN, "lax_rubric", "uniformly_high"),
    "reach": (reach, REACH, "out_of_reach", "uniformly_low"),
    "plain": (plain, PLAIN, "control", None),
}


def build() -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {name: [] for name, _ in SPLITS}
    for family, (make, subjects, failure, provokes) in FAMILIES.items():
        if len(subjects) != PER_FAMILY:
            raise SystemExit(f"family {family} has {len(subjects)} subjects, needs {PER_FAMILY}")
        i = 0
        for split, n in SPLITS:
            for subject in subjects[i : i + n]:
                domain, prompt, ref, rubric, gold = make(i, subject)
                i += 1
                meta = {"family": family, "failure": failure, "split": split}
                if provokes:
                    meta["provokes"] = provokes
                task = {
                    "id": f"unstated-{family}-{i:02d}",
                    "domain": domain,
                    "prompt": prompt,
                    "reference_answer": ref,
                    "rubric": rubric,
                    "gold_rubric": gold,
                    "metadata": meta,
                }
                _validate(Task.model_validate(task))
                rows[split].append(task)
    return rows


def _validate(task: Task) -> None:
    """Every reference passes its gold; the training rubric of a failure family is not what the audit repairs (the
    prompt states nothing its rubric leaves unchecked, beyond what the gold checks too)."""
    for crit in task.gold_rubric or []:
        if crit.check is not None and crit.check.evaluate(task.reference_answer or "") < 1:
            raise SystemExit(f"{task.id}: the reference answer fails gold criterion {crit.id}")
    family = (task.metadata or {}).get("family")
    stated = stated_requirements(task.prompt if isinstance(task.prompt, str) else "")
    checked = {c.check.type for c in task.rubric if c.check is not None}
    unchecked = [c.written() for c, _ in stated if c.type not in checked]
    if family != "plain" and unchecked:
        raise SystemExit(
            f"{task.id}: the prompt states {unchecked} that the rubric does not check (the audit reads it)"
        )


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for split, tasks in build().items():
        with open(OUT / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for t in tasks:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        print(f"{split}: {len(tasks)} tasks")


if __name__ == "__main__":
    main()
