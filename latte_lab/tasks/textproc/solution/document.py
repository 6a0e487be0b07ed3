"""A text document with word-level accessors."""

from tokenizer import Tokenizer


class Document:
    """A piece of text."""

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"Document text must be a str, not {type(text).__name__}")
        self.text = text
        self._tokenizer = Tokenizer()
        self.metadata = {}

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

    def add_metadata(self, key, value) -> None:
        self.metadata[key] = value

    def get_metadata(self, key, default=None):
        return self.metadata.get(key, default)

    @property
    def sentences(self) -> list[str]:
        return self._tokenizer.tokenize_sentences(self.text)

    @property
    def sentence_count(self) -> int:
        return len(self.sentences)

    @property
    def char_count(self) -> int:
        return len(self.text)

    @property
    def unique_words(self) -> list[str]:
        return list(dict.fromkeys(self.words))

    @property
    def unique_word_count(self) -> int:
        return len(self.unique_words)
