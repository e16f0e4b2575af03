"""The PDF's fonts: TrueType faces embedded in the document, so a report reads the same in
any viewer and in any script its model wrote. reportlab's built-in Helvetica knows Latin-1
alone: Greek, Cyrillic, CJK, arrows or ☕ came out as black boxes.

The body face is DejaVu Sans where the system has it (Debian's fonts-dejavu-core, which
fontconfig and so Chromium pull in), else Bitstream Vera, which reportlab ships. What the
body face lacks (CJK above all) is drawn, run by run, in the first installed fallback face
that has it (INSTALL says which package brings one: WenQuanYi Zen Hei has Chinese, Japanese
and Korean); a character no face has stays a box.
"""

from __future__ import annotations

import functools
from html import escape
from pathlib import Path

import reportlab
from reportlab.lib.fonts import addMapping
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont

INSTALL = "apt-get install fonts-dejavu-core fonts-wqy-zenhei"
_DEJAVU = Path("/usr/share/fonts/truetype/dejavu")
_VERA = Path(reportlab.__file__).parent / "fonts"
# (regular, bold, italic, bold italic) files of each body family, in order of preference
FAMILIES = (
    (_DEJAVU, ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf",
               "DejaVuSans-BoldOblique.ttf")),
    (_VERA, ("Vera.ttf", "VeraBd.ttf", "VeraIt.ttf", "VeraBI.ttf")),
)
# TrueType outlines only: reportlab cannot embed CFF (OpenType) faces such as Noto CJK.
FALLBACKS = (
    Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc"),
    Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc"),
    Path("/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf"),  # no Hangul
    Path("/usr/share/fonts/truetype/nanum/NanumGothic.ttf"),  # Hangul
)
BODY = "ReportSans"
# What the sample stylesheet names, mapped to the face of ours that takes its place
FACES = {"Helvetica": BODY, "Helvetica-Bold": f"{BODY}-Bold",
         "Helvetica-Oblique": f"{BODY}-Oblique", "Helvetica-BoldOblique": f"{BODY}-BoldOblique"}


@functools.cache
def register() -> tuple[str, ...]:
    """Register the faces once per process: the fallback faces' names, in order."""
    folder, files = next(((d, f) for d, f in FAMILIES if all((d / n).is_file() for n in f)),
                         FAMILIES[-1])
    names = list(FACES.values())
    for name, file in zip(names, files, strict=True):
        pdfmetrics.registerFont(TTFont(name, str(folder / file)))
    for (bold, italic), name in zip(((0, 0), (1, 0), (0, 1), (1, 1)), names, strict=True):
        addMapping(BODY, bold, italic, name)  # <b> and <i> inside a paragraph
    fallbacks = []
    for n, path in enumerate(installed_fallbacks()):
        fallbacks.append(f"ReportFallback{n}")
        pdfmetrics.registerFont(TTFont(fallbacks[-1], str(path)))
    return tuple(fallbacks)


def installed_fallbacks() -> list[Path]:
    return [p for p in FALLBACKS if p.is_file()]


@functools.cache
def _glyphs(font: str) -> frozenset[int]:
    face = pdfmetrics.getFont(font).face  # type: ignore[attr-defined]
    return frozenset(face.charToGlyph)


def markup(text: str, font: str) -> str:
    """`text` as paragraph markup (escaped: model text is not markup), each run of characters
    `font` cannot draw set in the first fallback face that can."""
    chain = (font, *register())
    if all(ord(c) in _glyphs(font) or c.isspace() for c in text):
        return escape(text)
    out: list[str] = []
    run: list[str] = []
    face = font
    for c in text:
        # Spaces stay in the run they are in: a run is cut only where a face must change.
        wants = face if c.isspace() else next(
            (f for f in chain if ord(c) in _glyphs(f)), font)
        if wants != face:
            out.append(_close(run, face, font))
            run, face = [], wants
        run.append(c)
    out.append(_close(run, face, font))
    return "".join(out)


def _close(run: list[str], face: str, body: str) -> str:
    text = escape("".join(run))
    return f'<font name="{face}">{text}</font>' if face != body and text else text
