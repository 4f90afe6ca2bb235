#!/usr/bin/env python3
"""Makes tests/data/texts/*.txt: English prose for sensitivity, imatrix and held-out
evaluations, four disjoint sets of chapters of "The Rust Programming Language" (MIT OR
Apache-2.0), from the HTML copy rustup installs with the toolchain's docs. Only the
paragraphs (<p>) are kept: no code, no lists, no headings. The outputs are checked in;
this script says where they came from and remakes them:
    scripts/make-texts.py [BOOK_HTML_DIR]"""
import html.parser, pathlib, re, subprocess, sys

SETS = {  # name: chapter prefixes, each set disjoint from the others
    "calibration": ["ch01", "ch02", "ch03", "ch04", "ch05"],
    "sensitivity": ["ch08", "ch09", "ch10"],
    "repeat": ["ch13", "ch15"],
    "heldout": ["ch16", "ch11", "ch14"],
}
LIMIT = 48_000  # bytes per text: about 10k SmolLM2 tokens


class Paragraphs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.depth, self.buf, self.out = 0, [], []

    def handle_starttag(self, tag, attrs):
        if tag == "p":
            self.depth, self.buf = 1, []
        elif self.depth and tag in ("pre", "code", "script", "style"):
            self.depth += 1 if tag in ("pre", "script", "style") else 0

    def handle_endtag(self, tag):
        if tag == "p" and self.depth:
            text = re.sub(r"\s+", " ", "".join(self.buf)).strip()
            if len(text) > 80:
                self.out.append(text)
            self.depth = 0

    def handle_data(self, data):
        if self.depth == 1:
            self.buf.append(data)


def main():
    if len(sys.argv) > 1:
        book = pathlib.Path(sys.argv[1])
    else:
        sysroot = subprocess.check_output(["rustc", "--print", "sysroot"], text=True).strip()
        book = pathlib.Path(sysroot) / "share/doc/rust/html/book"
    out_dir = pathlib.Path(__file__).resolve().parent.parent / "tests/data/texts"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, prefixes in SETS.items():
        paras = []
        for f in sorted(book.glob("ch*.html")):
            if any(f.name.startswith(p + "-") for p in prefixes):
                p = Paragraphs()
                p.feed(f.read_text(encoding="utf-8"))
                paras += p.out
        text, n = "", 0
        for para in paras:
            if n + len(para) + 2 > LIMIT:
                break
            text += para + "\n\n"
            n += len(para) + 2
        (out_dir / f"{name}.txt").write_text(text, encoding="utf-8")
        print(f"{name}.txt: {len(text)} bytes from {', '.join(prefixes)}")


main()
