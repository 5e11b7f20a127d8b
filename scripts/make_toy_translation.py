"""Generate the toy translation task of the embedded `toy-mt` model: English-like source, an invented target.

The target is made from the source by rules, so every sentence's true word alignment is known:

- word-for-word substitution from a fixed lexicon (``cat`` -> ``mao``);
- local reordering: adjectives follow their noun, in mirrored order (``the big red car`` -> ``auto ruga granda``),
  and an adverb follows its verb (``often sees`` -> ``vidas ofte``);
- one-to-many words: some source words become two target words (``school`` -> ``lerno domo``,
  ``ignores`` -> ``ne vidas``), both sure links;
- a dropped function word: ``the`` has no translation; its gold links to its noun's target words are *possible*
  (``i?j``), as annotators mark function words without a counterpart.

Output under ``--out`` (default ``assets/toy_mt/data``): ``{train,valid,test}.src`` / ``.tgt`` (one sentence a line,
words separated by single spaces) and ``{valid,test}.align`` in Pharaoh format, 0-based ``source-target`` pairs,
``i-j`` sure and ``i?j`` possible. Deterministic for a given ``--seed``.

    python scripts/make_toy_translation.py [--train 30000 --valid 500 --test 200 --seed 0 --out DIR]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

NOUNS = {
    "cat": "mao",
    "dog": "inu",
    "bird": "tori",
    "house": "kaza",
    "tree": "arbo",
    "car": "auto",
    "book": "libro",
    "river": "rivo",
    "city": "urbo",
    "child": "nino",
    "teacher": "majstro",
    "farmer": "kampulo",
    "king": "rego",
    "queen": "regino",
    "horse": "kavalo",
    "fish": "pesko",
    "apple": "pomo",
    "table": "tablo",
    "window": "fenestro",
    "garden": "gardeno",
    "mountain": "monto",
    "road": "vojo",
    "boat": "boato",
    "letter": "letero",
    "friend": "amiko",
    "doctor": "doktoro",
    "song": "kanto",
    "bread": "pano",
    "door": "pordo",
    "lamp": "lampo",
    # one-to-many
    "bicycle": "du rado",
    "airplane": "fluga masino",
    "library": "libro domo",
    "hospital": "malsana domo",
    "school": "lerno domo",
}
ADJECTIVES = {
    "big": "granda",
    "small": "eta",
    "red": "ruga",
    "green": "verda",
    "old": "olda",
    "new": "nova",
    "happy": "felica",
    "sad": "trista",
    "fast": "rapida",
    "slow": "lanta",
    "tall": "alta",
    "dark": "malhela",
    "bright": "hela",
    "quiet": "kvieta",
    "strong": "forta",
    "blue": "blua",
}
VERBS = {
    "sees": "vidas",
    "likes": "satas",
    "finds": "trovas",
    "reads": "legas",
    "eats": "mangas",
    "takes": "prenas",
    "follows": "sekvas",
    "helps": "helpas",
    "visits": "vizitas",
    "builds": "konstruas",
    "paints": "pentras",
    "carries": "portas",
    # one-to-many
    "loves": "tre satas",
    "ignores": "ne vidas",
    "buys": "pagi prenas",
}
ADVERBS = {
    "quickly": "rapide",
    "slowly": "lante",
    "often": "ofte",
    "never": "neniam",
    "always": "ciam",
    "again": "denove",
}
DETERMINERS = {"the": None, "a": "un", "this": "ci", "every": "ciu", "my": "mia"}
PREPOSITIONS = {"in": "en", "on": "sur", "near": "apud", "with": "kun", "under": "sub"}
CONJUNCTION = {"and": "kaj"}


class Builder:
    """Accumulates a sentence pair and its links as words are added."""

    def __init__(self):
        self.src: list[str] = []
        self.tgt: list[str] = []
        self.sure: set[tuple[int, int]] = set()
        self.possible: set[tuple[int, int]] = set()

    def source(self, word: str) -> int:
        self.src.append(word)
        return len(self.src) - 1

    def target(self, translation: str, src_index: int) -> list[int]:
        """Append the (possibly multi-word) translation of source word ``src_index``; returns its target indices."""
        out = []
        for w in translation.split():
            self.tgt.append(w)
            out.append(len(self.tgt) - 1)
            self.sure.add((src_index, out[-1]))
        return out


def noun_phrase(rng: random.Random, b: Builder) -> None:
    det = rng.choice(list(DETERMINERS))
    adjs = rng.sample(list(ADJECTIVES), rng.choice([0, 0, 1, 1, 2]))
    noun = rng.choice(list(NOUNS))
    i_det = b.source(det)
    i_adjs = [b.source(a) for a in adjs]
    i_noun = b.source(noun)
    if DETERMINERS[det] is not None:
        b.target(DETERMINERS[det], i_det)
    noun_t = b.target(NOUNS[noun], i_noun)
    for a, i in reversed(list(zip(adjs, i_adjs))):
        b.target(ADJECTIVES[a], i)
    if DETERMINERS[det] is None:  # dropped article: possible links to its noun's words
        b.possible.update((i_det, j) for j in noun_t)


def clause(rng: random.Random, b: Builder) -> None:
    noun_phrase(rng, b)
    adv = rng.choice(list(ADVERBS)) if rng.random() < 0.3 else None
    verb = rng.choice(list(VERBS))
    i_adv = b.source(adv) if adv else None
    i_verb = b.source(verb)
    b.target(VERBS[verb], i_verb)
    if adv:
        b.target(ADVERBS[adv], i_adv)
    noun_phrase(rng, b)
    if rng.random() < 0.35:
        prep = rng.choice(list(PREPOSITIONS))
        b.target(PREPOSITIONS[prep], b.source(prep))
        noun_phrase(rng, b)


def sentence(rng: random.Random) -> Builder:
    b = Builder()
    clause(rng, b)
    if rng.random() < 0.25:
        b.target(CONJUNCTION["and"], b.source("and"))
        clause(rng, b)
    return b


def pharaoh(b: Builder) -> str:
    links = [f"{i}-{j}" for i, j in sorted(b.sure)]
    links += [f"{i}?{j}" for i, j in sorted(b.possible - b.sure)]
    return " ".join(links)


def vocabulary() -> list[str]:
    """Every word either side can use (the tokenizer's word list), in a fixed order."""
    words: list[str] = []
    for table in (NOUNS, ADJECTIVES, VERBS, ADVERBS, DETERMINERS, PREPOSITIONS, CONJUNCTION):
        for s, t in table.items():
            words.append(s)
            words.extend((t or "").split())
    return list(dict.fromkeys(words))


def generate(n: int, rng: random.Random, seen: set[str]) -> list[Builder]:
    """``n`` distinct pairs whose source is not in ``seen`` (so valid/test never overlap train)."""
    out = []
    while len(out) < n:
        b = sentence(rng)
        key = " ".join(b.src)
        if key in seen:
            continue
        seen.add(key)
        out.append(b)
    return out


def write(split: str, pairs: list[Builder], out: Path, with_align: bool) -> None:
    (out / f"{split}.src").write_text("".join(" ".join(b.src) + "\n" for b in pairs), encoding="utf-8")
    (out / f"{split}.tgt").write_text("".join(" ".join(b.tgt) + "\n" for b in pairs), encoding="utf-8")
    if with_align:
        (out / f"{split}.align").write_text("".join(pharaoh(b) + "\n" for b in pairs), encoding="utf-8")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", type=int, default=30000)
    p.add_argument("--valid", type=int, default=500)
    p.add_argument("--test", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "assets" / "toy_mt" / "data")
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    seen: set[str] = set()
    test = generate(args.test, rng, seen)  # held-out sets first: train never repeats their sources
    valid = generate(args.valid, rng, seen)
    train = generate(args.train, rng, seen)
    args.out.mkdir(parents=True, exist_ok=True)
    write("test", test, args.out, True)
    write("valid", valid, args.out, True)
    write("train", train, args.out, False)
    print(
        f"wrote {args.out}: train {len(train)}, valid {len(valid)}, test {len(test)} pairs; "
        f"vocabulary {len(vocabulary())} words"
    )


if __name__ == "__main__":
    main()
