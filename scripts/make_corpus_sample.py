"""Rebuild assets/corpus/ from Debian's `miscfiles` package (US Declaration of Independence and Constitution).

    cd /tmp && apt-get download miscfiles && dpkg-deb -x miscfiles_*.deb miscfiles
    python scripts/make_corpus_sample.py /tmp/miscfiles/usr/share/state assets/corpus

One sentence per line (headings dropped, whitespace joined); sentences of more than MAX_WORDS words are
left out so that the sample runs quickly. The pairs file holds consecutive sentences of the Declaration
separated by a tab (sentence-pair input, like the [CLS] A [SEP] B [SEP] data of Kobayashi et al. 2020).
"""

import gzip
import re
import sys
from pathlib import Path

MAX_WORDS = 60


def sentences(text: str) -> list[str]:
    paras = [re.sub(r"\s+", " ", p).strip() for p in re.split(r"\n\s*\n", text)]
    out = []
    for p in paras:
        if not p or len(p.split()) < 4 or not re.search(r"[.?!:;]$", p):  # headings, signatures, titles
            continue
        for s in re.split(r"(?<=[.?!])\s+(?=[A-Z\"'])", p):
            s = s.strip()
            if 4 <= len(s.split()) <= MAX_WORDS and not re.match(r"^(Article|Section|Amendment)\b", s):
                out.append(s)
    return out


def main(src: str, dst: str) -> None:
    src_dir, dst_dir = Path(src), Path(dst)
    dst_dir.mkdir(parents=True, exist_ok=True)
    decl = sentences(gzip.open(src_dir / "us-declaration.gz", "rt", encoding="utf-8").read())
    const = sentences(gzip.open(src_dir / "us-constitution.gz", "rt", encoding="utf-8").read())
    (dst_dir / "us_founding_documents.txt").write_text("\n".join(decl + const) + "\n", encoding="utf-8")
    pairs = [f"{a}\t{b}" for a, b in zip(decl[0::2], decl[1::2]) if len((a + b).split()) <= MAX_WORDS]
    (dst_dir / "us_declaration_pairs.tsv").write_text("\n".join(pairs) + "\n", encoding="utf-8")
    print(f"{len(decl)} + {len(const)} sentences, {len(pairs)} pairs")


if __name__ == "__main__":
    main(*sys.argv[1:3])
