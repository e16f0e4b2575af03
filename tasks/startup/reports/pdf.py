"""An outline as a PDF (reportlab): a title page, a section per finding, a table of the
findings' figures, the sources, and page numbers on every page."""

from __future__ import annotations

import io

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    ListFlowable,
    ListItem,
    PageBreak,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from tasks.startup.reports import fonts
from tasks.startup.reports.outline import Outline


def build_pdf(outline: Outline) -> tuple[bytes, int]:
    """The document's bytes and its number of pages."""
    fonts.register()
    styles = getSampleStyleSheet()
    for style in styles.byName.values():
        style.fontName = fonts.FACES.get(getattr(style, "fontName", ""), fonts.BODY)
        # CJK has no spaces to break at: a line of it would run off the page
        style.wordWrap = "CJK"
    pages = {"n": 0}

    def number(canvas: Canvas, doc: SimpleDocTemplate) -> None:
        pages["n"] = doc.page
        canvas.setFont(fonts.BODY, 9)
        canvas.drawRightString(A4[0] - 2 * cm, 1.2 * cm, f"Page {doc.page}")

    def p(text: str, style: str) -> Paragraph:
        return Paragraph(fonts.markup(text, styles[style].fontName), styles[style])

    story = [Spacer(1, 6 * cm), p(outline.title, "Title")]
    if outline.subtitle:
        story.append(p(outline.subtitle, "Heading3"))
    story += [Spacer(1, 1 * cm), p(outline.summary, "BodyText"), PageBreak()]
    for i, finding in enumerate(outline.findings, start=1):
        story.append(p(f"{i}. {finding.title}", "Heading2"))
        story.append(ListFlowable([ListItem(p(b, "BodyText")) for b in finding.bullets],
                                  bulletType="bullet", bulletFontName=fonts.BODY))
        if finding.notes:
            story.append(p(finding.notes, "Italic"))
        story.append(Spacer(1, 0.5 * cm))
    # Paragraphs, not bare strings: a cell's text needs the fallback faces too
    figures = [[p(f.title[:50], "BodyText"), p(fig.label, "BodyText"), f"{fig.value:g}"]
               for f in outline.findings for fig in f.figures] or [["—", "—", "—"]]
    table = Table([["Finding", "Figure", "Value"], *figures], repeatRows=1,
                  colWidths=[8 * cm, 5 * cm, 3 * cm])
    table.setStyle(TableStyle([
        ("FONT", (0, 0), (-1, -1), fonts.BODY),
        ("FONT", (0, 0), (-1, 0), fonts.FACES["Helvetica-Bold"]),
        ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#1f3a5f")),
        ("TEXTCOLOR", (0, 0), (-1, 0), colors.white),
        ("GRID", (0, 0), (-1, -1), 0.5, colors.grey),
        ("ALIGN", (2, 1), (2, -1), "RIGHT"),
    ]))
    story += [p("Figures", "Heading2"), table, Spacer(1, 0.5 * cm), p("Sources", "Heading2")]
    story += [p(s, "BodyText") for s in outline.sources] or [
        p("No external sources: from the project's memory.", "BodyText")]

    out = io.BytesIO()
    doc = SimpleDocTemplate(out, pagesize=A4, title=outline.title, author="Switchyard",
                            initialFontName=fonts.BODY)
    doc.build(story, onFirstPage=number, onLaterPages=number)
    return out.getvalue(), pages["n"]
