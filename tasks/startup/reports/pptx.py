"""An outline as a slide deck (python-pptx): title, agenda, a slide per finding with its
bullets and speaker notes (a native column chart when it has figures), then sources."""

from __future__ import annotations

import io

from pptx import Presentation
from pptx.chart.data import CategoryChartData
from pptx.enum.chart import XL_CHART_TYPE
from pptx.presentation import Presentation as PresentationType
from pptx.shapes.placeholder import SlidePlaceholder
from pptx.slide import Slide
from pptx.util import Inches, Pt

from tasks.startup.reports.outline import Finding, Outline

TITLE, TITLE_AND_CONTENT = 0, 1  # the default template's layouts
FIXED_SLIDES = 3  # title, agenda, sources


def build_pptx(outline: Outline, max_slides: int) -> tuple[bytes, int]:
    """The deck's bytes and its number of slides (at most `max_slides`, at least 4)."""
    findings = outline.findings[:max(1, max_slides - FIXED_SLIDES)]
    deck = Presentation()
    deck.slide_width, deck.slide_height = Inches(13.333), Inches(7.5)  # 16:9

    title = deck.slides.add_slide(deck.slide_layouts[TITLE])
    title.shapes.title.text = outline.title
    title.placeholders[1].text = outline.subtitle or outline.summary[:200]

    agenda = deck.slides.add_slide(deck.slide_layouts[TITLE_AND_CONTENT])
    agenda.shapes.title.text = "Agenda"
    _bullets(agenda, [f.title for f in findings])
    agenda.notes_slide.notes_text_frame.text = outline.summary

    for finding in findings:
        _finding_slide(deck, finding)

    sources = deck.slides.add_slide(deck.slide_layouts[TITLE_AND_CONTENT])
    sources.shapes.title.text = "Sources"
    _bullets(sources, outline.sources or ["No external sources: from the project's memory."])

    out = io.BytesIO()
    deck.save(out)
    return out.getvalue(), len(deck.slides)


def _finding_slide(deck: PresentationType, finding: Finding) -> None:
    slide = deck.slides.add_slide(deck.slide_layouts[TITLE_AND_CONTENT])
    slide.shapes.title.text = finding.title
    body = _bullets(slide, finding.bullets)
    if finding.notes:
        slide.notes_slide.notes_text_frame.text = finding.notes
    if finding.figures:
        body.width = Inches(6.2)  # bullets on the left, the chart on the right
        data = CategoryChartData()
        data.categories = [f.label for f in finding.figures]
        data.add_series(finding.title[:40], [f.value for f in finding.figures])
        slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(6.8), Inches(1.6),
                               Inches(6.0), Inches(5.2), data)


def _bullets(slide: Slide, lines: list[str]) -> SlidePlaceholder:
    body = slide.placeholders[1]
    frame = body.text_frame
    frame.text = lines[0]
    for line in lines[1:]:
        frame.add_paragraph().text = line
    for paragraph in frame.paragraphs:
        for run in paragraph.runs:
            run.font.size = Pt(20)
    return body
