"""A command's output held in bounded memory: its head and tail, with the cut counted."""

from __future__ import annotations


class OutputCap:
    """Keeps the head (40 %) and tail (50 %) of a stream in bounded memory."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head_max = limit * 4 // 10
        self.tail_max = limit * 5 // 10
        self.head = ""
        self.tail = ""
        self.total = 0

    def feed(self, text: str) -> None:
        self.total += len(text)
        if len(self.head) < self.head_max:
            room = self.head_max - len(self.head)
            self.head, text = self.head + text[:room], text[room:]
        self.tail += text
        if len(self.tail) > 2 * self.tail_max:  # trim in batches, not on every chunk
            self.tail = self.tail[-self.tail_max:]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        # NUL cannot be stored (a JSON step output, a text column): shown as \0.
        return self._text().replace("\x00", "\\0")

    def _text(self) -> str:
        if not self.truncated:
            return self.head + self.tail
        tail = self.tail[-self.tail_max:] if self.tail_max else ""
        cut = self.total - len(self.head) - len(tail)
        return f"{self.head}\n[... {cut} characters cut ...]\n{tail}"
