"""A text document with word-level accessors."""

from tokenizer import Tokenizer


class Document:
    """A piece of text."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"Document text must be a str, not {type(text).__name__}")
        self.text = text
        self._tokenizer = Tokenizer()

    @property
    def words(self) -> list[str]:
        """The lowercased word tokens of the text (see Tokenizer.tokenize_words)."""
        return self._tokenizer.tokenize_words(self.text)

    @property
    def word_count(self) -> int:
        return len(self.words)

    def __repr__(self) -> str:
        preview = self.text if len(self.text) <= 30 else self.text[:27] + "..."
        return f"Document({preview!r})"
