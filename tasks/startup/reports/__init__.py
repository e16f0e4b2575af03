"""Research reports: a validated outline (outline.py) made into a .pptx (pptx.py) or a .pdf
(pdf.py). Pure: bytes in memory, no I/O; the job type stores them as artifacts."""
