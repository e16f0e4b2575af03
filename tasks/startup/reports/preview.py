"""A PDF's first page as a PNG (PDFium, through pypdfium2): the report's thumbnail."""

from __future__ import annotations

import io

import pypdfium2

WIDTH = 600  # px: a card's thumbnail, sharp enough to read the title


def first_page_png(pdf: bytes, width: int = WIDTH) -> bytes:
    doc = pypdfium2.PdfDocument(pdf)
    try:
        page = doc[0]
        image = page.render(scale=width / page.get_width()).to_pil()
        out = io.BytesIO()
        image.save(out, "PNG", optimize=True)
        return out.getvalue()
    finally:
        doc.close()
