"""Builds the gold-graded benchmark suite (``data: bench-gold``, ``harnessrl/data/bench_gold/``).

Seven task families, each with 6 training, 2 validation and 4 test tasks on different subjects. Every
task carries a training ``rubric`` (what the harness sees and may repair) and a ``gold_rubric`` (what the
prompt truly asks, exact checks only, for evaluation). The families, their injected failures and their
gold are described in ``harnessrl/data/bench_gold/README.md``; this script is the single source of the
files: ``python benchmarks/build_bench_gold.py`` rewrites them (deterministic) and checks that every
reference answer passes its gold rubric.
"""

from __future__ import annotations

import json
from pathlib import Path

from harnessrl.data.schema import Task

OUT = Path(__file__).resolve().parents[1] / "harnessrl" / "data" / "bench_gold"
SPLITS = (("train", 6), ("validation", 2), ("test", 4))


def _c(cid, text, weight, check=None):
    out = {"id": cid, "text": text, "weight": weight}
    if check is not None:
        out["check"] = check
    return out


# ---------------------------------------------------------------------------------------------- families
# each subject: (domain, fields...); each family: a function subject -> (prompt, reference, rubric, gold)


def opener(domain, topic, start, word, ref):
    prompt = f"What is {topic}? Begin your answer with '{start}'."
    crit = [
        _c("starts", f"Begins with '{start}'", 3, {"type": "starts_with", "text": start}),
        _c("topic", f"Mentions '{word}'", 1, {"type": "contains", "phrases": [word]}),
    ]
    return prompt, ref, crit, crit


OPENER = [
    (
        "science",
        "a volcano",
        "A volcano",
        "magma",
        "A volcano is an opening in the crust where magma, ash and gas escape.",
    ),
    ("science", "gravity", "Gravity", "mass", "Gravity is the force by which any mass attracts every other mass."),
    (
        "medical",
        "a fever",
        "A fever",
        "temperature",
        "A fever is a body temperature above normal, often a sign of infection.",
    ),
    (
        "science",
        "a glacier",
        "A glacier",
        "ice",
        "A glacier is a slow river of ice formed from snow packed over many years.",
    ),
    ("medical", "insulin", "Insulin", "sugar", "Insulin is a hormone that lets cells take up sugar from the blood."),
    (
        "writing",
        "a haiku",
        "A haiku",
        "syllables",
        "A haiku is a short poem of three lines with five, seven and five syllables.",
    ),
    (
        "science",
        "an atom",
        "An atom",
        "nucleus",
        "An atom is the smallest unit of an element: a nucleus with electrons around it.",
    ),
    (
        "medical",
        "a vaccine",
        "A vaccine",
        "immune",
        "A vaccine trains the immune system to recognise a germ before an infection.",
    ),
    (
        "science",
        "a comet",
        "A comet",
        "ice",
        "A comet is a ball of ice and dust that grows a glowing tail near the Sun.",
    ),
    (
        "science",
        "photosynthesis",
        "Photosynthesis",
        "light",
        "Photosynthesis is how plants use light to make sugar from water and air.",
    ),
    (
        "medical",
        "a migraine",
        "A migraine",
        "headache",
        "A migraine is a severe headache, often with nausea and sensitivity to light.",
    ),
    (
        "writing",
        "a metaphor",
        "A metaphor",
        "comparison",
        "A metaphor is a comparison that calls one thing another, like 'time is a thief'.",
    ),
]


def bullets(domain, things, items):
    prompt = f"List three {things} as bullet points, and nothing else."
    ref = "\n".join(f"- {x}" for x in items)
    crit = [_c("three", "Lists exactly three bullet points", 1, {"type": "bullet_count", "min": 3, "max": 3})]
    return prompt, ref, crit, crit


BULLETS = [
    ("writing", "fruits", ["apple", "banana", "cherry"]),
    ("science", "planets", ["Mars", "Venus", "Jupiter"]),
    ("medical", "bones of the arm", ["humerus", "radius", "ulna"]),
    ("science", "metals", ["iron", "copper", "gold"]),
    ("writing", "colours", ["red", "blue", "green"]),
    ("medical", "vitamins", ["vitamin A", "vitamin C", "vitamin D"]),
    ("science", "gases in the air", ["nitrogen", "oxygen", "argon"]),
    ("writing", "musical instruments", ["piano", "violin", "flute"]),
    ("science", "farm animals", ["cow", "sheep", "pig"]),
    ("medical", "organs of the body", ["heart", "lungs", "liver"]),
    ("writing", "vegetables", ["carrot", "leek", "pea"]),
    ("science", "types of clouds", ["cumulus", "stratus", "cirrus"]),
]


def brief(domain, question, point, detail, keywords, ref):
    prompt = f"In at most 20 words, explain {question}."
    rubric = [
        _c("point", f"Explains that {point}", 2),
        _c("detail", f"Mentions {detail}", 1),
    ]
    gold = [
        _c("limit", "Uses at most 20 words", 2, {"type": "word_count", "max": 20}),
        _c(
            "topic",
            f"Names {' or '.join(repr(k) for k in keywords)}",
            1,
            {"type": "contains", "phrases": keywords, "mode": "any"},
        ),
    ]
    return prompt, ref, rubric, gold


BRIEF = [
    (
        "science",
        "why leaves are green",
        "leaves contain chlorophyll, which reflects green light",
        "chlorophyll or light",
        ["chlorophyll", "light"],
        "Leaves hold chlorophyll, which absorbs red and blue light and reflects green.",
    ),
    (
        "science",
        "why the sea is salty",
        "rivers carry dissolved salts from rocks into the sea",
        "rocks, rivers or minerals",
        ["salt", "mineral"],
        "Rivers wash salts and minerals from rocks into the sea, where evaporation concentrates them.",
    ),
    (
        "medical",
        "why we sweat",
        "sweat cools the body as it evaporates from the skin",
        "cooling or body temperature",
        ["cool", "temperature", "heat"],
        "Sweat cools the body: it evaporates from the skin and carries heat away.",
    ),
    (
        "science",
        "why ice floats",
        "ice is less dense than liquid water",
        "density",
        ["dens", "lighter"],
        "Ice is less dense than water because its molecules lock into an open lattice.",
    ),
    (
        "medical",
        "why we need sleep",
        "sleep lets the brain and body recover and store memories",
        "memory or recovery",
        ["brain", "memor", "rest", "recover"],
        "Sleep lets the body repair itself and the brain store memories.",
    ),
    (
        "science",
        "why the Moon has phases",
        "we see different parts of its sunlit half as it orbits Earth",
        "the Moon's orbit or sunlight",
        ["sun", "orbit", "light"],
        "As the Moon orbits Earth we see changing parts of its sunlit half.",
    ),
    (
        "science",
        "why the sky is blue",
        "air scatters blue sunlight more than red",
        "scattering of light",
        ["scatter", "light"],
        "Air molecules scatter blue sunlight more than red, so the sky looks blue.",
    ),
    (
        "medical",
        "why we get thirsty",
        "the brain senses the body losing water and asks for more",
        "water or dehydration",
        ["water", "fluid", "dehydrat"],
        "When the body loses water, the brain senses it and makes us thirsty.",
    ),
    (
        "science",
        "why metal feels cold",
        "metal conducts heat away from the skin quickly",
        "heat conduction",
        ["heat", "conduct"],
        "Metal conducts heat away from your skin quickly, so it feels cold.",
    ),
    (
        "medical",
        "why wounds form scabs",
        "blood clots dry into a scab that protects healing skin",
        "clotting or protection",
        ["clot", "blood", "protect"],
        "Blood clots at a wound and dries into a scab that protects new skin.",
    ),
    (
        "science",
        "why bread rises",
        "yeast makes carbon dioxide gas that gets trapped in the dough",
        "yeast or gas",
        ["yeast", "gas", "carbon dioxide"],
        "Yeast eats sugar and makes carbon dioxide gas that puffs up the dough.",
    ),
    (
        "science",
        "why we have seasons",
        "Earth's tilted axis changes how directly sunlight hits each hemisphere",
        "the tilt of Earth's axis",
        ["tilt", "axis", "sun"],
        "Earth's tilted axis makes each hemisphere lean toward the Sun for part of the year.",
    ),
]


def nocomma(domain, topic, word, ref):
    prompt = f"Describe {topic} in one sentence, without using any commas."
    rubric = [_c("topic", f"Mentions '{word}'", 1, {"type": "contains", "phrases": [word]})]
    gold = [
        _c("topic", f"Mentions '{word}'", 1, {"type": "contains", "phrases": [word]}),
        _c("no_commas", "Uses no commas at all", 2, {"type": "not_contains", "phrases": [","]}),
    ]
    return prompt, ref, rubric, gold


NOCOMMA = [
    ("writing", "a sunny day", "sun", "The warm sun shines on a quiet park full of happy people."),
    ("writing", "a rainy night", "rain", "Cold rain taps on the dark windows all night long."),
    ("science", "the ocean", "ocean", "The ocean is a vast body of salt water that covers most of Earth."),
    ("writing", "a forest", "tree", "A forest is a quiet place where tall trees grow close together."),
    ("writing", "a busy city", "city", "The busy city hums with cars and people from dawn to midnight."),
    ("science", "a thunderstorm", "storm", "A thunderstorm brings dark clouds with loud thunder and bright lightning."),
    ("writing", "a cat", "cat", "The cat sleeps in a warm patch of sunlight on the floor."),
    ("writing", "a winter morning", "snow", "Fresh snow covers the silent street on a cold winter morning."),
    ("writing", "a garden", "flower", "The garden is full of bright flowers and buzzing bees."),
    ("science", "the desert", "sand", "The desert is a dry land of hot sand and very little rain."),
    ("writing", "a river", "water", "The river carries clear water past green fields to the sea."),
    ("writing", "a mountain", "mountain", "The mountain rises high above the valley with snow on its peak."),
]


def answer_tag(domain, question, kind, answer, alts):
    prompt = f"{question} Reply in the form 'ANSWER: <{kind}>'."
    crit = [
        _c("format", "Begins with 'ANSWER:' followed by the answer", 3, {"type": "starts_with", "text": "ANSWER:"}),
        _c("correct", f"Gives the answer {answer}", 1, {"type": "contains", "phrases": [answer, *alts], "mode": "any"}),
    ]
    return prompt, f"ANSWER: {answer}", crit, crit


ANSWER_TAG = [
    ("science", "What is the capital of France?", "city", "Paris", []),
    ("science", "How many legs does a spider have?", "number", "8", ["eight"]),
    ("science", "What is the largest planet in the solar system?", "planet", "Jupiter", []),
    ("medical", "Which organ pumps blood around the body?", "organ", "heart", []),
    ("science", "What gas do plants take in from the air?", "gas", "carbon dioxide", ["CO2"]),
    ("science", "What is the capital of Japan?", "city", "Tokyo", []),
    ("science", "How many days are in a week?", "number", "7", ["seven"]),
    ("medical", "Which organ do we breathe with?", "organ", "lungs", ["lung"]),
    ("science", "What is the capital of Italy?", "city", "Rome", []),
    ("science", "What is the closest star to Earth?", "star", "Sun", []),
    ("science", "How many continents are there?", "number", "7", ["seven"]),
    ("medical", "Which organ do we think with?", "organ", "brain", []),
]


def arithmetic(domain, a, b):
    prompt = f"What is {a} multiplied by {b}? Reply with the number only."
    crit = [_c("product", f"Gives {a * b}", 1, {"type": "contains", "phrases": [str(a * b)]})]
    return prompt, str(a * b), crit, crit


ARITHMETIC = [
    ("science", a, b)
    for a, b in [
        (7391, 58),
        (4827, 93),
        (6154, 77),
        (3968, 46),
        (8273, 65),
        (5619, 84),
        (9142, 37),
        (2786, 59),
        (7053, 68),
        (6437, 92),
        (3851, 74),
        (8926, 43),
    ]
]


def solved(domain, word, ref):
    prompt = f"Write a short sentence that uses the word '{word}'."
    crit = [_c("word", f"Uses the word '{word}'", 1, {"type": "contains", "phrases": [word]})]
    return prompt, ref, crit, crit


SOLVED = [
    ("writing", "sun", "The sun rose over the hills."),
    ("writing", "dog", "My dog loves to run in the park."),
    ("writing", "tree", "A tall tree stood by the road."),
    ("writing", "book", "She read a book before bed."),
    ("writing", "rain", "The rain fell all afternoon."),
    ("writing", "music", "Soft music filled the room."),
    ("writing", "bird", "A small bird sang at dawn."),
    ("writing", "sea", "The sea was calm and blue."),
    ("writing", "house", "Their house has a red door."),
    ("writing", "star", "One bright star shone above us."),
    ("writing", "car", "The car stopped at the light."),
    ("writing", "school", "The children walked to school together."),
]

FAMILIES = {
    "opener": (opener, OPENER, "control", None),
    "bullets": (bullets, BULLETS, "control", None),
    "brief": (brief, BRIEF, "spurious_length", "length_hack"),
    "nocomma": (nocomma, NOCOMMA, "lax_rubric", "uniformly_high"),
    "answer_tag": (answer_tag, ANSWER_TAG, "exploration", "uniformly_low"),
    "arithmetic": (arithmetic, ARITHMETIC, "capability", "uniformly_low"),
    "solved": (solved, SOLVED, "solved", "uniformly_high"),
}


def build() -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {name: [] for name, _ in SPLITS}
    for family, (make, subjects, failure, provokes) in FAMILIES.items():
        assert len(subjects) == sum(n for _, n in SPLITS), family
        i = 0
        for split, n in SPLITS:
            for subject in subjects[i : i + n]:
                domain = subject[0]
                prompt, ref, rubric, gold = make(*subject)
                i += 1
                meta = {"family": family, "failure": failure, "split": split}
                if provokes:
                    meta["provokes"] = provokes
                task = {
                    "id": f"gold-{family}-{i:02d}",
                    "domain": domain,
                    "prompt": prompt,
                    "reference_answer": ref,
                    "rubric": rubric,
                    "gold_rubric": gold,
                    "metadata": meta,
                }
                checked = Task.model_validate(task)
                for crit in checked.gold_rubric or []:
                    if crit.check is not None and crit.check.evaluate(ref) < 1:
                        raise SystemExit(f"{task['id']}: the reference answer fails gold criterion {crit.id}")
                rows[split].append(task)
    return rows


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for split, tasks in build().items():
        with open(OUT / f"{split}.jsonl", "w", encoding="utf-8") as f:
            for t in tasks:
                f.write(json.dumps(t, ensure_ascii=False) + "\n")
        print(f"{split}: {len(tasks)} tasks")


if __name__ == "__main__":
    main()
