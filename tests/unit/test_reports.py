"""Reports built from an outline, opened again with python-pptx and pypdf: what a reader
would see is there (slides, notes, a native chart, page numbers, the table)."""

from __future__ import annotations

import io

import pytest
from pptx import Presentation
from pypdf import PdfReader

from tasks.engine.errors import PermanentError
from tasks.startup.reports.outline import Figure, Finding, Outline, parse_outline
from tasks.startup.reports.pdf import build_pdf
from tasks.startup.reports.pptx import build_pptx

OUTLINE = Outline(
    title="Tide-aware scheduling", subtitle="Harbour operations, 2026",
    summary="Harbour masters plan around tides by hand; errors cost a shift.",
    findings=[
        Finding(title="Planning is manual", bullets=["Spreadsheets", "Phone calls"],
                notes="Five of five interviewees plan by hand."),
        Finding(title="Errors are costly", bullets=["A missed tide costs a shift"],
                figures=[Figure(label="Ports asked", value=5), Figure(label="Would pay", value=3)]),
        Finding(title="Willingness to pay", bullets=["3 of 5 would pay monthly"]),
        Finding(title="Competition", bullets=["None tide-aware"]),
    ],
    sources=["https://example.org/tides", "Interviews, November 2026"])


def test_the_deck_has_title_agenda_a_slide_per_finding_notes_a_chart_and_sources() -> None:
    data, slides = build_pptx(OUTLINE, max_slides=8)
    deck = Presentation(io.BytesIO(data))
    titles = [s.shapes.title.text for s in deck.slides]
    assert slides == len(deck.slides) == 7
    assert titles == ["Tide-aware scheduling", "Agenda", "Planning is manual",
                      "Errors are costly", "Willingness to pay", "Competition", "Sources"]
    assert deck.slides[2].notes_slide.notes_text_frame.text.startswith("Five of five")
    charts = [sh for sh in deck.slides[3].shapes if sh.has_chart]
    assert len(charts) == 1
    assert list(charts[0].chart.plots[0].categories) == ["Ports asked", "Would pay"]
    assert "https://example.org/tides" in [p.text for p in
                                            deck.slides[-1].placeholders[1].text_frame.paragraphs]


def test_max_slides_bounds_the_deck() -> None:
    _, slides = build_pptx(OUTLINE, max_slides=5)
    assert slides == 5  # title, agenda, two findings, sources


def test_the_pdf_has_a_title_page_sections_a_table_sources_and_page_numbers() -> None:
    data, pages = build_pdf(OUTLINE)
    reader = PdfReader(io.BytesIO(data))
    assert pages == len(reader.pages) >= 2
    text = "\n".join(page.extract_text() for page in reader.pages)
    assert "Tide-aware scheduling" in reader.pages[0].extract_text()
    for expected in ("1. Planning is manual", "4. Competition", "Figures", "Ports asked",
                     "Sources", "Interviews, November 2026"):
        assert expected in text, expected
    for n, page in enumerate(reader.pages, start=1):
        assert f"Page {n}" in page.extract_text()
    assert reader.metadata.title == "Tide-aware scheduling"


def test_model_text_is_not_markup_in_the_pdf() -> None:
    tricky = OUTLINE.model_copy(update={"summary": "<b>bold</b> & <font size=90>x</font>"})
    data, _ = build_pdf(tricky)
    assert "<b>bold</b> & <font size=90>x</font>" in PdfReader(io.BytesIO(data)).pages[0] \
        .extract_text()


def test_an_outline_that_does_not_fit_says_where() -> None:
    with pytest.raises(PermanentError, match="findings"):
        parse_outline('{"title": "t", "summary": "s", "findings": []}')
    with pytest.raises(PermanentError, match="not JSON"):
        parse_outline("no outline here")
    assert parse_outline("Sure! " + OUTLINE.model_dump_json() + " Hope it helps.") == OUTLINE


def test_the_pdf_first_page_renders_to_a_png_thumbnail() -> None:
    from PIL import Image

    from tasks.startup.reports.preview import first_page_png

    data, _ = build_pdf(OUTLINE)
    png = first_page_png(data, width=300)
    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.width == 300
    assert image.height > image.width  # A4, portrait
    assert image.convert("L").getextrema()[0] < 100  # the title's ink, not a blank page


WORLD = Outline(
    title="Café crème ☕ — Ελληνικά, Кириллица", subtitle="日本語の調査 · 中文摘要 · 한국어 요약",
    summary="Ünïcödé résumé: naïve façade, Straße, Łódź, İstanbul, ½ ≤ ∞ → ✓.",
    findings=[Finding(title="市場調査の結果", bullets=["東京の港湾管理者五人に聞いた",
                                                  "Ещё три порта ждут пилот"],
                      notes="Σημειώσεις: τρεις από πέντε θα πλήρωναν."),
              Finding(title="Long words", bullets=["潮" * 400],
                      figures=[Figure(label="港湾の数", value=5)])],
    sources=["https://example.org/潮汐"])


def test_a_pdf_in_any_script_keeps_its_text_where_helvetica_drew_black_boxes() -> None:
    from tasks.startup.reports import fonts
    assert fonts.installed_fallbacks(), f"no CJK font: {fonts.INSTALL}"
    data, _ = build_pdf(WORLD)
    reader = PdfReader(io.BytesIO(data))
    text = "\n".join(page.extract_text() for page in reader.pages)
    for expected in ("Café crème ☕", "Ελληνικά, Кириллица", "日本語の調査", "中文摘要",
                     "한국어", "Straße, Łódź, İstanbul", "≤ ∞ → ✓", "市場調査の結果",
                     "東京の港湾管理者五人に聞いた", "τρεις από πέντε", "https://example.org/潮汐",
                     "港湾の数"):
        assert expected in text.replace("\n", ""), expected
    # Every font is embedded: the reader needs none of its own
    names = {str(f["/BaseFont"]) for page in reader.pages
             for f in (page["/Resources"].get("/Font") or {}).values()}
    assert names and not {n for n in names if "Helvetica" in n}, names


def test_a_line_of_cjk_without_spaces_wraps_inside_the_page() -> None:
    import pypdfium2

    data, _ = build_pdf(WORLD)
    doc = pypdfium2.PdfDocument(data)
    try:
        for page in doc:
            width, texts = page.get_width(), page.get_textpage()
            for i in range(texts.count_chars()):
                left, _, right, _ = texts.get_charbox(i)
                assert left >= 0 and right <= width, (i, left, right, width)
    finally:
        doc.close()
